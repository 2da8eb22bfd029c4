"""An LLM judge: asks a backend whether a prediction matches the gold answer and reads its verdict."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from masorch.backends.base import Backend, GenerateConfig, Message
from masorch.prompts import render
from masorch.score.scorer import HasAnswer, Score

_LABEL = re.compile(r"verdict\W*", re.IGNORECASE)
_WORD = re.compile(
    r"\b(not\s+(?:correct|right|equivalent)|incorrect|wrong|false|no|correct|right|true|yes|equivalent)\b",
    re.IGNORECASE,
)
_NEGATIVE = {"incorrect", "wrong", "false", "no"}


def parse_verdict(text: str) -> bool | None:
    """Read a judge's verdict leniently: True (correct), False (incorrect) or None (no verdict).

    The words after the last ``Verdict`` label decide; without a label, the last verdict word does.
    Markdown, case and punctuation do not matter; "not correct" counts as incorrect.

    >>> parse_verdict("The numbers agree.\\n**Verdict:** Correct")
    True
    >>> parse_verdict("It is not correct.")
    False
    >>> parse_verdict("I cannot tell.") is None
    True
    """
    labels = list(_LABEL.finditer(text))
    if labels:
        tail = text[labels[-1].end() :]
        first = _WORD.search(tail)
        if first is not None:
            return _is_positive(first.group(1))
    words = _WORD.findall(text)
    return _is_positive(words[-1]) if words else None


def _is_positive(word: str) -> bool:
    word = " ".join(word.lower().split())
    return not (word.startswith("not ") or word in _NEGATIVE)


@dataclass
class LLMJudgeScorer:
    """Scores by asking ``backend`` with a Jinja template rendered from question, gold and prediction.

    A verdict that cannot be read scores 0.0 with ``details["error"]``; a failing backend raises its
    :class:`masorch.errors.BackendError`, so the caller can retry or record the sample as errored.
    """

    backend: Backend
    template: str = "score/judge.j2"
    config: GenerateConfig = field(default_factory=lambda: GenerateConfig(temperature=0.0, max_tokens=512))
    name: str = "llm_judge"

    def prompt(self, prediction: str, sample: HasAnswer) -> str:
        """The rendered judge prompt for one prediction."""
        return render(self.template, question=sample.question, gold=sample.answer, prediction=prediction)

    async def score(self, prediction: str, sample: HasAnswer) -> Score:
        """The judge's verdict as a score; details hold the raw reply and the judge model."""
        messages = [Message("user", self.prompt(prediction, sample))]
        completion = await self.backend.complete(messages, self.config)
        verdict = parse_verdict(completion.text)
        details: dict[str, object] = {"judge": self.backend.model_id, "reply": completion.text}
        if verdict is None:
            return Score(False, 0.0, {**details, "error": "no verdict in the judge's reply"})
        return Score(verdict, float(verdict), details)
