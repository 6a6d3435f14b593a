"""The demo pool: arithmetic word problems of graded difficulty, generated (no download needed).

Five levels, 40 problems each by default:

1. one addition with small numbers;
2. one subtraction, or an addition and a subtraction;
3. a multiplication, sometimes followed by an addition;
4. two or three steps mixing multiplication with division or subtraction;
5. four or five steps with multiplication, division, addition and subtraction, larger numbers.

Every answer is a whole number. Pure and deterministic: the same seed gives the same pool. The id
says the level (``L3-017``), so a probe's difficulty scores can be checked against it. Problems are
shuffled so that the file order does not give the levels away.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

LEVELS = 5
DEFAULT_COUNT = 200
DEFAULT_SEED = 2025
DEMO_POOL_NAME = "Demo: arithmetic word problems"
HELD_OUT_POOL_NAME = "Demo: held-out arithmetic problems"
HELD_OUT_COUNT = 60
HELD_OUT_SEED = 7

_NAMES = ["Ava", "Ben", "Chloe", "Diego", "Emma", "Farid", "Grace", "Hiro", "Isla", "Jonah", "Kira", "Liam",
          "Maya", "Noah", "Olga", "Priya", "Quinn", "Ravi", "Sofia", "Tom"]
_ITEMS = ["apples", "marbles", "stickers", "pencils", "cards", "shells", "stamps", "cookies", "beads", "books"]
_ANIMALS = ["ducks", "sheep", "goats", "birds", "rabbits", "cows"]


@dataclass(frozen=True)
class DemoProblem:
    external_id: str
    text: str
    answer: str
    level: int


def _level1(r: random.Random) -> tuple[str, int]:
    a, b = r.randint(2, 20), r.randint(2, 20)
    if r.random() < 0.5:
        name, item = r.choice(_NAMES), r.choice(_ITEMS)
        return f"{name} has {a} {item}. A friend gives {name} {b} more. How many {item} does {name} have now?", a + b
    animal = r.choice(_ANIMALS)
    return f"There are {a} {animal} in a field and {b} more join them. How many {animal} are in the field?", a + b


def _level2(r: random.Random) -> tuple[str, int]:
    name, item = r.choice(_NAMES), r.choice(_ITEMS)
    if r.random() < 0.5:
        a = r.randint(20, 99)
        b = r.randint(3, a - 5)
        return f"{name} had {a} {item} and gave {b} of them away. How many {item} does {name} have left?", a - b
    a, b = r.randint(10, 60), r.randint(5, 40)
    c = r.randint(3, a + b - 2)
    return (f"A shelf holds {a} {item}. {name} puts {b} more on it, then takes {c} off. "
            f"How many {item} are on the shelf now?", a + b - c)


def _level3(r: random.Random) -> tuple[str, int]:
    name, item = r.choice(_NAMES), r.choice(_ITEMS)
    a, b = r.randint(3, 12), r.randint(3, 12)
    if r.random() < 0.5:
        return f"A box holds {a} {item}. How many {item} are there in {b} boxes?", a * b
    c = r.randint(2, 30)
    return (f"{name} buys {b} packs of {item} with {a} in each pack. {name} already had {c} {item}. "
            f"How many {item} does {name} have now?", a * b + c)


def _level4(r: random.Random) -> tuple[str, int]:
    name = r.choice(_NAMES)
    kind = r.randrange(3)
    if kind == 0:
        rate, hours = r.randint(8, 25), r.randint(3, 9)
        spent = r.randint(5, rate * hours - 1)
        return (f"{name} earns ${rate} per hour and works {hours} hours. Then {name} spends ${spent} on "
                f"groceries. How many dollars does {name} have left?", rate * hours - spent)
    if kind == 1:
        students, each, given = r.randint(3, 9), r.randint(6, 15), r.randint(1, 5)
        return (f"{students * each} stickers are shared equally among {students} students. Each student then "
                f"gives {given} stickers to a younger pupil. How many stickers does each student have now?",
                each - given)
    trays, bag = r.randint(3, 9), r.choice([2, 3, 4, 6])
    per_tray = bag * r.randint(2, 5)
    return (f"A baker makes {trays} trays of {per_tray} cookies and packs them in bags of {bag}. "
            f"How many bags does the baker fill?", trays * per_tray // bag)


def _level5(r: random.Random) -> tuple[str, int]:
    name = r.choice(_NAMES)
    kind = r.randrange(3)
    if kind == 0:
        rows, trees, apples, crate = r.randint(4, 12), r.randint(5, 15), r.randint(10, 40), r.choice([5, 10, 20, 25])
        harvest = rows * trees * apples
        kept = r.randint(1, min(9, harvest // crate - 1)) * crate + harvest % crate
        return (f"An orchard has {rows} rows of {trees} apple trees, and each tree gives {apples} apples. The "
                f"farmer keeps {kept} apples and sells the rest in crates of {crate}. How many crates does the "
                f"farmer sell?", (harvest - kept) // crate)
    if kind == 1:
        shirts, shirt_price = r.randint(2, 6), r.randint(12, 35)
        socks, sock_price = r.randint(2, 8), r.randint(3, 9)
        cost = shirts * shirt_price + socks * sock_price
        paid = (cost // 50 + 1) * 50
        return (f"{name} buys {shirts} shirts at ${shirt_price} each and {socks} pairs of socks at ${sock_price} "
                f"a pair, and pays with ${paid}. How many dollars of change does {name} get?", paid - cost)
    inflow, leak = r.randint(9, 30), r.randint(2, 8)
    net = inflow - leak
    minutes = r.randint(12, 60)
    start = r.randint(10, 200)
    return (f"A tank already holds {start} liters of water. A pipe adds {inflow} liters per minute while a leak "
            f"loses {leak} liters per minute. How many minutes until the tank holds {start + net * minutes} "
            f"liters?", minutes)


_GENERATORS: dict[int, Callable[[random.Random], tuple[str, int]]] = {
    1: _level1, 2: _level2, 3: _level3, 4: _level4, 5: _level5,
}


def demo_problems(count: int = DEFAULT_COUNT, seed: int = DEFAULT_SEED) -> list[DemoProblem]:
    """`count` problems, as evenly spread over the five levels as `count` allows, in a seeded order."""
    rng = random.Random(seed)
    problems: list[DemoProblem] = []
    for level in range(1, LEVELS + 1):
        n = count // LEVELS + (1 if level <= count % LEVELS else 0)
        seen: set[str] = set()
        index = 0
        while index < n:
            text, answer = _GENERATORS[level](rng)
            if text in seen:
                continue
            seen.add(text)
            index += 1
            problems.append(DemoProblem(f"L{level}-{index:03d}", text, str(answer), level))
    rng.shuffle(problems)
    return problems
