"""Generation engines: vLLM on GPU workers that have it, transformers everywhere else."""

from __future__ import annotations

import importlib.util
import sys
import threading

from worker.engines.base import GenerationEngine, derive_seed

__all__ = ["GenerationEngine", "clear_engine_cache", "derive_seed", "get_engine", "vllm_usable"]

_engines: dict[tuple[str, str, str], GenerationEngine] = {}  # (model, adapter, artifact store)
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
    except Exception:
        return False
    return True


def get_engine(model_name: str, adapter: str | None = None) -> GenerationEngine:
    """The engine for ``model_name`` (with a trained LoRA ``adapter`` directory applied, if given), created once
    per process (model loading is the slow part).

    One engine is kept at a time: asking for another model releases the previous one first, so a
    GPU worker that probes several models in turn does not run out of memory.
    """
    from backend.settings import get_settings

    key = (model_name, adapter or "", str(get_settings().artifacts))
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            _release_all()
            if vllm_usable():
                from worker.engines.vllm_engine import VLLMEngine

                engine = VLLMEngine(model_name, adapter=adapter)
            else:
                from worker.engines.transformers_engine import TransformersEngine

                engine = TransformersEngine(model_name, adapter=adapter)
            _engines[key] = engine
        return engine


def _release_all() -> None:
    if not _engines:
        return
    import gc

    from worker.model_store import clear_model_cache

    _engines.clear()
    clear_model_cache()
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def clear_engine_cache() -> None:
    with _lock:
        _release_all()
