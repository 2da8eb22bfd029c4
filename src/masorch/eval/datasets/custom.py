"""Samples from a user's rows: question/answer columns (names configurable), or MASBench release rows.

Pure functions of the rows. :func:`row_kind` tells the layouts apart by their columns:

* ``masbench_release`` - the official MASBench release (``Salesforce/MASBench`` on the hub, one
  config per axis): string columns ``prompt_json`` (the chat prompt), ``reward_model_json``
  (``{"ground_truth": "a1<<horizon>>a2..."}``), ``extra_info_json``, ``axis``, ``value``, ``data``;
* ``masbench`` - a record written by ``masorch bench make`` (``ground_truth`` and ``answers``);
* ``plain`` - anything else: a question column and an answer column (:class:`FieldMap`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from masorch.errors import UsageError
from masorch.eval.datasets.types import Sample
from masorch.masbench.instance import SEPARATOR

RowKind = Literal["plain", "masbench", "masbench_release"]


@dataclass(frozen=True)
class FieldMap:
    """Which columns of a plain data file hold the question, the gold answer and (optionally) the id.

    ``id`` None uses an ``id`` column where there is one, else the row number (from 0).
    """

    question: str = "question"
    answer: str = "answer"
    id: str | None = None


def row_kind(row: Mapping[str, Any]) -> RowKind:
    """The layout of a data row.

    >>> row_kind({"prompt_json": "[]", "reward_model_json": "{}"}), row_kind({"question": "q", "answer": "a"})
    ('masbench_release', 'plain')
    """
    if "prompt_json" in row and "reward_model_json" in row:
        return "masbench_release"
    if "ground_truth" in row and "answers" in row:
        return "masbench"
    return "plain"


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and value != value):  # missing, or NaN from parquet
        return None
    text = str(value).strip()
    return text or None


def plain_samples(
    rows: Sequence[Mapping[str, Any]], fields: FieldMap, dataset: str, where: str
) -> list[Sample]:
    """Samples of question/answer rows; ``meta`` keeps the row's other columns.

    A row without a question or answer, or two rows with one id, is a UsageError naming the row.

    >>> [s.id for s in plain_samples([{"q": "2+2?", "a": 4}], FieldMap("q", "a"), "mine", "f.csv")]
    ['mine/0']
    """
    id_field = fields.id or ("id" if rows and "id" in rows[0] else None)
    samples: list[Sample] = []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        values = {}
        for role, column in (("question", fields.question), ("answer", fields.answer)):
            values[role] = _text(row.get(column))
            if values[role] is None:
                raise UsageError(
                    f"{where} row {index}: no {role} in column {column!r}"
                    + ("" if column in row else f" (columns: {', '.join(map(str, list(row)[:20]))})"),
                    hint=f"name the {role} column with --{role}-field, or fill in the row",
                    code="data_field",
                )
        raw_id = _text(row.get(id_field)) if id_field else str(index)
        if raw_id is None:
            raise UsageError(f"{where} row {index}: no id in column {id_field!r}", hint="fill in every id")
        sample_id = f"{dataset}/{raw_id}"
        if sample_id in seen:
            raise UsageError(
                f"{where} row {index}: the id {raw_id!r} is used twice",
                hint="ids must be unique (results are keyed by them); fix the ids or leave out --id-field",
                code="data_field",
            )
        seen.add(sample_id)
        used = {fields.question, fields.answer, id_field}
        meta = {str(k): v for k, v in row.items() if k not in used}
        samples.append(Sample(sample_id, str(values["question"]), str(values["answer"]), dataset, meta))
    return samples


def _json_column(row: Mapping[str, Any], column: str, where: str) -> Any:
    value = row.get(column)
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        raise UsageError(
            f"{where}: the column {column} is not JSON", hint="is it a file of the MASBench release?"
        ) from None


def release_sample(row: Mapping[str, Any], dataset: str, index: int, where: str) -> Sample:
    """A row of the official MASBench release as a sample graded by the ``masbench`` scorer.

    The question is the prompt's last user message; the gold answer the reward model's
    ``ground_truth`` (``a1<<horizon>>a2...``), whose integers also go to ``meta["answers"]``.

    >>> row = {"prompt_json": '[{"role": "user", "content": "Q?"}]', "axis": "horizon", "value": "2",
    ...        "reward_model_json": '{"ground_truth": "3<<horizon>>17"}', "extra_info_json": "{}"}
    >>> s = release_sample(row, "hf:Salesforce/MASBench:horizon:test", 7, "row 7")
    >>> s.id, s.question, s.answer, s.meta["answers"]
    ('horizon/2/7', 'Q?', '3<<horizon>>17', [3, 17])
    """
    prompt = _json_column(row, "prompt_json", where)
    reward = _json_column(row, "reward_model_json", where)
    messages = prompt if isinstance(prompt, list) else []
    users = [m.get("content") for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
    question = _text(users[-1]) if users else None
    truth = _text(reward.get("ground_truth")) if isinstance(reward, Mapping) else None
    if question is None or truth is None:
        raise UsageError(
            f"{where}: no user message in prompt_json or no ground_truth in reward_model_json",
            hint="is it a file of the MASBench release?",
            code="data_field",
        )
    try:
        answers = [int(part) for part in truth.split(SEPARATOR)]
    except ValueError:
        raise UsageError(
            f"{where}: the ground truth {truth[:60]!r} is not integers joined by {SEPARATOR}",
            hint="the masbench scorer grades integer answers; pick another scorer with --scorer",
            code="data_field",
        ) from None
    extra = _json_column(row, "extra_info_json", where) if "extra_info_json" in row else None
    axis, value = row.get("axis"), row.get("value")
    cell = [str(part) for part in (axis, value) if part is not None]  # "combine" rows have no value
    return Sample(
        id="/".join([*cell, str(index)]),
        question=question,
        answer=truth,
        dataset=dataset,
        meta={"axis": axis, "value": value, "data": row.get("data"), "extra_info": extra, "answers": answers},
    )
