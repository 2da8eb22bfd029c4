"""Prompt rows for training an orchestrator: the question inside the orchestrator prompt, plus grading.

A row is a plain dict (what ``datasets.Dataset.from_list`` and verl's parquet both take):

* ``prompt`` - the orchestrator's chat messages (system + user) from
  :func:`masorch.run.orchestrate.orchestrator_messages`, with the DoM, catalogue and dialect;
* ``question``, ``dom``, ``ground_truth``, ``scorer`` - the columns the rewards read;
* ``data_source`` and ``id`` - where the row came from.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from masorch.errors import UsageError
from masorch.plan import DoM
from masorch.plan.catalogue import KindSignature
from masorch.plan.parse import Dialect
from masorch.run.budget import Budget
from masorch.run.orchestrate import OrchestrateOptions, orchestrator_messages
from masorch.train.config import SourceConfig

logger = logging.getLogger(__name__)

Row = dict[str, Any]


def _questions(source: SourceConfig) -> Iterable[tuple[str, str, str, str, str]]:
    """(id, question, ground_truth, scorer, data_source) of each item of a source."""
    if source.where and source.kind != "dataset":
        raise UsageError(f"`where` filters dataset sources only, not {source.kind}", hint="remove `where`")
    if source.kind == "masbench":
        from masorch.masbench.export import read_records

        if not source.path:
            raise UsageError("a masbench source needs a path", hint="path: data/depth_train.jsonl")
        for rec in read_records(Path(source.path)):
            yield rec["id"], rec["question"], rec["ground_truth"], "masbench", f"masbench/{rec['axis']}"
    elif source.kind == "masbench_gen":
        from masorch.masbench.suite import SuitePart, generate, jobs_for, parse_values

        part = SuitePart(source.axis, source.split, parse_values(source.values), source.count)
        for rec in generate(jobs_for(part.axis, part.counts(), part.split, source.seed)):
            yield rec["id"], rec["question"], rec["ground_truth"], "masbench", f"masbench/{rec['axis']}"
    elif source.kind == "dataset":
        from masorch.eval.datasets import get_spec, load

        if not source.name:
            raise UsageError("a dataset source needs a name", hint="name: aime24 (see masorch.eval.datasets)")
        spec = get_spec(source.name)
        for s in load(spec, seed=source.seed):
            if all(str(s.meta.get(k)) == v for k, v in source.where.items()):
                yield s.id, s.question, s.answer, spec.scorer, spec.data_source or spec.name
    else:
        raise UsageError(
            f"unknown prompt source kind {source.kind!r}", hint="use masbench, masbench_gen or dataset"
        )


def build_rows(
    sources: Iterable[SourceConfig],
    *,
    dom: DoM,
    dialect: Dialect,
    catalogue: Mapping[str, KindSignature],
    budget: Budget | None = None,
    prompt_examples: str | None = None,
) -> list[Row]:
    """The prompt rows of every source, in order, each source's first ``skip`` items left out and
    the rest cut to its ``limit``."""
    options = OrchestrateOptions(
        dom=DoM(dom), dialect=dialect, budget=budget or Budget(), prompt_examples=prompt_examples
    )
    rows: list[Row] = []
    for index, source in enumerate(sources):
        n = 0
        items = itertools.islice(_questions(source), source.skip, None)
        for rid, question, truth, scorer, data_source in items:
            if source.limit is not None and n >= source.limit:
                break
            messages = orchestrator_messages(question, catalogue, options)
            rows.append(
                {
                    "prompt": [{"role": m.role, "content": m.content} for m in messages],
                    "question": question,
                    "dom": options.dom.value,
                    "ground_truth": truth,
                    "scorer": source.scorer or scorer,
                    "data_source": data_source,
                    "id": rid,
                }
            )
            n += 1
        logger.info("prompt source %s: %d rows", source.kind, n)
        if n == 0:  # a misspelled `where` value or a skip past the end would silently shrink the data
            raise UsageError(
                f"prompt source {index + 1} ({_describe(source)}) gives no rows",
                hint="check its path or name, its `where` values and its skip and limit",
            )
    return rows


def _describe(source: SourceConfig) -> str:
    """A source in a few words, for an error message."""
    what = {"dataset": source.name, "masbench": source.path, "masbench_gen": source.axis}.get(source.kind)
    fields = [f"{source.kind} {what}" if what else source.kind]
    fields += [f"skip {source.skip}"] if source.skip else []
    fields += [f"where {source.where}"] if source.where else []
    return ", ".join(fields)
