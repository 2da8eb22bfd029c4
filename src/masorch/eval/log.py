"""The append-only run log ``DIR/log.jsonl``: one header, then one line per finished sample.

Each finished sample is written as one complete line and flushed at once, so a run killed at any
moment loses at most the samples still in flight. Reopening the log for a resume reads the records,
drops a torn last line (a kill during a write), and tells the harness which (system, dataset,
sample) keys are done, so nothing is run twice. When a key appears more than once (a failed sample
retried with ``retry_failed``), the last record wins.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from masorch.errors import UsageError
from masorch.files import decode_text, json_object, read_bytes
from masorch.redact import redact

logger = logging.getLogger(__name__)

LOG_FILE = "log.jsonl"
LOG_VERSION = 1
#: Statuses of a sample that did not produce a scored answer because the harness itself failed.
HARNESS_FAILED = "failed"
#: The statuses of a sample that ended in error rather than with an answer, right or wrong.
ERROR_STATUSES = ("error", HARNESS_FAILED)
#: The header entries a resume must find equal: what was run on what, and under which settings.
RESUME_KEYS = ("systems", "datasets", "settings")
#: The largest run log read back (a 16,000-sample run is about 40 MB).
MAX_LOG_BYTES = 1 << 30


def sample_key(system: str, dataset: str, sample_id: str) -> str:
    """The identity of one unit of work in a run.

    >>> sample_key("sas:cot", "aime24", "7")
    'sas:cot|aime24|7'
    """
    return f"{system}|{dataset}|{sample_id}"


def read_lines(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The JSON records of a log and the byte offset just after its last complete line.

    Lines are written whole with their newline, so bytes after the last newline are a torn write (a
    kill mid-write): they are left out. A complete line that is not JSON is a UsageError (the log
    was edited or corrupted).
    """
    data = read_bytes(path, what="run log", max_bytes=MAX_LOG_BYTES)
    good_end = data.rfind(b"\n") + 1
    if good_end < len(data):
        logger.warning("dropping a torn last line of %s (%d bytes)", path, len(data) - good_end)
    records: list[dict[str, Any]] = []
    for number, raw in enumerate(data[:good_end].split(b"\n")[:-1], start=1):
        if not raw.strip():
            continue
        hint = "the run log was edited or corrupted; start a new --out directory"
        text = decode_text(raw, f"{path} (line {number})", "run log")
        record = json_object(text, f"{path}:{number}", hint=hint)
        problem = _shape_problem(record, first=not records)
        if problem:
            raise UsageError(f"{path} line {number}: {problem}", hint=hint)
        records.append(record)
    return records, good_end


#: The string fields of every sample record (what the report and a resume index by).
_SAMPLE_KEYS = ("key", "system", "dataset", "sample_id")


def _shape_problem(record: dict[str, Any], *, first: bool) -> str:
    """Why ``record`` is not a run-log line ('' when it is one)."""
    kind = record.get("type")
    if first and kind == "header":
        for key in ("systems", "datasets"):
            items = record.get(key, [])
            if not isinstance(items, list) or not all(
                isinstance(i, dict) and isinstance(i.get("name"), str) for i in items
            ):
                return f"the header's {key} must be a list of objects with a name"
        if not isinstance(record.get("settings", {}), dict):
            return "the header's settings must be an object"
        return ""
    if kind == "sample":
        bad = [k for k in _SAMPLE_KEYS if not isinstance(record.get(k), str)]
        if bad:
            return f"a sample record lacks {', '.join(bad)}"
    return ""


def check_run_dir(directory: Path) -> None:
    """A UsageError unless ``directory`` is a directory or does not exist yet (a run can go there)."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(
            f"{directory} is a file, not a run directory", hint="give --out a new or existing directory"
        )


class RunLog:
    """An open run log: ``header`` (the run's systems and data), ``records`` and :meth:`append`.

    Thread-safe: appends from several threads (or Ray result handlers) never interleave.
    """

    def __init__(
        self,
        path: Path,
        header: dict[str, Any],
        records: list[dict[str, Any]],
        owner: IO[bytes] | None = None,
    ) -> None:
        self.path = path
        self.header = header
        self._records = records
        self._lock = threading.Lock()
        self._owner = owner  # the held lock of the run directory (see _hold), released on close
        # A lone surrogate (a "\\ud800" escape in a plan a model wrote) has no UTF-8 form: json.dumps
        # leaves it inside a string, where its backslash escape is that string's JSON escape.
        self._fh = path.open("a", encoding="utf-8", errors="backslashreplace")

    @classmethod
    def create(cls, directory: Path, header: Mapping[str, Any], *, resume: bool) -> RunLog:
        """Open ``directory/log.jsonl``: a new log, or with ``resume`` the existing one (header checked).

        Without ``resume`` an existing non-empty log is a UsageError (never overwritten). With it,
        the stored header's ``systems``, ``datasets`` and ``settings`` must equal ``header``'s.
        """
        check_run_dir(directory)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(
                f"cannot make the run directory {directory}: {exc.strerror or exc}",
                hint="give --out a writable directory",
            ) from None
        owner = _hold(directory)
        try:
            return cls._open(directory / LOG_FILE, header, resume=resume, owner=owner)
        except BaseException:
            owner.close()
            raise

    @classmethod
    def _open(cls, path: Path, header: Mapping[str, Any], *, resume: bool, owner: IO[bytes]) -> RunLog:
        head = {"type": "header", "version": LOG_VERSION, **header}
        if path.exists() and path.stat().st_size > 0:
            if not resume:
                raise UsageError(
                    f"{path} already holds a run",
                    hint="add --resume to continue it, or choose another --out directory",
                )
            records, good_end = read_lines(path)
            if good_end < path.stat().st_size:
                with path.open("r+b") as fh:
                    fh.truncate(good_end)
            if not records or records[0].get("type") != "header":
                raise UsageError(f"{path} has no header line", hint="start a new --out directory")
            stored = records[0]
            for key in RESUME_KEYS:
                if key == "settings" and key not in stored:  # a log begun before settings were kept
                    continue
                was, now = _comparable(key, stored.get(key)), _comparable(key, head.get(key))
                if key == "settings":  # none given and none kept are the same
                    was, now = was or {}, now or {}
                if key == "datasets":  # a log begun before the sample fingerprint: compared without it
                    was, now = _without_missing_ids(was, now)
                if json.dumps(was, sort_keys=True) != json.dumps(now, sort_keys=True):
                    raise UsageError(
                        f"--resume with different {key} than the run in {path}",
                        hint=f"resume with the same flags, or use another --out directory ({key} "
                        f"stored: {redact(json.dumps(stored.get(key)))[:300]})",
                    )
            log = cls(path, stored, records[1:], owner)
            log._write({"type": "resume", "time": time.time()})
            return log
        log = cls(path, head, [], owner)
        log._write(head)
        return log

    @classmethod
    def read(cls, directory: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The header and the sample records of the log in ``directory`` (last record per key wins)."""
        path = directory / LOG_FILE
        if not path.is_file():
            raise UsageError(f"no run log at {path}", hint="pass the --out directory of a `masorch eval run`")
        records, _ = read_lines(path)
        if not records or records[0].get("type") != "header":
            raise UsageError(f"{path} has no header line", hint="is this a masorch eval log?")
        return records[0], latest(records[1:])

    @property
    def records(self) -> list[dict[str, Any]]:
        """The sample records so far (last per key)."""
        with self._lock:
            return latest(self._records)

    def done_keys(self, *, retry_failed: bool = False) -> set[str]:
        """Keys with a record; with ``retry_failed``, a sample that ended in error (a run's ``error``,
        a harness failure: a dead endpoint gives both) is not counted as done."""
        return {r["key"] for r in self.records if not (retry_failed and r.get("status") in ERROR_STATUSES)}

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one sample record as a line and flush it to the OS at once."""
        rec = {"type": "sample", **record}
        with self._lock:
            self._records.append(rec)
            self._write(rec)

    def _write(self, record: Mapping[str, Any]) -> None:
        self._fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._fh.flush()
        if record.get("type") == "header":
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        """Close the file and let another run have the directory."""
        with self._lock:
            self._fh.close()
            if self._owner is not None:
                self._owner.close()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: The file a run holds locked in its directory while it writes there (freed when the process ends).
LOCK_FILE = ".masorch.lock"


def _hold(directory: Path) -> IO[bytes]:
    """The run directory's lock, held: a second run on the same directory (two shells, a resume
    started while the first still runs) would run every sample again and interleave the log."""
    handle = (directory / LOCK_FILE).open("ab")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise UsageError(
            f"another masorch run is writing to {directory}",
            hint="wait for it to end (or stop it), then --resume; or choose another --out directory",
        ) from None
    return handle


def latest(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sample records with only the last one per key, in first-seen order."""
    by_key: dict[str, dict[str, Any]] = {}
    for rec in records:
        if rec.get("type") == "sample":
            by_key[rec["key"]] = rec
    return list(by_key.values())


def _without_missing_ids(stored: Any, now: Any) -> tuple[Any, Any]:
    """``stored`` and ``now`` datasets, without the ``ids`` fingerprint where a stored entry lacks it."""
    entries = (stored, now)
    if not all(isinstance(e, list) and all(isinstance(d, dict) for d in e) for e in entries):
        return stored, now
    if all("ids" in d for d in stored):
        return stored, now

    def strip(entry: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in d.items() if k != "ids"} for d in entry]

    return strip(stored), strip(now)


def _comparable(key: str, value: Any) -> Any:
    """A header entry as resuming compares it: stored systems read back through
    :meth:`~masorch.run.system.System.from_dict`, so that a field added to System since the run
    began (at its default) is no difference; an entry that does not read back stays as stored."""
    if key != "systems" or not isinstance(value, list):
        return value
    from masorch.run.system import System

    try:
        return [System.from_dict(v).to_dict() for v in value]
    except (UsageError, TypeError, AttributeError):  # not systems of this version: compared as written
        return value
