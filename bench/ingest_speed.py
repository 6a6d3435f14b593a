"""Ingest speed: a 1,000,000-row JSONL upload through the real API into Postgres.

What it does:
1. creates a fresh Postgres database and migrates it (alembic upgrade head), registers a token;
2. writes a JSONL file of N rows (id, arithmetic word-problem prompt, numeric answer) to a temp dir;
3. starts the real API (uvicorn, one process) against that database;
4. uploads the file with httpx (streamed from disk, multipart) with answer and id fields mapped, and
   stops the clock when all N rows are committed and visible from another connection;
5. samples the API process's resident memory (VmRSS from /proc) every 20 ms during the upload;
6. times a plain ORM insert (session.add of Prompt objects, one commit) of the first --orm-rows of
   the same rows, already parsed (parsing not timed, which flatters the ORM), and scales it to N.

Usage:  .venv/bin/python bench/ingest_speed.py [--rows 1000000] [--orm-rows 100000]
Admin URL of the Postgres server: BUDGETLAB_BENCH_PG (default postgresql://postgres@127.0.0.1:5432/postgres).
Targets (issue): >= 100,000 rows/s end to end, >= 10x the ORM insert, API process < 500 MB resident.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PG_ADMIN = os.environ.get("BUDGETLAB_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
TOKEN = "bench-token-" + uuid.uuid4().hex[:8]
NAMES = ["Ava", "Ben", "Chloe", "Diego", "Emma", "Farid", "Grace", "Hiro", "Isla", "Jonah"]
ITEMS = ["apples", "marbles", "stickers", "pencils", "cards", "shells", "stamps", "cookies"]


def write_pool_file(path: Path, rows: int, seed: int = 0, unique_answers: bool = False) -> int:
    """Word problems whose answers repeat as real numeric answers do (about 10,000 distinct values), or
    with `unique_answers` a distinct answer per row (defeats the import's gold-answer cache)."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for i in range(rows):
            name, item = rng.choice(NAMES), rng.choice(ITEMS)
            boxes, per_box, given = rng.randint(2, 99), rng.randint(2, 99), rng.randint(1, 99)
            prompt = (f"{name} buys {boxes} boxes of {item} with {per_box} {item} in each box and gives {given} "
                      f"away. How many {item} does {name} have left?")
            answer = boxes * per_box - given
            if unique_answers:
                prompt += f" (Then add {i} more.)"
                answer += i
            out.write(json.dumps({"id": f"q{i:07d}", "prompt": prompt, "answer": str(answer)}))
            out.write("\n")
    return path.stat().st_size


def create_database() -> tuple[str, str]:
    name = f"budgetlab_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name, PG_ADMIN.rsplit("/", 1)[0] + "/" + name


def drop_database(name: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate_and_register_token(url: str) -> None:
    from alembic import command
    from alembic.config import Config
    from sqlmodel import Session

    from backend.auth.service import ensure_first_admin
    from backend.database import make_engine

    config = Config(str(ROOT / "alembic.ini"))
    config.attributes["url"] = url
    command.upgrade(config, "head")
    engine = make_engine("postgresql+psycopg://" + url.split("://", 1)[1])
    with Session(engine) as session:
        ensure_first_admin(session, TOKEN)
        session.commit()
    engine.dispose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class RssSampler(threading.Thread):
    def __init__(self, pid: int, interval: float = 0.02):
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak, self.stopped = pid, interval, 0.0, threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(self.interval)


def start_api(url: str, data_dir: Path, port: int, log_path: Path) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": url, "BUDGETLAB_ADMIN_TOKEN": TOKEN, "BUDGETLAB_DATA_DIR": str(data_dir)}
    log = log_path.open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "backend.app:create_app", "--host", "127.0.0.1",
         "--port", str(port), "--no-access-log", "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the API exited early:\n{log_path.read_text()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the API did not start:\n{log_path.read_text()}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def database_backend_cpu(url: str, db_name: str) -> float:
    """CPU seconds used so far by the Postgres backends serving `db_name` (other than this query's)."""
    with psycopg.connect(url) as conn:
        pids = [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (db_name,))]
    total = 0.0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, PermissionError):
            total += cpu_seconds(pid)
    return total


def committed_rows(url: str, pool_id: int) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM prompt WHERE pool_id = %s", (pool_id,)).fetchone()[0]


def time_orm_insert(url: str, path: Path, rows: int) -> float:
    """Seconds for session.add(Prompt(...)) x rows + commit, rows already parsed."""
    from sqlmodel import Session

    from backend.curation.grading import parse_gold
    from backend.database import make_engine
    from backend.pools.tables import Pool, Prompt

    records = []
    with path.open(encoding="utf-8") as f:
        for position, line in enumerate(f):
            if position >= rows:
                break
            obj = json.loads(line)
            records.append((position, obj["id"], obj["prompt"], obj["answer"], parse_gold(obj["answer"], "numeric")))
    engine = make_engine("postgresql+psycopg://" + url.split("://", 1)[1])
    with Session(engine) as session:
        pool = Pool(name="orm baseline", task_type="numeric", has_answers=True)
        session.add(pool)
        session.commit()
        pool_id = pool.id
        start = time.perf_counter()
        for position, external_id, text, answer, gold in records:
            session.add(Prompt(pool_id=pool_id, position=position, external_id=external_id, text=text,
                               answer=answer, gold=gold))
        session.commit()
        seconds = time.perf_counter() - start
    engine.dispose()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--orm-rows", type=int, default=100_000)
    parser.add_argument("--unique-answers", action="store_true",
                        help="a distinct answer per row (worst case for the gold-answer cache)")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database")
    args = parser.parse_args()

    db_name, url = create_database()
    proc = None
    try:
        migrate_and_register_token(url)
        with tempfile.TemporaryDirectory(prefix="budgetlab-bench-") as tmp:
            tmp_path = Path(tmp)
            path = tmp_path / "pool.jsonl"
            started = time.perf_counter()
            size = write_pool_file(path, args.rows, unique_answers=args.unique_answers)
            print(f"file: {args.rows:,} rows, {size / 1e6:.1f} MB JSONL, "
                  f"{'a distinct answer per row' if args.unique_answers else 'repeating answers'} (written in "
                  f"{time.perf_counter() - started:.1f} s)")

            port = free_port()
            proc = start_api(url, tmp_path / "data", port, tmp_path / "api.log")
            idle_rss = rss_mb(proc.pid)
            sampler = RssSampler(proc.pid)
            sampler.start()
            api_cpu_before = cpu_seconds(proc.pid)
            client_cpu_before = time.process_time()
            with httpx.Client(timeout=None) as http, path.open("rb") as upload:
                start = time.perf_counter()
                response = http.post(
                    f"http://127.0.0.1:{port}/api/pools",
                    headers={"Authorization": f"Bearer {TOKEN}"},
                    files={"file": ("pool.jsonl", upload, "application/x-ndjson")},
                    data={"answer_field": "answer", "id_field": "id", "name": "bench"},
                )
                responded = time.perf_counter() - start
            if response.status_code != 201:
                print(f"upload failed: {response.status_code} {response.text}")
                return 1
            pool = response.json()
            while committed_rows(url, pool["id"]) < args.rows:  # the commit may follow the response
                time.sleep(0.01)
            elapsed = time.perf_counter() - start
            client_cpu = time.process_time() - client_cpu_before
            api_cpu = cpu_seconds(proc.pid) - api_cpu_before
            postgres_cpu = database_backend_cpu(url, db_name)
            sampler.stopped.set()
            sampler.join()
            proc.terminate()
            proc.wait(timeout=30)
            proc = None
            assert pool["prompt_count"] == args.rows and pool["task_type"] == "numeric", pool
            rate = args.rows / elapsed

            orm_rows = min(args.orm_rows, args.rows)
            orm_seconds = time_orm_insert(url, path, orm_rows)
            orm_rate = orm_rows / orm_seconds
            ratio = rate / orm_rate

        print(f"API upload -> committed: {elapsed:.2f} s ({responded:.2f} s to the 201), {rate:,.0f} rows/s, "
              f"{size / 1e6 / elapsed:.1f} MB/s")
        print(f"CPU seconds during the upload: API process {api_cpu:.1f}, Postgres backends {postgres_cpu:.1f}, "
              f"uploading client {client_cpu:.1f} (machine: {os.cpu_count()} CPUs)")
        print(f"API process resident memory: peak {sampler.peak:.0f} MB during the upload (idle {idle_rss:.0f} MB)")
        print(f"plain ORM insert (session.add + commit), {orm_rows:,} rows timed: {orm_seconds:.2f} s, "
              f"{orm_rate:,.0f} rows/s; scaled to {args.rows:,} rows: {args.rows / orm_rate:.0f} s")
        print(f"speed-up over the ORM: {ratio:.1f}x")
        checks = [("rows/s >= 100,000", rate >= 100_000), ("speed-up >= 10x", ratio >= 10),
                  ("peak RSS < 500 MB", sampler.peak < 500)]
        print("targets: " + ", ".join(f"{name}: {'met' if ok else 'MISSED'}" for name, ok in checks))
        return 0 if all(ok for _, ok in checks) else 2
    finally:
        if proc is not None:
            proc.kill()
        if args.keep:
            print(f"kept database {db_name}")
        else:
            drop_database(db_name)


if __name__ == "__main__":
    sys.exit(main())
