"""Budget checks before every call and the ledger's totals."""

from __future__ import annotations

import pytest

from masorch.errors import BudgetExceeded, UsageError
from masorch.run.budget import Budget, CallRecord, Ledger


def rec(tokens: int = 10, cost: float = 0.0, node: str | None = "a", role="subagent") -> CallRecord:
    return CallRecord(role, node, "scripted:x", prompt_tokens=tokens, completion_tokens=0, cost=cost)


def test_call_budget_counts_calls_in_flight():
    ledger = Ledger(Budget(max_calls=2))
    ledger.check_before_call()
    ledger.check_before_call()  # two in flight: both reserved
    with pytest.raises(BudgetExceeded, match="2 of 2 calls"):
        ledger.check_before_call()
    ledger.record(rec())
    with pytest.raises(BudgetExceeded):
        ledger.check_before_call()
    assert ledger.in_flight == 1


def test_tokens_refused_only_once_spent_reaches_the_limit():
    ledger = Ledger(Budget(max_tokens=20))
    ledger.check_before_call()
    ledger.record(rec(19))
    ledger.check_before_call()  # 19 < 20: allowed
    ledger.record(rec(5))
    assert ledger.exhausted() == "token budget spent: 24 of 20 tokens used"
    with pytest.raises(BudgetExceeded):
        ledger.check_before_call()


def test_cost_and_wall_budgets():
    ledger = Ledger(Budget(max_cost=0.01))
    ledger.check_before_call()
    ledger.record(rec(cost=0.01))
    with pytest.raises(BudgetExceeded, match="cost budget"):
        ledger.check_before_call()

    now = [100.0]
    timed = Ledger(Budget(max_wall_s=5), clock=lambda: now[0])
    timed.check_before_call()
    timed.record(rec())
    now[0] = 105.0
    with pytest.raises(BudgetExceeded, match=r"time budget spent: 5\.00 s of 5 s"):
        timed.check_before_call()


def test_unlimited_by_default_and_totals():
    ledger = Ledger()
    for node, role in [("a", "subagent"), ("b", "subagent"), (None, "orchestrator")]:
        ledger.check_before_call()
        ledger.record(rec(7, 0.5, node, role))
    assert ledger.totals().calls == 3 and ledger.totals().total_tokens == 21
    assert ledger.for_node("a").calls == 1
    assert ledger.for_role("orchestrator").cost == 0.5
    assert Budget().describe() == "unlimited"
    assert Budget(max_calls=3, max_tokens=100).describe() == "3 calls, 100 tokens"


def test_negative_limit_is_a_usage_error():
    with pytest.raises(UsageError):
        Budget(max_calls=-1)
