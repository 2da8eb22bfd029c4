"""A fast reader for the common, simple shape of a plan call; anything else is left to ``ast``.

``ast.parse`` costs about 0.1 ms per kilobyte, too much for thousands of plans per training step.
Most calls are plain ``name(key="text", key=3, key=[...])``: this reader handles exactly that
subset - double-quoted strings with JSON-compatible escapes, single-quoted strings without escapes,
decimal numbers, ``True``/``False``/``None`` and lists of those - and gives up (returns None) on
anything else, which the caller then reads with ``ast``. A property test checks that whenever it
answers, it answers what ``ast.literal_eval`` would.
"""

from __future__ import annotations

import json
import keyword
import re
from typing import Any

_WS = r"[ \t\f\r\n]*"  # the whitespace Python allows between tokens inside brackets
_VALUE = r"""(?:
    (?P<dq>"[^"\\\n\r\x00]*(?:\\[^\n\r\x00][^"\\\n\r\x00]*)*")
  | (?P<sq>'[^'\\\n\r\x00]*')
  | (?P<num>-?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)(?![\w.])
  | (?P<const>True|False|None)(?![\w]|[^\x00-\x7f])
  | (?P<list>\[)
)"""
_ARG = re.compile(
    rf"{_WS}(?:(?P<kw>[A-Za-z_][A-Za-z0-9_]*){_WS}=(?!=)(?![^\x00-\x7f]){_WS})?{_VALUE}(?:{_WS}(?P<sep>[,)\]]))?",
    re.X,
)
_CLOSE = re.compile(rf"{_WS}(?P<close>[)\]])")
_SEP = re.compile(rf"{_WS}([,)\]])")
# Escapes whose meaning is the same in JSON and Python ("\/" and surrogate "\uD8xx" differ).
_SAFE_ESCAPES = re.compile(r"\\(?:[\\\"nrtbf]|u(?![dD][89a-fA-F])[0-9a-fA-F]{4})")
_JSON = json.JSONDecoder(strict=False)  # Python strings may hold raw tabs and other control characters
_CONSTANTS: dict[str, Any] = {"True": True, "False": False, "None": None}


class _GiveUp(Exception):
    """The text is outside the simple subset; read it with ``ast`` instead."""


def _scalar(dq: str | None, sq: str | None, num: str | None, const: str | None) -> Any:
    if dq is not None:
        body = dq[1:-1]
        if "\\" not in body:
            return body
        if "\\" in _SAFE_ESCAPES.sub("", body):
            raise _GiveUp
        return _JSON.decode(dq)
    if sq is not None:
        return sq[1:-1]
    if num is not None:
        return float(num) if ("." in num or "e" in num or "E" in num) else int(num)
    if const is not None:
        return _CONSTANTS[const]
    raise _GiveUp


def _items(text: str, pos: int, closer: str) -> tuple[list[Any], dict[str, Any], int]:
    """Values (and, for a call, keywords) up to ``closer``; the position after it."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    while True:
        m = _ARG.match(text, pos)
        if m is None:
            end = _CLOSE.match(text, pos)  # empty brackets, or a trailing comma before the closer
            if end is None or end.group("close") != closer:
                raise _GiveUp
            return args, kwargs, end.end()
        name, dq, sq, num, const, opened, sep_char = m.groups()
        value: Any
        if opened is not None:
            value, _, pos = _items(text, m.end("list"), "]")
            sep = _SEP.match(text, pos)
            if sep is None:
                raise _GiveUp
            sep_char, pos = sep.group(1), sep.end()
        else:
            value = _scalar(dq, sq, num, const)
            pos = m.end()
        if name is not None:
            if closer != ")" or name in kwargs or keyword.iskeyword(name):
                raise _GiveUp
            kwargs[name] = value
        elif kwargs:
            raise _GiveUp  # positional after keyword: a syntax error that ast will name
        else:
            args.append(value)
        if sep_char == ",":
            continue
        if sep_char != closer:
            raise _GiveUp
        return args, kwargs, pos


# The commonest call of all, create_flow("a", "b"): two plain strings, read with one match.
_TWO_STRINGS = re.compile(rf'\({_WS}"([^"\\\n\r\x00]*)"{_WS},{_WS}"([^"\\\n\r\x00]*)"{_WS},?{_WS}\)')


def read_call(text: str, open_at: int) -> tuple[tuple[Any, ...], dict[str, Any], int] | None:
    """Positional and keyword arguments of the call whose ``(`` is at ``open_at``, and its end.

    None when the call is outside the simple subset (the caller falls back to ``ast``).
    """
    pair = _TWO_STRINGS.match(text, open_at)
    if pair is not None:
        return (pair.group(1), pair.group(2)), {}, pair.end()
    try:
        args, kwargs, end = _items(text, open_at + 1, ")")
    except (_GiveUp, ValueError, RecursionError):
        return None
    return tuple(args), kwargs, end
