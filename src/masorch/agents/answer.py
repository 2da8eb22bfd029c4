"""Answers in model text: extraction, normalisation for voting, majority vote and usage sums.

These are pure functions shared by the built-in sub-agents. Extraction looks for the last
``\\boxed{...}`` (nested braces allowed), then the last ``Answer: ...`` line, then the last
non-empty line. Normalisation makes answers that mean the same compare equal for voting only;
scoring against a gold answer is :mod:`masorch.score`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from masorch.backends.base import Usage
from masorch.score.extract import last_boxed

_ANSWER_LINE = re.compile(
    r"^[\s>*_#-]*(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[*_]*\s*[:：]\s*(?P<answer>.+?)\s*$",
    re.IGNORECASE | re.MULTILINE,
)
_TEXT_MACRO = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|operatorname)\s*\{([^{}]*)\}")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_TRAILING_PUNCT = ".,;:!?。"


def boxed_answer(text: str) -> str | None:
    """The content of the last complete ``\\boxed{...}`` in ``text``, or None (one extractor for all).

    >>> boxed_answer(r"so \\boxed{\\frac{1}{2}} and done")
    '\\\\frac{1}{2}'
    >>> boxed_answer("no box") is None
    True
    """
    return last_boxed(text)


def extract_answer(text: str) -> str:
    """The final answer in a model reply: boxed, else an ``Answer:`` line, else the last line.

    >>> extract_answer("Step 1...\\nAnswer: 42.")
    '42.'
    >>> extract_answer("thinking\\n\\nParis\\n")
    'Paris'
    >>> extract_answer("")
    ''
    """
    boxed = boxed_answer(text)
    if boxed is not None:
        return boxed
    lines = _ANSWER_LINE.findall(text)
    if lines:
        return str(lines[-1]).strip().strip("*_").strip()
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


def _unwrap_macros(text: str) -> str:
    previous = None
    while previous != text:
        previous = text
        text = _TEXT_MACRO.sub(r"\1", text)
    return text


def _normalise_number(text: str) -> str | None:
    candidate = text.replace(" ", "")
    if _THOUSANDS.match(candidate):
        candidate = candidate.replace(",", "")
    try:
        value = Decimal(candidate)
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def normalize_answer(answer: str) -> str:
    """A canonical form of an answer for comparing and voting.

    Strips whitespace, ``$`` delimiters, a ``\\boxed{}`` wrapper and ``\\text{}``-like macros,
    case-folds, drops trailing punctuation, and writes numbers canonically.

    >>> normalize_answer(" 17.0 ") == normalize_answer("17")
    True
    >>> normalize_answer(r"\\text{Paris}.")
    'paris'
    >>> normalize_answer("1,000")
    '1000'
    """
    text = answer.strip()
    boxed = boxed_answer(text)
    if boxed is not None and text.startswith("\\"):
        text = boxed
    text = text.strip().strip("$").strip()
    text = _unwrap_macros(text)
    text = text.replace("\\%", "%").replace("\\!", "").replace("\\,", "")
    text = " ".join(text.split()).casefold()
    text = text.rstrip(_TRAILING_PUNCT).strip()
    number = _normalise_number(text)
    return number if number is not None else text


@dataclass(frozen=True)
class Vote:
    """The result of a majority vote: the winning normalised answer, where it first occurs, its count."""

    key: str
    first_index: int
    count: int
    total: int


def majority_vote(answers: Sequence[str]) -> Vote | None:
    """Vote over normalised answers; ties go to the answer seen first. None if nothing to vote on.

    Empty answers do not vote.

    >>> majority_vote(["17", "12", "17.0", "12"])
    Vote(key='17', first_index=0, count=2, total=4)
    """
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    voters = 0
    for index, answer in enumerate(answers):
        key = normalize_answer(answer)
        if not key:
            continue
        voters += 1
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, index)
    if not counts:
        return None
    # max() keeps the first maximal key in insertion order, i.e. the earliest answer among ties.
    key = max(counts, key=lambda k: counts[k])
    return Vote(key=key, first_index=first[key], count=counts[key], total=voters)


def sum_usage(usages: Iterable[Usage]) -> Usage:
    """The sum of several calls' usage.

    >>> total = sum_usage([Usage(1, 2, 1), Usage(3, 4, 1)])
    >>> (total.prompt_tokens, total.completion_tokens, total.calls)
    (4, 6, 2)
    """
    total = Usage()
    for usage in usages:
        total = total + usage
    return total
