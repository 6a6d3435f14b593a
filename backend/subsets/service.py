"""Selections (previewed, never stored) and subsets (a selection frozen with its inputs)."""

import weakref
from dataclasses import dataclass
from threading import Lock

import numpy as np
from sqlalchemy import insert
from sqlmodel import Session, select

from backend.charts import selection_histogram
from backend.curation.budget import Budget, BudgetError, budget_to_count
from backend.curation.forecast import compare_picks, predicted_learnable_share
from backend.curation.histogram import histogram
from backend.curation.strategies import Selector, StrategyError
from backend.database import get_or_404
from backend.errors import AppError
from backend.pools.tables import Prompt
from backend.probes.score_arrays import ProbeScores, load_scores
from backend.probes.service import get_probe, require_finished
from backend.probes.tables import Probe
from backend.subsets.schemas import SelectionPreview, SelectionRequest, SubsetCreate
from backend.subsets.tables import Subset, SubsetMember

PREVIEW_PROMPTS = 50
HISTOGRAM_BINS = 20

# A Selector holds the seeded shuffle and the rankings; building it is most of a preview's cost,
# so keep one per (finished probe's scores, seed) while those scores stay cached.
_SELECTORS: "weakref.WeakKeyDictionary[ProbeScores, dict[int, Selector]]" = weakref.WeakKeyDictionary()
_SELECTORS_LOCK = Lock()


def _selector(scores: ProbeScores, seed: int) -> Selector:
    with _SELECTORS_LOCK:
        by_seed = _SELECTORS.setdefault(scores, {})
        if seed not in by_seed:
            if len(by_seed) >= 8:
                by_seed.pop(next(iter(by_seed)))
            by_seed[seed] = Selector(scores.difficulty, scores.base_wrong, seed)
        return by_seed[seed]


@dataclass
class Selection:
    probe: Probe
    scores: ProbeScores
    budget: Budget
    picked: np.ndarray  # indices into scores, in pick order
    selector: Selector

    @property
    def predicted_learnable_share(self) -> float:
        return predicted_learnable_share(1.0 - self.scores.difficulty[self.picked], self.group_size)

    @property
    def mean_pass_rate(self) -> float | None:
        if self.probe.label_free or len(self.picked) == 0:
            return None
        return float(np.mean(self.scores.pass_rate[self.picked]))

    group_size: int = 8


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
        selector = _selector(scores, req.seed)
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
    scores, picked = selection.scores, selection.picked
    metric = "agreement" if selection.probe.label_free else "pass_rate"
    success = 1.0 - scores.difficulty
    all_counts = histogram(success, HISTOGRAM_BINS)
    picked_counts = histogram(success[picked], HISTOGRAM_BINS)
    comparison = compare_picks(selection.selector, selection.budget.n, group_size=req.group_size,
                               band=(req.band_low, req.band_high))
    if selection.probe.label_free:
        for row in comparison:
            row["mean_pass_rate"] = None
    return SelectionPreview(
        strategy=req.strategy, n=len(picked), requested=selection.budget.requested,
        clamped=selection.budget.clamped, warning=_warning(selection), pool_size=len(scores),
        predicted_learnable_share=selection.predicted_learnable_share, mean_pass_rate=selection.mean_pass_rate,
        figure=selection_histogram(all_counts["edges"], all_counts["counts"], picked_counts["counts"], metric,
                                   req.strategy),
        comparison=comparison,
        prompts=_picked_prompts(session, scores, picked[:PREVIEW_PROMPTS]),
    )


def _warning(selection: Selection) -> str | None:
    notes = [selection.budget.warning] if selection.budget.warning else []
    if len(selection.picked) < selection.budget.n:
        notes.append(f"Only {len(selection.picked)} prompts qualify for this strategy, fewer than the "
                     f"budget of {selection.budget.n}; all of them are picked.")
    return " ".join(notes) or None


def _picked_prompts(session: Session, scores: ProbeScores, indices: np.ndarray) -> list[dict]:
    ids = [int(i) for i in scores.prompt_ids[indices]]
    prompts = {p.id: p for p in session.exec(select(Prompt).where(Prompt.id.in_(ids)))}
    return [
        {"id": pid, "external_id": prompts[pid].external_id, "text": prompts[pid].text,
         "answer": prompts[pid].answer, "difficulty": float(scores.difficulty[i]),
         "pass_rate": None if np.isnan(scores.pass_rate[i]) else float(scores.pass_rate[i])}
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
        predicted_learnable_share=selection.predicted_learnable_share, mean_pass_rate=selection.mean_pass_rate,
    )
    session.add(subset)
    session.flush()
    members = [{"subset_id": subset.id, "rank": rank, "prompt_id": int(pid)}
               for rank, pid in enumerate(selection.scores.prompt_ids[selection.picked])]
    for start in range(0, len(members), 10_000):
        session.execute(insert(SubsetMember), members[start:start + 10_000])
    session.flush()
    return subset


def get_subset(session: Session, subset_id: int) -> Subset:
    return get_or_404(session, Subset, subset_id)


def list_subsets(session: Session, probe_id: int | None) -> list[Subset]:
    query = select(Subset).order_by(Subset.id.desc())
    if probe_id is not None:
        query = query.where(Subset.probe_id == probe_id)
    return list(session.exec(query))
