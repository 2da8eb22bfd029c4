"""Reward components over executed plans: one execution per completion per step, logged metrics."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import pytest

from masorch.agents import default_registry
from masorch.backends.base import GenerateConfig, Message
from masorch.backends.scripted import ScriptedBackend
from masorch.errors import UsageError
from masorch.run.executor import RoleBackends
from masorch.train.reward_components import CostTarget, answer_correctness, cost_penalty
from masorch.train.rewards import PlanRewards
from masorch.train.rollout import PlanExecutor, RolloutSettings

COT = 'create_agent(id="a", kind="cot", task="Solve it.")'
COT_B = 'create_agent(id="b", kind="cot", task="Solve it carefully.")'
SC = 'create_agent(id="v", kind="sc", task="Solve it.", n=5)'
DIRECT = 'final_answer("4")'


def by_task(messages: Sequence[Message], config: GenerateConfig) -> str:
    # "carefully" gets the right answer, anything else a wrong one.
    text = " ".join(m.content for m in messages)
    return "\\boxed{17}" if "carefully" in text else "\\boxed{5}"


def rows(n: int, dom: str = "low") -> dict[str, list[object]]:
    return {
        "question": ["What is x?"] * n,
        "dom": [dom] * n,
        "ground_truth": ["17"] * n,
        "scorer": ["masbench"] * n,
    }


@pytest.fixture
def backend() -> ScriptedBackend:
    return ScriptedBackend(by_task)


@pytest.fixture
def rewards(backend: ScriptedBackend) -> PlanRewards:
    ex = PlanExecutor(default_registry(), RoleBackends(subagent=backend), RolloutSettings())
    r = PlanRewards(ex, weights={"cost": 0.1}, cost_target=CostTarget(calls=2, cap=1.0))
    yield r
    r.close()


def test_default_weights_are_the_papers(backend: ScriptedBackend) -> None:
    ex = PlanExecutor(default_registry(), RoleBackends(subagent=backend))
    r = PlanRewards(ex)
    try:
        assert [f.__name__ for f in r.reward_funcs()] == ["correctness", "validity", "dom", "cost"]
        assert r.reward_weights() == [1.0, 0.0, 0.0, 0.0]
    finally:
        r.close()


def test_components_share_one_execution_per_step(rewards: PlanRewards, backend: ScriptedBackend) -> None:
    completions = [COT, COT_B, "no plan here", SC, COT_B]
    metrics: dict[str, list[float]] = {}
    cols = rows(5) | {
        "trainer_state": SimpleNamespace(global_step=0),
        "log_metric": lambda k, v: metrics.setdefault(k, []).append(v),
    }
    funcs = {f.__name__: f for f in rewards.reward_funcs()}
    correct = funcs["correctness"](completions, **dict(cols))
    calls_after_first = len(backend.calls)
    valid = funcs["validity"](completions, **dict(cols))
    dom = funcs["dom"](completions, **dict(cols))
    cost = funcs["cost"](completions, **dict(cols))
    assert len(backend.calls) == calls_after_first == 1 + 1 + 5  # COT, COT_B (once), SC's 5 samples
    assert correct == [0.0, 1.0, 0.0, 0.0, 1.0]
    assert valid == [1.0, 1.0, 0.0, 1.0, 1.0]
    assert dom == [1.0, 1.0, None, 1.0, 1.0]
    assert cost == [0.0, 0.0, None, -1.0, 0.0]  # sc makes 5 calls against a target of 2
    assert metrics["plan/valid_rate"] == [0.8]
    assert metrics["plan/agents_per_plan"] == [1.0]
    assert metrics["plan/calls_per_plan"] == [pytest.approx((1 + 1 + 0 + 5 + 1) / 5)]
    # A new step executes again (sampling may differ; the sub-agent cache, if any, dedupes calls).
    funcs["correctness"](completions, **(rows(5) | {"trainer_state": SimpleNamespace(global_step=1)}))
    assert len(backend.calls) == 2 * calls_after_first
    assert len(rewards.history) == 2


def test_invalid_plan_earns_zero_and_dom_breach_is_caught(rewards: PlanRewards) -> None:
    two = COT + "\n" + COT_B
    funcs = {f.__name__: f for f in rewards.reward_funcs()}
    assert funcs["correctness"]([two, DIRECT], **rows(2)) == [0.0, 0.0]
    assert funcs["dom"]([two, DIRECT], **rows(2)) == [0.0, 1.0]
    assert funcs["validity"]([two, DIRECT], **rows(2, "high")) == [0.0, 0.0]


def test_combined_is_the_weighted_sum(rewards: PlanRewards) -> None:
    assert rewards.combined([COT_B, SC], **rows(2)) == [1.0, pytest.approx(-0.1)]


def test_chat_completions_are_read_from_the_last_message(rewards: PlanRewards) -> None:
    chat = [[{"role": "assistant", "content": COT_B}]]
    assert rewards.reward_funcs()[0](chat, **rows(1)) == [1.0]


def test_unknown_component_and_missing_columns_are_usage_errors(rewards: PlanRewards) -> None:
    with pytest.raises(UsageError, match="unknown reward component"):
        PlanRewards(rewards.executor, weights={"style": 1.0})
    with pytest.raises(UsageError, match="question"):
        rewards.reward_funcs()[0]([COT], dom=["low"])


def test_pure_components_edge_cases() -> None:
    assert answer_correctness(["p"], status=["timeout"], answer=[""], ground_truth=["1"]) == [0.0]
    assert cost_penalty(
        ["p"], status=["ok"], calls=[1], tokens=[900], target=CostTarget(calls=None, tokens=300, cap=0.5)
    ) == [-0.5]
    with pytest.raises(UsageError):
        CostTarget(calls=0)
    gold = {"status": ["ok"], "ground_truth": ["17"]}
    assert answer_correctness(["p"], answer=["17"], **gold) == [1.0]
    assert answer_correctness(["p"], answer=["\\boxed{40}"], **gold) == [1.0]  # 40 = 17 mod 23


def test_registry_scorers_grade_executed_answers() -> None:
    out = answer_correctness(
        ["p", "p", "p"],
        status=["ok", "ok", "ok"],
        answer=["The Beatles", "Rolling Stones", "\\frac{1}{2}"],
        ground_truth=["beatles", "beatles", "0.5"],
        scorer=["exact", "exact", "math"],
        question=["q", "q", "q"],
    )
    assert out == [1.0, 0.0, 1.0]
    with pytest.raises(UsageError, match="llm_judge"):  # needs a judge backend: not a reward scorer
        answer_correctness(["p"], status=["ok"], answer=["x"], ground_truth=["x"], scorer="llm_judge")


def test_rewards_parse_in_the_dialect_the_orchestrator_was_asked_for(backend: ScriptedBackend) -> None:
    # The same plan written as JSON: `auto` reads it, a calls-dialect run (what inference parses) does not.
    as_json = '{"agents": [{"id": "b", "kind": "cot", "task": "Solve it carefully."}]}'
    for dialect, expected in (("auto", 1.0), ("calls", 0.0), ("json", 1.0)):
        settings = RolloutSettings(dialect=dialect)  # type: ignore[arg-type]
        r = PlanRewards(PlanExecutor(default_registry(), RoleBackends(subagent=backend), settings))
        try:
            funcs = {f.__name__: f for f in r.reward_funcs()}
            assert funcs["validity"]([as_json], **rows(1)) == [expected]
            assert funcs["correctness"]([as_json], **rows(1)) == [expected]
        finally:
            r.close()


def test_each_executed_batch_is_logged_once_with_its_plans(backend: ScriptedBackend, tmp_path) -> None:
    import json

    from masorch.train.samples import SampleLog

    ex = PlanExecutor(default_registry(), RoleBackends(subagent=backend), RolloutSettings())
    log = tmp_path / "samples.jsonl"
    r = PlanRewards(ex, on_batch=SampleLog(log))
    try:
        cols = rows(3) | {"trainer_state": SimpleNamespace(global_step=7)}
        funcs = {f.__name__: f for f in r.reward_funcs()}
        funcs["correctness"]([COT, COT_B, "no plan here"], **dict(cols))
        funcs["cost"]([COT, COT_B, "no plan here"], **dict(cols))  # the same batch: no new lines
    finally:
        r.close()
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [(x["step"], x["plan"], x["valid"]) for x in lines] == [
        (7, COT, True),
        (7, COT_B, True),
        (7, "no plan here", False),
    ]
    assert lines[1]["status"] == "ok" and lines[1]["answer"] == "17" and lines[2]["status"] == "invalid_plan"


def test_subagent_models_run_their_kinds_on_another_model() -> None:
    from masorch.train.config import TrainConfig
    from masorch.train.grpo import plan_rewards

    big = ScriptedBackend(lambda m, c: "\\boxed{17}", name="big")
    small = ScriptedBackend(lambda m, c: "\\boxed{5}", name="small")
    cfg = TrainConfig(subagent="scripted:big", subagent_models={"cot": "scripted:small"})
    assert cfg.policy_system().agent_models == {"cot": "scripted:small"}  # evaluation runs them too
    r = plan_rewards(cfg, default_registry(), None, backends={"scripted:big": big, "scripted:small": small})
    try:
        (correctness, *_) = r.reward_funcs()
        assert correctness([COT, SC], **rows(2)) == [0.0, 1.0]  # cot on the small model, sc on the big
        assert (len(small.calls), len(big.calls)) == (1, 5)
    finally:
        r.close()
    typo = cfg.model_copy(update={"subagent_models": {"cott": "scripted:small"}})
    with pytest.raises(UsageError, match="cott"):
        plan_rewards(typo, default_registry(), None, backends={"scripted:big": big, "scripted:small": small})
