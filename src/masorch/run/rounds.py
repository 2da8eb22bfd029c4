"""Multi-round "agent-as-tool" mode: the orchestrator calls sub-agents as tools, round by round.

Each round the orchestrator may call several sub-agent tools (one tool per registered kind, its
arguments the task and the kind's typed parameters); the calls of a round run in parallel. Their
results come back with an explicit status, and the orchestrator calls more or calls
``final_answer``. After ``max_rounds`` tool rounds it gets one last turn to answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from masorch.agents.base import AgentRegistry, NodeOutput, NodeStatus, Retriever
from masorch.backends.base import Backend, GenerateConfig, Message, ToolCall, ToolSpec
from masorch.errors import BudgetExceeded, MasorchError
from masorch.plan import AgentSpec, DoM, Plan, validate
from masorch.plan.catalogue import Catalogue
from masorch.prompts import render
from masorch.run.budget import Budget
from masorch.run.executor import Executor, RoleBackends
from masorch.run.orchestrate import param_json_schema
from masorch.run.result import RunResult, RunStatus
from masorch.run.session import RunSession
from masorch.run.system import System
from masorch.trace.events import PlanParsed
from masorch.trace.writer import TraceSink

logger = logging.getLogger(__name__)

FINAL_TOOL = "final_answer"


@dataclass(frozen=True)
class RoundsOptions:
    """Limits of a multi-round run: rounds, calls per round, budget, deadline and node timeout."""

    max_rounds: int = 3
    max_calls_per_round: int = 4
    budget: Budget = field(default_factory=Budget)
    timeout_s: float | None = None
    node_timeout_s: float | None = None
    temperature: float = 0.0
    max_tokens: int = 1024

    @classmethod
    def of(cls, system: System) -> RoundsOptions:
        """The options of a ``mas:rounds`` system (``plan_tokens`` caps each orchestrator turn)."""
        return cls(
            max_rounds=system.max_rounds,
            max_calls_per_round=system.max_calls_per_round,
            budget=system.budget,
            timeout_s=system.timeout_s,
            node_timeout_s=system.node_timeout_s,
            max_tokens=system.plan_tokens,
        )


def tool_specs(catalogue: Catalogue) -> tuple[ToolSpec, ...]:
    """One tool per sub-agent kind (task + typed parameters), plus ``final_answer``."""
    tools = []
    for sig in catalogue.values():
        props: dict[str, Any] = {"task": {"type": "string", "description": "a self-contained task"}}
        for p in sig.params:
            props[p.name] = {**param_json_schema(p.type), "description": p.description}
        tools.append(
            ToolSpec(
                name=sig.kind,
                description=sig.summary,
                parameters={"type": "object", "properties": props, "required": ["task"]},
            )
        )
    answer = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    tools.append(
        ToolSpec(name=FINAL_TOOL, description="Give the final answer to the question.", parameters=answer)
    )
    return tuple(tools)


async def run_rounds(
    question: str,
    *,
    orchestrator: Backend,
    backends: RoleBackends,
    agents: AgentRegistry,
    options: RoundsOptions | None = None,
    trace: TraceSink | None = None,
    retriever: Retriever | None = None,
) -> RunResult:
    """Answer ``question`` by rounds of parallel sub-agent tool calls chosen by the orchestrator."""
    opts = options or RoundsOptions()
    session = RunSession(opts.budget, trace=trace, deadline_s=opts.timeout_s)

    async def body(session: RunSession) -> RunResult:
        timeout = opts.node_timeout_s
        executor = Executor(agents, backends, session, node_timeout_s=timeout, retriever=retriever)
        return await _Rounds(question, orchestrator, agents, opts, session, executor).go()

    return await session.run(question, body, mode="rounds", models=backends.models(orchestrator))


class _Rounds:
    def __init__(
        self,
        question: str,
        orchestrator: Backend,
        agents: AgentRegistry,
        opts: RoundsOptions,
        session: RunSession,
        executor: Executor,
    ) -> None:
        self.question = question
        self.orchestrator = orchestrator
        self.catalogue = agents.catalogue()
        self.opts = opts
        self.session = session
        self.executor = executor
        self.tools = tool_specs(self.catalogue)
        system = render(
            "rounds/system.j2",
            catalogue=list(self.catalogue.values()),
            max_rounds=opts.max_rounds,
            max_calls=opts.max_calls_per_round,
            budget=opts.budget.describe(),
        )
        self.messages = [Message("system", system), Message("user", question)]
        self.nodes: dict[str, NodeOutput] = {}
        self.specs: list[AgentSpec] = []

    async def go(self) -> RunResult:
        for round_no in range(1, self.opts.max_rounds + 2):
            last_turn = round_no > self.opts.max_rounds
            tools = tuple(t for t in self.tools if t.name == FINAL_TOOL) if last_turn else self.tools
            config = GenerateConfig(
                temperature=self.opts.temperature, max_tokens=self.opts.max_tokens, tools=tools
            )
            try:
                remaining = self.session.remaining_s()
                call = self.session.complete(self.orchestrator, self.messages, config, role="orchestrator")
                completion = await (call if remaining is None else asyncio.wait_for(call, remaining))
            except BudgetExceeded as exc:
                return self._result("budget", error=f"orchestrator: {exc.message}")
            except MasorchError as exc:
                return self._result("error", error=f"orchestrator: {exc}")
            except asyncio.TimeoutError:
                return self._result("timeout", error=f"run deadline of {self.opts.timeout_s:g} s passed")
            calls = list(completion.tool_calls)
            final = next((c for c in calls if c.name == FINAL_TOOL), None)
            if final is not None:
                answer = (_arguments(final) or {}).get("answer")
                if isinstance(answer, str) and answer.strip():
                    return self._result("ok", answer=answer.strip())
            self.messages.append(Message("assistant", completion.text or _describe_calls(calls)))
            agent_calls = [c for c in calls if c.name != FINAL_TOOL][: self.opts.max_calls_per_round]
            if last_turn:
                break
            if not agent_calls:
                self.messages.append(Message("user", render("rounds/no_calls.j2")))
                continue
            results = await self._run_round(round_no, agent_calls)
            if self.session.ledger.exhausted() is not None and any(r["status"] == "budget" for r in results):
                return self._result("budget", error=self.session.ledger.exhausted() or "")
            last = round_no == self.opts.max_rounds
            feedback = render(
                "rounds/results.j2",
                round=round_no,
                max_rounds=self.opts.max_rounds,
                results=results,
                last=last,
            )
            self.messages.append(Message("user", feedback))
        return self._result("error", error=f"no final answer after {self.opts.max_rounds} rounds")

    async def _run_round(self, round_no: int, calls: list[ToolCall]) -> list[dict[str, str]]:
        """Run one round's tool calls in parallel; every call gets an explicit status."""
        jobs = []
        rows: list[dict[str, str]] = []
        specs = []
        for i, call in enumerate(calls, start=1):
            node_id = f"r{round_no}c{i}"
            args = _arguments(call)
            if args is None:
                rows.append(
                    {
                        "id": node_id,
                        "kind": call.name,
                        "task": "",
                        "answer": "",
                        "status": "invalid",
                        "error": "invalid call: the arguments are not a JSON object",
                    }
                )
                continue
            task = args.pop("task", "")
            spec = AgentSpec(
                id=node_id, kind=call.name, task=task if isinstance(task, str) else str(task), params=args
            )
            checked = validate(Plan(agents=(spec,)), DoM.LOW, self.catalogue)
            row = {"id": node_id, "kind": call.name, "task": spec.task, "answer": "", "error": ""}
            rows.append(row)
            if checked.validated is None:
                problems = "; ".join(f"{d.message} ({d.hint})" for d in checked.diagnostics if d.is_error)
                row.update(status="invalid", error=f"invalid call: {problems}")
                continue
            specs.append(spec)
            jobs.append((row, self.executor.execute(checked.validated, self.question)))
        self.specs.extend(specs)
        self.session.emit(
            PlanParsed,
            dialect="tools",
            text=_describe_calls(calls),
            plan=Plan(agents=tuple(specs)).model_dump(mode="json"),
            attempt=round_no,
        )
        outcomes = await asyncio.gather(*(job for _, job in jobs))
        for (row, _), outcome in zip(jobs, outcomes, strict=True):
            node_out = outcome.node_results.get(
                row["id"], NodeOutput(status=NodeStatus.ERROR, error=outcome.error)
            )
            self.nodes[row["id"]] = node_out
            row.update(status=node_out.status.value, answer=node_out.answer, error=node_out.error)
        return rows

    def _result(self, status: RunStatus, *, answer: str = "", error: str = "") -> RunResult:
        return RunResult(
            status=status,
            answer=answer if status == "ok" else "",
            node_results=dict(self.nodes),
            usage=self.session.ledger.totals(),
            ledger=self.session.ledger,
            wall_s=self.session.elapsed_s,
            error=error,
            plan=Plan(agents=tuple(self.specs)),
            run_id=self.session.run_id,
        )


def _arguments(call: ToolCall) -> dict[str, Any] | None:
    """A tool call's JSON arguments as a dict, or None when they are not a JSON object."""
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        logger.info("tool call %s has unreadable arguments: %r", call.name, call.arguments[:200])
        return None
    return value if isinstance(value, dict) else None


def _describe_calls(calls: list[ToolCall]) -> str:
    return "\n".join(f"{c.name}({c.arguments})" for c in calls) or "(no tool call)"
