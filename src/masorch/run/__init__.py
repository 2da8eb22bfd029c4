"""Execution: one run path (:func:`run` with a :class:`System` in an :class:`Environment`), the
async dataflow executor, budgets, and the orchestration modes."""

from masorch.run.budget import Budget, CallRecord, Ledger
from masorch.run.environment import Environment, EnvSpec
from masorch.run.executor import Executor, RoleBackends, run_plan
from masorch.run.lifecycle import run
from masorch.run.orchestrate import OrchestrateOptions, orchestrate
from masorch.run.result import RunResult
from masorch.run.rounds import RoundsOptions, run_rounds
from masorch.run.system import System

__all__ = [
    "Budget",
    "CallRecord",
    "EnvSpec",
    "Environment",
    "Executor",
    "Ledger",
    "OrchestrateOptions",
    "RoleBackends",
    "RoundsOptions",
    "RunResult",
    "System",
    "orchestrate",
    "run",
    "run_plan",
    "run_rounds",
]
