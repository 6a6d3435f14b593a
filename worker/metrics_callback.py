"""A transformers ``TrainerCallback`` that writes every numeric logged value of a run to ``run_metric``
as it arrives (one short transaction per log), derives ``learnable_share`` from TRL's
``frac_reward_zero_std``, writes the job's progress and turns a cancel request into a clean stop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlmodel import Session, select

from backend.database import session_scope
from backend.jobs.tables import FINISHED, Job, JobStatus
from backend.runs.service import replace_metrics
from backend.timeutil import format_duration, utcnow

try:  # the worker has transformers; this module is only imported there
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover
    TrainerCallback = object  # type: ignore[misc,assignment]

ZERO_STD_KEY = "frac_reward_zero_std"  # trl 1.x: GRPOTrainer._generate_and_score_completions
LEARNABLE_SHARE_KEY = "learnable_share"


def metric_values(logs: dict[str, Any]) -> dict[str, float]:
    """The numeric, finite values of one log, plus learnable_share when TRL logged the zero-std share."""
    values: dict[str, float] = {}
    for key, value in logs.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            values[key[:200]] = float(value)
    if ZERO_STD_KEY in values:
        values[LEARNABLE_SHARE_KEY] = 1.0 - values[ZERO_STD_KEY]
    return values


class MetricsCallback(TrainerCallback):
    def __init__(self, run_id: int, job_id: int, max_steps: int,
                 session_factory: Callable[[], AbstractContextManager[Session]] = session_scope):
        self.run_id = run_id
        self.job_id = job_id
        self.max_steps = max_steps
        self.session_factory = session_factory
        self.stopped_for_cancel = False
        self.last_step = 0
        self._started = time.monotonic()

    def on_train_begin(self, args, state, control, **kwargs):
        self._started = time.monotonic()

    def on_log(self, args, state, control, logs=None, **kwargs):
        step = int(state.global_step)
        values = metric_values(logs or {})
        self.last_step = max(self.last_step, step)
        elapsed = time.monotonic() - self._started
        with self.session_factory() as session:
            replace_metrics(session, self.run_id, step, values)
            job = session.exec(select(Job).where(Job.id == self.job_id)
                               .execution_options(populate_existing=True)).one()
            if job.status == JobStatus.cancelling.value:
                self.stopped_for_cancel = step < self.max_steps
                control.should_training_stop = True
            elif JobStatus(job.status) in FINISHED:  # failed elsewhere (e.g. declared lost): stop training
                control.should_training_stop = True
                return control
            job.progress_total = self.max_steps
            job.progress_done = min(step, self.max_steps)
            if step > 0:
                per_step = elapsed / step
                remaining = per_step * (self.max_steps - step)
                job.message = (f"step {step}/{self.max_steps}, {per_step:.1f} s/step, "
                               f"ETA {format_duration(remaining)}")[:1000]
                if control.should_training_stop and self.stopped_for_cancel:
                    job.message = f"cancel requested; stopping after step {step}/{self.max_steps}"
            job.heartbeat_at = utcnow()
            session.add(job)
        return control
