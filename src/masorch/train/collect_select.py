"""Which sampled trajectories become training data: correct ones, one per question, recoveries first,
under a tool-balance constraint. Pure functions of the attempts' statistics.

An attempt is the dict :func:`masorch.train.collect.attempt_stats` writes (``id``, ``sample``,
``correct``, ``recovered``, ``tools``: calls per tool, ``tokens``: {"total": ...}, ...). The rules:

1. only correct attempts are candidates;
2. each question keeps at most one: the best by (no protocol error first: no call of the teacher's
   ended ``FORMAT_ERR`` or ``REJECTED``; then recovered first: a call failed ``EXEC_ERR`` or
   ``TIMEOUT`` and the run still ended correct; then fewer tokens, then the earlier sample);
3. tool balance: while a tool makes more than ``max_tool_share`` of the kept set's tool calls, the
   heaviest user of it that has another candidate using it less moves to its best such candidate;
   when no question can move, the heaviest user is dropped, but only if that lowers the largest
   share of any tool (else the set stays as it is, unbalanced, and :attr:`Selection.balanced` says
   so: a set of one-tool trajectories is never emptied for balance). A candidate moved away from is
   not taken again, so the loop ends.

>>> def att(q, k, correct, statuses, tools):
...     return {"id": q, "sample": k, "correct": correct, "statuses": statuses, "tools": tools}
>>> a = [att("q1", 0, True, {"OK": 1}, {"cot": 1}),
...      att("q1", 1, True, {"OK": 2, "TIMEOUT": 1}, {"cot": 2, "review": 1}),
...      att("q2", 0, False, {"OK": 1}, {"sc": 1})]
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

#: Call statuses that are the teacher's own protocol errors (the call was malformed or refused).
PROTOCOL_STATUSES = ("FORMAT_ERR", "REJECTED")
#: Call statuses of a tool that failed (really, or injected): what a trajectory recovers from.
FAILURE_STATUSES = ("EXEC_ERR", "TIMEOUT")


def protocol_errors(a: Attempt) -> int:
    """The attempt's calls that broke the protocol: ``FORMAT_ERR`` and ``REJECTED`` ones, and the
    undelivered ones (:func:`undelivered`).

    >>> protocol_errors({"statuses": {"OK": 2, "REJECTED": 1}, "undelivered": 1})
    2
    """
    statuses = a.get("statuses") or {}
    return sum(int(statuses.get(s, 0)) for s in PROTOCOL_STATUSES) + undelivered(a)


def undelivered(a: Attempt) -> int:
    """Calls the teacher wrote that never reached a tool (``undelivered``, as the trajectory counts
    them); for an attempt logged before that count, its turns without a call, read from its chat
    (the synthesis answer, a turn without tools, aside).

    >>> chat = {"messages": [{"role": "assistant", "content": "hm"},
    ...                      {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
    ...                      {"role": "assistant", "content": "42"}], "meta": {"ended_by": "synthesis"}}
    >>> undelivered({"chat": chat}), undelivered({"undelivered": 0, "chat": chat})
    (1, 0)
    """
    if "undelivered" in a:
        return int(a["undelivered"])
    chat = a.get("chat") or {}
    turns = [m for m in chat.get("messages") or () if m.get("role") == "assistant"]
    if (chat.get("meta") or {}).get("ended_by") == "synthesis":
        turns = turns[:-1]
    return sum(1 for m in turns if not m.get("tool_calls"))


def recovered(a: Attempt) -> bool:
    """A correct attempt in which some tool call failed (``EXEC_ERR``, ``TIMEOUT``).

    >>> recovered({"correct": True, "statuses": {"OK": 2, "TIMEOUT": 1}})
    True
    >>> recovered({"correct": True, "statuses": {"OK": 1, "REJECTED": 1}})
    False
    """
    statuses = a.get("statuses") or {}
    return bool(a.get("correct")) and any(int(statuses.get(s, 0)) for s in FAILURE_STATUSES)


def _rank(a: Attempt) -> tuple[int, int, int, int]:
    return (
        1 if protocol_errors(a) else 0,
        0 if recovered(a) else 1,
        int(a.get("tokens", {}).get("total", 0)),
        int(a.get("sample", 0)),
    )


def best_possible(a: Attempt) -> bool:
    """No later sample can rank above this one: correct, recovered, no protocol error."""
    return recovered(a) and not protocol_errors(a)


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
    #: False when a tool is still over the share: no move or drop could lower the largest share.
    balanced: bool = True


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
    balanced = True
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
            # No question can move away from the tool: drop the heaviest user, the plainest first,
            # if that lowers the largest share (else dropping only shrinks the set: stop).
            victim = max(heavy, key=lambda q: (uses(chosen[q]), not recovered(chosen[q]), q))
            rest = [a for q, a in chosen.items() if q != victim]
            if max(tool_shares(rest).values(), default=1.0) >= shares[tool] - 1e-9:
                balanced = False
                break
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
        balanced=balanced,
    )
