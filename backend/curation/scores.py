"""Per-prompt scores from k probe samples: pass rate, Wilson interval, agreement, difficulty, base-wrong."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def wilson_interval(correct: int, k: int, z: float = 1.96) -> tuple[float, float]:
    """95% (by default) Wilson score interval for a pass rate of ``correct`` out of ``k``.

    Wilson rather than the normal approximation because k is small (about 10) and pass rates sit
    at 0 or 1 often, where the normal interval collapses to a point. k = 0 says nothing: (0, 1).
    """
    if k < 0 or correct < 0 or correct > k:
        raise ValueError(f"need 0 <= correct <= k, got correct={correct}, k={k}")
    if k == 0:
        return 0.0, 1.0
    p = correct / k
    z2 = z * z
    denominator = 1 + z2 / k
    centre = (p + z2 / (2 * k)) / denominator
    half_width = z * math.sqrt(p * (1 - p) / k + z2 / (4 * k * k)) / denominator
    return max(0.0, centre - half_width), min(1.0, centre + half_width)


def agreement(answers: Sequence[str | None]) -> tuple[float, str | None]:
    """Share of the k answers equal to the most common non-None answer, and that answer.

    Unreadable answers (None) count in the denominator but can never be the majority, so a prompt
    where the model rarely produces an answer does not look confident. Ties go to the answer seen
    first, which keeps the result independent of hashing order.
    """
    counts: dict[str, int] = {}
    for answer in answers:
        if answer is not None:
            counts[answer] = counts.get(answer, 0) + 1
    if not counts:
        return 0.0, None
    # dicts keep first-seen order and max() returns the first maximum: ties go to the earliest.
    majority = max(counts, key=counts.__getitem__)
    return counts[majority] / len(answers), majority


@dataclass(frozen=True)
class PromptScore:
    """What k probe samples say about one prompt. Interval fields are None without gold answers."""

    correct_count: int | None
    k: int
    pass_rate: float | None
    wilson_low: float | None
    wilson_high: float | None
    agreement: float
    majority_answer: str | None
    base_wrong: bool
    difficulty: float


def score_prompt(extracted: Sequence[str | None], correct: Sequence[bool] | None, *,
                 by_agreement: bool = False) -> PromptScore:
    """Score one prompt from its k extracted answers and, with gold answers, their correctness.

    With gold (``correct`` given): pass_rate = correct / k, difficulty = 1 - pass_rate, and
    base_wrong = not correct[0]: the first sample stands for the base model's own answer.
    ``by_agreement`` keeps difficulty = 1 - agreement even so: a probe where only some prompts have
    gold answers ranks all of them on one scale, the one every prompt has.

    Label-free (``correct`` is None): difficulty = 1 - agreement, the model's self-disagreement;
    base_wrong = the first answer is missing or differs from the majority answer, the closest
    label-free analogue of "the base answer is wrong". Agreement is reported in both modes.
    """
    k = len(extracted)
    if k == 0:
        raise ValueError("a prompt needs at least one probe sample to be scored")
    share, majority = agreement(extracted)
    if correct is None:
        first = extracted[0]
        return PromptScore(
            correct_count=None,
            k=k,
            pass_rate=None,
            wilson_low=None,
            wilson_high=None,
            agreement=share,
            majority_answer=majority,
            base_wrong=first is None or first != majority,
            difficulty=1.0 - share,
        )
    if len(correct) != k:
        raise ValueError(f"got {k} extracted answers but {len(correct)} correctness flags")
    correct_count = sum(bool(flag) for flag in correct)
    pass_rate = correct_count / k
    low, high = wilson_interval(correct_count, k)
    return PromptScore(
        correct_count=correct_count,
        k=k,
        pass_rate=pass_rate,
        wilson_low=low,
        wilson_high=high,
        agreement=share,
        majority_answer=majority,
        base_wrong=not correct[0],
        difficulty=1.0 - share if by_agreement else 1.0 - pass_rate,
    )
