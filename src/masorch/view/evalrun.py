"""An eval run directory as page data: a compact table of every sample, and the report's numbers.

The log is read with :meth:`RunLog.read` (a torn last line of a run still being written is left out)
and summarised with :func:`summarize`, the report's own statistics; both are cached until the log
file changes. The sample table is columnar (one list per row, the column names once), so a
10,000-sample run is one small JSON document that the page filters and pages through itself.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from masorch.eval.harness import TRACE_FILE
from masorch.eval.log import LOG_FILE, RunLog
from masorch.eval.metrics import N_BOOT, Interval
from masorch.eval.report import DEGENERATE_MARK, DEGENERATE_NOTE
from masorch.eval.summary import CellStats, Summary, summarize
from masorch.view.traces import TraceIndex

#: The columns of the sample table, in order.
COLUMNS = (
    "key",
    "system",
    "dataset",
    "sample_id",
    "axis",
    "value",
    "status",
    "correct",
    "score",
    "answer",
    "gold",
    "calls",
    "tokens",
    "cost",
    "wall_s",
    "trace_id",
    "plan_kinds",
    "error",
)
#: The most characters of an answer, gold answer or error in the table (the sample page shows all).
CELL_CHARS = 160


def _short(value: Any) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def table_row(record: Mapping[str, Any]) -> list[Any]:
    """One record as a row of :data:`COLUMNS`."""
    return [
        record.get("key", ""),
        record.get("system", ""),
        record.get("dataset", ""),
        record.get("sample_id", ""),
        record.get("axis"),
        record.get("value"),
        record.get("status", ""),
        bool(record.get("correct")),
        float(record.get("score") or 0.0),
        _short(record.get("answer")),
        _short(record.get("gold")),
        int(record.get("calls") or 0),
        int(record.get("prompt_tokens") or 0) + int(record.get("completion_tokens") or 0),
        float(record.get("cost") or 0.0),
        round(float(record.get("wall_s") or 0.0), 3),
        record.get("trace_id", ""),
        " ".join(str(k) for k in record.get("plan_kinds") or []),
        _short(record.get("error")),
    ]


def _interval(iv: Interval) -> dict[str, Any]:
    """``iv`` as JSON: no mean or bounds (null) over no samples; ``degenerate`` where it has no width."""
    if iv.n == 0:
        return {"mean": None, "low": None, "high": None, "n": 0, "degenerate": False}
    return {"mean": iv.mean, "low": iv.low, "high": iv.high, "n": iv.n, "degenerate": iv.degenerate}


def _means(c: CellStats) -> dict[str, float | None]:
    """A cell's means per sample; none (null) with no finished sample, as report.md shows "-"."""
    means = {"score": c.score, "calls": c.calls, "tokens": c.tokens, "cost": c.cost, "wall_s": c.wall_s}
    return {k: None if c.n == 0 else v for k, v in means.items()}


def report_data(summary: Summary, header: Mapping[str, Any]) -> dict[str, Any]:
    """The report's numbers as JSON: systems, datasets, cells and paired differences."""
    return {
        "systems": [s for s in header.get("systems", []) if isinstance(s, dict)],
        "datasets": list(summary.datasets),
        "axes": dict(summary.axes),
        "degenerate": {"mark": DEGENERATE_MARK, "note": DEGENERATE_NOTE},  # what a mark means
        "expected": dict(summary.expected),
        "cells": [
            {
                "system": c.system,
                "dataset": c.dataset,
                "value": c.value,
                "axis": c.axis,
                "accuracy": _interval(c.accuracy),
                **_means(c),
                "statuses": dict(c.statuses),
                "undecided": c.undecided,
            }
            for c in summary.cells
        ],
        "paired": [
            {
                "dataset": p.dataset,
                "value": p.value,
                "axis": p.axis,
                "mas": p.mas,
                "sas": p.sas,
                "diff": _interval(p.diff),
            }
            for p in summary.paired
        ],
    }


class EvalRunView:
    """The page data of one eval run directory, rebuilt when its log changes (thread-safe).

    The sample table (:meth:`run`) needs only the log read and is ready first; the report
    (:meth:`report`) runs the bootstrap over every cell, so the page asks for it separately and
    shows the table without waiting for it.
    """

    def __init__(self, directory: Path, *, n_boot: int = N_BOOT) -> None:
        self.directory = directory
        self.n_boot = n_boot
        self.traces = TraceIndex(directory / TRACE_FILE)
        self._lock = threading.Lock()
        self._report_lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._header: Mapping[str, Any] = {}
        self._records: dict[str, Mapping[str, Any]] = {}
        self._table: dict[str, Any] = {}
        self._report: tuple[tuple[int, int] | None, dict[str, Any]] | None = None

    def _load(self) -> tuple[tuple[int, int] | None, Mapping[str, Any], list[Mapping[str, Any]]]:
        """Read the log again if it changed; the stamp, header and records as they are now."""
        stat = (self.directory / LOG_FILE).stat()
        stamp = (stat.st_size, stat.st_mtime_ns)
        with self._lock:
            if stamp != self._stamp:
                header, records = RunLog.read(self.directory)
                expected = sum(int(d.get("n", 0)) for d in header.get("datasets", [])) * max(
                    1, len(header.get("systems", []))
                )
                self._header = header
                self._records = {str(r["key"]): r for r in records}
                self._table = {
                    "columns": list(COLUMNS),
                    "rows": [table_row(r) for r in records],
                    "done": len(records),
                    "expected": expected,
                }
                self._stamp = stamp
            return self._stamp, self._header, list(self._records.values())

    def run(self) -> dict[str, Any]:
        """``{"columns", "rows", "done", "expected"}``: the sample table of the log as it is now."""
        self._load()
        with self._lock:
            return self._table

    def report(self) -> dict[str, Any]:
        """The report's numbers (:func:`report_data`) of the log as it is now."""
        stamp, header, records = self._load()
        with self._report_lock:
            if self._report is None or self._report[0] != stamp:
                summary = summarize(header, records, n_boot=self.n_boot)
                self._report = (stamp, report_data(summary, header))
            return self._report[1]

    def record(self, key: str) -> dict[str, Any] | None:
        """The full record of one sample (its untruncated answer, gold and error), or None."""
        self._load()
        with self._lock:
            record = self._records.get(key)
        return None if record is None else dict(record)
