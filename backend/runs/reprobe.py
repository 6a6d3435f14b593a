"""Re-probing a trained run (issue 10 §5): its policy (the base model with its LoRA adapter) probed with the
settings of the probe its subset was picked from, on the subset's prompts and on its evaluation pool, each
compared with the base model's probe of the same prompts (backend.curation.transitions)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sqlmodel import Session, select

from backend.charts import capacity_boundary
from backend.curation.transitions import TIERS, compare
from backend.errors import AppError
from backend.jobs.tables import Job
from backend.pools.tables import Pool, Prompt
from backend.probes.schemas import ProbeCreate
from backend.probes.service import create_probe, template_for
from backend.probes.tables import Probe, PromptScore
from backend.runs.tables import AdapterProbe, Run
from backend.subsets.tables import Subset, SubsetMember

ENDED_BADLY = ("failed", "cancelled")
NEWLY_SOLVED_SHOWN = 50


def _status(session: Session, probe: Probe | None) -> str:
    return session.get(Job, probe.job_id).status if probe is not None else "deleted"


def _same_settings(probe: Probe) -> dict:
    return {"model": probe.model, "k": probe.k, "temperature": probe.temperature,
            "max_new_tokens": probe.max_new_tokens, "template": probe.template,
            "chat_template_options": probe.chat_template_options, "grading_policy": probe.grading_policy,
            "seed": probe.seed}


def adapter_probes(session: Session, run_id: int) -> list[AdapterProbe]:
    return list(session.exec(select(AdapterProbe).where(AdapterProbe.run_id == run_id)
                             .order_by(AdapterProbe.probe_id)))


def _usable(session: Session, link: AdapterProbe) -> bool:
    probes = (session.get(Probe, link.probe_id), session.get(Probe, link.baseline_probe_id)
              if link.baseline_probe_id else None)
    return all(_status(session, probe) not in (*ENDED_BADLY, "deleted") for probe in probes)


def reprobe(session: Session, run: Run, shard_size: int) -> list[AdapterProbe]:
    """The run's re-probes, one per scope (its subset; its evaluation pool, if it has one): the ones it has, and new
    ones for a scope whose probe or baseline failed, was cancelled or was deleted (their old link goes); the caller
    commits and sends."""
    job = session.get(Job, run.job_id)
    if job.status != "succeeded" or run.adapter_path is None:
        raise AppError(409, f"Run {run.id} is {job.status}{'' if run.adapter_path else ' and has no adapter'}; "
                            "only a run that trained to the end can be re-probed with its adapter.")
    if not Path(run.adapter_path).is_dir():
        raise AppError(409, f"Run {run.id}'s adapter is no longer at {run.adapter_path}; train the run again, or "
                            "restore BUDGETLAB_ARTIFACT_DIR.")
    subset = session.get(Subset, run.subset_id)
    base = session.get(Probe, subset.probe_id)
    if base.label_free:
        raise AppError(409, f"Run {run.id}'s subset comes from label-free probe {base.id}: with no gold answers "
                            "there is no pass rate to compare. Label the pool, probe it and train on that probe.")
    kept: dict[str, AdapterProbe] = {}
    for link in adapter_probes(session, run.id):
        if _usable(session, link):
            kept[link.scope] = link
        else:
            session.delete(link)
    settings = _same_settings(base)
    if "training" not in kept:
        members = list(session.exec(select(SubsetMember.prompt_id).where(SubsetMember.subset_id == subset.id)))
        body = ProbeCreate(pool_id=base.pool_id, **settings)
        # An adaptive probe stopped some prompts after a few samples: the policy is compared at k with k.
        baseline = base if base.adaptive is None else create_probe(session, body, shard_size, prompt_ids=members)
        kept["training"] = _link(session, create_probe(session, body, shard_size, prompt_ids=members,
                                                       adapter_path=run.adapter_path), run, baseline, "training")
    if run.eval_pool_id is not None and "evaluation" not in kept:
        body = ProbeCreate(pool_id=run.eval_pool_id, **settings)
        baseline = _base_probe_of(session, run.eval_pool_id, settings) or create_probe(session, body, shard_size)
        kept["evaluation"] = _link(session, create_probe(session, body, shard_size, adapter_path=run.adapter_path),
                                   run, baseline, "evaluation")
    return sorted(kept.values(), key=lambda link: link.probe_id)


def _link(session: Session, probe: Probe, run: Run, baseline: Probe, scope: str) -> AdapterProbe:
    link = AdapterProbe(probe_id=probe.id, run_id=run.id, baseline_probe_id=baseline.id, scope=scope)
    session.add(link)
    session.flush()
    return link


def _base_probe_of(session: Session, pool_id: int, settings: dict) -> Probe | None:
    """The newest probe of the whole pool by the model itself, with these settings, that did not fail."""
    pool = session.get(Pool, pool_id)
    wanted = {**settings, "template": template_for(pool, settings["template"])}
    candidates = session.exec(select(Probe, Job.status).join(Job, Job.id == Probe.job_id)
                              .where(Probe.pool_id == pool_id, Probe.prompt_count == pool.prompt_count,
                                     Probe.adapter_path.is_(None), Job.status.not_in(ENDED_BADLY))
                              .order_by(Probe.id.desc())).all()
    # (adaptive is JSON: its None is stored as JSON null, which SQL's IS NULL does not match)
    return next((probe for probe, _ in candidates if probe.adaptive is None and _same_settings(probe) == wanted),
                None)


def probe_jobs(session: Session, links: list[AdapterProbe]) -> list[int]:
    """The jobs of these re-probes and of their baselines, to send after the commit."""
    probes = {link.probe_id for link in links} | {link.baseline_probe_id for link in links}
    return sorted({session.get(Probe, probe_id).job_id for probe_id in probes})


def moved(session: Session, run_id: int, only: str | None = None) -> list[dict]:
    """Per re-probe (of the scope ``only``, if given): its status and, once it and its baseline have succeeded,
    what moved."""
    scopes = []
    for link in adapter_probes(session, run_id):
        if only is not None and link.scope != only:
            continue
        after = session.get(Probe, link.probe_id)
        before = session.get(Probe, link.baseline_probe_id) if link.baseline_probe_id else None
        status = {"after": _status(session, after), "before": _status(session, before)}
        scope = {"scope": link.scope, "probe_id": after.id, "pool_id": after.pool_id,
                 "baseline_probe_id": before.id if before else None, "status": status, "comparison": None}
        if status == {"after": "succeeded", "before": "succeeded"}:
            scope["comparison"] = _comparison(session, before, after)
        scopes.append(scope)
    return scopes


def _comparison(session: Session, before: Probe, after: Probe) -> dict:
    """Over the prompts both probes scored with pass rates."""
    scored = PromptScore.correct_count.is_not(None)
    after_counts = {pid: (c, k) for pid, c, k in session.exec(
        select(PromptScore.prompt_id, PromptScore.correct_count, PromptScore.k)
        .where(PromptScore.probe_id == after.id, scored))}
    rows = [(pid, c, k, *after_counts[pid]) for pid, c, k in session.exec(
        select(PromptScore.prompt_id, PromptScore.correct_count, PromptScore.k)
        .where(PromptScore.probe_id == before.id, scored).order_by(PromptScore.prompt_id)) if pid in after_counts]
    table = np.array([row[1:] for row in rows], dtype=np.int64).reshape(-1, 4)
    result = compare(table[:, 0], table[:, 1], table[:, 2], table[:, 3])
    newly = [rows[i] for i in result.pop("newly_solved")]
    newly.sort(key=lambda row: -row[3] / row[4])
    prompts = {p.id: p for p in session.exec(select(Prompt).where(
        Prompt.id.in_([row[0] for row in newly[:NEWLY_SOLVED_SHOWN]])))}
    result.update(prompts=len(rows), newly_solved_count=len(newly), newly_solved=[
        {"prompt_id": pid, "external_id": prompts[pid].external_id, "text": prompts[pid].text,
         "correct_before": c0, "k_before": k0, "correct_after": c1, "k_after": k1}
        for pid, c0, k0, c1, k1 in newly[:NEWLY_SOLVED_SHOWN]])
    return result


def capacity(session: Session, runs: list[Run]) -> dict:
    """The capacity boundary of an experiment: per strategy, the gain in pass rate on the evaluation pool by the
    base model's tier, averaged over its re-probed runs (seeds); and how many re-probes are still running."""
    by_strategy: dict[str, list[dict]] = {}
    pending = 0
    for run in runs:
        for scope in moved(session, run.id, "evaluation"):
            if scope["comparison"] is None:
                pending += all(status not in (*ENDED_BADLY, "deleted") for status in scope["status"].values())
                continue
            strategy = session.get(Subset, run.subset_id).strategy
            by_strategy.setdefault(strategy, []).append({row["tier"]: row for row in scope["comparison"]["by_tier"]})
    strategies = []
    for strategy, tables in by_strategy.items():
        rows = []
        for tier in TIERS:
            present = [table[tier] for table in tables if tier in table]
            if present:
                rows.append({"tier": tier, "prompts": present[0]["prompts"],
                             **{key: float(np.mean([row[key] for row in present]))
                                for key in ("pass_before", "pass_after", "gain")}})
        strategies.append({"strategy": strategy, "runs": len(tables), "tiers": rows})
    series = [(s["strategy"], [next((row["gain"] for row in s["tiers"] if row["tier"] == tier), None)
                               for tier in TIERS]) for s in strategies]
    return {"strategies": strategies, "pending": pending,
            "figure": capacity_boundary(list(TIERS), series) if strategies else None}
