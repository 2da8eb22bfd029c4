"""``masorch view PATH --html OUT.html``: the page and its data in one self-contained file.

The file embeds the same payloads the server's endpoints return, keyed as the page asks for them,
with the scripts and styles inlined, so it opens from disk anywhere, offline. An eval run embeds the
report, the whole sample table and the traces of its first :data:`MAX_EXPORT_SAMPLES` samples in
table order (the page says when a sample's trace is not in the file); a trace file its first
:data:`MAX_EXPORT_SAMPLES` runs; a training run its series and the plans sampled at its last
:data:`MAX_EXPORT_SAMPLES` steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from masorch.errors import UsageError
from masorch.files import atomic_writer
from masorch.view.app import ViewApp
from masorch.view.page import render_page
from masorch.view.payload import to_json

#: The most samples (or trace runs) whose traces one exported file embeds.
MAX_EXPORT_SAMPLES = 200


def data_key(endpoint: str, params: dict[str, str] | None = None) -> str:
    """The key of one payload in the exported data: the endpoint, and its parameters as compact JSON.

    The page builds the same key (``JSON.stringify``) to find a payload.

    >>> data_key("/api/sample", {"key": "s|d|1"})
    '/api/sample|{"key":"s|d|1"}'
    """
    if not params:
        return endpoint
    return f"{endpoint}|{json.dumps(params, ensure_ascii=False, separators=(',', ':'))}"


def _get(app: ViewApp, endpoint: str, params: dict[str, str]) -> dict[str, Any]:
    return app.get(f"{endpoint}?{urlencode(params)}")


def export_data(app: ViewApp, *, max_samples: int = MAX_EXPORT_SAMPLES) -> dict[str, Any]:
    """Every payload the page needs for ``app``'s path, keyed by :func:`data_key`."""
    data: dict[str, Any] = {data_key("/api/info"): {**app.get("/api/info"), "static": True}}
    kind = app.source.kind
    if kind == "eval":
        run = app.get("/api/run")
        data[data_key("/api/run")] = run
        data[data_key("/api/report")] = app.get("/api/report")
        key_col = run["columns"].index("key")
        for row in run["rows"][:max_samples]:
            params = {"key": row[key_col]}
            data[data_key("/api/sample", params)] = _get(app, "/api/sample", params)
    elif kind == "trace":
        runs = app.get("/api/runs")
        data[data_key("/api/runs")] = runs
        for entry in runs["runs"][:max_samples]:
            params = {"run": entry["run_id"]}
            data[data_key("/api/sample", params)] = _get(app, "/api/sample", params)
    else:
        training = app.get("/api/training")
        data[data_key("/api/training")] = training
        for step in training["sample_steps"][-max_samples:]:
            params = {"step": str(step)}
            data[data_key("/api/samples", params)] = _get(app, "/api/samples", params)
    return data


def export_html(app: ViewApp, out: Path, *, max_samples: int = MAX_EXPORT_SAMPLES) -> Path:
    """Write the one-file page of ``app``'s path to ``out``; returns ``out``.

    An existing ``out`` is replaced only when it is a page (``.html``, ``.htm``) and not the file
    being viewed: a run's log or trace is never overwritten by its own page.
    """
    if out.exists() and (
        out.resolve() == app.source.path.resolve() or out.suffix.lower() not in (".html", ".htm")
    ):
        raise UsageError(
            f"--html {out} would overwrite a file that is not a page written by masorch view",
            hint="give --html a new file name ending in .html",
        )
    page = render_page(app.source.path.name, data_json=to_json(export_data(app, max_samples=max_samples)))
    try:
        with atomic_writer(out, "w") as fh:
            fh.write(page)
    except OSError as exc:
        raise UsageError(
            f"cannot write {out}: {exc.strerror or exc}", hint="give --html a writable path"
        ) from None
    return out
