"""The LLM judge: prompt rendering, lenient verdict parsing, scripted backends."""

from __future__ import annotations

import pytest

from masorch.backends import ScriptedBackend
from masorch.errors import BackendError
from masorch.eval.datasets import Sample
from masorch.score.llm_judge import LLMJudgeScorer, parse_verdict
from masorch.score.registry import get_scorer
from masorch.score.scorer import score_async

SAMPLE = Sample("q1", "Who wrote Hamlet?", "William Shakespeare", "test")


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Verdict: CORRECT", True),
        ("Verdict: INCORRECT", False),
        ("**Verdict**: correct.", True),
        ("The candidate is right, yes.\nVERDICT - incorrect", False),
        ("verdict:correct", True),
        ("Both name the same person. Correct", True),
        ("This is not correct", False),
        ("Wrong: that is Marlowe.", False),
        ("Yes", True),
        ("no", False),
        ("I am unsure.", None),
        ("", None),
    ],
)
def test_parse_verdict(reply, verdict):
    assert parse_verdict(reply) is verdict


def test_prompt_contains_question_gold_and_prediction():
    prompt = LLMJudgeScorer(ScriptedBackend([])).prompt("Shakespeare", SAMPLE)
    assert "Who wrote Hamlet?" in prompt and "William Shakespeare" in prompt
    assert prompt.index("William Shakespeare") < prompt.index("Candidate answer:\nShakespeare")
    assert prompt.endswith('"Verdict: CORRECT" or "Verdict: INCORRECT".')


async def test_judge_scores_from_the_backend_reply():
    backend = ScriptedBackend(
        ["Same author.\nVerdict: CORRECT", "Different person.\nVerdict: INCORRECT", "hmm"]
    )
    judge = LLMJudgeScorer(backend)
    first = await judge.score("Shakespeare", SAMPLE)
    assert (first.correct, first.value, first.details["judge"]) == (True, 1.0, "scripted:scripted")
    assert not (await judge.score("Marlowe", SAMPLE)).correct
    unread = await judge.score("?", SAMPLE)
    assert unread.value == 0.0 and unread.details["error"] == "no verdict in the judge's reply"
    (messages, config), *_ = backend.calls
    assert messages[0].role == "user" and "Candidate answer:\nShakespeare" in messages[0].content
    assert config.temperature == 0.0


async def test_judge_from_registry_and_score_async():
    judge = get_scorer("llm_judge", backend=ScriptedBackend(["Verdict: correct"]))
    assert (await score_async(judge, "Shakespeare", SAMPLE)).correct


async def test_backend_failure_propagates():
    judge = LLMJudgeScorer(ScriptedBackend([BackendError("endpoint down", retryable=True)]))
    with pytest.raises(BackendError, match="endpoint down"):
        await judge.score("x", SAMPLE)
