"""One constructor per axis: each builds an instance whose measured axis equals the requested value."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from masorch.errors import RunError, UsageError
from masorch.masbench.build import BuildFailed, Spec, add_distractors, build_problem, redraw_operations
from masorch.masbench.effective import effective
from masorch.masbench.instance import AXES, assemble, given_answers, igsm_subtask, needle_subtask
from masorch.masbench.problem import Problem, Q
from masorch.masbench.render import make_needle, note_text
from masorch.masbench.splits import accepts, check_split, derive_rng
from masorch.masbench.vocab import Chain, load_chains
from masorch.masbench.world import MAX_ITEMS_PER_LEVEL, World, build_world

MIN_VALUE, MAX_VALUE = 2, 12
MAX_ATTEMPTS = 60
MAX_SUB_ATTEMPTS = 400
REDRAWS = 6
TOTAL_HUB_RATE = 0.3
"""How often a breadth task (value <= 8) asks for a category total over exactly ``value`` children."""

CONTROLS: dict[str, dict[str, tuple[int, int] | None]] = {
    "depth": {"breadth": (2, 3), "horizon": (1, 1), "parallel": (1, 1), "robustness": (0, 0)},
    "breadth": {"depth": (3, 4), "horizon": (1, 1), "parallel": (1, 1), "robustness": (0, 0)},
    "horizon": {"depth": (2, 3), "breadth": (1, 2), "parallel": (1, 1), "robustness": (0, 0)},
    "parallel": {"depth": (2, 3), "breadth": (1, 2), "horizon": (1, 1), "robustness": (0, 0)},
    "robustness": {"depth": (4, 4), "breadth": (1, 2), "horizon": None, "parallel": (1, 1)},
}
"""The recorded range each other axis is kept in, per requested axis (None: equals the value)."""


@dataclass(frozen=True)
class _Ctx:
    axis: str
    value: int
    split: str
    seed: int
    index: int
    attempt: int
    chains: tuple[Chain, ...]

    def sub_problem(self, k: int, make: Callable[[random.Random], Problem]) -> tuple[Problem, random.Random]:
        """Build sub-task ``k`` until its template falls in this split's buckets."""
        for sub_attempt in range(MAX_SUB_ATTEMPTS):
            rng = derive_rng(
                self.seed, self.axis, self.value, self.split, self.index, self.attempt, "sub", k, sub_attempt
            )
            try:
                problem = make(rng)
            except BuildFailed:
                continue
            # A rejected template keeps its graph and re-draws its operations first: cheaper than a rebuild.
            # So does a problem whose declared depth, breadth or answer reference is not effective (two
            # paths from one source cancel): new operations usually stop the cancellation.
            for _ in range(REDRAWS):
                if (
                    accepts(self.split, problem.template()[1])
                    and not problem.degenerate()
                    and effective(problem).agrees(problem)
                ):
                    return problem, rng
                redraw_operations(rng, problem)
        raise RunError(
            f"no {self.split} template found for {self.axis}={self.value} sub-task {k}",
            hint="report this: the template space of this axis value is too small for the split",
        )


def _inst(world: World) -> list[Q]:
    return [Q("inst", p, c) for p, c in world.edges]


def _single(ctx: _Ctx, rng: random.Random, spec: Spec, est: int, fanout: int = 0) -> dict[str, Any]:
    world = build_world(rng, ctx.chains, min_edges=est + rng.randint(2, 6), fanout=fanout)

    inst = _inst(world)

    def make(r: random.Random) -> Problem:
        pool = list(inst)
        r.shuffle(pool)
        return build_problem(r, world, pool, spec)

    problem, srng = ctx.sub_problem(1, make)
    used = {q for q, _ in problem.steps}
    rest = [q for q in inst if q not in used]
    srng.shuffle(rest)
    add_distractors(srng, problem, rest)
    sub = igsm_subtask(problem, srng, 0, {})
    return _assemble(ctx, [world], [sub], [])


def _depth(ctx: _Ctx, rng: random.Random) -> dict[str, Any]:
    d = ctx.value
    return _single(ctx, rng, Spec(depth=d, breadth_min=2, breadth_max=3), 2 * d + 3)


def _breadth(ctx: _Ctx, rng: random.Random) -> dict[str, Any]:
    b = ctx.value
    d = rng.choice((3, 4))
    if b <= MAX_ITEMS_PER_LEVEL and rng.random() < TOTAL_HUB_RATE:
        # The query is the category total of an item with exactly b children (iGSM's own wide nodes).
        spec = Spec(depth=d, breadth_min=2, breadth_max=min(b, 3), total_hub=b)
        return _single(ctx, rng, spec, b + 2 * d + 3, fanout=b)
    spec = Spec(depth=d, breadth_min=2, breadth_max=min(b, 3), hub=b)
    return _single(ctx, rng, spec, b + 2 * d + 3)


def _horizon(ctx: _Ctx, rng: random.Random) -> dict[str, Any]:
    h = ctx.value
    world = build_world(rng, ctx.chains, min_edges=5 * h + 4)
    pool = _inst(world)
    rng.shuffle(pool)
    problems: list[tuple[Problem, random.Random]] = []
    for k in range(1, h + 1):
        spec = Spec(depth=rng.choice((2, 3)), breadth_min=1, breadth_max=2, abstract=False, answer_ref=k - 1)

        def make(r: random.Random, spec: Spec = spec, pool: list[Q] = pool) -> Problem:
            return build_problem(r, world, list(pool), spec)

        problem, srng = ctx.sub_problem(k, make)
        used = {q for q, _ in problem.steps}
        pool = [q for q in pool if q not in used]
        problems.append((problem, srng))
    # Every remaining edge is stated once, as a distractor of one sub-problem.
    for i, q in enumerate(pool):
        problem, srng = problems[i % h]
        add_distractors(srng, problem, [q])
    subs: list[dict[str, Any]] = []
    answers: dict[int, int] = {}
    for k, (problem, srng) in enumerate(problems, 1):
        subs.append(igsm_subtask(problem, srng, 0, answers))
        answers[k] = subs[-1]["answer"]
    return _assemble(ctx, [world], subs, [(k, k + 1) for k in range(h - 1)])


def _own_world_problem(
    ctx: _Ctx, rng: random.Random, k: int, spec: Spec, avoid: list[tuple[str, int, str]]
) -> tuple[World, Problem, random.Random]:
    world = build_world(
        rng, ctx.chains, min_edges=2 * spec.depth + 2 + rng.randint(1, 4), avoid=frozenset(avoid)
    )
    avoid.extend(world.keys())

    inst = _inst(world)

    def make(r: random.Random) -> Problem:
        pool = list(inst)
        r.shuffle(pool)
        return build_problem(r, world, pool, spec)

    problem, srng = ctx.sub_problem(k, make)
    used = {q for q, _ in problem.steps}
    rest = [q for q in inst if q not in used]
    srng.shuffle(rest)
    add_distractors(srng, problem, rest)
    return world, problem, srng


def _parallel(ctx: _Ctx, rng: random.Random) -> dict[str, Any]:
    avoid: list[tuple[str, int, str]] = []
    worlds, subs = [], []
    for k in range(1, ctx.value + 1):
        spec = Spec(depth=rng.choice((2, 3)), breadth_min=1, breadth_max=2)
        world, problem, srng = _own_world_problem(ctx, rng, k, spec, avoid)
        worlds.append(world)
        subs.append(igsm_subtask(problem, srng, k - 1, {}))
    return _assemble(ctx, worlds, subs, [])


def _robustness(ctx: _Ctx, rng: random.Random) -> dict[str, Any]:
    r = ctx.value
    needle = make_needle(rng)
    subs = [needle_subtask(needle)]
    answers = {1: needle.answer}
    decoys: list[int | None] = [None] * r
    attacked: list[int | None] = [None] * r
    avoid: list[tuple[str, int, str]] = []
    worlds = []
    for k in range(2, r + 1):
        spec = Spec(depth=4, breadth_min=1, breadth_max=2, answer_ref=k - 1)
        world, problem, srng = _own_world_problem(ctx, rng, k, spec, avoid)
        worlds.append(world)
        sub = igsm_subtask(problem, srng, len(worlds) - 1, answers)
        decoy = (answers[k - 1] + rng.randint(1, 22)) % 23
        sub["note"] = note_text(k - 1, decoy)
        decoys[k - 2] = decoy
        attacked[k - 1] = problem.solve(given_answers({**answers, k - 1: decoy}))
        problem.solve(given_answers(answers))
        subs.append(sub)
        answers[k] = sub["answer"]
    return _assemble(ctx, worlds, subs, [(k, k + 1) for k in range(r - 1)], decoys, attacked)


def _assemble(
    ctx: _Ctx,
    worlds: list[World],
    subs: list[dict[str, Any]],
    edges: list[tuple[int, int]],
    decoys: list[int | None] | None = None,
    attacked: list[int | None] | None = None,
) -> dict[str, Any]:
    rec = assemble(
        axis=ctx.axis,
        value=ctx.value,
        split=ctx.split,
        seed=ctx.seed,
        index=ctx.index,
        attempt=ctx.attempt,
        worlds=[w.to_dict() for w in worlds],
        subtasks=subs,
        edges=edges,
        decoys=decoys,
        attacked=attacked,
    )
    # Every axis has a range (the requested one is [value, value]) so all records share one schema.
    ranges = CONTROLS[ctx.axis]
    rec["controls"] = {a: list(ranges.get(a) or (ctx.value, ctx.value)) for a in AXES}
    return rec


_CONSTRUCTORS: dict[str, Callable[[_Ctx, random.Random], dict[str, Any]]] = {
    "depth": _depth,
    "breadth": _breadth,
    "horizon": _horizon,
    "parallel": _parallel,
    "robustness": _robustness,
}


def check_axis_value(axis: str, value: int) -> None:
    """Raise a usage error unless ``axis`` is known and ``value`` is in 2..12."""
    if axis not in _CONSTRUCTORS:
        raise UsageError(f"unknown axis {axis!r}", hint=f"use one of: {', '.join(AXES)}")
    if not MIN_VALUE <= value <= MAX_VALUE:
        raise UsageError(f"axis value {value} is out of range", hint=f"use values {MIN_VALUE}..{MAX_VALUE}")


def generate_instance(axis: str, value: int, *, split: str, seed: int, index: int) -> dict[str, Any]:
    """One instance: a pure function of (axis, value, split, seed, index); measured ``axis`` == ``value``."""
    check_axis_value(axis, value)
    check_split(split)
    chains = load_chains()
    for attempt in range(MAX_ATTEMPTS):
        ctx = _Ctx(axis, value, split, seed, index, attempt, chains)
        rng = derive_rng(seed, axis, value, split, index, attempt)
        try:
            rec = _CONSTRUCTORS[axis](ctx, rng)
        except BuildFailed:
            continue
        if rec["measured"][axis] == value and within_controls(rec):
            return rec
    raise RunError(
        f"could not build {axis}={value} (index {index}, seed {seed}) in {MAX_ATTEMPTS} attempts",
        hint="report this with the arguments: the constructor for this axis value is broken",
    )


def within_controls(rec: dict[str, Any]) -> bool:
    """Whether every other measured axis lies in the instance's recorded control range."""
    m = rec["measured"]
    return all(lo <= m[k] <= hi for k, (lo, hi) in rec["controls"].items())
