"""Experiments: one budget on one probe, a frozen subset and a training run per strategy with the same
settings and seed; and their comparison. The caller commits, then enqueues the runs."""

from __future__ import annotations

import math
import re

from sqlmodel import Session, select

from backend.charts import gain_scatter, line_chart
from backend.curation.strategies import STRATEGIES, WHOLE_POOL
from backend.database import get_or_404
from backend.errors import AppError
from backend.experiments.comparison import (
    ACCURACY,
    EVAL_SAMPLES,
    LEARNABLE,
    linear_fit,
    running_mean,
    steps_to_reach,
    summarize_run,
)
from backend.experiments.costs import strategy_cost
from backend.experiments.schemas import CompareRow, Comparison, ExperimentCreate, ExperimentRead, StrategySummary
from backend.experiments.statistics import (
    accuracy_interval,
    bootstrap_fit,
    difference_interval,
    excludes_zero,
    mean_interval,
)
from backend.experiments.tables import Experiment
from backend.jobs.service import lock_job, request_cancel
from backend.jobs.tables import FINISHED, JobStatus
from backend.pools.demo import HELD_OUT_POOL_NAME
from backend.pools.schemas import PoolRead
from backend.pools.service import create_demo_pool
from backend.pools.tables import Pool
from backend.probes.service import get_probe, require_finished
from backend.probes.tables import Probe
from backend.runs import service as runs
from backend.runs.schemas import RunRead
from backend.runs.tables import Run
from backend.subsets.schemas import SubsetCreate
from backend.subsets.service import freeze
from backend.subsets.tables import Subset

OOD_KEY = re.compile(r"^ood/(\d+)/(base_)?pass@(\d+)$")


def check_strategies(strategies: list[str]) -> list[str]:
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown or not strategies:
        what = f"Unknown strategy {', '.join(map(repr, unknown))}" if unknown else "No strategy chosen"
        raise AppError(422, f"{what}; choose from: {', '.join(STRATEGIES)}.", details={"allowed": list(STRATEGIES)})
    if len(set(strategies)) != len(strategies):
        raise AppError(422, f"A strategy is listed twice ({', '.join(strategies)}); list each once.")
    return strategies


def create_experiment(session: Session, body: ExperimentCreate) -> tuple[Experiment, list[Run]]:
    """Freeze one subset per strategy and seed (same budget and G = num_generations), then one run each."""
    strategies = check_strategies(body.strategies)
    probe = get_probe(session, body.probe_id)
    settings = runs.resolve_settings(body.preset, body.settings, probe, allow_other_model=body.allow_other_model)
    seeds = body.seeds or [settings.seed]
    if len(set(seeds)) != len(seeds):
        raise AppError(422, f"seeds {seeds}: list each seed once.")
    require_finished(session, probe)
    pool = session.get(Pool, probe.pool_id)
    experiment = Experiment(name="", probe_id=probe.id, pool_id=probe.pool_id, budget_kind=body.budget.kind,
                            budget_value=body.budget.value, cost_per_prompt=body.budget.cost_per_prompt, n=0,
                            strategies=strategies, settings=settings.model_dump(mode="json"),
                            band_low=body.band_low if "band" in strategies else None,
                            band_high=body.band_high if "band" in strategies else None)
    session.add(experiment)
    session.flush()
    created = []
    for strategy in strategies:
        for seed in seeds:
            subset = freeze(session, SubsetCreate(
                probe_id=probe.id, strategy=strategy, budget=body.budget, group_size=settings.num_generations,
                band_low=body.band_low, band_high=body.band_high, seed=seed,
                name=f"experiment {experiment.id}: {strategy}" + (f" (seed {seed})" if len(seeds) > 1 else "")))
            if subset.n == 0:
                raise AppError(422, f"Strategy '{strategy}' picks no prompt of probe {probe.id} at this budget (for "
                                    "base_wrong: the model's first answer is right everywhere, for base_right: wrong "
                                    "everywhere; for band: no pass rate in the band). Leave it out of the experiment.")
            experiment.n = max(experiment.n, subset.n_requested)
            created.append(runs.create_run(session, subset.id, settings.model_copy(update={"seed": seed}),
                                           experiment_id=experiment.id))
    experiment.name = body.name or (f"{pool.name if pool else 'pool'} · N={experiment.n} · {len(strategies)} strategies"
                                    + (f" × {len(seeds)} seeds" if len(seeds) > 1 else ""))
    session.add(experiment)
    session.flush()
    return experiment, created


# The demo experiment (one click from the planner): the strategies the papers contrast, at a budget the
# embedded model trains through in a few minutes per run on two CPU cores, evaluated on the held-out demo.
DEMO_STRATEGIES = ["hard", "easy", "random", "learnable"]
DEMO_COUNT = 30
DEMO_PRESET = "demo_cpu"


def create_demo_experiment(session: Session, probe_id: int) -> tuple[Experiment, list[Run]]:
    """The demo experiment on a probe of the demo pool; the held-out demo pool is created if there is none."""
    probe = get_probe(session, probe_id)
    pool = session.get(Pool, probe.pool_id)
    if pool is None or not PoolRead.model_validate(pool).is_demo:
        raise AppError(422, f"Probe {probe.id} is not of the demo pool, and the demo experiment's settings are made "
                            "for it. Create the demo pool (POST /api/pools/demo), probe it with the demo preset, or "
                            "launch an experiment with your own settings (POST /api/experiments).")
    held_out = session.exec(select(Pool).where(Pool.name == HELD_OUT_POOL_NAME, Pool.source_format == "generated")
                            .order_by(Pool.id.desc())).first()
    if held_out is None:
        held_out = create_demo_pool(session, held_out=True)
    return create_experiment(session, ExperimentCreate(
        probe_id=probe.id, budget={"kind": "count", "value": DEMO_COUNT}, strategies=DEMO_STRATEGIES,
        preset=DEMO_PRESET, settings={"eval_pool_id": held_out.id, "eval_samples": held_out.prompt_count},
        name=f"Demo: {', '.join(DEMO_STRATEGIES)} at N={DEMO_COUNT}"))


def get_experiment(session: Session, experiment_id: int) -> Experiment:
    return get_or_404(session, Experiment, experiment_id)


def list_experiments(session: Session, probe_id: int | None = None, *, limit: int | None = None,
                     offset: int = 0) -> list[Experiment]:
    query = select(Experiment).order_by(Experiment.id.desc())
    if probe_id is not None:
        query = query.where(Experiment.probe_id == probe_id)
    return list(session.exec(query.offset(offset).limit(limit)))


def aggregate_status(statuses: list[str]) -> str:
    """One word for the experiment: queued until a run starts, running while any run is unfinished, then
    the runs' common final status, or mixed."""
    if not statuses or set(statuses) == {JobStatus.queued.value}:
        return JobStatus.queued.value
    if any(JobStatus(s) not in FINISHED for s in statuses):
        return JobStatus.running.value
    return statuses[0] if len(set(statuses)) == 1 else "mixed"


def experiment_read(session: Session, experiment: Experiment) -> ExperimentRead:
    run_reads = [RunRead.of(session, run) for run in reversed(runs.list_runs(session, experiment_id=experiment.id))]
    probe = session.get(Probe, experiment.probe_id)
    caveats = runs.forecast_caveats(probe, experiment.settings)
    return ExperimentRead(
        id=experiment.id, name=experiment.name, probe_id=experiment.probe_id, pool_id=experiment.pool_id,
        created_by=experiment.created_by,
        budget={"kind": experiment.budget_kind, "value": experiment.budget_value,
                "cost_per_prompt": experiment.cost_per_prompt},
        n=experiment.n, strategies=experiment.strategies, settings=experiment.settings,
        seeds=sorted({r.seed for r in run_reads}) or [experiment.settings.get("seed", 0)],
        probe_model=probe.model if probe else None, forecast_applies=not caveats, forecast_caveats=caveats,
        status=aggregate_status([r.job.status for r in run_reads]), created_at=experiment.created_at,
        runs=run_reads)


def cancel_experiment(session: Session, experiment: Experiment) -> None:
    for run in runs.list_runs(session, experiment_id=experiment.id):
        job = lock_job(session, run.job_id)
        if JobStatus(job.status) not in FINISHED:  # a run that ended meanwhile is left as it is
            request_cancel(session, job)


def _ood_columns(session: Session, series: dict[str, dict[str, list]]) -> tuple[dict[str, float], dict[str, float]]:
    trained, base = {}, {}
    for key, values in series.items():
        match = OOD_KEY.match(key)
        if not match or not values["values"]:
            continue
        pool = session.get(Pool, int(match.group(1)))
        label = f"{pool.name if pool else 'pool'} (#{match.group(1)}) pass@{match.group(3)}"
        (base if match.group(2) else trained)[label] = values["values"][-1]
    return trained, base


def compare(session: Session, experiment: Experiment) -> Comparison:
    rows, accuracy_lines, learnable_lines, all_series, accuracy_intervals = [], [], [], [], {}
    experiment_runs = list(reversed(runs.list_runs(session, experiment_id=experiment.id)))
    experiment_seeds = {run.seed for run in experiment_runs}
    for run in experiment_runs:
        row, series = _compare_row(session, run)
        rows.append(row)
        all_series.append(series)
        acc = series.get(ACCURACY, {"steps": [], "values": []})
        name = row.strategy if len(experiment_seeds) < 2 else f"{row.strategy} · seed {row.seed}"
        accuracy_lines.append((name, acc["steps"], acc["values"]))
        samples = dict(zip(*(series.get(EVAL_SAMPLES, {}).get(key, []) for key in ("steps", "values")), strict=True))
        if all(samples.get(step) for step in acc["steps"]):
            accuracy_intervals[name] = [accuracy_interval(value, int(samples[step]))
                                                for step, value in zip(acc["steps"], acc["values"], strict=True)]
        share = series.get(LEARNABLE, {"steps": [], "values": []})
        learnable_lines.append((name, share["steps"], running_mean(share["values"])))
    # A running or failed run's latest evaluation is not a final accuracy: only succeeded runs are compared.
    finished = [row for row in rows if row.status == JobStatus.succeeded.value and row.final_accuracy is not None]
    _flag_within_noise_of_best(finished)
    if finished and (best := max(row.final_accuracy for row in finished)) > 0:
        done = {row.run_id for row in finished}
        for row, series in zip(rows, all_series, strict=True):
            if row.run_id in done:
                row.steps_to_95 = steps_to_reach(series, 0.95 * best)
        baselines = [row.steps_to_95 for row in finished if row.strategy == WHOLE_POOL and row.steps_to_95]
        for row in finished:  # over seeds, the all runs' mean
            if baselines and row.steps_to_95 is not None:
                row.steps_share_of_all = row.steps_to_95 / (sum(baselines) / len(baselines))
    points, scatter_runs = _scatter_points(session, experiment, rows)
    xs, ys = [p["x"] for p in points], [p["y"] for p in points]
    fit = linear_fit(xs, ys)
    intervals = bootstrap_fit(xs, ys)
    figures = {
        "eval_accuracy": line_chart("Evaluation accuracy (step 0 = base), 95% intervals",
                                    "accuracy", accuracy_lines, y_range=[0, 1.05], intervals=accuracy_intervals),
        "learnable_share": line_chart("Measured learnable share over steps (running mean)", "learnable share",
                                      learnable_lines, y_range=[0, 1.05]),
        "scatter": gain_scatter(points, fit.as_dict()),
    }
    return Comparison(experiment_id=experiment.id, figures=figures, table=rows, scatter_runs=scatter_runs,
                      strategies=summarize_strategies(finished),
                      fit={**fit.as_dict(), "r2_interval": intervals["r2"], "slope_interval": intervals["slope"]})


def summarize_strategies(rows: list[CompareRow]) -> list[StrategySummary]:
    """Each strategy's succeeded runs (one per seed): means with 95% t intervals."""
    summaries = []
    for strategy in dict.fromkeys(row.strategy for row in rows):
        done = [row for row in rows if row.strategy == strategy]
        final, final_interval = _mean([row.final_accuracy for row in done])
        gain, gain_interval = _mean([row.gain for row in done])
        learnable, learnable_interval = _mean([row.learnable_pct for row in done])
        summaries.append(StrategySummary(
            strategy=strategy, runs=len(done), final_accuracy=final, final_accuracy_interval=final_interval,
            gain=gain, gain_interval=gain_interval, learnable_pct=learnable, learnable_pct_interval=learnable_interval,
            predicted_learnable_share=_mean([row.predicted_learnable_share for row in done])[0],
            measured_learnable_share=_mean([row.measured_learnable_share for row in done])[0]))
    return summaries


def _mean(values: list[float | None]) -> tuple[float | None, tuple[float, float] | None]:
    present = [v for v in values if v is not None]
    return mean_interval(present) if present else (None, None)


def _flag_within_noise_of_best(rows: list[CompareRow]) -> None:
    """Mark each evaluated run of ``rows`` whose final accuracy cannot be told apart from the best run's."""
    evaluated = [row for row in rows if row.eval_samples]
    if not evaluated:
        return
    best = max(evaluated, key=lambda row: row.final_accuracy)
    for row in evaluated:
        row.within_noise_of_best = row is best or not excludes_zero(difference_interval(
            best.final_accuracy, best.eval_samples, row.final_accuracy, row.eval_samples))


def _compare_row(session: Session, run: Run) -> tuple[CompareRow, dict]:
    series = runs.metric_series(session, run.id)
    summary = summarize_run(series)
    subset = session.get(Subset, run.subset_id)
    ood, ood_base = _ood_columns(session, series)
    base, final = summary.base_accuracy, summary.final_accuracy
    base_n, final_n = summary.base_samples, summary.final_samples
    gain_interval = (difference_interval(base, base_n, final, final_n)
                     if summary.gain is not None and base_n and final_n else None)
    predicted, measured = subset.predicted_learnable_share, summary.measured_learnable_share
    probe, pool = session.get(Probe, subset.probe_id), session.get(Pool, subset.pool_id)
    step_times = series.get("step_time", {}).get("values", [])
    cost = strategy_cost(
        strategy=subset.strategy, labels=subset.n,
        price_per_label=subset.cost_per_prompt if subset.cost_per_prompt is not None else pool.cost_per_label,
        probe_samples=probe.samples_drawn or probe.prompt_count * probe.k, probe_max_new_tokens=probe.max_new_tokens,
        probe_samples_per_second=probe.samples_per_second, training_seconds=math.fsum(step_times) or None,
        gain=summary.gain, device=(run.library_versions or {}).get("device"))
    row = CompareRow(
        run_id=run.id, experiment_id=run.experiment_id, strategy=subset.strategy,
        status=runs.run_job(session, run).status,
        n=subset.n, base_accuracy=summary.base_accuracy, final_accuracy=summary.final_accuracy, gain=summary.gain,
        best_accuracy=summary.best_accuracy,
        base_accuracy_interval=accuracy_interval(base, base_n) if base is not None and base_n else None,
        final_accuracy_interval=accuracy_interval(final, final_n) if final is not None and final_n else None,
        eval_samples=final_n, gain_interval=gain_interval,
        gain_beyond_noise=excludes_zero(gain_interval) if gain_interval else None,
        learnable_share_error=measured - predicted if measured is not None and predicted is not None else None,
        learnable_pct=summary.learnable_pct, predicted_learnable_share=subset.predicted_learnable_share,
        predicted_learnable_share_low=subset.predicted_learnable_share_low,
        predicted_learnable_share_high=subset.predicted_learnable_share_high,
        measured_learnable_share=summary.measured_learnable_share, ood=ood, ood_base=ood_base, subset_id=subset.id,
        seed=run.seed, settings=run.settings, library_versions=run.library_versions, cost=cost)
    return row, series


def _scatter_points(session: Session, experiment: Experiment, rows: list[CompareRow]) -> tuple[list[dict], list[int]]:
    """Succeeded runs with a gain and a learnable %: this experiment's, and those of earlier experiments on
    the same pool evaluated on the same prompts (gains on different evaluation sets do not compare)."""
    same_eval = ("eval_pool_id", "eval_samples")
    earlier = list(session.exec(select(Experiment).where(Experiment.pool_id == experiment.pool_id,
                                                         Experiment.id < experiment.id).order_by(Experiment.id)))
    candidates = [(row, row.strategy) for row in rows]
    for other in earlier:
        if any(other.settings.get(key) != experiment.settings.get(key) for key in same_eval):
            continue
        for run in reversed(runs.list_runs(session, experiment_id=other.id)):
            row, _ = _compare_row(session, run)
            candidates.append((row, f"exp {other.id}: {row.strategy}"))
    points, ids = [], []
    for row, label in candidates:
        if row.status == JobStatus.succeeded.value and row.gain is not None and row.learnable_pct is not None:
            points.append({"x": row.learnable_pct, "y": row.gain, "label": label})
            ids.append(row.run_id)
    return points, ids
