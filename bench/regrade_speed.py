"""Re-grading a pool's stored probe samples when labels arrive: `regrade_pool` against grading the same
samples in memory, on SQLite and on Postgres, at the sizes around BUDGETLAB_REGRADE_INLINE_SAMPLES.

For each database and size it writes a numeric pool of P prompts with a finished label-free probe of
k samples each straight to the database (extracted answers like "12", no model), then writes a gold
answer into every prompt (`Prompt.answer`/`gold`, committed, timed apart) and times, alternating:
- baseline: `grade_answers` + `score_prompt` per prompt on the same extracted answers, in memory, as
  the probe worker grades a shard (no database);
- regrade: `regrade_pool` for all prompts in one session, commit included. Round 1 is the import that
  labels the last prompts (the probe's basis flips to pass rates); later rounds re-import the same
  answers, which re-grades the same samples.
The samples' pass counts are checked after each re-grade, so both sides did the whole job.

The database is ANALYZEd after the probe is written, as autovacuum would soon do. `--stale-stats` skips
that: on Postgres the planner may then pick, once psycopg prepares the statement, a generic plan that
filters each batch's `prompt_id IN (500 parameters)` by a linear search over the probe's rows.

Usage:  nice .venv/bin/python bench/regrade_speed.py [--sizes 20000 200000] [--k 8] [--rounds 3]
            [--databases sqlite postgres] [--stale-stats] [--pg postgresql://postgres@127.0.0.1:5432/postgres]
Prints samples/s for both, their ratio (regrade / baseline) and the wall time of a re-grade, which
an import at or under the inline threshold makes the API request wait for.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TASK_TYPE = "numeric"
BATCH = 20_000  # sample rows per bulk insert while building the probe


def point_at(url: str, data_dir: Path) -> None:
    """Settings and engine are cached per process; point them at this database."""
    os.environ["DATABASE_URL"] = url
    os.environ["BUDGETLAB_DATA_DIR"] = str(data_dir)
    clear_caches()


def clear_caches() -> None:
    from backend.database import get_engine
    from backend.settings import get_settings

    if get_engine.cache_info().currsize:
        get_engine().dispose()
    get_engine.cache_clear()
    get_settings.cache_clear()


def gold_for(position: int) -> str:
    return str(position % 997 + 2)


def answers_for(position: int, k: int) -> list[str]:
    """Position i's k extracted answers: i % (k + 1) of them are the gold answer, the rest near misses."""
    gold = int(gold_for(position))
    right = position % (k + 1)
    return [str(gold)] * right + [str(gold + 1 + j % 3) for j in range(k - right)]


def build(prompts: int, k: int) -> tuple[int, list[int]]:
    """A label-free numeric pool with a finished probe whose samples are written directly. (pool id, prompt ids)"""
    from sqlalchemy import insert
    from sqlmodel import select

    from backend.curation.scores import score_prompt
    from backend.database import session_scope
    from backend.jobs.service import create_job, transition
    from backend.jobs.tables import JobStatus
    from backend.pools.tables import Pool, Prompt
    from backend.probes.tables import Probe, PromptScore, Sample

    with session_scope() as session:
        pool = Pool(name=f"regrade bench {prompts}", task_type=TASK_TYPE, has_answers=False, prompt_count=prompts)
        session.add(pool)
        session.flush()
        session.execute(insert(Prompt), [
            {"pool_id": pool.id, "position": i, "external_id": f"q{i}",
             "text": f"Tom has {i} apples and buys {i % 7} more. How many apples now?", "answer": None, "gold": None}
            for i in range(prompts)])
        ids = list(session.exec(select(Prompt.id).where(Prompt.pool_id == pool.id).order_by(Prompt.position)))
        job = create_job(session, "probe", total=prompts)
        probe = Probe(pool_id=pool.id, job_id=job.id, model="bench", k=k, temperature=1.0, max_new_tokens=256,
                      seed=0, label_free=True, shard_size=256, prompt_count=prompts)
        session.add(probe)
        session.flush()
        scores, samples = [], []
        for position, prompt_id in enumerate(ids):
            extracted = answers_for(position, k)
            score = score_prompt(extracted, None, by_agreement=True)
            scores.append({"probe_id": probe.id, "prompt_id": prompt_id, "k": k, "correct_count": None,
                           "pass_rate": None, "wilson_low": None, "wilson_high": None, "agreement": score.agreement,
                           "majority_answer": score.majority_answer, "base_wrong": score.base_wrong,
                           "difficulty": score.difficulty})
            samples.extend({"probe_id": probe.id, "prompt_id": prompt_id, "sample_index": j,
                            "completion": f"So the answer is \\boxed{{{answer}}}.", "extracted_answer": answer,
                            "correct": None} for j, answer in enumerate(extracted))
            if len(samples) >= BATCH:
                session.execute(insert(Sample), samples)
                samples = []
        if samples:
            session.execute(insert(Sample), samples)
        session.execute(insert(PromptScore), scores)
        transition(session, job, JobStatus.running, "bench")
        transition(session, job, JobStatus.succeeded, "bench")
        return pool.id, ids


def analyze() -> None:
    """Planner statistics as a server with autovacuum has them shortly after the probe's bulk insert."""
    from sqlalchemy import text

    from backend.database import session_scope

    with session_scope() as session:
        session.connection().execute(text("ANALYZE"))


def write_answers(pool_id: int, ids: list[int]) -> float:
    """Every prompt gets its gold answer, as an import writes them (one executemany UPDATE). Seconds."""
    from sqlalchemy import bindparam, update

    from backend.database import session_scope
    from backend.pools.tables import Pool, Prompt

    table = Prompt.__table__
    statement = (update(table).where(table.c.id == bindparam("p_id"))
                 .values(answer=bindparam("v_answer"), gold=bindparam("v_gold")))
    start = time.perf_counter()
    with session_scope() as session:
        session.connection().execute(statement, [{"p_id": prompt_id, "v_answer": gold_for(i), "v_gold": gold_for(i)}
                                                 for i, prompt_id in enumerate(ids)])
        pool = session.get(Pool, pool_id)
        pool.has_answers = True
        session.add(pool)
    return time.perf_counter() - start


def regrade(pool_id: int, ids: list[int], expected_correct: int) -> tuple[float, int]:
    """`regrade_pool` for these prompts in one session, commit included: (seconds, samples re-graded)."""
    from sqlalchemy import func
    from sqlmodel import select

    from backend.database import session_scope
    from backend.labels.regrade import regrade_pool
    from backend.pools.tables import Pool
    from backend.probes.tables import Probe, PromptScore

    start = time.perf_counter()
    with session_scope() as session:
        pool = session.get(Pool, pool_id)
        done = regrade_pool(session, pool, ids)["samples"]
    seconds = time.perf_counter() - start
    with session_scope() as session:
        correct = session.exec(select(func.sum(PromptScore.correct_count)).join(Probe, Probe.id == PromptScore.probe_id)
                               .where(Probe.pool_id == pool_id)).one()
    assert correct == expected_correct, (correct, expected_correct)
    return seconds, done


def baseline(answers: list[list[str]], golds: list[str], texts: list[str]) -> float:
    """The probe worker's grading of the same samples in memory (grade_shard without extraction). Seconds."""
    from backend.curation.grading import grade_answers, question_options
    from backend.curation.scores import score_prompt

    start = time.perf_counter()
    total = 0
    for extracted, gold, text in zip(answers, golds, texts, strict=True):
        correct = grade_answers(extracted, gold, TASK_TYPE, "lenient", question_options(TASK_TYPE, text))
        total += score_prompt(extracted, correct, by_agreement=False).correct_count
    seconds = time.perf_counter() - start
    assert total == sum(sum(a == g for a in extracted) for extracted, g in zip(answers, golds, strict=True))
    return seconds


def run_size(samples: int, k: int, rounds: int, stale_stats: bool) -> dict:
    prompts = samples // k
    t0 = time.perf_counter()
    pool_id, ids = build(prompts, k)
    if not stale_stats:
        analyze()
    built = time.perf_counter() - t0
    answers = [answers_for(i, k) for i in range(prompts)]
    golds = [gold_for(i) for i in range(prompts)]
    texts = [f"Tom has {i} apples and buys {i % 7} more. How many apples now?" for i in range(prompts)]
    expected = sum(i % (k + 1) for i in range(prompts))
    answers_seconds = write_answers(pool_id, ids)
    base, regr = [], []
    for _ in range(rounds):
        base.append(baseline(answers, golds, texts))
        seconds, done = regrade(pool_id, ids, expected)
        assert done == prompts * k, (done, prompts * k)
        regr.append(seconds)
    return {"samples": prompts * k, "prompts": prompts, "built": built, "answers": answers_seconds,
            "baseline": statistics.median(base), "regrade": statistics.median(regr), "first": regr[0],
            "regrade_all": regr}


def report(result: dict) -> None:
    n = result["samples"]
    base, regr = n / result["baseline"], n / result["regrade"]
    print(f"  {n:>9,} samples ({result['prompts']:,} prompts): built in {result['built']:.1f}s, "
          f"answers written in {result['answers']:.2f}s")
    print(f"    baseline, in memory:    {base:>10,.0f} samples/s  ({result['baseline']:.2f}s)")
    print(f"    regrade_pool + commit:  {regr:>10,.0f} samples/s  ({result['regrade']:.2f}s median; rounds "
          + ", ".join(f"{s:.2f}s" for s in result["regrade_all"]) + ")")
    print(f"    ratio regrade / baseline: {regr / base:.2f}   first re-grade (basis flips): {result['first']:.2f}s")


def run_database(database: str, url: str, data_dir: Path, args: argparse.Namespace) -> list[dict]:
    from backend.migrate import upgrade_head

    upgrade_head(url)
    point_at(url, data_dir)
    print(f"{database}:")
    results = []
    try:
        for samples in args.sizes:
            result = run_size(samples, args.k, args.rounds, args.stale_stats)
            report(result)
            results.append(result)
    finally:
        clear_caches()
    return results


def with_postgres(admin: str, body: Callable[[str], list[dict]]) -> list[dict] | None:
    name = f"budgetlab_bench_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as error:
        print(f"Postgres: skipped, {admin} is unreachable ({str(error).strip().splitlines()[0]}); "
              "start Postgres or pass --pg.")
        return None
    try:
        return body(f"{admin.rsplit('/', 1)[0]}/{name}")
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 200_000], help="samples (P x k)")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--databases", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"])
    parser.add_argument("--stale-stats", action="store_true",
                        help="skip ANALYZE after writing the probe (a server without autovacuum, or before it runs)")
    parser.add_argument("--pg", default=os.environ.get("BUDGETLAB_BENCH_PG",
                                                       "postgresql://postgres@127.0.0.1:5432/postgres"))
    args = parser.parse_args()
    from backend.settings import get_settings

    print(f"k = {args.k}, {args.rounds} rounds per size (medians), planner statistics "
          f"{'as the probe left them' if args.stale_stats else 'fresh (ANALYZE after the probe)'}, inline threshold "
          f"BUDGETLAB_REGRADE_INLINE_SAMPLES = {get_settings().regrade_inline_samples:,}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        if "sqlite" in args.databases:
            run_database("SQLite (temp file, WAL)", f"sqlite:///{tmp_path / 'bench.db'}", tmp_path, args)
        if "postgres" in args.databases:
            with_postgres(args.pg, lambda url: run_database("Postgres (fresh database)", url, tmp_path, args))


if __name__ == "__main__":
    main()
