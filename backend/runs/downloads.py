"""What a user takes away from a run: metrics as CSV, the LoRA adapter as a zip, the TRL config used."""

from __future__ import annotations

import csv
import io
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from backend.runs.settings import TrainingSettings, grpo_config_kwargs, lora_config_kwargs
from backend.runs.tables import Run
from backend.settings import get_settings


def run_dir(run_id: int) -> Path:
    """The run's folder in the artifact store (trainer output, adapter)."""
    return get_settings().artifacts / "runs" / str(run_id)


def metrics_csv(series: dict[str, dict[str, list]]) -> str:
    """One row per step, one column per metric key (empty where a key was not logged at that step)."""
    keys = sorted(series)
    by_step: dict[int, dict[str, float]] = {}
    for key in keys:
        for step, value in zip(series[key]["steps"], series[key]["values"], strict=True):
            by_step.setdefault(step, {})[key] = value
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["step", *keys])
    for step in sorted(by_step):
        writer.writerow([step, *(repr(by_step[step][k]) if k in by_step[step] else "" for k in keys)])
    return out.getvalue()


def adapter_zip(adapter: Path) -> str:
    """The adapter folder zipped into a temporary file (the caller removes it)."""
    handle, path = tempfile.mkstemp(prefix="budgetlab-adapter-", suffix=".zip")
    os.close(handle)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(adapter.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(adapter).as_posix())
    return path


def trl_config(run: Run) -> dict[str, Any]:
    """The GRPOConfig and LoraConfig arguments the run trained with, on the device it recorded."""
    settings = TrainingSettings(**run.settings)
    device = run.library_versions.get("device", "cpu")
    cuda = device.startswith("cuda")
    return {
        "model": settings.model,
        "device": device,
        # how the base model's weights were held (4-bit NF4 with bitsandbytes, or why not): worker.training
        "base_weights": run.library_versions.get("base_weights", "float32" if not cuda else "bfloat16"),
        "grpo_config": grpo_config_kwargs(settings, cuda=cuda, bf16=cuda and "bf16" in device,
                                          output_dir=str(run_dir(run.id) / "trainer")),
        "lora_config": lora_config_kwargs(settings),
        "reward": "binary correctness: the pool's grader (extract_answer + is_correct against the gold answer)",
    }
