"""The record of one finished sample in a run log: typed, versioned, the same JSON field names as ever.

:class:`EvalRecord` is built in one place for a scored run and for a harness failure, written as one
``log.jsonl`` line by :meth:`EvalRecord.to_json`, and read back (old logs included: a line without
``version`` has the layout of version 1) by :meth:`EvalRecord.from_json`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The layout of a sample record; a line written before the field existed has this layout too.
RECORD_VERSION = 1


@dataclass(frozen=True)
class EvalRecord:
    """One system on one sample: what it answered, how it was graded, what it spent, where it ran.

    ``status`` is the run's status (``ok``, ``error``, ``timeout``, ``budget``, ``invalid_plan``) or
    ``failed`` when the harness could not run or grade it; ``correct``/``score``/``details`` are the
    scorer's verdict (False/0.0/{} without one). ``axis``/``value`` are MASBench's (None elsewhere).
    ``rounds``, ``units``, ``tool_statuses`` (calls per status), ``tools_ran`` (calls per sub-agent
    tool that ran), ``rounds_without_calls`` (turns with no readable call), ``undelivered_calls``
    (:attr:`masorch.run.trajectory.Trajectory.undelivered_calls`), ``ended_by`` and ``final_call``
    (the orchestrator's own ``final_answer`` was accepted) describe a multi-round run (None / 0.0 /
    {} / {} / None / None / "" / None for the other systems, and in older logs).

    >>> r = EvalRecord(key="s|d|1", system="s", dataset="d", sample_id="1", status="ok", gold="4")
    >>> EvalRecord.from_json({**r.to_json(), "type": "sample"}) == r
    True
    >>> "version" in r.to_json() and EvalRecord.from_json({"key": "k"}).version
    1
    """

    key: str
    system: str = ""
    dataset: str = ""
    sample_id: str = ""
    axis: str | None = None
    value: int | None = None
    status: str = ""
    answer: str = ""
    gold: str = ""
    correct: bool = False
    score: float = 0.0
    details: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    wall_s: float = 0.0
    trace_id: str = ""
    plan_kinds: list[str] = field(default_factory=list)
    rounds: int | None = None
    units: float = 0.0
    tool_statuses: Mapping[str, int] = field(default_factory=dict)
    tools_ran: Mapping[str, int] = field(default_factory=dict)
    rounds_without_calls: int | None = None
    undelivered_calls: int | None = None
    ended_by: str = ""
    final_call: bool | None = None
    #: LLM calls of the run whose reply stopped at its token cap (None: a record from before the count)
    truncated_calls: int | None = None
    worker: str = ""
    finished_at: float = field(default_factory=time.time)
    version: int = RECORD_VERSION

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object (the ``log.jsonl`` field names)."""
        out = dataclasses.asdict(self)
        out["details"] = dict(self.details)
        out["tool_statuses"] = dict(self.tool_statuses)
        out["tools_ran"] = dict(self.tools_ran)
        return out

    @property
    def own_final_answer(self) -> bool:
        """Whether the orchestrator's own ``final_answer`` call was accepted (``final_call``; in a log
        from before that field, whether the run ended on it).

        >>> EvalRecord(key="k", ended_by="final_answer").own_final_answer
        True
        """
        return self.ended_by == "final_answer" if self.final_call is None else self.final_call

    def valid_calls(self) -> tuple[int, int]:
        """A rounds run's well-formed orchestrator calls and all its calls: ``(good, total)``.

        Every call with an outcome counts (its status is in ``tool_statuses``) and is good unless
        ``FORMAT_ERR`` or ``REJECTED``; each undelivered call (unreadable, or a turn with no readable
        call) counts as one bad call, as training's protocol reward counts them; the orchestrator's own
        accepted ``final_answer`` (``final_call``) counts as one good call. ``(0, 0)`` for a record
        that is not a rounds run.

        >>> r = EvalRecord(key="k", rounds=2, tool_statuses={"OK": 3, "FORMAT_ERR": 1},
        ...                undelivered_calls=1, final_call=True)
        >>> r.valid_calls()
        (4, 6)
        >>> EvalRecord(key="old", rounds=1, tool_statuses={"OK": 1}, rounds_without_calls=1,
        ...            ended_by="final_answer").valid_calls()  # a log from before the two counts
        (2, 3)
        """
        if self.rounds is None:
            return 0, 0
        bad = self.tool_statuses.get("FORMAT_ERR", 0) + self.tool_statuses.get("REJECTED", 0)
        # A log from before the two counts: its turns without a readable call, its final_answer end.
        undelivered = (
            self.rounds_without_calls or 0 if self.undelivered_calls is None else self.undelivered_calls
        )
        total = sum(self.tool_statuses.values()) + undelivered + int(self.own_final_answer)
        return total - bad - undelivered, total

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EvalRecord:
        """A record from a log line; fields it does not know (``type``) are left out."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
