"""Where events go: a sink protocol, a JSONL file writer, an in-memory sink, and the reader."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Protocol

from pydantic import ValidationError

from masorch.errors import UsageError
from masorch.trace.events import EVENT_ADAPTER, SCHEMA_VERSION, Event


class TraceSink(Protocol):
    """Receives every event of a run, in order."""

    def emit(self, event: Event) -> None:
        """Take one event."""
        ...


class MemoryTrace:
    """Keeps events in a list (tests, and the CLI's live view)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        """Append the event."""
        self.events.append(event)


class CallbackSink:
    """Calls a function with each event (e.g. to update a progress display)."""

    def __init__(self, callback: Callable[[Event], None]) -> None:
        self._callback = callback

    def emit(self, event: Event) -> None:
        """Pass the event to the callback."""
        self._callback(event)


class FanOut:
    """Sends each event to several sinks in order."""

    def __init__(self, sinks: Sequence[TraceSink]) -> None:
        self._sinks = tuple(sinks)

    def emit(self, event: Event) -> None:
        """Emit to every sink."""
        for sink in self._sinks:
            sink.emit(event)


class TraceWriter:
    """Appends events to a JSONL file, one object per line, flushed after every event.

    Use as a context manager or call :meth:`close`. The file is opened in append mode so several
    runs can share one trace file (events carry their ``run_id``).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                f"cannot open trace file {self.path}: {exc.strerror}", hint="pass a writable --trace path"
            ) from exc

    def emit(self, event: Event) -> None:
        """Write the event as one JSON line and flush."""
        if self._file is None:
            raise UsageError(f"trace file {self.path} is closed", hint="emit events before close()")
        self._file.write(event.model_dump_json() + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trace(path: str | Path) -> list[Event]:
    """Every event of a JSONL trace, typed; a bad line or unknown schema version is a UsageError."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read trace {p}: {exc.strerror}", hint="check the path") from exc
    events: list[Event] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"{p}:{number}: not JSON ({exc.msg})", hint="a trace has one JSON event per line"
            ) from exc
        if not isinstance(raw, dict):
            raise UsageError(f"{p}:{number}: an event must be a JSON object", hint="is this a masorch trace?")
        version = raw.get("schema_version")
        if version != SCHEMA_VERSION:
            raise UsageError(
                f"{p}:{number}: unknown trace schema version {version!r} "
                f"(this masorch reads {SCHEMA_VERSION})",
                hint="read it with the masorch version that wrote it",
            )
        try:
            events.append(EVENT_ADAPTER.validate_python(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise UsageError(
                f"{p}:{number}: invalid {raw.get('type', 'event')!r} event: {where}: {first['msg']}",
                hint="the trace is damaged or from another program",
            ) from exc
    return events
