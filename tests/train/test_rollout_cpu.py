"""Group execution of sampled plans with a scripted sub-agent: concurrency, dedupe, cache, budgets."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from masorch.agents import default_registry
from masorch.backends.base import GenerateConfig, Message
from masorch.backends.cache import CachedBackend, ResponseCache
from masorch.backends.scripted import ScriptedBackend
from masorch.plan import DoM
from masorch.run.budget import Budget
from masorch.run.executor import RoleBackends
from masorch.train.rollout import LoopThread, PlanExecutor, RolloutItem, RolloutSettings

ONE = 'create_agent(id="a", kind="cot", task="Solve it.")'
ONE_OTHER = 'create_agent(id="b", kind="cot", task="Solve it step by step.")'
SC = 'create_agent(id="v", kind="sc", task="Solve it.", n=5)'
TWO = (
    'create_agent(id="a", kind="cot", task="Find x.")\n'
    'create_agent(id="b", kind="cot", task="Using ${a}, answer.")\n'
    'create_flow("a", "b")'
)


def answer_17(messages: Sequence[Message], config: GenerateConfig) -> str:
    return "The answer is \\boxed{17}"


def make_executor(backend: object, **settings: object) -> PlanExecutor:
    return PlanExecutor(default_registry(), RoleBackends(subagent=backend), RolloutSettings(**settings))  # type: ignore[arg-type]


async def test_valid_plan_runs_and_invalid_plan_is_data() -> None:
    ex = make_executor(ScriptedBackend(answer_17))
    ok, bad, low_two = await ex.run_group(
        [
            RolloutItem("q", ONE, DoM.LOW),
            RolloutItem("q", "I will think about it.", DoM.LOW),
            RolloutItem("q", TWO, DoM.LOW),
        ]
    )
    assert (ok.status, ok.answer, ok.valid, ok.n_agents, ok.calls) == ("ok", "17", True, 1, 1)
    assert ok.tokens > 0
    assert (bad.status, bad.valid, bad.calls) == ("invalid_plan", False, 0)
    assert "no_plan" in bad.codes
    assert low_two.status == "invalid_plan" and "dom_agents" in low_two.codes and low_two.n_agents == 2


async def test_high_dom_dag_runs() -> None:
    ex = make_executor(ScriptedBackend(answer_17))
    (out,) = await ex.run_group([RolloutItem("q", TWO, DoM.HIGH)])
    assert out.status == "ok" and out.calls == 2 and out.n_agents == 2


async def test_identical_items_run_once_and_plans_run_concurrently() -> None:
    backend = ScriptedBackend(answer_17, delay_s=0.5)
    ex = make_executor(backend)
    items = [RolloutItem("q", ONE, DoM.LOW)] * 3 + [RolloutItem("q", ONE_OTHER, DoM.LOW)] * 3
    import time

    t0 = time.monotonic()
    outs = await ex.run_group(items)
    elapsed = time.monotonic() - t0
    assert [o.status for o in outs] == ["ok"] * 6
    assert len(backend.calls) == 2  # two distinct plans, each executed once
    assert elapsed < 0.8, elapsed  # the two plans overlapped (one after the other: 1 s)


async def test_cache_makes_identical_subagent_calls_once(tmp_path: Path) -> None:
    inner = ScriptedBackend(answer_17)
    backend = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"))
    ex = make_executor(backend)
    # Two different plans whose single node sends the same request: the second is a cache hit.
    same_a = 'create_agent(id="a", kind="cot", task="Solve it.")'
    same_b = 'create_agent(id="zz", kind="cot", task="Solve it.")'
    outs = await ex.run_group([RolloutItem("q", same_a, DoM.LOW)])
    outs += await ex.run_group([RolloutItem("q", same_b, DoM.LOW)])
    assert [o.answer for o in outs] == ["17", "17"]
    assert len(inner.calls) == 1


async def test_per_plan_budget_stops_a_runaway_plan() -> None:
    backend = ScriptedBackend(answer_17)
    ex = make_executor(backend, budget=Budget(max_calls=2))
    small, runaway = await ex.run_group([RolloutItem("q", ONE, DoM.HIGH), RolloutItem("q", SC, DoM.HIGH)])
    assert small.status == "ok"
    assert runaway.status == "budget" and runaway.calls <= 2


async def test_per_plan_deadline_bounds_a_slow_plan() -> None:
    ex = make_executor(ScriptedBackend(answer_17, delay_s=5.0), timeout_s=0.3)
    import time

    t0 = time.monotonic()
    (out,) = await ex.run_group([RolloutItem("q", ONE, DoM.LOW)])
    assert out.status == "timeout"
    assert time.monotonic() - t0 < 2.0


def test_loop_thread_runs_coroutines_from_sync_code() -> None:
    ex = make_executor(ScriptedBackend(answer_17))
    with LoopThread() as loop:
        outs = loop.run(ex.run_group([RolloutItem("q", ONE, DoM.LOW)]))
        # A second call reuses the same loop (backends bind to it).
        outs += loop.run(ex.run_group([RolloutItem("q", ONE_OTHER, DoM.LOW)]))
        assert threading.current_thread() is threading.main_thread()
    assert [o.answer for o in outs] == ["17", "17"]
    with pytest.raises(Exception, match="closed"):
        loop.run(ex.run_group([]))


def test_settings_reject_zero_concurrency() -> None:
    with pytest.raises(Exception, match="concurrency"):
        RolloutSettings(concurrency=0)
