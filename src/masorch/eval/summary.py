"""The numbers of a report: per-cell accuracy with bootstrap intervals, usage means, paired differences.

:func:`summarize` turns log records into a :class:`Summary`; :mod:`masorch.eval.report` renders it
as markdown and :mod:`masorch.eval.plots` as figures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from masorch.eval.metrics import ALPHA, N_BOOT, Interval, bootstrap_mean, mean, paired_difference

#: The system modes compared with the best single-agent system of a table (one-step plans, rounds).
MULTI_AGENT_MODES = ("mas", "rounds")


@dataclass(frozen=True)
class CellStats:
    """One system on one table cell (a dataset, or one value of one axis of it)."""

    system: str
    dataset: str
    value: int | None
    accuracy: Interval
    score: float
    calls: float
    tokens: float
    cost: float
    wall_s: float
    statuses: Mapping[str, int] = field(default_factory=dict)
    #: Share of the LLM calls whose reply stopped at its token cap (None: no record counted them).
    truncated: float | None = None
    #: Samples that ended ok but whose scorer could not decide (e.g. a math comparison that timed
    #: out): counted wrong, as the scoring rule says, and shown so that the count is not silent.
    undecided: int = 0
    #: The axis of ``value`` (None for the whole dataset).
    axis: str | None = None

    @property
    def n(self) -> int:
        """Samples finished."""
        return self.accuracy.n

    @property
    def not_ok(self) -> int:
        """Samples whose run did not end ok (error, timeout, budget, invalid_plan, failed)."""
        return sum(c for s, c in self.statuses.items() if s != "ok")


@dataclass(frozen=True)
class PairedStats:
    """A MAS system minus the best SAS system on the samples both finished in one cell."""

    dataset: str
    value: int | None
    mas: str
    sas: str
    diff: Interval
    #: The axis of ``value`` (None for the whole dataset).
    axis: str | None = None


@dataclass(frozen=True)
class RoundsStats:
    """What a multi-round system's runs did in one dataset: rounds, tools, statuses, how they ended."""

    system: str
    dataset: str
    n: int
    rounds: float
    tools: Mapping[str, int]
    statuses: Mapping[str, int]
    ended_by: Mapping[str, int]


@dataclass(frozen=True)
class Summary:
    """Everything the report shows: cell statistics, paired differences, expected sample counts."""

    systems: tuple[str, ...]
    datasets: tuple[str, ...]
    cells: tuple[CellStats, ...]
    paired: tuple[PairedStats, ...]
    expected: Mapping[str, int]
    #: Each MASBench dataset's axis, ``"mixed"`` where it has several (each cell names its own).
    axes: Mapping[str, str]
    rounds: tuple[RoundsStats, ...] = ()

    def cell(
        self, system: str, dataset: str, value: int | None = None, axis: str | None = None
    ) -> CellStats | None:
        """The statistics of one cell (``axis`` is needed only where the dataset has several), or
        None when the log has no such cell (a system's whole-dataset cell is there, over no samples
        where none finished)."""
        return next(
            (
                c
                for c in self.cells
                if (c.system, c.dataset, c.value) == (system, dataset, value)
                and (axis is None or c.axis == axis)
            ),
            None,
        )


def _undecided(record: Mapping[str, Any]) -> bool:
    """Whether the scorer could not decide the record's verdict (it counts as wrong).

    >>> _undecided({"details": {"undecided": True}}), _undecided({"details": {}}), _undecided({})
    (True, False, False)
    """
    return bool((record.get("details") or {}).get("undecided"))


#: A cell's key: system, dataset, axis and value (axis and value None for the whole dataset).
_Key = tuple[str, str, str | None, int | None]


def _cell(key: _Key, recs: Sequence[Mapping[str, Any]], **kw: Any) -> CellStats:
    system, dataset, axis, value = key
    correct = [1.0 if r.get("correct") else 0.0 for r in recs]
    return CellStats(
        system=system,
        dataset=dataset,
        value=value,
        axis=axis,
        undecided=sum(_undecided(r) for r in recs),
        accuracy=bootstrap_mean(correct, **kw),
        score=mean([float(r.get("score") or 0.0) for r in recs]),
        calls=mean([float(r.get("calls") or 0) for r in recs]),
        tokens=mean([float((r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)) for r in recs]),
        cost=mean([float(r.get("cost") or 0.0) for r in recs]),
        wall_s=mean([float(r.get("wall_s") or 0.0) for r in recs]),
        statuses=dict(Counter(str(r.get("status")) for r in recs)),
        truncated=_truncated(recs),
    )


def _truncated(recs: Sequence[Mapping[str, Any]]) -> float | None:
    """The share of calls cut at their token cap, over the records that counted them.

    >>> _truncated([{"calls": 4, "truncated_calls": 1}, {"calls": 1, "truncated_calls": 0}, {"calls": 3}])
    0.2
    >>> _truncated([{"calls": 3}]) is None
    True
    """
    counted = [r for r in recs if r.get("truncated_calls") is not None]
    calls = sum(int(r.get("calls") or 0) for r in counted)
    return sum(int(r["truncated_calls"]) for r in counted) / calls if calls else None


def _rounds(system: str, dataset: str, recs: Sequence[Mapping[str, Any]]) -> RoundsStats | None:
    """The rounds figures of a system's records in one dataset (None: no rounds run among them)."""
    runs = [r for r in recs if r.get("rounds") is not None]
    if not runs:
        return None
    tools: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    for r in runs:
        tools.update(r.get("tools_ran") or {})
        statuses.update(r.get("tool_statuses") or {})
    return RoundsStats(
        system=system,
        dataset=dataset,
        n=len(runs),
        rounds=mean([float(r["rounds"]) for r in runs]),
        tools=dict(tools.most_common()),
        statuses=dict(statuses.most_common()),
        ended_by=dict(Counter(str(r.get("ended_by") or r.get("status")) for r in runs).most_common()),
    )


def summarize(
    header: Mapping[str, Any],
    records: Sequence[Mapping[str, Any]],
    *,
    n_boot: int = N_BOOT,
    alpha: float = ALPHA,
    seed: int = 0,
) -> Summary:
    """The statistics of a run's records (last record per key) under its header."""
    kw: dict[str, Any] = {"n_boot": n_boot, "alpha": alpha, "seed": seed}
    # Records arrive in finish order, which varies between runs (and between local and Ray): sort
    # them so that the bootstrap sees the same sequence, and the report is a function of the content.
    records = sorted(records, key=lambda r: (str(r["dataset"]), str(r["sample_id"]), str(r["system"])))
    systems = [s["name"] for s in header.get("systems", [])]
    modes = {s["name"]: s.get("mode") for s in header.get("systems", [])}
    datasets = [d["name"] for d in header.get("datasets", [])]
    for r in records:  # records of systems or datasets the header does not list still show up
        if r["system"] not in systems:
            systems.append(r["system"])
        if r["dataset"] not in datasets:
            datasets.append(r["dataset"])
    # every system gets a whole-dataset cell, over no samples where none finished: a row, not a gap
    groups: dict[_Key, list[Mapping[str, Any]]] = {(s, d, None, None): [] for d in datasets for s in systems}
    axes: dict[str, str] = {}
    for r in records:
        groups[(r["system"], r["dataset"], None, None)].append(r)
        if r.get("axis") is not None and r.get("value") is not None:
            axes[r["dataset"]] = str(r["axis"]) if axes.get(r["dataset"], r["axis"]) == r["axis"] else "mixed"
            # keyed by axis and value: one file may hold several axes with the same values
            groups.setdefault((r["system"], r["dataset"], str(r["axis"]), int(r["value"])), []).append(r)
    cells = [_cell(key, recs, **kw) for key, recs in groups.items()]
    cells.sort(
        key=lambda c: (
            datasets.index(c.dataset),
            c.axis is not None,
            c.axis or "",
            -1 if c.value is None else c.value,
            systems.index(c.system),
        )
    )
    paired = []
    for dataset in datasets:
        slices = sorted({(c.axis, c.value) for c in cells if c.dataset == dataset and c.axis is not None})
        for axis, value in [(None, None), *slices]:
            here = [c for c in cells if c.dataset == dataset and (c.axis, c.value) == (axis, value)]
            sas = [c for c in here if modes.get(c.system) == "sas" and c.n > 0]
            if not sas:
                continue
            best = max(sas, key=lambda c: (c.accuracy.mean, -systems.index(c.system)))
            for c in here:
                if modes.get(c.system) not in MULTI_AGENT_MODES:
                    continue
                a = {r["sample_id"]: r for r in groups[(c.system, dataset, axis, value)]}
                b = {r["sample_id"]: r for r in groups[(best.system, dataset, axis, value)]}
                shared = [k for k in a if k in b]
                diff = paired_difference(
                    [1.0 if a[k].get("correct") else 0.0 for k in shared],
                    [1.0 if b[k].get("correct") else 0.0 for k in shared],
                    **kw,
                )
                paired.append(PairedStats(dataset, value, c.system, best.system, diff, axis))
    expected = {d["name"]: int(d.get("n", 0)) for d in header.get("datasets", [])}
    rounds = [_rounds(s, d, recs) for (s, d, axis, _), recs in groups.items() if axis is None]
    kept = tuple(r for r in rounds if r is not None)
    return Summary(tuple(systems), tuple(datasets), tuple(cells), tuple(paired), expected, axes, kept)
