"""Can label-free difficulty be trusted? Agreement against pass rate on real probes of the default model.

What it does, for GSM8K test questions and a BBH subset (the full datasets in ../shared/datasets/):
1. loads the model as the worker does (``worker.engines.get_engine``: SmolLM2-135M-Instruct, transformers on
   the CPU unless vLLM and a GPU are there);
2. probes the prompts as a probe shard does: the default chat template (``engine.render``), batches of
   ``engine.prompts_per_batch(k)`` with per-batch seeds ``derive_seed(seed, position)``, and the probe's
   default settings (k, temperature, max_new_tokens, grading policy: the ``ProbeCreate`` defaults);
3. grades and scores them with the worker's own ``worker.probing.grade_shard`` (extract_answer,
   is_correct, score_prompt), so each prompt gets its agreement and its pass rate;
4. prints ``backend.labels.trust.trust_report`` at budgets of 10% and 25% of the prompts.

Per-prompt scores can be saved (``--save``) and re-read (``--scores``) to redo step 4 without generating.

Usage: nice .venv/bin/python bench/label_free_trust.py [--gsm8k-prompts 64] [--bbh-prompts 64]
       [--bbh-tasks tracking_shuffled_objects_three_objects ...] [--k 8] [--max-new-tokens 256]
       [--budgets 0.1 0.25] [--save scores.json | --scores scores.json] [--device cpu] [--threads 1]
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
DATASETS = ROOT.parent / "shared" / "datasets"
BBH_TASKS = ("tracking_shuffled_objects_three_objects", "tracking_shuffled_objects_five_objects",
             "tracking_shuffled_objects_seven_objects")


def gsm8k_rows(path: Path, count: int) -> list[tuple[str, str]]:
    """The first ``count`` (question, answer) pairs of the GSM8K test JSONL."""
    rows: list[tuple[str, str]] = []
    if count <= 0:
        return rows
    with path.open() as handle:
        for line in handle:
            row = json.loads(line)
            rows.append((row["question"], row["answer"]))
            if len(rows) == count:
                break
    return rows


def bbh_rows(directory: Path, tasks: list[str], count: int) -> list[tuple[str, str]]:
    """``count`` (input, target) pairs, the first ones of each task in equal shares."""
    if count <= 0:
        return []
    per_task = -(-count // len(tasks))
    rows = []
    for task in tasks:
        examples = json.loads((directory / f"{task}.json").read_text())["examples"]
        rows.extend((example["input"], example["target"]) for example in examples[:per_task])
    return rows[:count]


def probe_scores(engine, rows: list[tuple[str, str]], task_type: str, settings: dict) -> tuple[list[dict], float]:
    """Generate, grade and score ``rows`` as one probe shard would; the score rows and the wall seconds."""
    from backend.curation.grading import parse_gold
    from worker.engines.base import derive_seed
    from worker.probing import ShardWork, grade_shard

    texts = [question for question, _ in rows]
    work = ShardWork(
        probe_id=0, shard_index=0, shard_count=1, first_position=0, model=engine.model_name,
        k=settings["k"], temperature=settings["temperature"], max_new_tokens=settings["max_new_tokens"],
        template=None, chat_template_options=None, grading_policy=settings["grading_policy"], seed=settings["seed"],
        label_free=False, task_type=task_type, prompt_ids=list(range(len(rows))), texts=texts,
        golds=[parse_gold(answer, task_type) for _, answer in rows], prompt_count=len(rows))
    if any(gold is None for gold in work.golds):
        raise SystemExit(f"label_free_trust: {work.golds.count(None)} gold answers could not be read as "
                         f"{task_type}; check the dataset files")
    started = time.perf_counter()
    rendered = engine.render(texts, None, None)
    chunk = max(1, engine.prompts_per_batch(work.k))
    completions: list[list[str]] = []
    for start in range(0, len(rendered), chunk):
        completions.extend(engine.generate(rendered[start:start + chunk], k=work.k, temperature=work.temperature,
                                           max_new_tokens=work.max_new_tokens, seed=derive_seed(work.seed, start)))
        print(f"  {len(completions)}/{len(rendered)} prompts, {time.perf_counter() - started:.0f} s", flush=True)
    _, scores = grade_shard(work, completions)
    return scores, time.perf_counter() - started


def print_report(name: str, scores: list[dict], seconds: float | None, budgets: list[float], seed: int) -> None:
    from backend.labels.trust import trust_report

    agreement = np.array([s["agreement"] for s in scores])
    pass_rate = np.array([s["pass_rate"] for s in scores])
    wall = f", wall {seconds:.0f} s" if seconds is not None else ""
    print(f"\n== {name}: {len(scores)} prompts, mean pass rate {pass_rate.mean():.3f}, "
          f"0 < pass < 1 for {np.mean((pass_rate > 0) & (pass_rate < 1)):.1%}, pass = 0 for "
          f"{np.mean(pass_rate == 0):.1%}, mean agreement {agreement.mean():.3f}{wall}")
    for share in budgets:
        n = max(1, round(share * len(scores)))
        report = trust_report(agreement, pass_rate, n, seed=seed)
        interval = (f" [{report.rho_low:.2f}, {report.rho_high:.2f}]" if report.rho_low is not None else "")
        rho = f"{report.rho:.2f}{interval}" if report.rho is not None else "undefined"
        print(f"n = {n} ({share:.0%}): rho {rho} | Jaccard {report.jaccard:.3f} (chance {report.chance_jaccard:.3f}, "
              f"best {report.best_jaccard:.3f}) | recall {report.recall:.3f} (chance {report.chance_recall:.3f}, "
              f"best {report.best_recall:.3f}) | pass-rate ties at the cut: {report.pass_rate_taken_from_ties} "
              f"taken of {report.pass_rate_ties_at_cut}")
        for text in (report.warning, report.note):
            if text:
                print(f"  {text}")


def main() -> None:
    from backend.probes.schemas import ProbeCreate
    from backend.settings import DEFAULT_MODEL

    defaults = {name: ProbeCreate.model_fields[name].default
                for name in ("k", "temperature", "max_new_tokens", "grading_policy", "seed")}
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gsm8k-prompts", type=int, default=64)
    parser.add_argument("--bbh-prompts", type=int, default=64)
    parser.add_argument("--bbh-tasks", nargs="+", default=list(BBH_TASKS))
    parser.add_argument("--k", type=int, default=defaults["k"])
    parser.add_argument("--temperature", type=float, default=defaults["temperature"])
    parser.add_argument("--max-new-tokens", type=int, default=defaults["max_new_tokens"])
    parser.add_argument("--grading-policy", choices=("strict", "lenient"), default=defaults["grading_policy"])
    parser.add_argument("--seed", type=int, default=defaults["seed"])
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.10, 0.25], help="shares of the prompts")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    parser.add_argument("--threads", type=int, help="torch CPU threads (1 is far faster on a CPU other jobs share)")
    parser.add_argument("--save", type=Path, help="write the per-prompt scores here (JSON)")
    parser.add_argument("--scores", type=Path, help="read per-prompt scores saved by --save instead of probing")
    args = parser.parse_args()

    if args.scores:
        saved = json.loads(args.scores.read_text())
        print(f"scores from {args.scores}: {json.dumps(saved['settings'])}")
        for name, part in saved["datasets"].items():
            print_report(name, part["scores"], part["seconds"], args.budgets, args.seed)
        return

    gsm8k, bbh = DATASETS / "gsm8k" / "test.jsonl", DATASETS / "bbh"
    missing = [str(p) for p in (gsm8k, *(bbh / f"{t}.json" for t in args.bbh_tasks)) if not p.is_file()]
    if missing:
        print(f"label_free_trust: skipped, the full datasets are not here ({', '.join(missing)} missing). They "
              f"are optional and not in the repository; see ../shared/datasets/README.md for their sources.")
        return

    settings = {"model": args.model, "k": args.k, "temperature": args.temperature,
                "max_new_tokens": args.max_new_tokens, "grading_policy": args.grading_policy, "seed": args.seed,
                "template": "default chat template", "bbh_tasks": args.bbh_tasks}
    import torch

    from worker.engines import get_engine

    if args.threads:
        torch.set_num_threads(args.threads)

    if args.device:
        from worker.engines.transformers_engine import TransformersEngine

        engine = TransformersEngine(args.model, device=args.device)
    else:
        engine = get_engine(args.model)
    device = getattr(engine, "device", "?")
    print(f"model {args.model} via {type(engine).__name__} on {device}, {torch.get_num_threads()} threads; "
          f"k={args.k}, temperature {args.temperature}, max_new_tokens {args.max_new_tokens}, "
          f"{args.grading_policy} grading, seed {args.seed}", flush=True)
    datasets = {}
    for name, rows, task_type in (
            (f"GSM8K test, first {args.gsm8k_prompts}", gsm8k_rows(gsm8k, args.gsm8k_prompts), "numeric"),
            (f"BBH {', '.join(args.bbh_tasks)}: {args.bbh_prompts}", bbh_rows(bbh, args.bbh_tasks, args.bbh_prompts),
             "choice")):
        if not rows:  # --gsm8k-prompts 0 or --bbh-prompts 0: that dataset is skipped
            continue
        print(f"probing {name} ({task_type})", flush=True)
        scores, seconds = probe_scores(engine, rows, task_type, settings)
        datasets[name] = {"scores": scores, "seconds": seconds}
        print_report(name, scores, seconds, args.budgets, args.seed)
        if args.save:
            args.save.write_text(json.dumps({"settings": settings, "datasets": datasets}))


if __name__ == "__main__":
    main()
