"""Rendering questions into model input."""

import pytest

from backend.prompting import (
    ANSWER_INSTRUCTION,
    PromptFormat,
    check_chat_template_options,
    check_template,
    fill_template,
    render_prompt,
    render_prompts,
)


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

    code = ("import sys; from backend.prompting import check_template; check_template('{prompt}'); "
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


# --- chat-template options (issue 7 §8) ------------------------------------------------------------------

# The tiny model's own (SmolLM2) chat template, plus what Qwen3's does with enable_thinking: an empty
# thinking block after the generation prompt when thinking is off. Any other option is rendered too.
THINKING_SUFFIX = ("{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}"
                   "{% if persona is defined %}({{ persona }}){% endif %}")


@pytest.fixture
def thinking_tokenizer(tiny_artifacts):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_artifacts / "models" / "tiny-random-SmolLM2")
    tokenizer.chat_template = tokenizer.chat_template + THINKING_SUFFIX
    return tokenizer


def test_chat_template_options_reach_the_template(thinking_tokenizer):
    plain = render_prompt(thinking_tokenizer, "What is 2 + 3?")
    off = render_prompt(thinking_tokenizer, "What is 2 + 3?", None, {"enable_thinking": False})
    assert "<think>" not in plain and off == plain + "<think>\n\n</think>\n\n"
    assert render_prompts(thinking_tokenizer, ["a?", "b?"], None, {"persona": "terse"})[1].endswith("(terse)")
    assert PromptFormat(None, {"enable_thinking": False}).render(thinking_tokenizer, ["What is 2 + 3?"]) == [off]


@pytest.mark.parametrize(("options", "words"), [
    ({"enable-thinking": False}, "key 'enable-thinking' is not an identifier"),
    ({"1st": 1}, "key '1st' is not an identifier"),
    ({"tokenize": True}, "'tokenize' is a parameter of apply_chat_template"),
    ({"nested": {"a": 1}}, "value of 'nested' must be text, a number, true, false or null (got dict)"),
    ({"many": [1, 2]}, "(got list)"),
    ({"big": float("inf")}, "must be a finite number"),
    ([1, 2], "must be a JSON object"),
    ("{not json", "is not valid JSON"),
])
def test_chat_template_options_are_refused_in_words(options, words):
    with pytest.raises(ValueError) as caught:
        check_chat_template_options(options)
    assert words in str(caught.value)


def test_chat_template_options_accept_scalars_and_refuse_a_custom_template():
    options = {"enable_thinking": False, "persona": "terse", "depth": 2, "ratio": 0.5, "nothing": None}
    assert check_chat_template_options(options) == options
    assert check_chat_template_options('{"enable_thinking": false}') == {"enable_thinking": False}
    assert check_chat_template_options({}) is None and check_chat_template_options(None) is None
    with pytest.raises(ValueError, match="custom template replaces"):
        check_chat_template_options({"enable_thinking": False}, "Q: {prompt}\nA:")


def test_a_chat_template_starting_with_chat_is_the_user_turn(thinking_tokenizer):
    from backend.prompting import PAPER_TEMPLATE, SYSTEM_MESSAGE

    text = render_prompt(thinking_tokenizer, "What is 2 + 3?", PAPER_TEMPLATE)
    expected = thinking_tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 3?\nPut your final answer within \\boxed{}."}], tokenize=False,
        add_generation_prompt=True)
    assert text == expected and SYSTEM_MESSAGE not in text and ANSWER_INSTRUCTION not in text
    # Chat-template options combine with a user-turn template (not with a custom one).
    assert check_chat_template_options({"enable_thinking": False}, PAPER_TEMPLATE) == {"enable_thinking": False}
    off = render_prompt(thinking_tokenizer, "What is 2 + 3?", PAPER_TEMPLATE, {"enable_thinking": False})
    assert off == expected + "<think>\n\n</think>\n\n"


def test_a_user_turn_template_without_a_chat_template_is_plain_text(tokenizer):
    from copy import copy

    plain = copy(tokenizer)
    plain.chat_template = None
    assert render_prompt(plain, "2+3?", "{chat}Q: {prompt}") == (
        render_prompt(plain, "2+3?", "Q: {prompt}") + "\n")
