"""The holistic pipeline with a scripted orchestrator: dialects, invalid plans, repair, final answers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from masorch.agents.base import AgentRegistry
from masorch.agents.cot import CotAgent
from masorch.agents.sc import SelfConsistencyAgent
from masorch.agents.signatures import builtin_catalogue
from masorch.backends.base import Completion, ToolCall
from masorch.backends.scripted import ScriptedBackend
from masorch.errors import BackendError
from masorch.plan import DoM
from masorch.run.budget import Budget
from masorch.run.executor import RoleBackends
from masorch.run.orchestrate import OrchestrateOptions, orchestrate, orchestrator_messages, plan_json_schema
from masorch.trace.writer import MemoryTrace

SNAPSHOTS = Path(__file__).parent / "snapshots"

CALLS_PLAN = """create_agent(id="leap", kind="cot", task="Which years are leap years?")
create_agent(id="count", kind="sc", task="Leap years: ${leap}. Add up the days.", n=3)
create_flow("leap", "count")"""

JSON_PLAN = json.dumps(
    {
        "agents": [
            {"id": "leap", "kind": "cot", "task": "Which years are leap years?", "params": {}},
            {
                "id": "count",
                "kind": "sc",
                "task": "Leap years: ${leap}. Add up the days.",
                "params": {"n": 3},
            },
        ],
        "flows": [{"src": "leap", "dst": "count"}],
        "final_answer": None,
    }
)

XML_PLAN = """<thinking>two steps</thinking>
<agent><agent_id>LEAP</agent_id><agent_name>CoTAgent</agent_name><agent_description>d</agent_description>
<required_arguments><agent_input>Which years are leap years?</agent_input></required_arguments></agent>
<agent><agent_id>COUNT</agent_id><agent_name>SCAgent</agent_name><agent_description>d</agent_description>
<required_arguments><agent_input>Leap years: ${LEAP}. Add up the days.</agent_input>
<n_samples>3</n_samples></required_arguments></agent>
<edge><from>LEAP</from><to>COUNT</to></edge>"""


def agents() -> AgentRegistry:
    return AgentRegistry([CotAgent(max_tokens=64), SelfConsistencyAgent(max_tokens=64)])


def subagent_backend() -> ScriptedBackend:
    def reply(messages, config):
        prompt = messages[-1].content
        return "1900 is not a leap year. \\boxed{none}" if "leap years?" in prompt else "\\boxed{1460}"

    return ScriptedBackend(reply, name="sub")


async def go(orchestrator_replies, dialect="calls", dom=DoM.HIGH, **kw):
    trace = MemoryTrace()
    sub = subagent_backend()
    orch = ScriptedBackend(orchestrator_replies, name="orch")
    result = await orchestrate(
        "How many days are there in 1900-1903?",
        orchestrator=orch,
        backends=RoleBackends(sub),
        agents=agents(),
        options=OrchestrateOptions(dom=dom, dialect=dialect, **kw),
        trace=trace,
    )
    return result, trace, orch, sub


@pytest.mark.parametrize(("dialect", "text"), [("calls", CALLS_PLAN), ("json", JSON_PLAN), ("xml", XML_PLAN)])
async def test_each_dialect_plans_and_runs(dialect, text):
    result, trace, orch, sub = await go([text], dialect)
    assert result.status == "ok", result.error
    assert result.answer == "1460"
    assert len(result.plan.agents) == 2
    assert result.usage.calls == 1 + 1 + 3  # orchestrator, cot, sc with n=3
    assert result.ledger.for_role("orchestrator").calls == 1
    count_prompt = next(m for m, _ in sub.calls if "Add up the days" in m[-1].content)[-1].content
    assert "Leap years: none." in count_prompt  # the upstream answer, substituted
    types = [e.type for e in trace.events]
    assert types[:3] == ["run_started", "llm_call", "plan_parsed"] and types[-1] == "run_finished"
    config = orch.calls[0][1]
    assert (config.json_schema is not None) == (dialect == "json")
    assert (config.grammar is not None) == (dialect != "json")


@pytest.mark.parametrize("dialect", ["calls", "xml"])
async def test_native_tool_calls_are_read_as_the_json_dialect(dialect):
    # A tool-calling server returns the plan as tool_calls with no text, whatever dialect was asked.
    calls = (
        ToolCall(
            "create_agent", json.dumps({"id": "leap", "kind": "cot", "task": "Which years are leap years?"})
        ),
        ToolCall(
            "create_agent",
            json.dumps(
                {"id": "count", "kind": "sc", "task": "Leap years: ${leap}. Add up the days.", "n": 3}
            ),
        ),
        ToolCall("create_flow", json.dumps({"src": "leap", "dst": "count"})),
    )
    result, trace, _orch, _sub = await go([Completion("", tool_calls=calls)], dialect)
    assert result.status == "ok", [d.code for d in result.diagnostics]
    assert result.answer == "1460" and len(result.plan.agents) == 2
    parsed = next(e for e in trace.events if e.type == "plan_parsed")
    assert parsed.dialect == "json" and '"create_flow"' in parsed.text


async def test_bad_native_tool_call_arguments_are_diagnostics_not_no_plan():
    bad = Completion("", tool_calls=(ToolCall("create_agent", "{not json"),))
    result, _trace, _orch, sub = await go([bad])
    assert result.status == "invalid_plan" and sub.calls == []
    codes = [d.code for d in result.diagnostics]
    assert "no_plan" not in codes and "syntax" in codes, codes


@pytest.mark.parametrize("dialect", ["calls", "json", "xml"])
async def test_the_constraint_follows_the_offered_catalogue_and_can_be_turned_off(dialect):
    _, _, orch, _ = await go([CALLS_PLAN if dialect == "calls" else JSON_PLAN], dialect)
    config = orch.calls[0][1]
    constraint = config.grammar if dialect != "json" else json.dumps(config.json_schema)
    # Only the kinds this run's registry offers (cot and sc here) can be written.
    assert "cot" in constraint and "sc" in constraint and "debate" not in constraint
    assert "search" not in constraint and "python" not in constraint
    _, _, free, _ = await go([CALLS_PLAN], dialect, constrain=False)
    assert free.calls[0][1].grammar is None and free.calls[0][1].json_schema is None


async def test_a_reference_without_a_flow_runs_its_implied_flow():
    implied = CALLS_PLAN.replace('\ncreate_flow("leap", "count")', "")
    result, trace, _orch, sub = await go([implied])
    assert result.status == "ok" and result.answer == "1460"
    assert [d.code for d in result.diagnostics] == ["implied_flow"]
    assert [(f.src, f.dst) for f in result.plan.flows] == [("leap", "count")]
    count_prompt = next(m for m, _ in sub.calls if "Add up the days" in m[-1].content)[-1].content
    assert "Leap years: none." in count_prompt
    parsed = next(e for e in trace.events if e.type == "plan_parsed")
    assert parsed.plan["flows"] == [{"src": "leap", "dst": "count"}]


async def test_rejected_plan_ends_with_invalid_plan_and_its_diagnostics():
    bad = 'create_agent(id="a", kind="nosuch", task="x")'
    result, trace, _orch, sub = await go([bad])
    assert result.status == "invalid_plan"
    assert result.answer == "" and sub.calls == []
    assert any(d.code == "unknown_kind" for d in result.diagnostics), [d.code for d in result.diagnostics]
    rejected = [e for e in trace.events if e.type == "plan_rejected"]
    assert len(rejected) == 1 and rejected[0].diagnostics
    assert trace.events[-1].status == "invalid_plan"


async def test_repair_sends_the_diagnostics_back_and_runs_the_fixed_plan():
    bad = 'create_agent(id="a", kind="nosuch", task="x")'
    result, trace, orch, _sub = await go([bad, CALLS_PLAN], repair=1)
    assert result.status == "ok" and result.answer == "1460"
    second = orch.calls[1][0]
    assert second[-2].role == "assistant" and second[-2].content == bad
    assert "nosuch" in second[-1].content and "unknown_kind" in second[-1].content
    assert [e.type for e in trace.events].count("plan_rejected") == 1
    assert result.ledger.for_role("orchestrator").calls == 2


async def test_repair_is_bounded():
    bad = 'create_agent(id="a", kind="nosuch", task="x")'
    result, _, orch, _ = await go([bad, bad, bad, CALLS_PLAN], repair=2)
    assert result.status == "invalid_plan" and len(orch.calls) == 3


async def test_low_dom_direct_final_answer_runs_no_sub_agent():
    result, _, _, sub = await go(['final_answer("1460")'], dom=DoM.LOW)
    assert (result.status, result.answer) == ("ok", "1460")
    assert sub.calls == [] and result.usage.calls == 1


async def test_low_dom_rejects_a_graph():
    result, *_ = await go([CALLS_PLAN], dom=DoM.LOW)
    assert result.status == "invalid_plan"


async def test_low_dom_xml_delegation_with_an_empty_task_means_the_question():
    text = (
        "<thinking>one agent</thinking><agent><agent_name>CoTAgent</agent_name>"
        "<agent_description>d</agent_description><required_arguments><agent_input></agent_input>"
        "</required_arguments><agent_output_id>solve</agent_output_id></agent><answer>solve</answer>"
    )
    result, _, _, sub = await go([text], "xml", DoM.LOW)
    assert result.status == "ok" and result.answer == "1460"
    assert "How many days are there in 1900-1903?" in sub.calls[0][0][-1].content


async def test_orchestrator_failure_and_budget_are_run_statuses():
    result, *_ = await go([BackendError("connection refused")])
    assert result.status == "error" and "connection refused" in result.error
    result, *_ = await go([CALLS_PLAN], budget=Budget(max_calls=2))
    assert result.status == "budget"
    assert result.node_results["count"].status.value == "budget"
    result, *_ = await go([CALLS_PLAN], budget=Budget(max_calls=0))
    assert result.status == "budget" and result.usage.calls == 0


async def test_a_timeout_raised_by_the_orchestrator_backend_is_an_error_not_the_deadline():
    # Without a deadline the message's f"{None:g}" crashed the run; with one it blamed the deadline.
    for timeout_s in (None, 600.0):
        result, *_ = await go([TimeoutError("read timed out")], timeout_s=timeout_s)
        assert result.status == "error" and "the model request timed out" in result.error


def test_plan_json_schema_is_bounded_and_encodes_the_dom():
    limits = OrchestrateOptions().limits
    high = plan_json_schema(builtin_catalogue(), DoM.HIGH, limits)["properties"]
    assert (high["agents"]["minItems"], high["agents"]["maxItems"]) == (1, 10)
    per_kind = {a["properties"]["kind"]["const"]: a for a in high["agents"]["items"]["anyOf"]}
    assert list(per_kind) == list(builtin_catalogue())
    assert all(a["properties"]["task"]["maxLength"] <= 2000 for a in per_kind.values())  # llama.cpp's limit
    # Each kind takes only its own parameters, within their ranges.
    sc_params = per_kind["sc"]["properties"]["params"]
    assert set(sc_params["properties"]) == {"n", "temperature"} and not sc_params["additionalProperties"]
    assert (sc_params["properties"]["n"]["minimum"], sc_params["properties"]["n"]["maximum"]) == (1, 16)
    roles = per_kind["debate"]["properties"]["params"]["properties"]["roles"]
    assert (roles["minItems"], roles["maxItems"]) == (2, 5)
    assert "pattern" in high["flows"]["items"]["properties"]["src"]  # bounded, like ids
    assert high["final_answer"] == {"type": "null"}
    delegate, direct = plan_json_schema(builtin_catalogue(), DoM.LOW, limits)["anyOf"]
    assert (
        delegate["properties"]["agents"]["maxItems"] == 1 and delegate["properties"]["flows"]["maxItems"] == 0
    )
    assert (
        direct["properties"]["agents"]["maxItems"] == 0
        and direct["properties"]["final_answer"]["minLength"] == 1
    )


@pytest.mark.parametrize("dialect", ["calls", "json", "xml"])
@pytest.mark.parametrize("dom", [DoM.LOW, DoM.HIGH])
def test_orchestrator_prompt_snapshots(dialect, dom):
    messages = orchestrator_messages(
        "What is 17 cubed?",
        builtin_catalogue(),
        OrchestrateOptions(dom=dom, dialect=dialect, budget=Budget(max_calls=20)),
    )
    text = "\n\n".join(f"=== {m.role}\n{m.content}" for m in messages)
    path = SNAPSHOTS / f"orchestrator_{dialect}_{dom.value}.txt"
    if os.environ.get("MASORCH_UPDATE_SNAPSHOTS"):
        path.write_text(text + "\n")
    assert text + "\n" == path.read_text()
    assert "20 calls" in text and "What is 17 cubed?" in text
