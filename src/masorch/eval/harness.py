"""The evaluation harness: systems x datasets x samples, run concurrently, logged as they finish.

Every unit of work (one system on one sample) is a :class:`WorkItem`. :func:`run_item` runs it and
always returns a record, never raises: a run that ends badly is its status (``error``, ``timeout``,
``budget``, ``invalid_plan``) and a harness failure (a backend that cannot be built, a scorer that
crashes) is status ``failed`` with the error, so every sample is counted. :func:`evaluate` skips the
keys a resumed log already has, runs the rest with at most ``concurrency`` in flight (locally on
one event loop, or as Ray tasks), and appends each record to the log the moment it is done.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.agents.base import Retriever
from masorch.errors import MasorchError
from masorch.eval.datasets import Sample
from masorch.eval.environment import (
    Environment,
    EnvSpec,
    default_agents_factory,
    default_backend_factory,
    default_retriever_factory,
    sas_plan,
)
from masorch.eval.log import HARNESS_FAILED, RunLog, sample_key
from masorch.eval.scoring import MASBENCH_SCORERS
from masorch.eval.sources import DataSource
from masorch.eval.systems import SystemSpec
from masorch.plan import DoM
from masorch.redact import redact
from masorch.run.executor import Executor, RoleBackends
from masorch.run.orchestrate import OrchestrateOptions, orchestrate
from masorch.run.result import RunResult
from masorch.run.session import RunSession
from masorch.score.scorer import Score, score_async
from masorch.trace.events import Event, RunStarted
from masorch.trace.writer import CallbackSink

logger = logging.getLogger(__name__)

__all__ = [
    "EnvSpec",
    "Environment",
    "EvalOptions",
    "Tally",
    "WorkItem",
    "default_agents_factory",
    "default_backend_factory",
    "default_retriever_factory",
    "evaluate",
    "failed_record",
    "run_item",
    "run_local",
    "run_system",
    "sas_plan",
    "work_items",
]

TRACE_FILE = "traces.jsonl"


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


def full_reply(result: RunResult) -> str:
    """The sink node's whole reply (all its boxed answers), else the run's answer."""
    plan = result.plan
    if plan is not None and plan.agents:
        sources = {f.src for f in plan.flows}
        sinks = [a.id for a in plan.agents if a.id not in sources]
        if len(sinks) == 1 and sinks[0] in result.node_results:
            rationale = result.node_results[sinks[0]].rationale
            if rationale:
                return rationale
    if "solver" in result.node_results and result.node_results["solver"].rationale:
        return result.node_results["solver"].rationale
    return result.answer


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
            prediction = full_reply(result) if item.scorer in MASBENCH_SCORERS else result.answer
            verdict = await score_async(scorer, prediction, sample)
    except Exception as exc:  # a harness failure is recorded as this sample's status, and counted
        logger.warning("sample %s failed: %s: %s", item.key, type(exc).__name__, exc)
        status, error = HARNESS_FAILED, f"{type(exc).__name__}: {exc}"
    wall = time.monotonic() - t0
    usage = result.usage if result is not None else None
    record = {
        "key": item.key,
        "system": item.system.name,
        "dataset": item.dataset,
        "sample_id": sample.id,
        "axis": sample.meta.get("axis"),
        "value": sample.meta.get("value"),
        "status": status,
        "answer": result.answer if result is not None else "",
        "gold": sample.answer,
        "correct": bool(verdict.correct) if verdict is not None else False,
        "score": float(verdict.value) if verdict is not None else 0.0,
        "details": dict(verdict.details) if verdict is not None else {},
        "error": error,
        "calls": usage.calls if usage else 0,
        "prompt_tokens": usage.prompt_tokens if usage else 0,
        "completion_tokens": usage.completion_tokens if usage else 0,
        "cost": usage.cost if usage else 0.0,
        "wall_s": round(wall, 4),
        "trace_id": result.run_id if result is not None else "",
        "plan_kinds": [a.kind for a in result.plan.agents] if result is not None and result.plan else [],
        "worker": f"{socket.gethostname()}:{os.getpid()}",
        "finished_at": time.time(),
    }
    return record, events


def failed_record(item: WorkItem, error: str, wall_s: float = 0.0) -> dict[str, Any]:
    """The record of an item the harness could not run at all (status ``failed``)."""
    return {
        "key": item.key,
        "system": item.system.name,
        "dataset": item.dataset,
        "sample_id": item.sample.id,
        "axis": item.sample.meta.get("axis"),
        "value": item.sample.meta.get("value"),
        "status": HARNESS_FAILED,
        "answer": "",
        "gold": item.sample.answer,
        "correct": False,
        "score": 0.0,
        "details": {},
        "error": error,
        "calls": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost": 0.0,
        "wall_s": round(wall_s, 4),
        "trace_id": "",
        "plan_kinds": [],
        "worker": "",
        "finished_at": time.time(),
    }


@dataclass
class Tally:
    """Running totals for the progress display: done/total, correct, not ok (any status but ok), cost."""

    total: int
    done: int = 0
    correct: int = 0
    not_ok: int = 0
    cost: float = 0.0
    tokens: int = 0

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one finished record."""
        self.done += 1
        self.correct += bool(record.get("correct"))
        self.not_ok += record.get("status") != "ok"
        self.cost += float(record.get("cost") or 0.0)
        self.tokens += int(record.get("prompt_tokens") or 0) + int(record.get("completion_tokens") or 0)

    @property
    def accuracy(self) -> float:
        """Correct over done (0 before the first)."""
        return self.correct / self.done if self.done else 0.0


Recorder = Callable[[dict[str, Any], list[Event]], None]


async def run_local(
    items: Iterable[WorkItem], env: Environment, record: Recorder, *, concurrency: int
) -> None:
    """Run items on this event loop with at most ``concurrency`` in flight, recording each at once.

    ``concurrency`` workers pull items from one iterator, so a run of any size holds only the
    items in flight (not one pending task per sample).
    """
    queue = iter(items)

    async def worker() -> None:
        for item in queue:
            rec, events = await run_item(item, env)
            record(rec, events)

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))


class TraceFile:
    """Appends each finished sample's events to ``traces.jsonl`` as one block (thread-safe)."""

    def __init__(self, path: Path | None) -> None:
        self._fh = path.open("a", encoding="utf-8") if path is not None else None
        self._lock = threading.Lock()

    def write(self, events: Sequence[Event]) -> None:
        """Write the events, one JSON object per line."""
        if self._fh is None or not events:
            return
        text = "".join(e.model_dump_json() + "\n" for e in events)
        with self._lock:
            self._fh.write(text)
            self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        if self._fh is not None:
            self._fh.close()


@dataclass(frozen=True)
class EvalOptions:
    """How a run goes: ``concurrency`` items in flight, resume, retries of failures, traces, Ray."""

    concurrency: int = 8
    resume: bool = False
    retry_failed: bool = False
    traces: bool = True
    ray_address: str | None = None
    use_ray: bool = False


def evaluate(
    systems: Sequence[SystemSpec],
    sources: Sequence[DataSource],
    out: Path,
    *,
    options: EvalOptions | None = None,
    env_spec: EnvSpec | None = None,
    on_record: Callable[[dict[str, Any], Tally], None] | None = None,
    on_start: Callable[[Tally], None] | None = None,
) -> Tally:
    """Run every system on every sample not yet in ``out/log.jsonl``; returns the run's tally.

    ``on_start`` sees the tally of what the log already holds before anything runs; ``on_record``
    each new record with the updated tally (for a progress display).
    """
    opts = options or EvalOptions()
    spec = env_spec or EnvSpec()
    header = {
        "systems": [s.to_dict() for s in systems],
        "datasets": [src.describe() for src in sources],
        "started": time.time(),
    }
    with RunLog.create(out, header, resume=opts.resume) as log:
        done = log.done_keys(retry_failed=opts.retry_failed)
        items = [i for i in work_items(systems, sources) if i.key not in done]
        tally = Tally(total=len(items) + len(done))
        for rec in log.records:
            if rec["key"] in done:
                tally.add(rec)
        if on_start is not None:
            on_start(tally)
        traces = TraceFile(out / TRACE_FILE if opts.traces else None)
        lock = threading.Lock()

        def record(rec: dict[str, Any], events: list[Event]) -> None:
            traces.write(events)
            log.append(rec)
            with lock:
                tally.add(rec)
            if on_record is not None:
                on_record(rec, tally)

        try:
            if opts.use_ray:
                from masorch.eval.ray_runner import run_ray

                run_ray(items, spec, record, concurrency=opts.concurrency, address=opts.ray_address)
            else:
                asyncio.run(_run_local_env(items, spec, record, opts.concurrency, systems))
        finally:
            traces.close()
    return tally


async def _run_local_env(
    items: list[WorkItem], spec: EnvSpec, record: Recorder, concurrency: int, systems: Sequence[SystemSpec]
) -> None:
    env = Environment(spec)
    try:
        if items:
            # Check every system and build every backend first: bad parameters or a malformed
            # model string stop the run with their usage error, not every sample one by one.
            for system in systems:
                if system.is_sas:
                    env.sas_plan(system)
            for model in dict.fromkeys(m for s in systems for m in s.model_strings()):
                try:
                    env.backend(model)
                except MasorchError:
                    raise
                except Exception as exc:  # not a usage error: each sample records it as `failed`
                    logger.warning("backend %s could not be built: %s", redact(model), redact(str(exc)))
        await run_local(items, env, record, concurrency=concurrency)
    finally:
        await env.aclose()
