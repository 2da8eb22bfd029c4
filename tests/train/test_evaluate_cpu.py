"""The before/after evaluation with a scripted orchestrator and sub-agent."""

from __future__ import annotations

from collections.abc import Sequence

from masorch.agents import default_registry
from masorch.backends.base import GenerateConfig, Message
from masorch.backends.scripted import ScriptedBackend
from masorch.run.executor import RoleBackends
from masorch.train.evaluate import evaluate_rows
from masorch.train.rollout import PlanExecutor


def orchestrate(messages: Sequence[Message], config: GenerateConfig) -> str:
    q = messages[-1].content
    if "first" in q:
        return 'create_agent(id="a", kind="cot", task="Solve it.")'
    if "second" in q:
        return 'final_answer("5")'
    return "I cannot plan this."


async def test_valid_rate_accuracy_and_plan_size() -> None:
    rows = [
        {
            "prompt": [{"role": "user", "content": f"the {w} question"}],
            "question": w,
            "dom": "low",
            "ground_truth": "17",
            "scorer": "masbench",
        }
        for w in ("first", "second", "third", "fourth")
    ]
    orchestrator = ScriptedBackend(orchestrate)
    executor = PlanExecutor(
        default_registry(), RoleBackends(subagent=ScriptedBackend(lambda m, c: "\\boxed{17}"))
    )
    summary = await evaluate_rows(rows, orchestrator=orchestrator, executor=executor, max_plan_tokens=64)
    assert summary.n == 4
    assert summary.valid_rate == 0.5
    assert summary.accuracy == 0.25  # only the delegated plan is right
    assert summary.agents_per_plan == 0.5  # one agent, one direct answer
    assert summary.statuses == {"ok": 2, "invalid_plan": 2}
    assert all(c.temperature == 0.0 for _, c in orchestrator.calls)
