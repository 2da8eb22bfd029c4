"""What a run returns: its status, answer, each node's output, usage, ledger and diagnostics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from masorch.agents.base import NodeOutput
from masorch.backends.base import Usage
from masorch.plan.model import Plan
from masorch.run.budget import Ledger

RunStatus = Literal["ok", "error", "timeout", "budget", "invalid_plan"]


@dataclass(frozen=True)
class RunResult:
    """The outcome of one run.

    ``answer`` is set only when ``status`` is ok. ``error`` explains any other status (the first
    node that failed, the budget or deadline that stopped the run). ``diagnostics`` are the plan
    diagnostics (``Diagnostic`` objects of :mod:`masorch.plan`): the rejection reasons when the
    status is ``invalid_plan``, else any warnings. ``usage`` includes the orchestrator's calls.
    ``plan_text`` is the orchestrator's last plan text and ``plan`` what was read from it.
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

    @property
    def ok(self) -> bool:
        """True when the run produced an answer."""
        return self.status == "ok"
