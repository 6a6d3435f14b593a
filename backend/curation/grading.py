"""Grading: turn a gold answer and a model completion into "correct or not", per pool task type.

Task types (DESIGN §3):
- ``numeric``: a number; GSM8K golds end with ``#### N``. Compared as numbers.
- ``math``: a LaTeX answer (MATH-500 style), compared with math-verify.
- ``choice``: a letter ``(A)``..``(G)`` (BBH style).
- ``exact``: any other short text, compared after normalisation.

Every extractor prefers the *last* complete ``\\boxed{...}``: the probe prompt asks for the answer
there, and the last one is the model's final word. Everything here is pure and never raises on odd
model output; a completion we cannot read simply grades as wrong.
"""

from __future__ import annotations

import re
import signal
import string
import threading
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from itertools import islice
from typing import Literal, get_args

TaskType = Literal["numeric", "math", "choice", "exact"]
TASK_TYPES: tuple[TaskType, ...] = get_args(TaskType)

CHOICE_LETTERS = "ABCDEFG"
NUMERIC_TOLERANCE = Decimal("1e-6")
# math-verify's timeout uses SIGALRM, which only works in the main thread and would cancel any
# alarm already set (pytest-timeout, a caller's own); otherwise we run without one and rely on
# the length cap below to keep pathological inputs out.
MATH_TIMEOUT_SECONDS = 5
MATH_MAX_ANSWER_CHARS = 500
DETECTION_SAMPLE_SIZE = 1000
NUMERIC_POOL_SHARE = 0.95
MATH_POOL_LATEX_SHARE = 0.10

# A number as people write it: optional minus and $, thousands groups or plain digits, decimals.
_NUMBER = r"-?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)"
_NUMBER_IN_TEXT = re.compile(r"(?<![\w.])" + _NUMBER)
_NUMBER_FULL = re.compile(_NUMBER)
_FRACTION_FULL = re.compile(r"(-?)\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}|(-?\d+)\s*/\s*(-?\d+)")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf)\s*\{([^{}]*)\}")
_CHOICE_GOLD = re.compile(r"\(([A-Ga-g])\)|([A-G])")
_CHOICE_IN_TEXT = re.compile(r"\(([A-G])\)")
_CHOICE_BOXED = re.compile(r"\(?([A-Ga-g])\)?[.:]?")
_LATEX_MARKER = re.compile(r"\\[A-Za-z]+|[\^{}]|_[{\d]")
_MATH_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_ANSWER_PREFIX = re.compile(
    r"^(?:so|therefore|thus|hence)?\s*,?\s*(?:the\s+)?(?:final\s+)?answer\b(?:\s+is)?\s*[:=]?\s*"
)
_EDGE_PUNCTUATION = string.punctuation + string.whitespace


def _check_task_type(task_type: str) -> None:
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}; use one of {', '.join(TASK_TYPES)}")


# --- small readers -------------------------------------------------------------------------------


def last_boxed(text: str) -> str | None:
    """Content of the last complete ``\\boxed{...}`` (nested braces allowed), else None.

    A truncated last box (generation cut off) is skipped in favour of an earlier complete one.
    """
    for match in reversed(list(_BOXED.finditer(text))):
        content = _box_content(text, match.end())
        if content is not None:
            return content.strip()
    return None


def _box_content(text: str, start: int) -> str | None:
    if start >= len(text):
        return None
    if text[start] != "{":  # "\boxed 5": the argument is the next token
        token = re.match(r"[^\s$]+", text[start:])
        return token.group(0) if token else None
    depth = 0
    i = start
    while i < len(text):
        char = text[i]
        if char == "\\":  # \{ and \} are literal braces, not grouping
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
        i += 1
    return None


def _unwrap_text(text: str) -> str:
    previous = None
    while previous != text:
        previous, text = text, _TEXT_WRAPPER.sub(r"\1", text)
    return text


def _to_decimal(text: str) -> Decimal | None:
    """A plain number ("1,234", "$5", "-2.50") or simple fraction ("3/4", "\\frac{3}{4}"), else None."""
    s = _unwrap_text(text).replace("\\$", "$").replace("\\!", "").replace("\\,", "").strip()
    fraction = _FRACTION_FULL.fullmatch(s)
    if fraction:
        sign, num, den, plain_num, plain_den = fraction.groups()
        numerator = Decimal(num if num is not None else plain_num)
        denominator = Decimal(den if den is not None else plain_den)
        if denominator == 0:
            return None
        value = numerator / denominator
        return -value if sign else value
    if not _NUMBER_FULL.fullmatch(s):
        return None
    try:
        return Decimal(s.replace(",", "").replace("$", ""))
    except InvalidOperation:
        return None


def _format_number(value: Decimal) -> str:
    """Canonical text for a number, so "3.50", "3.5" and "$3.5" all read "3.5"."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def _last_number(text: str) -> str | None:
    matches = _NUMBER_IN_TEXT.findall(text)
    for candidate in reversed(matches):
        value = _to_decimal(candidate)
        if value is not None:
            return _format_number(value)
    return None


def _choice_letter(text: str) -> str | None:
    match = _CHOICE_GOLD.fullmatch(text.strip())
    if not match:
        return None
    return (match.group(1) or match.group(2)).upper()


def _normalise_text(text: str) -> str | None:
    """Lowercase, collapse whitespace, strip surrounding punctuation (keeping a number's minus sign)."""
    collapsed = " ".join(text.lower().split()).rstrip(_EDGE_PUNCTUATION)
    core = collapsed.lstrip(_EDGE_PUNCTUATION)
    if core[:1].isdigit() and collapsed[: len(collapsed) - len(core)].endswith("-"):
        core = "-" + core
    return core or None


def _strip_math_wrappers(text: str) -> str:
    s = text.strip()
    changed = True
    while changed and s:
        changed = False
        for left, right in _MATH_DELIMITERS:
            inner = s[len(left) : len(s) - len(right)]
            wrapped = len(s) >= len(left) + len(right) and s.startswith(left) and s.endswith(right)
            if wrapped and "$" not in inner:
                s = inner.strip()
                changed = True
                break
        if s.startswith("\\boxed"):
            boxed = _box_content(s, _BOXED.match(s).end())
            if boxed is not None and s.endswith("}"):
                s = boxed.strip()
                changed = True
    return s


# --- public API -----------------------------------------------------------------------------------


def parse_gold(answer: str, task_type: TaskType) -> str | None:
    """The normalised gold answer, or None when it cannot be graded under ``task_type``.

    numeric: GSM8K "...#### 1,234" -> "1234"; "3.50", "-2", "$5", "3/4" accepted and normalised.
    choice: "(A)" or bare "A" -> "A". math: the LaTeX string without surrounding $ or \\boxed{}.
    exact: lowercased text with collapsed whitespace and no surrounding punctuation.
    """
    _check_task_type(task_type)
    text = str(answer)
    if task_type == "numeric":
        if "####" in text:
            text = text.rsplit("####", 1)[1]
        plain = text.strip()
        if plain.isascii() and plain.isdigit():  # the common case, kept fast for million-row imports
            return str(int(plain))
        text = _strip_math_wrappers(text).rstrip(".")
        value = _to_decimal(text)
        return None if value is None else _format_number(value)
    if task_type == "choice":
        return _choice_letter(text)
    if task_type == "math":
        return _strip_math_wrappers(text) or None
    return _normalise_text(text)


def extract_answer(completion: str, task_type: TaskType) -> str | None:
    """The model's final answer in ``completion``, normalised like ``parse_gold``; None if absent.

    The last complete \\boxed{} wins for every type. Otherwise: numeric and math take the last
    number; choice the last "(X)"; exact the last non-empty line, minus an "answer is" prefix.
    """
    _check_task_type(task_type)
    boxed = last_boxed(completion)
    if task_type == "numeric":
        if boxed is None:
            return _last_number(completion)
        value = _to_decimal(boxed)
        return _format_number(value) if value is not None else _last_number(_unwrap_text(boxed))
    if task_type == "choice":
        if boxed is None:
            letters = _CHOICE_IN_TEXT.findall(completion)
            return letters[-1] if letters else None
        inner = _unwrap_text(boxed).strip()
        whole = _CHOICE_BOXED.fullmatch(inner)
        if whole:
            return whole.group(1).upper()
        letters = _CHOICE_IN_TEXT.findall(inner)
        return letters[-1] if letters else None
    if task_type == "math":
        if boxed is not None:
            return boxed or None
        return _last_number(completion)
    if boxed is not None:
        return _normalise_text(_unwrap_text(boxed))
    lines = [line for line in completion.splitlines() if line.strip()]
    if not lines:
        return None
    last = " ".join(lines[-1].lower().split())
    return _normalise_text(_ANSWER_PREFIX.sub("", last))


def is_correct(extracted: str | None, gold: str, task_type: TaskType) -> bool:
    """Whether an extracted answer matches the gold answer. Never raises; None is always wrong.

    ``gold`` may be raw or already parsed (``parse_gold`` is idempotent). numeric: equal within
    1e-6, relative for magnitudes above 1. math: string fast path, then math-verify.
    """
    _check_task_type(task_type)
    if extracted is None:
        return False
    gold_value = parse_gold(gold, task_type)
    if gold_value is None:
        return False
    if task_type == "numeric":
        return _numbers_equal(_to_decimal(str(extracted)), _to_decimal(gold_value))
    if task_type == "choice":
        return _choice_letter(str(extracted)) == gold_value
    if task_type == "exact":
        return _normalise_text(str(extracted)) == gold_value
    return _math_equal(_strip_math_wrappers(str(extracted)), gold_value)


def _numbers_equal(a: Decimal | None, b: Decimal | None) -> bool:
    if a is None or b is None:
        return False
    return abs(a - b) <= NUMERIC_TOLERANCE * max(Decimal(1), abs(b))


def _squash(latex: str) -> str:
    squashed = re.sub(r"\\left|\\right|\\!|\\,|\\;|\s", "", latex)
    return squashed.replace("dfrac", "frac").replace("tfrac", "frac")


def _math_equal(extracted: str, gold: str) -> bool:
    if not extracted or len(extracted) > MATH_MAX_ANSWER_CHARS:
        return False
    if _squash(extracted) == _squash(gold):
        return True
    # Two plain numbers: decide without sympy (fast, and exact for "0.5" vs "1/2").
    extracted_number, gold_number = _to_decimal(extracted), _to_decimal(gold)
    if extracted_number is not None and gold_number is not None:
        return _numbers_equal(extracted_number, gold_number)
    timeout = _math_timeout()
    try:
        from math_verify import verify
        from math_verify.errors import TimeoutException
    except ImportError:  # pragma: no cover - math-verify is a declared dependency
        return False
    try:
        gold_parsed = _parse_math(gold)
        extracted_parsed = _parse_math(extracted)
        if not gold_parsed or not extracted_parsed:
            return False
        return bool(verify(list(gold_parsed), list(extracted_parsed), timeout_seconds=timeout))
    except (Exception, TimeoutException):
        return False


@lru_cache(maxsize=8192)
def _parse_math(latex: str) -> tuple:
    """math-verify parse of one answer; cached because a gold answer is compared k times."""
    from math_verify import parse

    # Wrapping in \boxed{} makes math-verify read the whole string as the answer.
    return tuple(parse("\\boxed{" + latex + "}", parsing_timeout=_math_timeout()))


def _math_timeout() -> int | None:
    """Seconds for math-verify's alarm, or None where an alarm cannot or must not be set."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "getitimer"):
        return None
    if signal.getitimer(signal.ITIMER_REAL)[0] > 0:  # someone else's alarm is pending
        return None
    return MATH_TIMEOUT_SECONDS


def detect_task_type(answers: Iterable[str]) -> TaskType:
    """Guess a pool's task type from (the first 1,000 non-empty of) its gold answers.

    All choice letters -> choice; at least 95% numbers (GSM8K "#### N" included) -> numeric;
    at least 10% with LaTeX markup (\\frac, ^, braces...) -> math; otherwise exact.
    """
    non_empty = (str(a) for a in answers if a is not None and str(a).strip())
    sample = list(islice(non_empty, DETECTION_SAMPLE_SIZE))
    if not sample:
        return "exact"
    if all(parse_gold(a, "choice") is not None for a in sample):
        return "choice"
    numeric = sum(parse_gold(a, "numeric") is not None for a in sample)
    if numeric >= NUMERIC_POOL_SHARE * len(sample):
        return "numeric"
    latex = sum(bool(_LATEX_MARKER.search(a)) for a in sample)
    if latex >= MATH_POOL_LATEX_SHARE * len(sample):
        return "math"
    return "exact"


def ungradeable_answers(answers: Iterable[str], task_type: TaskType) -> tuple[int, list[str]]:
    """How many gold answers cannot be graded under ``task_type``, with up to 5 of them verbatim."""
    _check_task_type(task_type)
    count = 0
    examples: list[str] = []
    for answer in answers:
        if answer is None or parse_gold(str(answer), task_type) is None:
            count += 1
            if len(examples) < 5:
                examples.append("" if answer is None else str(answer))
    return count, examples
