"""The plans sampled at each training step: ``<output_dir>/samples.jsonl``, one line per executed plan.

:class:`SampleLog` is the ``on_batch`` hook of :class:`~masorch.train.rewards.PlanRewards`: each time
a batch of completions is executed it appends one line per plan (the step, the question, the DoM,
the plan text and what running it gave), flushed at once, so ``masorch view`` can show what the
policy wrote at every step, while it trains.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from masorch.train.rollout import PlanOutcome, RolloutItem

SAMPLES_FILE = "samples.jsonl"


class SampleLog:
    """Appends each executed batch's plans to a JSONL file (thread-safe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def __call__(
        self, step: int | None, items: Sequence[RolloutItem], outcomes: Sequence[PlanOutcome]
    ) -> None:
        """Write one line per (item, outcome) of the batch executed at ``step``."""
        lines = "".join(
            json.dumps(
                {
                    "step": step,
                    "question": item.question,
                    "dom": item.dom.value,
                    "plan": item.plan_text,
                    "valid": out.valid,
                    "status": out.status,
                    "answer": out.answer,
                    "error": out.error,
                    "agents": out.n_agents,
                    "calls": out.calls,
                    "tokens": out.tokens,
                    "wall_s": round(out.wall_s, 3),
                    "codes": list(out.codes),
                },
                ensure_ascii=False,
            )
            + "\n"
            for item, out in zip(items, outcomes, strict=True)
        )
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(lines)
