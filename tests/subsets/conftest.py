"""A pool with a finished probe whose scores are known, written straight to the database, so the
selection logic is tested on exact numbers without running a model."""

from dataclasses import dataclass

import numpy as np
import pytest
from sqlalchemy import insert
from sqlmodel import select

from backend.database import session_scope
from backend.jobs.service import create_job, transition
from backend.jobs.tables import JobStatus
from backend.pools.tables import Pool, Prompt
from backend.probes.tables import Probe, PromptScore


@dataclass
class ProbedPool:
    pool_id: int
    probe_id: int
    job_id: int
    prompt_ids: list[int]
    correct: list[int]  # correct samples out of K per prompt
    base_wrong: list[bool]


K = 8


def make_probed_pool(size: int = 40, *, finished: bool = True, label_free: bool = False,
                     seed: int = 0) -> ProbedPool:
    rng = np.random.default_rng(seed)
    correct = [int(c) for c in rng.integers(0, K + 1, size)]
    base_wrong = [bool(rng.random() > c / K) for c in correct]
    with session_scope() as session:
        pool = Pool(name="scored", task_type="numeric", has_answers=not label_free, prompt_count=size)
        session.add(pool)
        session.flush()
        session.execute(insert(Prompt), [
            {"pool_id": pool.id, "position": i, "external_id": f"q{i}", "text": f"What is {i} + {i}?",
             "answer": None if label_free else str(2 * i), "gold": None if label_free else str(2 * i)}
            for i in range(size)])
        ids = list(session.exec(select(Prompt.id).where(Prompt.pool_id == pool.id).order_by(Prompt.position)))
        job = create_job(session, "probe", total=size)
        probe = Probe(pool_id=pool.id, job_id=job.id, model="tiny-random-SmolLM2", k=K, temperature=1.0,
                      max_new_tokens=16, seed=0, label_free=label_free, shard_size=256, prompt_count=size)
        session.add(probe)
        session.flush()
        session.execute(insert(PromptScore), [
            {"probe_id": probe.id, "prompt_id": pid, "k": K,
             "correct_count": None if label_free else c, "pass_rate": None if label_free else c / K,
             "wilson_low": None, "wilson_high": None, "agreement": max(c, K - c) / K,
             "majority_answer": None, "base_wrong": bw,
             "difficulty": 1 - (max(c, K - c) / K if label_free else c / K)}
            for pid, c, bw in zip(ids, correct, base_wrong, strict=True)])
        if finished:
            transition(session, job, JobStatus.running, "test")
            transition(session, job, JobStatus.succeeded, "test")
        return ProbedPool(pool.id, probe.id, job.id, ids, correct, base_wrong)


@pytest.fixture
def probed_pool(service_env) -> ProbedPool:
    return make_probed_pool()
