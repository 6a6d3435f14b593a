"""Training runs: create (validate, then write the job, the run and its task; the caller commits and sends),
read, metrics."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, insert
from sqlmodel import Session, select

from backend.curation.grading import TASK_TYPES
from backend.database import get_or_404
from backend.errors import AppError
from backend.jobs.dispatch import add_task
from backend.jobs.service import create_job
from backend.jobs.tables import Job
from backend.models_catalog import check_model
from backend.pools.tables import Pool
from backend.probes.tables import Probe
from backend.runs.kind import TRAIN
from backend.runs.settings import PRESETS, TrainingSettings, parse_training_settings
from backend.runs.tables import Run, RunMetric
from backend.subsets.service import unlabeled_members
from backend.subsets.tables import Subset


def resolve_settings(preset: str | None, overrides: dict[str, Any] | None, probe: Probe, *,
                     allow_other_model: bool = False) -> TrainingSettings:
    """A preset (or the defaults) with the user's overrides, checked against every rule, for a subset of
    ``probe``: the model and the grading policy default to the probe's. 422 in words."""
    if preset is not None and preset not in PRESETS:
        raise AppError(422, f"Unknown training preset '{preset}'; use one of: {', '.join(PRESETS)}.",
                       details={"allowed": list(PRESETS)})
    raw = {**PRESETS.get(preset or "", {}), **(overrides or {})}
    parsed, problems = parse_training_settings(raw)
    if parsed is None:
        raise AppError(422, "Training settings rejected: " + " ".join(problems), details={"problems": problems})
    model = choose_model(probe, parsed.model, allow_other_model)
    return parsed.model_copy(update={"model": model,
                                     "grading_policy": parsed.grading_policy or probe.grading_policy})


def choose_model(probe: Probe, requested: str | None, allow_other_model: bool) -> str:
    """The probe's model unless another is named and explicitly allowed: difficulty scores, and the forecast
    made from them, hold for the model that was probed."""
    if requested is None or not requested.strip() or requested == probe.model:
        return probe.model
    requested = check_model(requested)
    if not allow_other_model:
        raise AppError(422, f"Probe {probe.id} measured difficulty with model '{probe.model}', so the subset and its "
                            f"forecast are for that model. Leave model out to train '{probe.model}', or set "
                            f"allow_other_model to true to train '{requested}' anyway (the run is then marked: the "
                            "difficulty forecast does not apply).",
                       details={"probe_model": probe.model, "model": requested})
    return requested


def forecast_caveats(probe: Probe | None, settings: dict[str, Any]) -> list[str]:
    """Why the probe's difficulty forecast does not describe this training (empty: it applies)."""
    if probe is None:
        return []
    caveats = []
    if settings.get("model") and settings["model"] != probe.model:
        caveats.append(f"trains '{settings['model']}', but difficulty was probed with '{probe.model}'")
    policy = settings.get("grading_policy")
    if policy and policy != probe.grading_policy:
        caveats.append(f"grades {policy}, but the probe's pass rates were graded {probe.grading_policy}")
    return caveats


def check_training_pools(session: Session, subset: Subset, settings: TrainingSettings) -> None:
    """409 unless the training pool and every evaluation pool have gold answers (rewards and accuracy need them)."""
    pool = session.get(Pool, subset.pool_id)
    if pool is not None and pool.has_answers and pool.task_type not in TASK_TYPES:
        raise AppError(422, f"Pool {pool.id} has task type '{pool.task_type}', which the reward cannot grade; "
                            f"upload it again with task_type one of {', '.join(TASK_TYPES)}.")
    if pool is None:
        raise AppError(404, f"Subset {subset.id}'s pool no longer exists.")
    unlabeled = unlabeled_members(session, subset)
    if unlabeled:
        raise AppError(409, f"{unlabeled} of the {subset.n} prompts of subset {subset.id} have no answer; GRPO's "
                            "reward grades completions against gold answers. Export the subset for labeling, "
                            "import the labels (POST /api/pools/{pool_id}/labels, or Pull labels from Label "
                            "Studio), then launch again.".replace("{pool_id}", str(pool.id)))
    for role, pool_id in [("Evaluation", settings.eval_pool_id)] + [("Out-of-distribution", p)
                                                                     for p in settings.ood_pool_ids]:
        if pool_id is None:
            continue
        other = get_or_404(session, Pool, pool_id)
        if not other.has_answers:
            raise AppError(409, f"{role} pool {other.id} ('{other.name}') has no answers, so accuracy cannot be "
                                "measured on it. Choose a pool uploaded with an answer column, or upload one.")
        if other.task_type not in TASK_TYPES:
            raise AppError(422, f"{role} pool {other.id} has task type '{other.task_type}', which cannot be graded; "
                                f"choose a pool of type {', '.join(TASK_TYPES)}.")


def create_run(session: Session, subset_id: int, settings: dict[str, Any] | TrainingSettings, *,
               preset: str | None = None, experiment_id: int | None = None, allow_other_model: bool = False) -> Run:
    """A queued ``train`` job and its run. 404: no such subset or pool; 409: a pool without answers;
    422: settings break a rule (said in words), the model is unknown, or differs from the probe's without
    ``allow_other_model``. ``settings`` given as TrainingSettings are already resolved for the probe."""
    subset = get_or_404(session, Subset, subset_id)
    parsed = settings if isinstance(settings, TrainingSettings) else resolve_settings(
        preset, settings, session.get(Probe, subset.probe_id), allow_other_model=allow_other_model)
    check_training_pools(session, subset, parsed)
    job = create_job(session, TRAIN.name, total=parsed.max_steps,
                     tokens=parsed.max_steps * parsed.batch_size * parsed.max_completion_length)
    run = Run(subset_id=subset.id, job_id=job.id, experiment_id=experiment_id, model=parsed.model,
              settings=parsed.model_dump(mode="json"), seed=parsed.seed, eval_pool_id=parsed.eval_pool_id)
    session.add(run)
    session.flush()
    add_task(session, TRAIN, job, "the run", {"run_id": run.id})
    return run


def get_run(session: Session, run_id: int) -> Run:
    return get_or_404(session, Run, run_id)


def list_runs(session: Session, *, experiment_id: int | None = None, subset_id: int | None = None,
              limit: int | None = None, offset: int = 0) -> list[Run]:
    query = select(Run).order_by(Run.id.desc())
    if experiment_id is not None:
        query = query.where(Run.experiment_id == experiment_id)
    if subset_id is not None:
        query = query.where(Run.subset_id == subset_id)
    return list(session.exec(query.offset(offset).limit(limit)))


def run_job(session: Session, run: Run) -> Job:
    return session.get(Job, run.job_id)


def replace_metrics(session: Session, run_id: int, step: int, values: dict[str, float]) -> None:
    """Write a step's values; a retried step replaces what it wrote before instead of doubling it."""
    if not values:
        return
    session.execute(delete(RunMetric).where(RunMetric.run_id == run_id, RunMetric.step == step,
                                            RunMetric.key.in_(list(values))))
    session.execute(insert(RunMetric), [{"run_id": run_id, "step": step, "key": key, "value": value}
                                        for key, value in values.items()])


def metric_keys(session: Session, run_id: int) -> list[str]:
    return sorted(session.exec(select(RunMetric.key).where(RunMetric.run_id == run_id).distinct()))


def metric_series(session: Session, run_id: int, keys: list[str] | None = None) -> dict[str, dict[str, list]]:
    """{key: {"steps": [...], "values": [...]}} in step order."""
    query = select(RunMetric.key, RunMetric.step, RunMetric.value).where(RunMetric.run_id == run_id)
    if keys:
        query = query.where(RunMetric.key.in_(keys))
    series: dict[str, dict[str, list]] = {}
    for key, step, value in session.exec(query.order_by(RunMetric.key, RunMetric.step)):
        entry = series.setdefault(key, {"steps": [], "values": []})
        entry["steps"].append(step)
        entry["values"].append(value)
    return series
