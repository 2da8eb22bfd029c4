"""The dataflow executor: substitution, context, concurrency, statuses, budgets and deadlines."""

from __future__ import annotations

import logging
import time

import pytest
from run_helpers import CallAgent, FailAgent, SleepAgent, StatusAgent, registry, vplan

from gate import GatedBackend
from masorch.agents.base import AgentRegistry, NodeOutput, NodeStatus
from masorch.backends.base import GenerateConfig, Message
from masorch.backends.scripted import ScriptedBackend
from masorch.errors import UsageError
from masorch.plan.model import Plan, ValidatedPlan
from masorch.run.budget import Budget
from masorch.run.executor import RoleBackends, run_plan
from masorch.trace.writer import MemoryTrace


def echo_last_line(tag: str = "ans"):
    """A responder answering '<tag>(<first line of the task>)'."""

    def reply(messages, config):
        task = messages[-1].content.split("Task: ", 1)[1].split("\n", 1)[0]
        return f"{tag}({task})"

    return reply


async def run(plan, backend=None, agents=None, **kw):
    backend = backend or ScriptedBackend(echo_last_line())
    return await run_plan(
        plan, "What is X?", agents=agents or registry(), backends=RoleBackends(backend), **kw
    )


async def test_reference_substitutes_the_upstream_answer_not_its_prompt():
    backend = ScriptedBackend(echo_last_line())
    plan = vplan([("a", "cot", "find A"), ("b", "cot", "use ${a} and ${a.rationale}")], [("a", "b")])
    result = await run(plan, backend)
    assert result.status == "ok"
    assert result.answer == "ans(use ans(find A) and because a)"
    b_prompt = backend.calls[1][0][-1].content
    assert "Q: What is X?" in b_prompt  # every node sees the original question
    assert "find A" in b_prompt and "Task: find A" not in b_prompt  # only the answer travels


async def test_flow_without_reference_passes_the_answer_as_context():
    agent = CallAgent()
    plan = vplan([("a", "cot", "find A"), ("b", "cot", "combine")], [("a", "b")])
    result = await run(plan, agents=AgentRegistry([agent]))
    assert result.status == "ok"
    b_input = agent.inputs[1]
    assert b_input.task == "combine"
    assert [(u.id, u.answer) for u in b_input.context] == [("a", "ans(find A)")]


async def test_empty_task_means_the_question_and_params_get_defaults():
    agent = CallAgent()
    plan = vplan([("a", "cot", "  ", {"calls": 2})])
    result = await run(plan, agents=AgentRegistry([agent]))
    assert result.status == "ok"
    assert agent.inputs[0].task == "What is X?"
    assert dict(agent.inputs[0].params) == {"calls": 2, "temperature": 0.0}
    assert result.usage.calls == 2
    assert result.node_results["a"].usage.calls == 2


async def test_an_empty_task_takes_the_question_as_text_with_its_dollar_braces():
    # A shell question's ${x} was read as a reference: every single-agent baseline failed on it.
    agent = CallAgent()
    question = "In bash, after x=5, what does echo ${x} print?"
    plan = vplan([("a", "cot", "")])
    result = await run_plan(
        plan,
        question,
        agents=AgentRegistry([agent]),
        backends=RoleBackends(ScriptedBackend(echo_last_line())),
    )
    assert result.status == "ok" and agent.inputs[0].task == question


async def test_an_agent_asking_for_its_task_alone_is_not_shown_the_question():
    from masorch.agents.registry import default_registry
    from masorch.agents.signatures import builtin_catalogue
    from masorch.plan import DoM, check

    text = (
        'create_agent(id="calc", kind="cot", task="Compute 17 * 23.", task_only=True)\n'
        'create_agent(id="ans", kind="cot", task="Use ${calc} to answer.")'
    )
    result = check(text, DoM.HIGH, builtin_catalogue())
    assert result.validation is not None and result.validation.validated is not None
    backend = ScriptedBackend(lambda messages, config: "\\boxed{391}")
    out = await run_plan(
        result.validation.validated,
        "A secret question: how many sheep?",
        agents=default_registry(),
        backends=RoleBackends(backend),
    )
    assert out.status == "ok" and out.answer == "391"
    calc_prompt, ans_prompt = (call[0][-1].content for call in backend.calls)
    assert "sheep" not in calc_prompt and "Compute 17 * 23." in calc_prompt
    assert "sheep" in ans_prompt and "Use 391 to answer." in ans_prompt


async def test_parallel_nodes_run_concurrently():
    # The four independent calls are held until all four are in flight: one after another would time out.
    backend = GatedBackend(ScriptedBackend(echo_last_line()), 4)
    plan = vplan(
        [("s1", "cot", "1"), ("s2", "cot", "2"), ("s3", "cot", "3"), ("s4", "cot", "4"), ("c", "cot", "sum")],
        [("s1", "c"), ("s2", "c"), ("s3", "c"), ("s4", "c")],
    )
    result = await run(plan, backend)
    assert result.status == "ok" and result.usage.calls == 5, result.error


async def test_a_node_starts_when_its_own_parents_are_done_not_per_level():
    # a: 1 s; b: 0.1 s -> c: 1 s; (a, c) -> d. Critical path b+c = 1.1 s; by levels 2 s (wide
    # apart, so a stalled machine cannot pass for the wrong order or fail the right one).
    plan = vplan(
        [
            ("a", "sleep", "A", {"seconds": 1.0}),
            ("b", "sleep", "B", {"seconds": 0.1}),
            ("c", "sleep", "C", {"seconds": 1.0}),
            ("d", "sleep", "D", {"seconds": 0.01}),
        ],
        [("b", "c"), ("a", "d"), ("c", "d")],
    )
    t0 = time.perf_counter()
    result = await run(plan, agents=AgentRegistry([SleepAgent()]))
    wall = time.perf_counter() - t0
    assert result.status == "ok" and result.answer == "D"
    assert wall < 1.6, wall


async def test_an_agent_exception_becomes_error_and_children_are_skipped(caplog):
    plan = vplan(
        [("a", "fail", "x"), ("b", "cot", "use ${a}"), ("c", "cot", "then ${b}")], [("a", "b"), ("b", "c")]
    )
    backend = ScriptedBackend(echo_last_line())
    with caplog.at_level(logging.ERROR, logger="masorch.run.executor"):
        result = await run(plan, backend, agents=registry(FailAgent()))
    assert result.status == "error"
    assert result.answer == ""
    assert result.node_results["a"].status is NodeStatus.ERROR
    assert result.node_results["a"].error == "ValueError: boom in a"
    assert result.node_results["b"].status is NodeStatus.SKIPPED
    assert result.node_results["c"].status is NodeStatus.SKIPPED
    assert "parent 'a'" in result.node_results["b"].error
    assert "node 'a' error: ValueError: boom in a" in result.error
    assert backend.calls == []  # skipped nodes never run with placeholder text
    assert any(r.exc_info for r in caplog.records)  # logged with its traceback


async def test_a_status_failure_propagates_to_the_run():
    plan = vplan([("a", "bad", "x"), ("b", "cot", "${a}")], [("a", "b")])
    result = await run(plan, agents=registry(StatusAgent()))
    assert result.status == "error"
    assert result.node_results["b"].status is NodeStatus.SKIPPED


async def test_backend_error_is_a_node_error_and_is_recorded():
    from masorch.errors import BackendError

    backend = ScriptedBackend([BackendError("server said 500")])
    result = await run(vplan([("a", "cot", "x")]), backend)
    assert result.status == "error"
    assert "server said 500" in result.node_results["a"].error
    assert [e.status for e in result.ledger.entries] == ["error"]


async def test_call_budget_stops_the_run_with_status_budget():
    plan = vplan([("a", "cot", "1"), ("b", "cot", "${a}"), ("c", "cot", "${b}")], [("a", "b"), ("b", "c")])
    result = await run(plan, budget=Budget(max_calls=2))
    assert result.status == "budget"
    assert [result.node_results[n].status for n in "abc"] == [NodeStatus.OK, NodeStatus.OK, NodeStatus.BUDGET]
    assert "call budget spent: 2 of 2" in result.node_results["c"].error
    assert result.usage.calls == 2


async def test_token_budget_is_checked_against_tokens_already_spent():
    plan = vplan([("a", "cot", "1"), ("b", "cot", "${a}")], [("a", "b")])
    result = await run(plan, budget=Budget(max_tokens=3))
    assert result.status == "budget"
    assert result.node_results["a"].status is NodeStatus.OK
    assert result.usage.calls == 1 and result.usage.total_tokens >= 3


async def test_wall_budget_stops_new_calls():
    plan = vplan([("a", "sleep", "s", {"seconds": 0.1}), ("b", "cot", "${a}")], [("a", "b")])
    result = await run(plan, agents=registry(SleepAgent()), budget=Budget(max_wall_s=0.05))
    assert result.status == "budget"
    assert "time budget spent" in result.node_results["b"].error


async def test_budget_hit_that_decides_the_final_agent_stops_a_running_sibling():
    # a makes 5 calls under a 3-call budget, so z cannot run: s (no calls) is stopped, t not started.
    plan = vplan(
        [
            ("a", "cot", "x", {"calls": 5}),
            ("s", "sleep", "S", {"seconds": 0.1}),
            ("t", "cot", "${s}"),
            ("z", "cot", "join"),
        ],
        [("s", "t"), ("a", "z"), ("t", "z")],
    )
    backend = ScriptedBackend(echo_last_line(), delay_s=0.01)
    result = await run(plan, backend, agents=registry(SleepAgent()), budget=Budget(max_calls=3))
    r = result.node_results
    assert r["a"].status is NodeStatus.BUDGET
    assert (
        r["s"].status is NodeStatus.SKIPPED and "not needed: the final agent 'z' was budget" in r["s"].error
    )
    assert r["t"].status is NodeStatus.BUDGET and "not started" in r["t"].error
    assert r["z"].status is NodeStatus.BUDGET
    assert result.status == "budget"
    assert result.ledger.in_flight == 0 and len(result.ledger.entries) == 3


async def test_node_timeout():
    plan = vplan([("a", "sleep", "S", {"seconds": 1.0})])
    t0 = time.perf_counter()
    result = await run(plan, agents=AgentRegistry([SleepAgent()]), node_timeout_s=0.05)
    assert time.perf_counter() - t0 < 0.5
    assert result.status == "timeout"
    assert result.node_results["a"].status is NodeStatus.TIMEOUT


async def test_run_deadline_cancels_running_and_unstarted_nodes():
    backend = ScriptedBackend(echo_last_line(), delay_s=1.0)
    plan = vplan([("a", "cot", "1"), ("b", "cot", "${a}")], [("a", "b")])
    t0 = time.perf_counter()
    result = await run(plan, backend, timeout_s=0.1)
    assert time.perf_counter() - t0 < 0.5
    assert result.status == "timeout"
    assert "cancelled at the run deadline" in result.node_results["a"].error
    assert "not started" in result.node_results["b"].error
    assert [e.status for e in result.ledger.entries] == ["cancelled"]


async def test_once_the_final_agent_is_skipped_nothing_runs_on_or_starts():
    # a failed at once, so c could never run; b went on and b2 started after it: wasted calls.
    backend = ScriptedBackend(echo_last_line(), delay_s=0.5)
    plan = vplan(
        [("a", "bad", "fail"), ("b", "cot", "slow"), ("b2", "cot", "then ${b}"), ("c", "cot", "join")],
        [("a", "c"), ("b", "b2"), ("b2", "c")],
    )
    t0 = time.perf_counter()
    result = await run(plan, backend, agents=AgentRegistry([CallAgent(), StatusAgent()]))
    assert time.perf_counter() - t0 < 0.4
    assert result.status == "error" and result.error == "node 'a' error: model output unusable"
    assert result.node_results["b"].status is NodeStatus.SKIPPED
    assert "not needed: the final agent 'c' was skipped" in result.node_results["b"].error
    assert result.node_results["b2"].status is NodeStatus.SKIPPED
    assert [e.status for e in result.ledger.entries] == ["cancelled"]  # b's call, b2 never started


async def test_direct_final_answer_needs_no_sub_agent():
    backend = ScriptedBackend([])
    plan = ValidatedPlan(plan=Plan(final_answer="42"), dom=vplan([("a", "cot", "x")]).dom, order=())
    result = await run(plan, backend)
    assert (result.status, result.answer, result.usage.calls) == ("ok", "42", 0)


async def test_unregistered_kind_is_a_usage_error():
    with pytest.raises(UsageError, match="nokind"):
        await run(vplan([("a", "nokind", "x")]))


async def test_roles_route_calls_per_kind_and_to_the_judge():
    class JudgeAgent(CallAgent):
        async def run(self, node, ctx):
            out = await ctx.complete([Message("user", "verdict?")], GenerateConfig(), role="judge")
            return NodeOutput(answer=out.text)

    default = ScriptedBackend(["d"], name="default")
    special = ScriptedBackend(["s"], name="special")
    judge = ScriptedBackend(["j"], name="judge")
    plan = vplan(
        [("a", "cot", "x"), ("b", "other", "y"), ("c", "judged", "${a} ${b}")], [("a", "c"), ("b", "c")]
    )
    agents = AgentRegistry([CallAgent("cot"), CallAgent("other"), JudgeAgent("judged")])
    result = await run_plan(
        plan,
        "q",
        agents=agents,
        backends=RoleBackends(default, per_kind={"other": special}, judge=judge),
        trace=(trace := MemoryTrace()),
    )
    assert result.answer == "j"
    assert sorted((e.node, e.role, e.model) for e in result.ledger.entries) == [
        ("a", "subagent", "scripted:default"),
        ("b", "subagent", "scripted:special"),
        ("c", "judge", "scripted:judge"),
    ]
    types = [e.type for e in trace.events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert types.count("llm_call") == 3 and types.count("node_finished") == 3


async def test_a_cancelled_run_cancels_its_running_nodes_before_it_ends():
    import asyncio

    sleeps = [("a", "sleep", "A", {"seconds": 30}), ("b", "sleep", "B", {"seconds": 30})]
    plan = vplan([*sleeps, ("z", "cot", "j")], [("a", "z"), ("b", "z")])
    task = asyncio.create_task(run(plan, agents=registry(SleepAgent())))
    for _ in range(200):  # until both sleeps run
        nodes = [t for t in asyncio.all_tasks() if t.get_name().startswith("node:")]
        if len(nodes) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(nodes) == 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all(t.cancelled() for t in nodes)  # ended with the run, not left to sleep on
