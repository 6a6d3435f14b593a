import math

import pytest

from backend.curation.scores import PromptScore, agreement, score_prompt, wilson_interval


def wilson_by_quadratic(correct: int, k: int, z: float = 1.96) -> tuple[float, float]:
    """Independent check: Wilson bounds are the roots of (phat - x)^2 = z^2 x (1 - x) / k."""
    phat = correct / k
    a = 1 + z * z / k
    b = -(2 * phat + z * z / k)
    c = phat * phat
    root = math.sqrt(b * b - 4 * a * c)
    return (-b - root) / (2 * a), (-b + root) / (2 * a)


def test_wilson_known_values():
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)


def test_wilson_matches_the_quadratic_roots_for_every_outcome():
    for k in range(1, 25):
        for correct in range(k + 1):
            assert wilson_interval(correct, k) == pytest.approx(wilson_by_quadratic(correct, k), abs=1e-12)
    assert wilson_interval(3, 10, z=2.576) == pytest.approx(wilson_by_quadratic(3, 10, z=2.576), abs=1e-12)


def test_wilson_without_samples_and_bad_counts():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)
    with pytest.raises(ValueError):
        wilson_interval(-1, 10)


def test_agreement_counts_missing_answers_in_the_denominator_only():
    assert agreement(["3", "4", "3", None]) == (0.5, "3")
    assert agreement([None, None, None, "5"]) == (0.25, "5")
    assert agreement([None, None]) == (0.0, None)
    assert agreement([]) == (0.0, None)


def test_agreement_tie_goes_to_the_answer_seen_first():
    assert agreement(["4", "3", "3", "4"]) == (0.5, "4")
    assert agreement(["3", "4", "4", "3"]) == (0.5, "3")


def test_score_with_gold_answers():
    score = score_prompt(["18", "18", "20", None], [False, True, False, False])
    low, high = wilson_interval(1, 4)
    assert score == PromptScore(
        correct_count=1,
        k=4,
        pass_rate=0.25,
        wilson_low=low,
        wilson_high=high,
        agreement=0.5,
        majority_answer="18",
        base_wrong=True,
        difficulty=0.75,
    )
    assert score_prompt(["18", "20"], [True, False]).base_wrong is False


def test_label_free_score_uses_agreement():
    score = score_prompt(["7", "7", "8"], None)
    assert score.pass_rate is None and score.correct_count is None
    assert score.wilson_low is None and score.wilson_high is None
    assert score.agreement == pytest.approx(2 / 3)
    assert score.difficulty == pytest.approx(1 / 3)
    assert score.base_wrong is False
    assert score_prompt(["8", "7", "7"], None).base_wrong is True
    assert score_prompt([None, "7", "7"], None).base_wrong is True
    assert score_prompt([None, None], None).difficulty == 1.0


def test_score_rejects_inconsistent_input():
    with pytest.raises(ValueError):
        score_prompt(["1", "2"], [True])
    with pytest.raises(ValueError):
        score_prompt([], None)
