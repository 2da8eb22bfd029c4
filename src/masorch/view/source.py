"""What a path given to ``masorch view`` is: an eval run directory, a training run, or a trace file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from masorch.errors import UsageError
from masorch.eval.harness import TRACE_FILE
from masorch.eval.log import LOG_FILE
from masorch.files import iter_jsonl
from masorch.trace.writer import TRACE_HINT
from masorch.view.training import is_training_dir

SourceKind = Literal["eval", "training", "trace"]


@dataclass(frozen=True)
class Source:
    """A path to view and what it holds."""

    kind: SourceKind
    path: Path


#: What a directory's ``log.jsonl`` that is not JSON lines is (an eval or a training log).
_LOG_HINT = (
    "the log.jsonl of an eval or training run has one JSON record per line (was it edited or overwritten?)"
)


def _first_object(path: Path, what: str, hint: str) -> dict[str, object] | None:
    for _, obj in iter_jsonl(path, what=what, hint=hint, complete_only=True):
        return obj
    return None


def _trace(path: Path) -> Source:
    """``path`` as a trace source, or a UsageError when its first line is not a trace event."""
    first = _first_object(path, "trace", TRACE_HINT)
    if first is None or "schema_version" not in first or "run_id" not in first:
        raise UsageError(
            f"{path} is not a masorch trace (its first line is not a trace event)",
            hint="give a trace file of `masorch run --trace FILE`, or a run directory",
        )
    return Source("trace", path)


def detect(path: Path) -> Source:
    """The kind of ``path``; a path that is none of them is a UsageError saying what would be."""
    if not path.exists():
        raise UsageError(
            f"no such file or directory: {path}",
            hint="give an eval run directory, a training output_dir or a trace file",
        )
    if path.is_dir():
        log = path / LOG_FILE
        if log.is_file():
            first = _first_object(log, "run log", _LOG_HINT)
            if first is not None and first.get("type") == "header":
                return Source("eval", path)
        if is_training_dir(path):
            return Source("training", path)
        if (path / TRACE_FILE).is_file():
            return _trace(path / TRACE_FILE)
        raise UsageError(
            f"{path} holds no eval run, training run or trace",
            hint="give the --out directory of `masorch eval run`, the output_dir of `masorch train grpo`, "
            "or a trace file of `masorch run --trace`",
        )
    if not path.is_file():  # a FIFO or a device would block the read, or never end
        raise UsageError(
            f"{path} is not a regular file",
            hint="give an eval run directory, a training output_dir or a trace file",
        )
    return _trace(path)
