"""BIG-Bench Hard's 27 tasks by the kind of target they have (the files are in tests/data/bbh/)."""

BBH_KINDS = {
    "choice": ["date_understanding", "disambiguation_qa", "geometric_shapes", "hyperbaton",
               "logical_deduction_five_objects", "logical_deduction_seven_objects",
               "logical_deduction_three_objects", "movie_recommendation", "penguins_in_a_table",
               "reasoning_about_colored_objects", "ruin_names", "salient_translation_error_detection", "snarks",
               "temporal_sequences", "tracking_shuffled_objects_five_objects",
               "tracking_shuffled_objects_seven_objects", "tracking_shuffled_objects_three_objects"],
    "numeric": ["multistep_arithmetic_two", "object_counting"],
    "labels": ["boolean_expressions", "causal_judgement", "formal_fallacies", "navigate", "sports_understanding",
               "web_of_lies"],
    "text": ["dyck_languages", "word_sorting"],
}
