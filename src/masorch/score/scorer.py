"""The scorer contract: a :class:`Score` result, the :class:`Scorer` protocols, and the name registry."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from masorch.errors import UsageError


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
    """Anything with a gold ``answer`` and its ``question`` (e.g. ``masorch.eval.datasets.Sample``)."""

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


def _math(**kwargs: Any) -> Scorer:
    from masorch.score.math import MathScorer

    return MathScorer(**kwargs)


def _exact(**kwargs: Any) -> Scorer:
    from masorch.score.qa import ExactMatchScorer

    return ExactMatchScorer(**kwargs)


def _f1(**kwargs: Any) -> Scorer:
    from masorch.score.qa import F1Scorer

    return F1Scorer(**kwargs)


def _llm_judge(**kwargs: Any) -> AsyncScorer:
    from masorch.score.llm_judge import LLMJudgeScorer

    return LLMJudgeScorer(**kwargs)


SCORERS: Mapping[str, Callable[..., Scorer | AsyncScorer]] = MappingProxyType(
    {"math": _math, "exact": _exact, "f1": _f1, "llm_judge": _llm_judge}
)


def get_scorer(name: str, **options: Any) -> Scorer | AsyncScorer:
    """A new scorer by registry name (``math``, ``exact``, ``f1``, ``llm_judge``) built with ``options``.

    >>> get_scorer("exact").score("The Beatles", type("S", (), {"answer": "beatles"})()).correct
    True
    """
    try:
        factory = SCORERS[name]
    except KeyError:
        raise UsageError(
            f"unknown scorer '{name}'", hint=f"choose one of: {', '.join(SCORERS)}", code="unknown_scorer"
        ) from None
    try:
        return factory(**options)
    except TypeError as exc:
        raise UsageError(
            f"bad options for scorer '{name}': {exc}",
            hint="see the scorer's class docstring",
            code="bad_argument",
        ) from exc
