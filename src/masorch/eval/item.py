"""One unit of an evaluation: one system run on one sample, graded, as a log record. Never raises.

Every unit of work is a :class:`WorkItem`. :func:`run_item` runs it and always returns a record
(an :class:`~masorch.eval.record.EvalRecord` as its JSON object): a run that ends badly is its
status (``error``, ``timeout``, ``budget``, ``invalid_plan``) and a harness failure (a backend that
cannot be built, a scorer that crashes) is status ``failed`` with the error, so every sample is
counted. The harness (:mod:`masorch.eval.harness`) and the Ray runner (:mod:`masorch.eval.ray_runner`)
both run items through here.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.eval.datasets import Sample
from masorch.eval.log import HARNESS_FAILED, sample_key
from masorch.eval.record import EvalRecord
from masorch.eval.sources import DataSource
from masorch.run.environment import Environment, EnvSpec
from masorch.run.lifecycle import run
from masorch.run.result import RunResult
from masorch.run.system import System
from masorch.score.registry import PURE_SCORERS, canonical_scorer, graded_text, reads_reply
from masorch.score.scorer import Score, score_async
from masorch.trace.events import Event, LlmCall
from masorch.trace.writer import CallbackSink

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkItem:
    """One system on one sample of one dataset."""

    system: System
    dataset: str
    sample: Sample
    scorer: str
    corpus: Path | None = None

    @property
    def key(self) -> str:
        """The log key of this item."""
        return sample_key(self.system.name, self.dataset, self.sample.id)


def work_items(
    systems: Sequence[System], sources: Sequence[DataSource], first: Sequence[str] = ()
) -> list[WorkItem]:
    """Every (system, sample) pair, in an order whose every prefix covers every cell evenly.

    A cell is a dataset, or one (axis, value) of a MASBench file. The cells take turns, one sample
    each (the first sample of every cell, then the second of every cell, ...), and all systems run
    on a sample before the next one starts, so an evaluation stopped part way (and resumed later)
    has paired results spread over every cell rather than the whole of the first dataset.

    ``first`` names datasets (as records name them: ``math500-subset``, ``masbench:depth``) whose
    items run before the others, in that order; within them and among the rest the order above
    holds. It changes the order only, never what runs. An unknown name is a UsageError.
    """
    cells: dict[tuple[int, Any, Any], list[tuple[DataSource, Sample]]] = {}
    for index, src in enumerate(sources):
        for sample in src.samples:
            cell = (index, sample.meta.get("axis"), sample.meta.get("value"))
            cells.setdefault(cell, []).append((src, sample))
    turns = itertools.zip_longest(*cells.values())
    items = [
        WorkItem(system, src.name, sample, src.scorer, src.corpus)
        for turn in turns
        for src, sample in (pair for pair in turn if pair is not None)
        for system in systems
    ]
    names = list(dict.fromkeys(src.name for src in sources))
    unknown = [name for name in first if name not in names]
    if unknown:
        raise UsageError(
            f"--first names no dataset of this run: {', '.join(unknown)}",
            hint=f"use one of: {', '.join(names)}",
        )
    rank = {name: i for i, name in enumerate(dict.fromkeys(first))}
    return sorted(items, key=lambda item: rank.get(item.dataset, len(rank)))  # stable: order kept


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
        result = await run(item.system, sample.question, env, trace=sink, corpus=item.corpus)
        status, error = result.status, result.error
        verdict = await grade(result, sample, item.scorer, env)
    except Exception as exc:  # a harness failure is recorded as this sample's status, and counted
        logger.warning("sample %s failed: %s: %s", item.key, type(exc).__name__, exc)
        status, error = HARNESS_FAILED, f"{type(exc).__name__}: {exc}"
    wall = time.monotonic() - t0
    usage = result.usage if result is not None else None
    trajectory = result.trajectory if result is not None else None
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
        rounds=len(trajectory.rounds) if trajectory is not None else None,
        units=trajectory.units if trajectory is not None else 0.0,
        tool_statuses=trajectory.statuses() if trajectory is not None else {},
        tools_ran=trajectory.tools_ran() if trajectory is not None else {},
        rounds_without_calls=trajectory.rounds_without_calls if trajectory is not None else None,
        undelivered_calls=trajectory.undelivered_calls if trajectory is not None else None,
        ended_by=trajectory.ended_by if trajectory is not None else "",
        final_call=trajectory.final_call if trajectory is not None else None,
        truncated_calls=sum(isinstance(e, LlmCall) and e.finish == "length" for e in events),
        worker=f"{socket.gethostname()}:{os.getpid()}",
    )
    return record.to_json(), events


async def grade(result: RunResult, sample: Sample, scorer: str, env: Environment) -> Score | None:
    """The scorer ``scorer``'s verdict on a run's answer to ``sample`` (None when the run is not ok).

    What it grades is :func:`masorch.score.registry.graded_text` of the run, as in training's
    rewards: eval grades, and training keeps or rewards, the same text.
    """
    if not result.ok:
        return None
    return await score_async(env.scorer(scorer), graded_text(scorer, result.answer, result.reply), sample)


async def regrade(
    record: dict[str, Any], sample: Sample, scorer: str, env: Environment
) -> dict[str, Any] | None:
    """A logged run (an eval record, a collected attempt) graded again by ``scorer`` as it is now,
    from its logged answer: a copy with the new verdict (the earlier one under ``regraded``) when
    it changed, else None. A run that did not end ``ok`` has no verdict, and the reply a reply
    scorer grades is logged only as a multi-round run's answer (:attr:`RunResult.reply`): the
    others are left as they are (None), as are verdicts of a judge model (only
    :data:`~masorch.score.registry.PURE_SCORERS` grade again) and comparisons that time out or fail.
    """
    if record.get("status") != "ok" or (reads_reply(scorer) and record.get("rounds") is None):
        return None
    if canonical_scorer(scorer) not in PURE_SCORERS:
        return None  # a judge model's verdict is not asked again (cost, and it may drift)
    verdict = await score_async(
        env.scorer(scorer), graded_text(scorer, str(record.get("answer", ""))), sample
    )
    if verdict.details.get("undecided"):
        return None  # a comparison that timed out or failed keeps the logged verdict
    if bool(verdict.correct) == bool(record.get("correct")) and float(verdict.value) == record.get("score"):
        return None
    earlier = {k: record.get(k) for k in ("correct", "score", "details") if k in record}
    return {
        **record,
        "correct": bool(verdict.correct),
        "score": float(verdict.value),
        "details": dict(verdict.details),
        "regraded": earlier,
    }


async def regrade_all(
    records: Sequence[dict[str, Any]],
    find: Callable[[dict[str, Any]], tuple[Sample, str] | None],
    spec: EnvSpec,
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each of ``records`` with its :func:`regrade` (None: the verdict stands), graded in one
    environment of ``spec``; ``find`` gives a record's sample and scorer, or None for a record of
    no item of today's run (left as it is). The one loop of a resumed eval and a rerun collection."""
    env = Environment(spec)
    try:
        out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        for record in records:
            found = find(record)
            out.append((record, await regrade(record, *found, env) if found is not None else None))
        return out
    finally:
        await env.aclose()


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
