"""Why never-solved prompts fail: the pure classification, and GET /api/probes/{id}/failures on stored samples."""

from backend.curation.failures import NeverSolved, breakdown, failure_kind
from backend.curation.scores import agreement


def test_failure_kinds():
    assert failure_kind(NeverSolved(8, 0.75, "5", 0)) == "label_error"  # 6 of 8 agree on another answer
    assert failure_kind(NeverSolved(8, 0.625, "5", 0)) == "wrong_answer"
    assert failure_kind(NeverSolved(8, 0.0, None, 8)) == "no_answer"
    assert failure_kind(NeverSolved(8, 0.25, "3", 5)) == "no_answer"
    assert failure_kind(NeverSolved(8, 0.25, "3", 4)) == "wrong_answer"  # half unanswered is not most
    counts = breakdown([NeverSolved(8, 1.0, "5", 0), NeverSolved(8, 0.0, None, 8), NeverSolved(8, 0.25, "3", 2)])
    assert counts == {"never_solved": 3, "prompts": {"label_error": 1, "no_answer": 1, "wrong_answer": 1},
                      "samples": {"no_answer": 10, "wrong_answer": 14}}


def test_the_failures_of_a_probe(client):
    from sqlmodel import select

    from backend.database import session_scope
    from backend.jobs.tables import Job
    from backend.pools.tables import Prompt
    from backend.probes.tables import Probe, PromptScore, Sample

    rows = "".join(f'{{"prompt": "What is {i} + 2?", "answer": "{i + 2}"}}\n' for i in range(4))
    pool = client.post("/api/pools", files={"file": ("small.jsonl", rows.encode())}, data={"name": "failures"}).json()
    answers = [["9"] * 8,  # agree on 9, gold 2: a likely label error
               [None] * 6 + ["1", "1"],  # mostly unreadable
               ["1", "3", "6", "7", "8", "9", "0", None],  # scattered and wrong (gold 4)
               ["5"] * 4 + ["1"] * 4]  # gold 5: solved, not counted
    with session_scope() as session:
        job = Job(kind="probe", status="succeeded")
        session.add(job)
        session.flush()
        probe = Probe(pool_id=pool["id"], job_id=job.id, model="m", k=8, temperature=1.0, max_new_tokens=32, seed=0,
                      label_free=False, shard_size=256, prompt_count=4)
        session.add(probe)
        session.flush()
        prompts = list(session.exec(select(Prompt).where(Prompt.pool_id == pool["id"]).order_by(Prompt.position)))
        for prompt, given in zip(prompts, answers, strict=True):
            correct = [a == prompt.gold for a in given]
            share, majority = agreement(given)
            session.add(PromptScore(probe_id=probe.id, prompt_id=prompt.id, k=8, correct_count=sum(correct),
                                    pass_rate=sum(correct) / 8, agreement=share, majority_answer=majority,
                                    base_wrong=not correct[0], difficulty=1 - sum(correct) / 8))
            session.add_all(Sample(probe_id=probe.id, prompt_id=prompt.id, sample_index=i, completion=str(a),
                                   extracted_answer=a, correct=c)
                            for i, (a, c) in enumerate(zip(given, correct, strict=True)))
        probe_id = probe.id
    result = client.get(f"/api/probes/{probe_id}/failures").json()
    assert result["never_solved"] == 3 and result["max_new_tokens"] == 32
    assert result["prompts"] == {"label_error": 1, "no_answer": 1, "wrong_answer": 1}
    assert result["samples"] == {"no_answer": 7, "wrong_answer": 17}
    assert result["label_error_examples"] == [{"external_id": prompts[0].external_id, "text": "What is 0 + 2?",
                                               "gold": "2", "majority_answer": "9", "agreement": 1.0}]
