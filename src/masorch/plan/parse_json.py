"""Dialect "json": the plan calls as OpenAI-style tool calls, or one plan object.

Accepted shapes, anywhere in the text (prose, fences and ``<tool_call>`` tags around them are skipped):

* a list of tool calls ``[{"name": ..., "arguments": {...} | "<json string>"}, ...]``;
* a single tool call, or one wrapped as ``{"type": "function", "function": {...}}``;
* a message-like object ``{"tool_calls": [...]}``;
* one plan object ``{"agents": [{"id", "kind", "task", "params"?, ...}], "flows": [...],
  "final_answer": ...}`` where a flow is ``{"src", "dst"}`` (or ``source``/``target``) or a pair.
"""

from __future__ import annotations

import json
import re
from typing import Any

from masorch.plan._build import CREATE_AGENT, CREATE_FLOW, FINAL_ANSWER, RawCall, build_plan
from masorch.plan.diagnostics import Diagnostic, diag
from masorch.plan.model import Plan
from masorch.plan.parse_xml import blank_thinking

# Where a JSON value may start: any "[", and a "{" followed by a key, a "}" or only whitespace (the
# text ends inside it). Any other "{" (a LaTeX brace, a set in prose) cannot open a JSON object.
_START = re.compile(r'\[|\{(?=\s*\Z|[ \t\n\r]*["}])')
_DECODER = json.JSONDecoder()
#: The first window of text a value is decoded from (an ordinary plan fits in it); it grows 8-fold
#: until the result cannot depend on where the window ends. Decoding from the whole text would make
#: every syntax error cost time in proportion to the text before it (``JSONDecodeError`` counts the
#: lines from the start).
_WINDOW = 4096
#: How close to a window's end an error may be an artefact of the cut (``-Infinity``, ``\uXXXX``).
_MARGIN = 32
_SHAPE_HINT = 'give a list of {"name": ..., "arguments": {...}} tool calls or one {"agents": [...]} object'


class _JSONError(Exception):
    """A JSON syntax error at ``pos`` of the whole text."""

    def __init__(self, msg: str, pos: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.pos = pos


def _decode_at(text: str, start: int) -> tuple[Any, int]:
    """The JSON value at ``start`` and the index after it, read from a window that grows as needed.

    Raises ``_JSONError`` (positions in ``text``), ``RecursionError`` or ``ValueError`` (a number
    too long to convert) exactly where decoding the whole text would.
    """
    size = _WINDOW
    while True:
        window = text[start : start + size]
        try:
            value, end = _DECODER.raw_decode(window)
            return value, start + end  # a value that starts with "[" or "{" ends with its bracket
        except json.JSONDecodeError as exc:
            whole = start + size >= len(text)
            if whole or (exc.pos < len(window) - _MARGIN and not exc.msg.startswith("Unterminated")):
                raise _JSONError(exc.msg, start + exc.pos) from None
        size *= 8


class _Lines:
    """Line and column of positions met in increasing order, counted incrementally (linear time)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.last_newline = -1

    def at(self, pos: int) -> tuple[int, int]:
        """Line and column (from 1) of ``pos``, as ``json.JSONDecodeError`` gives them."""
        if pos < self.pos:  # not expected: positions only grow; count from the start
            self.pos, self.line, self.last_newline = 0, 1, -1
        count = self.text.count("\n", self.pos, pos)
        if count:
            self.line += count
            self.last_newline = self.text.rfind("\n", self.pos, pos)
        self.pos = pos
        return self.line, pos - self.last_newline


def _values(text: str) -> tuple[list[tuple[Any, str]], list[Diagnostic]]:
    """Every top-level JSON object or array in ``text`` with its place, and reading problems."""
    out: list[tuple[Any, str]] = []
    diags: list[Diagnostic] = []
    pos = 0
    content_end = len(text.rstrip())  # from here on the text is only whitespace
    lines = _Lines(text)
    while True:
        m = _START.search(text, pos)
        if m is None:
            break
        where = f"char:{m.start()}"
        try:
            value, end = _decode_at(text, m.start())
        except (RecursionError, ValueError, _JSONError) as exc:
            if not isinstance(exc, _JSONError):  # too deep, or a number too long to convert
                diags.append(
                    diag(
                        "syntax",
                        "a JSON value is nested too deeply or holds a number too long to read",
                        "write a flat plan with ordinary numbers",
                        where,
                    )
                )
                break  # retrying at each inner bracket would cost quadratic time for nothing
            if exc.pos >= content_end or exc.msg.startswith("Unterminated string"):
                diags.append(
                    diag("truncated", "the text ends inside a JSON value", "close every { and [", where)
                )
                break
            line, column = lines.at(exc.pos)
            diags.append(
                diag(
                    "syntax",
                    f"invalid JSON at line {line} column {column}: {exc.msg}",
                    "write valid JSON (double quotes, no trailing commas)",
                    where,
                )
            )
            pos = max(exc.pos, m.end())
            continue
        out.append((value, where))
        pos = end
    return out, diags


def _arguments(raw: Any, where: str, diags: list[Diagnostic]) -> dict[str, Any] | None:
    if raw is None:
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError) as exc:  # ValueError includes JSONDecodeError
            diags.append(
                diag(
                    "syntax",
                    f"tool-call arguments are not valid JSON: {getattr(exc, 'msg', 'too deep or too long')}",
                    "arguments must be a JSON object or a string holding one",
                    where,
                )
            )
            return None
    if not isinstance(raw, dict):
        diags.append(diag("bad_argument", "tool-call arguments must be an object", _SHAPE_HINT, where))
        return None
    return raw


def _tool_call(obj: dict[str, Any], where: str, diags: list[Diagnostic]) -> RawCall | None:
    if isinstance(obj.get("function"), dict):
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str):
        diags.append(diag("syntax", "a tool call has no name", _SHAPE_HINT, where))
        return None
    args = _arguments(obj.get("arguments", obj.get("parameters")), where, diags)
    if args is None:
        return None
    return RawCall(name, (), args, where)


def _is_tool_call(obj: Any) -> bool:
    return isinstance(obj, dict) and (
        isinstance(obj.get("function"), dict)
        or ("name" in obj and ("arguments" in obj or "parameters" in obj))
    )


def _plan_object(obj: dict[str, Any], where: str, diags: list[Diagnostic]) -> list[RawCall]:
    calls: list[RawCall] = []
    agents = obj.get("agents") or []
    flows = obj.get("flows") or obj.get("edges") or []
    if not isinstance(agents, list) or not isinstance(flows, list):
        diags.append(diag("syntax", "agents and flows must be lists", _SHAPE_HINT, where))
        return calls
    for i, agent in enumerate(agents):
        here = f"{where}/agents/{i}"
        if not isinstance(agent, dict):
            diags.append(diag("syntax", f"agent {i} is not an object", _SHAPE_HINT, here))
            continue
        fields = {k: v for k, v in agent.items() if k != "params"}
        params = agent.get("params") or {}
        if not isinstance(params, dict):
            diags.append(diag("bad_argument", f"params of agent {i} must be an object", _SHAPE_HINT, here))
            params = {}
        calls.append(RawCall(CREATE_AGENT, (), {**fields, **params}, here))
    for i, flow in enumerate(flows):
        here = f"{where}/flows/{i}"
        if isinstance(flow, list):
            calls.append(RawCall(CREATE_FLOW, tuple(flow), {}, here))
        elif isinstance(flow, dict):
            calls.append(RawCall(CREATE_FLOW, (), dict(flow), here))
        else:
            diags.append(diag("syntax", f"flow {i} is neither an object nor a pair", _SHAPE_HINT, here))
    if obj.get("final_answer") is not None:
        calls.append(RawCall(FINAL_ANSWER, (obj["final_answer"],), {}, f"{where}/final_answer"))
    return calls


def read_json_calls(text: str) -> tuple[list[RawCall], list[Diagnostic], bool]:
    """The plan calls carried by the JSON in ``text``, reading problems, and whether any was found."""
    values, diags = _values(text)
    calls: list[RawCall] = []
    found = False
    for value, where in values:
        if isinstance(value, dict) and "tool_calls" in value:
            value = value["tool_calls"]
        if isinstance(value, dict) and ("agents" in value or "final_answer" in value or "flows" in value):
            found = True
            calls.extend(_plan_object(value, where, diags))
        elif _is_tool_call(value):
            found = True
            call = _tool_call(value, where, diags)
            if call is not None:
                calls.append(call)
        elif isinstance(value, list) and any(_is_tool_call(v) for v in value):
            found = True
            for i, item in enumerate(value):
                if not _is_tool_call(item):
                    diags.append(diag("syntax", f"item {i} is not a tool call", _SHAPE_HINT, f"{where}/{i}"))
                    continue
                call = _tool_call(item, f"{where}/{i}", diags)
                if call is not None:
                    calls.append(call)
        # Any other JSON value (a number list in prose, a stray object) is not part of a plan.
    return calls, diags, found


def parse_json(text: str) -> tuple[Plan | None, list[Diagnostic]]:
    """The plan written as JSON in ``text`` (None when no plan-shaped JSON is found) and its problems."""
    calls, diags, found = read_json_calls(text)
    if "<think" in text.lower():
        # JSON drafted inside <think>/<thinking> reasoning does not count when the answer has a plan.
        outside = read_json_calls(blank_thinking(text))
        if outside[2]:
            calls, diags, found = outside
    if not found:
        return None, diags
    plan, more = build_plan(calls)
    return plan, diags + more
