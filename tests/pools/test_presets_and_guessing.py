"""The BBH preset on every one of BBH's 27 tasks (task type detected per file, said in the response and
the CLI), and field names guessed when none is given."""

import json

import pytest
from typer.testing import CliRunner

from backend.curation.grading import extract_answer, is_correct, parse_options
from tests.bbh_tasks import BBH_KINDS
from tests.conftest import DATASETS
from tests.pools.conftest import upload

TASK_TYPE_OF_KIND = {"choice": "choice", "numeric": "numeric", "labels": "exact", "text": "exact"}
REASON_OF_KIND = {"choice": "option letters", "numeric": "are numbers", "labels": "labels", "text": "free text"}
ALL_TASKS = [(kind, task) for kind, tasks in BBH_KINDS.items() for task in tasks]


def boxed(answer: str) -> str:
    """The answer in \\boxed{}, as a model writes it in LaTeX: braces inside escaped (dyck_languages)."""
    return "\\boxed{" + answer.replace("{", "\\{").replace("}", "\\}") + "}"


def prompts_of(client, pool_id: int) -> list[dict]:
    page = client.get(f"/api/pools/{pool_id}/prompts", params={"limit": 1000})
    assert page.status_code == 200, page.text
    return page.json()["items"]


def test_the_test_data_holds_all_27_bbh_tasks():
    assert sorted(p.stem for p in (DATASETS / "bbh").glob("*.json")) == sorted(task for _, task in ALL_TASKS)
    assert len(ALL_TASKS) == 27


@pytest.mark.parametrize(("kind", "task"), ALL_TASKS)
def test_bbh_preset_imports_and_grades_every_task(client, kind, task):
    path = DATASETS / "bbh" / f"{task}.json"
    examples = json.loads(path.read_text())["examples"]
    response = upload(client, path.name, path.read_bytes(), preset="bbh")
    assert response.status_code == 201, response.text
    pool = response.json()
    task_type = TASK_TYPE_OF_KIND[kind]
    assert (pool["task_type"], pool["prompt_count"], pool["has_answers"]) == (task_type, len(examples), True)
    report = pool["report"]
    assert (report["prompt_field"], report["answer_field"], report["task_type_detected"]) == ("input", "target", True)
    assert REASON_OF_KIND[kind] in report["task_type_reason"]

    prompts = prompts_of(client, pool["id"])
    assert [p["answer"] for p in prompts] == [e["target"] for e in examples]
    assert all(p["gold"] is not None for p in prompts)
    # A completion boxing the target is right, one boxing another example's (different) target is wrong.
    for prompt in prompts:
        options = parse_options(prompt["text"])
        right = extract_answer(f"Let me think step by step.\n{boxed(prompt['answer'])}", task_type, options=options)
        assert is_correct(right, prompt["gold"], task_type, options=options), (prompt["answer"], right)
        other = next(p["answer"] for p in prompts if p["gold"] != prompt["gold"])
        wrong = extract_answer(boxed(other), task_type, options=options)
        assert not is_correct(wrong, prompt["gold"], task_type, options=options), (prompt["answer"], other)
        if kind == "choice":  # the option's text, boxed, counts as its letter
            text = options[prompt["gold"]]
            if list(options.values()).count(text) == 1:
                assert extract_answer(boxed(text), task_type, options=options) == prompt["gold"]


def test_a_bbh_target_that_is_not_an_option_letter_is_named(client, stored):
    # BBH's own movie_recommendation example 164: the target is an option's text, split at its comma.
    document = json.loads((DATASETS / "bbh" / "movie_recommendation.json").read_text())
    document["examples"] *= 5  # as in the full file, nearly every target is a letter (there 249 of 250)
    document["examples"].append({
        "input": "Find a movie similar to Minority Report, Shrek, Catch Me If You Can, Aladdin:\nOptions:\n"
                 "(A) Monsters\n(B) Inc\n(C) Children of the Night\n(D) The Incredible Shrinking Man\n"
                 "(E) Town & Country",
        "target": "Monsters, Inc"})
    before = stored()
    response = upload(client, "movie_recommendation.json", json.dumps(document).encode(), preset="bbh")
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "1 of 31 answers in field 'target' cannot be graded as choice answers" in detail
    assert "example 31: 'Monsters, Inc'" in detail and "letter of the right option" in detail
    assert stored() == before


def test_bbh_preset_task_type_can_be_overridden(client):
    path = DATASETS / "bbh" / "object_counting.json"
    pool = upload(client, path.name, path.read_bytes(), preset="bbh", task_type="exact").json()
    assert pool["task_type"] == "exact" and not pool["report"]["task_type_detected"]
    assert "given" in pool["report"]["task_type_reason"]


def test_bbh_preset_listing_says_the_task_type_is_detected(client):
    presets = {p["name"]: p for p in client.get("/api/pools/presets").json()["presets"]}
    assert presets["bbh"]["task_type"] is None and presets["gsm8k"]["task_type"] == "numeric"


def test_cli_import_says_how_the_file_was_read(service_env):
    from backend.cli import app

    result = CliRunner().invoke(app, ["pool", "import", str(DATASETS / "bbh" / "word_sorting.json"),
                                      "--preset", "bbh"])
    assert result.exit_code == 0, result.output
    assert "task type exact" in result.output
    assert "Fields (named): prompt from 'input', answer from 'target', rows numbered." in result.output
    assert "Graded as exact: detected from the first 6 answers: the answers are free text" in result.output


# --- field names guessed ------------------------------------------------------------------------------


def test_aime_style_file_imports_with_no_options(client):
    path = DATASETS / "aime" / "aime_2025.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    pool = upload(client, path.name, path.read_bytes()).json()
    assert (pool["task_type"], pool["has_answers"], pool["prompt_count"]) == ("numeric", True, len(rows))
    report = pool["report"]
    assert (report["prompt_field"], report["answer_field"], report["id_field"], report["fields_guessed"]) == \
        ("problem", "answer", "id", True)
    prompts = prompts_of(client, pool["id"])
    assert [(p["external_id"], p["text"], p["gold"]) for p in prompts] == \
        [(r["id"], r["problem"], str(r["answer"])) for r in rows]


def test_math500_guesses_answer_over_solution_and_unique_id(client):
    path = DATASETS / "math" / "test.jsonl"
    first = json.loads(path.read_text().splitlines()[0])
    pool = upload(client, path.name, path.read_bytes()).json()
    assert pool["task_type"] == "math"
    report = pool["report"]
    assert (report["prompt_field"], report["answer_field"], report["id_field"]) == ("problem", "answer", "unique_id")
    prompt = prompts_of(client, pool["id"])[0]
    assert (prompt["external_id"], prompt["answer"]) == (first["unique_id"], first["answer"])


def test_gsm8k_guesses_question_and_answer(client):
    path = DATASETS / "gsm8k" / "test.jsonl"
    pool = upload(client, path.name, path.read_bytes()).json()
    assert (pool["task_type"], pool["report"]["prompt_field"], pool["report"]["id_field"]) == \
        ("numeric", "question", None)
    assert prompts_of(client, pool["id"])[0]["gold"] == "18"


def test_a_file_with_only_questions_is_an_unlabeled_pool(client):
    content = b'{"question": "What is 2+2?"}\n{"question": "Name a prime."}\n'
    pool = upload(client, "q.jsonl", content).json()
    assert (pool["has_answers"], pool["prompt_count"]) == (False, 2)
    assert (pool["report"]["prompt_field"], pool["report"]["answer_field"]) == ("question", None)
    assert [p["text"] for p in prompts_of(client, pool["id"])] == ["What is 2+2?", "Name a prime."]


def test_csv_headers_are_guessed_ignoring_case(client):
    content = b"QID,Query,Gold\nq1,What is 2+2?,4\nq2,What is 3+3?,6\n"
    pool = upload(client, "p.csv", content).json()
    assert (pool["report"]["prompt_field"], pool["report"]["answer_field"], pool["report"]["id_field"]) == \
        ("Query", "Gold", "QID")
    assert [(p["external_id"], p["gold"]) for p in prompts_of(client, pool["id"])] == [("q1", "4"), ("q2", "6")]
