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
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masorch.agents.base import AgentRegistry, Retriever
from masorch.backends.base import Backend
from masorch.errors import MasorchError, UsageError
from masorch.eval.datasets import Sample
from masorch.eval.log import HARNESS_FAILED, RunLog, sample_key
from masorch.eval.scoring import Verdict, grade, make_scorer
from masorch.eval.sources import DataSource, index_dir_for
from masorch.eval.systems import SystemSpec
from masorch.plan import AgentSpec, DoM, Plan, ValidatedPlan, validate
from masorch.run.executor import Executor, RoleBackends
from masorch.run.orchestrate import OrchestrateOptions, orchestrate
from masorch.run.result import RunResult
from masorch.run.session import RunSession
from masorch.trace.events import Event, RunStarted
from masorch.trace.writer import CallbackSink

logger = logging.getLogger(__name__)

TRACE_FILE = "traces.jsonl"


def default_backend_factory(
    spec: str, cache_path: str | None = None, n_threads: int | None = None
) -> Backend:
    """A backend from a model string (:func:`masorch.backends.registry.make_backend`), cached if asked.

    ``n_threads`` sets an embedded (``local:``) model's CPU threads (default: all cores).
    """
    from masorch.backends.registry import BackendSettings, make_backend

    settings = BackendSettings(cache_path=Path(cache_path) if cache_path else None, n_threads=n_threads)
    return make_backend(spec, settings=settings)


def default_agents_factory(max_tokens: int | None = None) -> AgentRegistry:
    """The built-in sub-agents (``max_tokens`` caps each call's completion; None: their default)."""
    from masorch.agents import default_registry

    return default_registry() if max_tokens is None else default_registry(max_tokens=max_tokens)


def default_retriever_factory(corpus: Path) -> Retriever:
    """BM25 over a JSONL corpus; the index is built once and saved next to the corpus."""
    from masorch.agents.corpus import BM25Corpus

    return BM25Corpus.open(corpus, index_dir_for(corpus))


@dataclass(frozen=True)
class EnvSpec:
    """How a process builds what running needs: picklable, so Ray workers build the same things.

    ``backend_factory`` maps a model string to a Backend, ``agents_factory`` gives the sub-agent
    registry, ``retriever_factory`` a corpus path to a Retriever, ``scorer_factory`` a scorer name
    (with ``scorer_options``) to a scorer. Tests inject scripted backends here.
    """

    backend_factory: Callable[[str], Backend] = default_backend_factory
    agents_factory: Callable[[], AgentRegistry] = default_agents_factory
    retriever_factory: Callable[[Path], Retriever] = default_retriever_factory
    scorer_factory: Callable[..., Any] = make_scorer
    scorer_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def default(
        cls,
        *,
        cache_path: Path | None = None,
        max_tokens: int | None = None,
        scorer_options: Mapping[str, Mapping[str, Any]] | None = None,
        n_threads: int | None = None,
    ) -> EnvSpec:
        """The real environment; with ``cache_path`` every backend records/replays through that cache."""
        return cls(
            backend_factory=functools.partial(
                default_backend_factory,
                cache_path=str(cache_path) if cache_path else None,
                n_threads=n_threads,
            ),
            agents_factory=functools.partial(default_agents_factory, max_tokens),
            scorer_options=dict(scorer_options or {}),
        )


class Environment:
    """One process's backends (one per model string), agent registry, retrievers and scorers."""

    def __init__(self, spec: EnvSpec) -> None:
        self.spec = spec
        self._backends: dict[str, Backend] = {}
        self._retrievers: dict[Path, Retriever] = {}
        self._scorers: dict[str, Any] = {}
        self._agents: AgentRegistry | None = None
        self._plans: dict[str, ValidatedPlan] = {}
        self._lock = threading.Lock()

    def backend(self, model: str) -> Backend:
        """The shared backend of ``model`` (built on first use)."""
        with self._lock:
            if model not in self._backends:
                self._backends[model] = self.spec.backend_factory(model)
            return self._backends[model]

    def agents(self) -> AgentRegistry:
        """The sub-agent registry (built on first use)."""
        with self._lock:
            return self._agents_locked()

    def _agents_locked(self) -> AgentRegistry:
        if self._agents is None:
            self._agents = self.spec.agents_factory()
        return self._agents

    def sas_plan(self, system: SystemSpec) -> ValidatedPlan:
        """The validated one-node plan of a single-agent system (validated once per system)."""
        with self._lock:
            if system.name not in self._plans:
                checked = validate(sas_plan(system), DoM.HIGH, self._agents_locked().catalogue())
                if checked.validated is None:
                    problems = "; ".join(d.message for d in checked.diagnostics if d.is_error)
                    raise UsageError(
                        f"bad parameters for {system.name}: {problems}",
                        hint="fix the system's params (see the agent's signature in docs/agents.md)",
                    )
                self._plans[system.name] = checked.validated
            return self._plans[system.name]

    def retriever(self, corpus: Path) -> Retriever:
        """The retriever over ``corpus`` (indexed once per process)."""
        with self._lock:
            if corpus not in self._retrievers:
                self._retrievers[corpus] = self.spec.retriever_factory(corpus)
            return self._retrievers[corpus]

    def scorer(self, name: str) -> Any:
        """The scorer ``name`` (one instance per process)."""
        with self._lock:
            if name not in self._scorers:
                self._scorers[name] = self.spec.scorer_factory(name, **self.spec.scorer_options.get(name, {}))
            return self._scorers[name]

    async def aclose(self) -> None:
        """Close every backend and every scorer that holds resources (math-verify workers)."""
        for backend in self._backends.values():
            await backend.aclose()
        self._backends.clear()
        for scorer in self._scorers.values():
            close = getattr(scorer, "close", None)
            if callable(close):
                close()
        self._scorers.clear()


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


def sas_plan(system: SystemSpec) -> Plan:
    """The one-node plan of a single-agent baseline: its kind on the whole question."""
    return Plan(agents=(AgentSpec(id="solver", kind=system.variant, task="", params=dict(system.params)),))


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
        max_plan_tokens=system.plan_tokens,
        budget=system.budget,
        deadline_s=system.timeout_s,
        node_timeout_s=system.node_timeout_s,
    )
    return await orchestrate(
        question,
        orchestrator=env.backend(system.orchestrator_model),
        backends=roles,
        agents=agents,
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
    verdict: Verdict | None = None
    status, error = HARNESS_FAILED, ""
    try:
        retriever = env.retriever(item.corpus) if item.corpus is not None else None
        result = await run_system(item.system, sample.question, env, trace=sink, retriever=retriever)
        status, error = result.status, result.error
        if result.ok:
            scorer = env.scorer(item.scorer)
            prediction = full_reply(result) if item.scorer == "masbench" else result.answer
            verdict = await grade(scorer, prediction, sample)
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
                    logger.warning("backend %s could not be built: %s", model, exc)
        await run_local(items, env, record, concurrency=concurrency)
    finally:
        await env.aclose()
