"""Dialect "json": tool calls in every common wrapping, or one plan object."""

from __future__ import annotations

import json

from masorch.plan import AgentSpec, Flow, Plan, parse

EXPECTED = Plan(
    agents=(
        AgentSpec(id="a", kind="search", task="find it"),
        AgentSpec(id="b", kind="sc", task="use ${a}", params={"n": 3}),
    ),
    flows=(Flow(src="a", dst="b"),),
)
CALLS = [
    ("create_agent", {"id": "a", "kind": "search", "task": "find it"}),
    ("create_agent", {"id": "b", "kind": "sc", "task": "use ${a}", "n": 3}),
    ("create_flow", {"src": "a", "dst": "b"}),
]


def test_tool_call_list_with_object_arguments():
    text = json.dumps([{"name": n, "arguments": a} for n, a in CALLS])
    result = parse(text)
    assert result.dialect == "json" and result.diagnostics == ()
    assert result.plan == EXPECTED


def test_openai_function_wrapping_with_string_arguments():
    text = json.dumps(
        [
            {"type": "function", "id": f"call_{i}", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(CALLS)
        ]
    )
    assert parse(text).plan == EXPECTED


def test_message_with_tool_calls_and_hermes_tags():
    message = {
        "role": "assistant",
        "tool_calls": [{"function": {"name": n, "arguments": a}} for n, a in CALLS],
    }
    assert parse(json.dumps(message), "json").plan == EXPECTED
    tagged = "\n".join(
        f"<tool_call>\n{json.dumps({'name': n, 'arguments': a})}\n</tool_call>" for n, a in CALLS
    )
    result = parse("Let me plan.\n" + tagged)
    assert result.dialect == "json"
    assert result.plan == EXPECTED


def test_plan_object_with_nested_params_and_pair_flows():
    obj = {
        "agents": [
            {"id": "a", "kind": "search", "task": "find it"},
            {"id": "b", "kind": "sc", "task": "use ${a}", "params": {"n": 3}},
        ],
        "flows": [["a", "b"]],
    }
    assert parse("```json\n" + json.dumps(obj, indent=2) + "\n```").plan == EXPECTED


def test_direct_answer_object():
    result = parse('{"final_answer": "1073"}')
    assert result.plan == Plan(final_answer="1073")


def test_truncated_json_is_a_diagnostic():
    text = json.dumps([{"name": n, "arguments": a} for n, a in CALLS])[:-30]
    result = parse(text, "json")
    assert result.plan is None
    assert [d.code for d in result.diagnostics] == ["truncated", "no_plan"]


def test_bad_argument_string_is_a_diagnostic():
    result = parse('[{"name": "create_agent", "arguments": "{not json"}]', "json")
    assert [d.code for d in result.diagnostics] == ["syntax"]
    assert result.plan == Plan()


def test_a_malformed_item_in_a_tool_call_list_is_reported_not_fatal():
    items = [{"name": n, "arguments": a} for n, a in CALLS]
    items.insert(1, {"nam": "create_flow", "arguments": {}})
    result = parse(json.dumps(items), "json")
    assert [(d.code, d.where) for d in result.diagnostics] == [("syntax", "char:0/1")]
    assert result.plan == EXPECTED


def test_json_drafted_in_think_blocks_does_not_count():
    draft = json.dumps([{"name": "create_agent", "arguments": {"id": "draft", "kind": "cot"}}])
    final = json.dumps([{"name": n, "arguments": a} for n, a in CALLS])
    result = parse(f"<think>\n{draft}\n</think>\n{final}", "json")
    assert result.diagnostics == ()
    assert result.plan == EXPECTED
