"""The sample data of the multi-round mode: rounds in order, each call's status, one column per round."""

from __future__ import annotations

import json

from masorch.agents.base import AgentRegistry
from masorch.agents.cot import CotAgent
from masorch.backends.base import Completion, ToolCall, Usage
from masorch.backends.scripted import ScriptedBackend
from masorch.plan import DoM
from masorch.run.executor import RoleBackends
from masorch.run.orchestrate import OrchestrateOptions, orchestrate
from masorch.run.rounds import run_rounds
from masorch.trace.writer import MemoryTrace
from masorch.view.sample import sample_view


def _calls(*items: tuple[str, dict]) -> Completion:
    return Completion(
        text="",
        usage=Usage(10, 5, 1),
        finish="tool_calls",
        tool_calls=tuple(ToolCall(n, json.dumps(a), id=f"c{i}") for i, (n, a) in enumerate(items)),
    )


async def test_a_rounds_run_shows_its_rounds_and_statuses_in_order() -> None:
    script = [
        _calls(("cot", {"task": "part 1"}), ("cot", {"task": "part 2"})),
        _calls(("cot", {"task": "combine"})),
        _calls(("final_answer", {"answer": "42"})),
    ]
    trace = MemoryTrace()
    result = await run_rounds(
        "What is X?",
        orchestrator=ScriptedBackend(script, name="orch"),
        backends=RoleBackends(ScriptedBackend(lambda m, c: "\\boxed{7}", name="sub")),
        agents=AgentRegistry([CotAgent()]),
        trace=trace,
    )
    assert result.status == "ok"
    view = sample_view(trace.events)
    assert [r["round"] for r in view["rounds"]] == [1, 2]
    assert [[c["id"] for c in r["calls"]] for r in view["rounds"]] == [["r1c1", "r1c2"], ["r2c1"]]
    assert {c["status"] for r in view["rounds"] for c in r["calls"]} == {"ok"}
    assert {c["tool_status"] for r in view["rounds"] for c in r["calls"]} == {"OK"}
    assert [(n["id"], n["layer"]) for n in view["graph"]["nodes"]] == [("r1c1", 1), ("r1c2", 1), ("r2c1", 2)]
    orchestrator = [c for c in view["calls"] if c["role"] == "orchestrator"]
    assert len(orchestrator) == 3 and orchestrator[0]["tool_calls"][0]["name"] == "cot"
    assert view["result"]["answer"] == "42"


async def test_refused_calls_and_a_round_of_only_refused_calls_are_listed() -> None:
    script = [
        _calls(("cot", {"task": "fine"}), ("cot", {"calls": 1}), ("nokind", {"task": "t"})),
        _calls(("cot", {"no": "task"})),
        _calls(("final_answer", {"answer": "42"})),
    ]
    trace = MemoryTrace()
    await run_rounds(
        "What is X?",
        orchestrator=ScriptedBackend(script, name="orch"),
        backends=RoleBackends(ScriptedBackend(lambda m, c: "\\boxed{7}", name="sub")),
        agents=AgentRegistry([CotAgent()]),
        trace=trace,
    )
    rounds = sample_view(trace.events)["rounds"]
    shown = [[(c["id"], c["kind"], c["status"], c["tool_status"]) for c in r["calls"]] for r in rounds]
    assert shown == [
        [
            ("r1c1", "cot", "ok", "OK"),
            ("r1c2", "cot", "not run", "FORMAT_ERR"),
            ("r1c3", "nokind", "not run", "REJECTED"),
        ],
        [("r2c1", "cot", "not run", "FORMAT_ERR")],
    ]
    assert "missing task" in rounds[1]["calls"][0]["error"]


def test_no_events_is_an_empty_view() -> None:
    assert sample_view([]) == {"found": False}


async def test_an_agent_given_its_task_alone_is_marked_in_the_graph() -> None:
    plan = (
        'create_agent(id="calc", kind="cot", task="Compute 17 * 23.", task_only=True)\n'
        'create_agent(id="ans", kind="cot", task="Use ${calc}.")'
    )
    trace = MemoryTrace()
    result = await orchestrate(
        "What is X?",
        orchestrator=ScriptedBackend(lambda m, c: plan, name="orch"),
        backends=RoleBackends(ScriptedBackend(lambda m, c: "\\boxed{391}", name="sub")),
        agents=AgentRegistry([CotAgent()]),
        options=OrchestrateOptions(dom=DoM.HIGH, dialect="calls"),
        trace=trace,
    )
    assert result.status == "ok"
    nodes = {n["id"]: n for n in sample_view(trace.events)["graph"]["nodes"]}
    assert nodes["calc"]["task_only"] is True and nodes["ans"]["task_only"] is False
