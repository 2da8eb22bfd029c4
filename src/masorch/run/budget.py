"""Run budgets (calls, tokens, cost, wall time) and the ledger that records every LLM call.

Semantics of :meth:`Ledger.check_before_call`, run before every call (orchestrator, sub-agent
and judge alike), in this order:

* **calls** - a call is refused when ``started + 1 > max_calls``, where ``started`` counts the
  calls already recorded *and* those in flight. A passed check reserves the slot, so concurrent
  nodes can never start more than ``max_calls`` calls between them.
* **tokens** - the size of the next completion is unknown before it is made, so a call is refused
  when the prompt + completion tokens of the recorded calls already reach ``max_tokens``
  (``spent >= max``). Calls in flight when the limit is reached still finish, so the total may end
  above ``max_tokens`` by at most what those calls use.
* **cost** - likewise: refused when the recorded cost already reaches ``max_cost`` dollars.
* **wall time** - refused when the time since the ledger started reaches ``max_wall_s``. This is a
  budget (no new calls), not a deadline: calls in flight are not interrupted (the executor's
  deadline does that).

Every condition is monotonic: once a check fails, every later check fails, so "the budget is
spent" is a stable state (:meth:`Ledger.exhausted`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from masorch.backends.base import Usage
from masorch.errors import BudgetExceeded

CallRole = Literal["orchestrator", "subagent", "judge"]
CallStatus = Literal["ok", "error", "cancelled"]


@dataclass(frozen=True)
class Budget:
    """Limits of one run; ``None`` means unlimited. See the module docstring for the exact checks."""

    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    max_wall_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_calls", "max_tokens", "max_cost", "max_wall_s"):
            value = getattr(self, name)
            if value is not None and not (0 <= value < math.inf):  # NaN fails both comparisons
                from masorch.errors import UsageError

                raise UsageError(
                    f"budget {name} must be a finite number >= 0, got {value}", hint="use None for no limit"
                )

    def describe(self) -> str:
        """A short human-readable summary, e.g. ``'20 calls, 50000 tokens'`` or ``'unlimited'``."""
        parts = []
        if self.max_calls is not None:
            parts.append(f"{self.max_calls} calls")
        if self.max_tokens is not None:
            parts.append(f"{self.max_tokens} tokens")
        if self.max_cost is not None:
            parts.append(f"${self.max_cost:g}")
        if self.max_wall_s is not None:
            parts.append(f"{self.max_wall_s:g} s")
        return ", ".join(parts) if parts else "unlimited"


@dataclass(frozen=True)
class CallRecord:
    """One LLM call as the ledger saw it. ``attempts`` counts the backend's own retries."""

    role: CallRole
    node: str | None
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost: float = 0.0
    cached: bool = False
    attempts: int = 1
    status: CallStatus = "ok"
    error: str = ""

    @property
    def usage(self) -> Usage:
        """This call's usage (one call)."""
        return Usage(self.prompt_tokens, self.completion_tokens, 1, self.cost)


class Ledger:
    """Records every call of a run and enforces a :class:`Budget` before each new one.

    Every passed :meth:`check_before_call` must be followed by exactly one :meth:`record` (the
    call gate does this in a ``finally``), which releases the reserved slot.
    """

    def __init__(self, budget: Budget | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget = budget or Budget()
        self._clock = clock
        self._start = clock()
        self._entries: list[CallRecord] = []
        self._in_flight = 0
        self._tokens = 0
        self._cost = 0.0

    @property
    def entries(self) -> tuple[CallRecord, ...]:
        """Every recorded call, in the order it finished."""
        return tuple(self._entries)

    @property
    def in_flight(self) -> int:
        """Calls that passed the check and are not recorded yet."""
        return self._in_flight

    @property
    def elapsed_s(self) -> float:
        """Seconds since the ledger (the run) started."""
        return self._clock() - self._start

    def exhausted(self) -> str | None:
        """Why no further call may start (a stable state), or None while the budget allows one."""
        b = self.budget
        started = len(self._entries) + self._in_flight
        if b.max_calls is not None and started + 1 > b.max_calls:
            return f"call budget spent: {started} of {b.max_calls} calls made"
        if b.max_tokens is not None and self._tokens >= b.max_tokens:
            return f"token budget spent: {self._tokens} of {b.max_tokens} tokens used"
        if b.max_cost is not None and self._cost >= b.max_cost:
            return f"cost budget spent: ${self._cost:.4f} of ${b.max_cost:g}"
        if b.max_wall_s is not None:
            elapsed = self.elapsed_s
            if elapsed >= b.max_wall_s:
                return f"time budget spent: {elapsed:.2f} s of {b.max_wall_s:g} s"
        return None

    def check_before_call(self) -> None:
        """Raise :class:`BudgetExceeded` if the next call is not allowed; else reserve its slot."""
        reason = self.exhausted()
        if reason is not None:
            raise BudgetExceeded(
                reason, hint="raise the budget (--budget-calls, --budget-tokens, --budget-cost) or simplify"
            )
        self._in_flight += 1

    def record(self, entry: CallRecord) -> None:
        """Record a finished (or failed) call and release the slot its check reserved."""
        if self._in_flight > 0:
            self._in_flight -= 1
        self._entries.append(entry)
        self._tokens += entry.prompt_tokens + entry.completion_tokens
        self._cost += entry.cost

    def totals(self, entries: Iterable[CallRecord] | None = None) -> Usage:
        """Summed usage of all recorded calls (or of ``entries``)."""
        total = Usage()
        for e in self._entries if entries is None else entries:
            total = total + e.usage
        return total

    def for_node(self, node: str) -> Usage:
        """Summed usage of the calls made on behalf of one node."""
        return self.totals(e for e in self._entries if e.node == node)

    def for_role(self, role: CallRole) -> Usage:
        """Summed usage of the calls of one role."""
        return self.totals(e for e in self._entries if e.role == role)
