"""HotpotQA-style scoring: normalisation, exact match, token F1, and the scorer registry."""

from __future__ import annotations

import inspect

import pytest

from masorch.backends import ScriptedBackend
from masorch.errors import UsageError
from masorch.eval.datasets import Sample
from masorch.score.qa import ExactMatchScorer, F1Scorer, extract_short_answer, f1_parts, normalize_answer
from masorch.score.registry import SCORERS, get_scorer
from masorch.score.scorer import AsyncScorer, Score, Scorer


def gold(answer: str) -> Sample:
    return Sample("q", "a question", answer, "hotpotqa")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Beatles", "beatles"),
        ("  An  apple, a day!  ", "apple day"),
        ("U.S.A.", "usa"),
        ("Theatre of the Absurd", "theatre of absurd"),
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_f1_hand_computed():
    # pred tokens: [new, york, city]; gold: [new, york]; common 2 -> P = 2/3, R = 1, F1 = 0.8
    f1, precision, recall = f1_parts("New York City", "the New York")
    assert (precision, recall) == pytest.approx((2 / 3, 1.0))
    assert f1 == pytest.approx(0.8)
    # pred [a b c d] vs gold [c d e]: articles only "a" dropped -> pred [b c d]; common 2: P 2/3, R 2/3
    assert f1_parts("a b c d", "c d e")[0] == pytest.approx(2 / 3)
    assert f1_parts("Paris", "London") == (0.0, 0.0, 0.0)


def test_yes_no_only_match_themselves():
    assert f1_parts("yes", "no") == (0.0, 0.0, 0.0)
    assert f1_parts("yes it is", "yes") == (0.0, 0.0, 0.0)
    assert f1_parts("Yes.", "yes") == (1.0, 1.0, 1.0)


def test_exact_and_f1_scorers():
    em = ExactMatchScorer()
    assert em.score("Reasoning...\nAnswer: The Eiffel Tower", gold("Eiffel Tower")) == Score(True, 1.0)
    assert em.score("Eiffel Tower, Paris", gold("Eiffel Tower")).value == 0.0
    f1 = F1Scorer()
    result = f1.score("Final answer: Eiffel Tower, Paris", gold("Eiffel Tower"))
    assert not result.correct
    assert result.value == pytest.approx(0.8)  # P = 2/3, R = 1
    assert (
        result.details["precision"] == pytest.approx(2 / 3)
        and result.details["extracted"] == "Eiffel Tower, Paris"
    )
    assert F1Scorer(extract=False).score("answer: x", gold("x")).value == pytest.approx(2 / 3)


def test_extract_short_answer_takes_the_last_answer_line():
    assert extract_short_answer("Answer: first\nthinking\nFinal Answer: second") == "second"
    assert extract_short_answer("just this") == "just this"


def test_registry():
    assert set(SCORERS) == {"masbench", "masbench_final", "math", "exact", "f1", "llm_judge"}
    assert isinstance(get_scorer("f1"), Scorer)
    assert get_scorer("exact", extract=False).score("answer: x", gold("x")).value == 0.0
    math = get_scorer("math", isolation="thread")
    assert isinstance(math, Scorer) and math.name == "math"
    with pytest.raises(UsageError, match="unknown scorer 'bleu'"):
        get_scorer("bleu")
    with pytest.raises(UsageError, match="bad options for scorer 'f1'"):
        get_scorer("f1", nonsense=1)
    judge = get_scorer("llm_judge", backend=ScriptedBackend([]))
    assert isinstance(judge, AsyncScorer) and inspect.iscoroutinefunction(judge.score)
    assert not inspect.iscoroutinefunction(get_scorer("f1").score)


async def test_score_async_runs_sync_scorers_in_a_thread():
    from masorch.score.scorer import score_async

    result = await score_async(get_scorer("exact"), "Answer: yes", gold("Yes"))
    assert result.correct
