"""Extracting ``\\boxed{...}`` answers from model output, nested braces included."""

from __future__ import annotations

#: The commands that open a box.
BOX_MARKERS = ("\\boxed", "\\fbox")


def _box_at(text: str, start: int) -> tuple[str, int] | None:
    """The content of the box whose marker ends at ``start`` and the index after it, or None."""
    i = start
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] == "{":
        depth = 0
        for j in range(i, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    return text[i + 1 : j], j + 1
        return None  # unbalanced: no complete box here
    if i > start:  # "\boxed 17": the box holds the next token, less a sentence's closing punctuation
        j = i
        while j < len(text) and not text[j].isspace() and text[j] not in "${}":
            j += 1
        token = text[i:j].rstrip(".,;:")
        return (token, j) if token else None
    return None


def all_boxed(text: str) -> list[str]:
    """Every ``\\boxed{...}`` (or ``\\fbox{...}``) content in order; nested braces are kept inside.

    >>> all_boxed(r"so \\boxed{3} then \\boxed{\\frac{1}{2}}")
    ['3', '\\\\frac{1}{2}']
    """
    out: list[str] = []
    i = 0
    while True:
        hits = [(text.find(m, i), m) for m in BOX_MARKERS]
        hits = [(pos, m) for pos, m in hits if pos >= 0]
        if not hits:
            return out
        pos, marker = min(hits)
        found = _box_at(text, pos + len(marker))
        if found is None:
            i = pos + len(marker)
            continue
        content, i = found
        out.append(content.strip())


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
