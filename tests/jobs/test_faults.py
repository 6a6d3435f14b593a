"""Fault tests of the job engine on real parts (issue 9): Postgres, Redis, real Celery worker processes and a
real reconciler process, the tiny model. Each case states the bound it holds the recovery to; what they
measured is written up in docs/reliability.md.

Each test has a database and a broker key prefix of its own: the session's worker never takes its tasks, and its
reconciler never sees other tests' jobs.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import select

from backend.database import session_scope
from backend.jobs.tables import Job, JobTask
from backend.probes.tables import ProbeShard, PromptScore, Sample
from tests.conftest import ROOT, clear_caches, start_worker, stop_worker
from tests.jobs.ledger import job_of, reasons, tasks_of
from tests.worker.test_probing import make_pool, make_probe

LEASE = 20  # seconds: a lost worker's task is noticed this long after its last beat (CI: 2 loaded cores)
K = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def own_broker(service_env, own_database, monkeypatch, service_tiny_model):
    """Settings for this test's processes: a database and a broker prefix of its own, short leases."""
    env = {**service_env, **own_database, "BUDGETLAB_LEASE_SECONDS": str(LEASE), "BUDGETLAB_RECONCILE_SECONDS": "1"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    clear_caches()
    yield env
    monkeypatch.undo()
    clear_caches()


@contextmanager
def workers(env: dict, tmp_path: Path, count: int):
    procs = [start_worker(env, tmp_path / f"worker-{i}.log") for i in range(count)]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                stop_worker(proc)


@contextmanager
def reconciler(env: dict, tmp_path: Path):
    """`budgetlab reconcile`, as its compose service runs it, every second."""
    log = open(tmp_path / "reconcile.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "backend.cli", "reconcile", "--every", "1"], cwd=ROOT,
                            env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)



def wait_until(condition, timeout: float, what: str, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"{what}: not within {timeout}s")


def wait_for_end(job_id: int, timeout: float) -> Job:
    return wait_until(lambda: (job := job_of(job_id)).status in ("succeeded", "failed", "cancelled") and job,
                      timeout, f"job {job_id} to end", step=0.2)


def per_prompt_counts(probe_id: int) -> tuple[list[int], list[int]]:
    """Scores per prompt and samples per prompt (every prompt of the probe's pool appears once in each)."""
    with session_scope() as session:
        scores = session.exec(select(func.count()).select_from(PromptScore).where(PromptScore.probe_id == probe_id)
                              .group_by(PromptScore.prompt_id)).all()
        samples = session.exec(select(func.count()).select_from(Sample).where(Sample.probe_id == probe_id)
                               .group_by(Sample.prompt_id)).all()
    return list(scores), list(samples)




def send(job_id: int) -> None:
    from backend.jobs.dispatch import commit_and_send

    with session_scope() as session:
        assert commit_and_send(session, [job_id]) == []


def held_by(job_id: int, pid: int) -> JobTask | None:
    return next((t for t in tasks_of(job_id) if t.lease_owner and t.lease_owner.endswith(f":{pid}")
                 and t.completed_at is None), None)


# --- 1. SIGKILL a worker in the middle of a shard ------------------------------------------------------


def test_a_worker_killed_mid_shard_loses_nothing(own_broker, tmp_path):
    prompts, shard = 16, 2
    probe_id, job_id = make_probe(make_pool(prompts), shard_size=shard, k=K, max_new_tokens=16)
    with workers(own_broker, tmp_path, 2) as (victim, survivor), reconciler(own_broker, tmp_path):
        send(job_id)
        # Claimed: its model is loaded (before the claim), so it is generating now.
        task = wait_until(lambda: held_by(job_id, victim.pid), 120, "the first worker to claim a shard", step=0.02)
        os.kill(victim.pid, signal.SIGKILL)
        killed = time.monotonic()
        victim.wait(timeout=30)
        job = wait_for_end(job_id, 300)
        recovered = time.monotonic() - killed
    assert job.status == "succeeded", (job.error, (tmp_path / "reconcile.log").read_text()[-2000:])
    scores, samples = per_prompt_counts(probe_id)
    assert len(scores) == len(samples) == prompts  # every prompt: exactly one score and k samples
    assert set(scores) == {1} and set(samples) == {K}
    rerun = next(t for t in tasks_of(job_id) if t.id == task.id)
    assert rerun.losses == 1 and rerun.claims == 2 and rerun.completed_by.endswith(f":{survivor.pid}")
    assert any("reconciler: the lease of" in r and "it runs again" in r for r in reasons(job_id))
    # Bound: the lease, a pass, and the rest of the work on one worker (at most every shard again).
    assert recovered < LEASE + 2 + 120, recovered
    print(f"\n[faults] case 1: job recovered {recovered:.1f}s after the SIGKILL; {prompts} prompts x {K} samples "
          f"checked ({len(scores)} scores, {sum(samples)} samples)")


# --- 2. Redis stopped and restarted while shards wait in the queue ----------------------------------------


def test_a_redis_restart_with_append_only_persistence_keeps_the_queued_shards(own_broker, monkeypatch, tmp_path):
    port = free_port()
    data = tmp_path / "redis"
    data.mkdir()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
               "--appendfsync", "everysec", "--dir", str(data)]

    def start_redis() -> subprocess.Popen:
        proc = subprocess.Popen(command, stdout=open(tmp_path / "redis.log", "a"), stderr=subprocess.STDOUT)
        wait_until(lambda: _pings(port), 30, "redis to start", step=0.1)
        return proc

    redis_proc = start_redis()
    env = {**own_broker, "CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0",
           "BUDGETLAB_RESEND_UNCLAIMED_SECONDS": "3600"}  # completion must come from the kept queue, not a resend
    monkeypatch.setenv("CELERY_BROKER_URL", env["CELERY_BROKER_URL"])
    clear_caches()
    prompts, shard = 12, 2
    probe_id, job_id = make_probe(make_pool(prompts), shard_size=shard, k=K, max_new_tokens=24)
    try:
        with workers(env, tmp_path, 1):
            send(job_id)
            wait_until(lambda: any(t.completed_at for t in tasks_of(job_id)) or None, 120, "a first shard")
            waiting = sum(1 for t in tasks_of(job_id) if t.completed_at is None)
            subprocess.run(["redis-cli", "-p", str(port), "shutdown"], check=False, capture_output=True)
            redis_proc.wait(timeout=30)
            stopped = time.monotonic()
            time.sleep(2)
            redis_proc = start_redis()
            job = wait_for_end(job_id, 300)
            recovered = time.monotonic() - stopped
    finally:
        redis_proc.terminate()
        redis_proc.wait(timeout=30)
    assert waiting >= 2, "shards should have been waiting in the queue when Redis stopped"
    assert job.status == "succeeded", job.error
    scores, samples = per_prompt_counts(probe_id)
    assert len(scores) == prompts and set(scores) == {1} and set(samples) == {K}
    assert all(t.sends == 1 for t in tasks_of(job_id))  # nothing was sent again: the append-only file kept them
    print(f"\n[faults] case 2: {waiting} shards waited through a Redis restart; job done {recovered:.1f}s after the "
          "stop")


def _pings(port: int) -> bool:
    done = subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True, check=False)
    return done.stdout.strip() == "PONG"


# --- 3. The API killed right after the commit, before dispatch ---------------------------------------------


def test_a_job_committed_by_an_api_killed_before_dispatch_still_runs(own_broker, tmp_path):
    import httpx

    from tests.conftest import ADMIN_TOKEN

    port = free_port()
    env = {**own_broker, "BUDGETLAB_PORT": str(port), "BUDGETLAB_FAULT": "kill-before-dispatch"}
    log = open(tmp_path / "serve.log", "w")
    api = subprocess.Popen([sys.executable, "-m", "backend.cli", "serve", "--no-worker", "--no-reconcile"],
                           cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: _healthy(base), 120, "the API to start", step=0.2)
    pool_id = make_pool(4)
    with pytest.raises(httpx.TransportError):  # the process dies between the commit and the send
        httpx.post(f"{base}/api/probes", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60,
                   json={"pool_id": pool_id, "model": "tiny-random-SmolLM2", "k": K, "max_new_tokens": 8})
    assert api.wait(timeout=30) == -signal.SIGKILL
    with session_scope() as session:
        job = session.exec(select(Job).where(Job.kind == "probe").order_by(Job.id.desc())).first()
        assert job.status == "queued"
        assert [t.sent_at for t in session.exec(select(JobTask).where(JobTask.job_id == job.id))] == [None]
    started = time.monotonic()
    with workers(own_broker, tmp_path, 1), reconciler(own_broker, tmp_path):
        ended = wait_for_end(job.id, 120)
    assert ended.status == "succeeded", ended.error
    assert [t.sends for t in tasks_of(job.id)] == [1]
    print(f"\n[faults] case 3: the job committed before the kill ran {time.monotonic() - started:.1f}s after a "
          "reconciler started")


def _healthy(base: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{base}/api/health", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


# --- 4. Cancel while the last shard commits, many times ------------------------------------------------


def test_cancel_racing_the_last_shards_always_leaves_a_consistent_job(own_broker):
    from backend.errors import AppError
    from backend.jobs.service import get_job, request_cancel
    from tests.worker.model_fixtures import TINY_MODEL
    from worker.engines.transformers_engine import TransformersEngine
    from worker.probing import run_probe_shard

    engine = TransformersEngine(TINY_MODEL, device="cpu")
    pool_id = make_pool(4)

    def race(attempt: int, cancel_after: float | None) -> str:
        probe_id, job_id = make_probe(pool_id, shard_size=2, k=K, max_new_tokens=6)

        def cancel() -> None:
            time.sleep(cancel_after)
            try:
                with session_scope() as session:
                    request_cancel(session, get_job(session, job_id))
            except AppError:  # already finished: nothing to cancel
                pass

        # Two shards on two threads (two workers), and the cancel landing somewhere in their run.
        threads = [threading.Thread(target=run_probe_shard, args=(probe_id, index),
                                    kwargs={"engine": engine, "delivery": f"race{attempt}-{index}"})
                   for index in (0, 1)]
        if cancel_after is not None:
            threads.append(threading.Thread(target=cancel))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        return _check_consistent(probe_id, job_id)

    started = time.monotonic()
    assert race(0, None) == "succeeded"
    duration = time.monotonic() - started  # how long the two shards take: the cancels spread over it
    outcomes = [race(attempt, duration * 1.3 * attempt / 24) for attempt in range(1, 25)]
    assert set(outcomes) <= {"succeeded", "cancelled"}
    assert len(set(outcomes)) == 2, f"the cancel should have landed both before and after the end: {outcomes}"
    print(f"\n[faults] case 4: {len(outcomes)} races, {outcomes.count('cancelled')} cancelled, "
          f"{outcomes.count('succeeded')} succeeded, all consistent")


def _check_consistent(probe_id: int, job_id: int) -> str:
    from backend.jobs.reconciler import reconcile_once

    job = job_of(job_id)
    if job.status == "cancelling":  # a cancel that arrived after both shards had beaten for the last time
        reconcile_once()  # what the reconciler settles (no worker holds a task of it)
        job = job_of(job_id)
    assert job.status in ("succeeded", "cancelled"), job.status
    with session_scope() as session:
        shards = session.exec(select(ProbeShard).where(ProbeShard.probe_id == probe_id)).all()
        done = [s for s in shards if s.completed_at is not None]
        scores = session.exec(select(func.count()).select_from(PromptScore)
                              .where(PromptScore.probe_id == probe_id)).one()
        samples = session.exec(select(func.count()).select_from(Sample).where(Sample.probe_id == probe_id)).one()
        tasks = session.exec(select(JobTask).where(JobTask.job_id == job_id)).all()
    # Results exist exactly for completed shards, all or nothing; a task is complete iff its shard is.
    assert scores == sum(s.end_position - s.first_position for s in done)
    assert samples == scores * K
    assert sorted(t.completed_at is not None for t in tasks) == sorted(s.completed_at is not None for s in shards)
    assert all(t.lease_owner is None for t in tasks if t.completed_at)
    if job.status == "succeeded":
        assert len(done) == len(shards) and job.progress_done == job.progress_total
    return job.status


# --- 5. A training step that hangs ---------------------------------------------------------------------


def test_a_hung_training_step_fails_the_run_as_lost_and_keeps_its_metrics(own_broker, tmp_path):
    from backend.runs.service import create_run
    from backend.runs.tables import RunMetric
    from tests.runs.conftest import make_subset
    from tests.worker.model_fixtures import TINY_MODEL

    with session_scope() as session:
        run = create_run(session, make_subset(), {"model": TINY_MODEL, "lora_rank": 4, "lora_alpha": 8,
                                                  "num_generations": 2, "batch_size": 2, "max_completion_length": 8,
                                                  "learning_rate": 1e-3, "max_steps": 10})
        run_id, job_id = run.id, run.job_id
    env = {**own_broker, "BUDGETLAB_FAULT": "hang-training-step:3"}  # step 3 never ends
    with workers(env, tmp_path, 1) as (worker,), reconciler(own_broker, tmp_path):
        send(job_id)
        wait_until(lambda: job_of(job_id).progress_done >= 2 or None, 180, "two steps", step=0.1)
        hung = time.monotonic()
        job = wait_for_end(job_id, 60)
        noticed = time.monotonic() - hung
        assert worker.poll() is None  # the worker is alive, only hung: its silence gave it away
    assert job.status == "failed" and "lost after step 2 of 10" in job.error, job.error
    with session_scope() as session:
        steps = set(session.exec(select(RunMetric.step).where(RunMetric.run_id == run_id)).all())
    assert steps == {1, 2}  # the finished steps' metrics are kept
    assert noticed < LEASE + 2 + 5, noticed
    print(f"\n[faults] case 5: the hung step was failed as lost {noticed:.1f}s after step 2; metrics of steps "
          f"{sorted(steps)} kept")


# --- scale-out: three workers on a many-shard probe ------------------------------------------------------


def test_three_workers_share_a_many_shard_probe_and_nothing_runs_twice(own_broker, tmp_path):
    prompts, shard = 36, 2
    probe_id, job_id = make_probe(make_pool(prompts), shard_size=shard, k=K, max_new_tokens=16)
    with workers(own_broker, tmp_path, 3) as procs:
        send(job_id)
        job = wait_for_end(job_id, 300)
    assert job.status == "succeeded", job.error
    tasks = tasks_of(job_id)
    by_worker = {proc.pid: sum(t.completed_by.endswith(f":{proc.pid}") for t in tasks) for proc in procs}
    assert all(count > 0 for count in by_worker.values()), by_worker
    assert sum(by_worker.values()) == len(tasks) == prompts // shard
    assert all(t.claims == 1 and t.sends == 1 for t in tasks)  # nothing ran twice
    scores, samples = per_prompt_counts(probe_id)
    assert len(scores) == prompts and set(scores) == {1} and set(samples) == {K}
    print(f"\n[faults] scale-out: {len(tasks)} shards over 3 workers: {sorted(by_worker.values())}")


# --- 6. The embedded default: SQLite database and broker, serve's own worker and reconciler -------------------


def test_on_the_embedded_default_a_worker_killed_mid_shard_loses_nothing(service_env, tmp_path):
    import sqlite3

    import httpx

    from tests.worker.model_fixtures import gsm8k_rows

    port = free_port()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL",
                                                            "BUDGETLAB_ADMIN_TOKEN", "BUDGETLAB_BROKER_PREFIX")}
    env.update(BUDGETLAB_DATA_DIR=str(data), BUDGETLAB_PORT=str(port), BUDGETLAB_LEASE_SECONDS=str(LEASE),
               BUDGETLAB_RECONCILE_SECONDS="1", BUDGETLAB_PROBE_SHARD_SIZE="2",
               BUDGETLAB_ARTIFACT_DIR=service_env["BUDGETLAB_ARTIFACT_DIR"])
    log_path = tmp_path / "serve.log"
    server = subprocess.Popen([sys.executable, "-m", "backend.cli", "serve"], cwd=ROOT, env=env,
                              stdout=open(log_path, "w"), stderr=subprocess.STDOUT)
    try:
        token = wait_until(lambda: next((line.rsplit(":", 1)[1].strip() for line in log_path.read_text().splitlines()
                                         if "Admin token" in line), None), 120, "serve's admin token", step=0.2)
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: _healthy(base), 120, "the API", step=0.2)
        client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        rows = gsm8k_rows(12)
        csv = "prompt,answer\n" + "".join(f'"{r["question"]}","{r["answer"]}"\n' for r in rows)
        pool = client.post("/api/pools", files={"file": ("gsm8k.csv", csv.encode())},
                           data={"name": "faults", "task_type": "numeric"}).json()
        probe = client.post("/api/probes", json={"pool_id": pool["id"], "model": "tiny-random-SmolLM2", "k": K,
                                                 "max_new_tokens": 32}).json()
        database = sqlite3.connect(data / "budgetlab.db", timeout=30)
        worker_pid = int(wait_until(lambda: subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True,
                                                           text=True).stdout.split()[0:1], 60, "the local worker")[0])

        def holding() -> bool:  # claimed: its model is loaded (before the claim), so it is generating now
            row = database.execute("SELECT count(*) FROM job_task WHERE job_id = ? AND completed_at IS NULL AND "
                                   "lease_owner LIKE ?", (probe["job_id"], f"%:{worker_pid}")).fetchone()
            return row[0] > 0

        wait_until(holding, 180, "the local worker mid-shard", step=0.02)
        os.kill(worker_pid, signal.SIGKILL)
        killed = time.monotonic()
        job = wait_until(lambda: (j := client.get(f"/api/jobs/{probe['job_id']}").json())["status"]
                         in ("succeeded", "failed", "cancelled") and j, 300, "the probe to end", step=0.5)
        recovered = time.monotonic() - killed
        assert job["status"] == "succeeded", (job, log_path.read_text()[-3000:])
        assert "restarting it" in log_path.read_text()  # serve's supervisor started a new local worker
        scores = [n for (n,) in database.execute("SELECT count(*) FROM prompt_score WHERE probe_id = ? GROUP BY "
                                                  "prompt_id", (probe["id"],))]
        samples = [n for (n,) in database.execute("SELECT count(*) FROM sample WHERE probe_id = ? GROUP BY prompt_id",
                                                   (probe["id"],))]
        losses = database.execute("SELECT sum(losses) FROM job_task WHERE job_id = ?", (probe["job_id"],)).fetchone()
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
    assert len(scores) == len(samples) == 12 and set(scores) == {1} and set(samples) == {K}
    assert losses[0] == 1
    assert recovered < LEASE + 2 + 180, recovered
    print(f"\n[faults] case 6 (embedded default): recovered {recovered:.1f}s after the SIGKILL; 12 prompts x {K} "
          "samples checked")
