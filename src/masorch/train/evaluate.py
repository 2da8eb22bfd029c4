"""The before/after evaluation of an orchestrator: valid-plan rate and accuracy on held-out rows.

Each held-out row's orchestrator prompt (the one :func:`masorch.run.orchestrate.orchestrator_messages`
renders, as in training) goes to the orchestrator once, greedily, with no repair: what the model
does on its own. The plan is then checked and executed by the same
:class:`~masorch.train.rollout.PlanExecutor` as during training (same sub-agents, DoM and per-plan
limits) and graded with the row's scorer. Planning is kept outside the per-plan deadline, so a
slow orchestrator on a busy CPU is not counted as a timed-out plan. Larger evaluations of a trained
checkpoint go through ``masorch eval`` (:mod:`masorch.eval.harness`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from masorch.backends.base import Backend, GenerateConfig, Message
from masorch.plan import DoM
from masorch.score.rewards import answer_correctness
from masorch.train.rollout import PlanExecutor, RolloutItem


@dataclass(frozen=True)
class EvalSummary:
    """Held-out figures of one orchestrator: how many rows, valid-plan rate, accuracy, plan size."""

    n: int
    valid_rate: float
    accuracy: float
    agents_per_plan: float
    calls_per_plan: float
    statuses: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return asdict(self)


async def evaluate_rows(
    rows: Sequence[dict[str, Any]],
    *,
    orchestrator: Backend,
    executor: PlanExecutor,
    max_plan_tokens: int,
) -> EvalSummary:
    """Plan each row greedily, run all plans concurrently, grade them."""
    config = GenerateConfig(temperature=0.0, max_tokens=max_plan_tokens)

    async def plan(row: dict[str, Any]) -> str:
        messages = [Message(m["role"], m["content"]) for m in row["prompt"]]
        return (await orchestrator.complete(messages, config)).text

    texts = await asyncio.gather(*(plan(r) for r in rows))
    items = [RolloutItem(r["question"], t, DoM(r["dom"])) for r, t in zip(rows, texts, strict=True)]
    outcomes = await executor.run_group(items)
    scores = answer_correctness(
        texts,
        status=[o.status for o in outcomes],
        answer=[o.answer for o in outcomes],
        ground_truth=[r["ground_truth"] for r in rows],
        scorer=[r["scorer"] for r in rows],
        question=[r["question"] for r in rows],
    )
    n = max(1, len(outcomes))
    statuses: dict[str, int] = {}
    for o in outcomes:
        statuses[o.status] = statuses.get(o.status, 0) + 1
    valid = [o for o in outcomes if o.valid]
    return EvalSummary(
        n=len(outcomes),
        valid_rate=len(valid) / n,
        accuracy=sum(s or 0.0 for s in scores) / n,
        agents_per_plan=sum(o.n_agents for o in valid) / max(1, len(valid)),
        calls_per_plan=sum(o.calls for o in outcomes) / n,
        statuses=statuses,
    )
