"""The model store: the default GGUF model converts once; the tiny model is reproducible."""

import pytest

from tests.worker.model_fixtures import DEFAULT_MODEL, TINY_MODEL, build_tiny_model, gsm8k_rows


def test_default_model_converts_once_and_generates(tmp_path, use_artifacts, monkeypatch):
    from worker import model_store
    from worker.engines.transformers_engine import TransformersEngine

    use_artifacts(tmp_path)
    checkpoint = model_store.ensure_checkpoint(DEFAULT_MODEL)
    assert checkpoint == tmp_path / "models" / DEFAULT_MODEL
    assert (checkpoint / "config.json").is_file() and list(checkpoint.glob("*.safetensors"))
    config = (checkpoint / "config.json").read_text()
    assert "quantization_config" not in config
    assert not [p for p in checkpoint.parent.iterdir() if p.name.startswith(".")]  # no temp dirs left
    stamp = (checkpoint / "config.json").stat().st_mtime_ns

    # The second load uses the checkpoint: the GGUF is not even looked at.
    model_store.clear_model_cache()

    def no_gguf():
        raise AssertionError("the GGUF was read again")

    monkeypatch.setattr(model_store, "default_gguf_path", no_gguf)
    model, tokenizer = model_store.load_model(DEFAULT_MODEL, "cpu")
    assert (checkpoint / "config.json").stat().st_mtime_ns == stamp
    assert model.config.num_hidden_layers == 30 and tokenizer.padding_side == "left"
    assert model_store.load_model(DEFAULT_MODEL, "cpu")[0] is model  # cached in the process

    engine = TransformersEngine(DEFAULT_MODEL, device="cpu")
    prompts = engine.render([row["question"] for row in gsm8k_rows(3)])
    out = engine.generate(prompts, k=2, temperature=1.0, max_new_tokens=48, seed=0)
    assert [len(samples) for samples in out] == [2, 2, 2]
    assert all(isinstance(s, str) and s.strip() for samples in out for s in samples)


def test_tiny_model_is_reproducible(tmp_path):
    from safetensors.torch import load_file

    first = build_tiny_model(tmp_path / "a")
    second = build_tiny_model(tmp_path / "b")
    a, b = load_file(first / "model.safetensors"), load_file(second / "model.safetensors")
    assert a.keys() == b.keys() and all((a[key] == b[key]).all() for key in a)
    assert build_tiny_model(tmp_path / "a") == first  # built once


def test_tiny_model_shares_the_default_vocabulary(tiny_artifacts):
    from transformers import AutoConfig, AutoTokenizer

    path = tiny_artifacts / "models" / TINY_MODEL
    config = AutoConfig.from_pretrained(path)
    assert config.model_type == "llama" and config.num_hidden_layers == 2 and config.hidden_size == 64
    assert config.vocab_size == len(AutoTokenizer.from_pretrained(path)) == 49152


def test_unknown_model_says_what_to_do(tmp_path):
    from worker.model_store import ModelLoadError, ensure_checkpoint

    with pytest.raises(ModelLoadError, match="not a built-in model"):
        ensure_checkpoint(str(tmp_path / "no-such-model"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="no config.json"):
        ensure_checkpoint(str(tmp_path / "empty"))


def test_local_checkpoint_directory_loads(tiny_artifacts):
    from worker.model_store import load_model

    model, tokenizer = load_model(str(tiny_artifacts / "models" / TINY_MODEL), "cpu")
    assert model.config.hidden_size == 64 and tokenizer.pad_token is not None
