"""Creating probes and reading their results."""

import math

from sqlalchemy import func
from sqlmodel import Session, select

from backend.curation.adaptive import StopRule
from backend.curation.budget import BudgetError, budget_to_count
from backend.curation.failures import NeverSolved, breakdown, failure_kind
from backend.database import get_or_404
from backend.errors import AppError
from backend.jobs.dispatch import add_task
from backend.jobs.schemas import JobRead
from backend.jobs.service import create_job
from backend.jobs.tables import Job
from backend.models_catalog import check_model
from backend.pools.tables import Pool, Prompt
from backend.probes.kind import PROBE
from backend.probes.schemas import AdaptiveCreate, ProbeCreate, ProbeRead, PromptSamples
from backend.probes.tables import Probe, ProbeShard, PromptScore, Sample
from backend.prompting import PAPER_CHOICE_TEMPLATE, PAPER_TEMPLATE, check_chat_template_options, check_template
from backend.runs.tables import AdapterProbe


def check_probe_settings(body: ProbeCreate) -> None:
    """What the schema cannot say (its field bounds are checked by ProbeCreate itself, for the API and
    the CLI alike): a template with {prompt}, chat-template options that fit it."""
    try:
        body.template = check_template(body.template)
        body.chat_template_options = check_chat_template_options(body.chat_template_options, body.template)
    except ValueError as exc:
        raise AppError(422, str(exc).rstrip(".") + ".") from exc


# A small pool is still cut into several shards, so that the first scores (and a partial histogram) come
# after about an eighth of the work instead of at the end; below 16 prompts a shard is not worth a task.
# Sizes are multiples of 8 so that a shard's generation batches stay full.
PARTIAL_SHARDS = 8
MIN_SHARD = 16


def shard_size_for(prompt_count: int, largest: int) -> int:
    return min(largest, max(MIN_SHARD, 8 * math.ceil(prompt_count / PARTIAL_SHARDS / 8)))


def stop_rule(pool: Pool, body: ProbeCreate, adaptive: AdaptiveCreate) -> StopRule:
    """The adaptive probe's stop rule, its budget resolved against the pool; 422 where it cannot apply."""
    if not pool.has_answers:
        raise AppError(422, f"Adaptive probing reads pass rates, and pool {pool.id} has prompts without a gold "
                            "answer. Label them (or upload the pool with answers), or probe without adaptive.")
    n = None
    if adaptive.strategy is not None:
        try:
            n = budget_to_count(pool.prompt_count, count=adaptive.count, fraction=adaptive.fraction).n
        except BudgetError as exc:
            raise AppError(422, f"adaptive: {exc}.") from exc
    return StopRule(k=body.k, first_round=adaptive.first_round, round_size=adaptive.round_size,
                    strategy=adaptive.strategy, n=n, seed=adaptive.seed, group_size=adaptive.group_size,
                    band=adaptive.band, tolerance=adaptive.tolerance, max_width=adaptive.max_width)


def template_for(pool: Pool, template: str | None) -> str | None:
    """The template a probe of this pool uses: the paper's asks a choice pool for \\boxed{(X)} (BBH)."""
    if template in (PAPER_TEMPLATE, PAPER_CHOICE_TEMPLATE):
        return PAPER_CHOICE_TEMPLATE if pool.task_type == "choice" else PAPER_TEMPLATE
    return template


def create_probe(session: Session, body: ProbeCreate, shard_size: int, *, prompt_ids: list[int] | None = None,
                 adapter_path: str | None = None) -> Probe:
    """Write the probe, its job, its shards (at most ``shard_size`` prompts each, see `shard_size_for`) and
    their tasks (status queued); the caller commits and sends. ``prompt_ids``: probe only these prompts of the pool;
    ``adapter_path``: with a trained run's LoRA adapter applied (both: backend.runs.reprobe)."""
    check_probe_settings(body)
    model = check_model(body.model)
    pool = get_or_404(session, Pool, body.pool_id)
    if pool.prompt_count == 0:
        raise AppError(409, f"Pool {pool.id} has no prompts to probe; upload a file with prompts first.")
    chosen = None
    if prompt_ids is not None:
        chosen = session.exec(select(Prompt.id, Prompt.position).where(Prompt.pool_id == pool.id,
                                                                       Prompt.id.in_(prompt_ids))
                              .order_by(Prompt.position)).all()
    prompt_count = pool.prompt_count if chosen is None else len(chosen)
    shard_size = shard_size_for(prompt_count, shard_size)
    template = template_for(pool, body.template)
    rule = stop_rule(pool, body, body.adaptive) if body.adaptive is not None else None
    # an adaptive probe's progress is in samples, up to k of every prompt (worker.probing._progress)
    job = create_job(session, "probe", total=prompt_count * body.k if rule else prompt_count,
                     tokens=prompt_count * body.k * body.max_new_tokens)
    probe = Probe(pool_id=pool.id, job_id=job.id, model=model, k=body.k, temperature=body.temperature,
                  max_new_tokens=body.max_new_tokens, template=template,
                  chat_template_options=body.chat_template_options, grading_policy=body.grading_policy, seed=body.seed,
                  label_free=not pool.has_answers, shard_size=shard_size, prompt_count=prompt_count,
                  adaptive=rule.to_dict() if rule else None, adapter_path=adapter_path)
    session.add(probe)
    session.flush()
    for index in range(math.ceil(prompt_count / shard_size)):
        if chosen is None:
            shard = ProbeShard(probe_id=probe.id, shard_index=index, first_position=index * shard_size,
                               end_position=min((index + 1) * shard_size, prompt_count))
        else:
            chunk = chosen[index * shard_size:(index + 1) * shard_size]
            shard = ProbeShard(probe_id=probe.id, shard_index=index, first_position=chunk[0][1],
                               end_position=chunk[-1][1] + 1, prompt_ids=[prompt_id for prompt_id, _ in chunk])
        session.add(shard)
        session.flush()
        add_task(session, PROBE, job, f"shard {index}", {"probe_id": probe.id, "shard_index": index})
    return probe


def get_probe(session: Session, probe_id: int) -> Probe:
    return get_or_404(session, Probe, probe_id)


def probe_read(session: Session, probe: Probe) -> ProbeRead:
    job = session.get(Job, probe.job_id)
    graded = session.exec(select(func.count()).select_from(PromptScore)
                          .where(PromptScore.probe_id == probe.id, PromptScore.pass_rate.is_not(None))).one()
    saved = (1.0 - probe.samples_drawn / (probe.prompt_count * probe.k)
             if probe.adaptive is not None and probe.samples_drawn is not None else None)
    link = session.get(AdapterProbe, probe.id)
    return ProbeRead(**probe.model_dump(), created_by=probe.created_by, graded_prompts=graded, samples_saved=saved,
                     adapter_run_id=link.run_id if link else None, job=JobRead.of(job))


def list_probes(session: Session, pool_id: int | None, *, limit: int | None = None, offset: int = 0) -> list[Probe]:
    query = select(Probe).order_by(Probe.id.desc())
    if pool_id is not None:
        query = query.where(Probe.pool_id == pool_id)
    return list(session.exec(query.offset(offset).limit(limit)))


def require_scores(session: Session, probe: Probe) -> bool:
    """True when the probe's scores are final, False while it runs (the shards done so far have theirs);
    a failed or cancelled probe's partial scores are not used: 409."""
    job = session.get(Job, probe.job_id)
    if job.status == "succeeded":
        return True
    if job.status in ("failed", "cancelled"):
        raise AppError(409, f"Probe {probe.id} {job.status}; its partial scores are not used. Start a new probe.")
    return False


def require_finished(session: Session, probe: Probe) -> None:
    job = session.get(Job, probe.job_id)
    if job.status != "succeeded":
        raise AppError(409, f"Probe {probe.id} has not finished (its job {job.id} is {job.status}); "
                            f"wait for it to succeed, or start a new probe.")


def prompt_samples(session: Session, probe: Probe, prompt_id: int) -> PromptSamples:
    prompt = session.get(Prompt, prompt_id)
    if prompt is None or prompt.pool_id != probe.pool_id:
        raise AppError(404, f"Prompt {prompt_id} is not in pool {probe.pool_id} of probe {probe.id}.")
    score = session.get(PromptScore, (probe.id, prompt_id))
    samples = session.exec(select(Sample).where(Sample.probe_id == probe.id, Sample.prompt_id == prompt_id)
                           .order_by(Sample.sample_index))
    return PromptSamples(
        prompt=prompt.model_dump(),
        score=score.model_dump() if score else None,
        samples=[s.model_dump() for s in samples],
    )


def failures(session: Session, probe: Probe, examples: int = 10) -> dict:
    """Why the probe's never-solved prompts fail (backend.curation.failures), with the likely label errors
    first by agreement. Needs gold answers: 409 for a label-free probe."""
    require_finished(session, probe)
    if probe.label_free:
        raise AppError(409, f"Probe {probe.id} is label-free: with no gold answers no prompt is 'never solved'. "
                            "Label the prompts to see why the hard ones fail.")
    unanswered = (select(Sample.prompt_id, func.count().label("n")).where(Sample.probe_id == probe.id,
                                                                          Sample.extracted_answer.is_(None))
                  .group_by(Sample.prompt_id).subquery())
    rows = session.exec(  # four numbers a prompt; the texts only for the examples shown
        select(PromptScore.prompt_id, PromptScore.k, PromptScore.agreement, PromptScore.majority_answer,
               func.coalesce(unanswered.c.n, 0))
        .outerjoin(unanswered, unanswered.c.prompt_id == PromptScore.prompt_id)
        .where(PromptScore.probe_id == probe.id, PromptScore.correct_count == 0)).all()
    prompts = {prompt_id: NeverSolved(k, agreement, majority, missing)
               for prompt_id, k, agreement, majority, missing in rows}
    suspects = sorted((pid for pid, p in prompts.items() if failure_kind(p) == "label_error"),
                      key=lambda pid: (-prompts[pid].agreement, pid))[:examples]
    texts = {p.id: p for p in session.exec(select(Prompt).where(Prompt.id.in_(suspects)))}
    return {**breakdown(list(prompts.values())), "max_new_tokens": probe.max_new_tokens,
            "label_error_examples": [{"external_id": texts[pid].external_id, "text": texts[pid].text,
                                      "gold": texts[pid].gold, "majority_answer": prompts[pid].majority_answer,
                                      "agreement": prompts[pid].agreement} for pid in suspects]}
