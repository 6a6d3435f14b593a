"""Building the test models. Importable helpers (other test packages need them) plus fixtures,
re-exported by tests/worker/conftest.py."""

import json
from pathlib import Path

import pytest

from tests.conftest import DATASETS

TINY_MODEL = "tiny-random-SmolLM2"
DEFAULT_MODEL = "SmolLM2-135M-Instruct"


def build_tiny_model(artifacts_dir: Path) -> Path:
    """Build (once) the tiny random SmolLM2 under ``<artifacts_dir>/models/``; returns its directory."""
    from worker.model_store import ensure_checkpoint

    return ensure_checkpoint(TINY_MODEL, artifacts=Path(artifacts_dir))


def build_default_model(artifacts_dir: Path) -> Path:
    """Convert (once) the default GGUF model under ``<artifacts_dir>/models/``; returns its directory."""
    from worker.model_store import ensure_checkpoint

    return ensure_checkpoint(DEFAULT_MODEL, artifacts=Path(artifacts_dir))


def gsm8k_rows(n: int, split: str = "test") -> list[dict]:
    rows = []
    with open(DATASETS / "gsm8k" / f"{split}.jsonl") as handle:
        for line in handle:
            rows.append(json.loads(line))
            if len(rows) == n:
                break
    return rows


@pytest.fixture(scope="session")
def tiny_artifacts(tmp_path_factory) -> Path:
    """An artifact directory holding only the tiny model (no env changes: see use_artifacts)."""
    artifacts = tmp_path_factory.mktemp("tiny-artifacts")
    build_tiny_model(artifacts)
    return artifacts


@pytest.fixture
def use_artifacts(monkeypatch):
    """Point the settings' artifact store at a directory for one test: ``use_artifacts(path)``."""
    from backend.settings import get_settings

    def use(path: Path) -> Path:
        monkeypatch.setenv("BUDGETLAB_ARTIFACT_DIR", str(path))
        get_settings.cache_clear()
        return path

    yield use
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def service_tiny_model(service_env) -> Path:
    """The tiny model in the service environment's artifact store (where the worker looks)."""
    return build_tiny_model(Path(service_env["BUDGETLAB_ARTIFACT_DIR"]))
