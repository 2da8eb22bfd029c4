"""Grading a logged run again (a resumed eval, a rerun collection): what changes and what is kept."""

from __future__ import annotations

from typing import Any

from masorch.eval.datasets import Sample
from masorch.eval.item import regrade
from masorch.run.environment import Environment, EnvSpec
from masorch.score.scorer import Score


class FixedScorer:
    """A scorer whose every verdict is ``score``; it counts its calls."""

    def __init__(self, name: str, score: Score) -> None:
        self.name, self.result, self.calls = name, score, 0

    def score(self, prediction: str, sample: Any) -> Score:
        self.calls += 1
        return self.result


def env_of(scorer: FixedScorer) -> Environment:
    return Environment(EnvSpec(scorer_factory=lambda name, **_: scorer))


SAMPLE = Sample("m/0", "q", "3", "math")
LOGGED = {"status": "ok", "answer": r"\frac{13}{3}", "correct": True, "score": 1.0, "rounds": 3}


async def test_a_changed_verdict_is_a_new_record_that_keeps_the_old_one() -> None:
    scorer = FixedScorer("math", Score(False, 0.0, {"method": "math_verify"}))
    again = await regrade(dict(LOGGED, details={"method": "string"}), SAMPLE, "math", env_of(scorer))
    assert again is not None and (again["correct"], again["score"]) == (False, 0.0)
    assert again["regraded"] == {"correct": True, "score": 1.0, "details": {"method": "string"}}
    assert again["answer"] == LOGGED["answer"] and again["rounds"] == 3


async def test_verdicts_that_stand_or_cannot_be_asked_again_are_kept() -> None:
    right = FixedScorer("math", Score(True, 1.0, {}))
    assert await regrade(dict(LOGGED), SAMPLE, "math", env_of(right)) is None  # it stands
    undecided = FixedScorer("math", Score(False, 0.0, {"error": "timed out after 10s", "undecided": True}))
    assert await regrade(dict(LOGGED), SAMPLE, "math", env_of(undecided)) is None
    judge = FixedScorer("llm_judge", Score(False, 0.0, {}))
    assert await regrade(dict(LOGGED), SAMPLE, "judge", env_of(judge)) is None
    assert judge.calls == 0  # a judge model is not asked again
    plan_run = dict(LOGGED, rounds=None)  # a plan's whole reply is not logged
    masbench = FixedScorer("masbench", Score(False, 0.0, {}))
    assert await regrade(plan_run, SAMPLE, "masbench", env_of(masbench)) is None and masbench.calls == 0
    assert await regrade(dict(LOGGED, status="timeout"), SAMPLE, "math", env_of(right)) is None
