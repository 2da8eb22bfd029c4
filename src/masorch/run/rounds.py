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
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from masorch.agents.base import AgentRegistry, Retriever
from masorch.backends.base import Backend, Completion, Message, ToolSpec
from masorch.errors import BudgetExceeded, DeadlineExceeded, MasorchError
from masorch.plan import AgentSpec, Plan
from masorch.plan.grammar import tool_turn_grammar
from masorch.prompts import render
from masorch.run.executor import RoleBackends
from masorch.run.result import RunResult, RunStatus
from masorch.run.round_calls import (
    FINAL_TOOL,
    SYNTHESIS_ACK,
    call_ids,
    calls_in_text,
    final_answer,
    synthesis_answer,
    text_before_calls,
    unreadable_calls,
    wants_synthesis,
)
from masorch.run.round_exec import PoolEntry, RoundCalls, RoundsOptions, bad_final
from masorch.run.session import RunSession
from masorch.run.trajectory import CallOutcome, EndedBy, Trajectory
from masorch.trace.writer import TraceSink

__all__ = ["PoolEntry", "RoundsOptions", "Stop", "ask", "run_rounds", "synthesize", "turn_grammar"]

logger = logging.getLogger(__name__)


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
    label = opts.label or ("mas:rounds" if opts.max_calls_per_round > 1 else "mas:rounds-serial")
    return await session.run(question, lambda _: rounds.go(), mode=label, models=models)


class _Rounds:
    """The orchestrator side of one multi-round run: the conversation, asking, ending; the tool
    side (checking and running each round's calls) is :class:`~masorch.run.round_exec.RoundCalls`."""

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
        self.opts = opts
        self.session = session
        self.calls = RoundCalls(question, backends, agents, opts, session, retriever, pool)
        self.tools = self.calls.tools
        self.grammar = turn_grammar(self.calls, opts) if opts.constrain else None
        self.final_call = False  # set when the orchestrator's own final_answer call is accepted
        self.final_unreadable = 0  # calls beside that final_answer that could not be read
        system = Message("system", self.calls.system_prompt())
        self.messages: list[Message] = [system, Message("user", question)]

    async def go(self) -> RunResult:
        for round_no in range(1, self.opts.max_rounds + 1):
            t0 = time.perf_counter()
            reply = await self._ask(self.orchestrator, self.tools, node=None, grammar=self.grammar)
            if isinstance(reply, RunResult):
                return reply
            calls, problem, text, unreadable = reply.tool_calls, "", reply.text, 0
            if not calls and text.strip():
                calls, problem = calls_in_text(text)
                unreadable = unreadable_calls(text, len(calls), problem)
                if calls:  # the calls are kept as calls, not also as text (the template writes them)
                    text = text_before_calls(text)
            calls = call_ids(calls, round_no)
            self.messages.append(Message("assistant", text, tool_calls=calls))
            if len(calls) == 1 and calls[0].name == FINAL_TOOL:
                answer = final_answer(calls[0])
                self.final_unreadable = unreadable
                if answer is not None:
                    self.final_call = True
                    return self._end("ok", "final_answer", answer=answer)
                if wants_synthesis(calls[0]):
                    self.final_call = True
                    # Every tool call is answered by a tool message (chat APIs refuse one that is not).
                    self.messages.append(Message("tool", SYNTHESIS_ACK, tool_call_id=calls[0].id))
                    return await self._synthesize(requested=True)
                outcomes = [bad_final(calls[0], round_no)]
            elif calls:
                outcomes = await self.calls.play(round_no, calls)
            else:
                outcomes = []
            for outcome in outcomes:
                self.messages.append(Message("tool", outcome.message_text(), tool_call_id=outcome.call_id))
            self.calls.record(round_no, outcomes, time.perf_counter() - t0, unreadable)
            spent = self.session.ledger.exhausted()
            if spent is not None:
                return self._end("budget", "budget", error=spent)
            if round_no < self.opts.max_rounds:
                template = "rounds/round_done.j2" if calls else "rounds/no_calls.j2"
                self.messages.append(Message("user", self.calls.between(template, round_no, problem)))
        return await self._synthesize()

    async def _ask(
        self, backend: Backend, tools: tuple[ToolSpec, ...], *, node: str | None, grammar: str | None = None
    ) -> Completion | RunResult:
        """One orchestrator-side call under the run deadline; a RunResult when the run must end."""
        reply = await ask(self.session, backend, self.messages, self.opts, tools, node=node, grammar=grammar)
        if isinstance(reply, Stop):
            return self._end(reply.status, reply.ended_by, error=reply.error)
        return reply

    async def _synthesize(self, *, requested: bool = False) -> RunResult:
        """At the round cap, or when the orchestrator asks (``requested``): the synthesis model
        answers from the whole conversation, without tools."""
        got = await synthesize(
            self.session, self.synthesis, self.messages, self.question, self.opts, requested=requested
        )
        if isinstance(got, Stop):
            return self._end(got.status, got.ended_by, error=got.error)
        return self._end("ok", "synthesis", answer=got)

    def _end(self, status: RunStatus, ended_by: EndedBy, *, answer: str = "", error: str = "") -> RunResult:
        trajectory = Trajectory(
            question=self.question,
            messages=tuple(self.messages),
            tools=self.tools,
            rounds=tuple(self.calls.rounds),
            answer=answer if status == "ok" else "",
            ended_by=ended_by,
            final_call=self.final_call,
            final_unreadable=self.final_unreadable,
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


@dataclass(frozen=True)
class Stop:
    """Why a multi-round run stops at an orchestrator-side call: its run status, how it ended, why."""

    status: RunStatus
    ended_by: EndedBy
    error: str


async def ask(
    session: RunSession,
    backend: Backend,
    messages: Sequence[Message],
    opts: RoundsOptions,
    tools: tuple[ToolSpec, ...],
    *,
    node: str | None,
    grammar: str | None = None,
) -> Completion | Stop:
    """One orchestrator-side call (an orchestrator turn, or the synthesis as ``node``) under the run
    deadline, recorded in ``session``'s ledger; a :class:`Stop` when the run must end. ``grammar``
    constrains an orchestrator turn where the backend can (:func:`turn_grammar`)."""
    config = opts.generate_config(max_tokens=opts.max_tokens, tools=tools, grammar=grammar)
    who = node or "orchestrator"
    deadline = asyncio.timeout(session.remaining_s())
    try:
        async with deadline:
            return await session.complete(backend, messages, config, role="orchestrator", node=node)
    except BudgetExceeded as exc:
        return Stop("budget", "budget", f"{who}: {exc.message}")
    except DeadlineExceeded:  # asked for after the deadline (the calls before returned at once)
        return Stop("timeout", "timeout", f"run deadline of {opts.timeout_s:g} s passed")
    except MasorchError as exc:
        return Stop("error", "error", f"{who}: {exc}")
    except TimeoutError:
        if deadline.expired() or session.past_deadline():
            return Stop("timeout", "timeout", f"run deadline of {opts.timeout_s:g} s passed")
        # Raised by the backend itself (one that does not wrap its timeouts in a BackendError).
        return Stop("error", "error", f"{who}: the model request timed out")


async def synthesize(
    session: RunSession,
    backend: Backend,
    messages: list[Message],
    question: str,
    opts: RoundsOptions,
    *,
    requested: bool,
) -> str | Stop:
    """The synthesis model's answer to ``question`` from the conversation ``messages`` (without
    tools), or why none came; the request and the reply are appended to ``messages``.

    At the round cap, or when ``final_answer`` asks for it (``requested``); inference
    (:func:`run_rounds`) and the training environment (:mod:`masorch.train.rounds_env`) both call it.
    """
    messages.append(
        Message(
            "user",
            render("rounds/synthesis.j2", question=question, max_rounds=opts.max_rounds, requested=requested),
        )
    )
    reply = await ask(session, backend, messages, opts, (), node="synthesis")
    if isinstance(reply, Stop):
        return reply
    messages.append(Message("assistant", reply.text))
    return synthesis_answer(reply.text) or Stop("error", "synthesis", "the synthesis call gave no answer")


def turn_grammar(calls: RoundCalls, opts: RoundsOptions) -> str | None:
    """The grammar of an orchestrator turn over the tools ``calls`` offers: the offered kinds, the
    pool's model names, at most ``max_calls_per_round`` calls (None, and free decoding, when the
    catalogue cannot be written in it)."""
    try:
        return tool_turn_grammar(calls.catalogue, pool=tuple(calls.pool), max_calls=opts.max_calls_per_round)
    except ValueError as exc:
        logger.warning("no tool-call grammar (%s); orchestrator turns decode freely", exc)
        return None


def _spec_of(call: CallOutcome) -> AgentSpec:
    return AgentSpec(id=call.node, kind=call.tool, task=call.task)
