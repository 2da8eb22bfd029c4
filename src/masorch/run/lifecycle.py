"""The one run path: :func:`run` answers a question with a :class:`~masorch.run.system.System`.

``masorch run``, the eval harness and the coming ``serve`` call :func:`run`; it builds what the
system needs from the :class:`~masorch.run.environment.Environment` (backends per role, the agents
the run can execute, the retriever of a corpus) and hands over to the system's mode: one sub-agent
on the whole question (``sas``), a one-step plan checked and executed (``mas:low|high``,
:func:`~masorch.run.orchestrate.orchestrate`), or rounds of agents as tools (``mas:rounds``,
:func:`~masorch.run.rounds.run_rounds`). Each mode runs inside
:meth:`~masorch.run.session.RunSession.run`, the one lifecycle (run_started, the mode, run_finished).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from masorch.agents.base import AgentRegistry
from masorch.errors import UsageError
from masorch.run.environment import Environment
from masorch.run.executor import run_plan
from masorch.run.orchestrate import OrchestrateOptions, orchestrate
from masorch.run.result import RunResult
from masorch.run.rounds import PoolEntry, RoundsOptions, run_rounds
from masorch.run.system import System
from masorch.trace.writer import TraceSink


async def run(
    system: System,
    question: str,
    env: Environment,
    *,
    trace: TraceSink | None = None,
    corpus: Path | None = None,
) -> RunResult:
    """Answer ``question`` with ``system``; its events go to ``trace``.

    ``corpus`` (a JSONL file or a saved index) gives the run a retriever, so ``search`` is offered.
    Backend, budget and deadline problems end the run with their status (:class:`RunResult`);
    a bad system or environment (unknown kind, bad parameters) raises a UsageError.
    """
    retriever = env.retriever(corpus) if corpus is not None else None
    roles = env.roles(system)
    if system.is_sas:
        validated = env.sas_plan(system, retriever=retriever is not None)
        result = await run_plan(
            validated,
            question,
            agents=env.agents(),
            backends=roles,
            budget=system.budget,
            trace=trace,
            timeout_s=system.timeout_s,
            node_timeout_s=system.node_timeout_s,
            retriever=retriever,
            mode=system.label,
        )
        return dataclasses.replace(result, plan=validated.plan)
    agents = env.offered_agents(retriever=retriever is not None, history=system.mode == "rounds")
    orchestrator = env.backend(system.orchestrator_model)
    check_agent_models(system.agent_models, agents)
    if system.mode == "rounds":
        return await run_rounds(
            question,
            orchestrator=orchestrator,
            backends=roles,
            agents=agents,
            options=RoundsOptions.of(system, faults=env.spec.faults),
            trace=trace,
            retriever=retriever,
            pool={n: PoolEntry(env.backend(p.model), p.description) for n, p in system.pool.items()},
            synthesis=env.backend(system.synthesis) if system.synthesis else None,
        )
    return await orchestrate(
        question,
        orchestrator=orchestrator,
        backends=roles,
        agents=agents,
        options=OrchestrateOptions.of(system),
        trace=trace,
        retriever=retriever,
    )


def check_agent_models(agent_models: Mapping[str, str], agents: AgentRegistry) -> None:
    """A UsageError naming the kinds ``agent_models`` sets a model for that ``agents`` does not offer
    (the one check for a run's ``agent_models`` and a training config's ``subagent_models``)."""
    unknown = sorted(k for k in agent_models if k not in agents)
    if unknown:
        raise UsageError(
            f"agent models are set for kinds this run cannot offer: {', '.join(unknown)}",
            hint=f"kinds: {', '.join(agents.catalogue())}",
        )
