"""What never reusing ids costs on the embedded database: inserting prompt rows into SQLite's
`prompt` table as migration 0004 left it (AUTOINCREMENT) against the same table without it, in the
same run, alternating, with the executemany batches the SQLite import path uses.

Usage:  .venv/bin/python bench/sqlite_autoincrement.py [--rows 200000] [--rounds 3]
Prints rows/s for both and their ratio (AUTOINCREMENT / plain; 1.00 = no cost).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BATCH = 10_000


def _prompt_ddl(url: str) -> str:
    from sqlalchemy import create_engine, text

    from backend.migrate import upgrade_head

    upgrade_head(url)
    engine = create_engine(url)
    with engine.connect() as connection:
        ddl = connection.execute(text("SELECT sql FROM sqlite_master WHERE name = 'prompt'")).scalar_one()
    engine.dispose()
    assert "AUTOINCREMENT" in ddl, ddl
    return ddl


def _insert(path: Path, ddl: str, rows: list[tuple]) -> float:
    path.unlink(missing_ok=True)
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("CREATE TABLE pool (id INTEGER PRIMARY KEY)")
    connection.execute("INSERT INTO pool (id) VALUES (1)")
    connection.execute(ddl)
    connection.commit()
    start = time.perf_counter()
    for first in range(0, len(rows), BATCH):
        connection.executemany("INSERT INTO prompt (pool_id, position, external_id, text, answer, gold) "
                               "VALUES (?, ?, ?, ?, ?, ?)", rows[first:first + BATCH])
    connection.commit()
    seconds = time.perf_counter() - start
    connection.close()
    return len(rows) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        ddl = _prompt_ddl(f"sqlite:///{tmp_path / 'schema.db'}")
        plain_ddl = ddl.replace("AUTOINCREMENT", "")
        rows = [(1, i, f"q{i}", f"Tom has {i} apples and buys {i % 7} more. How many apples now?", str(i + i % 7),
                 str(i + i % 7)) for i in range(args.rows)]
        speeds: dict[str, list[float]] = {"autoincrement": [], "plain": []}
        for _ in range(args.rounds):
            speeds["plain"].append(_insert(tmp_path / "plain.db", plain_ddl, rows))
            speeds["autoincrement"].append(_insert(tmp_path / "auto.db", ddl, rows))
    plain, auto = statistics.median(speeds["plain"]), statistics.median(speeds["autoincrement"])
    print(f"rows: {args.rows}, rounds: {args.rounds} (medians)")
    print(f"plain INTEGER PRIMARY KEY: {plain:,.0f} rows/s")
    print(f"AUTOINCREMENT:             {auto:,.0f} rows/s")
    print(f"ratio AUTOINCREMENT / plain: {auto / plain:.2f}")


if __name__ == "__main__":
    main()
