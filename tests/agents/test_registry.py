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
    from masorch.agents.sandbox import missing_boundaries, sandbox_available

    if missing_boundaries():
        pytest.skip(f"this host gives the sandbox no {missing_boundaries()}")
    assert sandbox_available()  # the test hosts are POSIX with an interpreter executable


def test_python_is_not_offered_where_the_sandbox_has_no_network_boundary_unless_allowed(monkeypatch, caplog):
    from masorch.agents import offered_registry
    from masorch.agents import sandbox as sb

    monkeypatch.setattr(sb, "namespace_prefix", lambda: ())  # a host without user namespaces
    monkeypatch.delenv(sb.ALLOW_WEAK_ENV, raising=False)
    sb.sandbox_available.cache_clear()
    try:
        assert "python" not in offered_registry(default_registry(), retriever=False)
        assert "no network namespace" in caplog.text and sb.ALLOW_WEAK_ENV in caplog.text
        monkeypatch.setenv(sb.ALLOW_WEAK_ENV, "1")  # the deployment accepts the layers that remain
        sb.sandbox_available.cache_clear()
        assert "python" in offered_registry(default_registry(), retriever=False)
    finally:
        sb.sandbox_available.cache_clear()


def test_eval_and_train_offer_through_the_same_function():
    from masorch.agents.sandbox import sandbox_available
    from masorch.run.environment import Environment, EnvSpec
    from masorch.train.config import SourceConfig, TrainConfig
    from masorch.train.grpo import train_agents

    env = Environment(EnvSpec())
    assert "search" not in env.offered_agents(retriever=False)
    assert "search" in env.offered_agents(retriever=True)
    assert env.offered_agents(retriever=False) is env.offered_agents(retriever=False)
    cfg = TrainConfig(train=[SourceConfig(kind="masbench_gen")])
    python = ["python"] if sandbox_available() else []  # offered where the sandbox holds its boundaries
    assert list(train_agents(cfg).catalogue()) == ["cot", "sc", "debate", "reflexion", *python]


def test_the_paper_profile_is_the_official_agents_with_their_settings():
    from masorch.agents.signatures import PAPER_PROFILE, agent_profile_name
    from masorch.plan import AgentSpec, DoM, Plan, validate

    paper = default_registry(profile="paper")
    catalogue = paper.catalogue()
    assert (
        list(catalogue) == ["cot", "sc", "debate", "reflexion", "search"] == list(PAPER_PROFILE.catalogue())
    )
    defaults = {k: s.resolve({}) for k, s in catalogue.items()}
    assert defaults["cot"] == {"temperature": 0.5}
    assert defaults["sc"] == {"n": 5, "temperature": 0.5}
    assert defaults["debate"]["rounds"] == 5 and defaults["reflexion"] == {"max_rounds": 5}
    assert defaults["search"]["max_hops"] == 5
    # The official reader fails on a debate without roles, so the paper profile asks for them.
    plan = Plan(agents=(AgentSpec(id="d", kind="debate"),))
    assert [d.code for d in validate(plan, DoM.LOW, catalogue).diagnostics] == ["missing_param"]
    assert validate(plan, DoM.LOW, builtin_catalogue()).valid  # the default profile has default roles
    with pytest.raises(UsageError, match="unknown agent profile"):
        agent_profile_name("fancy")


async def test_paper_agents_sample_every_call_at_the_official_temperature(make_ctx):
    from masorch.agents.base import NodeInput

    debate = default_registry(profile="paper").get("debate")
    ctx = make_ctx([r"\boxed{1}"], cycle=True)
    out = await debate.run(NodeInput("d", "q", "", params={"roles": ["Al", "Bo"]}), ctx)
    assert out.answer == "1" and ctx.calls == 2 * 5 + 1  # 2 speakers x 5 rounds, then the judge
    assert {config.temperature for _, config in ctx.backend.calls} == {0.5}
    own = default_registry().get("debate")
    ctx = make_ctx([r"\boxed{1}"], cycle=True)
    await own.run(NodeInput("d", "q", "", params={"roles": ["Al", "Bo"]}), ctx)
    assert {config.temperature for _, config in ctx.backend.calls} == {0.7, 0.0}  # speakers, judge
