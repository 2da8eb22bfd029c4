"""Scoring inside the harness: one scorer per dataset (sync or async), each giving a :class:`Score`.

Dataset scorers come from the scorer registry of :mod:`masorch.score` (math-verify for math, EM/F1
for HotpotQA, an LLM judge); MASBench samples are graded by :mod:`masorch.score.masbench` (every
``\\boxed{}`` answer in order, all must match; per-position results and attack following kept).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from masorch.score.scorer import Score, get_scorer


class ScoredSample(Protocol):
    """What a scorer reads from a sample: the gold answer, the question and dataset fields."""

    @property
    def answer(self) -> str:
        """The gold answer."""
        ...

    @property
    def question(self) -> str:
        """The question."""
        ...

    @property
    def meta(self) -> Mapping[str, Any]:
        """Dataset-specific fields (MASBench: answers, decoys, axis, value)."""
        ...


MASBENCH_SCORERS = ("masbench", "masbench_final")
"""The MASBench gradings: every answer in order, or (the paper's) only the final one."""


class MasbenchScorer:
    """:func:`masorch.score.masbench.score_masbench` as a harness scorer over MASBench samples.

    The prediction is the full reply (several boxes for multi-answer axes); ``value`` is the
    per-position accuracy, ``correct`` needs every position.

    >>> from types import SimpleNamespace as S
    >>> s = S(answer="3<<horizon>>5", question="", meta={"answers": [3, 5], "decoys": [None, 9]})
    >>> v = MasbenchScorer().score(r"\\boxed{3} then \\boxed{5}", s)
    >>> v.correct, v.details["per_position"]
    (True, [True, True])
    >>> MasbenchScorer().score(r"\\boxed{3} \\boxed{9}", s).details["attack_followed"]
    True
    """

    #: Pure and fast: the harness calls it on the event loop instead of in a worker thread.
    inline = True

    def __init__(self, final_only: bool = False) -> None:
        #: ``masbench_final``: the paper's grading, only the last box against the last answer.
        self.final_only = final_only
        self.name = "masbench_final" if final_only else "masbench"

    def score(self, prediction: str, sample: ScoredSample) -> Score:
        """The verdict on ``prediction`` for a MASBench sample."""
        from masorch.score.masbench import parse_ground_truth, score_masbench

        answers = sample.meta.get("answers") or parse_ground_truth(sample.answer)
        decoys = sample.meta.get("decoys") or None
        attacked = sample.meta.get("attacked_answers")
        result = score_masbench(prediction, answers, decoys, attacked, final_only=self.final_only)
        return Score(
            correct=result.correct,
            value=result.position_accuracy,
            details={
                "predicted": list(result.predicted),
                "per_position": list(result.per_position),
                "first_failure": result.first_failure,
                "attack_followed": result.attack_followed,
                "n_boxes": result.n_boxes,
            },
        )


def scorer_names() -> tuple[str, ...]:
    """Every scorer name :func:`make_scorer` knows: ``masbench``, ``masbench_final`` and the registry's."""
    from masorch.score.scorer import SCORERS

    return (*MASBENCH_SCORERS, *SCORERS)


def make_scorer(name: str, **options: Any) -> Any:
    """A scorer by name: ``masbench`` (here) or any name of the :mod:`masorch.score` registry."""
    if name in MASBENCH_SCORERS:
        return MasbenchScorer(final_only=name == "masbench_final")
    if name == "llm_judge" and isinstance(options.get("model"), str):
        # A model string travels to Ray workers; the backend is built in the process that scores.
        from masorch.backends.registry import make_backend

        backend = make_backend(options["model"])
        options = {k: v for k, v in options.items() if k != "model"} | {"backend": backend}
    return get_scorer(name, **options)
