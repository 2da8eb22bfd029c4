"""Constructing iGSM-style problems at an exact depth (and, for a hub, an exact breadth)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from masorch.masbench.problem import Expr, Problem, Q
from masorch.masbench.world import World

_MODS = ("", "", "plus", "plus", "times")
ABSTRACT_QUERY_RATE = 0.3
"""How often a problem that may use category totals asks for one ("How many Markets does X have?")."""


class BuildFailed(Exception):
    """A construction ran out of structure edges; the caller retries with a new attempt."""


@dataclass(frozen=True)
class Spec:
    """What one problem must measure: its depth, its breadth range and an optional hub.

    ``hub`` > 0 gives the query exactly that many inputs; ``answer_ref`` > 0 makes the first quantity
    of the longest chain use ``[answer<answer_ref>]``; ``abstract`` allows category totals (only where
    the problem states every edge of its world); ``total_hub`` > 0 asks for the category total of an
    item with exactly that many children.
    """

    depth: int
    breadth_min: int = 1
    breadth_max: int = 3
    hub: int = 0
    abstract: bool = True
    answer_ref: int = 0
    total_hub: int = 0


def make_expr(rng: random.Random, inputs: list[Q]) -> Expr:
    """A random right-hand side over ``inputs`` (a constant when there are none)."""
    if not inputs:
        return Expr("const", (), "", rng.randint(0, 22))
    mod = rng.choice(_MODS)
    const = rng.randint(1, 22) if mod == "plus" else rng.randint(2, 22) if mod == "times" else 0
    if len(inputs) == 1:
        combine = "one"
    elif len(inputs) == 2:
        combine = rng.choice(("sum", "diff"))
    else:
        combine = "sum"
    return Expr(combine, tuple(inputs), mod, const)


class _Builder:
    def __init__(self, rng: random.Random, world: World, pool: list[Q], spec: Spec) -> None:
        self.rng = rng
        self.world = world
        self.pool = pool
        self.free = set(pool)
        self.spec = spec
        self.steps: list[tuple[Q, Expr | None]] = []
        self.depth: dict[Q, int] = {}

    def fresh(self) -> Q:
        while self.pool:
            q = self.pool.pop()
            if q in self.free:
                self.free.discard(q)
                return q
        raise BuildFailed("the world has too few structure edges")

    def define(self, q: Q, inputs: list[Q]) -> None:
        self.steps.append((q, make_expr(self.rng, inputs)))
        self.depth[q] = 1 + max((self.depth[i] for i in inputs if i.kind != "ans"), default=0)

    def side(self, max_depth: int, q: Q | None = None) -> Q:
        """A new quantity of depth at most ``max_depth`` (a constant or built on shallower ones)."""
        q = q if q is not None else self.fresh()
        lower = [s for s, _ in self.steps if self.depth[s] <= max_depth - 1]
        if max_depth <= 1 or not lower or self.rng.random() < 0.5:
            self.define(q, [])
        else:
            n = min(len(lower), self.rng.choice((1, 1, 2)), self.spec.breadth_max)
            self.define(q, self.rng.sample(lower, n))
        return q

    def abstract(self, max_depth: int) -> Q | None:
        """A category total over an item whose child edges are all still free, or None."""
        w = self.world
        cands = []
        for lvl in range(len(w.items) - 1):
            for x in w.items[lvl]:
                kids = w.children(x)
                if 1 <= len(kids) <= self.spec.breadth_max and all(
                    Q("inst", x, c) in self.free for c in kids
                ):
                    cands.append(x)
        if not cands:
            return None
        x = self.rng.choice(cands)
        for c in w.children(x):
            q = Q("inst", x, c)
            self.free.discard(q)
            self.side(max_depth - 1, q)
        a = Q("abs", x, w.categories[w.level_of(x) + 1])
        self.steps.append((a, None))
        self.depth[a] = 1 + max(self.depth[Q("inst", x, c)] for c in w.children(x))
        return a

    def extras(self, n: int, max_depth: int, exclude: Q) -> list[Q]:
        chosen: list[Q] = []
        while len(chosen) < n:
            r = self.rng.random()
            reuse = [
                s for s, _ in self.steps if self.depth[s] <= max_depth and s != exclude and s not in chosen
            ]
            if r < 0.3 and reuse:
                chosen.append(self.rng.choice(reuse))
                continue
            if self.spec.abstract and r < 0.5 and max_depth >= 2:
                a = self.abstract(max_depth)
                if a is not None:
                    chosen.append(a)
                    continue
            chosen.append(self.side(max_depth))
        return chosen

    def target(self) -> tuple[str, list[Q]] | None:
        """An item whose category total can be the query: its child edges free, their count in range."""
        w, lo, hi = self.world, max(1, self.spec.breadth_min), self.spec.breadth_max
        if self.spec.total_hub:
            lo = hi = self.spec.total_hub
        cands = [
            x
            for lvl in range(len(w.items) - 1)
            for x in w.items[lvl]
            if lo <= len(w.children(x)) <= hi and all(Q("inst", x, c) in self.free for c in w.children(x))
        ]
        if not cands:
            return None
        x = self.rng.choice(cands)
        kids = [Q("inst", x, c) for c in w.children(x)]
        self.rng.shuffle(kids)
        for q in kids:
            self.free.discard(q)
        return x, kids

    def build(self) -> Problem:
        spec, rng = self.spec, self.rng
        d = spec.depth
        cap = spec.breadth_max - 1
        plan = [min(cap, rng.choice((0, 0, 0, 1, 1, 2))) for _ in range(d + 1)]
        if spec.hub:
            plan[d] = spec.hub - 1
        elif spec.breadth_min >= 2 and d >= 2 and not any(plan[2:]):
            plan[rng.randint(2, d)] = spec.breadth_min - 1
        total = None
        if spec.total_hub:
            total = self.target()
            if total is None:
                raise BuildFailed("no item with the requested number of children")
        elif spec.abstract and not spec.hub and not spec.answer_ref and rng.random() < ABSTRACT_QUERY_RATE:
            total = self.target()
        # With a category-total query, the longest chain runs through its first child edge.
        length = d - 1 if total else d
        first = total[1][0] if total and length == 1 else self.fresh()
        self.define(first, [Q("ans", "", str(spec.answer_ref))] if spec.answer_ref else [])
        prev = first
        for k in range(2, length + 1):
            extra = self.extras(plan[k], k - 1, prev)
            q = total[1][0] if total and k == length else self.fresh()
            inputs = [prev, *extra]
            rng.shuffle(inputs)
            self.define(q, inputs)
            prev = q
        if total:
            owner, kids = total
            for q in kids[1:]:
                self.side(d - 1, q)
            query = Q("abs", owner, self.world.categories[self.world.level_of(owner) + 1])
            self.steps.append((query, None))
            self.depth[query] = d
            prev = query
        problem = Problem(self.world, self.steps, prev)
        if problem.depth() != d:
            raise BuildFailed(f"depth {problem.depth()} != {d}")
        b = problem.breadth()
        if not spec.breadth_min <= b <= max(spec.breadth_max, spec.hub, spec.total_hub):
            raise BuildFailed(f"breadth {b} outside the range")
        return problem


def build_problem(rng: random.Random, world: World, pool: list[Q], spec: Spec) -> Problem:
    """The needed part of a problem: quantities from ``pool`` (consumed from its end) meeting ``spec``."""
    return _Builder(rng, world, pool, spec).build()


def add_distractors(rng: random.Random, problem: Problem, extra: list[Q]) -> None:
    """State every quantity of ``extra`` as a distractor that never feeds the query."""
    usable = [q for q, _ in problem.steps]
    for q in extra:
        n = min(len(usable), rng.choice((0, 0, 1, 1, 2)))
        problem.distractors.append((q, make_expr(rng, rng.sample(usable, n))))
        usable.append(q)


def redraw_operations(rng: random.Random, problem: Problem) -> None:
    """Draw new right-hand sides over the same inputs (same graph, usually a new template sketch)."""
    problem.steps = [(q, e if e is None else make_expr(rng, list(e.inputs))) for q, e in problem.steps]
    problem.reset()
