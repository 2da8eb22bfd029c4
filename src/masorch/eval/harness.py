"""The evaluation harness: systems x datasets x samples, run concurrently, logged as they finish.

Every unit of work (one system on one sample) is a :class:`~masorch.eval.item.WorkItem`, run and
graded by :func:`~masorch.eval.item.run_item` (re-exported here), which always returns a record and
never raises, so every sample is counted. :func:`evaluate` skips the
keys a resumed log already has, runs the rest with at most ``concurrency`` in flight (locally on
one event loop, or as Ray tasks), and appends each record to the log the moment it is done.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from masorch.eval.datasets import Sample
from masorch.eval.item import Recorder, WorkItem, failed_record, regrade_all, run_item, work_items
from masorch.eval.log import ERROR_STATUSES, LOG_FILE, RunLog
from masorch.eval.sources import DataSource
from masorch.redact import redact
from masorch.run.environment import Environment, EnvSpec
from masorch.run.system import System
from masorch.trace.events import Event

if TYPE_CHECKING:
    from masorch.eval.ray_runner import RayPool

logger = logging.getLogger(__name__)

__all__ = [
    "ERROR_STATUSES",
    "EnvSpec",
    "Environment",
    "EvalOptions",
    "Tally",
    "WorkItem",
    "evaluate",
    "failed_record",
    "run_item",
    "run_local",
    "work_items",
]

TRACE_FILE = "traces.jsonl"


#: The statuses of a sample that ended in an error (a run's, or the harness's ``failed``), not a verdict.


@dataclass
class Tally:
    """Running totals for the progress display: done/total, correct, not ok (any status but ok), cost;
    ``errors`` counts the samples that ended in an error (:data:`ERROR_STATUSES`) and ``first_error``
    is the first one's message, redacted ("" before one)."""

    total: int
    done: int = 0
    correct: int = 0
    not_ok: int = 0
    cost: float = 0.0
    tokens: int = 0
    errors: int = 0
    first_error: str = ""

    def add(self, record: Mapping[str, Any]) -> None:
        """Count one finished record."""
        self.done += 1
        self.correct += bool(record.get("correct"))
        self.not_ok += record.get("status") != "ok"
        if record.get("status") in ERROR_STATUSES:
            self.errors += 1
            self.first_error = self.first_error or redact(str(record.get("error") or "(no message)"))
        self.cost += float(record.get("cost") or 0.0)
        self.tokens += int(record.get("prompt_tokens") or 0) + int(record.get("completion_tokens") or 0)

    @property
    def accuracy(self) -> float:
        """Correct over done (0 before the first)."""
        return self.correct / self.done if self.done else 0.0


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

    def __init__(self, path: Path | None, *, fresh: bool = False) -> None:
        # A run with no logged sample starts the file anew: traces left by a run whose log was
        # removed belong to no sample of this one.
        mode = "w" if fresh else "a"
        self._fh = path.open(mode, encoding="utf-8") if path is not None else None
        self._lock = threading.Lock()

    def write(self, events: Sequence[Event]) -> None:
        """Write the events, one JSON object per line."""
        if self._fh is None or not events:
            return
        text = "".join(e.json_line() + "\n" for e in events)
        with self._lock:
            self._fh.write(text)
            self._fh.flush()

    def close(self) -> None:
        """Close the file."""
        if self._fh is not None:
            self._fh.close()


@dataclass(frozen=True)
class EvalOptions:
    """How a run goes: ``concurrency`` items in flight, resume, retries of failures, traces, Ray, and
    the datasets whose items run ``first`` (:func:`~masorch.eval.item.work_items`). ``settings``
    are what else shapes the answers outside the systems and datasets (the CLI's agent profile,
    completion cap, context size, judge model): kept in the log's header and checked on a resume,
    so that a run is not resumed under other settings and mixed."""

    concurrency: int = 8
    resume: bool = False
    retry_failed: bool = False
    traces: bool = True
    ray_address: str | None = None
    use_ray: bool = False
    first: tuple[str, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    #: The run's seed (its ``--sample`` choice and its report's bootstrap), kept in the header.
    seed: int = 0


def evaluate(
    systems: Sequence[System],
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
        "settings": dict(opts.settings),
        "seed": opts.seed,
        "started": time.time(),
    }
    every = work_items(systems, sources, opts.first)  # a bad --first fails before the log is touched
    env = Environment(spec)
    pool: RayPool | None = None

    def check(to_run: Sequence[WorkItem]) -> None:
        nonlocal pool
        _check_systems(env, systems, to_run, local=not opts.use_ray)
        if opts.use_ray:
            from masorch.eval.ray_runner import RayPool

            models = [m for s in systems for m in s.model_strings()]
            pool = RayPool.start(
                spec,
                concurrency=opts.concurrency,
                n_items=len(to_run),
                models=models,
                address=opts.ray_address,
            )

    started = (out / LOG_FILE).is_file()
    try:
        if not started:
            # A new run checks what it was given before its log exists: a failed start must not leave
            # a header that turns the corrected rerun into "already holds a run".
            check(every)
        with RunLog.create(out, header, resume=opts.resume) as log:
            if log.records:
                asyncio.run(_regrade(log, every, spec))
            done = log.done_keys(retry_failed=opts.retry_failed)
            items = [i for i in every if i.key not in done]
            if started and items:  # a resumed run checks only when it has samples left to run
                check(items)
            tally = Tally(total=len(items) + len(done))
            for rec in log.records:
                if rec["key"] in done:
                    tally.add(rec)
            if on_start is not None:
                on_start(tally)
            traces = TraceFile(out / TRACE_FILE if opts.traces else None, fresh=not log.records)
            lock = threading.Lock()

            def record(rec: dict[str, Any], events: list[Event]) -> None:
                traces.write(events)
                log.append(rec)
                with lock:
                    tally.add(rec)
                if on_record is not None:
                    on_record(rec, tally)

            try:
                if pool is not None:
                    pool.run(items, record)
                elif not opts.use_ray:
                    asyncio.run(_run_local_env(items, env, record, opts.concurrency))
            finally:
                traces.close()
    finally:
        if pool is not None:
            pool.close()
        asyncio.run(env.aclose())  # nothing left to close after a local run, which closed it on its loop
    return tally


async def _regrade(log: RunLog, items: Sequence[WorkItem], spec: EnvSpec) -> None:
    """Grade a resumed log's records again with today's scorers (:func:`regrade_all`): a verdict
    that changed since it was logged (a scorer fixed) is logged again, the earlier one kept in it."""
    by_key = {item.key: item for item in items}

    def find(rec: dict[str, Any]) -> tuple[Sample, str] | None:
        item = by_key.get(rec["key"])
        return (item.sample, item.scorer) if item is not None else None

    changed = [again for _, again in await regrade_all(log.records, find, spec) if again is not None]
    for again in changed:
        log.append({k: v for k, v in again.items() if k != "type"})
    if changed:
        logger.warning("%d logged verdicts changed when graded again by today's scorers", len(changed))


def _check_systems(
    env: Environment, systems: Sequence[System], items: Sequence[WorkItem], *, local: bool
) -> None:
    """Check every system, and for a ``local`` run build every backend, before the log is written:
    bad parameters or a model that cannot be built (a malformed string, an unknown local model, a
    missing API key) stop the run with their usage error, not every sample one by one. Ray workers
    build their own backends and offer the kinds their own host can run, so a Ray run checks only
    the parameters here."""
    for system in (s for s in systems if s.is_sas):
        # Locally, also whether this host can offer its kind, with and without the run's corpora.
        corpora = {item.corpus is not None for item in items if item.system.name == system.name}
        for retriever in corpora if local else {None}:
            env.sas_plan(system, retriever=retriever)
    if local:  # a failure that is not a usage error: each sample records it as `failed`
        env.build_backends(m for s in systems for m in s.model_strings())


async def _run_local_env(items: list[WorkItem], env: Environment, record: Recorder, concurrency: int) -> None:
    try:
        await run_local(items, env, record, concurrency=concurrency)
    finally:
        await env.aclose()
