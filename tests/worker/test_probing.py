"""The probe job end to end on Postgres with the tiny model (no Celery): results, idempotence,
cancellation, failures."""

import pytest
from sqlalchemy import func
from sqlmodel import select

from tests.worker.model_fixtures import TINY_MODEL, gsm8k_rows


def make_pool(n: int, *, has_answers: bool = True) -> int:
    from backend.curation.grading import parse_gold
    from backend.database import session_scope
    from backend.pools.tables import Pool, Prompt

    rows = gsm8k_rows(n)
    with session_scope() as session:
        pool = Pool(name=f"gsm8k-{n}", task_type="numeric", has_answers=has_answers, prompt_count=n)
        session.add(pool)
        session.flush()
        for position, row in enumerate(rows):
            answer = row["answer"] if has_answers else None
            session.add(Prompt(pool_id=pool.id, position=position, external_id=f"q{position}", text=row["question"],
                               answer=answer, gold=parse_gold(answer, "numeric") if answer else None))
        return pool.id


def make_probe(pool_id: int, *, shard_size: int, k: int = 3, max_new_tokens: int = 6, model: str = TINY_MODEL,
               template: str | None = None) -> tuple[int, int]:
    from backend.database import session_scope
    from backend.probes.schemas import ProbeCreate
    from backend.probes.service import create_probe

    with session_scope() as session:
        probe = create_probe(session, ProbeCreate(pool_id=pool_id, model=model, k=k, temperature=1.0,
                                                  max_new_tokens=max_new_tokens, template=template, seed=3),
                             shard_size)
        return probe.id, probe.job_id


def counts(probe_id: int) -> tuple[int, int]:
    from backend.database import session_scope
    from backend.probes.tables import PromptScore, Sample

    with session_scope() as session:
        samples = session.exec(select(func.count()).select_from(Sample).where(Sample.probe_id == probe_id)).one()
        scores = session.exec(select(func.count()).select_from(PromptScore)
                              .where(PromptScore.probe_id == probe_id)).one()
        return samples, scores


def job_of(job_id: int):
    from backend.database import session_scope
    from backend.jobs.tables import Job

    with session_scope() as session:
        return session.get(Job, job_id)


def event_reasons(job_id: int) -> list[tuple[str, str]]:
    from backend.database import session_scope
    from backend.jobs.service import events

    with session_scope() as session:
        return [(e.to_status, e.reason) for e in events(session, job_id)]


@pytest.fixture
def tiny_engine(service_tiny_model):
    from worker.engines.transformers_engine import TransformersEngine

    return TransformersEngine(TINY_MODEL, device="cpu", batch_size=2)


def test_shards_write_samples_and_scores_once(tiny_engine):
    from backend.database import session_scope
    from backend.probes.tables import Probe, ProbeShard, PromptScore, Sample
    from worker.probing import run_probe_shard

    probe_id, job_id = make_probe(make_pool(5), shard_size=2, k=3)
    assert run_probe_shard(probe_id, 0, engine=tiny_engine) == "completed"
    assert counts(probe_id) == (2 * 3, 2)
    job = job_of(job_id)
    assert job.status == "running" and job.progress_done == 2 and job.progress_total == 5
    assert job.heartbeat_at is not None and "shard 1/3 done" in job.message

    # A completed shard is skipped: nothing is written twice.
    assert run_probe_shard(probe_id, 0, engine=tiny_engine) == "skipped"
    assert counts(probe_id) == (6, 2)

    assert run_probe_shard(probe_id, 2, engine=tiny_engine) == "completed"
    assert job_of(job_id).status == "running"
    assert run_probe_shard(probe_id, 1, engine=tiny_engine) == "completed"
    assert counts(probe_id) == (5 * 3, 5)
    job = job_of(job_id)
    assert job.status == "succeeded" and job.progress_done == 5 and job.finished_at is not None
    assert [status for status, _ in event_reasons(job_id)] == ["queued", "running", "succeeded"]
    assert run_probe_shard(probe_id, 1, engine=tiny_engine) == "skipped"

    with session_scope() as session:
        probe = session.get(Probe, probe_id)
        shards = session.exec(select(ProbeShard).where(ProbeShard.probe_id == probe_id)).all()
        assert probe.samples_per_second > 0
        assert all(s.completed_at is not None and s.seconds > 0 for s in shards)
        expected = 15 / sum(s.seconds for s in shards)
        assert probe.samples_per_second == pytest.approx(expected)
        samples = session.exec(select(Sample).where(Sample.probe_id == probe_id)).all()
        assert {s.sample_index for s in samples} == {0, 1, 2}
        assert all(s.correct is not None for s in samples)  # graded against gold
        scores = session.exec(select(PromptScore).where(PromptScore.probe_id == probe_id)).all()
        for score in scores:
            assert score.k == 3 and 0 <= score.pass_rate <= 1
            assert score.difficulty == pytest.approx(1 - score.pass_rate)
            assert score.wilson_low <= score.pass_rate <= score.wilson_high
            mine = [s for s in samples if s.prompt_id == score.prompt_id]
            assert score.correct_count == sum(s.correct for s in mine)


def test_label_free_pool_is_scored_by_agreement(tiny_engine):
    from backend.database import session_scope
    from backend.probes.tables import Probe, PromptScore, Sample
    from worker.probing import run_probe

    probe_id, _job_id = make_probe(make_pool(3, has_answers=False), shard_size=8, k=2)
    with session_scope() as session:
        assert session.get(Probe, probe_id).label_free
    assert run_probe(probe_id, engine=tiny_engine) == "succeeded"
    with session_scope() as session:
        scores = session.exec(select(PromptScore).where(PromptScore.probe_id == probe_id)).all()
        samples = session.exec(select(Sample).where(Sample.probe_id == probe_id)).all()
    assert len(scores) == 3 and len(samples) == 6
    assert all(s.pass_rate is None and s.correct_count is None for s in scores)
    assert all(s.difficulty == pytest.approx(1 - s.agreement) for s in scores)
    assert all(s.correct is None for s in samples)


def test_custom_template_reaches_the_model(tiny_engine):
    from worker.probing import run_probe

    probe_id, _job_id = make_probe(make_pool(2), shard_size=2, k=1, template="Q: {prompt}\nA: \\boxed{")
    assert run_probe(probe_id, engine=tiny_engine) == "succeeded"
    assert counts(probe_id) == (2, 2)


def test_cancel_before_start(tiny_engine):
    from backend.database import session_scope
    from backend.jobs.service import get_job, request_cancel
    from worker.probing import run_probe_shard

    probe_id, job_id = make_probe(make_pool(3), shard_size=2)
    with session_scope() as session:
        request_cancel(session, get_job(session, job_id))
    assert job_of(job_id).status == "cancelled"
    assert run_probe_shard(probe_id, 0, engine=tiny_engine) == "cancelled"
    assert run_probe_shard(probe_id, 1, engine=tiny_engine) == "cancelled"
    assert counts(probe_id) == (0, 0)
    assert job_of(job_id).status == "cancelled"


def test_cancel_between_shards(tiny_engine):
    from backend.database import session_scope
    from backend.jobs.service import get_job, request_cancel
    from worker.probing import run_probe_shard

    probe_id, job_id = make_probe(make_pool(4), shard_size=2, k=2)
    assert run_probe_shard(probe_id, 0, engine=tiny_engine) == "completed"
    with session_scope() as session:
        request_cancel(session, get_job(session, job_id))
    assert job_of(job_id).status == "cancelling"
    assert run_probe_shard(probe_id, 1, engine=tiny_engine) == "cancelled"
    assert job_of(job_id).status == "cancelled"
    assert counts(probe_id) == (2 * 2, 2)  # the first shard's results stay


def test_cancel_during_a_shard_stops_after_the_batch(service_tiny_model):
    from backend.database import session_scope
    from backend.jobs.service import get_job, request_cancel
    from worker.engines.transformers_engine import TransformersEngine
    from worker.probing import run_probe_shard

    class CancellingEngine(TransformersEngine):
        """The real engine; the user presses cancel while its first batch generates."""

        calls = 0

        def generate(self, prompts, **settings):
            out = super().generate(prompts, **settings)
            self.calls += 1
            if self.calls == 1:
                with session_scope() as session:
                    request_cancel(session, get_job(session, job_id))
            return out

    probe_id, job_id = make_probe(make_pool(6), shard_size=6, k=2)
    engine = CancellingEngine(TINY_MODEL, device="cpu", batch_size=2)
    assert run_probe_shard(probe_id, 0, engine=engine) == "cancelled"
    assert engine.calls == 1
    assert counts(probe_id) == (0, 0)  # an unfinished shard writes nothing
    job = job_of(job_id)
    assert job.status == "cancelled"
    assert [s for s, _ in event_reasons(job_id)] == ["queued", "running", "cancelling", "cancelled"]


def test_unloadable_model_fails_the_job_with_a_reason(service_tiny_model):
    from backend.database import session_scope
    from backend.jobs.dispatch import add_task
    from backend.jobs.service import create_job
    from backend.probes.kind import PROBE
    from backend.probes.tables import Probe, ProbeShard
    from worker.probing import run_probe_shard

    pool_id = make_pool(2)
    with session_scope() as session:  # written directly: the API would refuse this model name
        job = create_job(session, "probe", total=2)
        probe = Probe(pool_id=pool_id, job_id=job.id, model="/nonexistent/model-dir", k=2, temperature=1.0,
                      max_new_tokens=4, seed=0, label_free=False, shard_size=2, prompt_count=2)
        session.add(probe)
        session.flush()
        session.add(ProbeShard(probe_id=probe.id, shard_index=0, first_position=0, end_position=2))
        session.flush()
        add_task(session, PROBE, job, "shard 0", {"probe_id": probe.id, "shard_index": 0})
        probe_id, job_id = probe.id, job.id
    assert run_probe_shard(probe_id, 0) == "failed"
    job = job_of(job_id)
    assert job.status == "failed"
    assert "/nonexistent/model-dir" in job.error and "not a built-in model" in job.error
    assert counts(probe_id) == (0, 0)


def test_a_task_whose_shard_is_gone_fails_its_job_and_an_unknown_task_is_skipped(service_tiny_model, tiny_engine):
    from sqlalchemy import update

    from backend.database import session_scope
    from backend.jobs.engine import execute, owner_name
    from backend.jobs.tables import JobTask
    from backend.probes.kind import PROBE
    from worker.probing import run_probe_shard

    probe_id, job_id = make_probe(make_pool(2), shard_size=2)
    with session_scope() as session:  # a task pointing at a shard that does not exist
        session.execute(update(JobTask).where(JobTask.job_id == job_id).values(args={"probe_id": probe_id,
                                                                                     "shard_index": 5}))
    assert run_probe_shard(probe_id, 0, engine=tiny_engine) == "failed"
    job = job_of(job_id)
    assert job.status == "failed" and "its shard 5 no longer exists" in job.error
    assert execute(PROBE, 10**9, owner_name("nobody")) == "skipped"


def test_transient_errors_are_recognised():
    import psycopg
    import torch
    from sqlalchemy.exc import IntegrityError, OperationalError

    from backend.jobs.engine import is_transient

    assert is_transient(OperationalError("SELECT 1", {}, psycopg.OperationalError("connection lost")))
    assert is_transient(torch.cuda.OutOfMemoryError("CUDA out of memory"), gpu_out_of_memory=True)
    assert not is_transient(torch.cuda.OutOfMemoryError("CUDA out of memory"))  # training: the same OOM again
    try:
        try:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        except Exception as inner:
            raise RuntimeError("model load failed") from inner
    except RuntimeError as outer:
        assert is_transient(outer, gpu_out_of_memory=True)
    assert not is_transient(IntegrityError("INSERT", {}, Exception("duplicate")))
    assert not is_transient(ValueError("bad template"))


def test_out_of_memory_is_retried_then_fails_the_job(service_tiny_model):
    import torch

    from backend.jobs.engine import MAX_RETRIES, RetryLater
    from worker.engines.transformers_engine import TransformersEngine
    from worker.probing import run_probe, run_probe_shard

    class OutOfMemoryEngine(TransformersEngine):
        """The real engine on a GPU that is too small: every generate call runs out of memory."""

        calls = 0

        def generate(self, prompts, **settings):
            self.calls += 1
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    engine = OutOfMemoryEngine(TINY_MODEL, device="cpu")
    probe_id, job_id = make_probe(make_pool(2), shard_size=2)
    with pytest.raises(RetryLater, match="out of memory"):
        run_probe_shard(probe_id, 0, engine=engine)
    job = job_of(job_id)
    assert job.status == "running" and "transient error, retry 1/3" in job.message  # left for the retry

    assert run_probe(probe_id, engine=engine, backoff_seconds=0) == "failed"
    assert engine.calls == 1 + MAX_RETRIES + 1
    job = job_of(job_id)
    assert f"failed {MAX_RETRIES + 1} times with a transient error" in job.error and "out of memory" in job.error
    assert counts(probe_id) == (0, 0)


def test_nul_bytes_in_completions_are_stored(service_tiny_model):
    from backend.database import session_scope
    from backend.probes.tables import Sample
    from worker.engines.transformers_engine import TransformersEngine
    from worker.probing import run_probe

    class NulEngine(TransformersEngine):
        """The real engine; its model emitted a byte-fallback NUL (seen with the random model)."""

        def generate(self, prompts, **settings):
            return [[text + "\x00 \\boxed{18}" for text in outs] for outs in super().generate(prompts, **settings)]

    probe_id, _job_id = make_probe(make_pool(1), shard_size=1, k=2)
    assert run_probe(probe_id, engine=NulEngine(TINY_MODEL, device="cpu")) == "succeeded"
    with session_scope() as session:
        samples = session.exec(select(Sample).where(Sample.probe_id == probe_id)).all()
    assert len(samples) == 2 and all("\ufffd" in s.completion and "\x00" not in s.completion for s in samples)
    assert all(s.extracted_answer == "18" and s.correct for s in samples)  # GSM8K's first answer is 18
