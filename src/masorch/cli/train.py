"""``masorch train``: GRPO of an orchestrator on executed plans (TRL), and verl data export.

* ``masorch train grpo --config FILE [--set KEY=VALUE ...]`` trains with TRL on this machine;
* ``masorch train data --config FILE --out DIR`` writes the config's prompts as verl parquet;
* ``masorch train sft --config FILE`` fine-tunes on those trajectories, loss on the orchestrator's tokens;
* ``masorch train collect --config FILE`` samples a teacher's multi-round trajectories into an SFT dataset;
* ``masorch train rounds --config FILE`` runs GRPO where one sample is a whole multi-round trajectory;
* ``masorch train grpo|collect|sft|rounds --show-config`` lists every config field, its default, its meaning.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from masorch.errors import UsageError


def _overrides(items: list[str]) -> dict[str, Any]:
    from masorch.files import load_yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r} is not KEY=VALUE", hint="e.g. --set max_steps=5")
        if key.strip() in out:  # as a key repeated in the YAML file is
            raise UsageError(f"--set {key.strip()[:40]} is given twice", hint="give each key once")
        out[key.strip()] = load_yaml(value, what=f"--set {key.strip()[:40]} value")
    return out


def _config_command(
    train_app: typer.Typer,
    command: str,
    summary: str,
    what: str,
    fields: Callable[[], list[tuple[str, str, str]]],
    run: Callable[[Console, Path, dict[str, Any]], None],
    report: Callable[[Console, Path, dict[str, Any]], None] | None = None,
) -> None:
    """Add ``masorch train COMMAND --config FILE [--set KEY=VALUE ...] | --show-config``.

    ``--show-config`` prints ``fields()`` (every field, its default and meaning); else ``run``
    gets the console, the config path and the ``--set`` overrides. With ``report``, ``--report``
    calls it instead of ``run`` (where a run stands, nothing run).
    """

    @train_app.command(command, help=summary)
    def config_cmd(
        config: Path | None = typer.Option(None, "--config", help=f"YAML {what} config."),  # noqa: B008
        set_: list[str] = typer.Option(  # noqa: B008
            [], "--set", help="Override a key: KEY=VALUE (YAML value; a dotted KEY sets a nested field)."
        ),
        show_config: bool = typer.Option(False, "--show-config", help="List the config fields and exit."),
        report_only: bool = typer.Option(
            False,
            "--report",
            hidden=report is None,
            help="Show where the run stands, from its output directory; run nothing.",
        ),
    ) -> None:
        console = Console()
        if show_config:
            _show_table(console, fields(), f"masorch train {command}: config fields")
        elif config is None:
            raise UsageError("no --config given", hint=f"masorch train {command} --config {command}.yaml")
        elif report_only:
            if report is None:
                raise UsageError(f"masorch train {command} has no --report", hint="leave --report out")
            report(console, config, _overrides(set_))
        else:
            run(console, config, _overrides(set_))


def _grpo_fields() -> list[tuple[str, str, str]]:
    from masorch.train.config import describe

    return describe()


def _collect_fields() -> list[tuple[str, str, str]]:
    from masorch.train.collect_config import describe_collect

    return describe_collect()


def _rounds_fields() -> list[tuple[str, str, str]]:
    from masorch.train.rounds_config import describe_rounds

    return describe_rounds()


def _train_rounds(console: Console, path: Path, overrides: dict[str, Any]) -> None:
    import logging

    from masorch.train.rounds_config import load_rounds_config
    from masorch.train.rounds_grpo import train_rounds

    logging.getLogger("masorch").setLevel(logging.INFO)
    cfg = load_rounds_config(path, overrides)
    keys = ("step", "loss", "reward", "rewards/success/mean", "rounds/rounds", "rounds/calls")

    def on_log(line: dict[str, Any]) -> None:
        console.print(" ".join(f"{k}={line[k]:.4g}" for k in keys if isinstance(line.get(k), (int, float))))

    report = train_rounds(cfg, on_log=on_log)
    console.print(
        f"[bold]done[/]: {report.steps} steps, {report.seconds_per_step:.1f} s/step; "
        f"model in {report.final_model}"
    )


def _sft_fields() -> list[tuple[str, str, str]]:
    from masorch.train.sft_config import describe_sft

    return describe_sft()


def _show_table(console: Console, rows: list[tuple[str, str, str]], title: str) -> None:
    table = Table("field", "default", "meaning", title=title)
    for name, default, help_text in rows:
        table.add_row(name, default, help_text)
    console.print(table)


def _collect_with_progress(console: Console, cfg: Any, spec: Any) -> None:
    from masorch.cli._progress import counting_progress
    from masorch.train.collect import collect

    counts = {"attempts": 0, "correct": 0, "recovered": 0}
    with counting_progress("collect", console) as progress:
        task = progress.add_task("", total=None)

        def on_start(total: int, done: int) -> None:
            progress.update(task, total=total, completed=done)

        def on_attempt(attempt: dict[str, Any], finished: bool) -> None:
            counts["attempts"] += 1
            counts["correct"] += bool(attempt["correct"])
            counts["recovered"] += bool(attempt["recovered"])
            text = (
                f"attempts {counts['attempts']}  correct {counts['correct']}  recovered {counts['recovered']}"
            )
            progress.update(task, advance=1 if finished else 0, description=text)

        report = collect(cfg, spec=spec, on_start=on_start, on_attempt=on_attempt)
    s = report.summary
    console.print(
        f"[bold]kept {s['kept']}[/] of {s['questions']} questions ({s['kept_recovered']} recovered); "
        f"{s['attempts_correct']}/{s['attempts']} attempts correct; tool shares {s['tool_shares_kept']}"
    )
    console.print(f"dataset {report.dataset}; summary {report.summary_path}")
    if s["attempts_errored"]:  # a dead teacher must not pass for questions it could not answer
        console.print(
            f"{s['attempts_errored']} of {s['attempts']} attempts ended in error; first: {s['first_error']}\n"
            "hint: they count as done; once the cause is fixed, the same command with "
            "--set retry_errors=true samples them again",
            markup=False,
            soft_wrap=True,
        )


def _print_numbers(console: Console, line: dict[str, Any], keys: tuple[str, ...]) -> None:
    console.print(" ".join(f"{k}={line[k]:.4g}" for k in keys if isinstance(line.get(k), (int, float))))


def _train_grpo(console: Console, path: Path, overrides: dict[str, Any]) -> None:
    import logging

    from masorch.train.config import load_config
    from masorch.train.grpo import train_grpo

    # The root logger is set up by masorch's main (WARNING); training progress is worth INFO.
    logging.getLogger("masorch").setLevel(logging.INFO)
    cfg = load_config(path, overrides)
    keys = ("step", "loss", "reward", "rewards/correctness/mean", "plan/valid_rate", "plan/calls_per_plan")
    report = train_grpo(cfg, on_log=lambda line: _print_numbers(console, line, keys))
    console.print(
        f"[bold]done[/]: {report.steps} steps, {report.seconds_per_step:.1f} s/step; "
        f"model in {report.final_model}"
    )
    for tag, summary in (("before", report.eval_before), ("after", report.eval_after)):
        if summary is not None:
            console.print(f"held-out {tag}: {json.dumps(summary.to_dict())}")


def _collect(
    console: Console, path: Path, overrides: dict[str, Any], collect_env: Callable[[Any], Any] | None
) -> None:
    from masorch.train.collect_config import load_collect_config

    cfg = load_collect_config(path, overrides)
    _collect_with_progress(console, cfg, collect_env(cfg) if collect_env else None)


def _collect_report(console: Console, path: Path, overrides: dict[str, Any]) -> None:
    from masorch.train.collect import collect_state
    from masorch.train.collect_config import load_collect_config

    s = collect_state(load_collect_config(path, overrides))
    console.print(
        f"[bold]{s['questions_finished']} of {s['questions_total']} questions finished[/]; "
        f"{s['attempts']} attempts, {s['attempts_correct']} correct ({s['attempts_recovered']} recovered), "
        f"{s['attempts_with_protocol_errors']} with protocol errors; kept so far {s['kept']} "
        f"({s['kept_recovered']} recovered); tool shares {_shares(s['tool_shares_kept'])}"
    )
    console.print_json(json.dumps(s))


def _shares(shares: dict[str, float]) -> str:
    """``{'python': 0.4615, ...}`` as ``python 0.46, ...``, largest first."""
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1])) or "-"


def _train_sft(console: Console, path: Path, overrides: dict[str, Any]) -> None:
    import logging

    from masorch.train.sft import train_sft
    from masorch.train.sft_config import load_sft_config

    logging.getLogger("masorch").setLevel(logging.INFO)
    cfg = load_sft_config(path, overrides)
    keys = ("step", "loss", "grad_norm", "learning_rate", "wall_s")
    report = train_sft(cfg, on_log=lambda line: _print_numbers(console, line, keys))
    console.print(
        f"[bold]done[/]: {report.steps} steps on {report.examples} trajectories "
        f"({report.loss_tokens} of {report.tokens} tokens with loss), "
        f"{report.seconds_per_step:.1f} s/step; model in {report.final_model}"
    )


def register(app: typer.Typer, *, collect_env: Callable[[Any], Any] | None = None) -> None:
    """Add the ``train`` command group to ``app``.

    ``collect_env`` maps a collect config to its environment spec (tests inject scripted backends);
    default :func:`masorch.train.collect.env_spec`.
    """
    train_app = typer.Typer(
        help="Train an orchestrator: GRPO on executed plans, or the multi-round one (collect, sft, rounds).",
        no_args_is_help=True,
    )
    app.add_typer(train_app, name="train")

    _config_command(
        train_app,
        "grpo",
        "Train the orchestrator with TRL's GRPOTrainer; reward = the executed plan's correctness.",
        "training",
        _grpo_fields,
        _train_grpo,
    )
    _config_command(
        train_app,
        "collect",
        "Sample a teacher's multi-round trajectories, keep the correct ones, write an SFT dataset.",
        "collect",
        _collect_fields,
        functools.partial(_collect, collect_env=collect_env),
        _collect_report,
    )
    _config_command(
        train_app,
        "sft",
        "Masked SFT of the orchestrator on collected trajectories (loss on its own tokens only).",
        "SFT",
        _sft_fields,
        _train_sft,
    )

    _config_command(
        train_app,
        "rounds",
        "GRPO of the multi-round orchestrator: one sample is a whole trajectory of tool rounds.",
        "rounds training",
        _rounds_fields,
        _train_rounds,
    )

    @train_app.command("data")
    def data_cmd(
        config: Path = typer.Option(..., "--config", help="YAML training config (its train/eval sources)."),  # noqa: B008
        out: Path = typer.Option(..., "--out", help="Directory for train.parquet and test.parquet."),  # noqa: B008
        rounds: bool = typer.Option(
            False,
            "--rounds",
            help="CONFIG is a `train rounds` config: write its prompts (the rounds system prompt and the "
            "question) for verl's masorch_rounds agent loop (train.parquet only).",
        ),
    ) -> None:
        """Write the config's prompts (orchestrator chat + grading) as verl parquet files."""
        from masorch.train.config import load_config
        from masorch.train.grpo import prompt_rows, train_agents
        from masorch.train.verl_data import write_parquet

        if rounds:
            from masorch.train.rounds_config import load_rounds_config
            from masorch.train.rounds_grpo import rounds_agents, rounds_rows
            from masorch.train.verl_agent_loop import NAME

            rcfg = load_rounds_config(config)
            rows = [{**r, "dom": "low"} for r in rounds_rows(rcfg, rounds_agents(rcfg))]  # no model built
            n = write_parquet(rows, out / "train.parquet", "train", agent_name=NAME)
            Console().print(f"wrote {n} train rows for the {NAME} agent loop to {out}")
            return
        cfg = load_config(config)
        train_rows, held = prompt_rows(cfg, train_agents(cfg))
        n = write_parquet(train_rows, out / "train.parquet", "train")
        m = write_parquet(held, out / "test.parquet", "test") if held else 0
        Console().print(f"wrote {n} train rows and {m} test rows to {out}")
