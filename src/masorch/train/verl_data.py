"""Prompt rows in verl's parquet layout: ``data_source``, chat ``prompt``, ``reward_model``, ``extra_info``.

The ``prompt`` is the orchestrator's chat (system + user, with the DoM), not the bare question: the
policy being trained is the orchestrator. ``extra_info`` carries what the reward needs to execute
and grade a sampled plan (``question``, ``dom``, ``scorer``) and where the row came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from masorch.train.data import Row


def verl_row(row: Row, index: int, split: str, agent_name: str | None = None) -> dict[str, Any]:
    """One training row as verl reads it; ``agent_name`` picks the agent loop that plays it
    (``masorch_rounds``: :mod:`masorch.train.verl_agent_loop`).

    >>> r = verl_row({"prompt": [{"role": "user", "content": "Q?"}], "question": "Q?", "dom": "low",
    ...               "ground_truth": "3", "scorer": "masbench", "data_source": "masbench/depth",
    ...               "id": "x"}, 0, "train")
    >>> r["reward_model"], r["extra_info"]["dom"]
    ({'style': 'rule', 'ground_truth': '3'}, 'low')
    """
    out = {
        "data_source": row["data_source"],
        "prompt": row["prompt"],
        "ability": "orchestration",
        "reward_model": {"style": "rule", "ground_truth": str(row["ground_truth"])},
        "extra_info": {
            "index": index,
            "split": split,
            "id": row["id"],
            "question": row["question"],
            "dom": row["dom"],
            "scorer": row["scorer"],
        },
    }
    if agent_name is not None:
        out["agent_name"] = agent_name
    return out


def _schema(agent_name: bool) -> Any:
    import pyarrow as pa

    message = pa.struct([("role", pa.string()), ("content", pa.string())])
    info = pa.struct(
        [
            ("index", pa.int64()),
            ("split", pa.string()),
            ("id", pa.string()),
            ("question", pa.string()),
            ("dom", pa.string()),
            ("scorer", pa.string()),
        ]
    )
    fields = [
        ("data_source", pa.string()),
        ("prompt", pa.list_(message)),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", info),
    ]
    return pa.schema([*fields, ("agent_name", pa.string())] if agent_name else fields)


def write_parquet(rows: Sequence[Row], path: Path, split: str, *, agent_name: str | None = None) -> int:
    """Write ``rows`` as a verl parquet file (with an ``agent_name`` column where given); return
    how many rows were written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    records = [verl_row(r, i, split, agent_name) for i, r in enumerate(rows)]
    table = pa.Table.from_pylist(records, schema=_schema(agent_name is not None))
    pq.write_table(table, path)
    return table.num_rows
