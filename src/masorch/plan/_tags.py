r"""``<name>content</name>`` pairs found in linear time, exactly as a lazy regex finds them.

A pattern like ``<(name)>(.*?)</\1>`` rescans the rest of the text from every opening tag that is
never closed, so a run of unclosed tags (``<thinking><thinking>...``) costs time quadratic in the
text. :class:`TagPairs` finds the same matches in linear time: when every opening tag has a
closing tag of its name somewhere after it (a string search per name for fixed names, else one
pass over the tags from the end), the lazy pattern never rescans and runs as it is - the common
case, and the fastest; otherwise
:meth:`TagPairs.scan` pairs each opening tag with the first closing tag after it (a bisection),
skipping opening tags inside an earlier pair, as ``finditer`` does. A property test in
``tests/plan/test_limits.py`` checks both ways against the lazy pattern.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from typing import NamedTuple


class Pair(NamedTuple):
    """One ``<name>content</name>``: the opening tag's name as written and its spans."""

    name: str
    start: int
    content_start: int
    content_end: int
    end: int


class TagPairs:
    r"""Pairs of the tags whose names match the pattern ``names``.

    A closing tag closes an opening tag of the same name, as the back-reference in
    ``<(a|b)>.*?</\1>`` demands (with ``ignore_case``, compared the way a case-insensitive
    back-reference compares: character by character in lower case); with ``any_close``, any closing
    tag the pattern matches closes, as in ``<answer>.*?</answer>``.
    """

    def __init__(self, names: str, ignore_case: bool = False, any_close: bool = False) -> None:
        flags = re.I if ignore_case else 0
        self.token = re.compile(rf"<(/?)({names})>", flags)
        close = f"(?:{names})" if any_close else r"\1"
        # "(.*?)</close>" as an unrolled loop ("[^<]*" runs), which the regex engine scans faster.
        self.lazy = re.compile(rf"<({names})>([^<]*(?:<(?!/{close}>)[^<]*)*)</{close}>", flags)
        self.ignore_case = ignore_case
        self.any_close = any_close
        # Literal names ("thinking|think"): on ASCII text the check is a few string searches.
        literal = re.fullmatch(r"[a-z_]+(?:\|[a-z_]+)*", names) is not None
        self._literal = [(f"<{n}>", f"</{n}>") for n in names.split("|")] if literal else None

    def items(self, text: str) -> list[tuple[str, str]]:
        """``(name, content)`` of every pair in ``text``, left to right, none inside another."""
        if "<" not in text:
            return []
        if self._lazy_is_linear(text):
            return self.lazy.findall(text)
        return [(p.name, text[p.content_start : p.content_end]) for p in self.scan(text)]

    def sub(self, text: str, replace: str | None = None) -> str:
        """``text`` with every pair replaced by ``replace`` (None: by the pair's line breaks only)."""
        if "<" not in text:
            return text
        if self._lazy_is_linear(text):
            if replace is None:
                return self.lazy.sub(lambda m: "\n" * m.group().count("\n"), text)
            fill = replace
            return self.lazy.sub(lambda _: fill, text)
        parts: list[str] = []
        pos = 0
        for p in self.scan(text):
            parts.append(text[pos : p.start])
            parts.append("\n" * text.count("\n", p.start, p.end) if replace is None else replace)
            pos = p.end
        if not parts:
            return text
        parts.append(text[pos:])
        return "".join(parts)

    def _lazy_is_linear(self, text: str) -> bool:
        """Whether every opening tag has a closing tag for it further on (then nothing is rescanned)."""
        if self._literal is not None and text.isascii():
            low = text.lower() if self.ignore_case else text
            last_close = max(low.rfind(close) for _, close in self._literal) if self.any_close else 0
            for open_, close in self._literal:
                at = low.rfind(open_)  # the last opening tag of this name, -1 when there is none
                if at >= 0 and at > (last_close if self.any_close else low.rfind(close)):
                    return False
            return True
        closed: set[str] = set()
        plain = not self.ignore_case and not self.any_close
        for slash, name in reversed(self.token.findall(text)):
            key = name if plain else self._key(name)
            if slash:
                closed.add(key)
            elif key not in closed:
                return False
        return True

    def _key(self, name: str) -> str:
        if self.any_close:
            return ""
        if not self.ignore_case:
            return name
        if name.isascii():
            return name.lower()
        # As the regex engine compares: one character at a time ("İ" -> "i", no final sigma).
        return "".join(c.lower()[0] for c in name)

    def scan(self, text: str) -> Iterator[Pair]:
        """The pairs found by one scan over the tags (linear whatever the text)."""
        # Parallel lists of plain ints and strings: no object per tag for the collector to track.
        names: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        closes: dict[str, tuple[list[int], list[int]]] = {}
        for m in self.token.finditer(text):
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
        cursor = 0
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
