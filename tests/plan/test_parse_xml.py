"""Dialect "xml": the MAS-Orchestra tag format, read tolerantly."""

from __future__ import annotations

from masorch.plan import AgentSpec, Flow, Plan, parse
from masorch.plan.parse_xml import kind_of


def codes(result) -> list[str]:
    return [d.code for d in result.diagnostics]


def low(answer: str, agent_input: str = "", extra: str = "") -> str:
    return (
        "<thinking>delegate</thinking>\n<agent>\n<agent_name>SCAgent</agent_name>\n"
        "<agent_description>votes</agent_description>\n"
        f"<required_arguments><agent_input>{agent_input}</agent_input>{extra}</required_arguments>\n"
        "<agent_output_id>out</agent_output_id>\n</agent>\n" + answer
    )


def test_low_dom_delegation_and_the_quoted_empty_input():
    for agent_input in ("", '""', "  "):
        result = parse(low("<answer>out</answer>", agent_input))
        assert result.dialect == "xml" and result.diagnostics == ()
        assert result.plan == Plan(agents=(AgentSpec(id="out", kind="sc"),))


def test_low_dom_answer_beside_an_agent_is_ignored_like_the_checkpoints_reader():
    result = parse(low("<answer>4913</answer>"))
    assert codes(result) == ["answer_ignored"]
    assert result.plan == Plan(agents=(AgentSpec(id="out", kind="sc"),))
    missing = parse(low(""))
    assert codes(missing) == ["answer_missing"]


def test_arguments_map_to_parameters():
    extra = "<n_samples>7</n_samples><vote_method>majority</vote_method><temperature>0.3</temperature>"
    result = parse(low("<answer>out</answer>", "Sum it.", extra))
    assert codes(result) == ["ignored_argument"]
    assert result.plan is not None
    assert result.plan.agents[0].params == {"n": 7, "temperature": 0.3}
    roles = parse(low("<answer>out</answer>", "", '<debate_roles>["A", "B"]</debate_roles>'))
    assert roles.plan is not None and roles.plan.agents[0].params == {"roles": ["A", "B"]}


def test_list_arguments_read_in_either_quoting_like_the_checkpoints_reader():
    for written in (
        "['Judge', \"Critic's aide\"]",
        '["Judge", "Critic\'s aide"]',
        "('Judge', \"Critic's aide\")",
    ):
        result = parse(low("<answer>out</answer>", "", f"<debate_roles>{written}</debate_roles>"))
        assert result.plan is not None and result.plan.agents[0].params == {
            "roles": ["Judge", "Critic's aide"]
        }
    # Anything else stays text, which the validator then judges (never evaluated as code).
    for written in ("Judge, Critic", "[__import__('os')]", "{'a': 1}", "['a', f(x)]"):
        result = parse(low("<answer>out</answer>", "", f"<debate_roles>{written}</debate_roles>"))
        assert result.plan is not None and result.plan.agents[0].params == {"roles": written}


def test_a_lone_low_dom_agent_needs_no_output_id():
    text = low("<answer>calc</answer>").replace("<agent_output_id>out</agent_output_id>\n", "")
    named = parse(text)
    assert codes(named) == [] and named.plan == Plan(agents=(AgentSpec(id="calc", kind="sc"),))
    unnamed = parse(low("").replace("<agent_output_id>out</agent_output_id>\n", ""))
    assert codes(unnamed) == ["answer_missing"] and unnamed.plan == Plan(
        agents=(AgentSpec(id="agent", kind="sc"),)
    )
    # Beside another agent or an edge, a block without an id is still an error: the graph lost a node.
    block = "<agent><agent_name>CoTAgent</agent_name></agent>"
    two = parse(block + "<agent><agent_id>B</agent_id><agent_name>CoTAgent</agent_name></agent>")
    assert codes(two) == ["missing_tag"]
    edged = parse(block + "<edge><from>X</from><to>Y</to></edge>")
    assert codes(edged) == ["missing_tag"]


def test_agent_names_map_to_kinds():
    assert [
        kind_of(n) for n in ("CoTAgent", "scagent", "WebSearchAgent", "ReflexionAgent", "PlannerAgent")
    ] == [
        "cot",
        "sc",
        "search",
        "reflexion",
        "planner",
    ]


def test_missing_tags_and_unclosed_blocks():
    text = (
        "<agent><agent_name>CoTAgent</agent_name><required_arguments><agent_input>x</agent_input>"
        "</required_arguments></agent>\n"
        "<agent><agent_id>B</agent_id><agent_name>CoTAgent</agent_name>\n"
        "<agent><agent_id>C</agent_id><agent_name>CoTAgent</agent_name>"
        "<required_arguments><agent_input>${B}</agent_input></required_arguments>\n"
        "<edge><from>B</from><to>C</to></edge>"
    )
    result = parse(text)
    assert codes(result) == ["missing_tag", "missing_tag", "missing_tag"]
    assert result.plan is not None
    assert [a.id for a in result.plan.agents] == ["B", "C"]
    assert result.plan.flows == (Flow(src="B", dst="C"),)


def test_edges_pair_by_structure():
    text = (
        "<agent><agent_id>A</agent_id><agent_name>CoTAgent</agent_name></agent>"
        "<edge><to>X</to><from>A</from><to>B</to><from>B</from><from>C</from><to>D</to><from>E</from></edge>"
    )
    result = parse(text)
    assert result.plan is not None
    assert result.plan.flows == (Flow(src="A", dst="B"), Flow(src="C", dst="D"))
    assert [(d.code, d.where) for d in result.diagnostics] == [
        ("unpaired_edge", "xml:edge-tag#1"),
        ("unpaired_edge", "xml:edge-tag#4"),
        ("unpaired_edge", "xml:edge-tag#7"),
    ]


def test_truncation_is_reported():
    assert codes(parse("<thinking>I will delegate to")) == ["truncated", "no_plan"]
    cut = parse(low("<answer>out</answer>")[:120])
    assert "truncated" in codes(cut)
    partial_tag = parse("<agent><agent_id>A</agent_id><agent_name>CoTAgent</agent_name></agent><ed")
    assert codes(partial_tag) == ["truncated"]


def test_forgotten_closing_thinking_tag_keeps_the_plan():
    text = (
        "<thinking>one agent will do\n<agent><agent_id>A</agent_id><agent_name>CoTAgent</agent_name></agent>"
    )
    result = parse(text)
    assert result.diagnostics == ()
    assert result.plan == Plan(agents=(AgentSpec(id="A", kind="cot"),))
