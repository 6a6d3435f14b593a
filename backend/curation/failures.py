"""Why the never-solved prompts fail (the hard end of a pool): from each prompt's k extracted answers, one of
- ``label_error``: the k samples mostly agree with each other (agreement ≥ 0.75) on an answer that is not the
  gold one: the gold answer may be wrong, or the model is consistently wrong; worth a look before paying to
  train on the prompt;
- ``no_answer``: most samples give no answer the grader can read: none given, or cut off at the probe's
  max_new_tokens (a longer budget or another template may fix it);
- ``wrong_answer``: answers are given but disagree and are wrong: the prompt is beyond the model for now.
Pure: counts in, counts out.
"""

from __future__ import annotations

from dataclasses import dataclass

LABEL_ERROR_AGREEMENT = 0.75


@dataclass(frozen=True)
class NeverSolved:
    k: int
    agreement: float  # share of the k answers equal to the majority answer
    majority_answer: str | None
    unanswered: int  # samples with no readable answer


def failure_kind(prompt: NeverSolved) -> str:
    if prompt.majority_answer is not None and prompt.agreement >= LABEL_ERROR_AGREEMENT:
        return "label_error"
    if 2 * prompt.unanswered > prompt.k:
        return "no_answer"
    return "wrong_answer"


def breakdown(prompts: list[NeverSolved]) -> dict:
    """Prompts per failure kind, and samples without an answer / with a wrong one."""
    kinds = {"label_error": 0, "no_answer": 0, "wrong_answer": 0}
    for prompt in prompts:
        kinds[failure_kind(prompt)] += 1
    unanswered = sum(p.unanswered for p in prompts)
    return {"never_solved": len(prompts), "prompts": kinds,
            "samples": {"no_answer": unanswered, "wrong_answer": sum(p.k for p in prompts) - unanswered}}
