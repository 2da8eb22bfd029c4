"""What a run returns: its status, answer, each node's output, usage, ledger and diagnostics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from masorch.agents.base import NodeOutput
from masorch.backends.base import Usage
from masorch.plan.model import Plan
from masorch.run.budget import Ledger
from masorch.run.trajectory import Trajectory
from masorch.score.extract import as_box

RunStatus = Literal["ok", "error", "timeout", "budget", "invalid_plan"]


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run.

    ``answer`` is set only when ``status`` is ok. ``error`` explains any other status (the first
    node that failed, the budget or deadline that stopped the run). ``diagnostics`` are the plan
    diagnostics (``Diagnostic`` objects of :mod:`masorch.plan`): the rejection reasons when the
    status is ``invalid_plan``, else any warnings. ``usage`` includes the orchestrator's calls.
    ``plan_text`` is the orchestrator's last plan text and ``plan`` what was read from it (in the
    multi-round mode: the calls that ran, as nodes). ``trajectory`` is the multi-round mode's
    record of rounds, calls and conversation (None in the other modes).
    """

    status: RunStatus
    answer: str = ""
    node_results: Mapping[str, NodeOutput] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    ledger: Ledger | None = None
    wall_s: float = 0.0
    diagnostics: Sequence[Any] = ()
    error: str = ""
    plan_text: str = ""
    plan: Plan | None = None
    run_id: str = ""
    trajectory: Trajectory | None = None

    @property
    def ok(self) -> bool:
        """True when the run produced an answer."""
        return self.status == "ok"

    @property
    def reply(self) -> str:
        """The plan's single sink node's whole reply (every boxed answer in it), else the run's answer.

        What a scorer that reads whole replies (MASBench: several boxes) grades, in eval and in
        training alike. A multi-round run's reply is its final answer (its calls are not a
        dataflow), boxed unless it already holds boxes, as a sub-agent's reply would be.
        """
        if self.trajectory is not None:
            return as_box(self.answer)
        plan = self.plan
        if plan is not None and plan.agents:
            sources = {f.src for f in plan.flows}
            sinks = [a.id for a in plan.agents if a.id not in sources]
            if len(sinks) == 1 and sinks[0] in self.node_results:
                rationale = self.node_results[sinks[0]].rationale
                if rationale:
                    return rationale
        return self.answer
