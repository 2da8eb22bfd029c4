"""The tool side of the multi-round mode: one round's calls checked, run in parallel, recorded.

:class:`RoundCalls` holds what a multi-round run keeps between rounds on the tool side (the rounds
so far, the units spent, the injected faults left) and plays one round: each call is checked
(:func:`masorch.run.round_calls.check_calls`), the units reserved, a fault injected if the run asks
for them, and the calls that pass run in parallel through the executor, each as a one-node plan;
every call ends with exactly one :class:`~masorch.run.trajectory.CallOutcome`. The orchestrator
side (who writes the calls) is :mod:`masorch.run.rounds` at inference and the training
environment (:mod:`masorch.train.rounds_env`) in RL; both play rounds through this class, so the
protocol exists once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from masorch.agents.base import KIND_NEEDS, AgentRegistry, NodeOutput, NodeStatus, Retriever, UpstreamResult
from masorch.backends.base import Backend, Sampling, ToolCall, ToolSpec
from masorch.errors import UsageError
from masorch.plan import Plan
from masorch.prompts import render
from masorch.run.budget import Budget
from masorch.run.executor import Executor, RoleBackends
from masorch.run.faults import ToolFaults, fault_status
from masorch.run.round_calls import (
    FINAL_TOOL,
    TOOL_TITLES,
    CheckedCall,
    check_calls,
    check_tool_costs,
    tool_costs,
    tool_specs,
    units_of,
)
from masorch.run.session import RunSession
from masorch.run.system import System
from masorch.run.trajectory import CallOutcome, RoundRecord
from masorch.trace.events import PlanParsed, ToolResult


@dataclass(frozen=True)
class PoolEntry:
    """A model of the pool: its backend and the one line the orchestrator reads about it."""

    backend: Backend
    description: str = ""


_LIMITS_HINT = "see masorch.run.System's max_rounds, max_calls_per_round, tool_costs and max_units"


def _units(value: object) -> bool:
    """True for a finite number >= 0 (not a bool)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


@dataclass(frozen=True)
class RoundsOptions(Sampling):
    """Limits of a multi-round run: rounds, calls per round, budget, deadlines, tool costs and units."""

    max_rounds: int = 12
    max_calls_per_round: int = 4
    budget: Budget = field(default_factory=Budget)
    timeout_s: float | None = None
    node_timeout_s: float | None = None
    max_tokens: int = 1024
    tool_costs: Mapping[str, float] = field(default_factory=dict)
    max_units: float | None = None
    faults: ToolFaults | None = None
    #: decode each orchestrator turn under the tool-call grammar where the backend can
    constrain: bool = True
    #: the system's label in the trace (None: ``mas:rounds-serial`` at one call per round, else
    #: ``mas:rounds``)
    label: str | None = None

    def __post_init__(self) -> None:
        """The limits a :class:`~masorch.run.system.System` checks, checked for direct callers too.

        >>> RoundsOptions(max_calls_per_round=0)
        Traceback (most recent call last):
        masorch.errors.UsageError: max_calls_per_round must be an integer from 1 to 4, got 0 (hint: ...)
        """
        tops = {"max_rounds": 12, "max_calls_per_round": 4, "max_tokens": None}
        for name, top in tops.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1 or (top and value > top):
                span = f"from 1 to {top}" if top else ">= 1"
                raise UsageError(f"{name} must be an integer {span}, got {value!r}", hint=_LIMITS_HINT)
        for name in ("timeout_s", "node_timeout_s", "max_units"):
            value = getattr(self, name)
            if value is not None and not _units(value):
                raise UsageError(f"{name} must be a number >= 0 or None, got {value!r}", hint=_LIMITS_HINT)
        bad = {k: v for k, v in self.tool_costs.items() if not _units(v)}
        if bad:
            raise UsageError(f"tool costs must be finite numbers of units >= 0, got {bad}", hint=_LIMITS_HINT)

    @classmethod
    def of(cls, system: System, faults: ToolFaults | None = None) -> RoundsOptions:
        """The options of a ``mas:rounds`` system (``plan_tokens`` caps each orchestrator turn), with
        the environment's injected ``faults`` if any."""
        return cls(
            max_rounds=system.max_rounds,
            max_calls_per_round=system.max_calls_per_round,
            budget=system.budget,
            timeout_s=system.timeout_s,
            node_timeout_s=system.node_timeout_s,
            max_tokens=system.plan_tokens,
            tool_costs=dict(system.tool_costs),
            max_units=system.max_units,
            constrain=system.constrain,
            **system.sampling(),
            faults=faults,
            label=system.label,
        )


def rounds_system_prompt(
    agents: AgentRegistry, opts: RoundsOptions, pool: Mapping[str, PoolEntry] | None = None
) -> str:
    """The orchestrator's system prompt: the tools with their units, the pool, the limits. It needs
    no model, so a run's prompts can be written out (``masorch train data --rounds``) without one."""
    catalogue = agents.catalogue()
    check_tool_costs(opts.tool_costs, agents.known_kinds)
    costs = tool_costs(opts.tool_costs)
    return render(
        "rounds/system.j2",
        tools=[
            {"name": k, "title": TOOL_TITLES.get(k, ""), "summary": s.summary, "units": units_of(k, costs)}
            for k, s in catalogue.items()
        ],
        pool=[{"name": n, "description": e.description} for n, e in (pool or {}).items()],
        max_rounds=opts.max_rounds,
        max_calls=opts.max_calls_per_round,
        budget=opts.budget.describe(),
        max_units=opts.max_units,
    )


class RoundCalls:
    """The tool side of one multi-round run: the tools offered, the rounds played, the units spent."""

    def __init__(
        self,
        question: str,
        backends: RoleBackends,
        agents: AgentRegistry,
        opts: RoundsOptions,
        session: RunSession,
        retriever: Retriever | None = None,
        pool: Mapping[str, PoolEntry] | None = None,
    ) -> None:
        self.question = question
        self.backends = backends
        self.agents = agents
        self.catalogue = agents.catalogue()
        self.opts = opts
        self.session = session
        self.retriever = retriever
        self.pool = pool or {}
        check_tool_costs(opts.tool_costs, agents.known_kinds)
        self.costs = tool_costs(opts.tool_costs)
        self.tools: tuple[ToolSpec, ...] = tool_specs(
            self.catalogue, pool={n: e.description for n, e in self.pool.items()}, costs=self.costs
        )
        self.rounds: list[RoundRecord] = []
        self.units = 0.0
        self.faults_left = _fault_cap(opts.faults)

    def system_prompt(self) -> str:
        """The orchestrator's system prompt (:func:`rounds_system_prompt`)."""
        return rounds_system_prompt(self.agents, self.opts, self.pool)

    def between(self, template: str, round_no: int, problem: str = "") -> str:
        """The user message after a round (``rounds/round_done.j2`` or ``rounds/no_calls.j2``)."""
        return render(
            template,
            round=round_no,
            max_rounds=self.opts.max_rounds,
            units=self.units,
            max_units=self.opts.max_units,
            problem=problem,
        )

    async def play(self, round_no: int, calls: Sequence[ToolCall]) -> list[CallOutcome]:
        """Check a round's calls, run those that pass in parallel; one outcome per call, in order."""
        checked = check_calls(
            calls,
            round_no=round_no,
            catalogue=self.catalogue,
            pool=list(self.pool),
            max_calls=self.opts.max_calls_per_round,
        )
        history = self._history()
        jobs: list[asyncio.Future[CallOutcome] | CallOutcome] = []
        for item in checked:
            if isinstance(item, CallOutcome):
                jobs.append(item)
                continue
            refusal = self._reserve(item)
            if refusal is None:
                refusal = self._injected(item)
            jobs.append(
                refusal if refusal is not None else asyncio.ensure_future(self._run_call(item, history))
            )
        specs = [item.spec for item in checked if isinstance(item, CheckedCall)]
        self.session.emit(
            PlanParsed,
            dialect="tools",
            text="\n".join(f"{c.name}({c.arguments})" for c in calls),
            plan=Plan(agents=tuple(specs)).model_dump(mode="json"),
            attempt=round_no,
        )
        try:
            return [job if isinstance(job, CallOutcome) else await job for job in jobs]
        finally:
            # A call that raised (or the round cancelled) ends the round: the others are cancelled
            # and waited for, so none runs on, or records a call, after the run is over.
            pending = [job for job in jobs if isinstance(job, asyncio.Future) and not job.done()]
            for job in pending:
                job.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    def record(
        self, round_no: int, outcomes: Sequence[CallOutcome], wall_s: float, unreadable: int = 0
    ) -> None:
        """Keep a finished round (``unreadable``: calls its turn wrote that could not be read) and
        send a ``tool_result`` event for each of its calls."""
        for outcome in outcomes:
            fields = outcome.to_dict()
            self.session.emit(ToolResult, **{k: fields[k] for k in ToolResult.model_fields if k in fields})
        self.rounds.append(RoundRecord(round_no, tuple(outcomes), wall_s, unreadable))

    def _reserve(self, call: CheckedCall) -> CallOutcome | None:
        """Spend the call's units, or the BUDGET outcome when the run's units or calls are spent."""
        reason = self.session.ledger.exhausted()
        if reason is not None:
            return call.refused("BUDGET", f"not run: {reason}")
        cost = units_of(call.tool, self.costs)
        limit = self.opts.max_units
        if limit is not None and self.units + cost > limit:
            left = max(0.0, limit - self.units)
            return call.refused(
                "BUDGET", f"not run: it costs {cost:g} units and {left:g} of {limit:g} are left"
            )
        self.units += cost
        return None

    def _injected(self, call: CheckedCall) -> CallOutcome | None:
        """The injected failure of a call about to run (its units spent), or None to run it."""
        faults = self.opts.faults
        if faults is None or self.faults_left <= 0:
            return None
        kind = faults.draw(self.question, self.opts.seed, call.node)
        if kind is None:
            return None
        self.faults_left -= 1
        error = faults.error(kind, call.tool, self.opts.node_timeout_s)
        return dataclasses.replace(
            call.refused(fault_status(kind), error), units=units_of(call.tool, self.costs), injected=True
        )

    async def _run_call(self, call: CheckedCall, history: tuple[UpstreamResult, ...]) -> CallOutcome:
        backends = self.backends
        if call.pool_name:
            backends = RoleBackends(self.pool[call.pool_name].backend, judge=self.backends.judge)
        executor = Executor(
            self.agents,
            backends,
            self.session,
            node_timeout_s=self.opts.node_timeout_s,
            retriever=self.retriever,
        )
        context = history if _reads_history(self.agents, call.tool) else ()
        t0 = time.perf_counter()
        result = await executor.execute(call.plan, self.question, context=context)
        out = result.node_results.get(call.node, NodeOutput(status=NodeStatus.ERROR, error=result.error))
        model = backends.for_node(call.tool, "subagent").model_id
        units = units_of(call.tool, self.costs)
        if out.status == NodeStatus.BUDGET and not any(
            e.node == call.node for e in self.session.ledger.entries
        ):
            # Refused by the run's budget before its first request: a refused call costs nothing.
            self.units -= units
            units = 0.0
        return call.ran(out, model=model, units=units, wall_s=time.perf_counter() - t0)

    def _history(self) -> tuple[UpstreamResult, ...]:
        """The results of the earlier rounds' calls that ran ok, as a reviewer reads them."""
        return tuple(
            UpstreamResult(f"{c.node} {c.tool}", c.result, c.output.rationale if c.output else "")
            for r in self.rounds
            for c in r.calls
            if c.ok
        )


def bad_final(call: ToolCall, round_no: int) -> CallOutcome:
    """The outcome of a ``final_answer`` alone in its round whose arguments hold no answer."""
    return CallOutcome(
        round_no,
        call.id,
        f"r{round_no}c1",
        FINAL_TOOL,
        "FORMAT_ERR",
        error="final_answer needs a non-empty string `answer`, or `synthesize: true` "
        '(hint: {"answer": "42"})',
    )


def _fault_cap(faults: ToolFaults | None) -> int:
    if faults is None:
        return 0
    return faults.max_per_run if faults.max_per_run is not None else 1 << 30


def _reads_history(agents: AgentRegistry, kind: str) -> bool:
    needs = set(getattr(agents.get(kind), "requires", ())) | KIND_NEEDS.get(kind, frozenset())
    return "history" in needs
