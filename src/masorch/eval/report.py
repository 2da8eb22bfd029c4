"""The report of a run, rebuilt from its log alone: ``DIR/report.md`` (and ``DIR/plots/``).

Per system and dataset (and per value of each axis for MASBench files): accuracy with a 95 % bootstrap
interval, mean calls, tokens, cost and wall time per sample, and the count of samples that did
not end ok. Every multi-agent system (one-step plans and the multi-round mode) is compared with the
best SAS system of the same table (highest accuracy) by the paired bootstrap of the per-sample
difference over the samples both finished. A sample whose run failed counts as wrong (it is in the
denominator) and in the ``not ok`` column. Multi-round systems also get their rounds, tools, call
statuses and endings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from masorch.errors import MALFORMED_VALUE, UsageError
from masorch.eval.log import LOG_FILE, RunLog
from masorch.eval.metrics import N_BOOT, Interval
from masorch.eval.summary import MULTI_AGENT_MODES, CellStats, PairedStats, RoundsStats, Summary, summarize
from masorch.files import atomic_writer
from masorch.run.system import system_label

__all__ = [
    "REPORT_FILE",
    "CellStats",
    "PairedStats",
    "RoundsStats",
    "Summary",
    "render_markdown",
    "summarize",
    "write_report",
]

REPORT_FILE = "report.md"

#: The mark of an interval with no width (:attr:`Interval.degenerate`), explained under its table.
DEGENERATE_MARK = "†"
#: What the mark means (the markdown report and the viewer show the same note).
DEGENERATE_NOTE = (
    "All samples of the cell agree (all right, all wrong, or the same difference on each), so every "
    "bootstrap resample gives the same value and the interval has no width: it understates the "
    "uncertainty at this n."
)


def _interval(iv: Interval) -> str:
    """``iv`` as the tables show it: ``n/a`` over no samples, marked where it has no width."""
    return iv.format() + (f" {DEGENERATE_MARK}" if iv.degenerate else "")


def _footnote(intervals: Sequence[Interval]) -> list[str]:
    """The note under a table with a marked interval (none without one)."""
    if not any(iv.degenerate for iv in intervals):
        return []
    return ["", f"{DEGENERATE_MARK} {DEGENERATE_NOTE}"]


def _setting(key: str, value: Any) -> str:
    """One setting of the header as the report shows it; prices in the ``--price`` flag's form.

    >>> _setting("max_tokens", 64), _setting("prices", {"openai:m": [0.15, 0.6, None]})
    ('max_tokens 64', 'prices openai:m=0.15,0.6')
    """
    if key == "prices" and isinstance(value, Mapping):
        shown = [f"{m}=" + ",".join(f"{x:g}" for x in p if x is not None) for m, p in value.items()]
        return "prices " + " ".join(shown)
    return f"{key} {value}"


def _money(x: float) -> str:
    return f"{x:.4f}" if x else "0"


def _table(cells: Sequence[CellStats], first: str) -> list[str]:
    lines = [
        f"| {first} | n | accuracy % [95% CI] | mean score | calls | cut % | tokens | cost $ | wall s "
        "| not ok |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for c in cells:
        label = c.system if first == "system" else f"{c.value} · {c.system}"
        if c.n == 0:  # a system with no finished sample: a row, and no numbers
            lines.append(f"| {label} | 0 | {_interval(c.accuracy)} |" + " - |" * 7)
            continue
        bad = [f"{s} {n}" for s, n in sorted(c.statuses.items()) if s != "ok"]
        bad += [f"scorer undecided {c.undecided}"] if c.undecided else []  # ok runs, counted wrong
        cut = "-" if c.truncated is None else f"{100 * c.truncated:.0f}"
        lines.append(
            f"| {label} | {c.n} | {_interval(c.accuracy)} | {c.score:.3f} | {c.calls:.1f} | {cut} "
            f"| {c.tokens:.0f} | {_money(c.cost)} | {c.wall_s:.2f} | {', '.join(bad) or '0'} |"
        )
    return lines + _footnote([c.accuracy for c in cells])


def _paired_table(paired: Sequence[PairedStats], by_value: bool) -> list[str]:
    if not paired:
        return []
    head = "| value | MAS | best SAS | n paired | MAS - SAS, points [95% CI] |"
    lines = ["", head if by_value else head.replace("| value ", ""), "|---" * (5 if by_value else 4) + "|"]
    for p in paired:
        row = f"| {p.mas} | {p.sas} | {p.diff.n} | {_interval(p.diff)} |"
        lines.append(f"| {p.value} {row}" if by_value else row)
    return lines + _footnote([p.diff for p in paired])


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def _rounds_table(stats: Sequence[RoundsStats]) -> list[str]:
    if not stats:
        return []
    lines = [
        "",
        "Multi-round runs: mean rounds, the sub-agent tools that ran, the statuses of the calls, how "
        "the runs ended.",
        "",
        "| system | runs | rounds | tools ran | call statuses | ended by |",
        "|---|---:|---:|---|---|---|",
    ]
    for r in stats:
        lines.append(
            f"| {r.system} | {r.n} | {r.rounds:.2f} | {_counts(r.tools)} | {_counts(r.statuses)} "
            f"| {_counts(r.ended_by)} |"
        )
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
        if s.get("mode") in MULTI_AGENT_MODES:
            models = f"orchestrator {s.get('orchestrator') or s.get('model')}, sub-agents {s.get('model')}"
        budget = ", ".join(f"{k.removeprefix('max_')} {v}" for k, v in (s.get("budget") or {}).items() if v)
        label = system_label(str(s.get("mode", "?")), str(s.get("variant", "?")))
        out.append(f"| {name} | {label} | {models} | {budget or '-'} |")
    settings = header.get("settings") or {}
    if settings:
        out += ["", "Settings: " + ", ".join(_setting(k, v) for k, v in settings.items()) + "."]
    out += [
        "",
        "Accuracy counts every finished sample (a run that did not end ok is wrong); intervals are "
        "95 % percentile bootstraps (n/a over no samples); calls, tokens, cost and wall time are means "
        "per sample; cut % is the share of LLM calls whose reply stopped at its token cap. Paired "
        "differences resample the same samples for both systems. Scorer undecided counts samples "
        "that ended ok but whose scorer could not decide (a comparison that timed out or failed): "
        "they count as wrong.",
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
        out += _rounds_table([r for r in summary.rounds if r.dataset == dataset])
        for axis in sorted({c.axis for c in cells if c.axis is not None}):  # a section per axis
            out += ["", f"### by {axis} value", ""]
            out += _table([c for c in cells if c.axis == axis], "value · system")
            out += _paired_table([p for p in summary.paired if p.dataset == dataset and p.axis == axis], True)
    if plots:
        out += ["", "## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in plots]
    return "\n".join(out) + "\n"


def write_report(
    directory: Path, *, plots: bool = True, n_boot: int = N_BOOT, seed: int | None = None
) -> Path:
    """Rebuild ``report.md`` (and, with ``plots`` and matplotlib, ``plots/``) from ``log.jsonl``;
    the bootstrap's ``seed`` is the one the log's header keeps (0 for a log without one) unless given."""
    header, records = RunLog.read(directory)
    if seed is None:
        seed = header.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise UsageError(
                f"{directory / LOG_FILE}: the header's seed {str(seed)[:40]!r} is not an integer >= 0",
                hint="the run log was edited; give the bootstrap's seed with --seed",
            )
    try:
        summary = summarize(header, records, n_boot=n_boot, seed=seed)
        written: list[str] = []
        if plots:
            from masorch.eval.plots import write_plots

            written = [str(p.relative_to(directory)) for p in write_plots(summary, directory / "plots")]
        text = render_markdown(summary, header, plots=written)
    except MALFORMED_VALUE as exc:
        # RunLog.read checks each line's shape; a value of the wrong type or range shows up only here.
        raise UsageError(
            f"{directory / LOG_FILE} holds a malformed record ({type(exc).__name__}: {str(exc)[:120]})",
            hint="the run log was edited or corrupted; rerun into a new --out directory",
        ) from None
    path = directory / REPORT_FILE
    with atomic_writer(path, "w") as fh:
        fh.write(text)
    return path
