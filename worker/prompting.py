"""Turning a question into the text a model is given. Pure: no torch import, the API can use
``check_template`` to validate a probe request.

- Default (no template): the tokenizer's chat template with a system message and the question
  followed by an instruction to reason briefly and put the final answer in ``\\boxed{}``; the
  generation prompt (the assistant turn's opening) is appended. A tokenizer without a chat
  template gets the same instruction as plain text.
- Custom template: any text containing ``{prompt}``, which is replaced by the question (a plain
  substitution, so other braces such as ``\\boxed{}`` are fine). The result is given to the model
  as is, without the chat template, so the user controls the whole input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PLACEHOLDER = "{prompt}"
SYSTEM_MESSAGE = "You are a careful assistant who solves problems step by step."
ANSWER_INSTRUCTION = "Reason briefly, then give the final answer in \\boxed{}."


def check_template(template: str | None) -> str | None:
    """The template to store: None (or blank) means the default; otherwise it must contain {prompt}."""
    if template is None or not template.strip():
        return None
    if PLACEHOLDER not in template:
        raise ValueError("The prompt template must contain {prompt} where the question goes, e.g. "
                         "'Question: {prompt}\\nAnswer:'. Leave it empty to use the model's chat template "
                         "with an instruction to answer in \\boxed{}.")
    return template


def fill_template(template: str, question: str) -> str:
    return template.replace(PLACEHOLDER, question)


def default_messages(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_MESSAGE},
            {"role": "user", "content": f"{question.strip()}\n\n{ANSWER_INSTRUCTION}"}]


def render_prompt(tokenizer: Any, question: str, template: str | None = None) -> str:
    """The model input for one question (text, special tokens included where the template has them).

    Engines tokenize it with ``add_special_tokens=False``; for a custom template we prepend the BOS
    token ourselves when the tokenizer would normally add one.
    """
    template = check_template(template)
    if template is not None:
        text = fill_template(template, question)
        bos = getattr(tokenizer, "bos_token", None)
        if bos and _adds_bos(tokenizer) and not text.startswith(bos):
            text = bos + text
        return text
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(default_messages(question), tokenize=False,
                                             add_generation_prompt=True)
    return f"{question.strip()}\n\n{ANSWER_INSTRUCTION}\n"


def render_prompts(tokenizer: Any, questions: Sequence[str], template: str | None = None) -> list[str]:
    template = check_template(template)
    return [render_prompt(tokenizer, question, template) for question in questions]


def _adds_bos(tokenizer: Any) -> bool:
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos_id is None:
        return False
    try:
        ids = tokenizer("a").input_ids
    except Exception:
        return False
    return bool(ids) and ids[0] == bos_id
