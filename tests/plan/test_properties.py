"""Property tests: rendering round-trips in every dialect; no text makes the reader raise."""

from __future__ import annotations

import json
import keyword

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from masorch.agents.signatures import builtin_catalogue
from masorch.plan import AgentSpec, DoM, Flow, Plan, check, parse, render, to_mermaid

DIALECTS = ("calls", "json", "xml")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ids = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,7}", fullmatch=True)
# Any text without "<" (the XML dialect cannot carry its own tags), stripped as the readers strip it.
texts = st.text(st.characters(blacklist_characters="<", blacklist_categories=("Cs",)), max_size=40).map(
    str.strip
)
param_names = st.from_regex(r"[a-z][a-z_]{0,7}", fullmatch=True).filter(
    lambda n: (
        not keyword.iskeyword(n)
        and n not in {"id", "kind", "task", "params", "task_only", "agent_input", "n_samples", "debate_roles"}
        and n != "vote_method"
    )
)
scalars = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
    st.none(),
    texts,
)
values = st.one_of(scalars, st.lists(st.one_of(texts, st.integers(0, 100)), max_size=3))
kinds = st.sampled_from(["cot", "sc", "debate", "reflexion", "search", "python", "planner"])


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    agent_ids = draw(st.lists(ids, max_size=6))
    agents = tuple(
        AgentSpec(
            id=i,
            kind=draw(kinds),
            task=draw(texts),
            params=draw(st.dictionaries(param_names, values, max_size=3)),
            task_only=draw(st.booleans()),
        )
        for i in agent_ids
    )
    pool = [*agent_ids, "ghost"]
    flows = tuple(
        Flow(src=s, dst=d)
        for s, d in draw(st.lists(st.tuples(st.sampled_from(pool), st.sampled_from(pool)), max_size=6))
    )
    final = draw(st.one_of(st.none(), texts))
    plan = Plan(agents=agents, flows=flows, final_answer=final)
    assume(plan.agents or plan.flows or plan.final_answer is not None)
    assume(final not in agent_ids)  # in XML an <answer> naming an agent is a pointer, not text
    return plan


@SETTINGS
@given(plans(), st.sampled_from(DIALECTS))
def test_render_then_parse_gives_the_plan_back(plan: Plan, dialect: str):
    if dialect == "xml":
        # What the XML dialect cannot say: an answer beside agents (read as a pointer and ignored,
        # as the checkpoints' reader does) and a task that is literally "" (read as empty).
        assume(not (plan.agents and plan.final_answer is not None))
        assume(all(a.task != '""' for a in plan.agents))
    text = render(plan, dialect)  # type: ignore[arg-type]
    result = parse(text, dialect)  # type: ignore[arg-type]
    assert result.plan == plan, text
    assert not any(d.is_error for d in result.diagnostics), result.diagnostics
    assert parse(text).dialect == dialect  # auto-detection recognises canonical text


@SETTINGS
@given(plans())
def test_mermaid_has_a_node_per_agent_and_an_arrow_per_flow(plan: Plan):
    chart = to_mermaid(plan)
    assert chart.startswith("flowchart TD")
    assert chart.count("-->") == len(plan.flows)


@SETTINGS
@given(st.text(max_size=400), st.sampled_from(("auto", *DIALECTS)))
def test_arbitrary_text_never_raises(text: str, dialect: str):
    result = check(text, DoM.HIGH, builtin_catalogue(), dialect)  # type: ignore[arg-type]
    assert result.valid == (result.validated is not None)
    if result.plan is None:
        assert any(d.code == "no_plan" for d in result.diagnostics)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = render(draw(plans()), draw(st.sampled_from(DIALECTS)))  # type: ignore[arg-type]
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 20)))
        op = draw(st.sampled_from(["cut", "delete", "insert", "duplicate"]))
        if op == "cut":
            text = text[:i]
        elif op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = (
                text[:i]
                + draw(st.sampled_from(['"', "'", "(", ")", "<", ">", "{", "}", "[", "\n", "\\"]))
                + text[i:]
            )
        else:
            text = text[:j] + text[i:j] + text[j:]
    return text


@SETTINGS
@given(mutated(), st.sampled_from(("auto", *DIALECTS)), st.sampled_from(list(DoM)))
def test_mutated_plans_never_raise(text: str, dialect: str, dom: DoM):
    result = check(text, dom, builtin_catalogue(), dialect)  # type: ignore[arg-type]
    for d in result.diagnostics:
        assert d.code and d.message


DEEP = "[" * 900 + "]" * 900
ADVERSARIAL = [
    "[" * 100_000,
    '{"a":' * 50_000,
    'create_agent(id="a", kind="cot", x=' + "[" * 100_000,
    'create_agent(id="a", kind="cot", x=' + "[" * 150 + "]" * 150 + ")",
    '[{"name": "create_agent", "arguments": "' + "[" * 100_000 + '"}]',
    '[{"name": "create_agent", "arguments": {"id": "a", "kind": "cot", "x": ' + DEEP + "}}]",
    "<agent><agent_id>A</agent_id><agent_name>CoTAgent</agent_name><required_arguments><x>"
    + DEEP
    + "</x></required_arguments></agent>",
    "create_agent(" * 5_000,
    "<agent>" * 5_000,
    "<from>a</from>" * 5_000,
    "create_agent(id='a', kind='cot', task='\x00')",
    "final_answer(" + "1+" * 100_000 + "1)",
    "final_answer(" + "-" * 100_000 + "1)",
    "final_answer(" + "not " * 50_000 + "x)",
    'create_agent(id="a", kind="cot", task="x"' + '+"y"' * 20_000 + ")",
    "[" + "1" * 5_000 + "]",
    '{"agents": [{"id": "a", "kind": "sc", "n": ' + "1" * 5_000 + "}]}",
    '[{"name": "create_agent", "arguments": "{\\"n\\": ' + "1" * 5_000 + '}"}]',
    'create_agent(id="a", kind="sc", n=' + "1" * 5_000 + ")",
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_deeply_nested_or_repeated_input_is_diagnosed_not_raised(text: str):
    result = check(text, DoM.HIGH, builtin_catalogue())
    assert not result.valid
    if result.plan is not None:
        json.dumps(result.plan.model_dump(mode="json"))  # what the CLI prints must serialise
