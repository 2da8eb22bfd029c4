"""``masorch run "QUESTION"``: plan with an orchestrator, run the plan, show the answer and usage.

Backends and agents come from factories given to :func:`register`, so tests (and embedders) can
inject scripted backends without touching any global: ``register(app, backend_factory=...)``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.live import Live

from masorch.agents.base import AgentRegistry, Retriever
from masorch.agents.registry import offered_registry
from masorch.backends.base import Backend
from masorch.backends.prices import PricedFactory, price_table
from masorch.cli._run_view import LiveView, show_result
from masorch.errors import UsageError
from masorch.plan import DoM
from masorch.run.budget import Budget
from masorch.run.executor import RoleBackends
from masorch.run.orchestrate import OrchestrateOptions, orchestrate
from masorch.run.result import RunResult
from masorch.run.rounds import RoundsOptions, run_rounds
from masorch.trace.writer import CallbackSink, FanOut, TraceSink, TraceWriter

#: The embedded model used when no model flag is given (runs offline once pulled).
DEFAULT_MODEL = "local:qwen2.5-coder-1.5b"

BackendFactory = Callable[[str], Backend]
#: Builds the sub-agent registry; the argument caps each sub-agent call's completion tokens.
AgentsFactory = Callable[[int], AgentRegistry]
RetrieverFactory = Callable[[Path], Retriever]


def default_backend_factory(spec: str, *, threads: int | None = None, slots: int | None = None) -> Backend:
    """A backend from a ``provider:model`` string through :mod:`masorch.backends.registry`.

    ``threads`` and ``slots`` size the llama.cpp server of an embedded (``local:``) model.
    """
    from masorch.backends.registry import BackendSettings, make_backend

    settings = BackendSettings(n_threads=threads)
    if slots is not None:
        settings = dataclasses.replace(settings, slots=slots)
    return make_backend(spec, settings=settings)


def default_agents_factory(max_tokens: int) -> AgentRegistry:
    """The built-in sub-agents (:func:`masorch.agents.default_registry`)."""
    from masorch.agents import default_registry

    return default_registry(max_tokens=max_tokens)


def default_retriever_factory(path: Path) -> Retriever:
    """A BM25 corpus: a saved index directory, or a JSONL file (its index cached beside it)."""
    from masorch.agents.corpus import BM25Corpus

    if path.is_dir():
        return BM25Corpus.load(path)
    if not path.is_file():
        raise UsageError(f"no corpus at {path}", hint="pass a JSONL corpus file or a saved index directory")
    return BM25Corpus.open(path, path.with_name(path.name + ".index"))


@dataclass(frozen=True)
class RunArgs:
    """The parsed flags of one ``masorch run``."""

    question: str
    dom: DoM
    orchestrator: str
    subagent: str
    judge: str | None
    agent_models: tuple[str, ...]
    dialect: str
    repair: int
    trace: Path | None
    as_json: bool
    budget: Budget
    timeout_s: float | None
    node_timeout_s: float | None
    corpus: Path | None
    mode: str = "plan"
    max_rounds: int = 3
    max_tokens: int = 1024
    constrain: bool = True


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
        if dialect not in ("calls", "json", "xml"):
            raise UsageError(f"unknown dialect {dialect!r}", hint="use --dialect calls, json or xml")
        sub = subagent or orchestrator or DEFAULT_MODEL
        args = RunArgs(
            question=question,
            dom=DoM(dom),
            orchestrator=orchestrator or subagent or DEFAULT_MODEL,
            subagent=sub,
            judge=judge,
            agent_models=tuple(agent_model),
            dialect=dialect,
            repair=repair,
            trace=trace,
            as_json=as_json,
            budget=Budget(max_calls=budget_calls, max_tokens=budget_tokens, max_cost=budget_cost),
            timeout_s=timeout,
            node_timeout_s=node_timeout,
            corpus=corpus,
            mode=mode,
            max_rounds=max_rounds,
            max_tokens=max_tokens,
            constrain=constrain,
        )
        factory = backend_factory or functools.partial(default_backend_factory, threads=threads, slots=slots)
        result = asyncio.run(
            _run(
                args,
                PricedFactory(factory, price_table(files=prices, flags=price)),
                agents_factory or default_agents_factory,
                retriever_factory or default_retriever_factory,
            )
        )
        if not result.ok:
            raise typer.Exit(1)


async def _run(
    args: RunArgs,
    make_backend: BackendFactory,
    make_agents: AgentsFactory,
    make_retriever: RetrieverFactory,
) -> RunResult:
    per_kind_specs = dict(_kind_model(s) for s in args.agent_models)
    retriever = make_retriever(args.corpus) if args.corpus is not None else None
    # Only the kinds this run can execute are offered: no search without a corpus, no python
    # where the sandbox cannot start.
    agents = offered_registry(make_agents(args.max_tokens), retriever=retriever is not None)
    unknown = sorted(k for k in per_kind_specs if k not in agents)
    if unknown:
        raise UsageError(
            f"--agent-model names unknown kinds: {', '.join(unknown)}",
            hint=f"kinds: {list(agents.catalogue())}",
        )
    # One backend per distinct model string, so a local model is loaded once for every role.
    cache: dict[str, Backend] = {}

    def backend(spec: str) -> Backend:
        if spec not in cache:
            cache[spec] = make_backend(spec)
        return cache[spec]

    try:
        roles = RoleBackends(
            subagent=backend(args.subagent),
            per_kind={k: backend(v) for k, v in per_kind_specs.items()},
            judge=backend(args.judge) if args.judge else None,
        )
        console = Console(emoji=False)
        writer = TraceWriter(args.trace) if args.trace is not None else None
        try:
            if args.as_json:
                sinks: list[TraceSink] = [writer] if writer else []
                result = await _answer(
                    args, backend(args.orchestrator), roles, agents, FanOut(sinks), retriever
                )
                typer.echo(json.dumps(json_summary(result), ensure_ascii=False))
                return result
            view = LiveView(console)
            sinks = [CallbackSink(view.on_event), *([writer] if writer else [])]
            with Live(view.render(), console=console, refresh_per_second=8, transient=False) as live:
                view.live = live
                result = await _answer(
                    args, backend(args.orchestrator), roles, agents, FanOut(sinks), retriever
                )
            console.line()
            show_result(console, result)
            return result
        finally:
            if writer is not None:
                writer.close()
    finally:
        for b in cache.values():
            await b.aclose()


async def _answer(
    args: RunArgs,
    orchestrator: Backend,
    roles: RoleBackends,
    agents: AgentRegistry,
    trace: TraceSink,
    retriever: Retriever | None,
) -> RunResult:
    """Run the chosen mode: one holistic plan, or rounds of agent tool calls."""
    if args.mode == "rounds":
        rounds = RoundsOptions(
            max_rounds=args.max_rounds,
            budget=args.budget,
            deadline_s=args.timeout_s,
            node_timeout_s=args.node_timeout_s,
            max_tokens=args.max_tokens,
        )
        return await run_rounds(
            args.question,
            orchestrator=orchestrator,
            backends=roles,
            agents=agents,
            options=rounds,
            trace=trace,
            retriever=retriever,
        )
    options = OrchestrateOptions(
        dom=args.dom,
        dialect=args.dialect,  # type: ignore[arg-type]  # checked in run_cmd
        repair=args.repair,
        budget=args.budget,
        deadline_s=args.timeout_s,
        node_timeout_s=args.node_timeout_s,
        max_plan_tokens=args.max_tokens,
        constrain=args.constrain,
    )
    return await orchestrate(
        args.question,
        orchestrator=orchestrator,
        backends=roles,
        agents=agents,
        options=options,
        trace=trace,
        retriever=retriever,
    )


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
