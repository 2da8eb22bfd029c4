"""Read a user's data file (.jsonl, .parquet or .csv) as a list of rows, bounded and with clear errors.

Every failure is a :class:`~masorch.errors.UsageError` naming the file (and the line or row where
there is one): a missing or unreadable file, an unknown suffix, a file over :data:`MAX_DATASET_BYTES`,
a JSONL line over the line cap, invalid UTF-8 or a NUL byte, a CSV field over the ``csv`` module's
limit, a parquet file pyarrow cannot read.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.files import iter_jsonl, parquet_rows, read_text

#: The largest data file read (whole for CSV and parquet; JSONL is streamed line by line).
MAX_DATASET_BYTES = 1 << 30
#: The suffixes :func:`read_rows` reads.
ROW_FORMATS = (".jsonl", ".parquet", ".csv")

_HINT = "give a .jsonl (one JSON object per line), .parquet or .csv file with a header row"


def read_rows(path: str | Path, *, max_bytes: int = MAX_DATASET_BYTES) -> list[dict[str, Any]]:
    """The rows of a data file, each a dict of column -> value, in file order."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in ROW_FORMATS:
        raise UsageError(
            f"cannot read {path}: unknown data file type {path.suffix or '(no suffix)'!r}",
            hint=_HINT,
            code="data_format",
        )
    if suffix == ".jsonl":
        if path.is_file() and path.stat().st_size > max_bytes:
            raise UsageError(
                f"the data file {path} is larger than {max_bytes / (1 << 20):g} MiB",
                hint="split it, or keep the rows you need in a smaller file",
                code="input_too_large",
            )
        return [row for _, row in iter_jsonl(path, what="data file", item="a row", hint=_HINT)]
    if suffix == ".csv":
        return _read_csv(path, max_bytes)
    return _read_parquet(path, max_bytes)


def _read_csv(path: Path, max_bytes: int) -> list[dict[str, Any]]:
    text = read_text(path, what="data file", max_bytes=max_bytes).removeprefix("\ufeff")  # Excel's BOM
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        return [dict(row) for row in reader]
    except csv.Error as exc:
        raise UsageError(
            f"{path}:{reader.line_num}: not readable as CSV ({exc})", hint=_HINT, code="data_format"
        ) from None


def _read_parquet(path: Path, max_bytes: int) -> list[dict[str, Any]]:
    return parquet_rows(path, what="data file", hint=_HINT, max_bytes=max_bytes)
