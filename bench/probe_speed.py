"""Probe speed: the probe job against a bare batched ``model.generate`` loop, same model and settings.

What it does:
1. loads the model once (default: SmolLM2-135M-Instruct on the CPU) through the transformers engine;
2. bare loop: renders N GSM8K questions with the default template and calls ``model.generate`` on
   batches of the engine's size with the same sampling settings and per-batch seeds, and times it;
3. probe job: writes a pool of the same N questions and a probe (one shard by default) to a real
   database -- SQLite in a temp dir, or DATABASE_URL when set (migrated with alembic) -- and runs
   ``worker.probing.run_probe`` on it with the already loaded engine (each shard's task claimed and run
   through the job engine in this process): generation, a beat between batches (progress, lease renewal,
   cancel check), grading, scoring and the bulk insert of samples and scores with the task's completion;
4. prints samples/s of the bare loop, of the job as it measured itself (samples / generation seconds,
   stored in probe.samples_per_second) and end to end (samples / wall time of run_probe), and the
   ratios to the bare loop (target >= 0.9). Bare loop and job get the same seeds, so they generate the
   same tokens (checked), and the comparison is of equal work.

Repeats alternate bare and job runs (the machine may be shared); medians are printed last.

Usage: .venv/bin/python bench/probe_speed.py [--prompts 16] [--k 4] [--max-new-tokens 64]
       [--temperature 1.0] [--repeats 3] [--data PATH.jsonl] [--model NAME] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_DATA = ROOT.parent / "shared" / "datasets" / "gsm8k" / "test.jsonl"


def read_questions(path: Path, n: int) -> list[dict]:
    rows = []
    with path.open() as handle:
        for line in handle:
            row = json.loads(line)
            rows.append({"question": row.get("question") or row.get("prompt") or row.get("problem"),
                         "answer": str(row.get("answer", ""))})
            if len(rows) == n:
                break
    return rows


def bare_loop(engine, prompts: list[str], *, k: int, temperature: float, max_new_tokens: int,
              seed: int) -> tuple[float, list[list[str]]]:
    """Plain batched ``model.generate``: the same batches, seeds and sampling as the engine uses."""
    import torch

    from worker.engines.base import derive_seed

    model, tokenizer = engine.model, engine.tokenizer
    chunk = engine.prompts_per_batch(k)
    sampling = ({"do_sample": False} if temperature == 0 else
                {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0, "num_return_sequences": k})
    completions: list[list[str]] = []
    started = time.perf_counter()
    for start in range(0, len(prompts), chunk):
        torch.manual_seed(derive_seed(seed, start))
        inputs = tokenizer(prompts[start:start + chunk], return_tensors="pt", padding=True,
                           add_special_tokens=False).to(model.device)
        with torch.inference_mode():
            output = model.generate(**inputs, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                    **sampling)
        texts = tokenizer.batch_decode(output[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        per = 1 if temperature == 0 else k
        completions.extend(texts[i * per:(i + 1) * per] for i in range(len(texts) // per))
    return time.perf_counter() - started, completions


def make_probe(rows: list[dict], args) -> int:
    from backend.curation.grading import parse_gold
    from backend.database import session_scope
    from backend.pools.tables import Pool, Prompt
    from backend.probes.schemas import ProbeCreate
    from backend.probes.service import create_probe

    with session_scope() as session:
        pool = Pool(name="probe-speed", task_type="numeric", has_answers=True, prompt_count=len(rows))
        session.add(pool)
        session.flush()
        for position, row in enumerate(rows):
            session.add(Prompt(pool_id=pool.id, position=position, external_id=str(position), text=row["question"],
                               answer=row["answer"], gold=parse_gold(row["answer"], "numeric")))
        session.flush()
        probe = create_probe(session, ProbeCreate(pool_id=pool.id, model=args.model, k=args.k,
                                                  temperature=args.temperature, max_new_tokens=args.max_new_tokens,
                                                  seed=args.seed), args.shard_size)
        return probe.id


def probe_run(engine, rows: list[dict], args) -> tuple[float, float, list[list[str]]]:
    from sqlmodel import select

    from backend.database import session_scope
    from backend.probes.tables import Probe, Sample
    from worker.probing import run_probe

    probe_id = make_probe(rows, args)
    started = time.perf_counter()
    status = run_probe(probe_id, engine=engine)
    wall = time.perf_counter() - started
    if status != "succeeded":
        raise SystemExit(f"probe {probe_id} ended {status}")
    with session_scope() as session:
        measured = session.get(Probe, probe_id).samples_per_second
        samples = session.exec(select(Sample).where(Sample.probe_id == probe_id)
                               .order_by(Sample.prompt_id, Sample.sample_index)).all()
    completions = [[s.completion for s in samples[i:i + args.k]] for i in range(0, len(samples), args.k)]
    return measured, wall, completions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="JSONL with question/answer fields")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shard-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="SmolLM2-135M-Instruct")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if available)")
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"probe_speed: no dataset at {args.data}. The full GSM8K test set is optional and not in the "
                 f"repository: put it there (see tests/data/README.md for its source) or pass --data PATH.jsonl "
                 f"(tests/data/gsm8k/test.jsonl is a 40-row slice).")

    from backend.settings import get_settings

    # Keep using the usual artifact store (the converted model), whatever the database is.
    os.environ.setdefault("BUDGETLAB_ARTIFACT_DIR", str(get_settings().artifacts))
    tmp = tempfile.TemporaryDirectory(prefix="probe-speed-")
    if not os.environ.get("DATABASE_URL"):
        os.environ["BUDGETLAB_DATA_DIR"] = tmp.name
    get_settings.cache_clear()
    settings = get_settings()

    from backend.migrate import upgrade_head
    from worker.engines.transformers_engine import TransformersEngine

    upgrade_head(settings.sqlalchemy_url)
    rows = read_questions(args.data, args.prompts)
    t0 = time.perf_counter()
    engine = TransformersEngine(args.model, device=args.device)
    load_seconds = time.perf_counter() - t0
    prompts = engine.render([row["question"] for row in rows])
    engine.generate(prompts[:1], k=1, temperature=1.0, max_new_tokens=4, seed=0)  # warm-up

    import torch

    samples = len(rows) * args.k
    print(f"model {args.model} on {engine.device} ({engine.model.dtype}, {torch.get_num_threads()} threads), "
          f"load {load_seconds:.1f} s; database {settings.sqlalchemy_url.split('://')[0]}")
    print(f"{len(rows)} prompts x k={args.k} = {samples} samples, max_new_tokens={args.max_new_tokens}, "
          f"temperature={args.temperature}, {engine.prompts_per_batch(args.k)} prompts per generate call")
    bare_rates, job_rates, e2e_rates = [], [], []
    for repeat in range(args.repeats):
        bare_seconds, bare_out = bare_loop(engine, prompts, k=args.k, temperature=args.temperature,
                                           max_new_tokens=args.max_new_tokens, seed=args.seed)
        measured, wall, job_out = probe_run(engine, rows, args)
        from worker.probing import storable_text

        stored = [[storable_text(text) for text in outs] for outs in bare_out]
        same = "same tokens" if stored == job_out else "DIFFERENT completions"
        bare_rates.append(samples / bare_seconds)
        job_rates.append(measured)
        e2e_rates.append(samples / wall)
        print(f"run {repeat + 1}: bare {bare_rates[-1]:.2f} samples/s ({bare_seconds:.1f} s) | job {measured:.2f} "
              f"samples/s | end to end {e2e_rates[-1]:.2f} samples/s ({wall:.1f} s) | "
              f"ratio job {measured / bare_rates[-1]:.3f}, end to end {e2e_rates[-1] / bare_rates[-1]:.3f} | "
              f"outside generation {wall - samples / measured:.3f} s | {same}", flush=True)
    bare, job, e2e = (statistics.median(r) for r in (bare_rates, job_rates, e2e_rates))
    print(f"median: bare {bare:.2f} samples/s, job {job:.2f} samples/s (ratio {job / bare:.3f}), "
          f"end to end {e2e:.2f} samples/s (ratio {e2e / bare:.3f}); target >= 0.9")
    tmp.cleanup()


if __name__ == "__main__":
    main()
