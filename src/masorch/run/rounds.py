"""Multi-round "agent-as-tool" mode: the orchestrator calls sub-agents as tools, round by round.

Each round the orchestrator makes 1..``max_calls_per_round`` native tool calls (one tool per kind;
a call names its subtask and optionally a model of the pool) or calls ``final_answer`` alone; tool
calls a server returns as JSON text are read as calls too. The
calls of a round run in parallel; each comes back as a ``tool`` message with its ``tool_call_id``
and a status from a fixed set (:mod:`masorch.run.round_calls`). After ``max_rounds`` rounds
without a final answer, a synthesis call (the ``synthesis`` model, default the orchestrator) turns
the trajectory into an answer. The run's :class:`~masorch.run.trajectory.Trajectory` is on its
result and exports as a chat-format record.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from masorch.agents.base import KIND_NEEDS, AgentRegistry, NodeOutput, NodeStatus, Retriever, UpstreamResult
from masorch.backends.base import Backend, Completion, GenerateConfig, Message, ToolCall, ToolSpec
from masorch.errors import BudgetExceeded, MasorchError
from masorch.plan import AgentSpec, Plan
from masorch.prompts import render
from masorch.run.budget import Budget
from masorch.run.executor import Executor, RoleBackends
from masorch.run.faults import ToolFaults
from masorch.run.result import RunResult, RunStatus
from masorch.run.round_calls import (
    FINAL_TOOL,
    TOOL_TITLES,
    CheckedCall,
    call_ids,
    calls_in_text,
    check_calls,
    final_answer,
    synthesis_answer,
    tool_costs,
    tool_specs,
    units_of,
    wants_synthesis,
)
from masorch.run.session import RunSession
from masorch.run.system import System
from masorch.run.trajectory import CallOutcome, EndedBy, RoundRecord, Trajectory
from masorch.trace.events import PlanParsed, ToolResult
from masorch.trace.writer import TraceSink


@dataclass(frozen=True)
class PoolEntry:
    """A model of the pool: its backend and the one line the orchestrator reads about it."""

    backend: Backend
    description: str = ""


@dataclass(frozen=True)
class RoundsOptions:
    """Limits of a multi-round run: rounds, calls per round, budget, deadlines, tool costs and units."""

    max_rounds: int = 12
    max_calls_per_round: int = 4
    budget: Budget = field(default_factory=Budget)
    timeout_s: float | None = None
    node_timeout_s: float | None = None
    temperature: float = 0.0
    max_tokens: int = 1024
    tool_costs: Mapping[str, float] = field(default_factory=dict)
    max_units: float | None = None
    seed: int | None = None
    faults: ToolFaults | None = None

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
            temperature=system.temperature,
            seed=system.seed,
            faults=faults,
        )


async def run_rounds(
    question: str,
    *,
    orchestrator: Backend,
    backends: RoleBackends,
    agents: AgentRegistry,
    options: RoundsOptions | None = None,
    trace: TraceSink | None = None,
    retriever: Retriever | None = None,
    pool: Mapping[str, PoolEntry] | None = None,
    synthesis: Backend | None = None,
) -> RunResult:
    """Answer ``question`` by rounds of parallel sub-agent tool calls chosen by the orchestrator.

    ``agents`` are the tools offered; ``pool`` the named models a call may choose; ``synthesis``
    answers at the round cap (default: the orchestrator).
    """
    opts = options or RoundsOptions()
    session = RunSession(opts.budget, trace=trace, deadline_s=opts.timeout_s)
    rounds = _Rounds(
        question, orchestrator, backends, agents, opts, session, retriever, pool or {}, synthesis
    )
    models = backends.models(orchestrator)
    models.update({f"pool.{name}": entry.backend.model_id for name, entry in (pool or {}).items()})
    if synthesis is not None:
        models["synthesis"] = synthesis.model_id
    label = "mas:rounds" if opts.max_calls_per_round > 1 else "mas:rounds-serial"
    return await session.run(question, lambda _: rounds.go(), mode=label, models=models)


class _Rounds:
    """The state of one multi-round run: the conversation, the rounds so far, the units spent."""

    def __init__(
        self,
        question: str,
        orchestrator: Backend,
        backends: RoleBackends,
        agents: AgentRegistry,
        opts: RoundsOptions,
        session: RunSession,
        retriever: Retriever | None,
        pool: Mapping[str, PoolEntry],
        synthesis: Backend | None,
    ) -> None:
        self.question = question
        self.orchestrator = orchestrator
        self.synthesis = synthesis or orchestrator
        self.backends = backends
        self.agents = agents
        self.catalogue = agents.catalogue()
        self.opts = opts
        self.session = session
        self.retriever = retriever
        self.pool = pool
        self.costs = tool_costs(opts.tool_costs)
        self.tools = tool_specs(
            self.catalogue, pool={n: e.description for n, e in pool.items()}, costs=self.costs
        )
        system = render(
            "rounds/system.j2",
            tools=[
                {
                    "name": k,
                    "title": TOOL_TITLES.get(k, ""),
                    "summary": s.summary,
                    "units": units_of(k, self.costs),
                }
                for k, s in self.catalogue.items()
            ],
            pool=[{"name": n, "description": e.description} for n, e in pool.items()],
            max_rounds=opts.max_rounds,
            max_calls=opts.max_calls_per_round,
            budget=opts.budget.describe(),
            max_units=opts.max_units,
        )
        self.messages: list[Message] = [Message("system", system), Message("user", question)]
        self.rounds: list[RoundRecord] = []
        self.units = 0.0
        self.faults_left = _fault_cap(opts.faults)

    async def go(self) -> RunResult:
        for round_no in range(1, self.opts.max_rounds + 1):
            t0 = time.perf_counter()
            reply = await self._ask(self.orchestrator, self.tools, node=None)
            if isinstance(reply, RunResult):
                return reply
            calls, problem = reply.tool_calls, ""
            if not calls and reply.text.strip():
                calls, problem = calls_in_text(reply.text)
            calls = call_ids(calls, round_no)
            self.messages.append(Message("assistant", reply.text, tool_calls=calls))
            if len(calls) == 1 and calls[0].name == FINAL_TOOL:
                answer = final_answer(calls[0])
                if answer is not None:
                    return self._end("ok", "final_answer", answer=answer)
                if wants_synthesis(calls[0]):
                    return await self._synthesize(requested=True)
                outcomes = [_bad_final(calls[0], round_no)]
            elif calls:
                outcomes = await self._round(round_no, calls)
            else:
                outcomes = []
            for outcome in outcomes:
                self.messages.append(Message("tool", outcome.message_text(), tool_call_id=outcome.call_id))
                self._emit(outcome)
            self.rounds.append(RoundRecord(round_no, tuple(outcomes), time.perf_counter() - t0))
            spent = self.session.ledger.exhausted()
            if spent is not None:
                return self._end("budget", "budget", error=spent)
            if round_no < self.opts.max_rounds:
                template = "rounds/round_done.j2" if calls else "rounds/no_calls.j2"
                self.messages.append(Message("user", self._render_between(template, round_no, problem)))
        return await self._synthesize()

    def _render_between(self, template: str, round_no: int, problem: str) -> str:
        return render(
            template,
            round=round_no,
            max_rounds=self.opts.max_rounds,
            units=self.units,
            max_units=self.opts.max_units,
            problem=problem,
        )

    async def _ask(
        self, backend: Backend, tools: tuple[ToolSpec, ...], *, node: str | None
    ) -> Completion | RunResult:
        """One orchestrator-side call under the run deadline; a RunResult when the run must end."""
        config = GenerateConfig(
            temperature=self.opts.temperature,
            max_tokens=self.opts.max_tokens,
            tools=tools,
            seed=self.opts.seed,
        )
        who = node or "orchestrator"
        try:
            remaining = self.session.remaining_s()
            call = self.session.complete(backend, self.messages, config, role="orchestrator", node=node)
            return await (call if remaining is None else asyncio.wait_for(call, remaining))
        except BudgetExceeded as exc:
            return self._end("budget", "budget", error=f"{who}: {exc.message}")
        except MasorchError as exc:
            return self._end("error", "error", error=f"{who}: {exc}")
        except asyncio.TimeoutError:
            return self._end("timeout", "timeout", error=f"run deadline of {self.opts.timeout_s:g} s passed")

    async def _round(self, round_no: int, calls: Sequence[ToolCall]) -> list[CallOutcome]:
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
        return [job if isinstance(job, CallOutcome) else await job for job in jobs]

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
        status = faults.draw(self.question, self.opts.seed, call.node)
        if status is None:
            return None
        self.faults_left -= 1
        error = faults.error(status, call.tool, self.opts.node_timeout_s)
        return dataclasses.replace(
            call.refused(status, error), units=units_of(call.tool, self.costs), injected=True
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
        return call.ran(
            out, model=model, units=units_of(call.tool, self.costs), wall_s=time.perf_counter() - t0
        )

    def _history(self) -> tuple[UpstreamResult, ...]:
        """The results of the earlier rounds' calls that ran ok, as a reviewer reads them."""
        return tuple(
            UpstreamResult(f"{c.node} {c.tool}", c.result, c.output.rationale if c.output else "")
            for r in self.rounds
            for c in r.calls
            if c.ok
        )

    async def _synthesize(self, *, requested: bool = False) -> RunResult:
        """At the round cap, or when the orchestrator asks (``requested``): the synthesis model
        answers from the whole conversation, without tools."""
        self.messages.append(
            Message(
                "user",
                render(
                    "rounds/synthesis.j2",
                    question=self.question,
                    max_rounds=self.opts.max_rounds,
                    requested=requested,
                ),
            )
        )
        reply = await self._ask(self.synthesis, (), node="synthesis")
        if isinstance(reply, RunResult):
            return reply
        self.messages.append(Message("assistant", reply.text))
        answer = synthesis_answer(reply.text)
        if not answer:
            return self._end("error", "synthesis", error="the synthesis call gave no answer")
        return self._end("ok", "synthesis", answer=answer)

    def _emit(self, outcome: CallOutcome) -> None:
        fields = outcome.to_dict()
        self.session.emit(ToolResult, **{k: fields[k] for k in ToolResult.model_fields if k in fields})

    def _end(self, status: RunStatus, ended_by: EndedBy, *, answer: str = "", error: str = "") -> RunResult:
        trajectory = Trajectory(
            question=self.question,
            messages=tuple(self.messages),
            tools=self.tools,
            rounds=tuple(self.rounds),
            answer=answer if status == "ok" else "",
            ended_by=ended_by,
        )
        ran = [c for c in trajectory.calls if c.output is not None]
        return RunResult(
            status=status,
            answer=answer if status == "ok" else "",
            node_results={c.node: c.output for c in ran if c.output is not None},
            usage=self.session.ledger.totals(),
            ledger=self.session.ledger,
            wall_s=self.session.elapsed_s,
            error=error,
            plan=Plan(agents=tuple(_spec_of(c) for c in ran)),
            run_id=self.session.run_id,
            trajectory=trajectory,
        )


def _fault_cap(faults: ToolFaults | None) -> int:
    if faults is None:
        return 0
    return faults.max_per_run if faults.max_per_run is not None else 1 << 30


def _spec_of(call: CallOutcome) -> AgentSpec:
    return AgentSpec(id=call.node, kind=call.tool, task=call.task)


def _reads_history(agents: AgentRegistry, kind: str) -> bool:
    needs = set(getattr(agents.get(kind), "requires", ())) | KIND_NEEDS.get(kind, frozenset())
    return "history" in needs


def _bad_final(call: ToolCall, round_no: int) -> CallOutcome:
    return CallOutcome(
        round_no,
        call.id,
        f"r{round_no}c1",
        FINAL_TOOL,
        "FORMAT_ERR",
        error="final_answer needs a non-empty string `answer`, or `synthesize: true` "
        '(hint: {"answer": "42"})',
    )
