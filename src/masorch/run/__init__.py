"""Execution: the async dataflow executor, budgets, and the orchestration modes."""

from masorch.run.budget import Budget, CallRecord, Ledger
from masorch.run.executor import Executor, RoleBackends, run_plan
from masorch.run.orchestrate import OrchestrateOptions, orchestrate
from masorch.run.result import RunResult
from masorch.run.rounds import RoundsOptions, run_rounds

__all__ = [
    "Budget",
    "CallRecord",
    "Executor",
    "Ledger",
    "OrchestrateOptions",
    "RoleBackends",
    "RoundsOptions",
    "RunResult",
    "orchestrate",
    "run_plan",
    "run_rounds",
]
