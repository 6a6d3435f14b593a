"""Real GRPO runs on the CPU (TRL + PEFT, nothing stubbed): metrics per step, the adapter, cancel, failures."""

import threading
import time
from pathlib import Path

import pytest
from sqlmodel import select

from backend.database import session_scope
from backend.jobs.service import request_cancel
from backend.jobs.tables import Job
from backend.runs.service import create_run
from backend.runs.tables import Run, RunMetric
from tests.runs.conftest import make_subset
from tests.worker.model_fixtures import DEFAULT_MODEL, TINY_MODEL

TINY = {"model": TINY_MODEL, "lora_rank": 4, "lora_alpha": 8, "num_generations": 2, "batch_size": 4,
        "max_completion_length": 8, "learning_rate": 1e-3}


@pytest.fixture
def service_artifacts(service_env, use_artifacts, service_tiny_model) -> Path:
    return use_artifacts(Path(service_env["BUDGETLAB_ARTIFACT_DIR"]))


def new_run(settings: dict, subset_size: int = 6, **probe_fields) -> tuple[int, int]:
    subset_id = make_subset(subset_size, **probe_fields)
    with session_scope() as session:
        run = create_run(session, subset_id, settings)
        return run.id, run.job_id


def metrics(run_id: int) -> dict[int, dict[str, float]]:
    by_step: dict[int, dict[str, float]] = {}
    with session_scope() as session:
        for row in session.exec(select(RunMetric).where(RunMetric.run_id == run_id)):
            by_step.setdefault(row.step, {})[row.key] = row.value
    return by_step


def test_tiny_run_logs_every_step_and_saves_a_loadable_adapter(service_artifacts):
    import torch

    from worker.training import base_weights, train_run

    run_id, job_id = new_run({**TINY, "max_steps": 3, "load_in_4bit": True})
    assert train_run(run_id) == "succeeded"
    by_step = metrics(run_id)
    assert {1, 2, 3} <= set(by_step)
    for step in (1, 2, 3):
        logged = by_step[step]
        assert {"loss", "reward", "reward_std", "frac_reward_zero_std", "learnable_share"} <= set(logged)
        assert logged["learnable_share"] == pytest.approx(1 - logged["frac_reward_zero_std"])
        assert 0.0 <= logged["reward"] <= 1.0
    with session_scope() as session:
        job = session.get(Job, job_id)
        run = session.get(Run, run_id)
        assert (job.status, job.progress_done, job.progress_total) == ("succeeded", 3, 3)
        assert run.library_versions["trl"] and run.library_versions["peft"] and run.library_versions["torch"]
        # 4 bits were asked for: a CPU worker says why it trained another way
        assert run.library_versions["base_weights"] == base_weights(True)[0]
        if not torch.cuda.is_available():
            assert run.library_versions["base_weights"] == ("float32 (4-bit was asked for: it needs a CUDA GPU, and "
                                                            "this worker has none)")
        adapter = Path(run.adapter_path)
    assert adapter == service_artifacts / "runs" / str(run_id) / "adapter"
    assert (adapter / "adapter_config.json").is_file()

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from worker.model_store import ensure_checkpoint

    base = AutoModelForCausalLM.from_pretrained(ensure_checkpoint(TINY_MODEL))
    loaded = PeftModel.from_pretrained(base, str(adapter))
    assert loaded.peft_config["default"].r == 4
    assert any("lora_A" in name for name, _ in loaded.named_parameters())


def test_evaluation_at_step_zero_and_every_eval_every_steps(service_artifacts):
    from tests.subsets.conftest import make_probed_pool
    from worker.training import train_run

    eval_pool = make_probed_pool(5, seed=1).pool_id
    run_id, job_id = new_run({**TINY, "max_steps": 2, "eval_every": 2, "eval_pool_id": eval_pool,
                              "eval_samples": 3})
    assert train_run(run_id) == "succeeded"
    by_step = metrics(run_id)
    for step in (0, 2):
        assert 0.0 <= by_step[step]["eval/accuracy"] <= 1.0 and by_step[step]["eval/samples"] == 3
    assert "eval/accuracy" not in by_step[1]
    assert "loss" in by_step[2]  # the step's training metrics sit beside its evaluation


def test_cancel_mid_run_keeps_the_metrics(service_artifacts):
    from worker.training import train_run

    run_id, job_id = new_run({**TINY, "max_steps": 50})

    def cancel_after_first_step():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if 1 in metrics(run_id):
                with session_scope() as session:
                    request_cancel(session, session.get(Job, job_id))
                return
            time.sleep(0.05)

    canceller = threading.Thread(target=cancel_after_first_step)
    canceller.start()
    outcome = train_run(run_id)
    canceller.join()
    assert outcome == "cancelled"
    by_step = metrics(run_id)
    assert 1 in by_step and max(by_step) < 50
    with session_scope() as session:
        job = session.get(Job, job_id)
        assert job.status == "cancelled" and job.progress_done < 50
        assert session.get(Run, run_id).adapter_path is None


def test_cancel_before_start_trains_nothing(service_artifacts):
    from worker.training import train_run

    run_id, job_id = new_run({**TINY, "max_steps": 2})
    with session_scope() as session:
        job = session.get(Job, job_id)
        request_cancel(session, job)  # queued: cancelled at once
    assert train_run(run_id) == "cancelled"
    assert metrics(run_id) == {}


def test_subset_without_answers_fails_with_how_to_add_them(service_artifacts):
    from sqlalchemy import update

    from backend.pools.tables import Prompt
    from backend.subsets.tables import Subset
    from worker.training import train_run

    run_id, job_id = new_run({**TINY, "max_steps": 2})
    with session_scope() as session:  # answers removed after the run was created (labels undone)
        subset = session.get(Subset, session.get(Run, run_id).subset_id)
        session.execute(update(Prompt).where(Prompt.pool_id == subset.pool_id).values(answer=None, gold=None))
    assert train_run(run_id) == "failed"
    with session_scope() as session:
        job = session.get(Job, job_id)
        assert job.status == "failed" and f"of subset {subset.id} have no answer" in job.error
        assert "Import their labels" in job.error and "Traceback" not in job.error


def test_out_of_memory_fails_with_the_settings_to_lower(service_artifacts, monkeypatch):
    """The real trainer on a device that is too small: its second step runs out of memory."""
    import torch
    from trl import GRPOTrainer

    from worker.training import train_run

    step = GRPOTrainer.training_step

    def training_step(self, *args, **kwargs):
        if self.state.global_step >= 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return step(self, *args, **kwargs)

    monkeypatch.setattr(GRPOTrainer, "training_step", training_step)
    run_id, job_id = new_run({**TINY, "max_steps": 3})
    assert train_run(run_id) == "failed"  # the same settings would run out again
    with session_scope() as session:
        job = session.get(Job, job_id)
        assert job.status == "failed" and job.error.startswith("Training ran out of memory. Lower batch_size")
        assert session.get(Run, run_id).adapter_path is None
    assert set(metrics(run_id)) == {1}  # the step it finished is kept


def test_unexpected_error_fails_with_a_readable_message(service_artifacts):
    from worker.training import train_run

    run_id, job_id = new_run({**TINY, "lora_target_modules": ["no_such_module"], "max_steps": 2})
    assert train_run(run_id) == "failed"
    with session_scope() as session:
        job = session.get(Job, job_id)
        assert job.error.startswith("Training failed: ") and "no_such_module" in job.error
        assert "\n" not in job.error and ".." not in job.error


def test_two_steps_with_the_default_model(service_env, use_artifacts):
    from tests.worker.model_fixtures import build_default_model
    from worker.training import train_run

    use_artifacts(Path(service_env["BUDGETLAB_ARTIFACT_DIR"]))
    build_default_model(Path(service_env["BUDGETLAB_ARTIFACT_DIR"]))
    run_id, job_id = new_run({"model": DEFAULT_MODEL, "lora_rank": 8, "lora_alpha": 16, "num_generations": 2,
                              "batch_size": 4, "max_completion_length": 16, "max_steps": 2,
                              "learning_rate": 1e-4}, subset_size=4, model=DEFAULT_MODEL)
    assert train_run(run_id) == "succeeded"
    by_step = metrics(run_id)
    assert {1, 2} <= set(by_step) and all("learnable_share" in by_step[s] for s in (1, 2))


def test_train_task_runs_on_the_gpu_queue_through_the_worker(service_tiny_model, worker):
    from backend.jobs.dispatch import commit_and_send
    from backend.runs.kind import TRAIN
    from tests.worker.test_tasks import wait_for_status

    assert TRAIN.queue == "gpu"
    run_id, job_id = new_run({**TINY, "max_steps": 2})
    with session_scope() as session:
        assert commit_and_send(session, [job_id]) == []
    job = wait_for_status(job_id, timeout=300)
    assert job.status == "succeeded", job.error
    assert {1, 2} <= set(metrics(run_id))
