"""The one scorer contract, shared by the eval harness and the training rewards.

A scorer grades a prediction against a sample's gold answer and returns a :class:`Score`. It has a
``name`` and a ``score(prediction, sample)`` method, sync (:class:`Scorer`: pure and thread-safe) or
async (:class:`AsyncScorer`: an LLM judge); callers await either kind through :func:`score_async`,
the one way eval and training grade. The scorers by name live in :mod:`masorch.score.registry`.

A scorer may declare ``all_or_nothing = True`` (MASBench): as a reward its verdict counts as
``correct`` 0/1, not the partial ``value`` (:func:`reward_value`). What text is graded (the whole
reply or the extracted answer) goes by the scorer's name: :func:`masorch.score.registry.reads_reply`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Score:
    """The verdict on one prediction: ``correct``, a numeric ``value`` in [0, 1], and how it was reached.

    ``details`` holds scorer-specific facts (the extracted answer, the method, F1 precision/recall, an
    error or timeout) so that a report can show why an answer was judged as it was.
    """

    correct: bool
    value: float
    details: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)


class HasAnswer(Protocol):
    """Anything with a gold ``answer`` and its ``question`` (e.g. ``masorch.eval.datasets.Sample``).

    A scorer that needs dataset fields (MASBench: answers, decoys) reads an optional ``meta`` mapping.
    """

    @property
    def answer(self) -> str:
        """The gold answer."""
        ...

    @property
    def question(self) -> str:
        """The question the answer belongs to."""
        ...


@runtime_checkable
class Scorer(Protocol):
    """Scores a prediction against a sample's gold answer; safe to call from several threads."""

    @property
    def name(self) -> str:
        """The registry name of this scorer."""
        ...

    def score(self, prediction: str, sample: HasAnswer) -> Score:
        """The score of ``prediction`` for ``sample``."""
        ...


@runtime_checkable
class AsyncScorer(Protocol):
    """A scorer that awaits something (an LLM judge): ``await score(prediction, sample)``."""

    @property
    def name(self) -> str:
        """The registry name of this scorer."""
        ...

    async def score(self, prediction: str, sample: HasAnswer) -> Score:
        """The score of ``prediction`` for ``sample``."""
        ...


async def score_async(scorer: Scorer | AsyncScorer, prediction: str, sample: HasAnswer) -> Score:
    """Score with either kind of scorer from async code.

    A sync scorer runs in a worker thread, unless it declares ``inline = True`` (pure and fast: it runs
    on the event loop).
    """
    if inspect.iscoroutinefunction(scorer.score):
        result: Score = await scorer.score(prediction, sample)
        return result
    sync_score: Callable[[str, HasAnswer], Score] = scorer.score  # type: ignore[assignment]
    if getattr(scorer, "inline", False):
        return sync_score(prediction, sample)
    return await asyncio.to_thread(sync_score, prediction, sample)


def reward_value(scorer: Scorer | AsyncScorer, verdict: Score) -> float:
    """The reward a verdict is worth: its ``value``, or ``correct`` as 0/1 for an all-or-nothing scorer.

    >>> reward_value(type("S", (), {"all_or_nothing": True})(), Score(False, 0.5))
    0.0
    """
    if getattr(scorer, "all_or_nothing", False):
        return 1.0 if verdict.correct else 0.0
    return float(verdict.value)
