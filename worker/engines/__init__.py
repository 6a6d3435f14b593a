"""Generation engines: vLLM on GPU workers that have it, transformers everywhere else."""

from __future__ import annotations

import importlib.util
import threading

from worker.engines.base import GenerationEngine, derive_seed

__all__ = ["GenerationEngine", "derive_seed", "get_engine", "vllm_usable", "clear_engine_cache"]

_engines: dict[tuple[str, str], GenerationEngine] = {}
_lock = threading.Lock()


def vllm_usable() -> bool:
    """vLLM is installed and a CUDA device is visible."""
    if importlib.util.find_spec("vllm") is None:
        return False
    try:
        import torch

        if not torch.cuda.is_available():
            return False
        import vllm  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken install is the same as none
        return False
    return True


def get_engine(model_name: str) -> GenerationEngine:
    """The engine for ``model_name``, created once per process (model loading is the slow part)."""
    from backend.settings import get_settings

    key = (model_name, str(get_settings().artifacts))
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            if vllm_usable():
                from worker.engines.vllm_engine import VLLMEngine

                engine = VLLMEngine(model_name)
            else:
                from worker.engines.transformers_engine import TransformersEngine

                engine = TransformersEngine(model_name)
            _engines[key] = engine
        return engine


def clear_engine_cache() -> None:
    with _lock:
        _engines.clear()
