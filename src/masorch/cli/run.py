"""``masorch run "QUESTION"``: plan with an orchestrator, run the plan, show the answer and usage.

Backends and agents come from factories given to :func:`register`, so tests (and embedders) can
inject scripted backends without touching any global: ``register(app, backend_factory=...)``.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.live import Live

from masorch.agents.base import AgentRegistry, Retriever
from masorch.backends.base import Backend
from masorch.backends.prices import PricedFactory, price_table
from masorch.cli._run_view import LiveView, show_result
from masorch.errors import UsageError
from masorch.run import Budget, Environment, EnvSpec, RunResult, System, run
from masorch.run.environment import default_agents_factory, default_backend_factory, default_retriever_factory
from masorch.trace.writer import CallbackSink, FanOut, TraceSink, TraceWriter

#: The embedded model used when no model flag is given (runs offline once pulled).
DEFAULT_MODEL = "local:qwen2.5-coder-1.5b"

BackendFactory = Callable[[str], Backend]
#: Builds the sub-agent registry; the argument caps each sub-agent call's completion tokens.
AgentsFactory = Callable[[int], AgentRegistry]
RetrieverFactory = Callable[[Path], Retriever]


def register(
    app: typer.Typer,
    *,
    backend_factory: BackendFactory | None = None,
    agents_factory: AgentsFactory | None = None,
    retriever_factory: RetrieverFactory | None = None,
) -> None:
    """Add the ``run`` command to ``app``; the factories default to the real registries."""

    @app.command("run")
    def run_cmd(
        question: str = typer.Argument(..., help="The question to answer."),
        dom: str = typer.Option("high", "--dom", help="Degree of multi-agent structure: low or high."),
        orchestrator: str | None = typer.Option(None, "--orchestrator", help="Orchestrator model."),
        subagent: str | None = typer.Option(None, "--subagent", help="Default sub-agent model."),
        judge: str | None = typer.Option(None, "--judge", help="Judge model (default: the sub-agent's)."),
        agent_model: list[str] = typer.Option(  # noqa: B008
            [], "--agent-model", help="Model of one agent kind, as KIND=MODEL (repeatable)."
        ),
        dialect: str = typer.Option("calls", "--dialect", help="Plan dialect: calls, json or xml."),
        repair: int = typer.Option(0, "--repair", min=0, help="Times a rejected plan is sent back."),
        trace: Path | None = typer.Option(None, "--trace", help="Append the run's events to this JSONL."),  # noqa: B008
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object and nothing else."),
        budget_tokens: int | None = typer.Option(None, "--budget-tokens", min=0, help="Token budget."),
        budget_calls: int | None = typer.Option(None, "--budget-calls", min=0, help="LLM call budget."),
        budget_cost: float | None = typer.Option(None, "--budget-cost", min=0, help="Cost budget ($)."),
        timeout: float | None = typer.Option(None, "--timeout", min=0, help="Run deadline (seconds)."),
        node_timeout: float | None = typer.Option(
            None, "--node-timeout", min=0, help="Per-node timeout (s)."
        ),
        corpus: Path | None = typer.Option(None, "--corpus", help="JSONL corpus or index dir for search."),  # noqa: B008
        mode: str = typer.Option(
            "plan", "--mode", help="plan: one holistic plan; rounds: agents as tools over rounds."
        ),
        max_rounds: int = typer.Option(3, "--max-rounds", min=1, help="Tool rounds in --mode rounds."),
        max_tokens: int = typer.Option(
            1024, "--max-tokens", min=16, help="Most completion tokens of one call (plan or sub-agent)."
        ),
        threads: int | None = typer.Option(
            None, "--threads", min=1, help="CPU threads of an embedded (local:) model (default: all cores)."
        ),
        slots: int | None = typer.Option(
            None, "--slots", min=1, max=64, help="Requests an embedded (local:) model decodes at once (8)."
        ),
        constrain: bool = typer.Option(
            True,
            "--constrain/--no-constrain",
            help="Decode the plan under its dialect's grammar or schema where the backend can "
            "(--no-constrain: free decoding).",
        ),
        prices: list[Path] = typer.Option(  # noqa: B008
            [], "--prices", help="YAML/TOML file with a prices: section ($ per 1M tokens; repeatable)."
        ),
        price: list[str] = typer.Option(  # noqa: B008
            [], "--price", help="A model's price: MODEL=IN,OUT[,CACHED] ($ per 1M tokens; repeatable)."
        ),
    ) -> None:
        """Answer QUESTION: an orchestrator writes a multi-agent plan, masorch checks and runs it."""
        if dom not in ("low", "high"):
            raise UsageError(f"--dom must be low or high, got {dom!r}", hint="use --dom low or --dom high")
        if mode not in ("plan", "rounds"):
            raise UsageError(f"unknown mode {mode!r}", hint="use --mode plan or --mode rounds")
        system = System.parse(
            "mas:rounds" if mode == "rounds" else f"mas:{dom}",
            model=subagent or orchestrator or DEFAULT_MODEL,
            orchestrator=orchestrator or subagent or DEFAULT_MODEL,
            judge=judge,
            agent_models=dict(_kind_model(s) for s in agent_model),
            dialect=dialect,
            repair=repair,
            constrain=constrain,
            plan_tokens=max_tokens,
            budget=Budget(max_calls=budget_calls, max_tokens=budget_tokens, max_cost=budget_cost),
            timeout_s=timeout,
            node_timeout_s=node_timeout,
            max_rounds=max_rounds,
        )
        env = EnvSpec(
            backend_factory=PricedFactory(
                backend_factory or functools.partial(default_backend_factory, n_threads=threads, slots=slots),
                price_table(files=prices, flags=price),
            ),
            agents_factory=functools.partial(agents_factory or default_agents_factory, max_tokens),
            retriever_factory=retriever_factory or default_retriever_factory,
        )
        result = asyncio.run(_run(system, question, env, corpus=corpus, trace=trace, as_json=as_json))
        if not result.ok:
            raise typer.Exit(1)


async def _run(
    system: System, question: str, spec: EnvSpec, *, corpus: Path | None, trace: Path | None, as_json: bool
) -> RunResult:
    env = Environment(spec)
    writer = TraceWriter(trace) if trace is not None else None
    try:
        if as_json:
            result = await run(system, question, env, trace=FanOut([writer] if writer else []), corpus=corpus)
            typer.echo(json.dumps(json_summary(result), ensure_ascii=False))
            return result
        console = Console(emoji=False)
        view = LiveView(console)
        sinks: list[TraceSink] = [CallbackSink(view.on_event), *([writer] if writer else [])]
        with Live(view.render(), console=console, refresh_per_second=8, transient=False) as live:
            view.live = live
            result = await run(system, question, env, trace=FanOut(sinks), corpus=corpus)
        console.line()
        show_result(console, result)
        return result
    finally:
        if writer is not None:
            writer.close()
        await env.aclose()


def json_summary(result: RunResult) -> dict[str, Any]:
    """The ``--json`` object: answer, status, plan, diagnostics, usage and wall time."""
    return {
        "answer": result.answer,
        "status": result.status,
        "plan": result.plan.model_dump(mode="json") if result.plan is not None else None,
        "diagnostics": [d.to_dict() for d in result.diagnostics],
        "usage": {
            "calls": result.usage.calls,
            "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens,
            "cost": result.usage.cost,
        },
        "wall_s": round(result.wall_s, 3),
    }


def _kind_model(spec: str) -> tuple[str, str]:
    kind, sep, model = spec.partition("=")
    if not sep or not kind or not model:
        raise UsageError(
            f"--agent-model {spec!r} is not KIND=MODEL", hint="e.g. --agent-model sc=local:qwen2.5-coder-0.5b"
        )
    return kind.strip(), model.strip()
