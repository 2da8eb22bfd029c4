"""The reward components bound to plan execution, shaped as TRL reward functions.

:class:`PlanRewards` owns a :class:`~masorch.train.rollout.PlanExecutor` and a
:class:`~masorch.train.rollout.LoopThread`. Each component it hands out is a sync
``(completions, **columns) -> list[float | None]`` function named after the component, so TRL logs
``rewards/<name>/mean`` for every one of them at every step, whatever its weight. All components
of one batch share one execution per completion: the first component called executes the batch
(concurrently) and caches the outcomes for the step; the others read the cache.

Rows must carry the columns ``question``, ``dom``, ``ground_truth`` and ``scorer``
(:mod:`masorch.train.data` builds them).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from masorch.errors import UsageError
from masorch.plan import DoM
from masorch.train.reward_components import COMPONENTS, DEFAULT_WEIGHTS, CostTarget, completion_text
from masorch.train.rollout import LoopThread, PlanExecutor, PlanOutcome, RolloutItem, outcome_columns

logger = logging.getLogger(__name__)

RewardFunc = Callable[..., list[float | None]]
_Key = tuple[str, str, str]


@dataclass(frozen=True)
class BatchSummary:
    """Per-batch plan statistics, logged beside the reward components."""

    valid_rate: float
    ok_rate: float
    agents_per_plan: float
    calls_per_plan: float
    tokens_per_plan: float
    exec_s_per_plan: float

    @staticmethod
    def of(outcomes: Sequence[PlanOutcome]) -> BatchSummary:
        """The statistics of a batch of outcomes (means over all plans; agents over valid ones)."""
        n = max(1, len(outcomes))
        valid = [o for o in outcomes if o.valid]
        return BatchSummary(
            valid_rate=len(valid) / n,
            ok_rate=sum(o.status == "ok" for o in outcomes) / n,
            agents_per_plan=sum(o.n_agents for o in valid) / max(1, len(valid)),
            calls_per_plan=sum(o.calls for o in outcomes) / n,
            tokens_per_plan=sum(o.tokens for o in outcomes) / n,
            exec_s_per_plan=sum(o.wall_s for o in outcomes) / n,
        )

    def metrics(self) -> dict[str, float]:
        """The statistics as ``plan/<name>`` metrics."""
        return {f"plan/{k}": float(v) for k, v in self.__dict__.items()}


#: Called with the step, the plans and their outcomes each time a batch is executed (e.g. a SampleLog).
BatchHook = Callable[[int | None, Sequence[RolloutItem], Sequence[PlanOutcome]], None]


class PlanRewards:
    """Reward components over executed plans, with one execution per completion per step.

    ``weights`` maps component names (:data:`masorch.train.reward_components.COMPONENTS`) to weights; the
    default is the paper's (correctness only). Components with weight 0 are still computed and
    logged. ``cache_size`` bounds the outcome cache when no trainer state says which step it is;
    ``on_batch`` sees every executed batch (:class:`~masorch.train.samples.SampleLog` keeps the plans).
    """

    def __init__(
        self,
        executor: PlanExecutor,
        *,
        weights: Mapping[str, float] | None = None,
        cost_target: CostTarget | None = None,
        cache_size: int = 4096,
        loop: LoopThread | None = None,
        on_batch: BatchHook | None = None,
    ) -> None:
        merged = dict(DEFAULT_WEIGHTS)
        for name, w in (weights or {}).items():
            if name not in COMPONENTS:
                raise UsageError(
                    f"unknown reward component {name!r}", hint=f"use some of: {', '.join(COMPONENTS)}"
                )
            merged[name] = float(w)
        self.weights: dict[str, float] = merged
        self.executor = executor
        self.cost_target = cost_target or CostTarget()
        self._cache: OrderedDict[_Key, PlanOutcome] = OrderedDict()
        self._cache_size = cache_size
        self._step: int | None = None
        self._own_loop = loop is None
        self.loop = loop or LoopThread()
        #: one summary per executed batch, in order (also sent to the trainer's ``log_metric``)
        self.history: list[BatchSummary] = []
        self.on_batch = on_batch

    # -- execution, cached per step ---------------------------------------------------------------

    def outcomes(
        self,
        completions: Sequence[Any],
        question: Sequence[str],
        dom: Sequence[str],
        *,
        step: int | None = None,
        log_metric: Callable[[str, float], None] | None = None,
    ) -> list[PlanOutcome]:
        """The outcome of each completion, executing (concurrently) only those not cached yet."""
        if step is not None and step != self._step:
            self._cache.clear()
            self._step = step
        keys = [
            (q, str(d).lower(), completion_text(c))
            for c, q, d in zip(completions, question, dom, strict=True)
        ]
        missing = [k for k in dict.fromkeys(keys) if k not in self._cache]
        if missing:
            items = [RolloutItem(q, text, DoM(d)) for q, d, text in missing]
            fresh = self.loop.run(self.executor.run_group(items))
            for k, o in zip(missing, fresh, strict=True):
                self._cache[k] = o
            if self.on_batch is not None:
                self.on_batch(self._step, items, fresh)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            batch = [self._cache[k] for k in keys]
            summary = BatchSummary.of(batch)
            self.history.append(summary)
            if log_metric is not None:
                for name, value in summary.metrics().items():
                    log_metric(name, value)
            return batch
        return [self._cache[k] for k in keys]

    def score(self, name: str, completions: Sequence[Any], **columns: Any) -> list[float | None]:
        """Component ``name`` for a batch: executes (or reuses) the plans, then grades them."""
        if name not in COMPONENTS:
            raise UsageError(
                f"unknown reward component {name!r}", hint=f"use one of: {', '.join(COMPONENTS)}"
            )
        for col in ("question", "dom"):
            if col not in columns:
                raise UsageError(
                    f"the reward needs a {col!r} column", hint="build prompts with masorch.train.data"
                )
        state = columns.pop("trainer_state", None)
        step = getattr(state, "global_step", None)
        log_metric = columns.pop("log_metric", None)
        if name in ("validity", "dom"):
            # Pure on the text: no execution needed, same catalogue and limits as the executor.
            return COMPONENTS[name](
                completions,
                catalogue=self.executor.catalogue,
                limits=self.executor.settings.limits,
                dialect=self.executor.settings.dialect,
                **columns,
            )
        outs = self.outcomes(
            completions, columns["question"], columns["dom"], step=step, log_metric=log_metric
        )
        merged = {**columns, **outcome_columns(outs)}
        if name == "cost":
            return COMPONENTS[name](completions, target=self.cost_target, **merged)
        return COMPONENTS[name](completions, **merged)

    # -- the trainer-facing view ------------------------------------------------------------------

    def reward_funcs(self) -> list[RewardFunc]:
        """One sync reward function per component, correctness first (so it executes the batch)."""
        return [self._func(name) for name in COMPONENTS]

    def reward_weights(self) -> list[float]:
        """The weights of :meth:`reward_funcs`, in the same order."""
        return [self.weights[name] for name in COMPONENTS]

    def _func(self, name: str) -> RewardFunc:
        def reward(completions: Sequence[Any], **columns: Any) -> list[float | None]:
            return self.score(name, completions, **columns)

        reward.__name__ = name
        reward.__qualname__ = f"PlanRewards.{name}"
        reward.__doc__ = (COMPONENTS[name].__doc__ or "").splitlines()[0]
        return reward

    def combined(self, completions: Sequence[Any], **columns: Any) -> list[float]:
        """The weighted sum of all components (None counts as 0), as a trainer without weights needs."""
        total = [0.0] * len(completions)
        for name in COMPONENTS:
            w = self.weights[name]
            values = self.score(name, completions, **dict(columns))
            if w:
                total = [t + w * (v or 0.0) for t, v in zip(total, values, strict=True)]
        return total

    def close(self) -> None:
        """Close the sub-agent backends on the rollout loop, then the loop if this object made it."""
        seen: set[int] = set()
        backends = [self.executor.backends.subagent, *self.executor.backends.per_kind.values()]
        if self.executor.backends.judge is not None:
            backends.append(self.executor.backends.judge)
        for b in backends:
            if id(b) not in seen:
                seen.add(id(b))
                self.loop.run(b.aclose())
        if self._own_loop:
            self.loop.close()
