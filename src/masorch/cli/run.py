"""``masorch run "QUESTION"``: plan with an orchestrator, run the plan, show the answer and usage.

Backends and agents come from factories given to :func:`register`, so tests (and embedders) can
inject scripted backends without touching any global: ``register(app, backend_factory=...)``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.live import Live

from masorch.agents.base import AgentRegistry, Retriever
from masorch.agents.signatures import agent_profile_name
from masorch.backends.base import Backend
from masorch.backends.cache import CachingFactory
from masorch.backends.prices import PricedFactory, price_table
from masorch.cli._options import Ctx, PriceFiles, PriceFlags, Slots, Threads
from masorch.cli._run_view import LiveView, show_result
from masorch.errors import UsageError
from masorch.files import atomic_writer, check_writable
from masorch.run import Budget, Environment, EnvSpec, RunResult, System, run
from masorch.run.environment import default_agents_factory, default_backend_factory, default_retriever_factory
from masorch.run.system import PoolModel
from masorch.trace.writer import CallbackSink, FanOut, TraceSink, TraceWriter

T = TypeVar("T")

#: The values of ``--mode``: a one-step plan, rounds of parallel tool calls, rounds of one call.
MODES: tuple[str, ...] = ("plan", "rounds", "rounds-serial")
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
    """Add the ``run`` command to ``app``; the factories default to the real registries.

    Long on purpose: the command is declared inside, closing over the factories (tests inject them).
    """

    @app.command("run")
    def run_cmd(
        question: str = typer.Argument(..., help="The question to answer."),
        dom: str | None = typer.Option(
            None, "--dom", help="Degree of multi-agent structure: low or high (default high; plan mode)."
        ),
        orchestrator: str | None = typer.Option(None, "--orchestrator", help="Orchestrator model."),
        subagent: str | None = typer.Option(None, "--subagent", help="Default sub-agent model."),
        judge: str | None = typer.Option(None, "--judge", help="Judge model (default: the sub-agent's)."),
        agent_model: list[str] = typer.Option(  # noqa: B008
            [], "--agent-model", help="Model of one agent kind, as KIND=MODEL (repeatable)."
        ),
        dialect: str | None = typer.Option(
            None, "--dialect", help="Plan dialect: calls, json or xml (default calls; plan mode)."
        ),
        prompt: str | None = typer.Option(
            None,
            "--prompt",
            help="Orchestrator prompt: default, or official (the layout the MAS-Orchestra checkpoints were "
            "trained on; xml dialect, free decoding, 8192 plan tokens; plan mode).",
        ),
        prompt_file: Path | None = typer.Option(  # noqa: B008
            None,
            "--prompt-file",
            help="YAML copy of the official templates: system, user, developer (implies --prompt official).",
        ),
        prompt_family: str | None = typer.Option(
            None,
            "--prompt-family",
            help="Task family of the official prompt: general, choice (mas:low) or masbench (mas:high).",
        ),
        repair: int | None = typer.Option(
            None, "--repair", min=0, help="Times a rejected plan is sent back (default 0; plan mode)."
        ),
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
            "plan",
            "--mode",
            help="plan: one holistic plan; rounds: agents as tools over rounds; rounds-serial: one "
            "call per round.",
        ),
        max_rounds: int | None = typer.Option(
            None, "--max-rounds", min=1, max=12, help="Most tool rounds (default 12; rounds modes)."
        ),
        max_calls: int | None = typer.Option(
            None, "--max-calls-per-round", min=1, max=4, help="Most calls a round (default 4; rounds mode)."
        ),
        pool: list[str] = typer.Option(  # noqa: B008
            [],
            "--pool",
            help="A model calls may choose, as 'NAME=MODEL: description' (repeatable; rounds modes).",
        ),
        synthesis: str | None = typer.Option(
            None, "--synthesis", help="Model that answers at the round cap (default: the orchestrator)."
        ),
        tool_cost: list[str] = typer.Option(  # noqa: B008
            [], "--tool-cost", help="Cost units of one call of a tool, as KIND=UNITS (repeatable)."
        ),
        max_units: float | None = typer.Option(
            None, "--max-units", min=0, help="The run's budget in tool cost units (rounds modes)."
        ),
        chat_out: Path | None = typer.Option(  # noqa: B008
            None, "--chat-out", help="Write the trajectory as a chat-format JSON record (rounds modes)."
        ),
        max_tokens: int = typer.Option(
            1024, "--max-tokens", min=16, help="Most completion tokens of one sub-agent call."
        ),
        agent_profile: str | None = typer.Option(
            None,
            "--agents",
            help="Agent profile: default, or paper (the official MAS-Orchestra agents; the default "
            "with --prompt official).",
        ),
        plan_tokens: int | None = typer.Option(
            None,
            "--plan-tokens",
            min=16,
            help="Most tokens of the orchestrator's plan or turn (1024; 8192 with --prompt official).",
        ),
        threads: Threads = None,
        slots: Slots = None,
        ctx: Ctx = None,
        constrain: bool | None = typer.Option(
            None,
            "--constrain/--no-constrain",
            help="Decode the plan (or each rounds turn) under its grammar or schema where the backend "
            "can (default; --no-constrain: free decoding).",
        ),
        prune: bool | None = typer.Option(
            None,
            "--prune/--no-prune",
            help="Leave out agents whose output never reaches the final agent (default) instead of "
            "rejecting the plan (plan mode).",
        ),
        prices: PriceFiles = [],  # noqa: B006
        price: PriceFlags = [],  # noqa: B006
        cache: Path | None = typer.Option(  # noqa: B008
            None, "--cache", help="Record/replay cache (SQLite): a repeated call is answered from it."
        ),
        replay: bool = typer.Option(
            False, "--replay", help="Answer every call from --cache only; a call not in it is an error."
        ),
    ) -> None:
        """Answer QUESTION: an orchestrator writes a multi-agent plan, masorch checks and runs it.\f

        Long on purpose: the signature is the command's table of flags (typer reads them from it).
        """
        if dom is not None and dom not in ("low", "high"):
            raise UsageError(f"--dom must be low or high, got {dom!r}", hint="use --dom low or --dom high")
        if mode not in MODES:
            raise UsageError(f"unknown mode {mode!r}", hint=f"use --mode {', '.join(MODES)}")
        plan_flags = {
            "--dom": dom,
            "--dialect": dialect,
            "--prompt": prompt,
            "--prompt-file": prompt_file,
            "--prompt-family": prompt_family,
            "--repair": repair,
            "--prune/--no-prune": prune,
        }
        rounds_flags = {
            "--max-rounds": max_rounds,
            "--max-calls-per-round": max_calls,
            "--pool": pool or None,
            "--synthesis": synthesis,
            "--tool-cost": tool_cost or None,
            "--max-units": max_units,
            "--chat-out": chat_out,
        }
        _refuse_flags(plan_flags if mode != "plan" else rounds_flags, mode)
        label = f"mas:{dom or 'high'}" if mode == "plan" else f"mas:{mode}"
        fields: dict[str, Any] = {
            "dialect": dialect,
            "prompt": prompt,
            "prompt_file": str(prompt_file) if prompt_file is not None else None,
            "prompt_family": prompt_family,
            "plan_tokens": plan_tokens,
            "repair": repair,
            "constrain": constrain,
            "prune": prune,
            "max_rounds": max_rounds,
            "max_calls_per_round": max_calls,
            "synthesis": synthesis,
            "max_units": max_units,
        }
        if pool:
            fields["pool"] = _once("--pool", [_pool_entry(p) for p in pool])
        if tool_cost:
            fields["tool_costs"] = _once("--tool-cost", [_tool_cost(c) for c in tool_cost])
        system = System.parse(
            label,
            model=subagent or orchestrator or DEFAULT_MODEL,
            orchestrator=orchestrator or subagent or DEFAULT_MODEL,
            judge=judge,
            agent_models=_once("--agent-model", [_kind_model(s) for s in agent_model]),
            budget=Budget(max_calls=budget_calls, max_tokens=budget_tokens, max_cost=budget_cost),
            timeout_s=timeout,
            node_timeout_s=node_timeout,
            **{k: v for k, v in fields.items() if v is not None},
        )
        if replay and cache is None:
            raise UsageError("--replay needs --cache", hint="e.g. --cache runs/cache.sqlite --replay")
        if backend_factory is None:  # eval's and serve's check: model strings, agent models, tool costs
            from masorch.eval.systems import check_systems

            check_systems([system], agent_profile=agent_profile_name(_profile(agent_profile, system)))
        if chat_out is not None:  # now, as --trace is: written at the end, a bad path would lose the run
            check_writable(chat_out, what="chat record", flag="--chat-out")
        make_backend = backend_factory or functools.partial(
            default_backend_factory, n_threads=threads, slots=slots, n_ctx=ctx
        )
        if cache is not None:
            make_backend = CachingFactory(make_backend, cache, "replay" if replay else "read_write")
        from masorch.eval.systems import check_cost_budgets

        table = price_table(files=prices, flags=price)
        check_cost_budgets([system], table)
        env = EnvSpec(
            backend_factory=PricedFactory(make_backend, table),
            agents_factory=_agents_factory(agents_factory, max_tokens, agent_profile, system),
            retriever_factory=retriever_factory or default_retriever_factory,
        )
        result = asyncio.run(_run(system, question, env, corpus=corpus, trace=trace, as_json=as_json))
        if chat_out is not None and result.trajectory is not None:
            _write_record(chat_out, result.trajectory.to_chat())
        if not result.ok:
            raise typer.Exit(1)


def _agents_factory(
    given: AgentsFactory | None, max_tokens: int, profile: str | None, system: System
) -> Callable[[], AgentRegistry]:
    """The registry builder of this run: an injected factory (which has no profiles), or the
    built-in agents of ``profile`` (unset: the official agents with the official prompt)."""
    if given is not None:
        if profile not in (None, "default"):
            raise UsageError(f"this masorch offers no agent profile {profile!r}", hint="leave out --agents")
        return functools.partial(given, max_tokens)
    profile_name = agent_profile_name(_profile(profile, system))
    return functools.partial(default_agents_factory, max_tokens, profile_name)


def _profile(given: str | None, system: System) -> str:
    """The agent profile of a run: ``--agents``, else the official agents with the official prompt."""
    if given is not None:
        return given
    return "paper" if system.prompt == "official" and system.mode == "mas" else "default"


async def _run(
    system: System, question: str, spec: EnvSpec, *, corpus: Path | None, trace: Path | None, as_json: bool
) -> RunResult:
    env = Environment(spec)
    try:  # a model that cannot be built stops the run before the trace file exists
        env.build_backends(system.model_strings())
    except BaseException:
        await env.aclose()
        raise
    writer = TraceWriter(trace) if trace is not None else None
    try:
        if as_json:
            result = await run(system, question, env, trace=FanOut([writer] if writer else []), corpus=corpus)
            typer.echo(json.dumps(json_summary(result), ensure_ascii=False))
            return result
        console = Console(emoji=False)
        view = LiveView(console)
        sinks: list[TraceSink] = [CallbackSink(view.on_event), *([writer] if writer else [])]
        try:
            with Live(view.render(), console=console, refresh_per_second=8, transient=False) as live:
                view.live = live
                result = await run(system, question, env, trace=FanOut(sinks), corpus=corpus)
        finally:  # the table's last line ends here, so an error printed next starts a line of its own
            console.line()
        show_result(console, result)
        return result
    finally:
        if writer is not None:
            writer.close()
        await env.aclose()


def json_summary(result: RunResult) -> dict[str, Any]:
    """The ``--json`` object: answer, status, error, plan, diagnostics, usage and wall time."""
    return {
        "answer": result.answer,
        "status": result.status,
        "error": result.error,
        "plan": result.plan.model_dump(mode="json") if result.plan is not None else None,
        "diagnostics": [d.to_dict() for d in result.diagnostics],
        "usage": {
            "calls": result.usage.calls,
            "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens,
            "cost": result.usage.cost,
        },
        "wall_s": round(result.wall_s, 3),
        "rounds": _rounds_summary(result),
    }


def _rounds_summary(result: RunResult) -> dict[str, Any] | None:
    """Rounds, calls per status, units and how it ended, for a multi-round run; else None."""
    t = result.trajectory
    if t is None:
        return None
    return {
        "rounds": len(t.rounds),
        "calls": [c.to_dict() for c in t.calls],
        "statuses": t.statuses(),
        "units": t.units,
        "ended_by": t.ended_by,
    }


def _write_record(path: Path, record: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_writer(path, "w") as fh:
            fh.write(json.dumps(record, ensure_ascii=False, indent=1) + "\n")
    except OSError as exc:
        raise UsageError(
            f"cannot write {path}: {exc.strerror}", hint="give a writable --chat-out path"
        ) from None


def _refuse_flags(given: Mapping[str, object], mode: str) -> None:
    """A UsageError naming the flags given that do not apply to ``mode`` (never ignore them)."""
    wrong = [flag for flag, value in given.items() if value is not None]
    if wrong:
        other = "--mode rounds" if mode == "plan" else "--mode plan"
        raise UsageError(
            f"{', '.join(wrong)} {'does' if len(wrong) == 1 else 'do'} not apply to --mode {mode}",
            hint=f"drop {'it' if len(wrong) == 1 else 'them'}, or use {other}",
        )


def _once(flag: str, pairs: list[tuple[str, T]]) -> dict[str, T]:
    """``pairs`` as a dict; a name given twice is a UsageError (as a key twice in YAML is)."""
    seen: dict[str, T] = {}
    for name, value in pairs:
        if name in seen:
            raise UsageError(f"{flag} names {name!r} twice", hint=f"give each {flag} name once")
        seen[name] = value
    return seen


def _pool_entry(spec: str) -> tuple[str, PoolModel]:
    name, sep, rest = spec.partition("=")
    if not sep or not name.strip():
        raise UsageError(
            f"--pool {spec!r} is not NAME=MODEL: description",
            hint="e.g. --pool 'fast=local:qwen2.5-coder-0.5b: small and fast'",
        )
    return name.strip(), PoolModel.parse(rest)


def _tool_cost(spec: str) -> tuple[str, float]:
    kind, sep, units = spec.partition("=")
    try:
        value = float(units)
    except ValueError:
        value = -1.0
    if not sep or not kind.strip() or not (math.isfinite(value) and value >= 0):
        raise UsageError(
            f"--tool-cost {spec!r} is not KIND=UNITS (a finite number >= 0)", hint="e.g. --tool-cost sc=3"
        )
    return kind.strip(), value


def _kind_model(spec: str) -> tuple[str, str]:
    kind, sep, model = spec.partition("=")
    if not sep or not kind or not model:
        raise UsageError(
            f"--agent-model {spec!r} is not KIND=MODEL", hint="e.g. --agent-model sc=local:qwen2.5-coder-0.5b"
        )
    return kind.strip(), model.strip()
