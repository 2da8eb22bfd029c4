"""A small reader of the GBNF that :mod:`masorch.plan.grammar` writes, for tests.

It reads one rule per line (literals, character classes, rule references, groups, ``|`` and the
postfix operators ``? * + {m} {m,} {m,n}``), and gives a recognizer (the grammar, which has no
recursion, as one Python regular expression, or a memoised matcher for grammars whose shared rules
would make that expression too large) and a random sampler of the grammar's language.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]"}
# Characters a sampler tries first inside character classes: the ones plan readers care about.
_TRICKY = list("\"\\'<>()[]{}$#,.=_-/!?:;&*` \t\n\r\x00\x0b\x0c\x1c\x7f\x85\xa0\u2028\u3000éπ√😀") + [
    chr(c) for c in range(0x21, 0x7F)
]


@dataclass(frozen=True)
class Node:
    op: str  # lit | cls | ref | seq | alt | rep
    value: object = None
    items: tuple[Node, ...] = ()
    lo: int = 0
    hi: int | None = None


def _char(text: str, i: int) -> tuple[str, int]:
    if text[i] != "\\":
        return text[i], i + 1
    kind = text[i + 1]
    if kind in "xuU":
        width = {"x": 2, "u": 4, "U": 8}[kind]
        return chr(int(text[i + 2 : i + 2 + width], 16)), i + 2 + width
    return _ESCAPES[kind], i + 2


class _Reader:
    def __init__(self, text: str) -> None:
        self.t = text
        self.i = 0

    def ws(self) -> None:
        while self.i < len(self.t) and self.t[self.i] == " ":
            self.i += 1

    def alt(self) -> Node:
        options = [self.seq()]
        while self.i < len(self.t) and self.t[self.i] == "|":
            self.i += 1
            options.append(self.seq())
        return options[0] if len(options) == 1 else Node("alt", items=tuple(options))

    def seq(self) -> Node:
        items = []
        while True:
            self.ws()
            if self.i >= len(self.t) or self.t[self.i] in "|)":
                return Node("seq", items=tuple(items))
            items.append(self.postfix(self.atom()))

    def atom(self) -> Node:
        c = self.t[self.i]
        if c == '"':
            self.i += 1
            out = []
            while self.t[self.i] != '"':
                ch, self.i = _char(self.t, self.i)
                out.append(ch)
            self.i += 1
            return Node("lit", "".join(out))
        if c == "[":
            self.i += 1
            negated = self.t[self.i] == "^"
            self.i += negated
            ranges = []
            while self.t[self.i] != "]":
                lo, self.i = _char(self.t, self.i)
                hi = lo
                if self.t[self.i] == "-" and self.t[self.i + 1] != "]":
                    hi, self.i = _char(self.t, self.i + 1)
                ranges.append((lo, hi))
            self.i += 1
            return Node("cls", (negated, tuple(ranges)))
        if c == "(":
            self.i += 1
            inner = self.alt()
            assert self.t[self.i] == ")", self.t[self.i :]
            self.i += 1
            return inner
        m = re.compile(r"[A-Za-z0-9-]+").match(self.t, self.i)
        assert m is not None, f"unexpected {self.t[self.i :]!r}"
        self.i = m.end()
        return Node("ref", m.group())

    def postfix(self, node: Node) -> Node:
        while self.i < len(self.t):
            c = self.t[self.i]
            if c == "?":
                node, self.i = Node("rep", items=(node,), lo=0, hi=1), self.i + 1
            elif c == "*":
                node, self.i = Node("rep", items=(node,), lo=0, hi=None), self.i + 1
            elif c == "+":
                node, self.i = Node("rep", items=(node,), lo=1, hi=None), self.i + 1
            elif c == "{":
                m = re.compile(r"\{(\d+)(,(\d*))?\}").match(self.t, self.i)
                assert m is not None
                lo = int(m.group(1))
                hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
                node, self.i = Node("rep", items=(node,), lo=lo, hi=hi), m.end()
            else:
                return node
        return node


def read(grammar: str) -> dict[str, Node]:
    """The rules of ``grammar`` (one ``name ::= body`` per line)."""
    rules: dict[str, Node] = {}
    for line in grammar.splitlines():
        if not line.strip():
            continue
        name, sep, body = line.partition(" ::= ")
        assert sep, line
        reader = _Reader(body)
        rules[name] = reader.alt()
        assert reader.i == len(body), f"{name}: unread {body[reader.i :]!r}"
    return rules


def _in_class(ch: str, value: object) -> bool:
    negated, ranges = value  # type: ignore[misc]
    inside = any(lo <= ch <= hi for lo, hi in ranges)
    return inside != negated


def to_regex(rules: dict[str, Node], name: str = "root") -> str:
    """The language of rule ``name`` as a Python regular expression (the grammar has no recursion)."""

    def cls(value: object) -> str:
        negated, ranges = value  # type: ignore[misc]
        body = "".join(re.escape(lo) if lo == hi else f"{re.escape(lo)}-{re.escape(hi)}" for lo, hi in ranges)
        return f"[{'^' if negated else ''}{body}]"

    def go(node: Node) -> str:
        if node.op == "lit":
            return re.escape(str(node.value))
        if node.op == "cls":
            return cls(node.value)
        if node.op == "ref":
            return f"(?:{go(rules[str(node.value)])})"
        if node.op == "seq":
            return "".join(go(n) for n in node.items)
        if node.op == "alt":
            return "(?:" + "|".join(go(n) for n in node.items) + ")"
        hi = "" if node.hi is None else str(node.hi)
        return f"(?:{go(node.items[0])}){{{node.lo},{hi}}}"

    return go(rules[name])


def matches(rules: dict[str, Node], text: str, name: str = "root") -> bool:
    """Whether ``text`` is in the language of rule ``name``: the end positions each rule can reach
    from each start, memoised per rule and start (a plan-by-reference grammar shares its states,
    so inlining it into one regular expression would grow exponentially)."""
    memo: dict[tuple[str, int], frozenset[int]] = {}

    def rule(ref: str, pos: int) -> frozenset[int]:
        key = (ref, pos)
        if key not in memo:
            memo[key] = frozenset(go(rules[ref], pos))
        return memo[key]

    def go(node: Node, pos: int) -> set[int]:
        if node.op == "lit":
            value = str(node.value)
            return {pos + len(value)} if text.startswith(value, pos) else set()
        if node.op == "cls":
            return {pos + 1} if pos < len(text) and _in_class(text[pos], node.value) else set()
        if node.op == "ref":
            return set(rule(str(node.value), pos))
        if node.op == "seq":
            ends = {pos}
            for item in node.items:
                ends = {e for start in ends for e in go(item, start)}
            return ends
        if node.op == "alt":
            return {e for item in node.items for e in go(item, pos)}
        ends, frontier, count = {pos} if node.lo == 0 else set(), {pos}, 0
        while frontier and (node.hi is None or count < node.hi):
            frontier = {e for start in frontier for e in go(node.items[0], start) if e != start}
            count += 1
            if count >= node.lo:
                ends |= frontier
        return ends

    return len(text) in rule(name, 0)


def sample(rules: dict[str, Node], rng: random.Random, name: str = "root") -> str:
    """One random string of the language of rule ``name``."""
    out: list[str] = []
    allowed_in: dict[object, list[str]] = {}

    def count(lo: int, hi: int | None) -> int:
        top = lo + 3 if hi is None else hi
        pick = rng.random()
        if pick < 0.2:
            return lo
        if pick < 0.3:
            return top
        return rng.randint(lo, min(top, lo + 12))

    def go(node: Node) -> None:
        if node.op == "lit":
            out.append(str(node.value))
        elif node.op == "cls":
            if node.value not in allowed_in:
                allowed_in[node.value] = [c for c in _TRICKY if _in_class(c, node.value)]
            allowed = allowed_in[node.value]
            if rng.random() < 0.1 or not allowed:
                negated, ranges = node.value  # type: ignore[misc]
                if not negated:
                    lo, hi = rng.choice(ranges)
                    out.append(chr(rng.randint(ord(lo), ord(hi))))
                    return
            out.append(rng.choice(allowed))
        elif node.op == "ref":
            go(rules[str(node.value)])
        elif node.op == "seq":
            for n in node.items:
                go(n)
        elif node.op == "alt":
            go(rng.choice(node.items))
        else:
            for _ in range(count(node.lo, node.hi)):
                go(node.items[0])

    go(rules[name])
    return "".join(out)
