"""Multi-round agent-as-tool mode with a scripted orchestrator making native tool calls.

Every status a call can end with (OK, EXEC_ERR, TIMEOUT, BUDGET, FORMAT_ERR, REJECTED) is reached
here through ``run_rounds``; the chat-format export is checked on the same runs.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from run_helpers import CallAgent, FailAgent

from gate import GatedBackend
from masorch.agents.base import AgentRegistry, NodeInput, NodeOutput, NodeStatus
from masorch.agents.review import ReviewAgent
from masorch.backends.base import Completion, ToolCall, Usage
from masorch.backends.scripted import ScriptedBackend
from masorch.errors import BackendError, UsageError
from masorch.plan.catalogue import KindSignature
from masorch.run.budget import Budget
from masorch.run.executor import RoleBackends
from masorch.run.round_calls import DEFAULT_TOOL_COSTS, tool_specs
from masorch.run.rounds import PoolEntry, RoundsOptions, run_rounds
from masorch.run.trajectory import TOOL_STATUSES
from masorch.trace.writer import MemoryTrace

SNAPSHOTS = Path(__file__).parent / "snapshots"


def calls(*items: tuple[str, object], ids: bool = True) -> Completion:
    """An orchestrator reply making these tool calls (dict arguments as JSON, text as given)."""
    return Completion(
        text="",
        usage=Usage(10, 5, 1),
        finish="tool_calls",
        tool_calls=tuple(
            ToolCall(name, args if isinstance(args, str) else json.dumps(args), id=f"c{i}" if ids else "")
            for i, (name, args) in enumerate(items)
        ),
    )


def final(answer: str = "42") -> Completion:
    return calls(("final_answer", {"answer": answer}))


class CodeFail:
    """A stand-in Code Reasoner whose program fails, leaving its output in the details (a task
    "flood" makes it print 200 KB on each stream)."""

    signature = KindSignature(kind="python", summary="writes and runs code")

    async def run(self, node: NodeInput, ctx: object) -> NodeOutput:
        flood = "x" * 200_000 if node.task == "flood" else ""
        details = {
            "stdout": flood + "partial\n",
            "stderr": flood + "Traceback ...\nKeyError: 'x'\n",
            "exit": "exited with status 1",
        }
        return NodeOutput(status=NodeStatus.ERROR, error="no program succeeded", details=details)


def agents() -> AgentRegistry:
    return AgentRegistry([CallAgent("cot"), FailAgent(), CodeFail(), ReviewAgent()])


async def go(script, sub=None, *, pool=None, synthesis=None, **kw):
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
        pool=pool,
        synthesis=synthesis,
    )
    return result, orch, sub, trace


def tool_messages(orch: ScriptedBackend, turn: int) -> dict[str, str]:
    """tool_call_id -> content of the tool messages the orchestrator saw in ``turn`` (0-based)."""
    return {m.tool_call_id: m.content for m in orch.calls[turn][0] if m.role == "tool"}


def test_one_tool_per_kind_plus_final_answer_with_costs_and_the_pool():
    specs = tool_specs(agents().catalogue())
    assert [t.name for t in specs] == ["cot", "fail", "python", "review", "final_answer"]
    assert specs[0].parameters["properties"]["calls"]["type"] == "integer"
    assert "model" not in specs[0].parameters["properties"]
    assert specs[3].description.startswith("Critical Reviewer.") and "Costs 1 units." in specs[3].description
    pooled = tool_specs(agents().catalogue(), pool={"big": "a big model"}, costs={"cot": 7})
    assert pooled[0].parameters["properties"]["model"]["enum"] == ["big"]
    assert "Costs 7 units." in pooled[0].description and DEFAULT_TOOL_COSTS["cot"] == 1.0


async def test_a_round_runs_in_parallel_and_results_come_back_as_tool_messages():
    script = [
        calls(("cot", {"task": "part 1"}), ("cot", {"task": "part 2", "calls": 1}), ("fail", {"task": "x"})),
        final("42"),
    ]
    # The round's two model calls are held until both are in flight: one after another would time out.
    sub = GatedBackend(ScriptedBackend(lambda m, c: "sub-answer", name="sub"), 2)
    result, orch, _sub, trace = await go(script, sub)
    assert (result.status, result.answer) == ("ok", "42")
    assert sorted(result.node_results) == ["r1c1", "r1c2", "r1c3"]
    seen = orch.calls[1][0]
    assert [m.role for m in seen] == ["system", "user", "assistant", "tool", "tool", "tool", "user"]
    assert [c.id for c in seen[2].tool_calls] == ["c0", "c1", "c2"]
    results = tool_messages(orch, 1)
    assert results["c0"].startswith("status: OK\ncall: r1c1 (cot, 1 units)\nresult:\nsub-answer")
    assert results["c2"].startswith("status: EXEC_ERR") and "ValueError: boom in r1c3" in results["c2"]
    assert "Round 1 of 12 is done; 11 left. Units spent: 3." in seen[-1].content
    assert result.ledger.for_role("orchestrator").calls == 2 and result.usage.calls == 4
    statuses = [(e.call_id, e.status) for e in trace.events if e.type == "tool_result"]
    assert statuses == [("c0", "OK"), ("c1", "OK"), ("c2", "EXEC_ERR")]
    assert result.trajectory is not None and result.trajectory.ended_by == "final_answer"
    assert result.reply == r"\boxed{42}"


async def test_calls_over_the_limit_are_rejected_not_dropped():
    script = [calls(*[("cot", {"task": f"t{i}"}) for i in range(6)]), final()]
    result, orch, sub, _ = await go(script)
    assert len(sub.calls) == 4 and sorted(result.node_results) == ["r1c1", "r1c2", "r1c3", "r1c4"]
    results = tool_messages(orch, 1)
    assert len(results) == 6
    rejected = (
        "status: REJECTED\ncall: r1c5 (cot, 0 units)\nerror: at most 4 calls per round; this was call 5"
    )
    assert results["c4"] == rejected + ", not run"
    assert results["c5"].startswith("status: REJECTED")


@pytest.mark.parametrize(
    "arguments",
    ['{"task": "t", "x": ' + "[" * 5000 + "]" * 5000 + "}", '{"task": "t", "n": 1' + "0" * 5000 + "}"],
    ids=["nested too deeply", "a number too long to convert"],
)
async def test_arguments_json_cannot_read_are_format_err_not_a_crash(arguments):
    answer = arguments.replace("task", "answer")
    script = [calls(("cot", arguments)), calls(("final_answer", answer)), final()]
    result, orch, sub, _ = await go(script)
    assert result.status == "ok" and sub.calls == []
    tool = tool_messages(orch, 1)["c0"]
    assert tool.startswith("status: FORMAT_ERR") and "not a JSON object" in tool, tool
    final_reply = tool_messages(orch, 2)["c0"]
    assert final_reply.startswith("status: FORMAT_ERR") and "non-empty string `answer`" in final_reply


async def test_an_object_as_a_parameter_is_format_err_not_a_crash():
    # AgentSpec refused {"x": 1} with a pydantic ValidationError that ended the whole run.
    script = [calls(("cot", {"task": "t", "temperature": {"x": 1}}), ("cot", {"task": "u"})), final()]
    result, orch, sub, _ = await go(script)
    assert result.status == "ok" and len(sub.calls) == 1
    tool = tool_messages(orch, 1)["c0"]
    assert tool.startswith("status: FORMAT_ERR") and "temperature: a value is not a string" in tool, tool


async def test_a_reference_or_an_overlong_task_is_refused_in_the_rounds_words():
    script = [
        calls(("cot", {"task": "t"}), ("cot", {"task": "x"}), ("cot", {"task": "use ${r1c1}"})),
        final(),
    ]
    script.insert(1, calls(("cot", {"task": "y" * 5000})))
    result, orch, _sub, _ = await go(script)
    assert result.status == "ok"
    ref = tool_messages(orch, 1)["c2"]
    assert ref.startswith("status: FORMAT_ERR") and "a call sees only its own task" in ref, ref
    assert "did you mean" not in ref and "r1c3" not in ref.split("error:")[1]
    long = tool_messages(orch, 2)["c0"]
    assert long.startswith("status: FORMAT_ERR") and "the limit is 4000" in long, long
    assert "${ref}" not in long and "hint: shorten the task" in long


async def test_malformed_calls_get_format_err_with_the_hint_and_unknown_tools_rejected():
    script = [
        calls(
            ("cot", {"task": "t", "calls": 99}),
            ("nokind", {"task": "t"}),
            ("cot", "{not json"),
            ("cot", {"calls": 1}),
        ),
        calls(("cot", {"task": "t", "model": "huge"}), ("final_answer", {"answer": "a"})),
        calls(("final_answer", {"answer": "  "})),
        final("a"),
    ]
    result, orch, sub, _ = await go(script)
    assert result.status == "ok" and sub.calls == []
    first = tool_messages(orch, 1)
    assert (
        first["c0"].startswith("status: FORMAT_ERR")
        and "at most 10" in first["c0"]
        and "hint:" in first["c0"]
    )
    assert first["c1"].startswith("status: REJECTED") and "unknown tool 'nokind'" in first["c1"]
    assert first["c2"].startswith("status: FORMAT_ERR") and "not a JSON object" in first["c2"]
    assert first["c3"].startswith("status: FORMAT_ERR") and "missing task" in first["c3"]
    second = tool_messages(orch, 2)
    assert second["c0"].startswith("status: FORMAT_ERR") and "unknown model 'huge'" in second["c0"]
    assert second["c1"].startswith("status: REJECTED") and "must be the only call" in second["c1"]
    third = tool_messages(orch, 3)
    assert third["c0"].startswith("status: FORMAT_ERR") and "non-empty string `answer`" in third["c0"]
    assert result.trajectory is not None
    assert result.trajectory.statuses() == {"FORMAT_ERR": 5, "REJECTED": 2}


async def test_timeouts_and_code_failures_come_back_with_their_text():
    slow = ScriptedBackend(lambda m, c: "late", name="slow", delay_s=0.5)
    script = [calls(("cot", {"task": "slow"}), ("python", {"task": "run it"})), final()]
    result, orch, *_ = await go(script, sub=slow, node_timeout_s=0.05)
    results = tool_messages(orch, 1)
    assert results["c0"].startswith("status: TIMEOUT") and "timed out after 0.05 s" in results["c0"]
    assert results["c1"].startswith("status: EXEC_ERR")
    verbatim = "stdout:\npartial\n\nstderr:\nTraceback ...\nKeyError: 'x'"
    assert results["c1"].endswith("error: the last program exited with status 1\n" + verbatim)
    assert result.status == "ok"


async def test_a_tool_message_keeps_the_end_of_a_flood_of_output():
    # Four failing programs printing 200 KB each put 514K characters in the next prompt.
    script = [calls(*[("python", {"task": "flood"})] * 4), final()]
    result, orch, *_ = await go(script)
    results = tool_messages(orch, 1)
    assert all(len(text) < 5000 for text in results.values()), [len(t) for t in results.values()]
    end = "Traceback ...\nKeyError: 'x'\n"  # the last 2000 characters of stderr
    assert results["c0"].endswith("stderr:\n..." + ("x" * 2000 + end)[-2000:].rstrip())
    assert "stderr" in result.trajectory.calls[0].output.details  # the details keep every byte
    assert len(result.trajectory.calls[0].output.details["stderr"]) > 200_000


async def test_units_and_the_call_budget_give_budget_statuses():
    script = [calls(("cot", {"task": "a"}), ("cot", {"task": "b"}), ("cot", {"task": "c"})), final()]
    result, orch, sub, _trace = await go(script, tool_costs={"cot": 2.0}, max_units=4.0)
    results = tool_messages(orch, 1)
    assert (
        results["c2"]
        == "status: BUDGET\ncall: r1c3 (cot, 0 units)\nerror: not run: it costs 2 units and 0 of 4 are left"
    )
    assert len(sub.calls) == 2 and result.trajectory is not None and result.trajectory.units == 4.0
    script = [calls(("cot", {"task": "t", "calls": 3})), final()]
    result, *_ = await go(script, budget=Budget(max_calls=3))
    assert result.status == "budget" and result.trajectory is not None
    assert result.trajectory.calls[0].status == "BUDGET"


async def test_a_misspelt_tool_in_tool_costs_is_a_usage_error_naming_the_tool():
    with pytest.raises(UsageError, match="tool_costs names unknown tools: pyhton") as err:
        await go([final()], tool_costs={"pyhton": 3.0})
    assert "did you mean 'python'?" in str(err.value)
    result, *_ = await go([final()], tool_costs={"sc": 3.0, "python": 1.0})  # built-in, offered or not
    assert result.status == "ok"


async def test_a_priced_custom_kind_that_this_run_cannot_offer_is_no_error():
    class Lookup(CallAgent):
        requires = frozenset({"retriever"})

    full = AgentRegistry([CallAgent("cot"), Lookup("lookup")])
    offered = full.offered(set())  # no retriever here: lookup is withheld, not unknown
    assert list(offered.catalogue()) == ["cot"] and offered.known_kinds == {"cot", "lookup"}
    trace = MemoryTrace()
    result = await run_rounds(
        "What is X?",
        orchestrator=ScriptedBackend([final()], name="orch"),
        backends=RoleBackends(ScriptedBackend(lambda m, c: "sub", name="sub")),
        agents=offered,
        options=RoundsOptions(tool_costs={"lookup": 3.0}),
        trace=trace,
    )
    assert result.status == "ok"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_rounds", 0, "max_rounds must be an integer from 1 to 12"),
        ("max_rounds", 13, "max_rounds must be an integer from 1 to 12"),
        ("max_calls_per_round", 5, "max_calls_per_round must be an integer from 1 to 4"),
        ("max_tokens", 0, "max_tokens must be an integer >= 1"),
        ("max_units", -1.0, "max_units must be a number >= 0"),
        ("node_timeout_s", float("nan"), "node_timeout_s must be a number >= 0"),
        ("tool_costs", {"cot": float("inf")}, "tool costs must be finite"),
    ],
)
def test_rounds_options_refuse_limits_a_system_would_refuse(field, value, message):
    with pytest.raises(UsageError, match=message):
        RoundsOptions(**{field: value})


async def test_the_round_cap_ends_with_a_synthesis_call():
    synth = ScriptedBackend([r"From the results, \boxed{7}"], name="synth")
    result, orch, _, _ = await go([calls(("cot", {"task": "t"}))] * 2, max_rounds=2, synthesis=synth)
    assert (result.status, result.answer) == ("ok", "7") and len(orch.calls) == 2
    messages, config = synth.calls[0]
    assert config.tools == () and "All 2 rounds are used" in messages[-1].content
    assert [m.role for m in messages].count("tool") == 2
    assert result.trajectory is not None and result.trajectory.ended_by == "synthesis"
    assert result.ledger.for_role("orchestrator").calls == 3


async def test_the_orchestrator_can_ask_for_the_synthesis_before_the_cap():
    synth = ScriptedBackend([r"They agree: \boxed{7}"], name="synth")
    script = [calls(("cot", {"task": "t"})), calls(("final_answer", {"synthesize": True}))]
    result, orch, _, _ = await go(script, max_rounds=5, synthesis=synth)
    assert (result.status, result.answer) == ("ok", "7") and len(orch.calls) == 2
    messages, config = synth.calls[0]
    assert config.tools == () and "asks for the final answer to be written now" in messages[-1].content
    assert result.trajectory is not None and result.trajectory.ended_by == "synthesis"
    assert result.trajectory.final_call  # asked for: the orchestrator's own accepted final_answer
    # The final_answer call is answered by a tool message, as chat APIs require of every call.
    asked = messages[-3]
    assert asked.tool_calls[0].name == "final_answer"
    assert (messages[-2].role, messages[-2].tool_call_id) == ("tool", asked.tool_calls[0].id)


async def test_calls_read_from_text_are_kept_once_and_unreadable_ones_are_named():
    text = (
        "Two checks.\n"
        '<tool_call>{"name": "cot", "arguments": {"task": "a"}}</tool_call>\n'
        '<tool_call>{"name": "cot", "arguments": "x"}</tool_call>'
    )
    script = [Completion(text=text, usage=Usage(10, 5, 1)), final()]
    result, orch, _, _ = await go(script)
    messages = orch.calls[1][0]
    turn = next(m for m in messages if m.role == "assistant")
    assert turn.content == "Two checks." and [c.name for c in turn.tool_calls] == ["cot"]
    assert "could not be read and did not run" in messages[-1].content
    assert result.answer == "42"
    # The unreadable call is counted (it never reached a tool), and so is the accepted final_answer.
    traj = result.trajectory
    assert traj is not None and [r.unreadable for r in traj.rounds] == [1]
    assert (traj.undelivered_calls, traj.rounds_without_calls, traj.final_call) == (1, 0, True)


async def test_a_broken_call_beside_the_final_answer_is_undelivered_too():
    text = (
        '<tool_call>{"name": "final_answer", "arguments": {"answer": "9"}}</tool_call>\n'
        '<tool_call>{"name": "cot", "arguments": </tool_call>'
    )
    result, *_ = await go([Completion(text=text, usage=Usage(10, 5, 1))])
    traj = result.trajectory
    assert (result.answer, traj.final_call) == ("9", True)
    assert (traj.final_unreadable, traj.undelivered_calls) == (1, 1)


async def test_a_turn_without_a_readable_call_and_a_malformed_call_are_undelivered():
    prose = Completion(text="Let me think about it.", usage=Usage(10, 5, 1))
    malformed = Completion(text='[{"name": "cot", "arguments": ["a"]}]', usage=Usage(10, 5, 1))
    synth = ScriptedBackend([r"\boxed{7}"], name="synth")
    result, *_ = await go([prose, malformed], max_rounds=2, synthesis=synth)
    traj = result.trajectory
    assert traj is not None and traj.ended_by == "synthesis" and not traj.final_call  # the round cap
    assert [r.unreadable for r in traj.rounds] == [0, 1] and traj.undelivered_calls == 2


async def test_calls_refused_by_the_budget_cost_no_units():
    from masorch.run.budget import Budget

    script = [calls(("cot", {"task": "a"}), ("cot", {"task": "b"}), ("cot", {"task": "c"})), final()]
    result, *_ = await go(script, budget=Budget(max_calls=2))
    outcomes = result.trajectory.calls
    assert [o.status for o in outcomes[:3]].count("BUDGET") >= 1
    assert all(o.units == 0.0 for o in outcomes if o.status == "BUDGET")
    assert result.trajectory.units == sum(o.units for o in outcomes)


async def test_a_timeout_raised_inside_a_backend_is_an_error_not_a_crash():
    async def raises(messages, config):
        raise TimeoutError

    result, *_ = await go([calls(("cot", {"task": "a"})), final()], ScriptedBackend(raises, name="sub"))
    assert result.status == "ok"
    (outcome,) = [o for o in result.trajectory.calls if o.tool == "cot"]
    assert outcome.status == "EXEC_ERR" and "inside the agent" in outcome.error
    result, *_ = await go(raises)
    assert result.status == "error" and "timed out" in result.error


async def test_a_synthesis_reply_without_an_answer_is_an_error_not_a_guess():
    # A 0.5B model, asked to synthesise, wrote another tool call in a fence (seen on a real run).
    fenced = '```json\n{"name": "cot", "arguments": {"task": "t"}}\n```'
    for reply in (fenced, "<tool_call>{bad</tool_call> and [{oops"):  # the second: a call it cannot read
        synth = ScriptedBackend([reply], name="synth")
        result, *_ = await go([calls(("cot", {"task": "t"}))], max_rounds=1, synthesis=synth)
        assert result.status == "error" and "synthesis call gave no answer" in result.error
        assert result.trajectory is not None and result.trajectory.ended_by == "synthesis"
    written = '{"name": "final_answer", "arguments": {"answer": "9"}}'
    result, *_ = await go([calls(("cot", {"task": "t"}))], max_rounds=1, synthesis=ScriptedBackend([written]))
    assert (result.status, result.answer) == ("ok", "9")


async def test_pool_models_run_the_calls_that_name_them_and_are_shown_to_the_orchestrator():
    big = ScriptedBackend(lambda m, c: "big-answer", name="big")
    script = [calls(("cot", {"task": "hard", "model": "big"}), ("cot", {"task": "easy"})), final()]
    _result, orch, sub, trace = await go(script, pool={"big": PoolEntry(big, "a large, slow model")})
    assert len(big.calls) == 1 and len(sub.calls) == 1
    assert "- big: a large, slow model" in orch.calls[0][0][0].content
    assert "call: r1c1 (cot, model big, 1 units)\nresult:\nbig-answer" in tool_messages(orch, 1)["c0"]
    models = [e.model for e in trace.events if e.type == "tool_result"]
    assert models == ["scripted:big", "scripted:sub"]
    started = next(e for e in trace.events if e.type == "run_started")
    assert started.models["pool.big"] == "scripted:big" and started.mode == "mas:rounds"


async def test_the_reviewer_reads_the_earlier_rounds():
    def sub(messages, config):
        return "ISSUES: none\nVERDICT: sound" if "reasoning so far" in messages[-1].content else "17"

    script = [calls(("cot", {"task": "add"})), calls(("review", {"task": "check the sum"})), final("17")]
    _result, orch, backend, _ = await go(script, sub=ScriptedBackend(sub, name="sub"))
    review_prompt = backend.calls[1][0][-1].content
    assert "[r1c1 cot] answer: 17" in review_prompt and "check the sum" in review_prompt
    assert "VERDICT: sound" in tool_messages(orch, 2)["c0"]


async def test_a_reply_without_calls_is_answered_and_ids_are_made_when_missing():
    script = [
        Completion(text="thinking..."),
        calls(("cot", {"task": "a"}), ("cot", {"task": "b"}), ids=False),
        final(),
    ]
    _result, orch, _, _ = await go(script)
    assert "called no tool, so round 1 of 12 passed" in orch.calls[1][0][-1].content
    assert set(tool_messages(orch, 2)) == {"call_r2c1", "call_r2c2"}
    assistant = [m for m in orch.calls[2][0] if m.role == "assistant"][-1]
    assert [c.id for c in assistant.tool_calls] == ["call_r2c1", "call_r2c2"]


async def test_orchestrator_failure_and_the_run_deadline_end_the_run():
    result, *_ = await go([BackendError("server down", hint="retry")])
    assert result.status == "error" and "server down" in result.error and result.trajectory is not None

    async def stall(messages, config):
        await asyncio.sleep(5)
        return "never"

    result, *_ = await go(stall, timeout_s=0.1)
    assert result.status == "timeout"


async def test_no_call_starts_after_the_run_deadline_even_when_calls_return_at_once():
    # Cache hits never await: the deadline's cancellation never met them, and the run ended "ok".
    first = True

    async def slow_then_cached(messages, config):
        nonlocal first
        if first:
            first = False
            await asyncio.sleep(1.0)
        return "\\boxed{7}"

    script = [calls(("cot", {"task": f"t{i}"})) for i in range(3)] + [final("7")]
    sub = ScriptedBackend(slow_then_cached, name="sub")
    result, orch, *_ = await go(script, sub, timeout_s=0.3)
    assert result.status == "timeout" and len(orch.calls) == 1
    assert [o.status for o in result.trajectory.calls] == ["TIMEOUT"]
    assert [e.status for e in result.ledger.entries] == ["ok", "cancelled"]


async def test_a_cancelled_run_leaves_none_of_its_calls_running():
    # The round cancelled its calls without waiting: they ran on after the run had ended.
    running: set[str] = set()

    async def slow(messages, config):
        task = messages[-1].content
        running.add(task)
        try:
            await asyncio.sleep(10)
        finally:
            running.discard(task)
        return "late"

    script = [calls(("cot", {"task": "a"}), ("cot", {"task": "b"}), ("cot", {"task": "c"})), final()]
    run = asyncio.ensure_future(go(script, ScriptedBackend(slow, name="sub")))
    while len(running) < 3:
        await asyncio.sleep(0.01)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert running == set()


async def test_serial_variant_runs_one_call_per_round():
    script = [calls(("cot", {"task": "a"}), ("cot", {"task": "b"})), final()]
    _result, orch, _, trace = await go(script, max_calls_per_round=1)
    assert tool_messages(orch, 1)["c1"].startswith("status: REJECTED")
    assert "between 1 and 1 tool calls" in orch.calls[0][0][0].content
    assert next(e for e in trace.events if e.type == "run_started").mode == "mas:rounds-serial"


async def test_the_trajectory_exports_as_one_chat_record():
    script = [calls(("cot", {"task": "a"}), ("fail", {"task": "b"})), final("42")]
    result, *_ = await go(script)
    assert result.trajectory is not None
    record = json.loads(json.dumps(result.trajectory.to_chat()))
    roles = [m["role"] for m in record["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user", "assistant"]
    call_ids = [c["id"] for c in record["messages"][2]["tool_calls"]]
    assert [m["tool_call_id"] for m in record["messages"][3:5]] == call_ids
    assert record["messages"][-1]["tool_calls"][0]["function"]["name"] == "final_answer"
    assert [t["function"]["name"] for t in record["tools"]][-1] == "final_answer"
    meta = record["meta"]
    assert (meta["answer"], meta["ended_by"], meta["rounds"], meta["units"]) == ("42", "final_answer", 1, 2.0)
    assert meta["statuses"] == {"OK": 1, "EXEC_ERR": 1}
    assert set(meta["statuses"]) <= set(TOOL_STATUSES)


async def test_tool_calls_written_as_text_are_read_and_unreadable_ones_explained():
    hermes = '<tool_call>\n{"name": "cot", "arguments": {"task": "a"}}\n</tool_call>'
    script = [Completion(text=hermes), Completion(text='[{"name": "cot", "arguments": {"task": '), final()]
    result, orch, sub, _ = await go(script)
    assert result.status == "ok" and len(sub.calls) == 1
    assert tool_messages(orch, 1)["call_r1c1"].startswith("status: OK")
    explained = orch.calls[2][0][-1].content
    assert (
        explained.startswith("Your reply's tool calls could not be read:")
        and "round 2 of 12" in explained.lower()
    )


async def test_rendered_conversation_and_tools_snapshot():
    """Every rounds prompt as the orchestrator and the synthesis model see them (system prompt,
    tool results, the between-round notes, the synthesis request) and the tools offered."""
    from masorch.agents.registry import default_registry, offered_registry

    synth = ScriptedBackend([r"\boxed{5}"], name="synth")
    script = [
        calls(("cot", {"task": "Add 2 and 3."}), ("sc", {"task": "Add 2 and 3.", "n": 99})),
        Completion(""),
    ]
    await run_rounds(
        "What is 2 + 3?",
        orchestrator=ScriptedBackend(script, name="orch"),
        backends=RoleBackends(ScriptedBackend(lambda m, c: r"2 + 3 = 5. \boxed{5}", name="sub")),
        agents=offered_registry(default_registry(), retriever=True, sandbox=True, history=True),
        options=RoundsOptions(max_rounds=2, budget=Budget(max_calls=30), max_units=10),
        pool={"big": PoolEntry(ScriptedBackend([]), "a larger model, 4x the cost")},
        synthesis=synth,
    )
    messages, config = synth.calls[0]
    text = "\n\n".join(
        f"=== {m.role} {m.tool_call_id}".rstrip()
        + "".join(f"\n-> {c.id}: {c.name}({c.arguments})" for c in m.tool_calls)
        + f"\n{m.content}"
        for m in messages
    )
    tools = tool_specs(
        offered_registry(default_registry(), retriever=True, sandbox=True, history=True).catalogue()
    )
    text += "\n\n=== tools\n" + json.dumps([t.__dict__ for t in tools], indent=1, default=dict) + "\n"
    path = SNAPSHOTS / "rounds_conversation.txt"
    if os.environ.get("MASORCH_UPDATE_SNAPSHOTS"):
        path.write_text(text)
    assert text == path.read_text()
    assert config.tools == ()


def test_injected_faults_end_calls_without_running_them():
    from masorch.run.faults import ToolFaults

    faults = ToolFaults(rate=1.0, kinds=("TIMEOUT",), max_per_run=1)
    script = [calls(("cot", {"task": "a"}), ("cot", {"task": "b"})), calls(("cot", {"task": "c"})), final()]
    result, orch, sub, trace = asyncio.run(go(script, faults=faults, node_timeout_s=30.0))
    outcomes = result.trajectory.calls
    assert [c.status for c in outcomes] == ["TIMEOUT", "OK", "OK"]  # one fault per run at most
    assert outcomes[0].injected and not outcomes[1].injected and outcomes[0].units == 1.0
    assert outcomes[0].error == "node timed out after 30 s" and outcomes[0].model == ""
    assert len(sub.calls) == 2  # the failed call never reached the sub-agent
    seen = tool_messages(orch, 1)
    assert seen["c0"].startswith("status: TIMEOUT") and "inject" not in seen["c0"]
    events = [e for e in trace.events if e.type == "tool_result"]
    assert [e.injected for e in events] == [True, False, False]
    assert result.trajectory.to_chat()["meta"]["calls"][0]["injected"] is True


def test_an_injected_format_drift_reads_as_an_unreadable_reply():
    from masorch.run.faults import ToolFaults

    faults = ToolFaults(rate=1.0, kinds=("FORMAT_DRIFT",), max_per_run=1)
    script = [calls(("cot", {"task": "a"})), final()]
    result, orch, sub, _trace = asyncio.run(go(script, faults=faults))
    (outcome,) = [c for c in result.trajectory.calls if c.tool == "cot"]
    assert (outcome.status, outcome.injected) == ("EXEC_ERR", True) and len(sub.calls) == 0
    assert "did not follow the answer format" in tool_messages(orch, 1)["c0"]


async def test_each_turn_decodes_under_the_tool_call_grammar_unless_told_not_to():
    _result, orch, _sub, _trace = await go([calls(("cot", {"task": "a"})), final()])
    turn, last = (config for _messages, config in orch.calls)
    assert turn.grammar is not None and turn.grammar == last.grammar
    assert '"<tool_call>\\n{\\"name\\": \\"cot\\"' in turn.grammar and "fail" in turn.grammar
    assert 'call ("\\n" call){0,3}' in turn.grammar  # at most max_calls_per_round calls
    _result, orch, _sub, _trace = await go([final()], max_calls_per_round=1, constrain=False)
    assert orch.calls[0][1].grammar is None


async def test_a_constrained_turn_on_a_llama_cpp_server_runs_end_to_end():
    """The orchestrator's turns go through the server's template and the grammar; the round's
    calls come back from the ``<tool_call>`` blocks of the text."""
    from masorch.backends.loopback import LoopbackServer
    from masorch.backends.openai_compat import OpenAIBackend

    def teacher(messages):
        prompt = messages[-1]["content"]
        if "status: OK" not in prompt:
            return 'Ask first.\n<tool_call>\n{"name": "cot", "arguments": {"task": "Find X."}}\n</tool_call>'
        return '<tool_call>\n{"name": "final_answer", "arguments": {"answer": "7"}}\n</tool_call>'

    with LoopbackServer(teacher) as server:
        orch = OpenAIBackend("m", base_url=server.base_url, grammar_format="llama.cpp")
        result = await run_rounds(
            "What is X?",
            orchestrator=orch,
            backends=RoleBackends(ScriptedBackend(lambda m, c: "sub-answer", name="sub")),
            agents=agents(),
        )
        await orch.aclose()
    assert (result.status, result.answer) == ("ok", "7")
    assert result.trajectory is not None and [c.status for c in result.trajectory.calls] == ["OK"]
    first = result.trajectory.messages[2]
    assert first.content == "Ask first." and first.tool_calls[0].id == "call_r1c1"
    assert sum("grammar" in b for b in server.bodies) == 2
