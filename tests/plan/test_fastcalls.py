"""The fast call reader agrees with ``ast`` whenever it answers, and gives up otherwise."""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from masorch.plan._fastcalls import read_call

FRAGMENTS = [
    '"a b"',
    "'c'",
    '"\\n\\t"',
    '"\\/"',
    '"\\ud83d"',
    '"\\u00e9"',
    '"\\x41"',
    '"\\\\"',
    '"\\""',
    '""',
    '"""',
    "r'x'",
    "b'x'",
    "f'x'",
    "1",
    "-1",
    "0",
    "1.5",
    "1.",
    ".5",
    "1e3",
    "-2E-2",
    "01",
    "1_0",
    "1j",
    "0x1F",
    "True",
    "False",
    "None",
    "x",
    "if",
    "[",
    "]",
    "(",
    ")",
    ",",
    "=",
    "==",
    "a=",
    "n =",
    "if=",
    "a=",
    " ",
    "\t",
    "\n",
    "\r",
    "\x0c",
    "\x0b",
    "\xa0",
    "\x00",
    "#",
    "\\",
    "é",
    "ü=",
    "**",
    "*",
    "-",
    "'\\n'",
]


def _ast_read(source: str):
    call = ast.parse(source, mode="eval").body
    assert isinstance(call, ast.Call)
    args = tuple(ast.literal_eval(a) for a in call.args)
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    return args, kwargs


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=12))
def test_fast_reader_matches_ast_when_it_answers(parts):
    text = "f(" + "".join(parts) + ")"
    got = read_call(text, 1)
    if got is None:
        return
    args, kwargs, end = got
    expected = _ast_read(text[:end])
    # ast gives tuples for "(...)"; the fast reader never reads tuples, so the values compare directly
    assert (args, kwargs) == expected
    assert [type(a) for a in args] == [type(a) for a in expected[0]]


def test_common_shapes_are_read_fast():
    text = 'create_agent(id="a", kind="sc", task="Use ${b}.\\nThen vote.", n=5, roles=["x", "y"], t=0.5)'
    got = read_call(text, text.index("("))
    assert got is not None
    assert got[1] == {
        "id": "a",
        "kind": "sc",
        "task": "Use ${b}.\nThen vote.",
        "n": 5,
        "roles": ["x", "y"],
        "t": 0.5,
    }
    assert got[2] == len(text)


def test_unusual_shapes_are_left_to_ast():
    for text in ["f(a=x)", 'f(a=r"x")', 'f(a="x" "y")', "f(a=1, 2)", 'f(a="\\/")', "f(a=(1, 2))", "f(**k)"]:
        assert read_call(text, 1) is None, text
