"""What a collection writes: the kept trajectories as a chat-format dataset (JSONL, parquet) and its
summary figures."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from masorch.files import atomic_writer, replacing
from masorch.redact import redact
from masorch.train.collect_config import CollectConfig
from masorch.train.collect_select import Attempt, Selection, protocol_errors, recovered, tool_shares

logger = logging.getLogger(__name__)


def dataset_record(attempt: Mapping[str, Any]) -> dict[str, Any]:
    """A kept attempt as one dataset record: ``messages`` and ``tools`` (chat format), ``meta`` (the
    trajectory's calls and outcomes) and ``stats`` (everything else the attempt says)."""
    chat = attempt["chat"]
    stats = {k: v for k, v in attempt.items() if k not in ("chat", "id", "dataset", "question_id")}
    return {
        "id": attempt["id"],
        "dataset": attempt["dataset"],
        "question_id": attempt["question_id"],
        "messages": chat["messages"],
        "tools": chat["tools"],
        "meta": chat["meta"],
        "stats": stats,
    }


def write_dataset(kept: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Write the kept attempts as JSONL dataset records (replacing the file)."""
    with atomic_writer(path, "w") as fh:
        for a in kept:
            fh.write(json.dumps(dataset_record(a), ensure_ascii=False) + "\n")


def write_parquet(kept: Sequence[Mapping[str, Any]], path: Path) -> Path | None:
    """The dataset as parquet (None without pyarrow). ``messages`` is a list of structs; ``tools``,
    ``meta`` and ``stats`` are JSON text (their shapes differ from tool to tool); the main figures
    are columns of their own."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        logger.info("pyarrow is not installed: no %s (pip install 'masorch[data]')", path.name)
        return None
    rows = []
    for a in kept:
        rec = dataset_record(a)
        rows.append(
            {
                "id": rec["id"],
                "dataset": rec["dataset"],
                "question_id": rec["question_id"],
                "messages": rec["messages"],
                "tools": json.dumps(rec["tools"], ensure_ascii=False),
                "meta": json.dumps(rec["meta"], ensure_ascii=False),
                "stats": json.dumps(rec["stats"], ensure_ascii=False),
                "rounds": a["rounds"],
                "recovered": recovered(a),
                "failures": a["failures"],
                "tokens": a["tokens"]["total"],
            }
        )
    with replacing(path) as tmp:
        pq.write_table(pa.Table.from_pylist(rows, schema=_parquet_schema()), tmp)
    return path


def _parquet_schema() -> Any:
    import pyarrow as pa

    call = pa.struct(
        [
            ("id", pa.string()),
            ("type", pa.string()),
            ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
        ]
    )
    message = pa.struct(
        [
            ("role", pa.string()),
            ("content", pa.string()),
            ("tool_calls", pa.list_(call)),
            ("tool_call_id", pa.string()),
        ]
    )
    return pa.schema(
        [
            ("id", pa.string()),
            ("dataset", pa.string()),
            ("question_id", pa.string()),
            ("messages", pa.list_(message)),
            ("tools", pa.string()),
            ("meta", pa.string()),
            ("stats", pa.string()),
            ("rounds", pa.int64()),
            ("recovered", pa.bool_()),
            ("failures", pa.int64()),
            ("tokens", pa.int64()),
        ]
    )


def summarize(
    cfg: CollectConfig, attempts: Sequence[Attempt], selection: Selection, *, wall_s: float
) -> dict[str, Any]:
    """The figures of a collection: what was sampled, what was right, what was kept and its balance."""
    kept = selection.kept
    statuses: Counter[str] = Counter()
    for a in attempts:
        statuses.update(a.get("statuses", {}))
    correct = [a for a in attempts if a.get("correct")]
    errored = [a for a in attempts if a.get("status") == "error"]
    return {
        "teacher": cfg.teacher,
        "samples_per_question": cfg.samples,
        "temperature": cfg.temperature,
        "fault_rate": cfg.fault_rate,
        "max_tool_share": cfg.max_tool_share,
        "questions": selection.questions,
        "attempts": len(attempts),
        "attempts_correct": len(correct),
        "attempts_recovered": sum(1 for a in attempts if recovered(a)),
        "attempts_with_protocol_errors": sum(1 for a in attempts if protocol_errors(a)),
        # an attempt that ended in error (a dead teacher endpoint) is no evidence about the question
        "attempts_errored": len(errored),
        "first_error": redact(str(errored[0].get("error") or "(no message)")) if errored else "",
        "questions_without_correct": selection.questions_without_correct,
        "kept": len(kept),
        "kept_recovered": sum(1 for a in kept if recovered(a)),
        "kept_with_protocol_errors": sum(1 for a in kept if protocol_errors(a)),
        "swapped_for_balance": selection.swapped_for_balance,
        "dropped_for_balance": selection.dropped_for_balance,
        "balanced": selection.balanced,
        "tool_shares_kept": dict(selection.shares),
        "tool_shares_correct": tool_shares(correct),
        "call_statuses": dict(sorted(statuses.items())),
        "injected_faults": sum(int(a.get("injected", 0)) for a in attempts),
        "mean_rounds_kept": round(sum(a["rounds"] for a in kept) / len(kept), 3) if kept else None,
        "tokens_all_attempts": sum(int(a["tokens"]["total"]) for a in attempts),
        "wall_s_this_run": round(wall_s, 2),
    }
