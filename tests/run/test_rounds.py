"""Multi-round agent-as-tool mode with a scripted orchestrator making tool calls."""

from __future__ import annotations

import json
import time

from run_helpers import CallAgent, FailAgent

from masorch.agents.base import AgentRegistry
from masorch.backends.base import Completion, ToolCall, Usage
from masorch.backends.scripted import ScriptedBackend
from masorch.run.budget import Budget
from masorch.run.executor import RoleBackends
from masorch.run.rounds import RoundsOptions, run_rounds, tool_specs
from masorch.trace.writer import MemoryTrace


def calls(*items: tuple[str, dict]) -> Completion:
    return Completion(
        text="",
        usage=Usage(10, 5, 1),
        finish="tool_calls",
        tool_calls=tuple(
            ToolCall(name, json.dumps(args), id=f"c{i}") for i, (name, args) in enumerate(items)
        ),
    )


def agents() -> AgentRegistry:
    return AgentRegistry([CallAgent("cot"), FailAgent()])


async def go(script, sub=None, **kw):
    trace = MemoryTrace()
    orch = ScriptedBackend(script, name="orch")
    sub = sub or ScriptedBackend(lambda m, c: "sub-answer", name="sub", delay_s=0.1)
    result = await run_rounds(
        "What is X?",
        orchestrator=orch,
        backends=RoleBackends(sub),
        agents=agents(),
        options=RoundsOptions(**kw),
        trace=trace,
    )
    return result, orch, sub, trace


def test_one_tool_per_kind_plus_final_answer():
    specs = tool_specs(agents().catalogue())
    assert [t.name for t in specs] == ["cot", "fail", "final_answer"]
    assert specs[0].parameters["properties"]["calls"]["type"] == "integer"


async def test_parallel_calls_then_results_with_status_then_answer():
    script = [
        calls(("cot", {"task": "part 1"}), ("cot", {"task": "part 2", "calls": 1}), ("fail", {"task": "x"})),
        calls(("final_answer", {"answer": "42"})),
    ]
    t0 = time.perf_counter()
    result, orch, _sub, trace = await go(script)
    assert time.perf_counter() - t0 < 0.35  # the round's two 0.1 s calls ran in parallel
    assert (result.status, result.answer) == ("ok", "42")
    assert sorted(result.node_results) == ["r1c1", "r1c2", "r1c3"]
    feedback = orch.calls[1][0][-1].content
    assert "r1c1 (cot, task: part 1): status ok; answer: sub-answer" in feedback
    assert "r1c3 (fail, task: x): status error; ValueError: boom in r1c3" in feedback
    assert [t.name for t in orch.calls[0][1].tools] == ["cot", "fail", "final_answer"]
    assert result.ledger.for_role("orchestrator").calls == 2 and result.usage.calls == 4
    assert [e.type for e in trace.events].count("node_finished") == 3


async def test_invalid_calls_are_reported_back_not_run():
    script = [
        calls(("cot", {"task": "t", "calls": 99}), ("nokind", {"task": "t"})),
        calls(("final_answer", {"answer": "a"})),
    ]
    result, orch, sub, _ = await go(script)
    assert result.status == "ok" and sub.calls == []
    feedback = orch.calls[1][0][-1].content
    assert feedback.count("status invalid") == 2


async def test_last_turn_offers_only_final_answer_and_no_answer_is_an_error():
    script = [calls(("cot", {"task": "t"}))] * 3
    result, orch, _, _ = await go(script, max_rounds=2)
    assert result.status == "error" and "no final answer after 2 rounds" in result.error
    assert [t.name for t in orch.calls[2][1].tools] == ["final_answer"]
    assert "No rounds are left" in orch.calls[2][0][-1].content


async def test_budget_stops_the_rounds():
    script = [calls(("cot", {"task": "t", "calls": 3})), calls(("final_answer", {"answer": "a"}))]
    result, *_ = await go(script, budget=Budget(max_calls=3))
    assert result.status == "budget"
