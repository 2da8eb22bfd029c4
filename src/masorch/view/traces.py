"""An index of a JSONL trace file by run id, built incrementally, so one run's events load without the rest.

An eval run's ``traces.jsonl`` holds the events of every sample (10,000 samples make about 100,000
lines); a ``masorch run --trace`` file may hold several runs. :class:`TraceIndex` scans the file once
for the byte ranges of each run's lines, remembers where it stopped, and on the next look-up scans
only what was appended since, so a trace still being written is followed (a torn last line is left
for the next scan). One run's events are then read from its ranges alone.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.files import iter_line_spans, json_object
from masorch.trace.events import Event
from masorch.trace.writer import TRACE_HINT, parse_event


@dataclass(frozen=True)
class RunEntry:
    """What the index knows of one run without reading it again: its first event's fields."""

    run_id: str
    question: str
    mode: str
    started: float


class TraceIndex:
    """Byte ranges of each run's lines in one trace file; thread-safe, refreshed on every look-up."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._scanned = 0
        self._lines = 0
        self._ranges: dict[str, list[list[int]]] = {}
        self._runs: dict[str, RunEntry] = {}

    def refresh(self) -> None:
        """Scan the lines appended since the last scan (complete lines only)."""
        with self._lock:
            if not self.path.is_file() or self.path.stat().st_size <= self._scanned:
                return
            for span in iter_line_spans(
                self.path,
                what="trace",
                start=self._scanned,
                first_number=self._lines + 1,
                complete_only=True,
            ):
                self._scanned, self._lines = span.end, span.number
                if not span.text.strip():
                    continue
                raw = json_object(span.text, f"{self.path}:{span.number}", item="an event", hint=TRACE_HINT)
                run_id = raw.get("run_id")
                if not isinstance(run_id, str):
                    raise UsageError(f"{self.path}:{span.number}: an event without a run_id", hint=TRACE_HINT)
                ranges = self._ranges.setdefault(run_id, [])
                if ranges and ranges[-1][1] == span.start:
                    ranges[-1][1] = span.end  # the run's lines are usually one block: one range
                else:
                    ranges.append([span.start, span.end])
                if run_id not in self._runs:
                    self._runs[run_id] = RunEntry(
                        run_id,
                        str(raw.get("question", "")),
                        str(raw.get("mode", "")),
                        float(raw.get("ts") or 0.0),
                    )

    def runs(self) -> list[RunEntry]:
        """Every run of the file, in the order their first events were written."""
        self.refresh()
        with self._lock:
            return list(self._runs.values())

    def events(self, run_id: str) -> list[Event]:
        """The typed events of one run, in file order; an unknown run id is an empty list."""
        self.refresh()
        with self._lock:
            ranges = [tuple(r) for r in self._ranges.get(run_id, [])]
        events: list[Event] = []
        with self.path.open("rb") as fh:
            for start, end in ranges:
                fh.seek(start)
                for raw in _objects(fh.read(end - start), f"{self.path} (run {run_id})"):
                    if raw.get("run_id") == run_id:
                        events.append(parse_event(raw, f"{self.path} (run {run_id})"))
        return events


def _objects(block: bytes, where: str) -> list[dict[str, Any]]:
    """The JSON objects of a block of complete lines the index has already checked."""
    return [
        json_object(line.decode("utf-8"), where, item="an event", hint=TRACE_HINT)
        for line in block.split(b"\n")
        if line.strip()
    ]
