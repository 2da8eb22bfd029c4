"""Where events go: a sink protocol, a JSONL file writer, an in-memory sink, and the reader."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from pydantic import ValidationError

from masorch.errors import RunError, UsageError
from masorch.files import iter_jsonl, open_appending
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
        self._file: IO[str] | None = open_appending(self.path, what="trace file", flag="--trace")
        self._error: OSError | None = None

    def emit(self, event: Event) -> None:
        """Write the event as one JSON line and flush.

        A write the file system refuses (a full disk) does not stop the run: the writer stops writing,
        and :meth:`close` raises a :class:`RunError` saying why the trace is incomplete.
        """
        if self._file is None:
            raise UsageError(f"trace file {self.path} is closed", hint="emit events before close()")
        if self._error is not None:
            return
        try:
            self._file.write(event.json_line() + "\n")
            self._file.flush()
        except OSError as exc:
            self._error = exc

    def close(self) -> None:
        """Close the file (idempotent); a RunError if an event could not be written."""
        if self._file is None:
            return
        file, self._file = self._file, None
        try:
            file.close()
        except OSError as exc:  # the buffered tail failed to flush; the descriptor is closed anyway
            self._error = self._error or exc
        if self._error is not None:
            raise RunError(
                f"could not write the trace file {self.path}: {self._error.strerror or self._error}",
                hint="free space on its disk or pass another --trace path; the trace is incomplete",
                code="trace_write_failed",
            )

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trace(path: str | Path, *, complete_only: bool = False) -> list[Event]:
    """Every event of a JSONL trace, typed; a bad line or unknown schema version is a UsageError.

    With ``complete_only`` a torn last line (a trace still being written) is left out.
    """
    p = Path(path)
    return [
        parse_event(raw, f"{p}:{number}")
        for number, raw in iter_jsonl(
            p,
            what="trace",
            item="an event",
            hint=TRACE_HINT,
            complete_only=complete_only,
        )
    ]


#: The fix hint of a line that is not a trace event.
TRACE_HINT = "a trace has one JSON event per line (is this a masorch trace?)"


def parse_event(raw: dict[str, Any], where: str) -> Event:
    """One trace line's object as its typed event; an unknown schema version or bad event is a UsageError."""
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise UsageError(
            f"{where}: unknown trace schema version {version!r} (this masorch reads {SCHEMA_VERSION})",
            hint="read it with the masorch version that wrote it",
        )
    try:
        return EVENT_ADAPTER.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise UsageError(
            f"{where}: invalid {raw.get('type', 'event')!r} event: {loc}: {first['msg']}",
            hint="the trace is damaged or from another program",
        ) from exc
