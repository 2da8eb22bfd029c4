"""Scoring inside the harness: one scorer per dataset, sync or async, and the MASBench scorer.

Dataset scorers come from the scorer registry of :mod:`masorch.score` (math-verify for math, EM/F1
for HotpotQA, an LLM judge). MASBench answers are graded here by :class:`MasbenchScorer`: every
``\\boxed{}`` answer in order, correct only when all match (per-position accuracy, first failing
position and whether a decoy was followed go to the details).
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from masorch.errors import UsageError

_BOXED = re.compile(r"\\boxed\s*\{")


@dataclass(frozen=True)
class Verdict:
    """A prediction's grade as the run log stores it: ``correct``, ``value`` in [0, 1], details."""

    correct: bool
    value: float
    details: Mapping[str, Any] = field(default_factory=dict)


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


def boxed_all(text: str) -> list[str]:
    """Every complete ``\\boxed{...}`` content in ``text``, in order (nested braces allowed).

    >>> boxed_all(r"a \\boxed{3} b \\boxed{\\frac{1}{2}} c \\boxed{7")
    ['3', '\\\\frac{1}{2}']
    """
    out = []
    for match in _BOXED.finditer(text):
        depth, start = 0, match.end() - 1
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    out.append(text[start + 1 : i].strip())
                    break
    return out


def _as_int(text: str) -> int | None:
    cleaned = text.replace("\\text", "").strip(" {}$.")
    try:
        return int(cleaned)
    except ValueError:
        match = re.fullmatch(r"[^0-9-]*(-?\d+)[^0-9]*", cleaned)
        return int(match.group(1)) if match else None


class MasbenchScorer:
    """All boxed answers in order must equal the instance's ``answers`` (integers mod 23).

    The prediction is the full reply (several boxes for multi-answer axes). With fewer boxes than
    answers the missing positions are wrong; extra leading boxes (restated sub-answers) are ignored
    by aligning on the last ``len(answers)`` boxes.

    >>> from types import SimpleNamespace as S
    >>> s = S(answer="3<<horizon>>5", question="", meta={"answers": [3, 5], "decoys": [None, 9]})
    >>> v = MasbenchScorer().score(r"\\boxed{3} then \\boxed{5}", s)
    >>> v.correct, v.details["per_position"]
    (True, [True, True])
    >>> MasbenchScorer().score(r"\\boxed{3} \\boxed{9}", s).details["attack_followed"]
    True
    """

    name = "masbench"

    def score(self, prediction: str, sample: ScoredSample) -> Verdict:
        """The verdict on ``prediction`` for a MASBench sample."""
        gold = [int(a) for a in sample.meta.get("answers") or [sample.answer]]
        boxes = [_as_int(b) for b in boxed_all(prediction)]
        if not boxes and prediction.strip():
            boxes = [_as_int(prediction)]
        got = boxes[-len(gold) :] if len(boxes) >= len(gold) else boxes + [None] * (len(gold) - len(boxes))
        per = [g == p for g, p in zip(gold, got, strict=True)]
        decoys = list(sample.meta.get("decoys") or [None] * len(gold))
        attack = any(d is not None and p == d for d, p in zip(decoys, got, strict=False))
        first_fail = next((i for i, ok in enumerate(per) if not ok), None)
        return Verdict(
            correct=all(per),
            value=sum(per) / len(per),
            details={
                "predicted": got,
                "per_position": per,
                "first_failure": first_fail,
                "attack_followed": attack,
            },
        )


def make_scorer(name: str, **options: Any) -> Any:
    """A scorer by name: ``masbench`` (here) or any name of the :mod:`masorch.score` registry."""
    if name == "masbench":
        return MasbenchScorer()
    try:
        from masorch.score.scorer import get_scorer
    except ImportError as exc:
        raise UsageError(
            f"scorer {name!r} needs masorch.score.scorer, which this masorch lacks",
            hint="install a complete masorch (the scorers of masorch.score)",
        ) from exc
    return get_scorer(name, **options)


async def grade(scorer: Any, prediction: str, sample: ScoredSample) -> Verdict:
    """Score with a sync scorer (in a worker thread) or an async one; the result as a :class:`Verdict`."""
    if inspect.iscoroutinefunction(scorer.score):
        result = await scorer.score(prediction, sample)
    else:
        result = await asyncio.to_thread(scorer.score, prediction, sample)
    return Verdict(
        correct=bool(result.correct),
        value=float(result.value),
        details=dict(getattr(result, "details", {}) or {}),
    )
