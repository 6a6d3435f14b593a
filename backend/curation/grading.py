"""Grading: turn a gold answer and a model completion into "correct or not", per pool task type.

Task types (DESIGN §3):
- ``numeric``: a number; GSM8K golds end with ``#### N``. Compared as numbers.
- ``math``: a LaTeX answer (MATH-500 style), compared with math-verify.
- ``choice``: a letter ``(A)``, ``(B)``... (BBH style; BBH goes up to ``(R)``). The options, when
  known (`parse_options` reads them from the prompt), let an answer given as the option's text count.
- ``exact``: any other short text (BBH's ``Yes``/``No``, ``True``/``False``, word lists), compared
  after normalisation.

Two grading policies (stored with each probe):
- ``strict``: the paper's rule. Only the last complete ``\\boxed{...}`` counts, and it must hold the
  answer itself (a number, a letter, the text); no fallback to the last number or letter of the text.
- ``lenient``: the last ``\\boxed{}`` if any, else the final stated answer in the text (last number,
  last stated choice, last line), and an option's text counts as its letter.
Both compare numbers as numbers; integers must be equal, only non-integer golds get a tolerance.

Everything here is pure and never raises on odd model output; a completion we cannot read simply
grades as wrong.
"""

from __future__ import annotations

import re
import signal
import string
import threading
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from itertools import islice
from typing import Literal, get_args

TaskType = Literal["numeric", "math", "choice", "exact"]
TASK_TYPES: tuple[TaskType, ...] = get_args(TaskType)
GradingPolicy = Literal["strict", "lenient"]
GRADING_POLICIES: tuple[GradingPolicy, ...] = get_args(GradingPolicy)

CHOICE_LETTERS = string.ascii_uppercase
NUMERIC_TOLERANCE = Decimal("1e-6")
# math-verify's timeout uses SIGALRM, which only works in the main thread and would cancel any
# alarm already set (pytest-timeout, a caller's own); otherwise we run without one and rely on
# the length cap below to keep pathological inputs out.
MATH_TIMEOUT_SECONDS = 5
MATH_MAX_ANSWER_CHARS = 500
DETECTION_SAMPLE_SIZE = 1000
NUMERIC_POOL_SHARE = 0.95
CHOICE_POOL_SHARE = 0.95  # a few broken targets (BBH movie_recommendation #164) must not hide a choice pool
MATH_POOL_LATEX_SHARE = 0.10

# A number as people write it: optional minus and $, thousands groups or plain digits, decimals.
_NUMBER = r"-?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)"
_NUMBER_IN_TEXT = re.compile(r"(?<![\w.])" + _NUMBER)
_NUMBER_FULL = re.compile(_NUMBER)
_FRACTION_FULL = re.compile(r"(-?)\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}|(-?\d+)\s*/\s*(-?\d+)")
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf)\s*\{([^{}]*)\}")
_CHOICE_GOLD = re.compile(r"\(([A-Za-z])\)|([A-Z])")
_CHOICE_IN_TEXT = re.compile(r"\(([A-Z])\)")
_CHOICE_BOXED = re.compile(r"\(?([A-Za-z])\)?[.:]?")
# "the answer is B", "the correct choice is (A)", "Option C": a choice stated with a bare letter.
_CHOICE_STATED = re.compile(r"(?i:\b(?:answer|choice|option))(?:\s+is)?\s*[:=]?\s*\(?([A-Z])\)?(?![\w'])")
_ANSWER_PHRASE = re.compile(r"(?i:\banswer\b)(?:\s+is)?\s*[:=]?\s*([^\n]*)")
_OPTION_LINE = re.compile(r"^[ \t]*\(([A-Z])\)[ \t]*(\S[^\n]*?)[ \t]*$", re.MULTILINE)
# A lone brace is not LaTeX (BBH dyck_languages targets are "} ] )"); a braced group is.
_LATEX_MARKER = re.compile(r"\\[A-Za-z]+|\^|\{[^{}]*\}|_[{\d]")
_MATH_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_ANSWER_MARK = re.compile(r"\banswer\b(?:\s+is)?\s*[:=]?\s*")
_LABEL_SETS = (frozenset({"true", "false"}), frozenset({"yes", "no"}), frozenset({"valid", "invalid"}))
_EDGE_PUNCTUATION = string.punctuation + string.whitespace
_BRACKETS = "()[]{}<>"
_EDGE_NON_BRACKETS = "".join(c for c in _EDGE_PUNCTUATION if c not in _BRACKETS)


def _check_task_type(task_type: str) -> None:
    if task_type not in TASK_TYPES:
        raise ValueError(f"unknown task type {task_type!r}; use one of {', '.join(TASK_TYPES)}")


def _check_policy(policy: str) -> None:
    if policy not in GRADING_POLICIES:
        raise ValueError(f"unknown grading policy {policy!r}; use one of {', '.join(GRADING_POLICIES)}")


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
    s = _unwrap_text(text).replace("\\$", "$").replace("\\!", "").replace("\\,", "").replace("{,}", ",").strip()
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
    matches = _NUMBER_IN_TEXT.findall(text.replace("{,}", ","))  # LaTeX thousands: 1{,}000
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
    """Lowercase, collapse whitespace, strip surrounding punctuation (keeping a number's minus sign).
    A text made only of brackets keeps them: they are the answer (BBH dyck_languages: "] ) }")."""
    words = " ".join(text.lower().split())
    collapsed = words.rstrip(_EDGE_PUNCTUATION)
    core = collapsed.lstrip(_EDGE_PUNCTUATION)
    if core[:1].isdigit() and collapsed[: len(collapsed) - len(core)].endswith("-"):
        core = "-" + core
    if not core and any(bracket in words for bracket in _BRACKETS):
        core = words.strip(_EDGE_NON_BRACKETS)
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


def parse_options(prompt: str) -> dict[str, str]:
    """The lettered options of a multiple-choice prompt, {"A": "pink ball", ...}, from lines such as
    "(A) pink ball" (BBH's "Options:" block); {} when it has none."""
    options: dict[str, str] = {}
    for letter, text in _OPTION_LINE.findall(prompt):
        options.setdefault(letter, text)
    return options


def question_options(task_type: str, question: str | None) -> dict[str, str] | None:
    """The options choice grading may map answers to: those the question lists; None for other types."""
    return parse_options(question) if task_type == "choice" and question else None


def grade(completion: str, gold: str, task_type: TaskType, policy: GradingPolicy, question: str | None = None) -> bool:
    """One completion graded as a probe grades it: under ``policy``, with the question's options known."""
    options = question_options(task_type, question)
    return is_correct(extract_answer(completion, task_type, policy=policy, options=options), gold, task_type,
                      policy=policy, options=options)


def grade_answers(extracted: Iterable[str | None], gold: str | None, task_type: TaskType, policy: GradingPolicy,
                  options: Mapping[str, str] | None = None) -> list[bool] | None:
    """Each extracted answer of a prompt against its gold answer; None when the prompt has no gold."""
    if gold is None:
        return None
    return [is_correct(answer, gold, task_type, policy=policy, options=options) for answer in extracted]


def _option_letter(text: str, options: Mapping[str, str]) -> str | None:
    """The letter of the one option whose text `text` is (after normalisation); None if none or several."""
    wanted = _normalise_text(_unwrap_text(text))
    if wanted is None:
        return None
    letters = [letter for letter, option in options.items() if _normalise_text(option) == wanted]
    return letters[0] if len(letters) == 1 else None


def _stated_choice(text: str, options: Mapping[str, str] | None) -> str | None:
    """The choice stated last in `text`: "(X)", "the answer is X", or (options known) "the answer is <an
    option's text>". Position decides, so "It's A (F) ... the correct choice is A" reads A."""
    allowed = options.keys() if options else CHOICE_LETTERS
    found = [(m.end(), m.group(1)) for pattern in (_CHOICE_IN_TEXT, _CHOICE_STATED)
             for m in pattern.finditer(text) if m.group(1) in allowed]
    if options:
        for m in _ANSWER_PHRASE.finditer(text):
            letter = _option_letter(m.group(1), options)
            if letter is not None:
                found.append((m.end(), letter))
    return max(found)[1] if found else None


def extract_answer(
    completion: str,
    task_type: TaskType,
    *,
    policy: GradingPolicy = "lenient",
    options: Mapping[str, str] | None = None,
) -> str | None:
    """The model's final answer in ``completion``, normalised like ``parse_gold``; None if absent.

    The last complete \\boxed{} wins for every type; under ``strict`` it is the only place read, and
    it must hold the answer itself. ``lenient`` otherwise takes: numeric and math, the last number;
    choice, the last stated choice; exact, the last line after any "answer is". ``options`` (see
    `parse_options`): for choice under ``lenient``, an option's text counts as its letter.
    """
    _check_task_type(task_type)
    _check_policy(policy)
    boxed = last_boxed(completion)
    if policy == "strict":
        return None if boxed is None else _read_boxed_strictly(boxed, task_type)
    if task_type == "numeric":
        if boxed is None:
            return _last_number(completion)
        value = _to_decimal(boxed)
        return _format_number(value) if value is not None else _last_number(_unwrap_text(boxed))
    if task_type == "choice":
        if boxed is None:
            return _stated_choice(completion, options)
        inner = _unwrap_text(boxed).strip()
        whole = _CHOICE_BOXED.fullmatch(inner)
        if whole:
            return whole.group(1).upper()
        letter = _option_letter(inner, options) if options else None
        return letter or _stated_choice(inner, options)
    if task_type == "math":
        if boxed is not None:
            return boxed or None
        return _last_number(completion)
    if boxed is not None:
        return _boxed_text(boxed)
    lines = [line for line in completion.splitlines() if line.strip()]
    if not lines:
        return None
    last = " ".join(lines[-1].lower().split())
    marks = list(_ANSWER_MARK.finditer(last))
    return _normalise_text(last[marks[-1].end():] if marks else last)


def _boxed_text(boxed: str) -> str | None:
    """An exact answer from a box: a brace inside one must be escaped (\\boxed{\\} ]}), so unescape it."""
    return _normalise_text(_unwrap_text(boxed).replace("\\{", "{").replace("\\}", "}"))


def _read_boxed_strictly(boxed: str, task_type: TaskType) -> str | None:
    if task_type == "numeric":
        value = _to_decimal(boxed)
        return None if value is None else _format_number(value)
    if task_type == "choice":
        whole = _CHOICE_BOXED.fullmatch(_unwrap_text(boxed).strip())
        return whole.group(1).upper() if whole else None
    if task_type == "math":
        return boxed or None
    return _boxed_text(boxed)


def is_correct(
    extracted: str | None,
    gold: str,
    task_type: TaskType,
    *,
    policy: GradingPolicy = "lenient",
    options: Mapping[str, str] | None = None,
) -> bool:
    """Whether an extracted answer matches the gold answer. Never raises; None is always wrong.

    ``gold`` may be raw or already parsed (``parse_gold`` is idempotent). numeric: equal, within 1e-6
    (relative above 1) only when the gold is not an integer. math: string fast path, then math-verify.
    choice under ``lenient`` with ``options``: an option's text counts as its letter.
    """
    _check_task_type(task_type)
    _check_policy(policy)
    if extracted is None:
        return False
    gold_value = parse_gold(gold, task_type)
    if gold_value is None:
        return False
    if task_type == "numeric":
        return _numbers_equal(_to_decimal(str(extracted)), _to_decimal(gold_value))
    if task_type == "choice":
        letter = _choice_letter(str(extracted))
        if letter is None and policy == "lenient" and options:
            letter = _option_letter(str(extracted), options)
        return letter == gold_value
    if task_type == "exact":
        return _normalise_text(str(extracted)) == gold_value
    return _math_equal(_strip_math_wrappers(str(extracted)), gold_value)


def _numbers_equal(a: Decimal | None, b: Decimal | None) -> bool:
    """`a` (the model's) equals `b` (the gold). An integer gold needs the exact integer: a relative
    tolerance would accept 191,999,900 for 192,000,000. Only a non-integer gold (1/3) gets one."""
    if a is None or b is None:
        return False
    if b == b.to_integral_value():
        return a == b
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


def _detection_sample(answers: Iterable[str]) -> list[str]:
    non_empty = (str(a) for a in answers if a is not None and str(a).strip())
    return list(islice(non_empty, DETECTION_SAMPLE_SIZE))


def detect_task_type(answers: Iterable[str]) -> TaskType:
    """Guess a pool's task type from (the first 1,000 non-empty of) its gold answers.

    At least 95% choice letters -> choice; at least 95% numbers (GSM8K "#### N" included) -> numeric;
    at least 10% with LaTeX markup (\\frac, ^, braced groups...) -> math; otherwise exact (which is
    also how labels such as Yes/No or True/False are graded).
    """
    sample = _detection_sample(answers)
    if not sample:
        return "exact"
    choice = sum(parse_gold(a, "choice") is not None for a in sample)
    if choice >= CHOICE_POOL_SHARE * len(sample):
        return "choice"
    numeric = sum(parse_gold(a, "numeric") is not None for a in sample)
    if numeric >= NUMERIC_POOL_SHARE * len(sample):
        return "numeric"
    latex = sum(bool(_LATEX_MARKER.search(a)) for a in sample)
    if latex >= MATH_POOL_LATEX_SHARE * len(sample):
        return "math"
    return "exact"


def describe_answers(answers: Iterable[str], task_type: TaskType) -> str:
    """What (the first 1,000 non-empty of) a pool's gold answers look like under `task_type`, in words:
    the reason shown with a detected task type ("49 of 50 answers are option letters (A) to (E)")."""
    _check_task_type(task_type)
    sample = _detection_sample(answers)
    if not sample:
        return "there are no answers"
    of = f"of {len(sample)} answers"
    if task_type == "choice":
        golds = [g for g in (parse_gold(a, "choice") for a in sample) if g]
        shown = f" ({min(golds)}) to ({max(golds)})" if golds else ""
        return f"{len(golds)} {of} are option letters{shown}"
    if task_type == "numeric":
        return f"{sum(parse_gold(a, 'numeric') is not None for a in sample)} {of} are numbers"
    if task_type == "math":
        return f"{sum(bool(_LATEX_MARKER.search(a)) for a in sample)} {of} contain LaTeX markup"
    labels = {_normalise_text(a) for a in sample}
    if any(labels <= label_set for label_set in _LABEL_SETS):
        shown = "/".join(sorted({a.strip() for a in sample}))
        return f"the answers are the labels {shown}, compared as text (case and surrounding punctuation ignored)"
    return "the answers are free text, compared after normalising case, spacing and surrounding punctuation"


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
