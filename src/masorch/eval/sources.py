"""What ``--data`` names: a registered dataset, a data file of your own, a hub dataset, or MASBench files.

* ``aime24``, ``hotpotqa``, ... - a registered dataset (``masorch data pull NAME``) and its scorer;
* ``FILE.jsonl|.parquet|.csv`` - your rows: question and answer columns (:class:`FieldMap`) graded
  by the scorer you choose; MASBench rows (``masorch bench make`` files, or the official release's
  parquet files) are recognised by their columns and graded by ``masbench``;
* ``hf:NAME[:CONFIG][:SPLIT]`` - the same rows from the Hugging Face hub (the ``data`` extra);
* a directory, or ``masbench:PATH`` - MASBench files written by ``masorch bench make``.

Each becomes a :class:`DataSource`: a label, its samples, the scorer that grades them and, for
HotpotQA, the search corpus (the pooled context paragraphs, indexed once with BM25 and the index
saved next to the corpus in the data cache, then reused by every later run).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.eval.datasets import DATASETS, Sample, cache_root, corpus_path, get_spec, load
from masorch.eval.datasets.custom import FieldMap, plain_samples, release_sample, row_kind
from masorch.eval.datasets.hub import HUB_CACHE, PREFIX, load_hub_rows, parse_hf_spec
from masorch.eval.datasets.rows import read_rows
from masorch.masbench.instance import SEPARATOR
from masorch.score.masbench import parse_ground_truth
from masorch.score.registry import canonical_scorer


@dataclass(frozen=True)
class DataSource:
    """One dataset of a run: ``name`` (its label in logs and reports), samples, scorer and corpus."""

    name: str
    samples: tuple[Sample, ...]
    scorer: str
    corpus: Path | None = None
    origin: str = ""

    def describe(self) -> dict[str, Any]:
        """The JSON summary stored in the run log's header (checked on ``--resume``); ``ids`` is a
        fingerprint of which samples were chosen, so that a resume with another ``--skip``,
        ``--sample`` or ``--seed`` of the same size is refused rather than mixed in."""
        ids = hashlib.sha256("\n".join(s.id for s in self.samples).encode("utf-8", "surrogatepass"))
        return {
            "name": self.name,
            "origin": self.origin,
            "n": len(self.samples),
            "scorer": self.scorer,
            "ids": ids.hexdigest()[:16],
        }


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

    records: list[dict[str, Any]] = []
    where: dict[str, Path] = {}
    for file in data_files(path):
        file_records = list(read_records(file))
        _check_unique_ids(file_records, str(file), where, file)
        records.extend(file_records)
    return records


def _check_unique_ids(records: list[dict[str, Any]], label: str, seen: dict[str, Path], file: Path) -> None:
    """Refuse a MASBench id met twice (results are keyed by it: a repeat would lose a sample and keep
    a resumed run from ever completing); ``seen`` maps the ids of earlier files to their file."""
    for rec in records:
        rid = str(rec.get("id"))
        if rid in seen:
            other = "" if seen[rid] == file else f" (also in {seen[rid]})"
            raise UsageError(
                f"the MASBench id {rid!r} occurs twice in {label}{other}",
                hint="results are keyed by id: a directory holding both the .jsonl and the .parquet copy of "
                "one suite reads it twice, so keep one of them (or write the files with distinct seeds)",
                code="data_field",
            )
        seen[rid] = file


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
    skip: int = 0,
    cache_dir: Path | None = None,
    fields: FieldMap | None = None,
    scorer: str | None = None,
) -> DataSource:
    """The data source ``spec`` names (see the module docs), graded by ``scorer`` or its own.

    ``skip`` leaves out the first N samples (records, for MASBench) before the others apply;
    ``limit`` keeps the first N samples (per axis value for MASBench); ``sample`` a seeded random N.
    Plain rows have no scorer of their own: they need ``scorer`` (``em``/``judge`` name
    ``exact``/``llm_judge``). ``fields`` names their question, answer and id columns. Ground truths
    the chosen scorer cannot read are refused here, before any call is spent.
    """
    for name, value in (("skip", skip), ("limit", limit), ("sample", sample)):
        if value is not None and value < 0:
            raise UsageError(f"{name} must be >= 0, got {value}", code="bad_argument")
    chosen = canonical_scorer(scorer) if scorer is not None else None
    if spec in DATASETS:
        ds = get_spec(spec)
        samples = load(spec, limit=limit, sample=sample, seed=seed, skip=skip, cache_dir=cache_dir)
        corpus = corpus_path(cache_dir) if spec == "hotpotqa" else None
        source = DataSource(spec, tuple(samples), chosen or ds.scorer, corpus, origin=f"dataset:{spec}")
        return _gradable(source)
    rows_of = _Rows(limit, sample, seed, fields or FieldMap(), chosen, skip)
    if spec.startswith(PREFIX):
        rows = load_hub_rows(parse_hf_spec(spec), spec, cache_root(cache_dir) / HUB_CACHE)
        return _gradable(rows_of.source(spec, rows, f"hub:{spec.removeprefix(PREFIX)}", spec))
    path = _data_path(spec)
    if path.is_file() and not spec.startswith("masbench:"):
        rows = read_rows(path)
        if not _masbench_export(rows):
            return _gradable(rows_of.source(path.stem, rows, f"file:{path}", str(path)))
    records = _masbench_groups(read_masbench(path)[skip:], limit)
    name = "masbench:" + (path.stem if path.is_file() else path.name)
    samples = _select([masbench_sample(r, name) for r in records], None, sample, seed)
    return _gradable(DataSource(name, tuple(samples), chosen or "masbench", None, origin=f"file:{path}"))


def _gradable(source: DataSource) -> DataSource:
    """``source``, checked: the masbench scorers grade integer answers, and a sample whose answers
    are not integers would fail every run of it, after its calls were spent."""
    if source.scorer not in ("masbench", "masbench_final"):
        return source
    for s in source.samples:
        answers = s.meta.get("answers")
        if answers is None:
            try:
                parse_ground_truth(s.answer)
                continue
            except ValueError:
                pass
        elif all(isinstance(a, int) and not isinstance(a, bool) for a in answers):
            continue
        shown = s.answer if answers is None else answers
        raise UsageError(
            f"--data {source.name!r}: sample {s.id!r} has the answer {str(shown)[:60]!r}, not integers "
            f"(joined by {SEPARATOR} for several)",
            hint="the masbench scorer grades MASBench's integer answers; for other answers pick another "
            "scorer with --scorer (math, exact, f1)",
            code="data_field",
        )
    return source


def _data_path(spec: str) -> Path:
    """The file or directory a ``--data`` spec names (past the dataset and hub names)."""
    if spec == "masbench:":
        raise UsageError(
            "--data 'masbench:' names no files",
            hint="give the directory or file `masorch bench make` wrote: --data masbench:PATH",
        )
    path = Path(spec.removeprefix("masbench:"))
    if not path.exists():
        raise UsageError(
            f"--data {spec!r} is neither a dataset nor a file",
            hint=f"datasets: {', '.join(DATASETS)} (`masorch data pull NAME`); a .jsonl, .parquet or .csv "
            "file; hf:NAME[:CONFIG][:SPLIT]; or a MASBench directory",
        )
    if not path.is_file() and not path.is_dir():  # a FIFO or a device: reading it would block
        raise UsageError(
            f"--data {spec!r} is not a regular file", hint="give a data file, a dataset name or a directory"
        )
    return path


def _masbench_export(rows: list[dict[str, Any]]) -> bool:
    # The parquet layout of `masorch bench make`: verl rows whose extra_info holds the whole record.
    extra = rows[0].get("extra_info") if rows else None
    return isinstance(extra, dict) and "record" in extra


@dataclass(frozen=True)
class _Rows:
    """How rows (from a file or the hub) become a data source."""

    limit: int | None
    sample: int | None
    seed: int
    fields: FieldMap
    scorer: str | None
    skip: int = 0

    def source(self, label: str, rows: list[dict[str, Any]], origin: str, where: str) -> DataSource:
        if not rows:
            raise UsageError(
                f"--data {where!r} has no samples (no rows)", hint="check the file", code="empty_dataset"
            )
        kind = row_kind(rows[0])
        if kind == "plain":
            if self.scorer is None:
                raise UsageError(
                    f"--data {where!r} holds your own questions: choose how answers are graded",
                    hint="pass --scorer: math, exact (em), f1, llm_judge (judge, with --judge-model)",
                    code="scorer_required",
                )
            samples = plain_samples(rows, self.fields, label, where)[self.skip :]
            samples = _select(samples, self.limit, self.sample, self.seed)
            return DataSource(label, tuple(samples), self.scorer, None, origin=origin)
        name = label if label.startswith(PREFIX) else f"masbench:{label}"
        grouped = _masbench_groups(rows[self.skip :], self.limit)
        if kind == "masbench":
            _check_unique_ids(rows, where, {}, Path(where))
            made = [masbench_sample(r, name) for r in grouped]
        else:
            index = {id(r): i for i, r in enumerate(rows)}
            made = [release_sample(r, name, index[id(r)], f"{where} row {index[id(r)]}") for r in grouped]
        samples = _select(made, None, self.sample, self.seed)
        return DataSource(name, tuple(samples), self.scorer or "masbench", None, origin=origin)


def resolve_all(specs: Sequence[str], **kwargs: Any) -> list[DataSource]:
    """:func:`resolve` for each spec (same keyword arguments); labels must be distinct, and there
    is at least one (a run of no data would write a log that no corrected command could resume)."""
    if not specs:
        raise UsageError(
            "--data names no dataset", hint="e.g. --data math500-subset, or a file: --data questions.jsonl"
        )
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
