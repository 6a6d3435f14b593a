"""Rendering questions into model input."""

import pytest

from worker.prompting import ANSWER_INSTRUCTION, check_template, fill_template, render_prompt, render_prompts


def test_check_template_accepts_placeholder_and_default():
    assert check_template(None) is None
    assert check_template("   ") is None
    assert check_template("Q: {prompt}\nPut the answer in \\boxed{}.\nA:") is not None


def test_check_template_refuses_missing_placeholder():
    with pytest.raises(ValueError, match=r"must contain \{prompt\}"):
        check_template("Question: {question}")


def test_fill_template_is_plain_substitution():
    assert fill_template("{prompt} -> \\boxed{}", "1+1?") == "1+1? -> \\boxed{}"


def test_check_template_imports_no_ml_stack():
    import subprocess
    import sys

    code = ("import sys; from worker.prompting import check_template; check_template('{prompt}'); "
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture(scope="module")
def tokenizer(tiny_artifacts):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_artifacts / "models" / "tiny-random-SmolLM2")


def test_default_uses_chat_template_with_boxed_instruction(tokenizer):
    text = render_prompt(tokenizer, "What is 2 + 3?")
    assert "What is 2 + 3?" in text
    assert ANSWER_INSTRUCTION in text
    assert "<|im_start|>system" in text
    assert text.endswith("<|im_start|>assistant\n")  # the generation prompt


def test_custom_template_is_used_verbatim(tokenizer):
    assert render_prompts(tokenizer, ["2+3?"], "Q: {prompt}\nA:") == ["Q: 2+3?\nA:"]
    with pytest.raises(ValueError):
        render_prompts(tokenizer, ["2+3?"], "no placeholder")
