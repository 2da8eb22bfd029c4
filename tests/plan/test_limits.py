"""Bounded reading: the regression corpus of inputs that once hung or crashed the readers (issue 13),
the text-size cap, finite numbers, and the linear-time scanners checked against the patterns they
replaced. The big inputs are generated here (the shapes of ``bench/parse_limits.py``), never stored.
"""

from __future__ import annotations

import importlib.util
import json
import re
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from masorch.agents.signatures import builtin_catalogue
from masorch.plan import CODES, DoM, Limits, check, compliance, parse, render, to_mermaid
from masorch.plan import parse_calls as pc
from masorch.plan import parse_json as pj
from masorch.plan import parse_xml as px
from masorch.plan._fastcalls import read_call
from masorch.plan.parse import MAX_TEXT_CHARS

DIALECTS = ("calls", "json", "xml")
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_BENCH = Path(__file__).parents[2] / "bench" / "parse_limits.py"
_spec = importlib.util.spec_from_file_location("parse_limits", _BENCH)
assert _spec is not None and _spec.loader is not None
parse_limits = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parse_limits)
SHAPES = parse_limits.SHAPES
RAISED = Limits(max_text_chars=20_000_000)


def _codes(result) -> list[str]:
    return [d.code for d in result.diagnostics]


def _timed(text: str, dialect: str, limits: Limits = RAISED):
    start = time.process_time()
    result = check(text, DoM.HIGH, builtin_catalogue(), dialect, limits)  # type: ignore[arg-type]
    return result, time.process_time() - start


def _never_raises_after(result) -> None:
    """What callers do with a result (render, export, serialise) must not raise either."""
    assert all(d.code in CODES and d.message for d in result.diagnostics)
    assert 0.0 <= compliance(result.diagnostics) <= 1.0
    if result.plan is not None:
        for dialect in DIALECTS:
            render(result.plan, dialect)  # type: ignore[arg-type]
        to_mermaid(result.plan)
        json.dumps(result.plan.model_dump(mode="json"))


# --- the text-size cap --------------------------------------------------------------------------


def _many_agents(n: int) -> str:
    return "".join(f'create_agent(id="a{i}", kind="cot", task="Step {i} of the plan.")\n' for i in range(n))


def test_a_10_mb_plan_of_75k_agents_is_rejected_unread_at_once():
    text = _many_agents(75_000)
    text += "#" * (10_000_000 - len(text))
    for dialect in ("auto", *DIALECTS):
        result, spent = _timed(text, dialect, Limits())
        assert _codes(result) == ["plan_too_large"] and result.plan is None and not result.valid
        assert spent < 0.5, spent
    assert compliance(result.diagnostics) == 0.0
    assert "10,000,000 characters" in result.diagnostics[0].message and result.diagnostics[0].hint


def test_the_cap_is_inclusive_and_can_be_raised():
    text = 'final_answer("4")'.ljust(MAX_TEXT_CHARS)
    assert check(text, DoM.LOW, builtin_catalogue()).valid
    longer = text + " "
    assert _codes(check(longer, DoM.LOW, builtin_catalogue())) == ["plan_too_large"]
    assert check(longer, DoM.LOW, builtin_catalogue(), limits=Limits(max_text_chars=len(longer))).valid
    assert parse(longer, "json").dialect == "json"  # a dialect that was asked for is reported
    assert parse(longer, max_chars=len(longer)).ok


def test_a_plan_of_20k_agents_under_a_raised_cap_is_read_in_linear_time():
    # 1.2 MB; the 10 MB plan of 75k agents took 83 s to be rejected before, 2.2 s now read in full.
    result, spent = _timed(_many_agents(20_000), "calls")
    assert "too_many_agents" in _codes(result) and len(result.plan.agents) == 20_000
    assert spent < 10, spent


# --- the regression corpus ----------------------------------------------------------------------

HUGE_INTEGERS = {
    "hex": "0x" + "f" * 4000,
    "negative hex": "-0x" + "f" * 4000,
    "binary": "0b" + "1" * 15_000,
    "octal": "0o" + "7" * 5000,
    "decimal": "9" * 4301,
    "in a list": "[1, 0x" + "f" * 4000 + "]",
    "in an expression": "0x" + "f" * 4000 + " + 1",
    "in a dict": "{1: 0x" + "f" * 4000 + "}",
}


@pytest.mark.parametrize("literal", HUGE_INTEGERS.values(), ids=HUGE_INTEGERS.keys())
@pytest.mark.parametrize(
    "template",
    [
        'create_agent(id="a", kind="sc", task="x", n={})',
        'create_agent("a", "sc", {})',
        "final_answer({})",
        'create_flow({}, "a")',
        'I will call create_agent(id="a", kind="sc", n={}) now.',
    ],
)
def test_integer_literals_over_4300_digits_are_diagnosed_not_raised(literal: str, template: str):
    text = template.format(literal)
    result = check(text, DoM.HIGH, builtin_catalogue())
    assert not result.valid
    assert {"syntax", "prose_call_ignored", "non_literal"} & set(_codes(result)), result.diagnostics
    _never_raises_after(result)
    parse(text)
    if result.plan is not None:
        render(result.plan, "calls")


def test_the_largest_printable_integer_is_still_a_number():
    text = 'create_agent(id="a", kind="sc", task="x", n=0x' + "f" * 3571 + ")"
    result = check(text, DoM.HIGH, builtin_catalogue())
    assert _codes(result) == ["bad_param"]  # read, then out of range
    _never_raises_after(result)


NON_FINITE = {
    "json NaN": '{"agents": [{"id": "a", "kind": "sc", "task": "x", "temperature": NaN}]}',
    "json Infinity": '[{"name": "create_agent", "arguments": {"id": "a", "kind": "sc", '
    '"temperature": Infinity}}]',
    "json -Infinity": '{"agents": [{"id": "a", "kind": "sc", "params": {"temperature": -Infinity}}]}',
    "json string args": '[{"name": "create_agent", "arguments": "{\\"id\\": \\"a\\", \\"kind\\": \\"sc\\", '
    '\\"temperature\\": NaN}"}]',
    "calls 1e999": 'create_agent(id="a", kind="sc", task="x", temperature=1e999)',
    "calls -1e999": 'create_agent(id="a", kind="sc", task="x", temperature=-1e999)',
    "xml NaN": "<agent><agent_id>a</agent_id><agent_name>SCAgent</agent_name><required_arguments>"
    "<agent_input>x</agent_input><temperature>NaN</temperature></required_arguments></agent>",
    "xml Infinity": "<agent><agent_id>a</agent_id><agent_name>SCAgent</agent_name><required_arguments>"
    "<agent_input>x</agent_input><temperature>Infinity</temperature></required_arguments></agent>",
}


@pytest.mark.parametrize("text", NON_FINITE.values(), ids=NON_FINITE.keys())
def test_nan_and_infinite_temperatures_are_invalid(text: str):
    result = check(text, DoM.HIGH, builtin_catalogue())
    assert not result.valid
    bad = [d for d in result.diagnostics if d.code == "bad_param"]
    assert len(bad) == 1 and "finite" in bad[0].message and bad[0].where == "agent:a", result.diagnostics
    _never_raises_after(result)


# The inputs of the issue, at full size: each took over 120 s (or 29 s at 200 KB) before.
ISSUE_INPUTS = {
    "1 MB of calls on one line": ("calls", SHAPES["calls: all calls on one line"][1](1_000_000)),
    "1 MB of <thinking>": ("xml", SHAPES["xml: run of <thinking>"][1](1_000_000)),
    "1 MB of <thinking> (auto)": ("auto", SHAPES["xml: run of <thinking>"][1](1_000_000)),
    "200 KB run of {": ("json", "{" * 200_000),
    "200 KB run of { (auto)": ("auto", "{" * 200_000),
    "200 KB run of <think>": ("xml", "<think>" * 30_000),
    "200 KB run of <think> as calls": ("calls", "<think>" * 30_000 + 'final_answer("4")'),
    "200 KB run of <think> as json": ("json", "<think>" * 30_000 + "[]"),
    # A few tags left open before a long text: each would rescan all of it.
    "32 open <thinking> before 1 MB": ("xml", "<thinking>" * 32 + "A" * 1_000_000),
    "blocks of 31 open <agent_id>": ("xml", ("<agent>" + "<agent_id>" * 31 + "A" * 2000 + "</agent>") * 400),
}


@pytest.mark.parametrize(("dialect", "text"), ISSUE_INPUTS.values(), ids=ISSUE_INPUTS.keys())
def test_inputs_that_hung_now_finish_quickly(dialect: str, text: str):
    result, spent = _timed(text, dialect)
    assert spent < 5, spent
    _never_raises_after(result)
    if len(text) > MAX_TEXT_CHARS:  # under the default cap it is not even read
        assert _codes(check(text, DoM.HIGH, builtin_catalogue(), dialect)) == ["plan_too_large"]  # type: ignore[arg-type]


@pytest.mark.parametrize("name", SHAPES)
def test_every_bench_shape_reads_200_kb_quickly(name: str):
    dialect, build = SHAPES[name]
    result, spent = _timed(build(200_000), dialect)
    assert spent < 3, spent  # quadratic readers took 29 s here
    _never_raises_after(result)


# --- the linear scanners agree with the patterns they replaced ----------------------------------

_OLD_THINKING = re.compile(r"<(thinking|think)>.*?</\1>", re.S | re.I)
_OLD_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_OLD_FIELDS = re.compile(
    r"<(agent_id|agent_output_id|agent_name|agent_description|required_arguments)>"
    r"([^<]*(?:<(?!/\1>)[^<]*)*)</\1>",
    re.I,
)
_OLD_ARG = re.compile(r"<([A-Za-z_][\w\-]*)>([^<]*(?:<(?!/\1>)[^<]*)*)</\1>")

tag_soup = st.lists(
    st.sampled_from(
        [
            "<thinking>", "</thinking>", "<think>", "</think>", "<THINK>", "</Think>", "<thin\u212ak>",
            "<answer>", "</answer>", "<ANSWER>", "</an\u017fwer>", "<agent_id>", "</agent_id>",
            "<AGENT_ID>", "</Agent_Id>", "<agent_name>", "</agent_name>", "<x>", "</x>", "<a-b>",
            "</a-b>", "<\u0130>", "</i>", "</\u0130>", "<", ">", "/", "a", " ", "\n", "${A}",
        ]
    ),
    max_size=40,
).map("".join)  # fmt: skip


@SETTINGS
@given(tag_soup)
def test_tag_pairs_match_the_lazy_patterns(text: str):
    assert px.strip_thinking(text) == _OLD_THINKING.sub("", text)
    assert px.blank_thinking(text) == _OLD_THINKING.sub(lambda m: "\n" * m.group().count("\n"), text)
    assert [content for _, content in px._ANSWER.items(text)] == _OLD_ANSWER.findall(text)
    assert px._ANSWER.sub(text, "") == _OLD_ANSWER.sub("", text)
    for new, old in (
        (px._THINKING, _OLD_THINKING),
        (px._ANSWER, _OLD_ANSWER),
        (px._FIELDS, _OLD_FIELDS),
        (px._ARG, _OLD_ARG),
    ):
        assert [(p.start, p.end) for p in new.scan(text)] == [m.span() for m in old.finditer(text)]
    for new, old in ((px._FIELDS, _OLD_FIELDS), (px._ARG, _OLD_ARG)):
        expected = [m.groups() for m in old.finditer(text)]
        assert new.items(text) == expected  # whichever way it takes
        assert [(p.name, text[p.content_start : p.content_end]) for p in new.scan(text)] == expected


json_soup = st.lists(
    st.sampled_from(
        [
            "{", "}", "[", "]", '"', '"k"', ":", ",", " ", "\n", "1", "-", ".", "e", "1.5e+3", "true",
            "tru", "null", "NaN", "Infinity", "-Infinity", "\\", "\\u12", "\\ud834\\udd1e", "x", "\t",
            "\x0c", "\u00a0", '"abcdefghij"', "[1, 2, 3]", '{"a": [true, null]}',
        ]
    ),
    max_size=120,
).map("".join)  # fmt: skip


def _outcome(decode, text: str, start: int):
    try:
        value, end = decode(text, start)
    except RecursionError:
        return "recursion"
    except (json.JSONDecodeError, pj._JSONError) as exc:
        return ("error", exc.msg, exc.pos)
    except ValueError:
        return "number too long"
    return ("ok", repr(value), end)


@SETTINGS
@given(json_soup)
def test_windowed_json_decoding_matches_decoding_the_whole_text(text: str):
    with mock.patch.object(pj, "_WINDOW", 40):  # small windows, so that they grow in these texts
        for start in [i for i, c in enumerate(text) if c in "[{"][:6]:
            assert _outcome(pj._decode_at, text, start) == _outcome(pj._DECODER.raw_decode, text, start)


def _old_values(text: str) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """The former JSON scan (every "{" tried, whole-text decoding): the oracle for ``_values``."""
    values: list[tuple[str, str]] = []
    diags: list[tuple[str, str, str]] = []
    pos = 0
    while (m := re.compile(r"[\[{]").search(text, pos)) is not None:
        where = f"char:{m.start()}"
        try:
            value, end = pj._DECODER.raw_decode(text, m.start())
        except (RecursionError, ValueError) as exc:
            if not isinstance(exc, json.JSONDecodeError):
                diags.append(
                    ("syntax", "a JSON value is nested too deeply or holds a number too long to read", where)
                )
                break
            if (
                exc.pos >= len(text)
                or exc.msg.startswith("Unterminated string")
                or not text[exc.pos :].strip()
            ):
                diags.append(("truncated", "the text ends inside a JSON value", where))
                break
            if m.group() == "{" and text[m.start() + 1 : exc.pos].strip() == "":
                pos = m.end()
                continue
            diags.append(
                ("syntax", f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", where)
            )
            pos = max(exc.pos, m.end())
            continue
        values.append((repr(value), where))
        pos = end
    return values, diags


@SETTINGS
@given(json_soup)
def test_json_values_match_the_former_scan(text: str):
    with mock.patch.object(pj, "_WINDOW", 40):  # small windows, so that they grow in these texts
        values, diags = pj._values(text)
    found = ([(repr(v), where) for v, where in values], [(d.code, d.message, d.where) for d in diags])
    assert found == _old_values(text)


def _old_spans(text: str) -> list[tuple[int, bool]]:
    """The former scan, which re-read each call's line from its start: the oracle for ``_spans``."""
    out: list[tuple[int, bool]] = []
    pos = 0
    while (m := pc._CALL_START.search(text, pos)) is not None:
        start = m.start(1)
        prefix = text[text.rfind("\n", 0, start) + 1 : start]
        if (start and (text[start - 1].isalnum() or text[start - 1] == "_")) or prefix.lstrip().startswith(
            "#"
        ):
            pos = m.end()
            continue
        core = prefix.strip()
        prose = bool(core) and (
            len(core) > pc._MAX_CODE_PREFIX or pc._CODE_PREFIX.match(pc._DOTTED_TAIL.sub("", prefix)) is None
        )
        fast = read_call(text, m.end() - 1)
        end = fast[2] if fast is not None else pc._closing(text, m.end() - 1)
        if end is None:
            break
        out.append((start, prose))
        pos = end
    return out


calls_soup = st.lists(
    st.sampled_from(
        [
            'create_agent(id="a", kind="cot")', 'create_flow("a", "b")', 'final_answer("x")',
            "create_agent(", "recreate_agent(", "create_agent\n(", "# ", "- ", "1. ", "x = ", "agents.",
            "await ", "`", ">>> ", " ", "\n", "word ", '"', ")", "(", "I will call ",
        ]
    ),
    max_size=30,
).map("".join)  # fmt: skip


@SETTINGS
@given(calls_soup)
def test_call_spans_match_the_former_scan(text: str):
    spans, _ = pc._spans(text, [])
    assert [(s.start, s.in_prose) for s in spans] == _old_spans(text)
