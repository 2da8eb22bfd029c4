"""What ``--data`` names: a registered dataset (``aime24``, ``hotpotqa``, ...) or MASBench files.

Each becomes a :class:`DataSource`: a label, its samples, the scorer that grades them and, for
HotpotQA, the search corpus (the pooled context paragraphs, indexed once with BM25 and the index
saved next to the corpus in the data cache, then reused by every later run).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.eval.datasets import DATASETS, Sample, corpus_path, get_spec, load


@dataclass(frozen=True)
class DataSource:
    """One dataset of a run: ``name`` (its label in logs and reports), samples, scorer and corpus."""

    name: str
    samples: tuple[Sample, ...]
    scorer: str
    corpus: Path | None = None
    origin: str = ""

    def describe(self) -> dict[str, Any]:
        """The JSON summary stored in the run log's header (checked on ``--resume``)."""
        return {"name": self.name, "origin": self.origin, "n": len(self.samples), "scorer": self.scorer}


def masbench_sample(record: dict[str, Any], dataset: str) -> Sample:
    """A MASBench record as a Sample (the gold answer is ``ground_truth``; answers in ``meta``)."""
    try:
        return Sample(
            id=str(record["id"]),
            question=str(record["question"]),
            answer=str(record["ground_truth"]),
            dataset=dataset,
            meta={
                "axis": record.get("axis"),
                "value": record.get("value"),
                "answers": list(record["answers"]),
                "decoys": list(record.get("decoys") or []),
                "attacked_answers": list(record.get("attacked_answers") or []),
            },
        )
    except KeyError as exc:
        raise UsageError(
            f"a MASBench record lacks the field {exc}",
            hint="pass files written by `masorch bench make` (.jsonl or .parquet)",
        ) from None


def read_masbench(path: Path) -> list[dict[str, Any]]:
    """The records of a MASBench file (.jsonl or .parquet), or of every such file in a directory."""
    from masorch.masbench.export import data_files, read_records

    return [rec for file in data_files(path) for rec in read_records(file)]


def _select(samples: list[Sample], limit: int | None, sample: int | None, seed: int) -> list[Sample]:
    if sample is not None and sample < len(samples):
        keep = sorted(random.Random(seed).sample(range(len(samples)), sample))
        samples = [samples[i] for i in keep]
    return samples if limit is None else samples[:limit]


def _masbench_groups(records: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    # --limit applies per (axis, value) cell, so every cell of a MASBench file is represented.
    if limit is None:
        return records
    counts: dict[tuple[Any, Any], int] = {}
    kept = []
    for rec in records:
        cell = (rec.get("axis"), rec.get("value"))
        if counts.get(cell, 0) < limit:
            kept.append(rec)
            counts[cell] = counts.get(cell, 0) + 1
    return kept


def resolve(
    spec: str,
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    cache_dir: Path | None = None,
) -> DataSource:
    """The data source ``spec`` names: a registered dataset or a MASBench JSONL file/directory.

    ``limit`` keeps the first N samples (per axis value for MASBench); ``sample`` a seeded random N.
    """
    if spec in DATASETS:
        ds = get_spec(spec)
        samples = load(spec, limit=limit, sample=sample, seed=seed, cache_dir=cache_dir)
        corpus = corpus_path(cache_dir) if spec == "hotpotqa" else None
        return DataSource(spec, tuple(samples), ds.scorer, corpus, origin=f"dataset:{spec}")
    path = Path(spec.removeprefix("masbench:"))
    if not path.exists():
        raise UsageError(
            f"--data {spec!r} is neither a dataset nor a file",
            hint=f"datasets: {', '.join(DATASETS)} (`masorch data pull NAME`), or a MASBench JSONL path",
        )
    records = _masbench_groups(read_masbench(path), limit)
    name = "masbench:" + (path.stem if path.is_file() else path.name)
    samples = _select([masbench_sample(r, name) for r in records], None, sample, seed)
    return DataSource(name, tuple(samples), "masbench", None, origin=f"file:{path}")


def resolve_all(specs: Sequence[str], **kwargs: Any) -> list[DataSource]:
    """:func:`resolve` for each spec; labels must be distinct."""
    sources = [resolve(s, **kwargs) for s in specs]
    for src in sources:
        if not src.samples:
            raise UsageError(
                f"--data {src.name!r} has no samples ({src.origin})",
                hint="check that the file holds records, and that --limit/--sample are not 0",
                code="empty_dataset",
            )
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise UsageError(f"two --data entries share a label: {names}", hint="rename one of the files")
    return sources
