"""Labeling file formats: exports annotators can load, and their answers read back from each tool's export.

The export structures below follow the tools' documented formats: Label Studio's "JSON format of
annotated tasks" (labelstud.io/guide/export) and label-studio-converter's JSON-MIN, Argilla 2.x's
``Record.to_dict()`` / ``to_list(flatten=True)`` (the shapes argilla 2.8.0 writes).
"""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from backend.labels.formats import (
    ARGILLA_DATASET_PATH,
    ARGILLA_RECORDS_PATH,
    ARGILLA_SETTINGS_PATH,
    ID_KEY,
    Annotation,
    LabelFileError,
    LabelingRow,
    argilla_dataset,
    label_studio_config,
    label_studio_tasks,
    parse_labels,
    template_csv,
    template_jsonl,
)

BBH_PROMPT = (
    "Alice, Bob, and Claire are playing a game. At the start of the game, they are each holding a ball: "
    "Alice has a pink ball, Bob has a white ball, and Claire has a red ball.\n"
    "At the end of the game, Alice has the\nOptions:\n(A) pink ball\n(B) white ball\n(C) red ball"
)
BBH_PROMPT_FIVE = "Which sentence has the correct adjective order?\nOptions:\n(A) a\n(B) b\n(C) c\n(D) d\n(E) e\n(F) f"
ROWS = [
    LabelingRow("gsm8k-1", "Natalia sold clips to 48 of her friends in April & half as many in May. How many?"),
    LabelingRow("gsm8k-2", 'Weng earns $12 an hour for babysitting. "Yesterday" she did 50 minutes. <How much>?'),
    LabelingRow("gsm8k-3", "Betty is saving money for a new wallet which costs $100.\nHow much more does she need?"),
]


def ls_annotation(answer: str | None, *, user: object = 1, cancelled: bool = False, choice: bool = False,
                  annotation_id: int = 1001) -> dict:
    """One annotation as Label Studio exports it (guide/export, "Label Studio JSON format of annotated tasks")."""
    result = []
    if answer is not None:
        value = {"choices": [answer]} if choice else {"text": [answer]}
        result.append({"value": value, "id": "Dx_aB91ISN", "from_name": "answer", "to_name": "prompt",
                       "type": "choices" if choice else "textarea", "origin": "manual"})
    return {"id": annotation_id, "completed_by": user, "result": result, "was_cancelled": cancelled,
            "ground_truth": False, "created_at": "2026-11-20T10:15:08.728353Z",
            "updated_at": "2026-11-20T10:15:08.728378Z", "lead_time": 4.288, "prediction": {}, "result_count": 0,
            "task": 1, "parent_prediction": None, "parent_annotation": None}


def ls_export(tasks: list[dict], annotations: list[list[dict]]) -> bytes:
    """What Label Studio's JSON export gives back for imported tasks once annotated."""
    exported = []
    for number, (task, task_annotations) in enumerate(zip(tasks, annotations, strict=True), start=1):
        exported.append({"id": 40 + number, "annotations": task_annotations, "drafts": [], "predictions": [],
                         "data": task["data"], "meta": {}, "created_at": "2026-11-20T09:52:49.513742Z",
                         "updated_at": "2026-11-20T10:16:08.746926Z", "inner_id": number, "total_annotations":
                         len(task_annotations), "cancelled_annotations": 0, "total_predictions": 0,
                         "comment_count": 0, "unresolved_comment_count": 0, "last_comment_updated_at": None,
                         "project": 83, "updated_by": 1, "file_upload": 7, "comment_authors": []})
    return json.dumps(exported, indent=2).encode()


def answers(parsed) -> list[tuple[str, str, str | None]]:
    return [(a.external_id, a.answer, a.annotator) for a in parsed.annotations]


# --- Label Studio config -------------------------------------------------------------------------


@pytest.mark.parametrize("task_type", ["numeric", "math", "exact"])
def test_config_for_free_text_types_has_one_required_textarea(task_type):
    view = ET.fromstring(label_studio_config(task_type, [row.prompt for row in ROWS]))
    assert view.tag == "View"
    text = view.find("Text")
    assert text is not None and text.get("name") == "prompt" and text.get("value") == "$prompt"
    areas = view.findall("TextArea")
    assert len(areas) == 1
    area = areas[0]
    assert area.get("name") == "answer" and area.get("toName") == "prompt"
    assert area.get("required") == "true" and area.get("maxSubmissions") == "1"
    assert view.find("Choices") is None


def test_config_for_choice_lists_the_option_letters_of_the_prompts():
    view = ET.fromstring(label_studio_config("choice", [BBH_PROMPT, BBH_PROMPT_FIVE]))
    choices = view.find("Choices")
    assert choices is not None
    assert choices.get("name") == "answer" and choices.get("toName") == "prompt"
    assert choices.get("choice") == "single" and choices.get("required") == "true"
    assert [c.get("value") for c in choices.findall("Choice")] == list("ABCDEF")
    assert view.find("TextArea") is None


def test_config_for_choice_falls_back_to_a_to_e_without_options():
    view = ET.fromstring(label_studio_config("choice", ["Is 7 prime? Answer with a letter."]))
    assert [c.get("value") for c in view.iter("Choice")] == list("ABCDE")


def test_config_survives_special_characters_and_rejects_unknown_types():
    config = label_studio_config("math", ["x < 1 & y > 2"])
    placeholder = ET.fromstring(config).find("TextArea").get("placeholder")
    assert "\\frac{3}{4}" in placeholder
    with pytest.raises(ValueError, match="unknown task type"):
        label_studio_config("essay", [])


def test_label_studio_tasks_carry_id_prompt_and_pool():
    tasks = label_studio_tasks(ROWS, 7)
    assert tasks[1] == {"data": {ID_KEY: "gsm8k-2", "prompt": ROWS[1].prompt, "budgetlab_pool": 7}}
    json.dumps(tasks)  # Label Studio imports the list as a JSON file


# --- Label Studio round trips ----------------------------------------------------------------------


def test_label_studio_round_trip_keeps_ids_and_answers():
    tasks = label_studio_tasks(ROWS, 7)
    content = ls_export(tasks, [[ls_annotation("72")], [ls_annotation("10")], [ls_annotation("5")]])
    parsed = parse_labels("project-83-at-2026-11-20.json", content)
    assert parsed.format == "label_studio_json"
    assert answers(parsed) == [("gsm8k-1", "72", "1"), ("gsm8k-2", "10", "1"), ("gsm8k-3", "5", "1")]
    assert parsed.annotations[1].line == "task 2 (id 42), annotation 1"


def test_label_studio_several_annotators_and_cancelled_annotations():
    tasks = label_studio_tasks(ROWS[:2], 7)
    content = ls_export(tasks, [
        [ls_annotation("72", user=1), ls_annotation("71", user={"id": 2, "email": "ann@example.org"}),
         ls_annotation(None, user=3, cancelled=True)],
        [ls_annotation("10", user=3, cancelled=True), ls_annotation("", user=1)],
    ])
    parsed = parse_labels("export.json", content)
    assert answers(parsed) == [("gsm8k-1", "72", "1"), ("gsm8k-1", "71", "ann@example.org"), ("gsm8k-2", "", "1")]
    assert [a.line for a in parsed.annotations] == [
        "task 1 (id 41), annotation 1", "task 1 (id 41), annotation 2", "task 2 (id 42), annotation 2"]


def test_label_studio_choice_round_trip():
    rows = [LabelingRow("bbh-1", BBH_PROMPT)]
    content = ls_export(label_studio_tasks(rows, "p"), [[ls_annotation("C", choice=True)]])
    assert answers(parse_labels("x.json", content)) == [("bbh-1", "C", "1")]


def test_label_studio_json_min_export():
    # label-studio-converter's convert_to_json_min: task data + id + the control's value flattened to a string.
    rows = [
        {ID_KEY: "gsm8k-1", "prompt": ROWS[0].prompt, "budgetlab_pool": 7, "id": 41, "answer": "72",
         "annotator": 1, "annotation_id": 1001, "created_at": "2026-11-20T10:15:08Z",
         "updated_at": "2026-11-20T10:15:08Z", "lead_time": 4.2},
        {ID_KEY: "gsm8k-1", "prompt": ROWS[0].prompt, "budgetlab_pool": 7, "id": 41, "answer": "71",
         "annotator": "ann@example.org", "annotation_id": 1002, "created_at": None, "updated_at": None,
         "lead_time": 3.0},
        {ID_KEY: "gsm8k-2", "prompt": ROWS[1].prompt, "budgetlab_pool": 7, "id": 42, "annotator": None,
         "annotation_id": None, "created_at": None, "updated_at": None, "lead_time": None},
    ]
    parsed = parse_labels("min.json", json.dumps(rows).encode())
    assert parsed.format == "label_studio_json_min"
    assert answers(parsed) == [("gsm8k-1", "72", "1"), ("gsm8k-1", "71", "ann@example.org")]
    assert parsed.annotations[1].line == "item 2"


def test_label_studio_export_without_budgetlab_id_names_the_keys_found():
    content = ls_export([{"data": {"text": "2+2?", "question_id": "a"}}], [[ls_annotation("4")]])
    with pytest.raises(LabelFileError) as error:
        parse_labels("export.json", content)
    message = str(error.value)
    assert "question_id, text" in message and ID_KEY in message and "export the Label Studio project" in message
    assert "task 1" in message


def test_label_studio_export_with_only_cancelled_annotations_has_no_annotations():
    content = ls_export(label_studio_tasks(ROWS[:1], 7), [[ls_annotation(None, cancelled=True)]])
    with pytest.raises(LabelFileError, match="no annotations.*cancelled"):
        parse_labels("export.json", content)


# --- Argilla -------------------------------------------------------------------------------------


def test_argilla_dataset_folder_matches_the_sdk_layout():
    files = argilla_dataset(ROWS, "numeric", 7)
    assert set(files) == {ARGILLA_DATASET_PATH, ARGILLA_SETTINGS_PATH, ARGILLA_RECORDS_PATH}
    dataset = json.loads(files[ARGILLA_DATASET_PATH])
    assert dataset["name"] == "budgetlab-pool-7"
    settings = json.loads(files[ARGILLA_SETTINGS_PATH])
    assert [(f["name"], f["type"]) for f in settings["fields"]] == [("prompt", "text")]
    assert [(q["name"], q["type"], q["required"]) for q in settings["questions"]] == [("answer", "text", True)]
    assert [(m["name"], m["settings"]["type"]) for m in settings["metadata"]] == [(ID_KEY, "terms")]
    records = json.loads(files[ARGILLA_RECORDS_PATH])
    assert records[2]["id"] == "gsm8k-3" and records[2]["metadata"][ID_KEY] == "gsm8k-3"
    assert records[2]["fields"] == {"prompt": ROWS[2].prompt} and records[2]["responses"] == {}


def test_argilla_dataset_for_choice_uses_a_label_question_with_the_letters():
    settings = json.loads(argilla_dataset([LabelingRow("bbh-1", BBH_PROMPT)], "choice", "a b")[ARGILLA_SETTINGS_PATH])
    question = settings["questions"][0]
    assert question["type"] == "label_selection"
    assert [o["value"] for o in question["settings"]["options"]] == ["A", "B", "C"]
    assert json.loads(argilla_dataset([], "choice", "a b")[ARGILLA_DATASET_PATH])["name"] == "budgetlab-pool-a-b"


def argilla_record(external_id: str, responses: list[dict]) -> dict:
    """A record as argilla 2.x's Record.to_dict() writes it (records.json, records.to_list())."""
    return {"id": external_id, "fields": {"prompt": "..."}, "metadata": {ID_KEY: external_id, "budgetlab_pool": "7"},
            "suggestions": {}, "responses": {"answer": responses} if responses else {}, "vectors": {},
            "status": "completed" if responses else "pending", "_server_id": "0b1d5c0e-5a8e-4a53-9f8f-0e7d3c1a2b4c"}


def test_argilla_round_trip_from_exported_records():
    records = json.loads(argilla_dataset(ROWS, "numeric", 7)[ARGILLA_RECORDS_PATH])
    user_a, user_b = "6a4b9a3e-1f7c-4e0e-9f3c-2d1b6f3e8a11", "c1f0e9d2-7b6a-4c5d-8e9f-0a1b2c3d4e5f"
    records[0]["responses"] = {"answer": [{"value": "72", "user_id": user_a, "status": "submitted"},
                                          {"value": "70", "user_id": user_b, "status": "draft"}]}
    records[1]["responses"] = {"answer": [{"value": "10", "user_id": user_b}]}  # the SDK's nested export: no status
    records[2]["responses"] = {"answer": [{"value": None, "user_id": user_a, "status": "discarded"}]}
    parsed = parse_labels("records.json", json.dumps(records).encode())
    assert parsed.format == "argilla"
    assert answers(parsed) == [("gsm8k-1", "72", user_a), ("gsm8k-2", "10", user_b)]
    assert parsed.annotations[0].line == "record 1, response 1"


def test_argilla_flat_export_reads_status_per_response():
    # records.to_list(flatten=True): fields and metadata at the top, responses as parallel lists.
    flat = [
        {"id": "bbh-1", "status": "completed", "_server_id": None, "prompt": BBH_PROMPT, ID_KEY: "bbh-1",
         "answer.responses": ["A", "B"], "answer.responses.users": ["u1", "u2"],
         "answer.responses.status": ["submitted", "submitted"]},
        {"id": "bbh-2", "status": "pending", "_server_id": None, "prompt": BBH_PROMPT, ID_KEY: "bbh-2",
         "answer.responses": ["C"], "answer.responses.users": ["u1"], "answer.responses.status": ["discarded"]},
        {"id": "bbh-3", "status": "pending", "_server_id": None, "prompt": BBH_PROMPT, ID_KEY: "bbh-3",
         "answer.responses": None, "answer.responses.users": None, "answer.responses.status": None},
    ]
    parsed = parse_labels("argilla.json", json.dumps(flat).encode())
    assert answers(parsed) == [("bbh-1", "A", "u1"), ("bbh-1", "B", "u2")]


def test_argilla_export_with_no_submitted_response():
    records = [argilla_record("q1", [{"value": "4", "user_id": "u1", "status": "draft"}])]
    with pytest.raises(LabelFileError, match="no annotations.*submitted"):
        parse_labels("records.json", json.dumps(records).encode())


def test_argilla_responses_to_other_questions_only_are_reported():
    records = [argilla_record("q1", [])]
    records[0]["responses"] = {"rating": [{"value": 3, "user_id": "u"}], "comment": [{"value": "ok", "user_id": "u"}]}
    with pytest.raises(LabelFileError, match="comment, rating.*'answer'"):
        parse_labels("records.json", json.dumps(records).encode())


# --- templates, CSV, JSONL -----------------------------------------------------------------------


def test_csv_template_round_trip_with_excel_style_quoting():
    content = template_csv(ROWS)
    table = list(csv.reader(io.StringIO(content.decode())))
    assert table[0] == ["id", "prompt", "answer"]
    assert table[2] == ["gsm8k-2", ROWS[1].prompt, ""] and table[3][1] == ROWS[2].prompt  # quotes, newlines kept
    filled = [table[0]] + [[external_id, prompt, answer] for (external_id, prompt, _), answer
                           in zip(table[1:], ["72", "10", " 5 "], strict=True)]
    buffer = io.StringIO()
    csv.writer(buffer).writerows(filled)
    parsed = parse_labels("labels.csv", buffer.getvalue().encode("utf-8-sig"))
    assert parsed.format == "csv"
    assert answers(parsed) == [("gsm8k-1", "72", None), ("gsm8k-2", "10", None), ("gsm8k-3", "5", None)]
    # the third prompt spans two physical lines: rows are located by the line they start on
    assert [a.line for a in parsed.annotations] == ["line 2", "line 3", "line 4"]


def test_csv_with_semicolons_extra_columns_and_empty_answers():
    content = b"Answer;ID;notes\n72;gsm8k-1;easy\n;gsm8k-2;\n"
    parsed = parse_labels("labels.txt", content)
    assert answers(parsed) == [("gsm8k-1", "72", None), ("gsm8k-2", "", None)]


def test_jsonl_template_round_trip_and_json_array():
    lines = template_jsonl(ROWS).decode().splitlines()
    assert [json.loads(line) for line in lines][0] == {"id": "gsm8k-1", "prompt": ROWS[0].prompt, "answer": ""}
    filled = [{**json.loads(line), "answer": answer} for line, answer in zip(lines, ["72", 10, None], strict=True)]
    parsed = parse_labels("labels.jsonl", "\n".join(json.dumps(row) for row in filled).encode() + b"\n\n")
    assert parsed.format == "jsonl"
    assert answers(parsed) == [("gsm8k-1", "72", None), ("gsm8k-2", "10", None), ("gsm8k-3", "", None)]
    assert parsed.annotations[2].line == "line 3"
    array = parse_labels("labels.json", json.dumps([{"id": 5, "answer": True}]).encode())
    assert array.format == "json" and array.annotations == [Annotation("5", "True", None, "item 1")]


def test_label_studio_csv_export_uses_budgetlab_id_not_the_task_id():
    # label-studio-converter's convert_to_csv: task data, the task's own "id", one row per annotation.
    content = (
        b'"annotation_id","annotator","answer","budgetlab_id","budgetlab_pool","created_at","id","lead_time","prompt"\n'
        b'1001,"1","72","gsm8k-1",7,"2026-11-20T10:15:08Z",41,4.288,"Natalia sold clips"\n'
        b'1002,"b@x.org","71","gsm8k-1",7,"2026-11-20T10:15:08Z",41,3.1,"Natalia sold clips"\n'
        b'"","","","gsm8k-3",7,"",43,"","Betty is saving\nmoney"\n'
    )
    parsed = parse_labels("project-83.csv", content)
    assert answers(parsed) == [("gsm8k-1", "72", "1"), ("gsm8k-1", "71", "b@x.org")]


def test_csv_annotator_column_allows_several_answers_per_prompt():
    content = b"id,answer,annotator\nq1,4,ann\nq1,5,bob\n"
    assert answers(parse_labels("l.csv", content)) == [("q1", "4", "ann"), ("q1", "5", "bob")]


# --- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "words"), [
    (b"id,label,gold,prompt\nq1,4,4,x\n", ["no 'answer' column", "gold, id, label, prompt",
                                          "gold, label looks like it", "named 'answer'"]),
    (b"prompt_id,answer\nq1,4\n", ["no 'id' column", "prompt_id looks like it", "named 'id'"]),
    (b"Hello, this is my label file.\n", ["no 'id' column", "first line (the header)"]),
])
def test_csv_missing_columns_say_what_was_found(content, words):
    with pytest.raises(LabelFileError) as error:
        parse_labels("labels.csv", content)
    for word in words:
        assert word in str(error.value)


def test_jsonl_missing_answer_key_names_the_keys():
    content = b'{"id": "q1", "label": "4"}\n{"id": "q2", "label": "5"}\n'
    with pytest.raises(LabelFileError, match=r"no 'answer' key: the rows have keys id, label \(label looks like it"):
        parse_labels("labels.jsonl", content)


def test_duplicate_ids_are_listed_with_their_lines():
    with pytest.raises(LabelFileError) as error:
        parse_labels("labels.csv", b"id,answer\nq1,4\nq2,5\nq1,6\nq2,5\nq3,1\n")
    message = str(error.value)
    assert "q1 on line 2, line 4" in message and "q2 on line 3, line 5" in message
    assert "one answer per prompt" in message and "q3" not in message
    with pytest.raises(LabelFileError, match="q1 on line 1, line 2"):
        parse_labels("labels.jsonl", b'{"id": "q1", "answer": "4"}\n{"id": "q1", "answer": "4"}\n')


def test_rows_without_ids_are_located():
    with pytest.raises(LabelFileError, match="line 3 has no id"):
        parse_labels("labels.csv", b"id,answer\nq1,4\n,5\n")


def test_mixed_jsonl_lines_are_refused():
    task = json.loads(ls_export(label_studio_tasks(ROWS[:1], 7), [[ls_annotation("72")]]))[0]
    content = (json.dumps(task) + "\n" + json.dumps({"id": "gsm8k-2", "answer": "10"}) + "\n").encode()
    with pytest.raises(LabelFileError) as error:
        parse_labels("labels.jsonl", content)
    message = str(error.value)
    assert "mixes formats" in message
    assert "Label Studio tasks (line 1)" in message and "id/answer rows (line 2)" in message


def test_mixed_json_array_is_refused():
    content = json.dumps([{"id": "q1", "answer": "4"}, argilla_record("q2", [])]).encode()
    with pytest.raises(LabelFileError, match=r"mixes formats.*id/answer rows \(item 1\).*Argilla records \(item 2\)"):
        parse_labels("labels.json", content)


@pytest.mark.parametrize(("filename", "content", "words"), [
    ("labels.json", b"", ["empty"]),
    ("labels.json", b"   \n", ["empty"]),
    ("labels.xlsx", b"PK\x03\x04\x14\x00\x06\x00", ["ZIP or Excel", "CSV UTF-8"]),
    ("labels.csv", "id,answer\nq1,caf\xe9\n".encode("latin-1"), ["not UTF-8"]),
    ("labels.json", b'[{"id": "q1", "answer": "4"},]', ["not valid JSON", "line 1"]),
    ("labels.json", b"id,answer\nq1,4\n", ["does not hold JSON"]),
    ("labels.jsonl", b'{"id": "q1", "answer": "4"}\n{"id": "q2", "answer": \n', ["line 2 is not valid JSON"]),
    ("labels.json", b'["q1", "q2"]', ["item 1 is a JSON string", "object"]),
    ("labels.json", b"[]", ["empty JSON list"]),
    ("labels.csv", b"id,answer\n", ["no annotations", "no rows"]),
    ("labels.json", b'[{"id": "q1", "answer": ["4", "5"]}]', ["item 1", "answer is a JSON list"]),
])
def test_unreadable_files_say_why(filename, content, words):
    with pytest.raises(LabelFileError) as error:
        parse_labels(filename, content)
    for word in words:
        assert word in str(error.value)


def test_label_file_error_is_a_value_error():
    assert issubclass(LabelFileError, ValueError)
