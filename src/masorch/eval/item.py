"""One unit of an evaluation: one system run on one sample, graded, as a log record. Never raises.

Every unit of work is a :class:`WorkItem`. :func:`run_item` runs it and always returns a record
(an :class:`~masorch.eval.record.EvalRecord` as its JSON object): a run that ends badly is its
status (``error``, ``timeout``, ``budget``, ``invalid_plan``) and a harness failure (a backend that
cannot be built, a scorer that crashes) is status ``failed`` with the error, so every sample is
counted. The harness (:mod:`masorch.eval.harness`) and the Ray runner (:mod:`masorch.eval.ray_runner`)
both run items through here.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.agents.base import Retriever
from masorch.eval.datasets import Sample
from masorch.eval.environment import (
    Environment,
)
from masorch.eval.log import HARNESS_FAILED, sample_key
from masorch.eval.record import EvalRecord
from masorch.eval.sources import DataSource
from masorch.eval.systems import SystemSpec
from masorch.plan import DoM
from masorch.run.executor import Executor, RoleBackends
from masorch.run.orchestrate import OrchestrateOptions, orchestrate
from masorch.run.result import RunResult
from masorch.run.session import RunSession
from masorch.score.registry import reads_reply
from masorch.score.scorer import Score, score_async
from masorch.trace.events import Event, RunStarted
from masorch.trace.writer import CallbackSink

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkItem:
    """One system on one sample of one dataset."""

    system: SystemSpec
    dataset: str
    sample: Sample
    scorer: str
    corpus: Path | None = None

    @property
    def key(self) -> str:
        """The log key of this item."""
        return sample_key(self.system.name, self.dataset, self.sample.id)


def work_items(systems: Sequence[SystemSpec], sources: Sequence[DataSource]) -> list[WorkItem]:
    """Every (system, sample) pair, dataset by dataset, sample-major so systems progress together."""
    return [
        WorkItem(system, src.name, sample, src.scorer, src.corpus)
        for src in sources
        for sample in src.samples
        for system in systems
    ]


def _roles(system: SystemSpec, env: Environment) -> RoleBackends:
    return RoleBackends(
        subagent=env.backend(system.model),
        per_kind={k: env.backend(m) for k, m in system.agent_models.items()},
        judge=env.backend(system.judge) if system.judge else None,
    )


async def run_system(
    system: SystemSpec,
    question: str,
    env: Environment,
    *,
    trace: CallbackSink | None = None,
    retriever: Retriever | None = None,
) -> RunResult:
    """Run ``system`` on ``question``: one sub-agent directly (sas) or orchestrate-then-execute (mas)."""
    agents = env.agents()
    roles = _roles(system, env)
    if system.is_sas:
        validated = env.sas_plan(system)
        session = RunSession(system.budget, trace=trace, deadline_s=system.timeout_s)
        session.emit(
            RunStarted,
            question=question,
            mode=f"sas:{system.variant}",
            models={"subagent": roles.subagent.model_id},
            budget={k: v for k, v in vars(system.budget).items()},
        )
        executor = Executor(agents, roles, session, node_timeout_s=system.node_timeout_s, retriever=retriever)
        result = await executor.execute(validated, question)
        session.finish(result)
        return dataclasses.replace(result, plan=validated.plan)
    options = OrchestrateOptions(
        dom=DoM(system.variant),
        dialect=system.dialect,  # type: ignore[arg-type]  # checked by SystemSpec
        repair=system.repair,
        constrain=system.constrain,
        max_plan_tokens=system.plan_tokens,
        budget=system.budget,
        deadline_s=system.timeout_s,
        node_timeout_s=system.node_timeout_s,
    )
    return await orchestrate(
        question,
        orchestrator=env.backend(system.orchestrator_model),
        backends=roles,
        agents=env.offered_agents(retriever=retriever is not None),
        options=options,
        trace=trace,
        retriever=retriever,
    )


async def run_item(item: WorkItem, env: Environment) -> tuple[dict[str, Any], list[Event]]:
    """Run and grade one item; the log record and the run's trace events. Never raises."""
    events: list[Event] = []
    sink = CallbackSink(events.append)
    sample = item.sample
    t0 = time.monotonic()
    result: RunResult | None = None
    verdict: Score | None = None
    status, error = HARNESS_FAILED, ""
    try:
        retriever = env.retriever(item.corpus) if item.corpus is not None else None
        result = await run_system(item.system, sample.question, env, trace=sink, retriever=retriever)
        status, error = result.status, result.error
        if result.ok:
            scorer = env.scorer(item.scorer)
            prediction = result.reply if reads_reply(item.scorer) else result.answer
            verdict = await score_async(scorer, prediction, sample)
    except Exception as exc:  # a harness failure is recorded as this sample's status, and counted
        logger.warning("sample %s failed: %s: %s", item.key, type(exc).__name__, exc)
        status, error = HARNESS_FAILED, f"{type(exc).__name__}: {exc}"
    wall = time.monotonic() - t0
    usage = result.usage if result is not None else None
    record = EvalRecord(
        key=item.key,
        system=item.system.name,
        dataset=item.dataset,
        sample_id=sample.id,
        axis=sample.meta.get("axis"),
        value=sample.meta.get("value"),
        status=status,
        answer=result.answer if result is not None else "",
        gold=sample.answer,
        correct=bool(verdict.correct) if verdict is not None else False,
        score=float(verdict.value) if verdict is not None else 0.0,
        details=dict(verdict.details) if verdict is not None else {},
        error=error,
        calls=usage.calls if usage else 0,
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else 0,
        cost=usage.cost if usage else 0.0,
        wall_s=round(wall, 4),
        trace_id=result.run_id if result is not None else "",
        plan_kinds=[a.kind for a in result.plan.agents] if result is not None and result.plan else [],
        worker=f"{socket.gethostname()}:{os.getpid()}",
    )
    return record.to_json(), events


def failed_record(item: WorkItem, error: str, wall_s: float = 0.0) -> dict[str, Any]:
    """The record of an item the harness could not run at all (status ``failed``)."""
    record = EvalRecord(
        key=item.key,
        system=item.system.name,
        dataset=item.dataset,
        sample_id=item.sample.id,
        axis=item.sample.meta.get("axis"),
        value=item.sample.meta.get("value"),
        status=HARNESS_FAILED,
        gold=item.sample.answer,
        error=error,
        wall_s=round(wall_s, 4),
    )
    return record.to_json()


#: Takes each finished item's record (its ``log.jsonl`` object) and trace events.
Recorder = Callable[[dict[str, Any], list[Event]], None]
