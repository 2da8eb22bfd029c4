"""Extracting ``\\boxed{...}`` answers from model output, nested braces included."""

from __future__ import annotations

import re

#: The commands that open a box.
BOX_MARKERS = ("\\boxed", "\\fbox")

_MARKER = re.compile("|".join(re.escape(marker) for marker in BOX_MARKERS))
_BRACE = re.compile(r"[{}]")


def _closing_braces(text: str) -> dict[int, int]:
    """The index of the ``}`` that closes each ``{`` of ``text``, keyed by the ``{``'s index.

    One pass with a stack of open braces: a ``}`` with nothing open is ignored and a ``{`` never
    closed has no entry, so each pair is the one that counting depth forward from the ``{`` finds.
    Backslashes escape nothing (``\\{`` counts as a brace), as in the depth count.

    >>> _closing_braces("}{a{b}}{")
    {3: 5, 1: 6}
    """
    closing: dict[int, int] = {}
    open_at: list[int] = []
    for brace in _BRACE.finditer(text):
        if brace.group() == "{":
            open_at.append(brace.start())
        elif open_at:
            closing[open_at.pop()] = brace.start()
    return closing


def _box_at(text: str, start: int, closing: dict[int, int]) -> tuple[str, int] | None:
    """The content of the box whose marker ends at ``start`` and the index after it, or None.

    ``closing`` is ``_closing_braces(text)``: looking the close up, rather than scanning for it,
    keeps a reply full of unclosed boxes linear instead of rescanning its tail once per box.
    """
    i = start
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] == "{":
        j = closing.get(i)
        return None if j is None else (text[i + 1 : j], j + 1)  # None: unbalanced, no box here
    if i > start:  # "\boxed 17": the box holds the next token, less a sentence's closing punctuation
        j = i
        while j < len(text) and not text[j].isspace() and text[j] not in "${}":
            j += 1
        token = text[i:j].rstrip(".,;:")
        return (token, j) if token else None
    return None


def all_boxed(text: str) -> list[str]:
    """Every ``\\boxed{...}`` (or ``\\fbox{...}``) content in order; nested braces are kept inside.

    A box found whole is skipped past (a box inside it is part of its content); an unclosed one is
    not a box, and the search goes on right after its marker. Linear in the length of ``text``.

    >>> all_boxed(r"so \\boxed{3} then \\boxed{\\frac{1}{2}}")
    ['3', '\\\\frac{1}{2}']
    """
    out: list[str] = []
    closing = _closing_braces(text) if "{" in text else {}
    i = 0
    while (hit := _MARKER.search(text, i)) is not None:
        found = _box_at(text, hit.end(), closing)
        if found is None:
            i = hit.end()
            continue
        content, i = found
        out.append(content.strip())
    return out


def last_boxed(text: str) -> str | None:
    """The content of the last complete box, or None when there is none.

    >>> last_boxed(r"first \\boxed{1}, final \\boxed{ {2} }")
    '{2}'
    """
    boxes = all_boxed(text)
    return boxes[-1] if boxes else None


def as_box(answer: str) -> str:
    """``answer`` as one box, unless it is empty or already holds one (how a bare answer is graded
    by a scorer that reads boxes).

    >>> as_box("17"), as_box(r"\\boxed{17}"), as_box("")
    ('\\\\boxed{17}', '\\\\boxed{17}', '')
    """
    return answer if not answer or "\\boxed" in answer else "\\boxed{" + answer + "}"
