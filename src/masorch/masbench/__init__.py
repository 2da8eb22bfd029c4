"""MASBench: a generator of five-axis, exactly-solvable multi-agent benchmark tasks.

Public API: :func:`generate_instance` (one record), :data:`PAPER_SUITE` and :func:`generate` (many),
:func:`write_records` / :func:`read_records` (JSONL and verl parquet), :func:`solve_text` (the
independent text evaluator) and :func:`check_records` (the audit behind ``masorch bench check``).
"""

from masorch.masbench.axes import CONTROLS, generate_instance
from masorch.masbench.check import CheckReport, check_records, stats
from masorch.masbench.evaluator import EvaluationError, TextSolution, solve_text
from masorch.masbench.export import read_records, verl_row, write_records
from masorch.masbench.instance import AXES, GENERATOR_VERSION
from masorch.masbench.suite import PAPER_SUITE, SuitePart, generate, jobs_for, parse_values

__all__ = [
    "AXES",
    "CONTROLS",
    "GENERATOR_VERSION",
    "PAPER_SUITE",
    "CheckReport",
    "EvaluationError",
    "SuitePart",
    "TextSolution",
    "check_records",
    "generate",
    "generate_instance",
    "jobs_for",
    "parse_values",
    "read_records",
    "solve_text",
    "stats",
    "verl_row",
    "write_records",
]
