"""The grammar of a rounds turn: what it lets a model write is a turn the round's checks accept."""

from __future__ import annotations

import random
import re

import gbnf
import pytest

from masorch.agents.signatures import builtin_catalogue
from masorch.backends.chat import hermes_calls
from masorch.plan.grammar import tool_turn_grammar
from masorch.run.round_calls import FINAL_TOOL, check_calls, final_answer, wants_synthesis
from masorch.run.trajectory import CallOutcome

POOL = ("big", "coder")


def _rules(**kw: object) -> dict[str, gbnf.Node]:
    return gbnf.read(tool_turn_grammar(builtin_catalogue(), **kw))  # type: ignore[arg-type]


def _in(rules: dict[str, gbnf.Node], text: str) -> bool:
    return gbnf.matches(rules, text)


def _call(name: str, args: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


VALID_TURNS = [
    _call("cot", '{"task": "Add 2 and 3."}'),
    "Two parts; I split them.\n"
    + _call("sc", '{"task": "Solve x^2 = 4.", "n": 5}')
    + "\n"
    + _call("python", '{"task": "Compute 2**10.", "model": "coder"}'),
    _call(FINAL_TOOL, '{"answer": "42"}'),
    _call(FINAL_TOOL, '{"synthesize": true}'),
    _call("debate", '{"task": "Is 91 prime?", "roles": ["pro", "con"], "rounds": 2}'),
    _call("cot", '{"task": "$x^2 = 4$: find x, then $$\\\\frac{x}{2}$$"}'),
]


@pytest.mark.parametrize("text", VALID_TURNS)
def test_written_turns_are_in_the_grammar(text: str) -> None:
    assert _in(_rules(pool=POOL), text)


INVALID_TURNS = [
    (_call("cot", '{"task": "x"}') + "\n" + _call(FINAL_TOOL, '{"answer": "1"}'), "final beside calls"),
    ("\n".join([_call("cot", '{"task": "x"}')] * 5), "five calls"),
    (_call("cot", '{"task": ""}'), "empty task"),
    (_call("cot", '{"task": "Solve ${x}^2 = 4"}'), "a reference the round would read"),
    (_call("cot", '{"task": "${x} first"}'), "a reference first"),
    (_call("cot", '{"n": 3, "task": "x"}'), "task not first"),
    (_call("sc", '{"task": "x", "n": 99}'), "n out of range"),
    (_call("cot", '{"task": "x", "model": "huge"}'), "model not in the pool"),
    (_call("browse", '{"task": "x"}'), "unknown tool"),
    (_call(FINAL_TOOL, '{"answer": " "}'), "blank answer"),
    ("I will just answer: 4", "no call"),
    ("a <b> c " + _call("cot", '{"task": "x"}'), "a tag in the reasoning"),
    ('Like {"name": "cot"} ' + _call("cot", '{"task": "x"}'), "a JSON call in the reasoning"),
    ("```json\n" + _call("cot", '{"task": "x"}'), "a code fence in the reasoning"),
]


@pytest.mark.parametrize(("text", "why"), INVALID_TURNS)
def test_what_the_grammar_rules_out(text: str, why: str) -> None:
    assert not _in(_rules(pool=POOL), text), why


def test_without_a_pool_there_is_no_model_argument_and_the_call_limit_holds() -> None:
    rules = _rules(max_calls=2)
    assert not _in(rules, _call("cot", '{"task": "x", "model": "big"}'))
    two = "\n".join([_call("cot", '{"task": "x"}')] * 2)
    assert _in(rules, two) and not _in(rules, two + "\n" + _call("cot", '{"task": "y"}'))


def test_every_sampled_turn_reads_back_as_calls_the_round_accepts() -> None:
    rules, rng, catalogue = _rules(pool=POOL), random.Random(7), builtin_catalogue()
    seen: set[str] = set()
    for _ in range(300):
        text = gbnf.sample(rules, rng)
        read = hermes_calls(text)
        assert read is not None, text
        _reasoning, calls = read
        assert 1 <= len(calls) <= 4
        seen.update(c.name for c in calls)
        if calls[0].name == FINAL_TOOL:
            assert len(calls) == 1
            assert final_answer(calls[0]) is not None or wants_synthesis(calls[0])
            continue
        checked = check_calls(calls, round_no=1, catalogue=catalogue, pool=POOL, max_calls=4)
        refused = [c for c in checked if isinstance(c, CallOutcome)]
        assert not refused, (text, refused)
    assert seen == {*catalogue, FINAL_TOOL}


def test_repetitions_stay_below_the_llama_cpp_limit() -> None:
    grammar = tool_turn_grammar(builtin_catalogue(), pool=POOL)
    assert max(int(n) for n in re.findall(r"\{(?:\d+,)?(\d+)\}", grammar)) < 2000
