"""Execution: the async dataflow executor, budgets, and the orchestration modes."""
