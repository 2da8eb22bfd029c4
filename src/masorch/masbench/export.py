"""Reading and writing instance files: JSONL (full records) and parquet (the MAS-Orchestra/verl layout)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.files import atomic_writer, iter_jsonl, parquet_rows, replacing

FORMATS = (".jsonl", ".parquet")
#: The most data a MASBench parquet file may decode to (a million instances take about 1 GB).
MAX_FILE_BYTES = 2 << 30
_PARQUET_HINT = "give a MASBench parquet file written by `masorch bench make`"


def check_format(path: Path, action: str = "write") -> str:
    """The file suffix if it is a supported format, else a usage error (``action``: write or read)."""
    if path.suffix not in FORMATS:
        raise UsageError(
            f"cannot {action} {path.name!r}: unknown format",
            hint="name the file *.jsonl or *.parquet"
            if action == "write"
            else "give a .jsonl or .parquet file",
        )
    return path.suffix


def to_json_line(rec: dict[str, Any]) -> str:
    """One record as a JSON line (stable key order, no trailing spaces)."""
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


def verl_row(rec: dict[str, Any]) -> dict[str, Any]:
    """A record as a verl/MAS-Orchestra row: chat prompt, reward_model.ground_truth, extra_info."""
    return {
        "data_source": f"masbench/{rec['axis']}",
        "prompt": [{"role": "user", "content": rec["question"]}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": rec["ground_truth"]},
        "extra_info": {
            "id": rec["id"],
            "split": rec["split"],
            "index": rec["index"],
            "seed": rec["seed"],
            "answers": rec["answers"],
            "decoys": rec["decoys"],
            "attacked_answers": rec["attacked_answers"],
            "template_hash": rec["template_hash"],
            "generator_version": rec["generator_version"],
            "measured": rec["measured"],
            "record": to_json_line(rec),
        },
        "axis": rec["axis"],
        "value": rec["value"],
    }


def _schema() -> Any:
    import pyarrow as pa

    ints = pa.list_(pa.int64())
    measured = pa.struct([(k, pa.int64()) for k in ("depth", "horizon", "breadth", "parallel", "robustness")])
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            (
                "extra_info",
                pa.struct(
                    [
                        ("id", pa.string()),
                        ("split", pa.string()),
                        ("index", pa.int64()),
                        ("seed", pa.int64()),
                        ("answers", ints),
                        ("decoys", ints),
                        ("attacked_answers", ints),
                        ("template_hash", pa.string()),
                        ("generator_version", pa.string()),
                        ("measured", measured),
                        ("record", pa.string()),
                    ]
                ),
            ),
            ("axis", pa.string()),
            ("value", pa.int64()),
        ]
    )


def jsonl_features() -> Any:
    """The ``datasets.Features`` of a JSONL record, for loading several files (any axes) as one dataset.

    ``load_dataset("json", data_files=[...], features=jsonl_features())``: without it, ``datasets``
    infers each file's schema on its own, and fields that are empty in one file (no decoys, no task-graph
    edges) do not cast to the others.
    """
    from datasets import Features, Value

    i64, text = Value("int64"), Value("string")
    axes = ("depth", "horizon", "breadth", "parallel", "robustness")
    subtask = {
        "kind": text, "world": i64, "body": text, "question": text, "note": text, "answer": i64,
        "graph": {"nodes": [text], "edges": [[text]], "query": text},
        "equations": [{"quantity": text, "rhs": text, "inputs": [text]}],
        "n_distractors": i64, "solution": text, "sketch": text, "template_hash": text, "bucket": i64,
        "depth": i64, "breadth": i64, "operations": i64,
        "needle": {"key": text, "number": i64, "position": i64, "repeats": i64},
    }  # fmt: skip
    world = {
        "chain": text,
        "levels": [{"level": i64, "category": text, "subcategory": text, "items": [text]}],
        "edges": [[text]],
    }
    return Features(
        {
            "id": text, "axis": text, "value": i64, "split": text, "seed": i64, "index": i64,
            "attempt": i64, "generator_version": text, "question": text, "answers": [i64],
            "ground_truth": text, "decoys": [i64], "attacked_answers": [i64],
            "verification": {"solution": text, "answers": [i64]},
            "measured": {a: i64 for a in axes}, "template_hash": text, "worlds": [world],
            "subtasks": [subtask], "task_graph": {"nodes": [text], "edges": [[text]]},
            "controls": {a: [i64] for a in axes},
        }
    )  # fmt: skip


def write_records(path: Path, records: Iterable[dict[str, Any]]) -> int:
    """Write records to ``path`` (.jsonl or .parquet), replacing it whole only once all are written;
    return how many were written."""
    suffix = check_format(path)
    if path.is_dir():
        raise UsageError(f"{path} is a directory", hint="give a file name ending in .jsonl or .parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".jsonl":
        n = 0
        with atomic_writer(path, "w") as fh:  # an interrupted write keeps the file that was there
            for rec in records:
                fh.write(to_json_line(rec) + "\n")
                n += 1
        return n
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [verl_row(r) for r in records]
    table = pa.Table.from_pylist(rows, schema=_schema())
    with replacing(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return len(rows)


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Read full records back from a .jsonl or .parquet file written by :func:`write_records`."""
    if not path.is_file():
        problem = f"{path} is not a regular file" if path.exists() else f"no such file: {path}"
        raise UsageError(problem, hint="give the path of a .jsonl or .parquet file")
    suffix = check_format(path, "read")
    if suffix == ".jsonl":
        for lineno, rec in iter_jsonl(path, what="MASBench file", hint="is it a MASBench file?"):
            yield _record(rec, f"{path}:{lineno}")
        return
    rows = parquet_rows(
        path, what="MASBench file", hint=_PARQUET_HINT, max_bytes=MAX_FILE_BYTES, columns=["extra_info"]
    )
    for i, row in enumerate(rows):
        yield _row_record(row, f"{path} row {i}")


def _row_record(row: dict[str, Any], where: str) -> dict[str, Any]:
    """The record a parquet row carries in ``extra_info.record``."""
    try:
        rec = json.loads((row.get("extra_info") or {})["record"])
    except (TypeError, KeyError, ValueError, RecursionError):
        raise UsageError(
            f"{where}: no MASBench record in extra_info", hint="give a file written by `masorch bench make`"
        ) from None
    return _record(rec, where)


def row_disagreements(path: Path) -> list[str]:
    """Every row of a parquet file whose training columns are not :func:`verl_row` of its record.

    :func:`read_records` reads only ``extra_info.record``; a trainer reads ``prompt``,
    ``reward_model.ground_truth``, ``axis`` and ``value``. One line per differing row, naming the
    columns (a JSONL file has nothing beside its records: no lines).
    """
    if check_format(path, "read") != ".parquet":
        return []
    rows = parquet_rows(path, what="MASBench file", hint=_PARQUET_HINT, max_bytes=MAX_FILE_BYTES)
    out = []
    for i, row in enumerate(rows):
        rec = _row_record(row, f"{path} row {i}")
        columns = _differing(verl_row(rec), row)
        if columns:
            out.append(
                f"{rec['id']}: {path} row {i}: {', '.join(columns)} differ from the row's record "
                "(extra_info.record)"
            )
    return out


def _differing(expected: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """The (dotted) columns where ``row`` differs from ``expected``, one level into struct columns."""
    out = []
    for key in sorted(expected.keys() | row.keys()):
        want, got = expected.get(key), row.get(key)
        if isinstance(want, dict) and isinstance(got, dict):
            out += [
                f"{key}.{sub}" for sub in sorted(want.keys() | got.keys()) if want.get(sub) != got.get(sub)
            ]
        elif want != got:
            out.append(key)
    return out


#: The fields every MASBench record has (the readers check them so consumers can index them).
REQUIRED_FIELDS = ("id", "question", "answers", "ground_truth")


def _record(rec: Any, where: str) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise UsageError(f"{where}: a record must be a JSON object", hint="is it a MASBench file?")
    missing = [k for k in REQUIRED_FIELDS if k not in rec]
    if missing:
        raise UsageError(
            f"{where}: not a MASBench record (no {', '.join(missing)})",
            hint="give a file written by `masorch bench make`",
        )
    return rec


def data_files(path: Path) -> list[Path]:
    """The instance files under ``path`` (itself if a file; else its *.jsonl and *.parquet, sorted)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in FORMATS)
        if not files:
            raise UsageError(
                f"no .jsonl or .parquet files in the directory {path}",
                hint="a directory is read as a MASBench suite (`masorch bench make -o DIR` writes one); "
                "give a data file itself as a file path",
            )
        return files
    return [path]
