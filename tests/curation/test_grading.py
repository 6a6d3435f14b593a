import json
import signal
import threading
from itertools import islice
from pathlib import Path

import pytest

from backend.curation.grading import (
    GRADING_POLICIES,
    TASK_TYPES,
    describe_answers,
    detect_task_type,
    extract_answer,
    is_correct,
    last_boxed,
    parse_gold,
    parse_options,
    ungradeable_answers,
)
from tests.bbh_tasks import BBH_KINDS
from tests.conftest import DATASETS


def read_jsonl_field(path: Path, field: str, limit: int = 300) -> list:
    with path.open() as lines:
        return [json.loads(line)[field] for line in islice(lines, limit)]


def test_task_types_are_the_four_design_types():
    assert TASK_TYPES == ("numeric", "math", "choice", "exact")


# --- gold answers ---------------------------------------------------------------------------------


def test_gsm8k_gold_is_the_number_after_the_hashes():
    first = read_jsonl_field(DATASETS / "gsm8k" / "test.jsonl", "answer", limit=1)[0]
    assert parse_gold(first, "numeric") == "18"
    assert parse_gold("She pays 12 * 100 = <<12*100=1200>>1200\n#### 1,234", "numeric") == "1234"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("3.50", "3.5"),
        ("-2", "-2"),
        ("1,000", "1000"),
        ("$5", "5"),
        ("5.0", "5"),
        ("0.25", "0.25"),
        ("3/4", "0.75"),
    ],
)
def test_numeric_gold_is_normalised(answer, expected):
    assert parse_gold(answer, "numeric") == expected


@pytest.mark.parametrize("answer", ["x + 1", "twelve", "", "1, 2, 3"])
def test_numeric_gold_rejects_non_numbers(answer):
    assert parse_gold(answer, "numeric") is None


def test_choice_gold_accepts_parenthesised_or_bare_letters():
    assert parse_gold("(B)", "choice") == "B"
    assert parse_gold("G", "choice") == "G"
    assert parse_gold(" (c) ", "choice") == "C"
    assert parse_gold("(R)", "choice") == "R"  # BBH reasoning_about_colored_objects has 18 options
    assert parse_gold("(AB)", "choice") is None
    assert parse_gold("Ulysses", "choice") is None


def test_math_gold_strips_dollars_and_box_but_keeps_latex():
    assert parse_gold("$\\frac{1}{2}$", "math") == "\\frac{1}{2}"
    assert parse_gold("\\boxed{\\sqrt{2}}", "math") == "\\sqrt{2}"
    assert parse_gold("\\left( 3, \\frac{\\pi}{2} \\right)", "math") == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert parse_gold("   ", "math") is None


def test_exact_gold_is_lowercased_collapsed_and_trimmed():
    assert parse_gold("  The   Blue Whale. ", "exact") == "the blue whale"
    assert parse_gold("-5", "exact") == "-5"
    assert parse_gold("...", "exact") is None
    assert extract_answer("\\boxed{\\} ] )}", "exact") == "} ] )"  # a brace in a box is escaped
    assert extract_answer("\\boxed{\\} ] )}", "exact", policy="strict") == "} ] )"


def test_unknown_task_type_is_rejected_with_the_allowed_names():
    with pytest.raises(ValueError, match="numeric, math, choice, exact"):
        parse_gold("1", "number")


# --- extraction -----------------------------------------------------------------------------------


def test_last_boxed_handles_nested_braces_and_skips_a_truncated_box():
    assert last_boxed("so \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert last_boxed("first \\boxed{3}, then \\boxed{5}") == "5"
    assert last_boxed("\\boxed{4} and finally \\boxed{\\frac{3}{") == "4"
    assert last_boxed("no box here") is None


def test_numeric_extraction_prefers_the_box_then_the_last_number():
    completion = "Janet sells 16 - 3 - 4 = 9 eggs, 9 * 2 = 18 dollars, so the answer is \\boxed{18}. Check: 2"
    assert extract_answer(completion, "numeric") == "18"
    assert extract_answer("She earns $1,234.50 in total.", "numeric") == "1234.5"
    assert extract_answer("5-3=2", "numeric") == "2"
    assert extract_answer("I do not know.", "numeric") is None


def test_choice_extraction_prefers_the_box_then_the_last_letter():
    assert extract_answer("(A) is wrong, (C) too, so the answer is (B).", "choice") == "B"
    assert extract_answer("Bob ends with \\boxed{\\text{(C)}} not (A)", "choice") == "C"
    assert extract_answer("\\boxed{A}", "choice") == "A"
    assert extract_answer("Bob has the ball.", "choice") is None


def test_exact_extraction_takes_the_last_line_without_an_answer_prefix():
    completion = "Let me think.\nThe capital is in France.\n\nThe answer is: Paris.\n"
    assert extract_answer(completion, "exact") == "paris"
    assert extract_answer("\\boxed{\\text{Blue Whale}}", "exact") == "blue whale"
    assert extract_answer("   \n  ", "exact") is None


# --- correctness ----------------------------------------------------------------------------------

GSM8K_GOLD = (
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips.\n#### 72"
)


def test_gsm8k_boxed_completion_is_graded_against_the_hash_gold():
    gold = parse_gold(GSM8K_GOLD, "numeric")
    right = extract_answer("In May she sold 24, 48 + 24 = 72, so the answer is \\boxed{72}.", "numeric")
    wrong = extract_answer("She sold 72 in total... no wait, \\boxed{7}", "numeric")
    assert is_correct(right, gold, "numeric")
    assert not is_correct(wrong, gold, "numeric")
    assert is_correct(right, GSM8K_GOLD, "numeric")  # raw gold works too


def test_numeric_equality_is_numeric_with_a_tolerance_for_non_integers():
    assert is_correct("3.50", "3.5", "numeric")
    assert is_correct("$1,000", "1000.0", "numeric")
    assert is_correct("0.3333333", "1/3", "numeric")
    assert not is_correct("0.51", "0.5", "numeric")
    assert not is_correct("-18", "18", "numeric")
    assert not is_correct(None, "18", "numeric")
    assert not is_correct("eighteen", "18", "numeric")


def test_math_nested_box_matches_an_equivalent_latex_gold():
    extracted = extract_answer("Half of the area: \\boxed{\\frac{1}{2}}", "math")
    assert extracted == "\\frac{1}{2}"
    assert is_correct(extracted, "\\frac12", "math")
    assert is_correct("0.5", "\\frac12", "math")
    assert is_correct("2\\sqrt{2}", "\\sqrt{8}", "math")
    assert is_correct("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\pi/2)", "math")
    assert not is_correct("\\frac{1}{3}", "\\frac12", "math")
    assert not is_correct("9", "10", "math")


def test_math_grading_never_raises_on_garbage():
    for junk in ["\\frac{", "}}}{{{", "\\sqrt[", "x" * 5000, "$$", "\\boxed{}"]:
        assert is_correct(junk, "\\frac{1}{2}", "math") is False


def test_math_grading_works_inside_a_worker_thread():
    results = []
    worker = threading.Thread(
        target=lambda: results.extend(
            [is_correct("(x+1)^2", "x^2+2x+1", "math"), is_correct("x^2+1", "x^2+2x+1", "math")]
        )
    )
    worker.start()
    worker.join(timeout=60)
    assert results == [True, False]


def test_math_grading_leaves_a_pending_alarm_alone():
    previous_handler = signal.signal(signal.SIGALRM, lambda *_: None)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, 300)
    try:
        assert is_correct("3\\sqrt{3}", "\\sqrt{27}", "math")
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 200  # math-verify did not cancel it
    finally:
        signal.setitimer(signal.ITIMER_REAL, *previous_timer)
        signal.signal(signal.SIGALRM, previous_handler)


def test_choice_and_exact_correctness():
    assert is_correct(extract_answer("So Bob has (B).", "choice"), "(B)", "choice")
    assert not is_correct("A", "(B)", "choice")
    assert is_correct("(B)", "B", "choice")
    assert is_correct("paris", "Paris.", "exact")
    assert not is_correct("-5", "5", "exact")


# --- pools ----------------------------------------------------------------------------------------


def test_detect_task_type_on_real_datasets():
    gsm8k = read_jsonl_field(DATASETS / "gsm8k" / "test.jsonl", "answer")
    math500 = read_jsonl_field(DATASETS / "math" / "test.jsonl", "answer")
    aime = read_jsonl_field(DATASETS / "aime" / "aime_2025.jsonl", "answer")
    bbh = json.loads((DATASETS / "bbh" / "tracking_shuffled_objects_three_objects.json").read_text())
    assert detect_task_type(gsm8k) == "numeric"
    assert detect_task_type(str(answer) for answer in aime) == "numeric"
    assert detect_task_type(math500) == "math"
    assert detect_task_type(example["target"] for example in bbh["examples"]) == "choice"


def test_detect_task_type_falls_back_to_exact():
    assert detect_task_type(["Paris", "blue whale", "1969", "Ada Lovelace"]) == "exact"
    assert detect_task_type(["", "  "]) == "exact"
    # a few odd answers do not stop a numeric pool from being numeric, many do
    assert detect_task_type([str(i) for i in range(99)] + ["n/a"]) == "numeric"
    assert detect_task_type([str(i) for i in range(80)] + ["red"] * 20) == "exact"


def test_every_real_gold_answer_is_gradeable_under_its_detected_type():
    gsm8k = read_jsonl_field(DATASETS / "gsm8k" / "test.jsonl", "answer")
    math500 = read_jsonl_field(DATASETS / "math" / "test.jsonl", "answer")
    assert ungradeable_answers(gsm8k, "numeric") == (0, [])
    assert ungradeable_answers(math500, "math") == (0, [])


def test_ungradeable_answers_counts_and_shows_up_to_five():
    answers = ["12", "abc", "#### 5", "x^2", None] + [f"word{i}" for i in range(10)]
    count, examples = ungradeable_answers(answers, "numeric")
    assert count == 13
    assert examples == ["abc", "x^2", "", "word0", "word1"]


# --- grading policies and the defects of issue 7 -----------------------------------------------------

BALLS = ("Alice, Bob, and Claire are playing a game. At the start of the game, they are each holding a ball: "
         "Alice has a pink ball, Bob has a white ball, and Claire has a red ball.\n"
         "At the end of the game, Bob has the\nOptions:\n(A) pink ball\n(B) white ball\n(C) red ball")


def test_grading_policies_are_strict_and_lenient():
    assert GRADING_POLICIES == ("strict", "lenient")
    with pytest.raises(ValueError, match="strict, lenient"):
        extract_answer("\\boxed{1}", "numeric", policy="paper")
    with pytest.raises(ValueError, match="strict, lenient"):
        is_correct("1", "1", "numeric", policy="loose")


@pytest.mark.parametrize("policy", GRADING_POLICIES)
def test_latex_thousands_separator_reads_as_the_whole_number(policy):
    assert extract_answer("The total is \\boxed{1{,}000}.", "numeric", policy=policy) == "1000"
    assert extract_answer("The total is \\boxed{\\$12{,}345{,}678}.", "numeric", policy=policy) == "12345678"
    assert is_correct(extract_answer("\\boxed{1{,}000}", "numeric", policy=policy), "#### 1000", "numeric")


def test_latex_thousands_separator_in_unboxed_text_is_one_number():
    assert extract_answer("So she pays 1{,}250 dollars in all.", "numeric") == "1250"


@pytest.mark.parametrize("policy", GRADING_POLICIES)
def test_integers_must_match_exactly(policy):
    assert not is_correct("191,999,900", "192000000", "numeric", policy=policy)
    assert not is_correct("191999999.9", "192000000", "numeric", policy=policy)
    assert not is_correct("1000000000001", "1000000000000", "numeric", policy=policy)
    assert not is_correct("191999900", "192000000", "math", policy=policy)
    assert is_correct("192,000,000.00", "192000000", "numeric", policy=policy)
    assert is_correct("0.3333333", "1/3", "numeric", policy=policy)  # a non-integer gold keeps a tolerance


def test_options_are_parsed_from_a_bbh_prompt():
    assert parse_options(BALLS) == {"A": "pink ball", "B": "white ball", "C": "red ball"}
    assert parse_options("What is 2 + 2?") == {}
    colored = json.loads((DATASETS / "bbh" / "reasoning_about_colored_objects.json").read_text())
    letters = [list(parse_options(e["input"])) for e in colored["examples"]]
    assert max(max(found) for found in letters) == "R"  # BBH options go past (G)
    assert all(parse_gold(e["target"], "choice") in parse_options(e["input"]) for e in colored["examples"])


def test_boxed_option_text_counts_as_its_letter_when_the_options_are_known():
    options = parse_options(BALLS)
    completion = "Alice and Bob swap, then Bob and Claire swap... (C) no. Bob ends with \\boxed{white ball}."
    assert extract_answer(completion, "choice", options=options) == "B"
    assert is_correct(extract_answer(completion, "choice", options=options), "(B)", "choice")
    assert extract_answer("\\boxed{\\text{Pink Ball.}}", "choice", options=options) == "A"
    assert is_correct("red ball", "(C)", "choice", options=options)
    assert not is_correct("red ball", "(A)", "choice", options=options)
    # unknown text, or options unknown: not a letter
    assert extract_answer("\\boxed{green ball}", "choice", options=options) is None
    assert extract_answer("\\boxed{white ball}", "choice") is None
    # strict: the paper's exact match, the box must hold the letter
    assert extract_answer(completion, "choice", policy="strict", options=options) is None
    assert not is_correct("red ball", "(C)", "choice", policy="strict", options=options)
    assert extract_answer("\\boxed{(B)}", "choice", policy="strict", options=options) == "B"


def test_an_unboxed_answer_given_as_option_text_counts_when_the_options_are_known():
    options = parse_options(BALLS)
    assert extract_answer("Bob swapped twice.\nSo the answer is red ball.", "choice", options=options) == "C"
    assert extract_answer("Bob swapped twice.\nSo the answer is red ball.", "choice") is None


def test_the_final_stated_choice_wins():
    assert extract_answer("It's A (F) ... the correct choice is A", "choice") == "A"
    assert extract_answer("Maybe (B)? No: the answer is C.", "choice") == "C"
    # letters that are not options do not count when the options are known
    options = parse_options(BALLS)
    assert extract_answer("so the answer is (B), as in (F) above", "choice", options=options) == "B"


def test_strict_reads_only_the_last_box():
    unboxed = "Janet sells 16 - 3 - 4 = 9 eggs at $2: she makes 18 dollars."
    assert extract_answer(unboxed, "numeric") == "18"
    assert extract_answer(unboxed, "numeric", policy="strict") is None
    assert extract_answer("\\boxed{17}, no: \\boxed{18}", "numeric", policy="strict") == "18"
    assert extract_answer("\\boxed{18 dollars}", "numeric") == "18"
    assert extract_answer("\\boxed{18 dollars}", "numeric", policy="strict") is None
    assert extract_answer("So the answer is (B).", "choice", policy="strict") is None
    assert extract_answer("The answer is: Paris.", "exact", policy="strict") is None
    assert extract_answer("\\boxed{Paris}", "exact", policy="strict") == "paris"
    assert extract_answer("x = 1/2", "math", policy="strict") is None
    assert extract_answer("x = \\boxed{\\frac{1}{2}}", "math", policy="strict") == "\\frac{1}{2}"


def test_a_label_after_answer_is_on_the_last_line_is_read():
    completion = "Fidel lies. Jerry says Fidel tells the truth, so Jerry lies. So the answer is No."
    assert extract_answer(completion, "exact") == "no"
    assert is_correct(extract_answer(completion, "exact"), "No", "exact")
    assert extract_answer("valid", "exact") == "valid"


def test_a_dyck_closing_sequence_is_an_exact_answer():
    assert parse_gold("] ] )", "exact") == "] ] )"
    assert extract_answer("We close them in order. So the answer is ] ] ).", "exact") == "] ] )"
    assert is_correct(extract_answer("\\boxed{> )}", "exact"), ") >", "exact") is False
    assert is_correct(extract_answer("\\boxed{) >}", "exact"), ") >", "exact")
    assert parse_gold("...", "exact") is None
    assert extract_answer("\\boxed{\\} ] )}", "exact") == "} ] )"  # a brace in a box is escaped
    assert extract_answer("\\boxed{\\} ] )}", "exact", policy="strict") == "} ] )"




def bbh_targets(task: str) -> list[str]:
    return [e["target"] for e in json.loads((DATASETS / "bbh" / f"{task}.json").read_text())["examples"]]


def test_every_bbh_task_is_in_the_test_data():
    tasks = sorted(path.stem for path in (DATASETS / "bbh").glob("*.json"))
    assert tasks == sorted(task for kind in BBH_KINDS.values() for task in kind)
    assert len(tasks) == 27


@pytest.mark.parametrize(("kind", "task"), [(kind, task) for kind, tasks in BBH_KINDS.items() for task in tasks])
def test_bbh_task_types_are_detected_from_the_targets(kind, task):
    targets = bbh_targets(task)
    expected = {"choice": "choice", "numeric": "numeric", "labels": "exact", "text": "exact"}[kind]
    assert detect_task_type(targets) == expected
    assert ungradeable_answers(targets, expected) == (0, [])
    reason = describe_answers(targets, expected)
    assert ("labels" in reason) == (kind == "labels")


def test_describe_answers_says_what_the_detection_saw():
    assert describe_answers(["(A)", "(C)", "(B)"], "choice") == "3 of 3 answers are option letters (A) to (C)"
    assert describe_answers(["-50", "7", "n/a"], "numeric") == "2 of 3 answers are numbers"
    assert describe_answers(["True", "False"], "exact").startswith("the answers are the labels False/True")
    assert describe_answers(["] ) }", "abc def"], "exact").startswith("the answers are free text")


def test_a_few_broken_targets_do_not_hide_a_choice_pool():
    # BBH's own movie_recommendation has one target that is an option's text split at a comma.
    assert detect_task_type(["(A)"] * 249 + ["Monsters, Inc"]) == "choice"
    assert detect_task_type(["(A)"] * 9 + ["Monsters, Inc"]) == "exact"
