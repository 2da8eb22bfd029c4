"""``${id}`` references inside task text: find them and substitute upstream results."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

#: Agent ids: a letter first, then letters, digits, ``_`` or ``-``; at most 64 characters.
ID_PATTERN = r"[A-Za-z][A-Za-z0-9_\-]{0,63}"
ID_RE = re.compile(rf"^{ID_PATTERN}$")
RefField = Literal["answer", "rationale"]
#: The fields a reference reads (``${id}`` is ``${id.answer}``).
REF_FIELDS: tuple[RefField, ...] = ("answer", "rationale")
REF_RE = re.compile(r"\$\{\s*(" + ID_PATTERN + r")(?:\.(" + "|".join(REF_FIELDS) + r"))?\s*\}")

#: A ``${id.field}`` with any field: the ones :data:`REF_RE` does not read are the validator's error.
FIELD_REF_RE = re.compile(r"\$\{\s*(" + ID_PATTERN + r")\.([A-Za-z_][A-Za-z0-9_]{0,63})\s*\}")


@dataclass(frozen=True)
class Ref:
    """One reference: the upstream id, the field it reads, and its span in the text."""

    target: str
    field: RefField
    start: int
    end: int


def find_refs(text: str) -> list[Ref]:
    """All ``${id}`` / ``${id.answer}`` / ``${id.rationale}`` references in order.

    >>> [(r.target, r.field) for r in find_refs("use ${a} and ${b.rationale}")]
    [('a', 'answer'), ('b', 'rationale')]
    """
    return [
        Ref(m.group(1), "rationale" if m.group(2) == "rationale" else "answer", m.start(), m.end())
        for m in REF_RE.finditer(text)
    ]


def bad_field_refs(text: str) -> list[tuple[str, str]]:
    """The ``(id, field)`` of each reference to a field a reference cannot read (not a reference
    at all: left as text by :func:`substitute`).

    >>> bad_field_refs("use ${a.result} and ${b.answer}")
    [('a', 'result')]
    """
    return [(m.group(1), m.group(2)) for m in FIELD_REF_RE.finditer(text) if m.group(2) not in REF_FIELDS]


def substitute(text: str, lookup: Callable[[str, RefField], str]) -> str:
    """Replace every reference with ``lookup(target, field)``; the replacement is not re-scanned.

    >>> substitute("x=${a}; why: ${a.rationale}", lambda t, f: f"<{t}.{f}>")
    'x=<a.answer>; why: <a.rationale>'
    """

    def repl(m: re.Match[str]) -> str:
        return lookup(m.group(1), "rationale" if m.group(2) == "rationale" else "answer")

    return REF_RE.sub(repl, text)
