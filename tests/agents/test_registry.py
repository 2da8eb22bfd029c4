"""The default registry of built-in sub-agents."""

from __future__ import annotations

import pytest

from masorch.agents import SubAgent, builtin_catalogue, default_registry
from masorch.errors import UsageError


def test_default_registry_has_the_plan_kinds_and_the_reviewer_with_their_signatures():
    registry = default_registry()
    kinds = ["cot", "sc", "debate", "reflexion", "search", "python", "review"]
    assert list(registry.catalogue()) == kinds
    assert registry.catalogue() == {**builtin_catalogue(), "review": registry.get("review").signature}
    for kind in registry.catalogue():
        assert isinstance(registry.get(kind), SubAgent)


def test_registries_are_independent():
    first, second = default_registry(), default_registry()
    assert first.get("cot") is not second.get("cot")
    with pytest.raises(UsageError):
        first.register(second.get("cot"))


def test_a_run_is_offered_only_the_kinds_it_can_execute():
    from masorch.agents import offered_registry

    every = default_registry()
    full = offered_registry(every, retriever=True, sandbox=True, history=True)
    assert list(full.catalogue()) == list(every.catalogue())
    plans = offered_registry(every, retriever=True, sandbox=True)  # a one-step plan has no history
    assert "review" not in plans and list(plans.catalogue()) == list(builtin_catalogue())
    bare = offered_registry(every, retriever=False, sandbox=False)
    assert list(bare.catalogue()) == ["cot", "sc", "debate", "reflexion"]
    assert "search" in offered_registry(every, retriever=True, sandbox=False)
    assert "python" in offered_registry(every, retriever=False, sandbox=True)


def test_an_agent_declares_what_it_needs():
    from masorch.agents import AgentRegistry, offered_registry
    from masorch.plan.catalogue import KindSignature

    class Lookup:
        signature = KindSignature(kind="lookup", summary="reads the corpus")
        requires = frozenset({"retriever"})

        async def run(self, node, ctx):  # pragma: no cover - never run
            raise AssertionError

    registry = AgentRegistry([default_registry().get("cot"), Lookup()])
    assert list(offered_registry(registry, retriever=False, sandbox=True).catalogue()) == ["cot"]
    assert "lookup" in offered_registry(registry, retriever=True, sandbox=True)


def test_the_sandbox_can_start_here():
    from masorch.agents.sandbox import sandbox_available

    assert sandbox_available()  # the test hosts are POSIX with an interpreter executable


def test_eval_and_train_offer_through_the_same_function():
    from masorch.run.environment import Environment, EnvSpec
    from masorch.train.config import SourceConfig, TrainConfig
    from masorch.train.grpo import train_agents

    env = Environment(EnvSpec())
    assert "search" not in env.offered_agents(retriever=False)
    assert "search" in env.offered_agents(retriever=True)
    assert env.offered_agents(retriever=False) is env.offered_agents(retriever=False)
    cfg = TrainConfig(train=[SourceConfig(kind="masbench_gen")])
    assert list(train_agents(cfg).catalogue()) == ["cot", "sc", "debate", "reflexion", "python"]
