"""Which models a request may name: listed ones, hub ids only as configured and with a pinned revision, local
checkpoints only under the models directory (checked after resolving links)."""

import json

import pytest

from backend.errors import AppError
from backend.settings import Settings
from tests.conftest import clear_caches


@pytest.fixture
def models_dir(tmp_path, monkeypatch):
    root = tmp_path / "models"
    (root / "mine").mkdir(parents=True)
    (root / "mine" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    monkeypatch.setenv("BUDGETLAB_MODELS_DIR", str(root))
    monkeypatch.setenv("BUDGETLAB_MODELS", "org/pinned@0123abc")
    clear_caches()
    yield root, outside
    monkeypatch.undo()
    clear_caches()


def test_local_checkpoints_must_lie_under_the_models_directory(models_dir):
    from backend.models_catalog import check_model

    root, outside = models_dir
    assert check_model(str(root / "mine")) == str((root / "mine").resolve())
    assert check_model("org/pinned@0123abc") == "org/pinned@0123abc"
    for refused, words in [(str(outside), "not under the models directory"),
                           (str(root / "mine" / ".." / ".." / "elsewhere"), "not under the models directory"),
                           (str(root), "holds no config.json"),
                           ("org/unlisted", "Unknown model"), ("mine", "Unknown model")]:
        with pytest.raises(AppError) as raised:
            check_model(refused)
        assert raised.value.status_code == 422 and words in raised.value.message, refused
    link = root / "link"
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(AppError, match="not under the models directory"):
        check_model(str(link))  # a link inside that points outside


def test_a_configured_hub_id_needs_a_pinned_revision():
    with pytest.raises(ValueError, match="needs a pinned revision"):
        Settings(BUDGETLAB_MODELS="HuggingFaceTB/SmolLM2-360M-Instruct")
    assert Settings(BUDGETLAB_MODELS="HuggingFaceTB/SmolLM2-360M-Instruct@main").extra_models


def test_workers_load_safetensors_only_and_never_remote_code(tmp_path):
    """The load options every worker uses refuse a checkpoint whose weights are only a pickle (which the same
    call without them loads), and never run a model's own code."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    from worker.model_store import SAFE_MODEL_LOAD, SAFE_TOKENIZER_LOAD

    assert SAFE_MODEL_LOAD["trust_remote_code"] is False and SAFE_TOKENIZER_LOAD["trust_remote_code"] is False
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2)
    config.save_pretrained(tmp_path)
    torch.save(LlamaForCausalLM(config).state_dict(), tmp_path / "pytorch_model.bin")  # a pickle, no safetensors
    assert AutoModelForCausalLM.from_pretrained(tmp_path) is not None
    with pytest.raises(OSError, match="safetensors"):
        AutoModelForCausalLM.from_pretrained(tmp_path, **SAFE_MODEL_LOAD)
