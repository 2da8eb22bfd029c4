"""``masorch eval run ...`` (run systems over datasets, resumable) and ``masorch eval report DIR``.

``eval`` is a command group: ``run`` evaluates and writes ``DIR/log.jsonl``, ``DIR/traces.jsonl``,
``DIR/report.md`` and ``DIR/plots/``; ``report`` rebuilds the report and plots from the log alone.
The environment (backends, agents, scorers) comes from a factory given to :func:`register`, so
tests can inject scripted backends: ``register(app, env_factory=...)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from masorch.agents.signatures import AgentProfileName, agent_profile_name
from masorch.backends.prices import PricedFactory, PriceTable, price_table
from masorch.cli._options import MAX_CONCURRENCY, Ctx, PriceFiles, PriceFlags, Slots, Threads
from masorch.cli._progress import counting_progress
from masorch.errors import UsageError
from masorch.eval.datasets.custom import FieldMap
from masorch.eval.harness import EnvSpec, EvalOptions, Tally, evaluate
from masorch.eval.log import check_run_dir
from masorch.eval.report import write_report
from masorch.eval.sources import resolve_all
from masorch.eval.systems import check_cost_budgets, check_systems, systems_from_flags
from masorch.run.system import System
from masorch.score.registry import canonical_scorer


@dataclass(frozen=True)
class EnvArgs:
    """The flags that shape a run's environment."""

    cache: Path | None = None
    max_tokens: int | None = None
    threads: int | None = None
    scorer_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    slots: int | None = None
    agent_profile: AgentProfileName = "default"
    n_ctx: int | None = None


#: The run's environment flags -> the environment (backends, agents, scorers) of a run.
EnvFactory = Callable[[EnvArgs], EnvSpec]


def default_env_factory(args: EnvArgs) -> EnvSpec:
    """The real environment: backends from model strings (through ``cache`` if given), built-in agents."""
    return EnvSpec.default(
        cache_path=args.cache,
        max_tokens=args.max_tokens,
        scorer_options=args.scorer_options,
        n_threads=args.threads,
        slots=args.slots,
        agent_profile=args.agent_profile,
        n_ctx=args.n_ctx,
    )


def register(app: typer.Typer, *, env_factory: EnvFactory | None = None) -> None:
    """Add the ``eval`` group (``run``, ``report``) to ``app``.

    Long on purpose: the commands are declared inside, closing over ``env_factory`` (tests inject it).
    """
    group = typer.Typer(
        help="Evaluate single-agent and multi-agent systems over datasets; report with intervals.",
        no_args_is_help=True,
    )
    app.add_typer(group, name="eval")

    @group.command("run")
    def run_cmd(
        data: list[str] = typer.Option(  # noqa: B008
            ...,
            "--data",
            help="Dataset name (aime24, ...), your .jsonl/.parquet/.csv file, hf:NAME[:CONFIG][:SPLIT], "
            "or MASBench files (repeatable).",
        ),
        out: Path = typer.Option(..., "--out", help="Run directory (log, traces, report, plots)."),  # noqa: B008
        systems: str | None = typer.Option(
            None, "--systems", help="e.g. sas:cot,sas:sc,mas:low,mas:high,mas:rounds,mas:rounds-serial"
        ),
        config: Path | None = typer.Option(None, "--config", help="YAML file of systems."),  # noqa: B008
        model: str | None = typer.Option(None, "--model", help="Sub-agent model (and orchestrator default)."),
        orchestrator: str | None = typer.Option(None, "--orchestrator", help="Orchestrator model (mas)."),
        judge: str | None = typer.Option(None, "--judge", help="Judge-role model inside systems."),
        dialect: str | None = typer.Option(None, "--dialect", help="Plan dialect: calls, json or xml."),
        prompt: str | None = typer.Option(None, "--prompt", help="Orchestrator prompt: default or official."),
        prompt_file: Path | None = typer.Option(None, "--prompt-file", help="Official templates (YAML)."),  # noqa: B008
        prompt_family: str | None = typer.Option(None, "--prompt-family", help="general, choice, masbench."),
        repair: int | None = typer.Option(None, "--repair", min=0, help="Plan repair rounds (mas)."),
        constrain: bool | None = typer.Option(
            None,
            "--constrain/--no-constrain",
            help="Grammar-constrained plans and rounds turns (default on).",
        ),
        plan_tokens: int | None = typer.Option(
            None, "--plan-tokens", min=1, help="Token cap of the orchestrator's plan (mas)."
        ),
        budget_calls: int | None = typer.Option(None, "--budget-calls", min=0, help="Calls per sample."),
        budget_tokens: int | None = typer.Option(None, "--budget-tokens", min=0, help="Tokens per sample."),
        budget_cost: float | None = typer.Option(None, "--budget-cost", min=0, help="Cost per sample ($)."),
        timeout: float | None = typer.Option(None, "--timeout", min=0, help="Deadline per sample (s)."),
        skip: int = typer.Option(
            0, "--skip", min=0, help="Leave out the first N samples of each dataset (before --limit)."
        ),
        limit: int | None = typer.Option(None, "--limit", min=0, help="First N samples (per axis value)."),
        sample: int | None = typer.Option(None, "--sample", min=0, help="A seeded random N samples."),
        seed: int = typer.Option(0, "--seed", min=0, help="Seed of --sample and of the bootstrap."),
        max_tokens: int | None = typer.Option(
            None, "--max-tokens", min=1, help="Completion cap of each sub-agent call."
        ),
        agent_profile: str = typer.Option(
            "default",
            "--agents",
            help="Agent profile: default, or paper (the official MAS-Orchestra agents).",
        ),
        threads: Threads = None,
        slots: Slots = None,
        ctx: Ctx = None,
        concurrency: int = typer.Option(
            8, "--concurrency", min=1, max=MAX_CONCURRENCY, help="Samples in flight."
        ),
        resume: bool = typer.Option(False, "--resume", help="Continue the run in --out."),
        first: list[str] = typer.Option(  # noqa: B008
            [],
            "--first",
            help="Run this dataset's samples before the others (its name in the log, e.g. "
            "math500-subset or masbench:depth; repeatable). Changes the order only.",
        ),
        retry_failed: bool = typer.Option(
            False,
            "--retry-failed",
            help="With --resume: rerun the samples that ended in error (status error or failed).",
        ),
        cache: Path | None = typer.Option(None, "--cache", help="SQLite record/replay cache of LLM calls."),  # noqa: B008
        data_cache: Path | None = typer.Option(None, "--data-cache", help="Dataset cache directory."),  # noqa: B008
        scorer: str | None = typer.Option(
            None,
            "--scorer",
            help="Scorer of every dataset (needed for your own files): math, exact (em), f1, masbench, "
            "masbench_final, llm_judge (judge).",
        ),
        question_field: str = typer.Option(
            "question", "--question-field", help="Question column of your own data files."
        ),
        answer_field: str = typer.Option(
            "answer", "--answer-field", help="Answer column of your own data files."
        ),
        id_field: str | None = typer.Option(
            None,
            "--id-field",
            help="Id column of your own data files (default: id if present, else the row).",
        ),
        scorer_judge: str | None = typer.Option(
            None, "--judge-model", help="Model of the llm_judge scorer (its own model string)."
        ),
        ray: str | None = typer.Option(
            None, "--ray", help="Run samples as Ray tasks: 'local' or a cluster address (ray://host:port)."
        ),
        plots: bool = typer.Option(True, "--plots/--no-plots", help="Write plots (needs matplotlib)."),
        traces: bool = typer.Option(True, "--traces/--no-traces", help="Write DIR/traces.jsonl."),
        prices: PriceFiles = [],  # noqa: B006
        price: PriceFlags = [],  # noqa: B006
    ) -> None:
        """Run every system on every sample of every dataset; write the log, then the report.\f

        Long on purpose: the signature is the command's table of flags (typer reads them from it).
        """
        check_run_dir(out)
        scorer = canonical_scorer(scorer) if scorer is not None else None
        if scorer == "llm_judge" and not scorer_judge:
            raise UsageError(
                "--scorer llm_judge needs --judge-model", hint="e.g. --judge-model openai:gpt-4o"
            )
        budget = {"calls": budget_calls, "tokens": budget_tokens, "cost": budget_cost}
        budget = {k: v for k, v in budget.items() if v is not None}
        defaults: dict[str, Any] = {
            "model": model,
            "orchestrator": orchestrator,
            "judge": judge,
            "dialect": dialect,
            "prompt": prompt,
            "prompt_file": str(prompt_file) if prompt_file is not None else None,
            "prompt_family": prompt_family,
            "repair": repair,
            "constrain": constrain,
            "plan_tokens": plan_tokens,
            "timeout_s": timeout,
        }
        if budget:
            defaults["budget"] = budget
        specs = systems_from_flags(
            systems, config, {k: v for k, v in defaults.items() if v is not None} | {"model": model}
        )
        if env_factory is None:  # before anything is written
            judges = [scorer_judge] if scorer_judge else []
            check_systems(specs, agent_profile=agent_profile_name(agent_profile), extra_models=judges)
        sources = resolve_all(
            [d for item in data for d in item.split(",") if d],
            skip=skip,
            limit=limit,
            sample=sample,
            seed=seed,
            cache_dir=data_cache,
            fields=FieldMap(question_field, answer_field, id_field),
            scorer=scorer,
        )
        scorer_options = {"llm_judge": {"model": scorer_judge}} if scorer_judge else {}
        profile = agent_profile_name(agent_profile)
        env_args = EnvArgs(cache, max_tokens, threads, scorer_options, slots, profile, ctx)
        env = (env_factory or default_env_factory)(env_args)
        table = price_table(files=prices, flags=price, config=config)
        check_cost_budgets(specs, table)
        env = dataclasses.replace(env, backend_factory=PricedFactory(env.backend_factory, table))
        options = EvalOptions(
            concurrency=concurrency,
            resume=resume,
            retry_failed=retry_failed,
            first=tuple(first),
            traces=traces,
            use_ray=ray is not None,
            ray_address=None if ray in (None, "local") else ray,
            settings=_settings(env_args) | _price_settings(table),
            seed=seed,
        )
        console = Console(stderr=True)
        tally = _run_with_progress(console, specs, sources, out, options, env)
        path = write_report(out, plots=plots)  # with the seed its log keeps
        console.print(
            f"{tally.done}/{tally.total} samples, accuracy {100 * tally.accuracy:.1f}%, "
            f"not ok {tally.not_ok}, cost ${tally.cost:.4f}; report: {path}"
        )
        if tally.errors:  # a dead endpoint must not pass for a clean run whose answers were wrong
            console.print(
                f"{tally.errors} of {tally.done} samples ended in error; first: {tally.first_error}\n"
                "hint: once the cause is fixed, the same command with --resume --retry-failed reruns them",
                markup=False,
                soft_wrap=True,
            )

    @group.command("report")
    def report_cmd(
        directory: Path = typer.Argument(..., help="The --out directory of a run."),  # noqa: B008
        plots: bool = typer.Option(True, "--plots/--no-plots", help="Write plots (needs matplotlib)."),
        seed: int | None = typer.Option(
            None, "--seed", min=0, help="Seed of the bootstrap (default: the run's --seed, kept in its log)."
        ),
    ) -> None:
        """Rebuild DIR/report.md (and DIR/plots/) from DIR/log.jsonl alone."""
        path = write_report(directory, plots=plots, seed=seed)
        typer.echo(str(path))


def _settings(args: EnvArgs) -> dict[str, Any]:
    """The flags besides the systems and data that change the answers, as the log's header keeps
    them (a resume under others is refused): the agent profile and those given."""
    given = {
        "max_tokens": args.max_tokens,
        "ctx": args.n_ctx,
        "judge_model": (args.scorer_options.get("llm_judge") or {}).get("model"),
    }
    return {"agents": args.agent_profile} | {k: v for k, v in given.items() if v is not None}


def _price_settings(table: PriceTable) -> dict[str, Any]:
    """The prices the user set (``--price``, ``--prices``, the config's ``prices:``), as the log's
    header keeps them: a resume under other prices would mix costs (and change what a cost budget
    stops). None set: nothing kept, so logs begun before prices were kept resume as before."""
    if not table.prices:
        return {}
    return {
        "prices": {
            m: [p.prompt_per_m, p.completion_per_m, p.cached_prompt_per_m] for m, p in table.prices.items()
        }
    }


def _run_with_progress(
    console: Console,
    specs: list[System],
    sources: list[Any],
    out: Path,
    options: EvalOptions,
    env: EnvSpec,
) -> Tally:
    with counting_progress("eval", console) as progress:
        task = progress.add_task("", total=None)

        def describe(t: Tally) -> str:
            return f"acc {100 * t.accuracy:.1f}%  cost ${t.cost:.4f}  tokens {t.tokens}  not ok {t.not_ok}"

        def on_start(t: Tally) -> None:
            progress.update(task, total=t.total, completed=t.done, description=describe(t))

        def on_record(rec: dict[str, Any], t: Tally) -> None:
            progress.update(task, completed=t.done, description=describe(t))

        return evaluate(
            specs, sources, out, options=options, env_spec=env, on_record=on_record, on_start=on_start
        )
