"""The report of a run, rebuilt from its log alone: ``DIR/report.md`` (and ``DIR/plots/``).

Per system and dataset (and per axis value for MASBench files): accuracy with a 95 % bootstrap
interval, mean calls, tokens, cost and wall time per sample, and the count of samples that did
not end ok. Every MAS system is compared with the best SAS system of the same table (highest
accuracy) by the paired bootstrap of the per-sample difference over the samples both finished.
A sample whose run failed counts as wrong (it is in the denominator) and in the ``not ok`` column.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.eval.log import LOG_FILE, RunLog
from masorch.eval.metrics import ALPHA, N_BOOT, Interval, bootstrap_mean, mean, paired_difference

REPORT_FILE = "report.md"


@dataclass(frozen=True)
class CellStats:
    """One system on one table cell (a dataset, or one axis value of it)."""

    system: str
    dataset: str
    value: int | None
    accuracy: Interval
    score: float
    calls: float
    tokens: float
    cost: float
    wall_s: float
    statuses: Mapping[str, int] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Samples finished."""
        return self.accuracy.n

    @property
    def not_ok(self) -> int:
        """Samples whose run did not end ok (error, timeout, budget, invalid_plan, failed)."""
        return sum(c for s, c in self.statuses.items() if s != "ok")


@dataclass(frozen=True)
class PairedStats:
    """A MAS system minus the best SAS system on the samples both finished in one cell."""

    dataset: str
    value: int | None
    mas: str
    sas: str
    diff: Interval


@dataclass(frozen=True)
class Summary:
    """Everything the report shows: cell statistics, paired differences, expected sample counts."""

    systems: tuple[str, ...]
    datasets: tuple[str, ...]
    cells: tuple[CellStats, ...]
    paired: tuple[PairedStats, ...]
    expected: Mapping[str, int]
    axes: Mapping[str, str]

    def cell(self, system: str, dataset: str, value: int | None = None) -> CellStats | None:
        """The statistics of one cell, or None when it has no samples."""
        return next(
            (c for c in self.cells if (c.system, c.dataset, c.value) == (system, dataset, value)), None
        )


def _cell(
    system: str, dataset: str, value: int | None, recs: Sequence[Mapping[str, Any]], **kw: Any
) -> CellStats:
    correct = [1.0 if r.get("correct") else 0.0 for r in recs]
    return CellStats(
        system=system,
        dataset=dataset,
        value=value,
        accuracy=bootstrap_mean(correct, **kw),
        score=mean([float(r.get("score") or 0.0) for r in recs]),
        calls=mean([float(r.get("calls") or 0) for r in recs]),
        tokens=mean([float((r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)) for r in recs]),
        cost=mean([float(r.get("cost") or 0.0) for r in recs]),
        wall_s=mean([float(r.get("wall_s") or 0.0) for r in recs]),
        statuses=dict(Counter(str(r.get("status")) for r in recs)),
    )


def summarize(
    header: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    *,
    n_boot: int = N_BOOT,
    alpha: float = ALPHA,
    seed: int = 0,
) -> Summary:
    """The statistics of a run's records (last record per key) under its header."""
    kw: dict[str, Any] = {"n_boot": n_boot, "alpha": alpha, "seed": seed}
    # Records arrive in finish order, which varies between runs (and between local and Ray): sort
    # them so that the bootstrap sees the same sequence, and the report is a function of the content.
    records = sorted(records, key=lambda r: (str(r["dataset"]), str(r["sample_id"]), str(r["system"])))
    systems = [s["name"] for s in header.get("systems", [])]
    modes = {s["name"]: s.get("mode") for s in header.get("systems", [])}
    datasets = [d["name"] for d in header.get("datasets", [])]
    for r in records:  # records of systems or datasets the header does not list still show up
        if r["system"] not in systems:
            systems.append(r["system"])
        if r["dataset"] not in datasets:
            datasets.append(r["dataset"])
    groups: dict[tuple[str, str, int | None], list[Mapping[str, Any]]] = {}
    axes: dict[str, str] = {}
    for r in records:
        groups.setdefault((r["system"], r["dataset"], None), []).append(r)
        if r.get("axis") is not None and r.get("value") is not None:
            axes[r["dataset"]] = str(r["axis"]) if axes.get(r["dataset"], r["axis"]) == r["axis"] else "mixed"
            groups.setdefault((r["system"], r["dataset"], int(r["value"])), []).append(r)
    cells = [_cell(s, d, v, recs, **kw) for (s, d, v), recs in groups.items()]
    cells.sort(key=lambda c: (datasets.index(c.dataset), c.value or -1, systems.index(c.system)))
    paired = []
    for dataset in datasets:
        values = sorted({c.value for c in cells if c.dataset == dataset and c.value is not None})
        for value in [None, *values]:
            here = [c for c in cells if c.dataset == dataset and c.value == value]
            sas = [c for c in here if modes.get(c.system) == "sas"]
            if not sas:
                continue
            best = max(sas, key=lambda c: (c.accuracy.mean, -systems.index(c.system)))
            for c in here:
                if modes.get(c.system) != "mas":
                    continue
                a = {r["sample_id"]: r for r in groups[(c.system, dataset, value)]}
                b = {r["sample_id"]: r for r in groups[(best.system, dataset, value)]}
                shared = [k for k in a if k in b]
                diff = paired_difference(
                    [1.0 if a[k].get("correct") else 0.0 for k in shared],
                    [1.0 if b[k].get("correct") else 0.0 for k in shared],
                    **kw,
                )
                paired.append(PairedStats(dataset, value, c.system, best.system, diff))
    expected = {d["name"]: int(d.get("n", 0)) for d in header.get("datasets", [])}
    return Summary(tuple(systems), tuple(datasets), tuple(cells), tuple(paired), expected, axes)


def _money(x: float) -> str:
    return f"{x:.4f}" if x else "0"


def _table(cells: Sequence[CellStats], first: str) -> list[str]:
    lines = [
        f"| {first} | n | accuracy % [95% CI] | mean score | calls | tokens | cost $ | wall s | not ok |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for c in cells:
        label = c.system if first == "system" else f"{c.value} · {c.system}"
        bad = ", ".join(f"{s} {n}" for s, n in sorted(c.statuses.items()) if s != "ok") or "0"
        lines.append(
            f"| {label} | {c.n} | {c.accuracy.format()} | {c.score:.3f} | {c.calls:.1f} | {c.tokens:.0f} "
            f"| {_money(c.cost)} | {c.wall_s:.2f} | {bad} |"
        )
    return lines


def _paired_table(paired: Sequence[PairedStats], by_value: bool) -> list[str]:
    if not paired:
        return []
    head = "| value | MAS | best SAS | n paired | MAS - SAS, points [95% CI] |"
    lines = ["", head if by_value else head.replace("| value ", ""), "|---" * (5 if by_value else 4) + "|"]
    for p in paired:
        row = f"| {p.mas} | {p.sas} | {p.diff.n} | {p.diff.format()} |"
        lines.append(f"| {p.value} {row}" if by_value else row)
    return lines


def render_markdown(summary: Summary, header: Mapping[str, Any], *, plots: Sequence[str] = ()) -> str:
    """The report as Markdown."""
    out = ["# Evaluation report", ""]
    systems = {s["name"]: s for s in header.get("systems", [])}
    out.append("| system | mode | models | budget |")
    out.append("|---|---|---|---|")
    for name in summary.systems:
        s = systems.get(name, {})
        models = s.get("model", "?")
        if s.get("mode") == "mas":
            models = f"orchestrator {s.get('orchestrator') or s.get('model')}, sub-agents {s.get('model')}"
        budget = ", ".join(f"{k.removeprefix('max_')} {v}" for k, v in (s.get("budget") or {}).items() if v)
        out.append(f"| {name} | {s.get('mode', '?')}:{s.get('variant', '?')} | {models} | {budget or '-'} |")
    out += [
        "",
        "Accuracy counts every finished sample (a run that did not end ok is wrong); intervals are "
        "95 % percentile bootstraps; calls, tokens, cost and wall time are means per sample. Paired "
        "differences resample the same samples for both systems.",
    ]
    for dataset in summary.datasets:
        cells = [c for c in summary.cells if c.dataset == dataset]
        expected = summary.expected.get(dataset)
        done = {c.system: c.n for c in cells if c.value is None}
        out += ["", f"## {dataset}", ""]
        if expected is not None and any(n < expected for n in done.values()):
            out.append(f"Incomplete run: samples finished per system {done} of {expected}.")
            out.append("")
        out += _table([c for c in cells if c.value is None], "system")
        out += _paired_table([p for p in summary.paired if p.dataset == dataset and p.value is None], False)
        by_value = [c for c in cells if c.value is not None]
        if by_value:
            out += ["", f"### by {summary.axes.get(dataset, 'axis')} value", ""]
            out += _table(by_value, "value · system")
            out += _paired_table(
                [p for p in summary.paired if p.dataset == dataset and p.value is not None], True
            )
    if plots:
        out += ["", "## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in plots]
    return "\n".join(out) + "\n"


def write_report(directory: Path, *, plots: bool = True, n_boot: int = N_BOOT, seed: int = 0) -> Path:
    """Rebuild ``report.md`` (and, with ``plots`` and matplotlib, ``plots/``) from ``log.jsonl``."""
    header, records = RunLog.read(directory)
    try:
        summary = summarize(header, records, n_boot=n_boot, seed=seed)
    except (KeyError, TypeError, ValueError) as exc:
        # RunLog.read checks each line's shape; a value of the wrong type shows up only here.
        raise UsageError(
            f"{directory / LOG_FILE} holds a malformed record ({type(exc).__name__}: {str(exc)[:120]})",
            hint="the run log was edited or corrupted; rerun into a new --out directory",
        ) from None
    written: list[str] = []
    if plots:
        from masorch.eval.plots import write_plots

        written = [str(p.relative_to(directory)) for p in write_plots(summary, directory / "plots")]
    path = directory / REPORT_FILE
    path.write_text(render_markdown(summary, header, plots=written), encoding="utf-8")
    return path
