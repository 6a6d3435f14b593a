"""The demo pool: one-step number tasks that the embedded model sometimes solves, generated (no download).

The embedded model (SmolLM2-135M-Instruct, dequantized from Q4) never solves multi-step word problems, so a
demo of them shows a flat histogram and zero gains. These nine task families are ones it solves
*sometimes*, which is where GRPO has signal. Roughly from easiest to hardest, with the mean pass rate the
`demo` probe preset measured on this pool (k = 8, T = 0.7; docs/benchmarks.md):

1. copy a number            (0.62)
2. the smaller of two       (0.22)
3. double a number          (0.16)
4. the larger of two        (0.22)
5. a one-digit sum          (0.19)
6. a difference below 20    (0.11)
7. count repeated words     (0.05)
8. a two-digit sum          (0.07)
9. the next number          (0.06)

Every answer is a whole number. Pure and deterministic: the same seed gives the same pool. The id names
the family and its level (``L3-double-017``), so a probe's scores can be checked against it; problems are
shuffled so that the file order does not give the families away. No two problems are the same up to the
order of their numbers, within the pool or between it and the held-out pool.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_COUNT = 200  # 22 or 23 per family
DEFAULT_SEED = 2025
DEMO_POOL_NAME = "Demo: one-step number tasks"
HELD_OUT_POOL_NAME = "Demo: held-out number tasks"
HELD_OUT_COUNT = 180  # 20 per family: enough for an evaluation accuracy within about ±7 points
HELD_OUT_SEED = 7

# The demo's prompt template, in the embedded model's chat format (ChatML): a terse instruction instead of
# the default one's "reason briefly, then \boxed{}", which spends the few new tokens on preamble.
DEMO_TEMPLATE = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{prompt}\n"
                 "Answer with the number only.<|im_end|>\n<|im_start|>assistant\n")

_WORDS = ["apple", "bread", "chair", "cloud", "drum", "fish", "grape", "house", "lamp", "moon", "river", "stone"]


@dataclass(frozen=True)
class DemoProblem:
    external_id: str
    text: str
    answer: str
    level: int
    family: str


def _copy(r: random.Random) -> tuple[str, int]:
    a = r.randint(100, 999)
    return f"Repeat the number {a}.", a


def _smaller(r: random.Random) -> tuple[str, int]:
    a, b = r.sample(range(1, 100), 2)
    return f"Which is smaller, {a} or {b}?", min(a, b)


def _double(r: random.Random) -> tuple[str, int]:
    a = r.randint(2, 50)
    return (f"What is {a} times 2?" if r.random() < 0.5 else f"What is 2 times {a}?"), 2 * a


def _larger(r: random.Random) -> tuple[str, int]:
    a, b = r.sample(range(1, 100), 2)
    return f"Which is larger, {a} or {b}?", max(a, b)


def _add_one_digit(r: random.Random) -> tuple[str, int]:
    a, b = r.randint(1, 9), r.randint(1, 9)
    return f"What is {a} + {b}?", a + b


def _subtract(r: random.Random) -> tuple[str, int]:
    a = r.randint(5, 20)
    b = r.randint(1, a)
    return f"What is {a} - {b}?", a - b


def _count_words(r: random.Random) -> tuple[str, int]:
    word, times = r.choice(_WORDS), r.randint(2, 6)
    return f"How many words are in this list: {' '.join([word] * times)}?", times


def _add_two_digit(r: random.Random) -> tuple[str, int]:
    a, b = r.randint(10, 49), r.randint(1, 9)
    return f"What is {a} + {b}?", a + b


def _next_number(r: random.Random) -> tuple[str, int]:
    a = r.randint(10, 98)
    return f"What number comes after {a}?", a + 1


FAMILIES: dict[str, Callable[[random.Random], tuple[str, int]]] = {
    "copy": _copy, "smaller": _smaller, "double": _double, "larger": _larger, "add": _add_one_digit,
    "subtract": _subtract, "count": _count_words, "add2": _add_two_digit, "next": _next_number,
}
LEVELS = len(FAMILIES)


def problem_key(family: str, text: str) -> tuple:
    """What makes two problems the same: their family and numbers in any order ("3 + 5" is "5 + 3", "7 times
    2" is "2 times 7"); counting words, which has no numbers, by its text."""
    numbers = tuple(sorted(int(n) for n in re.findall(r"\d+", text)))
    return (family, numbers) if numbers else (family, text)


def demo_problems(count: int = DEFAULT_COUNT, seed: int = DEFAULT_SEED,
                  exclude: frozenset[tuple] | set[tuple] = frozenset()) -> list[DemoProblem]:
    """`count` problems, as evenly spread over the families as `count` allows, none the same as another or as
    one in `exclude` (see `problem_key`), in a seeded order."""
    rng = random.Random(seed)
    problems: list[DemoProblem] = []
    seen = set(exclude)
    for level, (family, make) in enumerate(FAMILIES.items(), start=1):
        n = count // LEVELS + (1 if level <= count % LEVELS else 0)
        for index in range(1, n + 1):
            for _ in range(10_000):  # the smallest family has about 60 distinct problems
                text, answer = make(rng)
                if problem_key(family, text) not in seen:
                    break
            else:
                raise ValueError(f"the demo family {family!r} has too few distinct problems for {n}")
            seen.add(problem_key(family, text))
            problems.append(DemoProblem(f"L{level}-{family}-{index:03d}", text, str(answer), level, family))
    rng.shuffle(problems)
    return problems


def held_out_problems() -> list[DemoProblem]:
    """The held-out pool: other problems of the same families, none of the demo pool's texts."""
    seen = {problem_key(p.family, p.text) for p in demo_problems()}
    return demo_problems(HELD_OUT_COUNT, HELD_OUT_SEED, exclude=seen)
