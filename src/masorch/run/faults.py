"""Fault injection for the multi-round mode: some tool calls end ``EXEC_ERR`` or ``TIMEOUT`` on purpose.

Training an orchestrator to recover from failures needs trajectories in which failures happened.
Real ones are rare with a good sub-agent, so :class:`ToolFaults` makes a seeded share of the calls
that passed their checks fail instead of running: the call's units are spent, the sub-agent is
not called, and the orchestrator reads the same kind of ``tool`` message a real failure gives.
Three kinds: ``EXEC_ERR`` (a backend error), ``TIMEOUT`` (the node timeout) and ``FORMAT_DRIFT``
(the sub-agent's reply drifted from the answer format, so no answer could be read from it; the
call ends ``EXEC_ERR``, as a real unreadable reply does). The outcome is marked ``injected`` in
the trajectory's ``meta`` (never in the message the orchestrator reads), so data and statistics
can tell the two apart.

Whether a call fails is a pure function of the fault seed, the run's sampling seed, the question
and the call's node id, so a rerun (or a replay from the call cache) injects the same faults.

>>> f = ToolFaults(rate=1.0, kinds=("TIMEOUT",))
>>> f.draw("What is 2+2?", 0, "r1c1")
'TIMEOUT'
>>> ToolFaults(rate=0.0).draw("What is 2+2?", 0, "r1c1") is None
True
>>> fault_status("FORMAT_DRIFT")
'EXEC_ERR'
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal, get_args

from masorch.errors import UsageError
from masorch.run.trajectory import ToolStatus

#: The faults that can be injected.
FaultKind = Literal["EXEC_ERR", "TIMEOUT", "FORMAT_DRIFT"]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)


def fault_status(kind: FaultKind) -> ToolStatus:
    """The status a call ends with when ``kind`` is injected into it."""
    return "TIMEOUT" if kind == "TIMEOUT" else "EXEC_ERR"


@dataclass(frozen=True)
class ToolFaults:
    """Make a seeded share ``rate`` of a multi-round run's checked tool calls fail with one of ``kinds``.

    ``timeout_s`` is the limit a ``TIMEOUT`` message names (the run's ``node_timeout_s`` when it has
    one). ``max_per_run`` caps the faults of one run, so that a trajectory can still succeed.
    """

    rate: float = 0.0
    kinds: tuple[FaultKind, ...] = FAULT_KINDS
    seed: int = 0
    max_per_run: int | None = 2
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise UsageError(f"fault rate {self.rate} is not a probability", hint="use 0.0 <= rate <= 1.0")
        bad = [k for k in self.kinds if k not in FAULT_KINDS]
        if bad or (self.rate > 0 and not self.kinds):
            raise UsageError(
                f"fault kinds must be some of {list(FAULT_KINDS)}, got {list(self.kinds)}",
                hint="e.g. kinds: [EXEC_ERR, TIMEOUT, FORMAT_DRIFT]",
            )
        if self.max_per_run is not None and self.max_per_run < 0:
            raise UsageError("max_per_run must be >= 0 or null", hint="e.g. max_per_run: 2")

    def draw(self, question: str, run_seed: int | None, node: str) -> FaultKind | None:
        """The fault the call ``node`` of the run (``question``, ``run_seed``) fails with, or None."""
        if self.rate <= 0.0:
            return None
        key = f"{self.seed}\x1f{run_seed}\x1f{node}\x1f{question}".encode()
        digest = hashlib.sha256(key).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        if u >= self.rate:
            return None
        return self.kinds[digest[8] % len(self.kinds)]

    def error(self, kind: FaultKind, tool: str, node_timeout_s: float | None) -> str:
        """The error text of an injected failure: what a real one of that kind says."""
        if kind == "TIMEOUT":
            return f"node timed out after {node_timeout_s or self.timeout_s:g} s"
        if kind == "FORMAT_DRIFT":
            return (
                f"format_drift: the {tool} sub-agent's reply did not follow the answer format, "
                "so no answer could be read from it"
            )
        return f"backend_error: the {tool} sub-agent's model request failed: connection reset by peer"
