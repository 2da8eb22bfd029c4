"""The default registry: the built-in sub-agents, built fresh for each caller; and the one place
that decides which of them a run offers (:func:`offered_registry`)."""

from __future__ import annotations

from masorch.agents.base import AgentRegistry, SubAgent
from masorch.agents.cot import CotAgent
from masorch.agents.debate import DebateAgent
from masorch.agents.python import PythonAgent
from masorch.agents.reflexion import ReflexionAgent
from masorch.agents.review import ReviewAgent
from masorch.agents.sandbox import SandboxLimits, sandbox_available
from masorch.agents.sc import SelfConsistencyAgent
from masorch.agents.search import SearchAgent
from masorch.agents.signatures import AGENT_PROFILES, AgentProfileName, agent_profile_name


def default_registry(
    *,
    max_tokens: int = 2048,
    sandbox_limits: SandboxLimits | None = None,
    profile: AgentProfileName = "default",
) -> AgentRegistry:
    """The agents of an agent ``profile``, in catalogue order: ``default`` has cot, sc, debate,
    reflexion, search, python and review; ``paper`` the official MAS-Orchestra agents (cot, sc,
    debate, reflexion, search) with their settings (:data:`~masorch.agents.signatures.PAPER_PROFILE`).

    ``max_tokens`` caps each call's completion; ``sandbox_limits`` sets the python agent's sandbox
    (its ``wall_s`` is replaced per node by the plan's ``timeout_s``).
    """
    chosen = AGENT_PROFILES[agent_profile_name(profile)]
    sig = chosen.catalogue()
    built: list[SubAgent] = [
        CotAgent(max_tokens=max_tokens, signature=sig["cot"]),
        SelfConsistencyAgent(max_tokens=max_tokens, signature=sig["sc"]),
    ]
    inner = chosen.inner_temperature
    if inner is None:  # each agent's own temperatures
        built += [
            DebateAgent(max_tokens=max_tokens, signature=sig["debate"]),
            ReflexionAgent(max_tokens=max_tokens, signature=sig["reflexion"]),
            SearchAgent(max_tokens=max_tokens, signature=sig["search"]),
        ]
    else:
        built += [
            DebateAgent(
                max_tokens=max_tokens,
                signature=sig["debate"],
                speaker_temperature=inner,
                judge_temperature=inner,
            ),
            ReflexionAgent(max_tokens=max_tokens, signature=sig["reflexion"], temperature=inner),
            SearchAgent(max_tokens=max_tokens, signature=sig["search"], temperature=inner),
        ]
    if "python" in sig:
        built.append(PythonAgent(max_tokens=max_tokens, limits=sandbox_limits))
    if chosen.name == "default":
        built.append(ReviewAgent(max_tokens=max_tokens))
    return AgentRegistry(built)


def offered_registry(
    agents: AgentRegistry, *, retriever: bool, sandbox: bool | None = None, history: bool = False
) -> AgentRegistry:
    """The agents of ``agents`` this run can execute, which are all an orchestrator is offered.

    ``retriever``: the run has a document search (else no ``search``); ``sandbox``: programs can run
    (default: :func:`~masorch.agents.sandbox.sandbox_available`; else no ``python``); ``history``:
    calls can read the reasoning so far (the multi-round mode; else no ``review``). ``run``,
    ``eval`` and ``train`` call this, so the prompt, the grammar or schema and the validator's
    catalogue all list the same kinds.
    """
    available = {"retriever"} if retriever else set()
    if history:
        available.add("history")
    if sandbox_available() if sandbox is None else sandbox:
        available.add("sandbox")
    return agents.offered(available)
