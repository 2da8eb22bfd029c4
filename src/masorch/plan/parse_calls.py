"""Dialect "calls": ``create_agent(...)``, ``create_flow(...)``, ``final_answer(...)`` read with ``ast``.

Nothing is ever evaluated: each argument must be a Python literal (``ast.literal_eval`` on its node).
Text around the calls (reasoning prose, markdown fences, numbered lists) is tolerated: the reader
finds each call by name, finds its closing parenthesis with a small scanner that knows Python string
literals, and parses only that span. A call mentioned inside a prose sentence that cannot be read is
skipped with a warning rather than failing the plan; a call on its own line must be readable.
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Any

from masorch.plan._build import KNOWN_CALLS, UNREADABLE, RawCall, build_plan
from masorch.plan.diagnostics import Diagnostic, diag
from masorch.plan.model import Plan

_CALL_START = re.compile(r"(?<![\w.])((?:[A-Za-z_]\w*\.)*)(create_\w+|final_answer)\s*\(")
# What may stand before a call on its line for it to count as code rather than prose.
_CODE_PREFIX = re.compile(
    r"^\s*(?:[-*+>]\s+|\d+[.)]\s+|>>>\s*|\.\.\.\s+|[A-Za-z_][\w.]*\s*=\s*|await\s+|`)?\s*$"
)
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
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return False, None
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _snippet(text: str, limit: int = 60) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def read_calls(text: str) -> tuple[list[RawCall], list[Diagnostic], bool]:
    """Every plan call in ``text``, the problems met reading them, and whether any call was found."""
    calls: list[RawCall] = []
    diags: list[Diagnostic] = []
    line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
    found = False
    pos = 0
    while True:
        m = _CALL_START.search(text, pos)
        if m is None:
            break
        found = True
        start = m.start(2)
        line_no = bisect.bisect_right(line_starts, start)
        where = f"line:{line_no}"
        prefix = text[line_starts[line_no - 1] : m.start()]
        in_prose = _CODE_PREFIX.match(prefix) is None
        end = _closing(text, m.end() - 1)
        if end is None:
            diags.append(
                diag(
                    "truncated",
                    f"the text ends inside {m.group(2)}(...): {_snippet(text[start:])}",
                    "finish the call with its closing parenthesis",
                    where,
                )
            )
            break
        pos = end
        source = text[start:end]
        try:
            tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as exc:
            if in_prose:
                diags.append(_prose_skip(m.group(2), source, where))
            else:
                diags.append(
                    diag(
                        "syntax",
                        f"cannot read {_snippet(source)}: {exc.msg}",
                        'write each call as name(key="value", ...) with literal values',
                        where,
                    )
                )
            continue
        call = tree.body
        if not isinstance(call, ast.Call):  # e.g. "final_answer(x)(y)" or "final_answer(x).y"
            diags.append(diag("syntax", f"cannot read {_snippet(source)}", "write one call per line", where))
            continue
        raw, problems = _convert(m.group(2), call, where)
        if problems and in_prose:
            diags.append(_prose_skip(m.group(2), source, where))
            continue
        diags.extend(problems)
        calls.append(raw)
    return calls, diags, found


def _prose_skip(name: str, source: str, where: str) -> Diagnostic:
    return diag(
        "prose_call_ignored",
        f"skipped {_snippet(source)} inside prose: it is not a complete call with literal values",
        f"put each {name}(...) call on its own line",
        where,
    )


def _convert(name: str, call: ast.Call, where: str) -> tuple[RawCall, list[Diagnostic]]:
    problems: list[Diagnostic] = []
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for node in call.args:
        ok, value = (False, None) if isinstance(node, ast.Starred) else _literal(node)
        if not ok:
            problems.append(_non_literal(name, ast.unparse(node), where))
            value = UNREADABLE
        args.append(value)
    for kw in call.keywords:
        if kw.arg is None:
            problems.append(_non_literal(name, "**" + ast.unparse(kw.value), where))
            continue  # unknown keys: nothing to hold a place for
        ok, value = _literal(kw.value)
        if not ok:
            problems.append(_non_literal(name, f"{kw.arg}={ast.unparse(kw.value)}", where))
            value = UNREADABLE
        kwargs[kw.arg] = value
    return RawCall(name, tuple(args), kwargs, where), problems


def _non_literal(name: str, arg: str, where: str) -> Diagnostic:
    return diag(
        "non_literal",
        f"{name}: argument {_snippet(arg, 40)} is code, not a literal value",
        "write strings, numbers, booleans or lists of them; nothing is evaluated",
        where,
    )


def parse_calls(text: str) -> tuple[Plan | None, list[Diagnostic]]:
    """The plan written as calls in ``text`` (None when there is no call at all) and its problems."""
    calls, diags, found = read_calls(text)
    if not found:
        return None, diags
    plan, more = build_plan(calls)
    return plan, diags + more


__all__ = ["KNOWN_CALLS", "parse_calls", "read_calls"]
