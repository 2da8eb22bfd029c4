"""Short-answer QA scoring as in the official HotpotQA evaluation: normalisation, exact match, token F1."""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass

from masorch.score.scorer import HasAnswer, Score

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
_SPECIAL = frozenset({"yes", "no", "noanswer"})
_ANSWER_LINE = re.compile(r"(?:final answer|answer)\s*(?:is)?\s*[:：]\s*(.+)", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, collapse whitespace.

    >>> normalize_answer("The  Beatles!")
    'beatles'
    """
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> bool:
    """Whether the normalised prediction equals the normalised gold answer."""
    return normalize_answer(prediction) == normalize_answer(gold)


def f1_parts(prediction: str, gold: str) -> tuple[float, float, float]:
    """Token-level (F1, precision, recall) of the normalised answers.

    As in the official script, yes/no/noanswer only ever match themselves: if either side normalises
    to one of them and they differ, all three are 0.

    >>> f1_parts("Paris France", "Paris")
    (0.6666666666666666, 0.5, 1.0)
    """
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _SPECIAL or ref in _SPECIAL) and pred != ref:
        return 0.0, 0.0, 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if common == 0:
        return 0.0, 0.0, 0.0
    precision = common / len(pred_tokens)
    recall = common / len(ref_tokens)
    return 2 * precision * recall / (precision + recall), precision, recall


def extract_short_answer(text: str) -> str:
    """The short answer in a model reply: the text after the last ``Answer:`` line, else the reply.

    >>> extract_short_answer("Both are American.\\nFinal answer: yes")
    'yes'
    """
    matches = _ANSWER_LINE.findall(text)
    return (matches[-1] if matches else text).strip()


@dataclass(frozen=True)
class ExactMatchScorer:
    """Normalised exact match (HotpotQA EM); ``extract`` first takes the text after a final ``Answer:``."""

    extract: bool = True
    name: str = "exact"

    def score(self, prediction: str, sample: HasAnswer) -> Score:
        """1.0 when the normalised answers are equal, else 0.0."""
        answer = extract_short_answer(prediction) if self.extract else prediction
        hit = exact_match(answer, sample.answer)
        return Score(hit, float(hit), {"extracted": answer})


@dataclass(frozen=True)
class F1Scorer:
    """Token F1 (HotpotQA); ``value`` is the F1, ``correct`` is the exact match on normalised answers."""

    extract: bool = True
    name: str = "f1"

    def score(self, prediction: str, sample: HasAnswer) -> Score:
        """F1 as the value, with precision, recall and EM in the details."""
        answer = extract_short_answer(prediction) if self.extract else prediction
        f1, precision, recall = f1_parts(answer, sample.answer)
        hit = exact_match(answer, sample.answer)
        return Score(hit, f1, {"extracted": answer, "precision": precision, "recall": recall, "em": hit})
