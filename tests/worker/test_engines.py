"""Generation engines on the tiny random model: shapes, seeding, greedy decoding, engine choice."""

import importlib
import sys

import pytest

from tests.worker.model_fixtures import TINY_MODEL


@pytest.fixture
def tiny_engine(tiny_artifacts, use_artifacts):
    from worker.engines.transformers_engine import TransformersEngine

    use_artifacts(tiny_artifacts)
    return TransformersEngine(TINY_MODEL, device="cpu", batch_size=2)


QUESTIONS = ["What is 2 + 3?", "Tom has 4 apples and eats one. How many are left?", "What is 7 times 6?"]


def test_k_completions_per_prompt(tiny_engine):
    prompts = tiny_engine.render(QUESTIONS)
    out = tiny_engine.generate(prompts, k=3, temperature=1.0, max_new_tokens=6, seed=7)
    assert len(out) == len(QUESTIONS)
    assert all(len(samples) == 3 and all(isinstance(s, str) for s in samples) for samples in out)
    # A random model over a 49k vocabulary: the k samples of a prompt differ.
    assert all(len(set(samples)) > 1 for samples in out)


def test_same_seed_same_output_other_seed_differs(tiny_engine):
    prompts = tiny_engine.render(QUESTIONS)
    settings = {"k": 2, "temperature": 1.0, "max_new_tokens": 6}
    first = tiny_engine.generate(prompts, seed=11, **settings)
    again = tiny_engine.generate(prompts, seed=11, **settings)
    other = tiny_engine.generate(prompts, seed=12, **settings)
    assert first == again
    assert first != other


def test_greedy_gives_k_identical_copies(tiny_engine):
    prompts = tiny_engine.render(QUESTIONS[:2])
    out = tiny_engine.generate(prompts, k=4, temperature=0.0, max_new_tokens=5, seed=1)
    assert [len(set(samples)) for samples in out] == [1, 1]
    assert all(len(samples) == 4 for samples in out)
    assert out == tiny_engine.generate(prompts, k=4, temperature=0.0, max_new_tokens=5, seed=99)


def test_batch_size_follows_k(tiny_artifacts, use_artifacts):
    from worker.engines.transformers_engine import TransformersEngine

    use_artifacts(tiny_artifacts)
    engine = TransformersEngine(TINY_MODEL, device="cpu", rows_per_batch=64)
    assert engine.prompts_per_batch(4) == 16
    assert engine.prompts_per_batch(100) == 1
    assert TransformersEngine(TINY_MODEL, device="cpu", batch_size=3).prompts_per_batch(10) == 3


def test_bad_sampling_settings_are_refused(tiny_engine):
    with pytest.raises(ValueError, match="k must be"):
        tiny_engine.generate(["x"], k=0, temperature=1.0, max_new_tokens=4, seed=0)
    assert tiny_engine.generate([], k=2, temperature=1.0, max_new_tokens=4, seed=0) == []


def test_get_engine_is_transformers_here_and_cached(tiny_artifacts, use_artifacts):
    from worker.engines import clear_engine_cache, get_engine, vllm_usable
    from worker.engines.base import GenerationEngine
    from worker.engines.transformers_engine import TransformersEngine

    use_artifacts(tiny_artifacts)
    clear_engine_cache()
    engine = get_engine(TINY_MODEL)
    assert not vllm_usable()  # no vLLM and no CUDA on CI
    assert isinstance(engine, TransformersEngine)
    assert isinstance(engine, GenerationEngine)
    assert get_engine(TINY_MODEL) is engine


def test_vllm_engine_module_imports_without_vllm():
    assert "vllm" not in sys.modules
    module = importlib.import_module("worker.engines.vllm_engine")
    assert hasattr(module, "VLLMEngine")
    assert "vllm" not in sys.modules
    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(RuntimeError, match="vLLM is not installed"):
            module.VLLMEngine(TINY_MODEL)


def test_derived_seeds_are_stable_and_distinct():
    from worker.engines.base import derive_seed

    assert derive_seed(0, 0) == derive_seed(0, 0)
    assert len({derive_seed(s, p) for s in range(5) for p in range(0, 500, 16)}) == 5 * 32
    assert all(0 <= derive_seed(s, 3) < 2**31 for s in range(100))


def test_get_engine_keeps_one_model_at_a_time(tiny_artifacts, use_artifacts):
    from worker.engines import _engines, clear_engine_cache, get_engine

    use_artifacts(tiny_artifacts)
    clear_engine_cache()
    first = get_engine(TINY_MODEL)
    other = get_engine(str(tiny_artifacts / "models" / TINY_MODEL))  # a second model, by path
    assert other is not first and list(_engines.values()) == [other]
    clear_engine_cache()
    assert not _engines
