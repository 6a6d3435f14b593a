"""A transformers ``TrainerCallback`` that writes every numeric logged value of a run to ``run_metric`` as it
arrives (one short transaction per log), derives ``learnable_share`` from TRL's ``frac_reward_zero_std``, and
beats after each step through the job engine (progress and ETA, the task's lease, a cancel check), stopping
training cleanly when the beat says to.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from sqlmodel import Session

from backend.database import session_scope
from backend.jobs.engine import TaskContext
from backend.runs.service import replace_metrics
from backend.timeutil import format_duration

try:  # the worker has transformers; this module is only imported there
    from transformers import TrainerCallback
except ImportError:  # pragma: no cover
    TrainerCallback = object  # type: ignore[misc,assignment]

ZERO_STD_KEY = "frac_reward_zero_std"  # trl 1.x: GRPOTrainer._generate_and_score_completions
LEARNABLE_SHARE_KEY = "learnable_share"
# Test hook for the fault test of a hung step: "hang-training-step:N" makes step N never end.
FAULT_ENV = "BUDGETLAB_FAULT"


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
    def __init__(self, run_id: int, ctx: TaskContext, max_steps: int,
                 session_factory: Callable[[], AbstractContextManager[Session]] = session_scope):
        self.run_id = run_id
        self.ctx = ctx
        self.max_steps = max_steps
        self.session_factory = session_factory
        self.stopped = False  # a beat said stop: cancelled (recorded), or the job ended elsewhere
        self.last_step = 0
        self._started = time.monotonic()
        fault = os.environ.get(FAULT_ENV, "")
        self._hang_at = int(fault.split(":")[1]) if fault.startswith("hang-training-step:") else None

    def on_train_begin(self, args, state, control, **kwargs):
        self._started = time.monotonic()

    def on_step_begin(self, args, state, control, **kwargs):
        if self._hang_at is not None and int(state.global_step) + 1 == self._hang_at:
            while True:  # the fault test's hung step: no beat, so the lease expires
                time.sleep(3600)

    def on_log(self, args, state, control, logs=None, **kwargs):
        step = int(state.global_step)
        self.last_step = max(self.last_step, step)
        with self.session_factory() as session:
            replace_metrics(session, self.run_id, step, metric_values(logs or {}))

    def on_step_end(self, args, state, control, **kwargs):
        step = int(state.global_step)
        self.last_step = max(self.last_step, step)
        per_step = (time.monotonic() - self._started) / step if step else 0.0
        message = (f"step {step}/{self.max_steps}, {per_step:.1f} s/step, "
                   f"ETA {format_duration(per_step * (self.max_steps - step))}")
        if not self.ctx.beat(done=min(step, self.max_steps), total=self.max_steps, message=message,
                             stopped=f"after step {step} of {self.max_steps} (metrics kept)"):
            self.stopped = True
            control.should_training_stop = True
        return control
