"""The scorers by name: ``masbench``, ``masbench_final``, ``math``, ``exact``, ``f1``, ``llm_judge``.

Each name builds a scorer of the :mod:`masorch.score.scorer` contract; eval datasets and training
rows name their scorer, so both grade with the same object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from masorch.errors import UsageError
from masorch.score.extract import as_box
from masorch.score.scorer import AsyncScorer, Scorer


def _masbench(**kwargs: Any) -> Scorer:
    from masorch.score.masbench import MasbenchScorer

    return MasbenchScorer(**kwargs)


def _masbench_final(**kwargs: Any) -> Scorer:
    from masorch.score.masbench import MasbenchScorer

    return MasbenchScorer(final_only=True, **kwargs)


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

    if isinstance(kwargs.get("model"), str):
        # A model string travels (to Ray workers); the backend is built in the process that scores.
        from masorch.backends.registry import make_backend

        backend = make_backend(kwargs.pop("model"))
        kwargs["backend"] = backend
    return LLMJudgeScorer(**kwargs)


SCORERS: Mapping[str, Callable[..., Scorer | AsyncScorer]] = MappingProxyType(
    {
        "masbench": _masbench,
        "masbench_final": _masbench_final,
        "math": _math,
        "exact": _exact,
        "f1": _f1,
        "llm_judge": _llm_judge,
    }
)


#: Other names users reach for: ``em`` (exact match) and ``judge``.
ALIASES: Mapping[str, str] = MappingProxyType({"em": "exact", "judge": "llm_judge"})


def canonical_scorer(name: str) -> str:
    """The registry name of scorer ``name`` (an alias resolved); an unknown name is a UsageError.

    >>> canonical_scorer("em"), canonical_scorer("f1")
    ('exact', 'f1')
    """
    name = ALIASES.get(name, name)
    if name not in SCORERS:
        raise UsageError(
            f"unknown scorer {name[:40]!r}",
            hint=f"choose one of: {', '.join(SCORERS)} (aliases: {', '.join(ALIASES)})",
            code="unknown_scorer",
        )
    return name


def get_scorer(name: str, **options: Any) -> Scorer | AsyncScorer:
    """A new scorer by registry name (:data:`SCORERS`, or an alias) built with ``options``.

    ``llm_judge`` takes a ``backend``, or a ``model`` string built into one here.

    >>> get_scorer("em").score("The Beatles", type("S", (), {"answer": "beatles"})()).correct
    True
    """
    name = canonical_scorer(name)
    factory = SCORERS[name]
    try:
        return factory(**options)
    except TypeError as exc:
        raise UsageError(
            f"bad options for scorer '{name}': {exc}",
            hint="see the scorer's class docstring",
            code="bad_argument",
        ) from exc


def scorer_names() -> tuple[str, ...]:
    """Every scorer name :func:`get_scorer` knows."""
    return tuple(SCORERS)


#: The scorers that grade the sink node's whole reply (every box) rather than the extracted answer.
REPLY_SCORERS = frozenset({"masbench", "masbench_final"})


def reads_reply(name: str) -> bool:
    """True when the scorer ``name`` grades the sink's whole reply (eval and training both ask this).

    >>> reads_reply("masbench"), reads_reply("math")
    (True, False)
    """
    return name in REPLY_SCORERS


#: The scorers whose verdict is a function of the graded text alone (no model is asked): a logged
#: run can be graded again by them for nothing (:func:`masorch.eval.item.regrade`).
PURE_SCORERS = frozenset({"masbench", "masbench_final", "math", "exact", "f1"})


def graded_text(name: str, answer: str, reply: str | None = None) -> str:
    """What the scorer ``name`` grades of a run, in eval, collection and training alike.

    A reply scorer (:func:`reads_reply`) grades the whole ``reply`` (every box), or the run's
    ``answer`` as one box when there is no reply; the others grade the extracted ``answer`` itself
    (the math scorer reads a bare formula whole: ``\\frac{13}{3}`` is not 3).

    >>> graded_text("masbench", "17"), graded_text("math", "17", reply="so \\boxed{17}")
    ('\\\\boxed{17}', '17')
    """
    if reads_reply(name):
        return reply if reply is not None else as_box(answer)
    return answer
