"""Turning a question into the text a model is given. Pure: no torch import, the API can use
``check_template`` to validate a probe request.

- Default (no template): the tokenizer's chat template with a system message and the question
  followed by an instruction to reason briefly and put the final answer in ``\\boxed{}``; the
  generation prompt (the assistant turn's opening) is appended. A tokenizer without a chat
  template gets the same instruction as plain text.
- Custom template: any text containing ``{prompt}``, which is replaced by the question (a plain
  substitution, so other braces such as ``\\boxed{}`` are fine). The result is given to the model
  as is, without the chat template, so the user controls the whole input.
- User-turn template: a custom template that starts with ``{chat}``: the rest, filled the same way, is the
  one user message, rendered through the model's chat template (no system message of ours). The paper
  preset's prompt is one: the question, then "Put your final answer within \\boxed{}.".
- Chat-template options: keyword arguments for ``tokenizer.apply_chat_template`` stored with the probe,
  e.g. ``{"enable_thinking": false}`` for a template that thinks by default (Qwen3). They only act on
  the chat template, so they combine with the default and with a user-turn template, not with a custom one.

Probing, training and evaluation all render through ``render_prompt`` with the probe's template and
options (a ``PromptFormat``), so the policy is trained and evaluated on the prompt it was probed with.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PLACEHOLDER = "{prompt}"
CHAT_MARKER = "{chat}"  # a template starting with it is the user turn, rendered through the chat template
# Hard Examples Are All You Need's prompt: one user turn, the question, then the boxed-answer instruction.
PAPER_TEMPLATE = CHAT_MARKER + PLACEHOLDER + "\nPut your final answer within \\boxed{}."
PAPER_CHOICE_TEMPLATE = CHAT_MARKER + PLACEHOLDER + "\nPut your final answer within \\boxed{(X)}."  # BBH
SYSTEM_MESSAGE = "You are a careful assistant who solves problems step by step."
ANSWER_INSTRUCTION = "Reason briefly, then give the final answer in \\boxed{}."
MAX_CHAT_OPTIONS = 20
MAX_OPTION_TEXT = 1000
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# apply_chat_template's own parameters: the renderer sets these, an option may not override them.
RESERVED_OPTIONS = frozenset({
    "conversation", "tools", "documents", "chat_template", "add_generation_prompt", "continue_final_message",
    "tokenize", "padding", "truncation", "max_length", "return_tensors", "return_dict",
    "return_assistant_tokens_mask", "tokenizer_kwargs", "sanitize_control_tokens", "messages"})


def check_template(template: str | None) -> str | None:
    """The template to store: None (or blank) means the default; otherwise it must contain {prompt}."""
    if template is None or not template.strip():
        return None
    if PLACEHOLDER not in template:
        raise ValueError("The prompt template must contain {prompt} where the question goes, e.g. "
                         "'Question: {prompt}\\nAnswer:'. Leave it empty to use the model's chat template "
                         "with an instruction to answer in \\boxed{}.")
    return template


def check_chat_template_options(options: Any, template: str | None = None) -> dict[str, Any] | None:
    """The options to store: None (or empty) means none; else a JSON object of identifier keys and
    scalar values (text, number, true/false, null). Raises ValueError saying what to change."""
    if options is None:
        return None
    if isinstance(options, str):
        if not options.strip():
            return None
        try:
            options = json.loads(options)
        except ValueError as exc:
            raise ValueError(f"chat_template_options is not valid JSON ({exc}); write an object such as "
                             '{"enable_thinking": false}.') from None
    if not isinstance(options, Mapping):
        raise ValueError(f"chat_template_options must be a JSON object such as {{\"enable_thinking\": false}} "
                         f"(got {type(options).__name__}).")
    if not options:
        return None
    problems = []
    if len(options) > MAX_CHAT_OPTIONS:
        problems.append(f"chat_template_options has {len(options)} keys; at most {MAX_CHAT_OPTIONS} are allowed")
    for key, value in options.items():
        if not isinstance(key, str) or not _IDENTIFIER.fullmatch(key):
            problems.append(f"chat_template_options key {key!r} is not an identifier (letters, digits and _, "
                            "not starting with a digit)")
        elif key in RESERVED_OPTIONS:
            problems.append(f"chat_template_options key '{key}' is a parameter of apply_chat_template that "
                            "Budgetlab sets itself; remove it")
        if value is not None and not isinstance(value, (str, bool, int, float)):
            problems.append(f"chat_template_options value of '{key}' must be text, a number, true, false or "
                            f"null (got {type(value).__name__})")
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(f"chat_template_options value of '{key}' must be a finite number")
        elif isinstance(value, str) and len(value) > MAX_OPTION_TEXT:
            problems.append(f"chat_template_options value of '{key}' is longer than {MAX_OPTION_TEXT} characters")
    template = check_template(template)
    if template is not None and not template.startswith(CHAT_MARKER):
        problems.append("chat_template_options act on the model's chat template, which a custom template "
                        "replaces; leave the template empty, start it with {chat} (it is then the user turn of "
                        "the chat template), or remove the options")
    if problems:
        raise ValueError("; ".join(problems) + ".")
    return dict(options)


@dataclass(frozen=True)
class PromptFormat:
    """How a probe turned questions into model input; training and evaluation reuse it."""

    template: str | None = None
    chat_template_options: Mapping[str, Any] = field(default_factory=dict)

    def render(self, tokenizer: Any, questions: Sequence[str]) -> list[str]:
        return render_prompts(tokenizer, questions, self.template, self.chat_template_options)


def fill_template(template: str, question: str) -> str:
    return template.replace(PLACEHOLDER, question)


def default_messages(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_MESSAGE},
            {"role": "user", "content": f"{question.strip()}\n\n{ANSWER_INSTRUCTION}"}]


def render_prompt(tokenizer: Any, question: str, template: str | None = None,
                  chat_template_options: Mapping[str, Any] | None = None) -> str:
    """The model input for one question (text, special tokens included where the template has them).

    Engines tokenize it with ``add_special_tokens=False``; for a custom template we prepend the BOS
    token ourselves when the tokenizer would normally add one. ``chat_template_options`` go to
    ``apply_chat_template`` as keyword arguments (a tokenizer without a chat template has none to use).
    """
    template = check_template(template)
    if template is not None and template.startswith(CHAT_MARKER):
        content = fill_template(template[len(CHAT_MARKER):], question)
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                 add_generation_prompt=True, **dict(chat_template_options or {}))
        return _with_bos(tokenizer, content + "\n")  # no chat template: the user turn as plain text
    if template is not None:
        return _with_bos(tokenizer, fill_template(template, question))
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(default_messages(question), tokenize=False,
                                             add_generation_prompt=True, **dict(chat_template_options or {}))
    return f"{question.strip()}\n\n{ANSWER_INSTRUCTION}\n"


def _with_bos(tokenizer: Any, text: str) -> str:
    bos = getattr(tokenizer, "bos_token", None)
    if bos and _adds_bos(tokenizer) and not text.startswith(bos):
        text = bos + text
    return text


def render_prompts(tokenizer: Any, questions: Sequence[str], template: str | None = None,
                   chat_template_options: Mapping[str, Any] | None = None) -> list[str]:
    template = check_template(template)
    return [render_prompt(tokenizer, question, template, chat_template_options) for question in questions]


def without_added_bos(tokenizer: Any, text: str) -> str:
    """``text`` minus a leading BOS token that the tokenizer adds by itself: TRL tokenizes text prompts
    with special tokens, so this gives it exactly the tokens the engines probed with."""
    bos = getattr(tokenizer, "bos_token", None)
    if bos and text.startswith(bos) and _adds_bos(tokenizer):
        return text[len(bos):]
    return text


def _adds_bos(tokenizer: Any) -> bool:
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos_id is None:
        return False
    try:
        ids = tokenizer("a").input_ids
    except Exception:
        return False
    return bool(ids) and ids[0] == bos_id
