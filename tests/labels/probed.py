"""A label-free pool whose probe's samples are written straight to the database with known extracted
answers, so re-grading can be checked against exact pass rates without running a model."""

from dataclasses import dataclass

from sqlalchemy import insert
from sqlmodel import select

from backend.curation.scores import score_prompt
from backend.database import session_scope
from backend.jobs.service import create_job, transition
from backend.jobs.tables import JobStatus
from backend.pools.tables import Pool, Prompt
from backend.probes.tables import Probe, PromptScore, Sample

K = 4


@dataclass
class LabelFreeProbe:
    pool_id: int
    probe_id: int
    prompt_ids: list[int]
    answers: list[list[str]]  # extracted answers per prompt (position order)

    def correct(self, position: int, gold: str) -> int:
        return sum(answer == gold for answer in self.answers[position])


def answers_for(position: int) -> list[str]:
    """Position i's k extracted answers: i+1 of them say str(i) (capped at K), the rest say "0"."""
    right = min(position % (K + 1), K)
    return [str(position)] * right + ["0"] * (K - right)


def make_label_free_probe(size: int = 20, *, finished: bool = True, model: str = "tiny-random-SmolLM2",
                          name: str = "unlabeled") -> LabelFreeProbe:
    answers = [answers_for(i) for i in range(size)]
    with session_scope() as session:
        pool = Pool(name=name, task_type="numeric", has_answers=False, prompt_count=size)
        session.add(pool)
        session.flush()
        session.execute(insert(Prompt), [
            {"pool_id": pool.id, "position": i, "external_id": f"q{i}", "text": f"What is {i} + 0?",
             "answer": None, "gold": None} for i in range(size)])
        ids = list(session.exec(select(Prompt.id).where(Prompt.pool_id == pool.id).order_by(Prompt.position)))
        job = create_job(session, "probe", total=size)
        probe = Probe(pool_id=pool.id, job_id=job.id, model=model, k=K, temperature=1.0, max_new_tokens=16,
                      seed=0, label_free=True, shard_size=256, prompt_count=size)
        session.add(probe)
        session.flush()
        scores, samples = [], []
        for prompt_id, extracted in zip(ids, answers, strict=True):
            score = score_prompt(extracted, None)
            scores.append({"probe_id": probe.id, "prompt_id": prompt_id, "k": K, "correct_count": None,
                           "pass_rate": None, "wilson_low": None, "wilson_high": None, "agreement": score.agreement,
                           "majority_answer": score.majority_answer, "base_wrong": score.base_wrong,
                           "difficulty": score.difficulty})
            samples.extend({"probe_id": probe.id, "prompt_id": prompt_id, "sample_index": j,
                            "completion": f"The answer is {answer}.", "extracted_answer": answer, "correct": None}
                           for j, answer in enumerate(extracted))
        session.execute(insert(PromptScore), scores)
        session.execute(insert(Sample), samples)
        if finished:
            transition(session, job, JobStatus.running, "test")
            transition(session, job, JobStatus.succeeded, "test")
        return LabelFreeProbe(pool.id, probe.id, ids, answers)
