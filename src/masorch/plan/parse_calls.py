"""Dialect "calls": ``create_agent(...)``, ``create_flow(...)``, ``final_answer(...)`` read with ``ast``.

Nothing is ever evaluated: each argument must be a Python literal (``ast.literal_eval`` on its node).
Text around the calls (reasoning prose, markdown fences, numbered lists) is tolerated: the reader
finds each call by name, reads the common simple shape with a small regex reader (``_fastcalls``),
and otherwise finds the closing parenthesis with a scanner that knows Python string literals and
parses only that span with ``ast``. A call on its own line must be readable; calls inside sentences
are skipped with a warning when calls also stand on their own lines or when they cannot be read;
calls in ``#`` comments and drafted in ``<think>`` blocks are not part of the plan.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any

from masorch.plan._build import KNOWN_CALLS, UNREADABLE, RawCall, build_plan
from masorch.plan._fastcalls import read_call
from masorch.plan.diagnostics import Diagnostic, diag
from masorch.plan.model import Plan
from masorch.plan.parse_xml import blank_thinking

# What ast.parse raises on unreadable source: SyntaxError; ValueError for a NUL byte; RecursionError
# and MemoryError (the parser's stack overflow) for expressions nested too deeply.
_UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)
_CALL_START = re.compile(r"(create_\w+|final_answer)\s*\(")
_DOTTED_TAIL = re.compile(r"(?:[A-Za-z_]\w*\.)+$")  # "agents." in "agents.create_agent(...)"
# What may stand before a call on its line for it to count as code rather than prose.
_CODE_PREFIX = re.compile(
    r"^\s*(?:[-*+>]\s+|\d+[.)]\s+|>>>\s*|\.\.\.\s+|[A-Za-z_][\w.]*\s*=\s*|await\s+|`)?\s*$"
)
#: A code prefix is short (a bullet, ``x = ``, ``agents.``); a longer one is prose, which keeps the
#: prefix patterns (whose ``$``-anchored search is quadratic in the prefix) on short strings.
_MAX_CODE_PREFIX = 120
_SPECIAL = re.compile(r"\"\"\"|'''|[\"'()\[\]{}#]")
_OPEN = {"(": ")", "[": "]", "{": "}"}
_STRING_END = {
    '"': re.compile(r'\\.|"|\n', re.S),
    "'": re.compile(r"\\.|'|\n", re.S),
    '"""': re.compile(r'\\.|"""', re.S),
    "'''": re.compile(r"\\.|'''", re.S),
}


def _closing(text: str, open_at: int) -> int | None:
    """Index just past the parenthesis that closes the one at ``open_at``, or None if the text ends."""
    stack = [")"]
    pos = open_at + 1
    while True:
        m = _SPECIAL.search(text, pos)
        if m is None:
            return None
        tok = m.group()
        pos = m.end()
        if tok in _STRING_END:
            end_re = _STRING_END[tok]
            while True:
                s = end_re.search(text, pos)
                if s is None:
                    return None
                pos = s.end()
                if s.group() == "\n":  # unterminated one-line string: let ast report the syntax error
                    break
                if not s.group().startswith("\\"):
                    break
        elif tok == "#":
            nl = text.find("\n", pos)
            if nl < 0:
                return None
            pos = nl + 1
        elif tok in _OPEN:
            stack.append(_OPEN[tok])
        else:
            if tok != stack[-1]:
                return m.end()  # mismatched bracket: hand the span to ast, which names the problem
            stack.pop()
            if not stack:
                return pos


def _literal(node: ast.expr) -> tuple[bool, Any]:
    if isinstance(node, ast.Constant):  # the common case, without literal_eval's dispatch
        return (False, None) if node.value is Ellipsis else (True, node.value)
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _snippet(text: str, limit: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


@dataclass(slots=True)
class _Span:
    name: str
    start: int
    end: int
    where: str
    in_prose: bool
    #: the arguments when the fast reader could read them (then ``ast`` is not needed)
    fast: tuple[tuple[Any, ...], dict[str, Any]] | None = None


def _spans(text: str, diags: list[Diagnostic]) -> tuple[list[_Span], bool]:
    """Where each call starts and ends, and whether any call was found at all.

    Long on purpose: one pass over the text that carries its line state (number, start, comment,
    the last call's "(") from call to call; split up, every helper would pass all of it back.
    """
    spans: list[_Span] = []
    found = False
    pos = 0
    # Lines are tracked incrementally (one pass over the text): the line number, where the current
    # line starts, whether it is a comment, and where the last call name's "(" was.
    line_no, counted_to = 1, 0
    line_start, scanned_to, prefix_line, last_paren = 0, 0, -1, -1
    head, comment = "", False
    while True:
        m = _CALL_START.search(text, pos)
        if m is None:
            break
        start = m.start(1)
        newline = text.rfind("\n", scanned_to, start)
        scanned_to = start
        if newline >= 0:
            line_start = newline + 1
        after_call, last_paren = last_paren >= line_start, m.end() - 1
        if start and (text[start - 1].isalnum() or text[start - 1] == "_"):
            pos = m.end()  # part of a longer name, e.g. "recreate_agent("
            continue
        if prefix_line != line_start:  # the first call on its line: read what stands before it
            prefix_line = line_start
            head = text[line_start:start].lstrip()
            comment = head.startswith("#")
        if comment:  # a commented-out call is not part of the plan
            pos = m.end()
            continue
        found = True
        line_no += text.count("\n", counted_to, start)
        counted_to = start
        where = f"line:{line_no}"
        if after_call:  # another call's "(" stands before it on its line: a sentence, not code
            in_prose = True
        else:  # the first call on its line, so ``head`` is what stands before it
            in_prose = bool(head) and (
                len(head.rstrip()) > _MAX_CODE_PREFIX
                or _CODE_PREFIX.match(_DOTTED_TAIL.sub("", head)) is None
            )
        name = m.group(1)
        fast = read_call(text, m.end() - 1)
        if fast is not None:
            args, kwargs, fast_end = fast
            spans.append(_Span(name, start, fast_end, where, in_prose, (args, kwargs)))
            pos = fast_end
            continue
        end = _closing(text, m.end() - 1)
        if end is None:
            diags.append(
                diag(
                    "truncated",
                    f"the text ends inside {name}(...): {_snippet(text[start:])}",
                    "finish the call with its closing parenthesis",
                    where,
                )
            )
            break
        spans.append(_Span(name, start, end, where, in_prose))
        pos = end
    return spans, found


def _parse_all(text: str, spans: list[_Span]) -> list[ast.Call] | None:
    """All spans parsed with one ``ast.parse`` (the fast path), or None when any is unreadable."""
    if not spans:
        return []
    try:
        module = ast.parse("\n".join(text[s.start : s.end] for s in spans))
    except _UNPARSABLE:
        return None
    if len(module.body) != len(spans):
        return None
    calls = []
    for stmt in module.body:
        if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
            return None
        calls.append(stmt.value)
    return calls


def read_calls(text: str) -> tuple[list[RawCall], list[Diagnostic], bool]:
    """Every plan call in ``text``, the problems met reading them, and whether any call was found."""
    calls: list[RawCall] = []
    diags: list[Diagnostic] = []
    spans, found = _spans(text, diags)
    in_prose = [s for s in spans if s.in_prose]
    if in_prose and len(in_prose) < len(spans):
        # Calls on their own lines make the plan; the same calls narrated in the reasoning must not
        # be counted twice.
        spans = [s for s in spans if not s.in_prose]
        diags.append(
            diag(
                "prose_call_ignored",
                f"{len(in_prose)} call(s) mentioned inside sentences were ignored; "
                "the calls on their own lines make the plan",
                "keep plan calls on their own lines, outside sentences",
                in_prose[0].where,
            )
        )
    slow = [s for s in spans if s.fast is None]
    batch = _parse_all(text, slow)
    parsed = {id(s): c for s, c in zip(slow, batch or (), strict=False)}
    for span in spans:
        if span.fast is not None:
            calls.append(RawCall(span.name, span.fast[0], span.fast[1], span.where))
            continue
        source = text[span.start : span.end]
        call = parsed.get(id(span)) or _parse_one(span, source, diags)
        if call is None:
            continue
        raw, problems = _convert(span.name, call, span.where)
        if problems and span.in_prose:
            diags.append(_prose_skip(span.name, source, span.where))
            continue
        diags.extend(problems)
        calls.append(raw)
    return calls, diags, found


def _parse_one(span: _Span, source: str, diags: list[Diagnostic]) -> ast.Call | None:
    """One call read with ``ast``; a diagnostic (or a skip in prose) when it cannot be read."""
    try:
        tree = ast.parse(source, mode="eval")
    except _UNPARSABLE as exc:
        if span.in_prose:
            diags.append(_prose_skip(span.name, source, span.where))
        else:
            diags.append(
                diag(
                    "syntax",
                    f"cannot read {_snippet(source)}: {getattr(exc, 'msg', None) or 'nested too deeply'}",
                    'write each call as name(key="value", ...) with literal values',
                    span.where,
                )
            )
        return None
    if not isinstance(tree.body, ast.Call):  # a balanced span is always a call; stay safe
        diags.append(diag("syntax", f"cannot read {_snippet(source)}", "write one call per line", span.where))
        return None
    return tree.body


def _prose_skip(name: str, source: str, where: str) -> Diagnostic:
    return diag(
        "prose_call_ignored",
        f"skipped {_snippet(source)} inside prose: it is not a complete call with literal values",
        f"put each {name}(...) call on its own line",
        where,
    )


def _convert(name: str, call: ast.Call, where: str) -> tuple[RawCall, list[Diagnostic]]:
    problems: list[Diagnostic] = []
    args = [
        _argument(name, node, f"argument {i + 1}", None, where, problems) for i, node in enumerate(call.args)
    ]
    kwargs: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:
            problems.append(_non_literal(name, "**" + _unparse(kw.value), where))
            continue  # unknown keys: nothing to hold a place for
        if kw.arg in kwargs:  # Python's parser reads f(a=1, a=2); only its compiler refuses it
            problems.append(
                diag(
                    "syntax",
                    f"{name}: {kw.arg}= is given twice",
                    f"give {kw.arg}= once per call",
                    where,
                )
            )
            continue
        kwargs[kw.arg] = _argument(name, kw.value, kw.arg, kw.arg, where, problems)
    return RawCall(name, tuple(args), kwargs, where), problems


#: Python reads a decimal integer literal of at most 4300 digits (a longer one is a syntax error)
#: and cannot print a longer integer; hexadecimal, octal and binary literals get the same limit.
MAX_INT_DIGITS = 4300
_MAX_INT_BITS = int(MAX_INT_DIGITS * math.log2(10))  # an integer of this many bits has <= 4300 digits


def _argument(
    name: str, node: ast.expr, label: str, keyword: str | None, where: str, problems: list[Diagnostic]
) -> Any:
    """The literal value of one argument, or ``UNREADABLE`` once its problem is recorded."""
    if _huge_int(node):
        problems.append(
            diag(
                "syntax",
                f"{name}: {label} holds an integer literal with more than {MAX_INT_DIGITS} digits",
                "write an ordinary number",
                where,
            )
        )
        return UNREADABLE
    ok, value = (False, None) if isinstance(node, ast.Starred) else _literal(node)
    if not ok:
        shown = _unparse(node) if keyword is None else f"{keyword}={_unparse(node)}"
        problems.append(_non_literal(name, shown, where))
        return UNREADABLE
    return value


def _huge_int(node: ast.expr) -> bool:
    """Whether ``node`` holds an integer literal too long to print."""
    if isinstance(node, ast.Constant):  # the common case, without a walk
        return isinstance(node.value, int) and node.value.bit_length() > _MAX_INT_BITS
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, int) and n.value.bit_length() > _MAX_INT_BITS
        for n in ast.walk(node)
    )


def _unparse(node: ast.expr) -> str:
    try:
        return ast.unparse(node)
    except RecursionError:
        return "(a deeply nested expression)"
    except ValueError:  # an integer too long to print
        return "(an expression with a number too long to print)"


def _non_literal(name: str, arg: str, where: str) -> Diagnostic:
    return diag(
        "non_literal",
        f"{name}: argument {_snippet(arg, 40)} is code, not a literal value",
        "write strings, numbers, booleans or lists of them; nothing is evaluated",
        where,
    )


def parse_calls(text: str) -> tuple[Plan | None, list[Diagnostic]]:
    """The plan written as calls in ``text`` (None when there is no call at all) and its problems."""
    if "<think" in text.lower():
        # Calls drafted inside <think>/<thinking> reasoning do not count when the answer has calls.
        outside = blank_thinking(text)
        if _CALL_START.search(outside):
            text = outside
    calls, diags, found = read_calls(text)
    if not found:
        return None, diags
    plan, more = build_plan(calls)
    return plan, diags + more


__all__ = ["KNOWN_CALLS", "parse_calls", "read_calls"]
