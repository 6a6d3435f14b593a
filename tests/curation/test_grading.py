import json
import signal
import threading
from itertools import islice
from pathlib import Path

import pytest

from backend.curation.grading import (
    TASK_TYPES,
    detect_task_type,
    extract_answer,
    is_correct,
    last_boxed,
    parse_gold,
    ungradeable_answers,
)

DATASETS = Path(__file__).resolve().parents[3] / "shared" / "datasets"


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


def test_choice_gold_accepts_parenthesised_or_bare_letters_a_to_g():
    assert parse_gold("(B)", "choice") == "B"
    assert parse_gold("G", "choice") == "G"
    assert parse_gold(" (c) ", "choice") == "C"
    assert parse_gold("(H)", "choice") is None
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


def test_numeric_equality_uses_a_small_relative_tolerance():
    assert is_correct("3.50", "3.5", "numeric")
    assert is_correct("$1,000", "1000.0", "numeric")
    assert is_correct("0.3333333", "1/3", "numeric")
    assert is_correct("1000000000001", "1000000000000", "numeric")
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
    math500 = read_jsonl_field(DATASETS / "math" / "test.jsonl", "answer", limit=500)
    assert ungradeable_answers(gsm8k, "numeric") == (0, [])
    assert ungradeable_answers(math500, "math") == (0, [])


def test_ungradeable_answers_counts_and_shows_up_to_five():
    answers = ["12", "abc", "#### 5", "x^2", None] + [f"word{i}" for i in range(10)]
    count, examples = ungradeable_answers(answers, "numeric")
    assert count == 13
    assert examples == ["abc", "x^2", "", "word0", "word1"]
