"""``masorch validate``: parse and validate a plan file; exit 0 valid, 1 invalid, 2 usage error."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from masorch.agents.signatures import builtin_catalogue
from masorch.errors import UsageError
from masorch.files import read_text
from masorch.plan import CheckResult, DoM, check
from masorch.plan.parse import DialectChoice

_DIALECTS: tuple[DialectChoice, ...] = ("auto", "calls", "json", "xml")


def _read(file: str) -> str:
    # Nothing piped in: waiting for typed input would look like a hang.
    if file == "-" and sys.stdin is not None and sys.stdin.isatty():
        raise UsageError("no plan given", hint="give a plan file, or pipe a plan into `masorch validate -`")
    return read_text(file, what="plan file")


def _dialect(value: str) -> DialectChoice:
    for choice in _DIALECTS:
        if value == choice:
            return choice
    raise UsageError(f"unknown dialect {value!r}", hint=f"use one of: {', '.join(_DIALECTS)}")


def _dom(value: str) -> DoM:
    try:
        return DoM(value.lower())
    except ValueError as exc:
        raise UsageError(f"unknown DoM {value!r}", hint="use low or high") from exc


def result_json(result: CheckResult) -> dict[str, Any]:
    """The machine-readable verdict: ``{"valid", "dialect", "plan", "diagnostics"}``."""
    return {
        "valid": result.valid,
        "dialect": result.dialect,
        "plan": None if result.plan is None else result.plan.model_dump(mode="json"),
        "diagnostics": [d.to_dict() for d in result.diagnostics],
    }


def _show(result: CheckResult, console: Console) -> None:
    plan = result.plan
    if plan is not None:
        if plan.agents:
            table = Table(title=f"plan ({result.dialect})", title_justify="left")
            for column in ("id", "kind", "params", "task"):
                table.add_column(column, overflow="fold")
            for a in plan.agents:
                params = ", ".join(f"{k}={v!r}" for k, v in a.params.items())
                # Plan text is a model's: shown as text, never read as rich markup ("[/i]" in a task).
                task = Text(a.task) if a.task else Text("(the original question)", style="dim")
                table.add_row(Text(a.id), Text(a.kind), Text(params), task)
            console.print(table)
        if plan.flows:
            console.print(Text("flows: " + ", ".join(f"{f.src} -> {f.dst}" for f in plan.flows)))
        if plan.final_answer is not None:
            console.print(Text(f"final answer: {plan.final_answer}"))
    for d in result.diagnostics:
        style = "bold red" if d.is_error else "bold yellow"
        line = Text()
        line.append(f"{d.severity.value} ", style=style)
        line.append(f"[{d.code}]", style="bold")
        if d.where:
            line.append(f" {d.where}", style="cyan")
        line.append(f": {d.message}")
        console.print(line)
        if d.hint:
            console.print(Text(f"    fix: {d.hint}", style="dim"))
    verdict = Text("valid", style="bold green") if result.valid else Text("invalid", style="bold red")
    console.print(verdict)


def validate_command(
    file: str = typer.Argument("-", help="Plan file to check, or - to read standard input."),
    dialect: str = typer.Option("auto", "--dialect", help="Plan dialect: auto, calls, json or xml."),
    dom: str = typer.Option("high", "--dom", help="Degree of MAS to check against: low or high."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a report."),
) -> None:
    """Parse and validate a plan; exit 0 when valid, 1 when invalid, 2 on a usage error."""
    chosen_dialect, chosen_dom = _dialect(dialect), _dom(dom)
    result = check(_read(file), chosen_dom, builtin_catalogue(), chosen_dialect)
    if as_json:
        typer.echo(json.dumps(result_json(result), ensure_ascii=False))
    else:
        _show(result, Console())
    if not result.valid:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``masorch validate`` to the CLI."""
    app.command("validate")(validate_command)
