"""How many samples does adaptive probing save, and how often does it pick what a full-k probe picks? (issue 10 §3)

For each pool, draws k samples of every prompt with the probe's own engine and grader (the full-k probe), then
replays the adaptive stop rule (backend.curation.adaptive.replay, the function the worker's rounds apply) on
those same samples in draw order: a round reads the next columns. Comparing against the same samples isolates
what stopping early changes; two independent full-k probes would differ by sampling noise alone.

Per pool, strategy (hard, learnable, band) and N (10% and 25% of the pool), over selection seeds 0-4: the share
of samples saved against full k, the share of the adaptive probe's picks that the full-k probe also picks (mean
and worst seed), and how much GRPO signal each pick carries by the full-k counts (mean chance that a group of 8
on a picked prompt has mixed rewards, 1 - p^8 - (1-p)^8 at p = c/k): picks that differ can still be as good.
Targets: at least 40% saved with at least 95% identical picks.

Pools:
- demo: the demo pool (backend.pools.demo, 200 prompts) with the demo probe preset (k 8, T 0.7, 16 tokens);
- gsm8k: the first --gsm8k-prompts questions of ../shared/datasets/gsm8k/test.jsonl (without it, the 40-row slice in
  tests/data/gsm8k) with the paper preset's k 10 and T 1.0, and --gsm8k-max-new-tokens.

Usage: .venv/bin/python bench/adaptive_probing.py [--pools demo,gsm8k] [--save outcomes.json]
       .venv/bin/python bench/adaptive_probing.py --load outcomes.json     # replay only
       .venv/bin/python bench/adaptive_probing.py --cost                   # the stop rule's time per round
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED_GSM8K = ROOT.parent / "shared" / "datasets" / "gsm8k" / "test.jsonl"
SLICE_GSM8K = ROOT / "tests" / "data" / "gsm8k" / "test.jsonl"
STRATEGIES = ("hard", "learnable", "band")
FRACTIONS = (0.10, 0.25)
SEEDS = range(5)


def demo_pool() -> tuple[list[str], list[str], dict]:
    from backend.pools.demo import demo_problems
    from backend.probes.schemas import PROBE_PRESETS

    problems = demo_problems()
    return [p.text for p in problems], [p.answer for p in problems], {**PROBE_PRESETS["demo"], "task_type": "numeric"}


def gsm8k_pool(count: int, max_new_tokens: int) -> tuple[list[str], list[str], dict]:
    from backend.probes.schemas import PROBE_PRESETS

    path = SHARED_GSM8K if SHARED_GSM8K.exists() else SLICE_GSM8K
    if path is SLICE_GSM8K:
        print(f"note: {SHARED_GSM8K} is missing (it is not in the repository); using the {SLICE_GSM8K.name} slice "
              f"in tests/data")
    rows = [json.loads(line) for line in path.read_text().splitlines()[:count]]
    settings = {**PROBE_PRESETS["paper"], "max_new_tokens": max_new_tokens, "task_type": "numeric"}
    return [r["question"] for r in rows], [r["answer"] for r in rows], settings


def full_k_outcomes(engine, texts: list[str], answers: list[str], settings: dict) -> tuple[np.ndarray, float]:
    """(prompts x k) correctness of k samples per prompt, in draw order, and the seconds it took."""
    from backend.curation.grading import extract_answer, grade_answers, parse_gold

    task_type, policy = settings["task_type"], settings["grading_policy"]
    rendered = engine.render(texts, settings["template"], None)
    started = time.perf_counter()
    rows = []
    chunk = max(1, engine.prompts_per_batch(settings["k"]))
    for start in range(0, len(rendered), chunk):
        outputs = engine.generate(rendered[start:start + chunk], k=settings["k"], temperature=settings["temperature"],
                                  max_new_tokens=settings["max_new_tokens"], seed=start)
        for answer, outs in zip(answers[start:start + chunk], outputs, strict=True):
            extracted = [extract_answer(text, task_type, policy=policy) for text in outs]
            rows.append(grade_answers(extracted, parse_gold(answer, task_type), task_type, policy, None))
        print(f"  {len(rows)}/{len(rendered)} prompts, {time.perf_counter() - started:.0f} s", flush=True)
    return np.array(rows, dtype=bool), time.perf_counter() - started


def picks(strategy: str, n: int, seed: int, correct: np.ndarray, drawn: np.ndarray) -> set[int]:
    from backend.curation.posterior import PassCounts
    from backend.curation.strategies import Selector

    selector = Selector(1.0 - correct / drawn, np.zeros(correct.size, bool), seed, counts=PassCounts(correct, drawn))
    return set(selector.pick(strategy, n).tolist())


def report(name: str, outcomes: np.ndarray, first_round: int, round_size: int, tolerance: float) -> list[dict]:
    from backend.curation.adaptive import StopRule, replay

    prompts, k = outcomes.shape
    full_correct, full_k = outcomes.sum(axis=1), np.full(prompts, k)
    rates = full_correct / k
    print(f"\n{name}: {prompts} prompts x k {k}; mean pass rate {rates.mean():.3f}, never solved "
          f"{np.mean(rates == 0):.0%}, 0 < p < 1 {np.mean((rates > 0) & (rates < 1)):.0%}; first round "
          f"{first_round}, then {round_size} a round, tolerance {tolerance}")
    print(f"{'strategy':<10} {'N':>5} {'saved':>6} {'identical (mean, worst seed)':>29} {'rounds':>7} {'picks':>6} "
          f"{'signal adaptive / full':>23}")
    signal = 1 - rates ** 8 - (1 - rates) ** 8
    results = []
    for strategy in STRATEGIES:
        for fraction in FRACTIONS:
            n = max(1, int(fraction * prompts))
            saved, identical, rounds, sizes, signals = [], [], [], [], []
            for seed in SEEDS:
                rule = StopRule(k=k, first_round=first_round, round_size=round_size, strategy=strategy, n=n,
                                seed=seed, tolerance=tolerance)
                run = replay(rule, outcomes)
                full = picks(strategy, n, seed, full_correct, full_k)
                adaptive = picks(strategy, n, seed, run.correct, run.drawn)
                saved.append(run.saved)
                identical.append(len(full & adaptive) / len(full) if full else float(not adaptive))
                rounds.append(run.rounds)
                sizes.append(len(full))
                signals.append((signal[list(adaptive)].mean() if adaptive else 0.0,
                                signal[list(full)].mean() if full else 0.0))
            row = {"pool": name, "strategy": strategy, "n": n, "saved": float(np.mean(saved)),
                   "identical": float(np.mean(identical)), "identical_worst": float(np.min(identical)),
                   "rounds": float(np.mean(rounds)), "picks": float(np.mean(sizes)),
                   "signal_adaptive": float(np.mean([a for a, _ in signals])),
                   "signal_full": float(np.mean([f for _, f in signals]))}
            results.append(row)
            print(f"{strategy:<10} {n:>5} {row['saved']:>6.0%} {row['identical']:>19.1%} "
                  f"{row['identical_worst']:>8.0%} {row['rounds']:>7.1f} {row['picks']:>6.0f} "
                  f"{row['signal_adaptive']:>15.3f} / {row['signal_full']:.3f}")
    return results


def rule_cost() -> None:
    """Seconds `open_prompts` takes after a first round of 2 samples (N = 10%), on pools of demo-like pass rates."""
    from backend.curation.adaptive import StopRule, open_prompts

    rng = np.random.default_rng(0)
    print(f"{'prompts':>8} {'strategy':<10} {'seconds':>8} {'open':>6}")
    for size in (200, 2000, 10000):
        correct, drawn = rng.binomial(2, rng.beta(0.67, 2.7, size)), np.full(size, 2)
        for strategy in STRATEGIES:
            rule = StopRule(k=8, first_round=2, round_size=2, strategy=strategy, n=size // 10)
            started = time.perf_counter()
            opened = open_prompts(rule, correct, drawn, 1)
            print(f"{size:>8} {strategy:<10} {time.perf_counter() - started:>8.1f} {int(opened.sum()):>6}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pools", default="demo,gsm8k")
    parser.add_argument("--model", default="SmolLM2-135M-Instruct")
    parser.add_argument("--gsm8k-prompts", type=int, default=40)
    parser.add_argument("--gsm8k-max-new-tokens", type=int, default=250)
    parser.add_argument("--first-round", type=int, default=2)
    parser.add_argument("--round-size", type=int, default=2)
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--save", type=Path, help="Write the full-k outcomes here (JSON)")
    parser.add_argument("--load", type=Path, help="Replay outcomes saved earlier instead of sampling")
    parser.add_argument("--cost", action="store_true", help="Only time the stop rule on pools of 200 to 10,000")
    args = parser.parse_args()
    if args.cost:
        rule_cost()
        return 0

    if args.load:
        saved = json.loads(args.load.read_text())
        pools = {name: np.array(rows, dtype=bool) for name, rows in saved["outcomes"].items()}
        print(f"outcomes from {args.load}: {saved['about']}")
    else:
        from worker.engines import get_engine

        engine = get_engine(args.model)
        pools = {}
        about = {}
        for name in args.pools.split(","):
            texts, answers, settings = (demo_pool() if name == "demo" else
                                        gsm8k_pool(args.gsm8k_prompts, args.gsm8k_max_new_tokens))
            print(f"{name}: sampling {len(texts)} prompts x {settings['k']} with {args.model} on "
                  f"{type(engine).__name__} (T {settings['temperature']}, {settings['max_new_tokens']} tokens, "
                  f"{settings['grading_policy']} grading)", flush=True)
            pools[name], seconds = full_k_outcomes(engine, texts, answers, settings)
            about[name] = {"model": args.model, "seconds": round(seconds, 1),
                           **{key: settings[key] for key in ("k", "temperature", "max_new_tokens", "grading_policy")}}
        if args.save:
            args.save.write_text(json.dumps({"about": about, "outcomes": {n: o.tolist() for n, o in pools.items()}}))
    for name, outcomes in pools.items():
        report(name, outcomes, args.first_round, args.round_size, args.tolerance)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
