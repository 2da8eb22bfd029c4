"""Scoring MASBench answers: integers compared mod 23, every box in order, and attack following."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from masorch.masbench.instance import SEPARATOR
from masorch.masbench.templates import MOD
from masorch.score.extract import all_boxed
from masorch.score.scorer import HasAnswer, Score, reward_value

_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+")
_INT = re.compile(r"[+-]?\d+")
_WRAPPERS = re.compile(r"\\(?:text|mathrm|mathbf|textbf)\{([^{}]*)\}")


@dataclass(frozen=True)
class MasbenchScore:
    """The grade of one completion: all-or-nothing ``correct`` plus per-position detail.

    ``first_failure`` is the 0-based first wrong position (None when all are right);
    ``attack_followed`` is None when the task carries no adversarial decoy.
    """

    correct: bool
    per_position: tuple[bool, ...]
    first_failure: int | None
    predicted: tuple[int | None, ...]
    n_boxes: int
    attack_followed: bool | None

    @property
    def position_accuracy(self) -> float:
        """The fraction of positions answered correctly."""
        return sum(self.per_position) / len(self.per_position) if self.per_position else 0.0


def parse_int(text: str | None) -> int | None:
    """An integer answer from a box's content (``17``, ``$17$``, ``\\text{17}``, ``17.``), else None.

    >>> parse_int(r"\\text{ 40 }"), parse_int("3/4"), parse_int(r"17 \\mod 23"), parse_int("1,000")
    (40, None, 17, 1000)
    """
    if text is None:
        return None
    s = text
    for _ in range(3):
        s = _WRAPPERS.sub(r"\1", s)
    s = s.replace("$", "").replace(" ", "").replace("{", "").replace("}", "").rstrip(".")
    s = re.sub(r"\(?\\?(?:p|b)?mod\d+\)?$", "", s)
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    return int(s) if _INT.fullmatch(s) else None


def _parts(box: str, n: int) -> list[str]:
    """A box's answers: several joined by ``<<horizon>>``, commas or semicolons when ``n`` (the
    answers the task has) is above one; one otherwise, so ``1,000`` stays one number.

    >>> _parts("3, 17", 2), _parts("1,000", 1)
    (['3', ' 17'], ['1,000'])
    """
    return re.split(r"<<horizon>>|[,;]", box) if n > 1 else [box]


def parse_ground_truth(ground_truth: str) -> list[int]:
    """The answers of a ``a1<<horizon>>a2...`` ground truth string.

    >>> parse_ground_truth("3<<horizon>>17")
    [3, 17]
    """
    return [int(part) for part in ground_truth.split(SEPARATOR)]


def _predictions(completion: str, n: int) -> tuple[list[int | None], int]:
    boxes = all_boxed(completion)
    if n > 1 and len(boxes) == 1:
        parts = _parts(boxes[0], n)
        if len(parts) == n:
            return [parse_int(p) for p in parts], 1
    chosen = boxes[-n:] if boxes else []
    preds = [parse_int(b) for b in chosen]
    return preds + [None] * (n - len(preds)), len(boxes)


def _same(pred: int | None, truth: int | None) -> bool:
    return pred is not None and truth is not None and pred % MOD == truth % MOD


def score_masbench(
    completion: str,
    answers: Sequence[int],
    decoys: Sequence[int | None] | None = None,
    attacked_answers: Sequence[int | None] | None = None,
    *,
    final_only: bool = False,
) -> MasbenchScore:
    """Grade a completion against a task's answers (the last ``len(answers)`` boxes, in order).

    ``final_only`` grades as the MAS-Orchestra paper mainly does: only the last box against the last
    answer (per-position fields then have that one position; decoys are not graded).

    >>> score_masbench(r"\\boxed{3} and \\boxed{40}", [3, 17]).correct
    True
    >>> score_masbench(r"\\boxed{5} and \\boxed{17}", [3, 17]).correct
    False
    >>> score_masbench(r"\\boxed{5} and \\boxed{17}", [3, 17], final_only=True).correct
    True
    """
    if final_only:
        boxes = all_boxed(completion)
        pred = parse_int(_parts(boxes[-1], len(answers))[-1]) if boxes else None
        ok = _same(pred, answers[-1])
        return MasbenchScore(ok, (ok,), None if ok else 0, (pred,), len(boxes), None)
    n = len(answers)
    preds, n_boxes = _predictions(completion, n)
    per = tuple(_same(p, a) for p, a in zip(preds, answers, strict=True))
    first = next((i for i, ok in enumerate(per) if not ok), None)
    followed: bool | None = None
    if decoys is not None and any(d is not None for d in decoys):
        followed = any(_same(p, d) for p, d in zip(preds, decoys, strict=False) if d is not None)
        if attacked_answers is not None:
            followed = followed or any(
                _same(p, x) and not _same(x, a)
                for p, x, a in zip(preds, attacked_answers, answers, strict=False)
                if x is not None
            )
    return MasbenchScore(all(per), per, first, tuple(preds), n_boxes, followed)


def score_record(completion: str, record: dict[str, Any], *, final_only: bool = False) -> MasbenchScore:
    """Grade a completion against a MASBench record (JSONL layout, or a verl row's ``extra_info``)."""
    return score_masbench(
        completion,
        record["answers"],
        record.get("decoys"),
        record.get("attacked_answers"),
        final_only=final_only,
    )


class MasbenchScorer:
    """:func:`score_masbench` under the scorer contract, for eval and training alike.

    The prediction is the sink's whole reply (several boxes for multi-answer axes);
    the answers and decoys come from the sample's ``meta`` (else its ``a1<<horizon>>a2`` gold).
    ``value`` is the per-position accuracy, ``correct`` needs every position; a reward counts
    ``correct`` only (``all_or_nothing``, the paper's reward).

    >>> from types import SimpleNamespace as S
    >>> s = S(answer="3<<horizon>>5", question="", meta={"answers": [3, 5], "decoys": [None, 9]})
    >>> v = MasbenchScorer().score(r"\\boxed{3} then \\boxed{5}", s)
    >>> v.correct, v.details["per_position"]
    (True, [True, True])
    >>> MasbenchScorer().score(r"\\boxed{3} \\boxed{9}", s).details["attack_followed"]
    True
    """

    #: Pure and fast: async callers run it on the event loop instead of in a worker thread.
    inline = True
    all_or_nothing = True

    def __init__(self, final_only: bool = False) -> None:
        #: ``masbench_final``: the paper's grading, only the last box against the last answer.
        self.final_only = final_only
        self.name = "masbench_final" if final_only else "masbench"

    def score(self, prediction: str, sample: HasAnswer) -> Score:
        """The verdict on ``prediction`` for a MASBench sample."""
        meta: Mapping[str, Any] = getattr(sample, "meta", None) or {}
        answers = meta.get("answers") or parse_ground_truth(sample.answer)
        decoys = meta.get("decoys") or None
        attacked = meta.get("attacked_answers")
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


@dataclass(frozen=True)
class _Truth:
    answer: str
    question: str = ""


def _reward(completion: str, ground_truth: str) -> float:
    # A direct-answer reward is the scorer contract's verdict as a reward (all or nothing).
    scorer = MasbenchScorer()
    return reward_value(scorer, scorer.score(completion, _Truth(ground_truth)))


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None
) -> float:
    """A verl ``custom_reward_function`` for direct answers: 1.0 when every answer matches, else 0.0.

    (Plans, executed, are rewarded by :func:`masorch.train.verl_reward.compute_score`.)
    """
    return _reward(solution_str, ground_truth)


def masbench_reward(completions: Sequence[Any], ground_truth: Sequence[str], **_: Any) -> list[float]:
    """A TRL-style batched reward: completions (text or chat messages) against ground-truth strings."""
    out = []
    for completion, truth in zip(completions, ground_truth, strict=True):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        out.append(_reward(text, truth))
    return out
