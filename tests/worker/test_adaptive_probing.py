"""Adaptive probing end to end with a model whose pass rates are known (tests/experiments/yes_no_model.py): rounds
that add shards for the open prompts, samples that extend each prompt's, scores recomputed from all of them, the
saving on the job, and the API's refusals."""

import numpy as np
import pytest
from sqlmodel import select

from backend.database import session_scope

# Gold "yes" (pass rate ~0.5), "no" (~0.3) and "zebra" (never): hard picks the zebra prompts.
GOLDS = ["yes"] * 16 + ["no"] * 16 + ["zebra"] * 16


@pytest.fixture(scope="module")
def yes_no_model(service_tiny_model, tmp_path_factory) -> str:
    from tests.experiments.yes_no_model import build_yes_no_model

    return str(build_yes_no_model(service_tiny_model, tmp_path_factory.mktemp("yes-no"), {"yes": 0.5, "no": 0.3}))


@pytest.fixture
def yes_no_engine(yes_no_model):
    from worker.engines.transformers_engine import TransformersEngine

    return TransformersEngine(yes_no_model, device="cpu", batch_size=16)


def make_exact_pool(golds: list[str]) -> int:
    from backend.pools.tables import Pool, Prompt

    order = np.random.default_rng(5).permutation(len(golds))  # the kinds interleaved across shards
    with session_scope() as session:
        pool = Pool(name="yes-no", task_type="exact", has_answers=True, prompt_count=len(golds))
        session.add(pool)
        session.flush()
        for position, index in enumerate(order):
            session.add(Prompt(pool_id=pool.id, position=position, external_id=f"{golds[index]}-{index}",
                               text=f"Question {index}: answer in one word.", answer=golds[index], gold=golds[index]))
        return pool.id


def make_adaptive_probe(pool_id: int, model: str, adaptive: dict, k: int = 8) -> tuple[int, int]:
    from backend.probes.schemas import ProbeCreate
    from backend.probes.service import create_probe

    with session_scope() as session:
        probe = create_probe(session, ProbeCreate(pool_id=pool_id, model=model, k=k, temperature=1.0,
                                                  max_new_tokens=1, seed=2, adaptive=adaptive), 16)
        return probe.id, probe.job_id


def check_samples_match_scores(probe_id: int) -> dict[str, tuple[int, int]]:
    """Every prompt's samples are numbered 0..k-1 and its score counts them all; (correct, k) by external id."""
    from backend.pools.tables import Prompt
    from backend.probes.tables import PromptScore, Sample

    with session_scope() as session:
        samples = session.exec(select(Sample.prompt_id, Sample.sample_index, Sample.correct)
                               .where(Sample.probe_id == probe_id)).all()
        scores = session.exec(select(PromptScore, Prompt.external_id).join(Prompt, Prompt.id == PromptScore.prompt_id)
                              .where(PromptScore.probe_id == probe_id)).all()
        counts = {}
        for score, external_id in scores:
            mine = sorted((index, correct) for prompt_id, index, correct in samples if prompt_id == score.prompt_id)
            assert [index for index, _ in mine] == list(range(score.k))
            assert score.correct_count == sum(correct for _, correct in mine)
            assert score.pass_rate == pytest.approx(score.correct_count / score.k)
            counts[external_id] = (score.correct_count, score.k)
        return counts


def test_an_adaptive_probe_runs_in_rounds_and_stops_settled_prompts_early(yes_no_model, yes_no_engine):
    from backend.jobs.tables import Job, JobTask
    from backend.probes.tables import Probe, ProbeShard
    from worker.probing import run_probe, run_probe_shard

    pool_id = make_exact_pool(GOLDS)
    probe_id, job_id = make_adaptive_probe(pool_id, yes_no_model, {"strategy": "hard", "count": 12,
                                                                    "first_round": 2, "round_size": 2})
    with session_scope() as session:
        first = session.exec(select(ProbeShard).where(ProbeShard.probe_id == probe_id)).all()
    assert {shard.round for shard in first} == {1} and len(first) == 3
    for shard in first:
        assert run_probe_shard(probe_id, shard.shard_index, engine=yes_no_engine) == "completed"
    after_first = check_samples_match_scores(probe_id)
    assert {k for _, k in after_first.values()} == {2}

    # The last shard of round 1 applied the stop rule: round 2's shards hold the open prompts only.
    with session_scope() as session:
        second = session.exec(select(ProbeShard).where(ProbeShard.probe_id == probe_id, ProbeShard.round == 2)).all()
        job = session.get(Job, job_id)
        tasks = session.exec(select(JobTask).where(JobTask.job_id == job_id)).all()
    open_ids = [pid for shard in second for pid in shard.prompt_ids]
    assert 0 < len(open_ids) < len(GOLDS) and len(set(open_ids)) == len(open_ids)
    assert len(tasks) == len(first) + len(second) and job.status == "running"
    # progress in samples: 2 of every prompt so far, of at most 8
    assert "round 2 of at most 4" in job.message and f"{len(open_ids)} of 48 prompts still open" in job.message
    assert (job.progress_done, job.progress_total) == (2 * len(GOLDS), 8 * len(GOLDS))
    # With 16 never-solved prompts, one right twice is settled outside the hardest 12; most right once are too.
    opened = [after_first[external_id][0] for external_id in _external_ids(open_ids)]
    solved_once = sum(c == 1 for c, _ in after_first.values())
    assert max(opened) <= 1 and opened.count(1) < solved_once / 2

    assert run_probe(probe_id, engine=yes_no_engine) == "succeeded"
    final = check_samples_match_scores(probe_id)
    drawn = sum(k for _, k in final.values())
    with session_scope() as session:
        probe = session.get(Probe, probe_id)
        job = session.get(Job, job_id)
        rounds = {shard.round for shard in session.exec(select(ProbeShard).where(ProbeShard.probe_id == probe_id))}
    assert probe.samples_drawn == drawn < len(GOLDS) * 8 and max(k for _, k in final.values()) <= 8
    saved = 1 - drawn / (len(GOLDS) * 8)
    assert f"{drawn} of {len(GOLDS) * 8} samples ({saved:.0%} saved)" in job.message
    assert f"in {max(rounds)} rounds" in job.message and probe.samples_per_second > 0
    assert job.progress_done == job.progress_total == drawn  # a finished adaptive probe's bar reads full

    # The decision it was run for: hard's 12 are never-solved prompts, nearly all of them the zebra ones.
    from backend.curation.posterior import PassCounts
    from backend.curation.strategies import Selector

    names = list(final)
    correct = np.array([final[name][0] for name in names])
    k = np.array([final[name][1] for name in names])
    picks = Selector(1 - correct / k, np.zeros(len(names), bool), 0, counts=PassCounts(correct, k)).pick("hard", 12)
    assert all(correct[i] == 0 for i in picks)
    assert sum(names[i].startswith("zebra") for i in picks) >= 10


def _external_ids(prompt_ids: list[int]) -> list[str]:
    from backend.pools.tables import Prompt

    with session_scope() as session:
        return list(session.exec(select(Prompt.external_id).where(Prompt.id.in_(prompt_ids))))


def test_a_width_rule_stops_prompts_whose_interval_is_narrow(yes_no_model, yes_no_engine):
    from backend.curation.adaptive import wilson_width
    from backend.probes.tables import Probe
    from worker.probing import run_probe

    probe_id, _ = make_adaptive_probe(make_exact_pool(GOLDS[16:]), yes_no_model,
                                      {"max_width": 0.45, "first_round": 4, "round_size": 4}, k=16)
    assert run_probe(probe_id, engine=yes_no_engine) == "succeeded"
    final = check_samples_match_scores(probe_id)
    correct = np.array([c for c, _ in final.values()])
    drawn = np.array([k for _, k in final.values()])
    widths = wilson_width(correct, drawn)
    assert ((widths <= 0.45) | (drawn == 16)).all()  # each stopped once narrow, or ran to k
    assert (drawn < 16).any()  # the zebra prompts: 0 of 8 is narrow enough
    with session_scope() as session:
        assert session.get(Probe, probe_id).samples_drawn == drawn.sum()


def test_adaptive_probes_through_the_api(client, worker, yes_no_model):
    from tests.conftest import wait_for_job
    from tests.experiments.test_experiments import upload_exact_pool

    pool_id = upload_exact_pool(client, "adaptive", GOLDS)
    created = client.post("/api/probes", json={"pool_id": pool_id, "model": yes_no_model, "k": 8,
                                               "max_new_tokens": 1,
                                               "adaptive": {"strategy": "hard", "fraction": 0.25}})
    assert created.status_code == 202, created.text
    probe = created.json()
    assert probe["adaptive"]["n"] == 12 and probe["adaptive"]["strategy"] == "hard"
    assert wait_for_job(client, probe["job_id"], timeout=300)["status"] == "succeeded"
    probe = client.get(f"/api/probes/{probe['id']}").json()
    assert 0 < probe["samples_drawn"] < 48 * 8
    assert probe["samples_saved"] == pytest.approx(1 - probe["samples_drawn"] / (48 * 8))
    assert "saved" in probe["job"]["message"]

    label_free = client.post("/api/pools", files={"file": ("q.jsonl", b'{"prompt": "Why?"}\n')},
                             data={"name": "no answers", "task_type": "exact"}).json()["id"]
    refused = client.post("/api/probes", json={"pool_id": label_free, "adaptive": {"max_width": 0.3}})
    assert refused.status_code == 422 and "without a gold answer" in refused.json()["detail"]
    for adaptive, words in [({"strategy": "hard"}, "exactly one of count or fraction"),
                            ({}, "needs a decision"),
                            ({"count": 5}, "give a strategy as well"),
                            ({"strategy": "band", "count": 5, "band": [0.9, 0.1]}, "band must be"),
                            ({"max_width": 0.3, "first_round": 9}, "exceeds k")]:
        response = client.post("/api/probes", json={"pool_id": pool_id, "k": 8, "adaptive": adaptive})
        assert response.status_code == 422, (adaptive, response.text)
        assert words in response.text, (adaptive, response.text)


def test_a_cancel_that_arrives_as_a_round_ends_stops_before_the_next_round(yes_no_model, yes_no_engine, monkeypatch):
    """The cancel lands after the last shard's final beat, while it commits: its results are kept, no round 2."""
    import worker.probing as probing
    from backend.jobs.service import get_job, request_cancel
    from backend.jobs.tables import Job
    from backend.probes.tables import ProbeShard

    probe_id, job_id = make_adaptive_probe(make_exact_pool(GOLDS), yes_no_model, {"strategy": "hard", "count": 12})
    with session_scope() as session:
        shards = [s.shard_index for s in session.exec(select(ProbeShard).where(ProbeShard.probe_id == probe_id))]
    for index in shards[:-1]:
        assert probing.run_probe_shard(probe_id, index, engine=yes_no_engine) == "completed"
    planned = probing._open_after

    def cancel_meanwhile(work, scores):
        with session_scope() as session:
            request_cancel(session, get_job(session, job_id))
        return planned(work, scores)

    monkeypatch.setattr(probing, "_open_after", cancel_meanwhile)
    assert probing.run_probe_shard(probe_id, shards[-1], engine=yes_no_engine) == "cancelled"
    with session_scope() as session:
        job = session.get(Job, job_id)
        assert job.status == "cancelled" and "stopped after round 1" in job.message
        assert not session.exec(select(ProbeShard).where(ProbeShard.probe_id == probe_id, ProbeShard.round == 2)).all()
    assert {k for _, k in check_samples_match_scores(probe_id).values()} == {2}  # round 1 kept, whole
