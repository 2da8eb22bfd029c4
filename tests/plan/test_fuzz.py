"""Fuzz targets, one per dialect: reading, checking and rendering any text ends in the documented
result (a ``CheckResult`` whose diagnostics carry known codes) within a deadline, never an exception.

Texts are built from each dialect's own tokens and arbitrary characters, with one drawn unit
repeated up to thousands of times, so runs of unclosed tags, brackets and calls (the shapes that
once made the readers quadratic) come up often. The fast tier runs by default (a few seconds per
dialect); the long tier (``pytest -m slow tests/plan/test_fuzz.py``) draws far more and far
longer texts with the size cap raised, so the readers themselves are stressed.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from masorch.agents.signatures import builtin_catalogue
from masorch.plan import CODES, DoM, Limits, check, compliance, parse, render, repair_message, to_mermaid

DIALECTS = ("calls", "json", "xml")
CATALOGUE = builtin_catalogue()

VOCABULARY = {
    "calls": [
        "create_agent(", "create_flow(", "final_answer(", "recreate_agent(", "id=", "kind=", "task=",
        "n=", "temperature=", "roles=", '"a"', "'b'", '"cot"', '"sc"', '"debate"', "0x" + "f" * 40,
        "1e999", "-1", "1.5", "True", "None", ", ", ")", "(", "[", "]", "{", "}", "#", "\n", " ",
        '"""', "'''", "\\", '"${a}"', "<think>", "</think>", "x = ", "- ", "agents.", "lambda: 0",
        "*", "**", "```python\n", "```",
    ],
    "json": [
        "{", "}", "[", "]", '"name"', '"arguments"', '"parameters"', '"create_agent"', '"create_flow"',
        '"final_answer"', '"agents"', '"flows"', '"edges"', '"id"', '"kind"', '"task"', '"params"',
        '"temperature"', '"n"', '"src"', '"dst"', ": ", ", ", '"a"', '"cot"', '"sc"', "NaN", "Infinity",
        "-Infinity", "1e999", "0", "12345678901234567890", "true", "null", '"\\u12"', '"\\"', "\\",
        '"{\\"id\\": \\"a\\"}"', "<tool_call>", "</tool_call>", "<think>", "</think>", "```json\n", " ",
        "\n", '"tool_calls"', '"function"', '"type"', '"text"',
    ],
    "xml": [
        "<agent>", "</agent>", "<agent_id>", "</agent_id>", "<agent_name>", "</agent_name>", "CoTAgent",
        "SCAgent", "DebateAgent", "FooAgent", "<agent_description>", "</agent_description>",
        "<required_arguments>", "</required_arguments>", "<agent_input>", "</agent_input>",
        "<agent_output_id>", "</agent_output_id>", "<edge>", "</edge>", "<from>", "</from>", "<to>",
        "</to>", "<answer>", "</answer>", "<thinking>", "</thinking>", "<think>", "</think>",
        "<THINKING>", "<debate_roles>", "</debate_roles>", '["a", "b"]', "<n_samples>", "</n_samples>",
        "<temperature>", "</temperature>", "<vote_method>", "NaN", "Infinity", "A", "B", "${A}", '""',
        " ", "\n", "<", ">", "</", "&",
    ],
}  # fmt: skip


@st.composite
def texts(draw: st.DrawFn, dialect: str, max_repeat: int) -> str:
    """A head, one unit repeated up to ``max_repeat`` times, and a tail, from the dialect's tokens."""
    fragment = st.one_of(st.sampled_from(VOCABULARY[dialect]), st.text(max_size=6))
    head = "".join(draw(st.lists(fragment, max_size=24)))
    unit = "".join(draw(st.lists(fragment, min_size=1, max_size=6)))
    tail = "".join(draw(st.lists(fragment, max_size=24)))
    return head + unit * draw(st.integers(0, max_repeat)) + tail


def _target(text: str, dialect: str, dom: DoM, limits: Limits) -> None:
    """Everything a caller does with a plan text, asserting only the documented outcomes."""
    for choice in (dialect, "auto"):
        result = check(text, dom, CATALOGUE, choice, limits)  # type: ignore[arg-type]
        assert result.valid == (result.validated is not None)
        assert all(d.code in CODES and d.message for d in result.diagnostics), result.diagnostics
        codes = {d.code for d in result.diagnostics}
        if result.plan is None:
            assert codes & {"no_plan", "plan_too_large"}, result.diagnostics
        assert 0.0 <= compliance(result.diagnostics) <= 1.0
        repair_message(result.diagnostics)
        if result.plan is None:
            continue
        json.dumps(result.plan.model_dump(mode="json"))
        to_mermaid(result.plan)
        for out in DIALECTS:
            again = parse(render(result.plan, out), out, limits.max_text_chars)  # type: ignore[arg-type]
            assert all(d.code in CODES for d in again.diagnostics)


FAST = settings(
    max_examples=200,
    deadline=timedelta(seconds=2),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LONG = settings(
    max_examples=1500,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
RAISED = Limits(max_text_chars=4_000_000)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_fuzz_fast(dialect: str):
    @FAST
    @given(texts(dialect, 1_000), st.sampled_from(list(DoM)))
    def run(text: str, dom: DoM) -> None:
        _target(text, dialect, dom, Limits())

    run()


@pytest.mark.slow
@pytest.mark.parametrize("dialect", DIALECTS)
def test_fuzz_long(dialect: str):
    @LONG
    @given(texts(dialect, 30_000), st.sampled_from(list(DoM)))
    def run(text: str, dom: DoM) -> None:
        _target(text, dialect, dom, RAISED)

    run()
