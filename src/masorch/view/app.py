"""The data endpoints of the viewer, without HTTP: a path and query in, a JSON-ready payload out.

``/api/info`` says what is viewed. An eval run has ``/api/run`` (the sample table), ``/api/report``
and ``/api/sample?key=KEY`` (one sample's record and trace); a trace file has ``/api/runs`` and
``/api/sample?run=RUN_ID``; a training run has ``/api/training`` and ``/api/samples?step=N``. Every
payload passes through :func:`~masorch.view.payload.clean`, so no credential in a URL reaches the page.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlsplit

from masorch.errors import MALFORMED_VALUE, MasorchError, UsageError
from masorch.view.evalrun import EvalRunView
from masorch.view.payload import clean
from masorch.view.sample import sample_view
from masorch.view.source import Source
from masorch.view.traces import TraceIndex
from masorch.view.training import step_samples, training_data

logger = logging.getLogger(__name__)


class NotFound(UsageError):
    """An endpoint or item the viewed path does not have."""


class ViewApp:
    """The endpoints of one viewed path (an eval run, a training run or a trace file)."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.eval = EvalRunView(source.path) if source.kind == "eval" else None
        self.traces = (
            self.eval.traces
            if self.eval is not None
            else TraceIndex(source.path)
            if source.kind == "trace"
            else None
        )

    def warm(self) -> None:
        """Build what the page asks for first, in its order: the table, the report, the trace index.

        The server runs this in a thread as it starts, so the index of a large ``traces.jsonl`` is
        built while the user looks at the table. A file it cannot read is logged here; the request
        for it reports the error to the page.
        """
        try:
            if self.eval is not None:
                self.eval.run()
                self.eval.report()
            if self.traces is not None:
                self.traces.refresh()
        except MasorchError as exc:
            logger.warning("%s: %s", self.source.path, exc.message)
        except MALFORMED_VALUE as exc:
            logger.warning("%s: %s", self.source.path, self._malformed(exc).message)

    def _malformed(self, exc: Exception) -> UsageError:
        """A value of the wrong type or range in the viewed files, as the error the page shows."""
        return UsageError(
            f"{self.source.path} holds a malformed value ({type(exc).__name__}: {str(exc)[:120]})",
            hint="the file was edited or corrupted; view a file masorch wrote",
        )

    def get(self, target: str) -> dict[str, Any]:
        """The payload of ``target`` (``/api/NAME?query``); an unknown one is :class:`NotFound`."""
        parts = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        handler = {
            "/api/info": self.info,
            "/api/run": self.run,
            "/api/report": self.report,
            "/api/runs": self.runs,
            "/api/sample": self.sample,
            "/api/training": self.training,
            "/api/samples": self.samples,
        }.get(parts.path)
        if handler is None:
            raise NotFound(f"no endpoint {parts.path}", hint="see /api/info")
        try:
            return clean(handler(query))
        except MALFORMED_VALUE as exc:
            raise self._malformed(exc) from None

    def info(self, query: Mapping[str, str]) -> dict[str, Any]:
        """What is viewed: its kind and name."""
        return {"kind": self.source.kind, "name": self.source.path.name, "path": str(self.source.path)}

    def run(self, query: Mapping[str, str]) -> dict[str, Any]:
        """An eval run's sample table."""
        if self.eval is None:
            raise NotFound("not an eval run", hint="/api/run is for eval run directories")
        return self.eval.run()

    def report(self, query: Mapping[str, str]) -> dict[str, Any]:
        """An eval run's report: accuracy with intervals, usage, paired differences per cell."""
        if self.eval is None:
            raise NotFound("not an eval run", hint="/api/report is for eval run directories")
        return self.eval.report()

    def runs(self, query: Mapping[str, str]) -> dict[str, Any]:
        """The runs of a trace file: id, question, mode, start time."""
        if self.traces is None:
            raise NotFound("no traces here", hint="/api/runs is for trace files and eval runs")
        return {"runs": [vars(r) for r in self.traces.runs()]}

    def sample(self, query: Mapping[str, str]) -> dict[str, Any]:
        """One sample (``key=`` of an eval run) or one run of a trace (``run=``): record and trace view."""
        if self.traces is None:
            raise NotFound("no traces here", hint="/api/sample is for trace files and eval runs")
        record = None
        run_id = query.get("run", "")
        if "key" in query:
            if self.eval is None:
                raise NotFound("no samples here", hint="use run= for a trace file")
            record = self.eval.record(query["key"])
            if record is None:
                raise NotFound(f"no sample {query['key']!r} in this run", hint="pick a row of the table")
            run_id = str(record.get("trace_id") or "")
        return {"record": record, "trace": sample_view(self.traces.events(run_id) if run_id else [])}

    def training(self, query: Mapping[str, str]) -> dict[str, Any]:
        """A training run's per-step series, report and evaluations."""
        if self.source.kind != "training":
            raise NotFound("not a training run", hint="/api/training is for training output_dirs")
        return training_data(self.source.path)

    def samples(self, query: Mapping[str, str]) -> dict[str, Any]:
        """The plans a training run sampled at one step (``step=N``)."""
        if self.source.kind != "training":
            raise NotFound("not a training run", hint="/api/samples is for training output_dirs")
        try:
            step = int(query.get("step", ""))
        except ValueError:
            raise NotFound("step= must be a step number", hint="see sample_steps in /api/training") from None
        return {"step": step, "samples": step_samples(self.source.path, step)}
