"""``<name>content</name>`` pairs found in linear time, as a lazy regex would find them.

A pattern like ``<(name)>(.*?)</\\1>`` rescans the rest of the text from every opening tag that is
never closed, so a run of unclosed tags (``<thinking><thinking>...``) costs time quadratic in the
text. :func:`pairs` finds the same matches with one scan over the tags: it pairs each opening tag
with the first closing tag of the same name after it (a bisection), skipping opening tags inside
an earlier match, exactly as ``finditer`` with the lazy pattern does. A property test in
``tests/plan/test_limits.py`` checks that both agree.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Pair:
    """One ``<name>content</name>``: the opening tag's name as written and its spans."""

    name: str
    start: int
    content_start: int
    content_end: int
    end: int


class TagPairs:
    """Pairs of the tags whose names match the pattern ``names``.

    A closing tag closes an opening tag of the same name, as the back-reference in
    ``<(a|b)>.*?</\1>`` demands (with ``ignore_case``, compared the way a case-insensitive
    back-reference compares: character by character in lower case); with ``any_close``, any closing
    tag the pattern matches closes, as in ``<answer>.*?</answer>``.
    """

    def __init__(self, names: str, ignore_case: bool = False, any_close: bool = False) -> None:
        self.token = re.compile(rf"<(/?)({names})>", re.I if ignore_case else 0)
        self.ignore_case = ignore_case
        self.any_close = any_close

    def _key(self, name: str) -> str:
        if self.any_close:
            return ""
        if not self.ignore_case:
            return name
        if name.isascii():
            return name.lower()
        # As the regex engine compares: one character at a time ("İ" -> "i", no final sigma).
        return "".join(c.lower()[0] for c in name)

    def pairs(self, text: str, start: int = 0, end: int | None = None) -> Iterator[Pair]:
        """Every pair in ``text[start:end]``, left to right, none inside another."""
        stop = len(text) if end is None else end
        if text.find("<", start, stop) < 0:
            return
        # Parallel lists of plain ints and strings: no object per tag for the collector to track.
        names: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        closes: dict[str, tuple[list[int], list[int]]] = {}
        for m in self.token.finditer(text, start, stop):
            if m.group(1):
                found = closes.get(self._key(m.group(2)))
                if found is None:
                    found = closes[self._key(m.group(2))] = ([], [])
                found[0].append(m.start())
                found[1].append(m.end())
            else:
                names.append(m.group(2))
                starts.append(m.start())
                ends.append(m.end())
        if not closes:
            return
        cursor = start
        for name, open_start, open_end in zip(names, starts, ends, strict=True):
            if open_start < cursor:
                continue
            found = closes.get(self._key(name))
            if found is None:
                continue
            k = bisect.bisect_left(found[0], open_end)
            if k == len(found[0]):
                continue
            yield Pair(name, open_start, open_end, found[0][k], found[1][k])
            cursor = found[1][k]

    def sub(self, text: str, replace: str | None = None) -> str:
        """``text`` with every pair replaced by ``replace`` (None: by the pair's line breaks only)."""
        parts: list[str] = []
        pos = 0
        for p in self.pairs(text):
            parts.append(text[pos : p.start])
            parts.append("\n" * text.count("\n", p.start, p.end) if replace is None else replace)
            pos = p.end
        if not parts:
            return text
        parts.append(text[pos:])
        return "".join(parts)
