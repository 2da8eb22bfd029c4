"""``masorch bench``: make, check and describe MASBench instance files."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from masorch.errors import RunError, UsageError

A = TypeVar("A")
T = TypeVar("T")

bench_app = typer.Typer(help="Make, check and describe MASBench tasks.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command group to the masorch app."""
    app.add_typer(bench_app, name="bench")


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}", style="bold", markup=False),  # file names are not markup
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


@bench_app.command("make")
def make(
    output: Annotated[
        Path,
        typer.Option("-o", "--output", help="Output file (.jsonl/.parquet), or a directory with --paper."),
    ],
    # None: not given (--paper refuses them); the defaults are _SINGLE_DEFAULTS.
    axis: Annotated[
        str | None,
        typer.Option(help="depth, horizon, breadth, parallel or robustness; default depth."),
    ] = None,
    values: Annotated[
        str | None, typer.Option(help="Axis values: a range and/or list, e.g. 2-4,8; default 2-12.")
    ] = None,
    n: Annotated[int | None, typer.Option("--n", min=1, help="Instances per value; default 10.")] = None,
    split: Annotated[
        str | None, typer.Option(help="train or test (template-disjoint); default train.")
    ] = None,
    seed: Annotated[
        int,
        typer.Option(min=0, max=2**63 - 1, help="Seed; the same arguments give byte-identical files."),
    ] = 0,
    paper: Annotated[
        bool, typer.Option("--paper", help="Make the paper-sized suite (all axes and splits) into -o DIR.")
    ] = False,
    fmt: Annotated[
        str | None,
        typer.Option("--format", help="File format of the --paper suite: parquet (default) or jsonl."),
    ] = None,
    workers: Annotated[
        int, typer.Option(min=1, max=64, help="Processes to generate with (output is the same).")
    ] = 1,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Generate MASBench instances for one axis, or the whole paper-sized suite with --paper."""
    from masorch.masbench.export import write_records
    from masorch.masbench.suite import generate

    console = Console(stderr=True, quiet=quiet)
    single = {"--axis": axis, "--values": values, "--n": n, "--split": split}
    parts = _parts(output, seed, paper, fmt, single)
    fmt = fmt or "parquet"
    if paper:  # written last: a suite stopped part way has no manifest that its files contradict
        (output / MANIFEST_FILE).unlink(missing_ok=True)
    total = sum(len(jobs) for _, jobs in parts)
    start = time.perf_counter()
    with _progress(console) as bar:
        task = bar.add_task("generating", total=total)
        # One stream (one process pool) for every file; each file takes its share in order.
        stream = generate(
            [job for _, jobs in parts for job in jobs],
            workers=workers,
            progress=lambda k: bar.advance(task, k),
        )
        try:
            for path, jobs in parts:
                bar.update(task, description=f"generating {path.name}")
                written = write_records(path, itertools.islice(stream, len(jobs)))
                console.print(Text(f"wrote {written} instances to {path}"))
        finally:
            stream.close()
    if paper:
        manifest = {
            "seed": seed,
            "format": fmt,
            "files": [{"file": p.name, "instances": len(j)} for p, j in parts],
            "instances": total,
        }
        (output / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    elapsed = time.perf_counter() - start
    console.print(
        f"{total} instances in {elapsed:.1f} s ({total / max(elapsed, 1e-9):.0f}/s)", highlight=False
    )


#: The defaults of the single-file options (None in the signature, so that --paper can tell them given).
_SINGLE_DEFAULTS: dict[str, Any] = {"--axis": "depth", "--values": "2-12", "--n": 10, "--split": "train"}


def _parts(
    output: Path, seed: int, paper: bool, fmt: str | None, single: dict[str, Any]
) -> list[tuple[Path, list[Any]]]:
    """The files to write with their jobs; an option of the other mode (single file or --paper) is refused."""
    given = [k for k, v in single.items() if v is not None]
    if paper and given:
        raise UsageError(
            f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to a single file, "
            "not to the --paper suite",
            hint="the paper suite's axes, values, counts and splits are fixed: leave "
            f"{'it' if len(given) == 1 else 'them'} out, or drop --paper to make one file",
        )
    if fmt is not None and not paper:
        raise UsageError(
            "--format applies to the --paper suite only",
            hint="a single file's format is its suffix: -o x.jsonl or -o x.parquet",
        )
    if paper:
        return _paper_parts(output, fmt or "parquet", seed)
    axis, values, n, split = (_SINGLE_DEFAULTS[k] if v is None else v for k, v in single.items())
    return _axis_parts(output, axis, values, n, split, seed)


#: The file that describes a --paper suite (seed, format, files), written once every file is.
MANIFEST_FILE = "manifest.json"


def _paper_parts(output: Path, fmt: str, seed: int) -> list[tuple[Path, list[Any]]]:
    """The files of the paper-sized suite under the directory ``output``, with their generator jobs."""
    from masorch.masbench.suite import PAPER_SUITE, jobs_for

    if fmt not in ("parquet", "jsonl"):
        raise UsageError(f"unknown format {fmt!r}", hint="use --format parquet or --format jsonl")
    if output.suffix in (".jsonl", ".parquet") or (output.exists() and not output.is_dir()):
        raise UsageError(
            f"--paper writes a directory, not the file {output}", hint="give -o DIR, e.g. -o data/masbench"
        )
    return [
        (output / f"{p.filename}.{fmt}", jobs_for(p.axis, p.counts(), p.split, seed)) for p in PAPER_SUITE
    ]


def _axis_parts(
    output: Path, axis: str, values: str, n: int, split: str, seed: int
) -> list[tuple[Path, list[Any]]]:
    """The one file of ``n`` instances per value of ``axis``, with its generator jobs."""
    from masorch.masbench.export import check_format
    from masorch.masbench.suite import jobs_for, parse_values

    check_format(output)
    return [(output, jobs_for(axis, [(v, n) for v in parse_values(values)], split, seed))]


def _files(paths: list[Path]) -> list[Path]:
    from masorch.masbench.export import data_files

    return [f for path in paths for f in data_files(path)]


def _read_all(paths: list[Path]) -> list[dict[str, Any]]:
    from masorch.masbench.export import read_records

    records = [rec for f in _files(paths) for rec in read_records(f)]
    if not records:
        raise UsageError(
            f"no instances in {', '.join(map(str, paths))[:200]}", hint="make some with `masorch bench make`"
        )
    return records


def _row_problems(files: list[Path]) -> list[str]:
    """Parquet rows whose training columns (prompt, ground truth, axis, value) differ from their record."""
    from masorch.masbench.export import row_disagreements

    return [line for f in files for line in row_disagreements(f)]


def _measure(fn: Callable[[A], T], arg: A) -> T:
    """``fn(arg)``; a record missing a nested field or of the wrong shape is a UsageError."""
    try:
        return fn(arg)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # The readers check the top-level fields; deeper ones are only read here.
        raise UsageError(
            f"a record is not a complete MASBench instance ({type(exc).__name__}: {str(exc)[:120]})",
            hint="check files written by `masorch bench make`; hand-edited records lose fields",
        ) from None


@bench_app.command("check")
def check(
    paths: Annotated[
        list[Path], typer.Argument(help="Instance files or directories (train and test together).")
    ],
) -> None:
    """Re-solve every instance from its text, re-measure its axes, check splits and parquet rows' columns."""
    from masorch.masbench.check import check_records

    console = Console()
    report = _measure(check_records, _read_all(paths))
    report.problems += _measure(_row_problems, _files(paths))
    splits = ", ".join(f"{k}: {v}" for k, v in sorted(report.by_split.items()))
    console.print(Text(f"checked {report.n} instances ({splits})"))
    for line in report.problems[:50]:
        console.print(Text.assemble(("FAIL", "red"), " ", line))
    if len(report.problems) > 50:
        console.print(f"... and {len(report.problems) - 50} more", highlight=False)
    if not report.ok:
        # A RunError makes the CLI exit with status 1 (typer.Exit codes are dropped in non-standalone mode).
        raise RunError(
            f"{len(report.problems)} disagreement(s) in {report.n} instances",
            hint="regenerate the file with `masorch bench make`, or report the failing ids",
        )
    console.print(
        "[bold green]ok[/]: answers re-solved from text, measured and effective axes, controls, "
        "canonical template buckets and split disjointness all agree"
    )


@bench_app.command("stats")
def stats_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Instance files or directories.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False,
) -> None:
    """Counts per axis value, answer histogram, measured-axis ranges and question lengths."""
    from masorch.masbench.check import stats

    st = _measure(stats, _read_all(paths))
    console = Console()
    if as_json:
        console.print_json(json.dumps(st))
        return
    table = Table(title=f"{st['instances']} instances")
    for col in ("axis", "split", "value", "n"):
        table.add_column(col, justify="right" if col in ("value", "n") else "left")
    for row in st["counts"]:
        table.add_row(*(Text(str(row[k])) for k in ("axis", "split", "value", "n")))
    console.print(table)
    hist = "  ".join(f"{k}:{c}" for k, c in enumerate(st["answer_histogram"]))
    console.print(f"answers (chi2 vs uniform, 22 dof: {st['answer_chi2']:.1f}): {hist}", highlight=False)
    ranges = Table(title="measured axes")
    ranges.add_column("axis")
    ranges.add_column("min", justify="right")
    ranges.add_column("max", justify="right")
    for axis, (lo, hi) in st["measured_ranges"].items():
        ranges.add_row(Text(axis), str(lo), str(hi))
    console.print(ranges)
    q = st["question_chars"]
    console.print(
        f"question length (chars): min {q['min']}, mean {q['mean']:.0f}, max {q['max']}", highlight=False
    )
