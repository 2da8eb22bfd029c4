"""Dialect "calls": literal-only ast reading, tolerant of prose and fences."""

from __future__ import annotations

from masorch.plan import AgentSpec, Flow, Plan, parse


def codes(result) -> list[str]:
    return [d.code for d in result.diagnostics]


def test_design_example_reads_as_plan():
    text = (
        'create_agent(id="facts", kind="search", task="Find the founding year of X.")\n'
        'create_agent(id="calc", kind="sc", task="Using ${facts}, compute the age of X in 2024.", n=5)\n'
        'create_flow("facts", "calc")\n'
    )
    result = parse(text, "calls")
    assert result.dialect == "calls"
    assert result.diagnostics == ()
    assert result.plan == Plan(
        agents=(
            AgentSpec(id="facts", kind="search", task="Find the founding year of X."),
            AgentSpec(
                id="calc", kind="sc", task="Using ${facts}, compute the age of X in 2024.", params={"n": 5}
            ),
        ),
        flows=(Flow(src="facts", dst="calc"),),
    )


def test_prose_and_fences_around_calls_are_tolerated():
    text = """I think two agents are needed. I'll call create_agent for each one.

```python
# first the search
create_agent(id="a", kind="search", task="look (up) \\"it\\"")  # trailing comment
create_agent(
    id="b",
    kind="debate",
    task='''Use ${a}.
Then decide.''',
    roles=("x", "y"),
)
create_flow(src="a", dst="b")
```
That is the plan."""
    result = parse(text)
    assert result.dialect == "calls"
    assert result.diagnostics == ()
    assert result.plan is not None
    assert [a.id for a in result.plan.agents] == ["a", "b"]
    assert result.plan.agents[0].task == 'look (up) "it"'
    assert result.plan.agents[1].params == {"roles": ["x", "y"]}
    assert result.plan.agents[1].task == "Use ${a}.\nThen decide."


def test_positional_agent_arguments_and_numbers_as_answers():
    result = parse('create_agent("a", "cot", "Solve it")\nfinal_answer(42)')
    assert result.plan is not None
    assert result.plan.agents == (AgentSpec(id="a", kind="cot", task="Solve it"),)
    assert result.plan.final_answer == "42"


def test_code_is_never_evaluated():
    text = 'create_agent(id="a", kind="cot", task=open("/etc/passwd").read())\nfinal_answer(1 + 1)'
    result = parse(text, "calls")
    assert codes(result) == ["non_literal", "non_literal"]
    assert result.plan is not None
    assert result.plan.final_answer is None


def test_truncated_call_is_a_diagnostic():
    result = parse('create_agent(id="a", kind="cot", task="Solve the', "calls")
    assert codes(result) == ["truncated"]
    assert result.plan == Plan()


def test_unreadable_call_on_its_own_line_is_an_error():
    result = parse('create_agent(id="a" kind="cot")', "calls")
    assert codes(result) == ["syntax"]


def test_a_keyword_given_twice_is_an_error_not_the_last_value():
    result = parse('create_agent(id="a", id="b", kind="cot", task="t")', "calls")
    assert codes(result) == ["syntax"]
    assert "id= is given twice" in result.diagnostics[0].message


def test_unreadable_call_in_prose_is_only_a_warning():
    text = 'Then I use create_agent(...) for each step.\ncreate_agent(id="a", kind="cot", task="t")'
    result = parse(text, "calls")
    assert codes(result) == ["prose_call_ignored"]
    assert result.plan is not None and [a.id for a in result.plan.agents] == ["a"]


def test_argument_problems_are_reported():
    text = (
        'create_agent(kind="cot")\n'
        'create_agent(id=3, kind="cot")\n'
        'create_agent("a", "cot", "t", "extra")\n'
        'create_agent(id="b", kind="cot", meta={"x": 1})\n'
        'create_flow("a")\n'
        'final_answer("x")\nfinal_answer("y")\n'
        'create_agnet(id="c", kind="cot")\n'
    )
    result = parse(text, "calls")
    assert codes(result) == [
        "bad_argument",
        "bad_argument",
        "bad_argument",
        "bad_argument",
        "bad_argument",
        "multiple_answers",
        "unknown_call",
    ]
    assert result.plan is not None
    assert result.plan.final_answer == "x"
    assert result.plan.agents == (AgentSpec(id="b", kind="cot"),)


def test_no_calls_means_no_plan():
    result = parse("I would simply answer 4.", "calls")
    assert result.plan is None
    assert codes(result) == ["no_plan"]


def test_dialect_detection_follows_the_structure_that_starts_first():
    from masorch.plan import detect_dialect

    calls_quoting_tags = 'create_agent(id="a", kind="cot", task="Reply inside <answer></answer> tags.")'
    assert detect_dialect(calls_quoting_tags) == "calls"
    xml_quoting_calls = (
        "<thinking>I could write create_agent(id=...) but the tags are needed.</thinking>\n"
        "<answer>12</answer>"
    )
    assert detect_dialect(xml_quoting_calls) == "xml"
    assert parse(xml_quoting_calls).plan == Plan(final_answer="12")
    json_quoting_tags = (
        '[{"name": "create_agent", "arguments": {"id": "a", "kind": "cot", "task": "<answer>"}}]'
    )
    assert detect_dialect(json_quoting_tags) == "json"
    assert detect_dialect("<think>plan</think>\ncreate_agent(id='a', kind='cot')") == "calls"
    assert detect_dialect("nothing here") is None


def test_narrated_and_commented_calls_do_not_count_twice():
    text = (
        'First I thought of create_agent(id="a", kind="cot", task="t") but let me write it out.\n'
        '# create_agent(id="old", kind="cot", task="dropped")\n'
        'create_agent(id="a", kind="cot", task="t")\n'
    )
    result = parse(text, "calls")
    assert [(d.code, d.where) for d in result.diagnostics] == [("prose_call_ignored", "line:1")]
    assert result.plan == Plan(agents=(AgentSpec(id="a", kind="cot", task="t"),))


def test_calls_drafted_in_think_blocks_do_not_count():
    text = (
        '<think>\nmaybe create_agent(id="draft", kind="cot", task="x")\n</think>\n'
        'create_agent(id="a", kind="cot", task="t")\nfinal_answer("no")'
    )
    result = parse(text)
    assert result.dialect == "calls"
    assert result.plan is not None and [a.id for a in result.plan.agents] == ["a"]
    assert [(d.code, d.where) for d in result.diagnostics] == []
    only_inside = parse('<think>\ncreate_agent(id="a", kind="cot", task="t")\n</think>', "calls")
    assert only_inside.plan is not None and [a.id for a in only_inside.plan.agents] == ["a"]
