"""Which demo tasks can the embedded model sometimes solve? (issue 10 §1, a first exploration.)

For a few families of generated tasks (short arithmetic, comparisons, copying, counting), samples k
completions per prompt from the model through the probe's own engine and grader, and prints per family the
mean pass rate and the share of prompts with 0 < pass rate < 1 (the prompts that carry GRPO signal), for
each template and temperature asked for. Nothing is written to a database.

Usage: .venv/bin/python bench/demo_pass_rates.py [--model SmolLM2-135M-Instruct] [--prompts 12] [--k 8]
       [--temperatures 0.7,1.0] [--max-new-tokens 24]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FEW_SHOT = ("Answer with the number only, in \\boxed{}.\n"
            "Q: What is 2 + 3?\nA: \\boxed{5}\n"
            "Q: Which is larger, 14 or 9?\nA: \\boxed{14}\n"
            "Q: {prompt}\nA: \\boxed{")
# The model's own chat format (ChatML) with a terse instruction instead of the default's "Reason briefly".
NUMBER_ONLY = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{prompt}\n"
               "Answer with the number only.<|im_end|>\n<|im_start|>assistant\n")
TEMPLATES = {"chat default": None, "few-shot completion": FEW_SHOT, "number only": NUMBER_ONLY}


def families(rng: random.Random, n: int) -> dict[str, list[tuple[str, str]]]:
    def add():
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        return f"What is {a} + {b}?", str(a + b)

    def add_two_digit():
        a, b = rng.randint(10, 49), rng.randint(1, 9)
        return f"What is {a} + {b}?", str(a + b)

    def larger():
        a, b = rng.sample(range(1, 100), 2)
        return f"Which is larger, {a} or {b}?", str(max(a, b))

    def copy():
        a = rng.randint(100, 999)
        return f"Repeat the number {a}.", str(a)

    def count():
        word = rng.choice(["apple", "banana", "cherry", "grape", "melon"])
        times = rng.randint(2, 5)
        return f"How many words are in this list: {' '.join([word] * times)}?", str(times)

    def subtract():
        a = rng.randint(5, 20)
        b = rng.randint(1, a)
        return f"What is {a} - {b}?", str(a - b)

    def smaller():
        a, b = rng.sample(range(1, 100), 2)
        return f"Which is smaller, {a} or {b}?", str(min(a, b))

    def successor():
        a = rng.randint(10, 98)
        return f"What number comes after {a}?", str(a + 1)

    def double():
        a = rng.randint(2, 9)
        return f"What is {a} times 2?", str(2 * a)

    makers = {"add 1-digit": add, "add 2-digit": add_two_digit, "larger of two": larger, "copy a number": copy,
              "count words": count, "subtract": subtract, "smaller of two": smaller,
              "next number": successor, "double": double}
    return {name: [make() for _ in range(n)] for name, make in makers.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="SmolLM2-135M-Instruct")
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--temperatures", default="0.7,1.0")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--templates", default=",".join(TEMPLATES), help="Comma-separated template names")
    args = parser.parse_args()

    from backend.curation.grading import extract_answer, grade_answers, parse_gold
    from worker.engines import get_engine

    engine = get_engine(args.model)
    tasks = families(random.Random(args.seed), args.prompts)
    print(f"model {args.model} on {type(engine).__name__}, k={args.k}, {args.prompts} prompts per family, "
          f"{args.max_new_tokens} new tokens; grading: numeric, lenient")
    print(f"{'template':<20} {'T':>4} {'family':<15} {'mean pass':>9} {'0<p<1':>6} {'never':>6} {'s':>6}")
    for template_name in args.templates.split(","):
        template = TEMPLATES[template_name]
        for temperature in (float(t) for t in args.temperatures.split(",")):
            for family, rows in tasks.items():
                started = time.perf_counter()
                rendered = engine.render([q for q, _ in rows], template, None)
                outputs = engine.generate(rendered, k=args.k, temperature=temperature,
                                          max_new_tokens=args.max_new_tokens, seed=args.seed)
                rates = []
                for (_, gold), outs in zip(rows, outputs, strict=True):
                    if template == FEW_SHOT:  # the template opened the box: the completion continues inside it
                        outs = ["\\boxed{" + text for text in outs]
                    answers = [extract_answer(text, "numeric", policy="lenient") for text in outs]
                    correct = grade_answers(answers, parse_gold(gold, "numeric"), "numeric", "lenient", None)
                    rates.append(sum(correct) / len(correct))
                signal = sum(0 < r < 1 for r in rates) / len(rates)
                never = sum(r == 0 for r in rates) / len(rates)
                print(f"{template_name:<20} {temperature:>4.1f} {family:<15} {sum(rates) / len(rates):>9.2f} "
                      f"{signal:>6.0%} {never:>6.0%} {time.perf_counter() - started:>6.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
