"""The one interface every generation engine implements."""

from __future__ import annotations

import hashlib
from typing import Protocol, runtime_checkable


@runtime_checkable
class GenerationEngine(Protocol):
    """Given already-rendered prompts and sampling settings, return k completions per prompt.

    ``generate`` returns one list of exactly ``k`` strings per prompt, in prompt order: only the
    new text, special tokens removed. ``temperature == 0`` means greedy decoding (the k strings are
    then identical). The same ``seed`` with the same prompts gives the same completions.
    """

    model_name: str

    def prompts_per_batch(self, k: int) -> int:
        """Prompts per ``generate`` call that keep the engine efficient at this k. Callers pass
        chunks of this size and check for cancellation and report progress between them."""
        ...

    def render(self, questions: list[str], template: str | None = None,
               chat_template_options: dict | None = None) -> list[str]:
        """Model inputs for the questions: the default chat template (called with the options as
        keyword arguments), or a ``{prompt}`` template."""
        ...

    def generate(self, prompts: list[str], *, k: int, temperature: float, max_new_tokens: int,
                 seed: int) -> list[list[str]]:
        ...


def derive_seed(seed: int, *parts: int) -> int:
    """A 31-bit seed for one batch, from the probe's seed and the batch's identity (e.g. the pool
    position of its first prompt), so that batches do not share one random stream."""
    digest = hashlib.sha256(":".join(str(p) for p in (seed, *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def check_sampling(k: int, temperature: float, max_new_tokens: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1 (got {k})")
    if temperature < 0:
        raise ValueError(f"temperature must be 0 or more (got {temperature})")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be at least 1 (got {max_new_tokens})")
