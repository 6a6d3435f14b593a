"""Selections (previewed, never stored) and subsets (a selection frozen with its inputs)."""

import weakref
from dataclasses import dataclass
from threading import Lock

import numpy as np
from sqlalchemy import func, insert
from sqlmodel import Session, select

from backend.charts import selection_histogram
from backend.curation.advice import regime_advice
from backend.curation.budget import Budget, BudgetError, budget_to_count
from backend.curation.forecast import ShareForecast, compare_picks, forecast_fields, forecast_subset
from backend.curation.histogram import histogram, summary
from backend.curation.posterior import BetaPrior, PassCounts, fit_prior
from backend.curation.strategies import Selector, StrategyError
from backend.database import get_or_404
from backend.errors import AppError
from backend.pools.tables import Prompt
from backend.probes.score_arrays import ProbeScores, load_scores
from backend.probes.service import get_probe, require_finished
from backend.probes.tables import Probe
from backend.subsets.schemas import SelectionPreview, SelectionRequest, SubsetCreate, SubsetRead
from backend.subsets.tables import Subset, SubsetMember

PREVIEW_PROMPTS = 50
HISTOGRAM_BINS = 20
LABEL_FREE_CAVEAT = (
    "Label-free probe: the pool has no answers, so difficulty is 1 - agreement (the share of samples giving "
    "the most common answer), not 1 - pass rate. A prompt answered wrong the same way every time has "
    "agreement 1 and ranks as easy. There is no learnable-share forecast and no band or learnable strategy: "
    "they need pass rates. Label the prompts (upload the pool with answers) and probe again to get them.")


@dataclass
class _ProbeModel:
    """What every preview of one finished probe shares: its counts, the prior fitted to them, and a
    Selector (seeded shuffle and rankings, most of a preview's cost) per recent seed."""

    counts: PassCounts | None  # None for a label-free probe
    prior: BetaPrior | None
    selectors: dict[int, Selector]


# Kept while the probe's scores stay cached (keyed by the scores object itself).
_MODELS: "weakref.WeakKeyDictionary[ProbeScores, _ProbeModel]" = weakref.WeakKeyDictionary()
_MODELS_LOCK = Lock()


def _selector(scores: ProbeScores, seed: int, label_free: bool) -> Selector:
    with _MODELS_LOCK:
        model = _MODELS.get(scores)
        if model is None:
            counts = None if label_free else PassCounts.of(scores.correct_count, scores.k)
            model = _MODELS[scores] = _ProbeModel(counts, None if counts is None else fit_prior(counts), {})
        if seed not in model.selectors:
            if len(model.selectors) >= 8:
                model.selectors.pop(next(iter(model.selectors)))
            model.selectors[seed] = Selector(scores.difficulty, scores.base_wrong, seed, counts=model.counts,
                                             label_free=label_free, prior=model.prior)
        return model.selectors[seed]


@dataclass
class Selection:
    probe: Probe
    scores: ProbeScores
    budget: Budget
    picked: np.ndarray  # indices into scores, in pick order
    selector: Selector
    group_size: int

    @property
    def forecast(self) -> ShareForecast | None:
        """Predicted learnable share at step 0 with its interval; None when label-free."""
        return forecast_subset(self.selector, self.picked, self.group_size)

    @property
    def mean_pass_rate(self) -> float | None:
        if self.probe.label_free or len(self.picked) == 0:
            return None
        return float(np.mean(self.scores.pass_rate[self.picked]))

    @property
    def mean_agreement(self) -> float | None:
        if not self.probe.label_free or len(self.picked) == 0:
            return None
        return float(np.mean(1.0 - self.scores.difficulty[self.picked]))


def _check_request(req: SelectionRequest) -> None:
    if not 2 <= req.group_size <= 64:
        raise AppError(422, f"group_size must be between 2 and 64 (got {req.group_size}).")
    if not 0.0 <= req.band_low <= req.band_high <= 1.0:
        raise AppError(422, f"band needs 0 <= band_low <= band_high <= 1 (got {req.band_low}, {req.band_high}).")


def compute_selection(session: Session, req: SelectionRequest) -> Selection:
    _check_request(req)
    probe = get_probe(session, req.probe_id)
    require_finished(session, probe)
    scores = load_scores(session, probe)
    try:
        budget = budget_to_count(len(scores), **_budget_args(req))
        selector = _selector(scores, req.seed, probe.label_free)
        picked = selector.pick(req.strategy, budget.n, group_size=req.group_size,
                               band=(req.band_low, req.band_high))
    except (BudgetError, StrategyError) as exc:
        raise AppError(422, str(exc)) from exc
    return Selection(probe=probe, scores=scores, budget=budget, picked=picked, selector=selector,
                     group_size=req.group_size)


def _budget_args(req: SelectionRequest) -> dict:
    kind, value = req.budget.kind, req.budget.value
    if kind == "count":
        if value != int(value):
            raise BudgetError(f"A count budget must be a whole number of prompts (got {value}).")
        return {"count": int(value)}
    if kind == "fraction":
        return {"fraction": value}
    return {"money": value, "cost_per_prompt": req.budget.cost_per_prompt}


def preview(session: Session, req: SelectionRequest) -> SelectionPreview:
    selection = compute_selection(session, req)
    scores, picked, label_free = selection.scores, selection.picked, selection.probe.label_free
    basis = _basis(selection.probe)
    success = 1.0 - scores.difficulty  # pass rate, or agreement when label-free
    all_counts = histogram(success, HISTOGRAM_BINS)
    picked_counts = histogram(success[picked], HISTOGRAM_BINS)
    comparison = compare_picks(selection.selector, selection.budget.n, group_size=req.group_size,
                               band=(req.band_low, req.band_high))
    advice = None if label_free else regime_advice(summary(scores.pass_rate), comparison)
    return SelectionPreview(
        strategy=req.strategy, n=len(picked), requested=selection.budget.requested,
        clamped=selection.budget.clamped, warning=_warning(selection), pool_size=len(scores),
        difficulty_basis=basis, caveat=LABEL_FREE_CAVEAT if label_free else None,
        **forecast_fields(selection.forecast),
        mean_pass_rate=selection.mean_pass_rate, mean_agreement=selection.mean_agreement,
        figure=selection_histogram(all_counts["edges"], all_counts["counts"], picked_counts["counts"], basis,
                                   req.strategy),
        comparison=comparison, advice=advice,
        prompts=_picked_prompts(session, scores, picked[:PREVIEW_PROMPTS], label_free),
    )


def _basis(probe: Probe) -> str:
    return "agreement" if probe.label_free else "pass_rate"


def _warning(selection: Selection) -> str | None:
    notes = [selection.budget.warning] if selection.budget.warning else []
    if len(selection.picked) > selection.budget.n:
        notes.append(f"The all strategy takes the whole pool ({len(selection.picked)} probed prompts) whatever the "
                     f"budget of {selection.budget.n}: it is the full-data baseline.")
    elif len(selection.picked) < selection.budget.n:
        notes.append(f"Only {len(selection.picked)} prompts qualify for this strategy, fewer than the "
                     f"budget of {selection.budget.n}; all of them are picked.")
    return " ".join(notes) or None


def _picked_prompts(session: Session, scores: ProbeScores, indices: np.ndarray, label_free: bool) -> list[dict]:
    ids = [int(i) for i in scores.prompt_ids[indices]]
    prompts = {p.id: p for p in session.exec(select(Prompt).where(Prompt.id.in_(ids)))}
    return [
        {"id": pid, "external_id": prompts[pid].external_id, "text": prompts[pid].text,
         "answer": prompts[pid].answer, "difficulty": float(scores.difficulty[i]),
         # a label-free probe has pass rates for the prompts labeled since
         "pass_rate": None if np.isnan(scores.pass_rate[i]) else float(scores.pass_rate[i]),
         "agreement": 1.0 - float(scores.difficulty[i]) if label_free else None}
        for pid, i in zip(ids, indices, strict=True)
    ]


def freeze(session: Session, req: SubsetCreate) -> Subset:
    selection = compute_selection(session, req)
    n = len(selection.picked)
    subset = Subset(
        name=req.name or f"{req.strategy} N={n} (probe {selection.probe.id})", probe_id=selection.probe.id,
        pool_id=selection.probe.pool_id, strategy=req.strategy, budget_kind=req.budget.kind,
        budget_value=req.budget.value, cost_per_prompt=req.budget.cost_per_prompt,
        n_requested=selection.budget.requested, n=n, seed=req.seed, group_size=req.group_size,
        band_low=req.band_low if req.strategy == "band" else None,
        band_high=req.band_high if req.strategy == "band" else None,
        **forecast_fields(selection.forecast),
        mean_pass_rate=selection.mean_pass_rate,
    )
    session.add(subset)
    session.flush()
    members = [{"subset_id": subset.id, "rank": rank, "prompt_id": int(pid)}
               for rank, pid in enumerate(selection.scores.prompt_ids[selection.picked])]
    for start in range(0, len(members), 10_000):
        session.execute(insert(SubsetMember), members[start:start + 10_000])
    session.flush()
    return subset


def subset_read(session: Session, subset: Subset) -> SubsetRead:
    """A subset as the API shows it, with the basis of its difficulty (pass rate or agreement)."""
    probe = session.get(Probe, subset.probe_id)
    return SubsetRead.model_validate({**subset.model_dump(), "difficulty_basis": _basis(probe),
                                      "created_by": subset.created_by})


def unlabeled_members(session: Session, subset: Subset) -> int:
    """Prompts of the subset without a gold answer (training's reward needs one for each)."""
    return session.exec(select(func.count()).select_from(SubsetMember).join(Prompt, Prompt.id == SubsetMember.prompt_id)
                        .where(SubsetMember.subset_id == subset.id, Prompt.gold.is_(None))).one()


def get_subset(session: Session, subset_id: int) -> Subset:
    return get_or_404(session, Subset, subset_id)


def list_subsets(session: Session, probe_id: int | None, *, limit: int | None = None,
                 offset: int = 0) -> list[Subset]:
    query = select(Subset).order_by(Subset.id.desc())
    if probe_id is not None:
        query = query.where(Subset.probe_id == probe_id)
    return list(session.exec(query.offset(offset).limit(limit)))
