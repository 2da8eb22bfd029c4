"""Effective axis values: what a problem's answer really depends on, not only what its graph declares.

Every generated quantity is affine mod 23 (a prime) in the stated numbers and the answer references,
so influence is exact symbolic arithmetic, not sampling:

- a quantity *influences* the answer when changing its value (everything downstream recomputed)
  changes the answer: its adjoint (the coefficient of the answer in it, by reverse accumulation) is
  non-zero mod 23, so then *every* change of it changes the answer. ``(r + 15) - (r + 19)`` does not
  depend on ``r``;
- the **effective depth** is the longest dependency chain ending at the query through influencing
  quantities only;
- the **effective breadth** of an influencing quantity counts its distinct inputs that influence the
  answer (two paths from one input can cancel);
- an answer reference ``[answerj]`` is effective when its adjoint is non-zero: a chained problem (and a
  robustness decoy) then changes the answer whatever wrong value it is given.

The independent evaluator measures the same from the text with its own code (``evaluator.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from masorch.masbench.problem import Expr, Problem, Q, abstract_terms
from masorch.masbench.templates import MOD


@dataclass(frozen=True)
class Effective:
    """The effective depth and breadth of a problem and whether each answer reference it uses matters."""

    depth: int
    breadth: int
    answer_refs: dict[str, bool]

    def agrees(self, problem: Problem) -> bool:
        """Whether the declared depth and breadth are effective and every answer reference matters."""
        return (
            self.depth == problem.depth()
            and self.breadth == problem.breadth()
            and all(self.answer_refs.values())
        )


def _partials(problem: Problem, values: dict[Q, int], q: Q, expr: Expr | None) -> list[tuple[Q, int]]:
    """d q / d input for each input of ``q`` (a total's count times a deeper total uses their values)."""
    if expr is None:
        out: list[tuple[Q, int]] = []
        for count, inner in abstract_terms(problem.world, q):
            if inner is None:
                out.append((count, 1))
            else:
                out += [(count, values[inner]), (inner, values[count])]
        return out
    if expr.combine == "const":
        return []
    scale = expr.const if expr.mod == "times" else 1
    if expr.combine == "diff":
        return [(expr.inputs[0], scale), (expr.inputs[1], -scale)]
    return [(d, scale) for d in expr.inputs]


def effective(problem: Problem) -> Effective:
    """The effective axis values of a solved or unsolved problem (see the module docstring)."""
    if problem.query not in problem.values:
        # Values matter only for a count times a deeper total; solve without keeping the result.
        saved = problem.values
        problem.solve({d: 0 for ins in problem.dep_map().values() for d in ins if d.kind == "ans"})
        values, problem.values = problem.values, saved
    else:
        values = problem.values
    partials = {q: _partials(problem, values, q, e) for q, e in problem.steps}
    adjoint: dict[Q, int] = {problem.query: 1}
    for q, _ in reversed(problem.steps):
        a = adjoint.get(q, 0)
        if a:
            for d, p in partials[q]:
                adjoint[d] = (adjoint.get(d, 0) + a * p) % MOD
    depth: dict[Q, int] = {}
    breadth = 0
    deps = problem.dep_map()
    for q, _ in problem.steps:
        live = [d for d in dict.fromkeys(deps[q]) if d.kind != "ans" and adjoint.get(d, 0)]
        depth[q] = 1 + max((depth[d] for d in live), default=0)
        if adjoint.get(q, 0):
            breadth = max(breadth, len(live))
    refs = {d.name(): bool(adjoint.get(d, 0)) for ins in deps.values() for d in ins if d.kind == "ans"}
    return Effective(depth[problem.query], breadth, refs)
