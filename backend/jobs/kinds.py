"""Job kinds: each is registered once (its module, listed in backend.job_kinds) with what the engine needs
to send, run, time and recover it. The jobs package knows kinds only through this registry."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlmodel import Session

    from backend.jobs.tables import Job


@dataclass(frozen=True)
class JobKind:
    name: str  # Job.kind
    title: str  # how messages name the work: "Probing", "Training"
    task_name: str  # the Celery task that runs one of its tasks
    queue: str  # "gpu" (a model is loaded) or "cpu"
    run: str  # "module:function" taking a TaskContext; imported by the worker only
    # (soft, hard) seconds for one task, sized from what it will do. Soft: the work stops itself and the job
    # fails with the limit named; hard: the reconciler fails it even if its worker hangs.
    time_limits: Callable[[Session, Job, dict[str, Any]], tuple[float, float]]
    # What to do when a task's worker is lost (its lease expired): run it again (the work is idempotent),
    # or fail the job with describe_lost's message (work that cannot resume, such as training).
    # "module:function" taking the task's args, called before the claim: slow start-up (imports, loading the
    # model) happens before the lease starts, so a lease need only outlast one batch or step.
    prepare: str | None = None
    rerun_when_lost: bool = True
    describe_lost: Callable[[Session, Job], str] | None = None
    # False when what the job works on was deleted meanwhile: the reconciler fails it instead of running it.
    inputs_exist: Callable[[Session, Job], bool] = lambda session, job: True
    retry_transient: bool = True  # False: work that must not start over (a push would create a second project)
    retry_gpu_out_of_memory: bool = False  # probing: a smaller neighbour may have held the memory
    samples_per_unit: Callable[[Session, Job], int | None] = lambda session, job: None

    def run_function(self) -> Callable:
        return _resolve(self.run)

    def prepare_function(self) -> Callable | None:
        return _resolve(self.prepare) if self.prepare else None


def _resolve(path: str) -> Callable:
    module, _, function = path.partition(":")
    return getattr(importlib.import_module(module), function)


_KINDS: dict[str, JobKind] = {}


def register(kind: JobKind) -> JobKind:
    _KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> JobKind:
    if name not in _KINDS:
        raise KeyError(f"job kind '{name}' is not registered; import backend.job_kinds first")
    return _KINDS[name]


def all_kinds() -> list[JobKind]:
    return list(_KINDS.values())
