"""Scale-out: probe throughput with 1 and then 2 real Celery workers on the same data, and the ratio.

What it does:
1. creates a fresh Postgres database (migrated with alembic; dropped at the end) and uses Redis as the broker
   under a key prefix of its own (BUDGETLAB_BROKER_PREFIX; its keys are deleted at the end);
2. materialises the model once in the usual artifact store (default: SmolLM2-135M-Instruct, converted from the
   GGUF; the tiny random model when that package is missing) and writes one pool of GSM8K questions
   (../shared/datasets/gsm8k/test.jsonl, or the repository's 40-row slice in tests/data when that is missing);
3. for 1, then 2 workers: starts that many `celery -A worker.main worker -Q gpu --pool=solo --concurrency=1`
   processes (as tests/conftest.py starts them), each with OMP_NUM_THREADS=1 (one torch thread per worker,
   so 2 workers do not get twice the threads of 1 and fight over them); sends small warm-up probes until every
   worker has run a shard (loading the model is not timed); then writes a probe of the pool with --shards shards
   (same settings and seed each time, so the same tokens), sends it with
   ``backend.jobs.dispatch.commit_and_send`` and times it until its job succeeds; stops the workers;
4. prints prompts/s and samples/s per worker count, the ratio 2 workers / 1 worker (of the medians, with
   --repeats alternating the counts), how many shards each worker completed (``job_task.completed_by``), the
   most claims of any task (1: no shard ran twice), the share of a core each worker got (its CPU time / wall
   time; below 1 when other processes used the cores) and samples per worker CPU-second.

The ratio is bounded by the machine's cores: on 2 CPU cores it cannot exceed 2, and other processes on the
same cores pull it down. On a GPU machine both workers would share one GPU.

Usage: .venv/bin/python bench/worker_scaling.py [--prompts 32] [--shards 16] [--k 4] [--max-new-tokens 32]
       [--model NAME] [--data PATH.jsonl] [--workers 1 2] [--repeats 1]
Env: BUDGETLAB_BENCH_PG (admin URL, default postgresql://postgres@127.0.0.1:5432/postgres),
     BUDGETLAB_BENCH_REDIS (default redis://127.0.0.1:6379/12).
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED_DATA = ROOT.parent / "shared" / "datasets" / "gsm8k" / "test.jsonl"
REPO_DATA = ROOT / "tests" / "data" / "gsm8k" / "test.jsonl"
PG_ADMIN = os.environ.get("BUDGETLAB_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("BUDGETLAB_BENCH_REDIS", "redis://127.0.0.1:6379/12")
THREADS_PER_WORKER = "1"

from bench.probe_speed import read_questions  # noqa: E402  (after ROOT is on the path)
from tests.conftest import start_worker, stop_worker  # noqa: E402  (a real worker, as the tests start one)


def pick_data(path: Path | None) -> Path:
    if path is not None:
        if not path.is_file():
            sys.exit(f"worker_scaling: no dataset at {path}")
        return path
    if SHARED_DATA.is_file():
        return SHARED_DATA
    print(f"note: no dataset at {SHARED_DATA} (the full GSM8K test set is optional, see tests/data/README.md); "
          f"using the repository's 40-row slice {REPO_DATA.relative_to(ROOT)}")
    return REPO_DATA


def pick_model(name: str | None) -> str:
    from backend.models_catalog import TINY_MODEL
    from backend.settings import DEFAULT_MODEL

    if name:
        return name
    from worker.model_store import ModelLoadError, default_gguf_path

    try:
        default_gguf_path()
        return DEFAULT_MODEL
    except ModelLoadError as exc:
        print(f"note: the default model is not available ({exc}); using {TINY_MODEL}, whose outputs are noise")
        return TINY_MODEL


# --- services ---------------------------------------------------------------------------------------


def create_database() -> tuple[str, str]:
    import psycopg

    name = f"budgetlab_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, f"{PG_ADMIN.rsplit('/', 1)[0]}/{name}"


def drop_database(name: str) -> None:
    import psycopg

    from backend.database import get_engine

    get_engine().dispose()
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def delete_broker_keys(prefix: str) -> int:
    import redis

    broker = redis.Redis.from_url(REDIS_URL)
    keys = list(broker.scan_iter(f"{prefix}*"))
    if keys:
        broker.delete(*keys)
    return len(keys)


# --- pools, probes, jobs ----------------------------------------------------------------------------


def make_pool(name: str, rows: list[dict]) -> int:
    from backend.curation.grading import parse_gold
    from backend.database import session_scope
    from backend.pools.tables import Pool, Prompt

    with session_scope() as session:
        pool = Pool(name=name, task_type="numeric", has_answers=True, prompt_count=len(rows))
        session.add(pool)
        session.flush()
        for position, row in enumerate(rows):
            session.add(Prompt(pool_id=pool.id, position=position, external_id=str(position), text=row["question"],
                               answer=row["answer"], gold=parse_gold(row["answer"], "numeric")))
        return pool.id


def send_probe(pool_id: int, *, model: str, k: int, max_new_tokens: int, seed: int, shard_size: int) -> tuple[int, int]:
    """Write a probe of the pool and send its shards after the commit; (probe id, job id)."""
    from backend.database import session_scope
    from backend.jobs.dispatch import commit_and_send
    from backend.probes.schemas import ProbeCreate
    from backend.probes.service import create_probe

    with session_scope() as session:
        probe = create_probe(session, ProbeCreate(pool_id=pool_id, model=model, k=k, temperature=1.0,
                                                  max_new_tokens=max_new_tokens, seed=seed), shard_size)
        probe_id, job_id = probe.id, probe.job_id
        problems = commit_and_send(session, [job_id])
    if problems:
        raise SystemExit(f"could not send probe {probe_id}: {'; '.join(problems)}")
    return probe_id, job_id


def wait_for_job(job_id: int, timeout: float) -> str:
    from backend.database import session_scope
    from backend.jobs.tables import Job

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with session_scope() as session:
            job = session.get(Job, job_id)
            if job.status in ("succeeded", "failed", "cancelled"):
                if job.status != "succeeded":
                    raise SystemExit(f"job {job_id} ended {job.status}: {job.message}")
                return job.status
        time.sleep(0.1)
    raise SystemExit(f"job {job_id} did not finish in {timeout:.0f} s")


def shards_by_worker(job_id: int, procs: list[subprocess.Popen]) -> tuple[list[int], int]:
    """Shards each worker completed (by the pid in completed_by, "delivery@host:pid"), and the most claims of
    any task of the job."""
    from sqlalchemy import func
    from sqlmodel import select

    from backend.database import session_scope
    from backend.jobs.tables import JobTask

    with session_scope() as session:
        owners = session.exec(select(JobTask.completed_by).where(JobTask.job_id == job_id)).all()
        most_claims = session.exec(select(func.max(JobTask.claims)).where(JobTask.job_id == job_id)).one()
    pids = collections.Counter(int(owner.rsplit(":", 1)[1]) for owner in owners if owner)
    return [pids.get(proc.pid, 0) for proc in procs], int(most_claims or 0)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def warm_up(procs: list[subprocess.Popen], pool_id: int, model: str) -> None:
    """Each worker loads the model on its first task: run small probes until every worker has done one."""
    for _ in range(5):
        _, job_id = send_probe(pool_id, model=model, k=1, max_new_tokens=2, seed=0, shard_size=1)
        wait_for_job(job_id, timeout=600)
        done, _ = shards_by_worker(job_id, procs)
        if all(done):
            return
    print(f"note: not every worker took a warm-up shard ({done}); the timed run includes a model load")


def measure(workers: int, env: dict[str, str], logs: Path, pools: tuple[int, int], args) -> dict:
    pool_id, warm_pool_id = pools
    procs = []
    try:
        for index in range(workers):
            procs.append(start_worker(env, logs / f"{workers}w-worker-{index}.log", queues="gpu"))
        warm_up(procs, warm_pool_id, args.model)
        cpu_before = [cpu_seconds(proc.pid) for proc in procs]
        started = time.perf_counter()
        _, job_id = send_probe(pool_id, model=args.model, k=args.k, max_new_tokens=args.max_new_tokens,
                               seed=args.seed, shard_size=args.shard_size)
        wait_for_job(job_id, timeout=args.timeout)
        seconds = time.perf_counter() - started
        # Share of a core each worker got while timed: below 1, other processes took the rest.
        cpu_share = [(cpu_seconds(proc.pid) - before) / seconds for proc, before in zip(procs, cpu_before, strict=True)]
        per_worker, most_claims = shards_by_worker(job_id, procs)
    finally:
        for proc in procs:
            stop_worker(proc)
    return {"workers": workers, "seconds": seconds, "prompts_per_s": args.prompts / seconds,
            "samples_per_s": args.prompts * args.k / seconds, "per_worker": per_worker, "most_claims": most_claims,
            "cpu_share": cpu_share, "load": os.getloadavg()[0]}  # other processes on the same cores show here


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="JSONL with question/answer fields")
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="default: SmolLM2-135M-Instruct, or the tiny model without it")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=1, help="rounds of every worker count, alternating")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for one timed probe")
    args = parser.parse_args()

    rows = read_questions(pick_data(args.data), args.prompts)
    if len(rows) < args.prompts:
        print(f"note: the dataset has {len(rows)} rows; probing {len(rows)} prompts")
        args.prompts = len(rows)
    args.shard_size = math.ceil(args.prompts / args.shards)

    from backend.settings import get_settings

    artifacts = str(get_settings().artifacts)  # the usual store, where the converted model is kept
    args.model = pick_model(args.model)
    from worker.model_store import default_dtype, ensure_checkpoint

    ensure_checkpoint(args.model)  # converted once here, not by two workers at the same time

    import backend.job_kinds  # noqa: F401  (registers every job kind, as the API and the workers do)
    from backend.database import get_engine
    from backend.migrate import upgrade_head

    db_name, db_url = create_database()
    prefix = f"budgetlab-bench-{uuid.uuid4().hex[:8]}:"
    tmp = tempfile.TemporaryDirectory(prefix="worker-scaling-")
    env = {"DATABASE_URL": db_url, "CELERY_BROKER_URL": REDIS_URL, "BUDGETLAB_BROKER_PREFIX": prefix,
           "BUDGETLAB_DATA_DIR": tmp.name, "BUDGETLAB_ARTIFACT_DIR": artifacts}
    os.environ.update(env)
    get_settings.cache_clear()
    get_engine.cache_clear()
    worker_env = {**os.environ, "OMP_NUM_THREADS": THREADS_PER_WORKER, "MKL_NUM_THREADS": THREADS_PER_WORKER}
    try:
        upgrade_head(db_url)
        pools = (make_pool("scaling", rows), make_pool("warm-up", rows[:8]))
        shards = math.ceil(args.prompts / args.shard_size)
        print(f"model {args.model} on cpu ({str(default_dtype('cpu')).replace('torch.', '')}), "
              f"{THREADS_PER_WORKER} torch thread per worker (OMP_NUM_THREADS), "
              f"{os.cpu_count()} CPU cores; Postgres + Redis")
        print(f"{args.prompts} prompts x k={args.k} = {args.prompts * args.k} samples, max_new_tokens="
              f"{args.max_new_tokens}, temperature 1.0, {shards} shards of {args.shard_size} prompts, "
              "same pool and seed for every worker count", flush=True)
        rates: dict[int, list[float]] = collections.defaultdict(list)
        for _ in range(args.repeats):
            for workers in args.workers:
                result = measure(workers, worker_env, Path(tmp.name), pools, args)
                rates[workers].append(result["samples_per_s"])
                print(f"{workers} worker{'s' if workers > 1 else ' '}: {result['seconds']:6.1f} s, "
                      f"{result['prompts_per_s']:.2f} prompts/s, {result['samples_per_s']:.2f} samples/s; "
                      f"shards per worker {result['per_worker']}, most claims of a task {result['most_claims']}, "
                      f"CPU per worker {', '.join(f'{c:.2f}' for c in result['cpu_share'])} of a core, "
                      f"load average {result['load']:.1f}; "
                      f"{args.prompts * args.k / (sum(result['cpu_share']) * result['seconds']):.2f} samples per "
                      "worker CPU-second"
                      + ("" if result["most_claims"] == 1 else "  (a shard ran more than once!)"), flush=True)
        base = args.workers[0]
        for workers in args.workers[1:]:
            median, base_median = statistics.median(rates[workers]), statistics.median(rates[base])
            print(f"ratio {workers}w/{base}w: {median / base_median:.2f} (median samples/s {median:.2f} / "
                  f"{base_median:.2f} over {args.repeats} round{'s' if args.repeats > 1 else ''})")
        print(f"bounded by the cores: {os.cpu_count()} CPU cores here, so 2 workers (1 thread each) can at most "
              "double the throughput, less when other processes share those cores")
    finally:
        drop_database(db_name)
        delete_broker_keys(prefix)
        tmp.cleanup()


if __name__ == "__main__":
    main()
