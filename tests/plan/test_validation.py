"""Validation: every rule, all problems at once, and the ValidatedPlan it produces."""

from __future__ import annotations

import pytest

from masorch.plan import AgentSpec, DoM, Flow, Limits, Plan, check, validate


def agent(agent_id: str, kind: str = "cot", task: str = "do it", **params) -> AgentSpec:
    return AgentSpec(id=agent_id, kind=kind, task=task, params=params)


def codes(result) -> list[str]:
    return [d.code for d in result.diagnostics]


def test_valid_dag_gets_order_parents_and_sink(catalogue):
    plan = Plan(
        agents=(
            agent("final", task="merge ${left} and ${right}"),
            agent("left", "search"),
            agent("right", "sc", n=3),
            agent("root"),
        ),
        flows=(
            Flow(src="root", dst="left"),
            Flow(src="root", dst="right"),
            Flow(src="left", dst="final"),
            Flow(src="right", dst="final"),
        ),
    )
    result = validate(plan, DoM.HIGH, catalogue)
    assert result.valid and result.diagnostics == ()
    v = result.validated
    assert v is not None
    assert v.order == ("root", "left", "right", "final")
    assert v.parents == {"final": ("left", "right"), "left": ("root",), "right": ("root",), "root": ()}
    assert v.sink == "final"
    assert v.plan.agents[2].params == {"n": 3}  # params kept as written; defaults are the executor's job


def test_direct_answer_is_valid_at_low_and_not_at_high(catalogue):
    plan = Plan(final_answer="1073")
    low = validate(plan, DoM.LOW, catalogue)
    assert low.valid and low.validated is not None and low.validated.sink is None
    assert low.validated.order == ()
    assert codes(validate(plan, DoM.HIGH, catalogue)) == ["dom_direct_answer"]
    assert validate(plan, DoM.HIGH, catalogue, Limits(direct_answer_in_high=True)).valid


def test_low_dom_allows_one_agent_and_no_flows(catalogue):
    one = Plan(agents=(agent("a", task=""),))
    assert validate(one, DoM.LOW, catalogue).valid
    two = Plan(agents=(agent("a"), agent("b", task="${a}")), flows=(Flow(src="a", dst="b"),))
    assert codes(validate(two, DoM.LOW, catalogue)) == ["dom_agents", "dom_flows"]
    assert validate(two, DoM.HIGH, catalogue).valid


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        (Plan(), ["empty_plan"]),
        (Plan(agents=(agent("a"),), final_answer="4"), ["answer_with_agents"]),
        (Plan(final_answer=""), ["empty_answer", "dom_direct_answer"]),
        (Plan(agents=(agent("1a"),)), ["bad_id"]),
        (Plan(agents=(agent("a"), agent("a"))), ["duplicate_id"]),
        (Plan(agents=(agent("a", "cott"),)), ["unknown_kind"]),
        (Plan(agents=(agent("a", "sc", samples=3),)), ["unknown_param"]),
        (Plan(agents=(agent("a", "sc", n=0),)), ["bad_param"]),
        (Plan(agents=(agent("a", "debate", roles=["one"]),)), ["bad_param"]),
        (  # each role goes into every speaker's prompt
            Plan(agents=(agent("a", "debate", roles=["one", "x" * 200_001]),)),
            ["bad_param"],
        ),
        (Plan(agents=(agent("a"),), flows=(Flow(src="a", dst="zz"),)), ["dangling_flow"]),
        (Plan(agents=(agent("a"),), flows=(Flow(src="a", dst="a"),)), ["self_loop"]),
        (
            Plan(agents=(agent("a"), agent("b")), flows=(Flow(src="a", dst="b"), Flow(src="a", dst="b"))),
            ["duplicate_flow"],
        ),
        (Plan(agents=(agent("a", task="use ${zz}"),)), ["unknown_ref"]),
        (Plan(agents=(agent("a", task="use ${a}"),)), ["self_ref"]),
        (  # not a reference: it stayed as text, and the pruning warning hid why
            Plan(agents=(agent("a"), agent("b", task="use ${a.result}")), flows=(Flow(src="a", dst="b"),)),
            ["bad_ref_field"],
        ),
        (Plan(agents=(agent("a"), agent("b", task="use ${a}"))), ["implied_flow"]),
        (  # a flow implied against a declared one closes a cycle: still an error
            Plan(agents=(agent("a"), agent("b", task="use ${a}")), flows=(Flow(src="b", dst="a"),)),
            ["implied_flow", "cycle"],
        ),
        (
            Plan(agents=(agent("a"), agent("b", task="")), flows=(Flow(src="a", dst="b"),)),
            ["empty_task"],
        ),
        (  # the task alone, and no task: nothing to solve
            Plan(agents=(AgentSpec(id="a", kind="cot", task="", task_only=True),)),
            ["empty_task_alone"],
        ),
        (Plan(agents=(AgentSpec(id="a", kind="cot", task="Add 2 and 3.", task_only=True),)), []),
    ],
)
def test_each_rule(catalogue, plan, expected):
    assert codes(validate(plan, DoM.HIGH, catalogue)) == expected


def test_a_reference_implies_its_flow_and_the_executor_gets_it(catalogue):
    plan = Plan(
        agents=(agent("a"), agent("b"), agent("c", task="join ${a} and ${b}")),
        flows=(Flow(src="b", dst="c"),),
    )
    result = validate(plan, DoM.HIGH, catalogue)
    assert result.valid and codes(result) == ["implied_flow"]
    (info,) = result.diagnostics
    assert info.severity.value == "info" and info.where == "agent:c" and "a -> c" in info.message
    assert result.plan == plan  # the plan as written
    validated = result.validated
    assert validated is not None and validated.sink == "c"
    assert validated.plan.flows == (Flow(src="b", dst="c"), Flow(src="a", dst="c"))
    assert validated.parents["c"] == ("b", "a")
    # At DoM low the one agent cannot refer to another: that is an unknown reference.
    low = validate(Plan(agents=(agent("a", task="use ${b}"),)), DoM.LOW, catalogue)
    assert codes(low) == ["unknown_ref"]


def test_cycle_is_named(catalogue):
    plan = Plan(
        agents=(agent("a"), agent("b"), agent("c"), agent("d")),
        flows=(
            Flow(src="a", dst="b"),
            Flow(src="b", dst="c"),
            Flow(src="c", dst="a"),
            Flow(src="c", dst="d"),
        ),
    )
    result = validate(plan, DoM.HIGH, catalogue)
    assert codes(result) == ["cycle"]
    assert "a -> b -> c -> a" in result.diagnostics[0].message
    assert result.diagnostics[0].where == "cycle:a->b->c->a"


def test_several_sinks_and_unreachable_nodes(catalogue):
    plan = Plan(
        agents=(agent("a"), agent("b"), agent("c"), agent("lonely")),
        flows=(Flow(src="a", dst="b"), Flow(src="b", dst="c")),
    )
    result = validate(plan, DoM.HIGH, catalogue)
    assert codes(result) == ["multiple_sinks", "unreachable"]
    assert result.diagnostics[1].where == "agent:lonely"
    assert "'c'" in result.diagnostics[0].hint


def test_prune_unused_leaves_out_agents_that_never_reach_the_last_one(catalogue):
    plan = Plan(
        agents=(
            agent("a"),
            agent("lonely"),
            agent("b"),
            agent("c"),
            agent("final", task="Use ${a} and ${c}."),
        ),
        flows=(Flow(src="b", dst="c"), Flow(src="lonely", dst="b")),
    )
    result = validate(plan, DoM.HIGH, catalogue, Limits(prune_unused=True))
    assert result.validated is not None
    assert [a.id for a in result.validated.plan.agents] == ["a", "lonely", "b", "c", "final"]  # all used
    loose = Plan(
        agents=(agent("a"), agent("x"), agent("y"), agent("final", task="Use ${a}.")),
        flows=(Flow(src="x", dst="y"),),
    )
    pruned = validate(loose, DoM.HIGH, catalogue, Limits(prune_unused=True))
    assert [(d.code, d.where) for d in pruned.diagnostics if d.code == "pruned_agent"] == [
        ("pruned_agent", "agent:x"),
        ("pruned_agent", "agent:y"),
    ]
    assert pruned.validated is not None and pruned.validated.sink == "final"
    assert [a.id for a in pruned.validated.plan.agents] == [
        "a",
        "final",
    ] and pruned.validated.plan.flows == (Flow(src="a", dst="final"),)
    assert pruned.validated.order == ("a", "final") and dict(pruned.validated.parents) == {
        "a": (),
        "final": ("a",),
    }
    # the last agent has an outgoing flow: no final agent to prune towards, the sink rules apply
    backwards = Plan(agents=(agent("a"), agent("b"), agent("c")), flows=(Flow(src="c", dst="a"),))
    assert codes(validate(backwards, DoM.HIGH, catalogue, Limits(prune_unused=True))) == [
        "multiple_sinks",
        "unreachable",
    ]
    strict = [d.code for d in validate(loose, DoM.HIGH, catalogue).diagnostics if d.is_error]
    assert strict == ["multiple_sinks", "unreachable", "unreachable"]


def test_limits(catalogue):
    many = Plan(
        agents=tuple(agent(f"a{i}") for i in range(3)),
        flows=(Flow(src="a0", dst="a2"), Flow(src="a1", dst="a2")),
    )
    assert codes(validate(many, DoM.HIGH, catalogue, Limits(max_agents=2))) == ["too_many_agents"]
    assert codes(validate(many, DoM.HIGH, catalogue, Limits(max_flows=1))) == ["too_many_flows"]
    long_task = Plan(agents=(agent("a", task="x" * 50),))
    assert codes(validate(long_task, DoM.HIGH, catalogue, Limits(max_task_chars=49))) == ["task_too_long"]


def test_all_problems_at_once(catalogue):
    plan = Plan(
        agents=(agent("a", "cotx"), agent("b", "sc", n=99, task="${nope}"), agent("b")),
        flows=(Flow(src="a", dst="ghost"),),
    )
    result = validate(plan, DoM.LOW, catalogue)
    assert codes(result) == [
        "dom_agents",
        "dom_flows",
        "unknown_kind",
        "bad_param",
        "duplicate_id",
        "dangling_flow",
        "unknown_ref",
    ]
    assert not result.valid and result.validated is None
    assert all(d.hint for d in result.diagnostics)
    # at DoM high the same plan also breaks the sink rules
    assert codes(validate(plan, DoM.HIGH, catalogue))[-2:] == ["multiple_sinks", "unreachable"]


def test_check_combines_parse_and_validation(catalogue):
    result = check('create_agent(id="a", kind="nope", task=x)', DoM.HIGH, catalogue)
    assert [d.code for d in result.diagnostics] == ["non_literal", "unknown_kind"]
    assert not result.valid and result.validated is None
    assert result.dialect == "calls"
    ok = check('final_answer("4")', DoM.LOW, catalogue)
    assert ok.valid and ok.validated is not None and ok.plan == Plan(final_answer="4")
    nothing = check("no plan here", DoM.LOW, catalogue)
    assert not nothing.valid and nothing.validation is None and nothing.dialect is None


@pytest.mark.parametrize(
    "text",
    [
        'create_agent(id="a", kind="cot", task="Add 2 and 3.", task_only=True)',
        '{"agents": [{"id": "a", "kind": "cot", "task": "Add 2 and 3.", "task_only": true}]}',
        '[{"name": "create_agent", "arguments": {"id": "a", "kind": "cot", "task": "Add 2 and 3.", '
        '"task_only": true}}]',
        "<agent><agent_name>CoTAgent</agent_name><required_arguments><agent_input>Add 2 and 3."
        "</agent_input><task_only>true</task_only></required_arguments>"
        "<agent_output_id>a</agent_output_id></agent><answer>a</answer>",
    ],
)
def test_task_only_is_read_in_every_dialect_and_is_not_a_kind_parameter(catalogue, text):
    result = check(text, DoM.LOW, catalogue)
    assert result.valid, result.diagnostics
    assert result.plan is not None and result.plan.agents[0].task_only
    assert result.plan.agents[0].params == {}


@pytest.mark.parametrize("value", ['"yes"', "1", "[True]"])
def test_task_only_must_be_a_boolean(catalogue, value):
    result = check(
        f'create_agent(id="a", kind="cot", task="Add 2 and 3.", task_only={value})', DoM.LOW, catalogue
    )
    assert [d.code for d in result.diagnostics] == ["bad_argument"]
    assert "task_only must be True or False" in result.diagnostics[0].message
