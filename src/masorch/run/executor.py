"""Async dataflow over a ValidatedPlan: each node starts as soon as all its parents are done.

The scheduler keeps one asyncio task per running node and reacts to each completion: the
children whose parents are now all ok start at once (no level-by-level barrier), so a run's wall
time approaches its critical path. A node whose parent did not end ok is ``skipped`` (never run
with placeholder text); once the run budget is spent, nodes not yet started end with ``budget``;
at the run deadline, running nodes are cancelled and they and the unstarted ones end ``timeout``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from masorch.agents.base import (
    AgentRegistry,
    NodeInput,
    NodeOutput,
    NodeStatus,
    Retriever,
    UpstreamResult,
)
from masorch.backends.base import Backend, Completion, GenerateConfig, Message
from masorch.errors import BudgetExceeded, DeadlineExceeded, MasorchError, UsageError
from masorch.plan.model import AgentSpec, ValidatedPlan
from masorch.plan.refs import RefField, find_refs, substitute
from masorch.run.budget import Budget
from masorch.run.result import RunResult, RunStatus
from masorch.run.session import RunSession
from masorch.trace.events import NodeFinished, NodeStarted, UsageSummary
from masorch.trace.writer import TraceSink

logger = logging.getLogger(__name__)

AgentRole = Literal["subagent", "judge"]


@dataclass(frozen=True)
class RoleBackends:
    """The backend of each role: sub-agents (default for all, overridable per kind) and judge."""

    subagent: Backend
    per_kind: Mapping[str, Backend] = field(default_factory=dict)
    judge: Backend | None = None

    def models(self, orchestrator: Backend | None = None) -> dict[str, str]:
        """Role -> model id (the ``models`` of a run_started event), the orchestrator's if given."""
        models = {"orchestrator": orchestrator.model_id} if orchestrator is not None else {}
        models["subagent"] = self.subagent.model_id
        if self.judge is not None:
            models["judge"] = self.judge.model_id
        models.update({f"subagent.{k}": b.model_id for k, b in self.per_kind.items()})
        return models

    def for_node(self, kind: str, role: AgentRole) -> Backend:
        """The backend a call of this role from a node of this kind goes to."""
        if role == "judge" and self.judge is not None:
            return self.judge
        return self.per_kind.get(kind, self.subagent)


class NodeContext:
    """The :class:`~masorch.agents.base.AgentContext` of one running node."""

    def __init__(
        self,
        session: RunSession,
        backends: RoleBackends,
        node_id: str,
        kind: str,
        retriever: Retriever | None,
    ) -> None:
        self._session = session
        self._backends = backends
        self._node_id = node_id
        self._kind = kind
        self._retriever = retriever

    @property
    def node_id(self) -> str:
        """The id of the node this context belongs to."""
        return self._node_id

    @property
    def retriever(self) -> Retriever | None:
        """The run's document search, if any."""
        return self._retriever

    async def complete(
        self, messages: Sequence[Message], config: GenerateConfig, *, role: AgentRole = "subagent"
    ) -> Completion:
        """One call through the run's gate; ``role="judge"`` goes to the judge backend."""
        backend = self._backends.for_node(self._kind, role)
        return await self._session.complete(backend, messages, config, role=role, node=self._node_id)


class Executor:
    """Runs validated plans with a registry of sub-agents, role backends and a run session."""

    def __init__(
        self,
        agents: AgentRegistry,
        backends: RoleBackends,
        session: RunSession,
        *,
        node_timeout_s: float | None = None,
        retriever: Retriever | None = None,
    ) -> None:
        self._agents = agents
        self._backends = backends
        self._session = session
        self._node_timeout_s = node_timeout_s
        self._retriever = retriever

    async def execute(
        self, validated: ValidatedPlan, question: str, *, context: Sequence[UpstreamResult] = ()
    ) -> RunResult:
        """Run every node of the plan and return the run's result (status, answer, node outputs).

        ``context`` is given to the plan's root nodes as earlier results (the multi-round mode passes
        the reasoning history this way).
        """
        plan = validated.plan
        missing = sorted({a.kind for a in plan.agents if a.kind not in self._agents})
        if missing:
            raise UsageError(
                f"the plan uses sub-agent kinds with no registered agent: {', '.join(missing)}",
                hint="validate plans against the catalogue of the registry that runs them",
            )
        if validated.sink is None:
            if plan.final_answer is not None:
                return self._result("ok", plan.final_answer, {})
            return self._result("error", "", {}, error="the plan has neither a sink nor a final answer")
        return await _Run(self, validated, question, tuple(context)).go()

    def _result(
        self, status: RunStatus, answer: str, nodes: Mapping[str, NodeOutput], error: str = ""
    ) -> RunResult:
        s = self._session
        return RunResult(
            status=status,
            answer=answer if status == "ok" else "",
            node_results=dict(nodes),
            usage=s.ledger.totals(),
            ledger=s.ledger,
            wall_s=s.elapsed_s,
            error=error,
            run_id=s.run_id,
        )


class _Run:
    """The state of one plan execution (kept apart so an Executor can run several plans)."""

    def __init__(
        self, ex: Executor, validated: ValidatedPlan, question: str, context: tuple[UpstreamResult, ...] = ()
    ) -> None:
        self.ex = ex
        self.root_context = context
        self.session = ex._session
        self.validated = validated
        self.question = question
        self.specs: dict[str, AgentSpec] = {a.id: a for a in validated.plan.agents}
        self.parents = {nid: tuple(validated.parents.get(nid, ())) for nid in validated.order}
        self.children: dict[str, list[str]] = {nid: [] for nid in validated.order}
        for nid, ps in self.parents.items():
            for p in ps:
                self.children[p].append(nid)
        self.waiting = {nid: len(ps) for nid, ps in self.parents.items()}
        self.results: dict[str, NodeOutput] = {}
        self.started_at: dict[str, float] = {}
        self.finish_order: list[str] = []
        self.running: dict[asyncio.Task[NodeOutput], str] = {}
        self.stopped = False  # the run deadline passed: nothing new starts
        self.decided = False  # the sink was skipped: nothing new starts, the running are cancelled

    async def go(self) -> RunResult:
        for nid in self.validated.order:
            if self.waiting[nid] == 0:
                self._ready(nid)
        deadline_hit = False
        try:
            while self.running:
                done, _ = await asyncio.wait(
                    self.running, timeout=self.session.remaining_s(), return_when=asyncio.FIRST_COMPLETED
                )
                if not done:
                    deadline_hit = True
                    break
                for task in done:
                    nid = self.running.pop(task)
                    self._finish(nid, task.result())  # a bug in the executor itself propagates here
                if self.validated.sink in self.results and self.running:
                    await self._stop_decided()
        except BaseException:
            # Cancelled (a caller's timeout, a client that went away) or failed: the nodes' calls stop
            # too, and are waited for, so nothing runs on after the run is over.
            await self._cancel_running()
            raise
        if deadline_hit:
            await self._stop_at_deadline()
        return self._outcome(deadline_hit)

    def _ready(self, nid: str) -> None:
        """All parents of ``nid`` ended ok: start it, unless the deadline passed or the budget is spent."""
        if self.stopped or self.session.past_deadline():
            self._finish(nid, self._not_started_at_deadline())
            return
        if self.decided:
            self._finish(nid, self._not_needed())
            return
        reason = self.session.ledger.exhausted()
        if reason is not None:
            self._finish(nid, NodeOutput(status=NodeStatus.BUDGET, error=f"not started: {reason}"))
            return
        self.started_at[nid] = time.monotonic()
        task = asyncio.create_task(self._run_node(nid), name=f"node:{nid}")
        self.running[task] = nid

    def _finish(self, nid: str, out: NodeOutput) -> None:
        if nid in self.results:
            return
        out = dataclasses.replace(out, usage=self.session.ledger.for_node(nid))
        self.results[nid] = out
        self.finish_order.append(nid)
        started = self.started_at.get(nid)
        self.session.emit(
            NodeFinished,
            node=nid,
            status=out.status.value,
            answer=out.answer,
            error=out.error,
            usage=UsageSummary.of(out.usage),
            wall_s=0.0 if started is None else time.monotonic() - started,
        )
        for child in self.children[nid]:
            if child in self.results:
                continue
            if out.status is not NodeStatus.OK:
                self._skip(child, nid, out.status)
                continue
            self.waiting[child] -= 1
            if self.waiting[child] == 0:
                self._ready(child)

    def _skip(self, nid: str, parent: str, parent_status: NodeStatus) -> None:
        reason = self.session.ledger.exhausted()
        if self.stopped:
            out = self._not_started_at_deadline()
        elif reason is not None:
            out = NodeOutput(status=NodeStatus.BUDGET, error=f"not started: {reason}")
        else:
            out = NodeOutput(
                status=NodeStatus.SKIPPED, error=f"parent '{parent}' ended with status {parent_status.value}"
            )
        self._finish(nid, out)

    async def _run_node(self, nid: str) -> NodeOutput:
        spec = self.specs[nid]
        try:
            node_input = self._input(spec)
        except _PlanInputError as exc:
            return NodeOutput(status=NodeStatus.ERROR, error=str(exc))
        self.session.emit(
            NodeStarted,
            node=nid,
            kind=spec.kind,
            task=node_input.task,
            params=dict(node_input.params),
        )
        agent = self.ex._agents.get(spec.kind)
        ctx = NodeContext(self.session, self.ex._backends, nid, spec.kind, self.ex._retriever)
        timeout = self.ex._node_timeout_s
        limit = asyncio.timeout(timeout)
        try:
            async with limit:
                out = await agent.run(node_input, ctx)
        except TimeoutError:
            if limit.expired():
                return NodeOutput(status=NodeStatus.TIMEOUT, error=f"node timed out after {timeout:g} s")
            # Raised inside the agent (a backend that does not wrap its own timeouts), not the node's limit.
            logger.info("node %s: a request inside the %s agent timed out", nid, spec.kind)
            return NodeOutput(status=NodeStatus.ERROR, error="timeout: a request inside the agent timed out")
        except BudgetExceeded as exc:
            return NodeOutput(status=NodeStatus.BUDGET, error=exc.message)
        except DeadlineExceeded as exc:
            return NodeOutput(status=NodeStatus.TIMEOUT, error=exc.message)
        except MasorchError as exc:
            logger.info("node %s failed: %s", nid, exc)
            return NodeOutput(status=NodeStatus.ERROR, error=f"{exc.code}: {exc}")
        except Exception as exc:
            # An implementation bug in the agent: kept as the node's error, with the traceback logged.
            logger.exception("sub-agent %r raised in node %s", spec.kind, nid)
            return NodeOutput(status=NodeStatus.ERROR, error=f"{type(exc).__name__}: {exc}")
        if not isinstance(out, NodeOutput):
            return NodeOutput(
                status=NodeStatus.ERROR,
                error=f"sub-agent {spec.kind!r} returned {type(out).__name__}, not NodeOutput",
            )
        return out

    def _input(self, spec: AgentSpec) -> NodeInput:
        """The node's input: substituted task, upstream context, question and resolved params."""
        parents = self.parents[spec.id]
        referenced = {r.target for r in find_refs(spec.task)}
        unknown = sorted(referenced - set(parents))
        if unknown:
            raise _PlanInputError(
                f"task references {', '.join('${' + u + '}' for u in unknown)} without a flow from it"
            )

        def lookup(target: str, which: RefField) -> str:
            up = self.results[target]
            return up.rationale if which == "rationale" else up.answer

        # An empty task is the question itself: the user's text, not the plan's, so a `${x}` in it
        # (a shell or template question) is text, never a reference.
        task = substitute(spec.task, lookup) if spec.task.strip() else self.question
        context = tuple(
            UpstreamResult(p, self.results[p].answer, self.results[p].rationale)
            for p in parents
            if p not in referenced
        )
        if not parents:
            context = self.root_context
        agent = self.ex._agents.get(spec.kind)
        params: dict[str, Any] = agent.signature.resolve(spec.params)
        question = "" if spec.task_only else self.question
        return NodeInput(node_id=spec.id, question=question, task=task, params=params, context=context)

    def _not_started_at_deadline(self) -> NodeOutput:
        error = f"not started before the run deadline ({self.session.deadline_s or 0.0:g} s)"
        return NodeOutput(status=NodeStatus.TIMEOUT, error=error)

    async def _cancel_running(self) -> None:
        tasks = list(self.running)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def _stop_decided(self) -> None:
        """The sink was skipped (a node on every path to it failed): the run's outcome is fixed, so
        the nodes still running are cancelled and none starts."""
        self.decided = True
        await self._cancel_and_finish(self._not_needed())

    def _not_needed(self) -> NodeOutput:
        sink = self.validated.sink
        error = f"not needed: the final agent '{sink}' was {self.results[str(sink)].status.value}"
        return NodeOutput(status=NodeStatus.SKIPPED, error=error)

    async def _stop_at_deadline(self) -> None:
        self.stopped = True
        error = f"cancelled at the run deadline ({self.session.deadline_s or 0.0:g} s)"
        await self._cancel_and_finish(NodeOutput(status=NodeStatus.TIMEOUT, error=error))
        for nid in self.validated.order:
            if nid not in self.results:
                self._finish(nid, self._not_started_at_deadline())

    async def _cancel_and_finish(self, cancelled: NodeOutput) -> None:
        """Cancel the running nodes and wait for the cancellations to land (so that their in-flight
        calls are recorded in the ledger); each ends as ``cancelled`` says, or with its own output
        where it finished meanwhile."""
        tasks = list(self.running)
        for task in tasks:
            task.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        for task, outcome in zip(tasks, outcomes, strict=True):
            nid = self.running.pop(task)
            if isinstance(outcome, NodeOutput):  # it finished just as the others were cancelled
                self._finish(nid, outcome)
            elif isinstance(outcome, asyncio.CancelledError):
                self._finish(nid, cancelled)
            else:
                raise outcome

    def _outcome(self, deadline_hit: bool) -> RunResult:
        sink = self.validated.sink
        assert sink is not None
        out = self.results[sink]
        if out.status is NodeStatus.OK:
            return self.ex._result("ok", out.answer, self.results)
        if deadline_hit:
            return self.ex._result(
                "timeout", "", self.results, error=f"run deadline of {self.session.deadline_s:g} s passed"
            )
        # The run failed because of the first node that failed by itself (not merely skipped).
        failures = [n for n in self.finish_order if self.results[n].status not in _OK_OR_SKIPPED]
        cause = failures[0] if failures else sink
        failed = self.results[cause]
        status = _RUN_STATUS[failed.status]
        error = f"node '{cause}' {failed.status.value}: {failed.error}"
        return self.ex._result(status, "", self.results, error=error)


_OK_OR_SKIPPED = (NodeStatus.OK, NodeStatus.SKIPPED)
_RUN_STATUS: dict[NodeStatus, RunStatus] = {
    NodeStatus.OK: "ok",
    NodeStatus.ERROR: "error",
    NodeStatus.TIMEOUT: "timeout",
    NodeStatus.BUDGET: "budget",
    NodeStatus.SKIPPED: "error",
}


class _PlanInputError(Exception):
    """A node's input cannot be built from the plan (a reference without a flow)."""


async def run_plan(
    validated: ValidatedPlan,
    question: str,
    *,
    agents: AgentRegistry,
    backends: RoleBackends,
    budget: Budget | None = None,
    trace: TraceSink | None = None,
    timeout_s: float | None = None,
    node_timeout_s: float | None = None,
    retriever: Retriever | None = None,
    mode: str = "execute",
) -> RunResult:
    """Execute an already validated plan as a whole run (run_started ... run_finished events).

    ``mode`` labels the run in its run_started event (``sas:cot`` for a single-agent baseline).
    """
    session = RunSession(budget, trace=trace, deadline_s=timeout_s)

    async def body(session: RunSession) -> RunResult:
        executor = Executor(agents, backends, session, node_timeout_s=node_timeout_s, retriever=retriever)
        return await executor.execute(validated, question)

    return await session.run(question, body, mode=mode, dom=validated.dom.value, models=backends.models())
