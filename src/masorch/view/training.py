"""A training run directory (``masorch train grpo``) as page data: per-step series and the evaluations.

``log.jsonl`` has one line per trainer log (step, wall time, loss, reward, each reward component's
mean, the ``plan/*`` figures: valid-plan rate, agents and calls per plan); ``samples.jsonl`` one line
per plan the policy sampled and the reward executed (step, question, plan text, outcome);
``report.json`` the steps, time per step and the before/after evaluation. A run still training has
no report yet and its logs may end in a torn line: both are fine.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from masorch.files import iter_jsonl, json_object, read_text
from masorch.train.grpo import LOG_FILE, REPORT_FILE
from masorch.train.samples import SAMPLES_FILE

#: The series drawn first, in this order (any other numeric key follows, sorted).
MAIN_SERIES = (
    "reward",
    "rewards/correctness/mean",
    "plan/valid_rate",
    "rewards/validity/mean",
    "rewards/dom/mean",
    "rewards/cost/mean",
    "plan/ok_rate",
    "plan/agents_per_plan",
    "plan/calls_per_plan",
    "loss",
)
#: The before/after evaluation directories a training run writes (each an eval run directory).
EVAL_DIRS = ("eval_before", "eval_after")
_HINT = "a training log has one JSON object per trainer log line (is this a `masorch train grpo` output_dir?)"


def is_training_dir(directory: Path) -> bool:
    """Whether ``directory`` looks like a training output_dir (a report, sampled plans, or step lines)."""
    if (directory / REPORT_FILE).is_file() or (directory / SAMPLES_FILE).is_file():
        return True
    log = directory / LOG_FILE
    if not log.is_file():
        return False
    for _, line in iter_jsonl(log, what="training log", hint=_HINT, complete_only=True):
        return "step" in line and line.get("type") != "header"
    return False


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def training_data(directory: Path) -> dict[str, Any]:
    """``{"steps", "series", "summary", "report", "evals", "sample_steps"}`` of a training run now."""
    steps: list[int] = []
    series: dict[str, list[float | None]] = {}
    summary: dict[str, Any] = {}
    log = directory / LOG_FILE
    lines = iter_jsonl(log, what="training log", hint=_HINT, complete_only=True) if log.is_file() else []
    for _, line in lines:
        if "loss" not in line and "reward" not in line:
            summary.update(line)  # the trainer's closing line (train_runtime, train_loss, ...)
            continue
        for name, value in line.items():
            if name not in ("step", "wall_s") and _number(value) is not None and name not in series:
                series[name] = [None] * len(steps)
        steps.append(int(line.get("step") or len(steps) + 1))
        for name, values in series.items():
            values.append(_number(line.get(name)))
    ordered = [n for n in MAIN_SERIES if n in series] + sorted(n for n in series if n not in MAIN_SERIES)
    report = None
    if (directory / REPORT_FILE).is_file():
        where = str(directory / REPORT_FILE)
        report = json_object(read_text(where, what="training report"), where, hint=_HINT)
        report.pop("logs", None)  # the same lines as log.jsonl
    return {
        "steps": steps,
        "series": {n: series[n] for n in ordered},
        "summary": summary,
        "report": report,
        "evals": [name for name in EVAL_DIRS if (directory / name / "log.jsonl").is_file()],
        "sample_steps": list(dict.fromkeys(s["step"] for s in _samples(directory))),
    }


def _samples(directory: Path) -> Iterator[dict[str, Any]]:
    path = directory / SAMPLES_FILE
    if path.is_file():
        for _, line in iter_jsonl(path, what="sampled plans", hint=_HINT, complete_only=True):
            yield line


def step_samples(directory: Path, step: int) -> list[dict[str, Any]]:
    """The plans sampled (and executed) at ``step``, in the order they were logged."""
    return [s for s in _samples(directory) if s.get("step") == step]
