"""The trust report for a probe: from its own labeled prompts, or from a comparable labeled probe
(same model and sampling settings) when it has too few."""

import numpy as np
from sqlmodel import Session, select

from backend.charts import agreement_scatter
from backend.errors import AppError
from backend.jobs.tables import Job
from backend.labels.trust import trust_report
from backend.probes.tables import Probe, PromptScore

MIN_GRADED = 10  # fewer labeled prompts say too little about a ranking
SAME_SETTINGS = ("model", "k", "temperature", "max_new_tokens", "template", "chat_template_options",
                 "grading_policy")


def _graded(session: Session, probe_id: int) -> tuple[np.ndarray, np.ndarray]:
    rows = session.exec(select(PromptScore.agreement, PromptScore.pass_rate)
                        .where(PromptScore.probe_id == probe_id, PromptScore.pass_rate.is_not(None))).all()
    if not rows:
        return np.empty(0), np.empty(0)
    agreement, pass_rate = zip(*rows, strict=True)
    return np.asarray(agreement, float), np.asarray(pass_rate, float)


def _comparable(session: Session, probe: Probe) -> Probe | None:
    """The newest finished probe with the same model and settings and enough labeled prompts."""
    candidates = session.exec(select(Probe).join(Job, Job.id == Probe.job_id)
                              .where(Probe.id != probe.id, Job.status == "succeeded", Probe.model == probe.model,
                                     Probe.k == probe.k, Probe.max_new_tokens == probe.max_new_tokens,
                                     Probe.grading_policy == probe.grading_policy)
                              .order_by(Probe.id.desc()))
    for other in candidates:
        if all(getattr(other, name) == getattr(probe, name) for name in SAME_SETTINGS) and \
                _graded(session, other.id)[0].size >= MIN_GRADED:
            return other
    return None


def probe_trust(session: Session, probe: Probe, n: int | None, fraction: float) -> dict:
    """Spearman rho, overlap at the budget and a scatter, from the probe's own labeled prompts or a
    comparable probe's. 409 when neither has MIN_GRADED labeled prompts."""
    source = probe
    agreement, pass_rate = _graded(session, probe.id)
    if agreement.size < MIN_GRADED:
        source = _comparable(session, probe)
        if source is None:
            raise AppError(409, f"Probe {probe.id} has {agreement.size} prompts with gold answers, and no other "
                                f"finished probe with the same model and settings has {MIN_GRADED} or more. "
                                "Label some of its prompts (import labels), or probe a labeled pool with the same "
                                "settings, to see how far agreement can be trusted.")
        agreement, pass_rate = _graded(session, source.id)
    budget = n if n is not None else max(1, round(fraction * agreement.size))
    budget = min(budget, agreement.size)
    report = trust_report(agreement, pass_rate, budget)
    return {**report.as_dict(), "probe_id": probe.id, "source_probe_id": source.id,
            "comparable": source.id != probe.id, "figure": agreement_scatter(agreement, pass_rate)}
