"""Which sampled trajectories become training data: correct ones, one per question, recoveries first,
under a tool-balance constraint. Pure functions of the attempts' statistics.

An attempt is the dict :func:`masorch.train.collect.attempt_stats` writes (``id``, ``sample``,
``correct``, ``recovered``, ``tools``: calls per tool, ``tokens``: {"total": ...}, ...). The rules:

1. only correct attempts are candidates;
2. each question keeps at most one: the best by (recovered first, then fewer tokens, then the
   earlier sample);
3. tool balance: while a tool makes more than ``max_tool_share`` of the kept set's tool calls, a
   question that uses it most is moved to its best other candidate that uses it less, or, having
   none, dropped. A candidate moved away from is not taken again, so the loop ends.

>>> def att(q, k, correct, recovered, tools):
...     return {"id": q, "sample": k, "correct": correct, "recovered": recovered, "tools": tools}
>>> a = [att("q1", 0, True, False, {"cot": 1}), att("q1", 1, True, True, {"cot": 2, "review": 1}),
...      att("q2", 0, False, False, {"sc": 1})]
>>> s = select(a, max_tool_share=1.0)
>>> [(r["id"], r["sample"]) for r in s.kept], s.questions_without_correct
([('q1', 1)], 1)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Attempt = Mapping[str, Any]


def _rank(a: Attempt) -> tuple[int, int, int]:
    return (0 if a.get("recovered") else 1, int(a.get("tokens", {}).get("total", 0)), int(a.get("sample", 0)))


def tool_counts(attempts: Iterable[Attempt]) -> Counter[str]:
    """Tool calls per tool over ``attempts``.

    >>> tool_counts([{"tools": {"cot": 2}}, {"tools": {"cot": 1, "sc": 1}}])
    Counter({'cot': 3, 'sc': 1})
    """
    total: Counter[str] = Counter()
    for a in attempts:
        total.update({str(k): int(v) for k, v in a.get("tools", {}).items()})
    return total


def tool_shares(attempts: Iterable[Attempt]) -> dict[str, float]:
    """Each tool's share of all tool calls in ``attempts`` (empty without calls).

    >>> tool_shares([{"tools": {"cot": 3, "sc": 1}}])
    {'cot': 0.75, 'sc': 0.25}
    """
    counts = tool_counts(attempts)
    total = sum(counts.values())
    return {t: n / total for t, n in sorted(counts.items())} if total else {}


@dataclass(frozen=True)
class Selection:
    """What selection kept (one attempt per question, in question order) and why others went."""

    kept: tuple[Attempt, ...]
    questions: int
    questions_without_correct: int
    swapped_for_balance: int = 0
    dropped_for_balance: int = 0
    shares: Mapping[str, float] = field(default_factory=dict)


def select(attempts: Sequence[Attempt], *, max_tool_share: float) -> Selection:
    """Choose the training trajectories among ``attempts`` (see the module docs)."""
    order: list[str] = []
    pool: dict[str, list[Attempt]] = {}
    for a in attempts:
        qid = str(a["id"])
        if qid not in pool:
            order.append(qid)
            pool[qid] = []
        if a.get("correct"):
            pool[qid].append(a)
    for candidates in pool.values():
        candidates.sort(key=_rank)
    chosen: dict[str, Attempt] = {q: c[0] for q, c in pool.items() if c}
    without = sum(1 for c in pool.values() if not c)
    swapped = dropped = 0
    while True:
        shares = tool_shares(chosen.values())
        over = [t for t, s in shares.items() if s > max_tool_share + 1e-9]
        if not over:
            break
        tool = max(over, key=lambda t: (shares[t], t))

        def uses(a: Attempt, tool: str = tool) -> int:
            return int(a.get("tools", {}).get(tool, 0))

        heavy = sorted(
            (q for q in chosen if uses(chosen[q]) > 0), key=lambda q: (-uses(chosen[q]), _rank(chosen[q]))
        )
        for qid in heavy:
            current = chosen[qid]
            better = [a for a in pool[qid] if uses(a) < uses(current)]
            if better:
                pool[qid].remove(current)
                chosen[qid] = better[0]
                swapped += 1
                break
        else:
            # No question can move away from the tool: drop the heaviest user, the plainest first.
            victim = max(heavy, key=lambda q: (uses(chosen[q]), not chosen[q].get("recovered"), q))
            del chosen[victim]
            dropped += 1
    kept = tuple(chosen[q] for q in order if q in chosen)
    return Selection(
        kept=kept,
        questions=len(order),
        questions_without_correct=without,
        swapped_for_balance=swapped,
        dropped_for_balance=dropped,
        shares=tool_shares(kept),
    )
