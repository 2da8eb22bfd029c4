"""Executing sampled plans inside a reward: a group of plan texts runs concurrently, once each.

A GRPO step samples K whole plans per prompt. Each plan text is checked (parse + validate under
the row's DoM) and, when valid, executed by the sub-agents with a per-plan budget and deadline, so
a runaway plan ends with status ``budget`` or ``timeout`` instead of stalling the step. Identical
(question, DoM, plan text) items in one batch run once; identical sub-agent calls across plans and
steps are answered once by the record/replay cache wrapped around the sub-agent backend
(:class:`masorch.backends.cache.CachedBackend`, set up by whoever builds the ``RoleBackends``).

Trainers call reward functions synchronously, so :class:`LoopThread` owns one event loop in a
dedicated thread and :meth:`PlanExecutor.run_sync` submits a whole group to it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Coroutine, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from masorch.agents.base import AgentRegistry, Retriever
from masorch.errors import UsageError
from masorch.plan import DoM, Limits, check
from masorch.plan.catalogue import KindSignature
from masorch.plan.parse import DialectChoice
from masorch.run.budget import Budget
from masorch.run.executor import RoleBackends, run_plan
from masorch.run.result import RunStatus
from masorch.run.system import System

logger = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class RolloutSettings:
    """How each sampled plan is checked and run.

    ``budget`` and ``timeout_s`` bound every plan on its own (sub-agent calls only: the plan
    itself was sampled by the trainer); ``concurrency`` is how many plans run at once.
    :meth:`of` derives them from the policy's :class:`~masorch.run.system.System`.
    """

    dialect: DialectChoice = "auto"
    limits: Limits = field(default_factory=Limits)
    budget: Budget = field(default_factory=lambda: Budget(max_calls=24))
    timeout_s: float | None = 120.0
    node_timeout_s: float | None = None
    concurrency: int = 8

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise UsageError(f"rollout concurrency must be >= 1, got {self.concurrency}", hint="e.g. 8")

    @classmethod
    def of(cls, system: System, concurrency: int) -> RolloutSettings:
        """The settings that check and run the plans of ``system``'s orchestrator: its dialect,
        budget and deadlines (the limits stay the default ones: sampled plans run unpruned)."""
        return cls(
            dialect=system.dialect,
            budget=system.budget,
            timeout_s=system.timeout_s,
            node_timeout_s=system.node_timeout_s,
            concurrency=concurrency,
        )


@dataclass(frozen=True)
class RolloutItem:
    """One sampled plan to run: the question it answers, its DoM and the orchestrator's text."""

    question: str
    plan_text: str
    dom: DoM


@dataclass(frozen=True)
class PlanOutcome:
    """What executing one sampled plan gave: the columns the reward components read.

    ``status`` is ``invalid_plan`` when the text did not check; ``reply`` is the sink's whole reply
    (:attr:`masorch.run.result.RunResult.reply`, what a MASBench scorer grades); ``calls`` and
    ``tokens`` count sub-agent calls only; ``codes`` are the diagnostic codes (errors and warnings).
    """

    status: RunStatus
    answer: str = ""
    reply: str = ""
    valid: bool = False
    n_agents: int = 0
    calls: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    codes: tuple[str, ...] = ()
    error: str = ""

    def columns(self) -> dict[str, Any]:
        """This outcome as reward-function columns (:data:`COLUMNS`)."""
        return {k: getattr(self, k) for k in COLUMNS}


#: The outcome fields the reward components read, as columns.
COLUMNS = ("status", "answer", "reply", "calls", "tokens")


def outcome_columns(outcomes: Sequence[PlanOutcome]) -> dict[str, list[Any]]:
    """The batch of outcomes as column lists, ready to pass as ``**columns`` to a component."""
    return {k: [getattr(o, k) for o in outcomes] for k in COLUMNS}


class PlanExecutor:
    """Checks and runs sampled plans against a sub-agent registry and role backends."""

    def __init__(
        self,
        agents: AgentRegistry,
        backends: RoleBackends,
        settings: RolloutSettings | None = None,
        *,
        retriever: Retriever | None = None,
    ) -> None:
        self.agents = agents
        self.backends = backends
        self.settings = settings or RolloutSettings()
        self.retriever = retriever
        self.catalogue: Mapping[str, KindSignature] = agents.catalogue()
        self._gate: asyncio.Semaphore | None = None

    async def run_one(self, item: RolloutItem) -> PlanOutcome:
        """Check one plan text and, if valid, run it within the per-plan budget and deadline."""
        s = self.settings
        checked = check(item.plan_text, item.dom, self.catalogue, s.dialect, s.limits)
        codes = tuple(d.code for d in checked.diagnostics)
        n_agents = len(checked.plan.agents) if checked.plan is not None else 0
        validated = checked.validated
        if validated is None:
            return PlanOutcome("invalid_plan", n_agents=n_agents, codes=codes)
        if self._gate is None:
            self._gate = asyncio.Semaphore(s.concurrency)
        t0 = time.monotonic()
        async with self._gate:
            result = await run_plan(
                validated,
                item.question,
                agents=self.agents,
                backends=self.backends,
                budget=s.budget,
                timeout_s=s.timeout_s,
                node_timeout_s=s.node_timeout_s,
                retriever=self.retriever,
            )
        if result.status != "ok":
            logger.debug("plan ended %s: %s", result.status, result.error)
        return PlanOutcome(
            result.status,
            answer=result.answer,
            reply=dataclasses.replace(result, plan=validated.plan).reply,
            valid=True,
            n_agents=n_agents,
            calls=result.usage.calls,
            tokens=result.usage.total_tokens,
            wall_s=time.monotonic() - t0,
            codes=codes,
            error=result.error,
        )

    async def run_group(self, items: Sequence[RolloutItem]) -> list[PlanOutcome]:
        """Run every item concurrently; identical items run once and share their outcome."""
        unique = list(dict.fromkeys(items))
        outcomes = await asyncio.gather(*(self.run_one(i) for i in unique))
        by_item = dict(zip(unique, outcomes, strict=True))
        return [by_item[i] for i in items]


class LoopThread:
    """One asyncio event loop running in its own daemon thread, for sync callers of async code.

    Backends and semaphores are bound to the loop that first uses them, so every call of a
    trainer's reward goes through the same loop.
    """

    def __init__(self, name: str = "masorch-rollout") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (its exception is raised here)."""
        if self._loop.is_closed():
            coro.close()
            raise UsageError("the rollout loop is closed", hint="make a new LoopThread")
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(timeout_s)

    def close(self) -> None:
        """Stop the loop and join its thread (idempotent)."""
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> LoopThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
