"""iGSM-style problems: quantities, equations mod 23, construction at an exact depth, rendering, solution."""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import NamedTuple

from masorch.masbench.templates import MOD, Shape, ShapeNode
from masorch.masbench.world import World

SYMBOLS = tuple("abcdefghijklmnopqrstuvwxyz") + tuple(
    f"{a}{b}" for a in "ABCDEFGH" for b in "abcdefghijklmnopqrstuvwxyz"
)


class Q(NamedTuple):
    """A quantity: ``inst`` (each owner's item), ``abs`` (owner's category total) or ``ans`` (an answer)."""

    kind: str
    owner: str
    target: str

    def name(self) -> str:
        """The quantity as written in the task text."""
        if self.kind == "ans":
            return f"[answer{self.target}]"
        return f"each {self.owner}'s {self.target}"


@dataclass(frozen=True)
class Expr:
    """The right-hand side of a stated quantity: ``combine`` inputs, then apply ``mod`` with ``const``.

    combine: ``const`` (no inputs), ``one``, ``sum`` or ``diff``; mod: ``""``, ``plus`` ("r more than
    E") or ``times`` ("r times as much as E").
    """

    combine: str
    inputs: tuple[Q, ...] = ()
    mod: str = ""
    const: int = 0

    def evaluate(self, values: dict[Q, int]) -> int:
        """The value mod 23 given the values of the inputs."""
        if self.combine == "const":
            return self.const % MOD
        if self.combine == "diff":
            base = values[self.inputs[0]] - values[self.inputs[1]]
        else:
            base = sum(values[q] for q in self.inputs)
        if self.mod == "plus":
            base += self.const
        elif self.mod == "times":
            base *= self.const
        return base % MOD

    def text(self) -> str:
        """The right-hand side as written in the task text."""
        if self.combine == "const":
            return str(self.const)
        names = [q.name() for q in self.inputs]
        if self.combine == "one":
            core = names[0]
        elif self.combine == "diff":
            core = f"the difference of {names[0]} and {names[1]}"
        else:
            core = f"the sum of {', '.join(names[:-1])} and {names[-1]}"
        if self.mod == "plus":
            return f"{self.const} more than {core}"
        if self.mod == "times":
            return f"{self.const} times as much as {core}"
        return core


def sentence(q: Q, expr: Expr) -> str:
    """The stated sentence of an instance quantity."""
    return f"The number of {q.name()} equals {expr.text()}."


def question_text(q: Q) -> str:
    """The question asking for quantity ``q``."""
    return f"How many {q.target} does {q.owner} have?"


@dataclass
class Problem:
    """One iGSM-style (sub-)problem: its needed steps in solution order, distractors and query."""

    world: World
    steps: list[tuple[Q, Expr | None]]
    query: Q
    distractors: list[tuple[Q, Expr]] = field(default_factory=list)
    values: dict[Q, int] = field(default_factory=dict)
    _sketch: str | None = field(default=None, repr=False)
    _shape: Shape | None = field(default=None, repr=False)
    _deps: dict[Q, tuple[Q, ...]] | None = field(default=None, repr=False)

    def deps(self, q: Q) -> tuple[Q, ...]:
        """The quantities ``q`` depends on (abstract totals depend on their structural children)."""
        expr = dict(self.steps)[q]
        return abstract_deps(self.world, q) if expr is None else expr.inputs

    def dep_map(self) -> dict[Q, tuple[Q, ...]]:
        """Every needed quantity's dependencies, in solution order."""
        if self._deps is None:
            self._deps = {q: abstract_deps(self.world, q) if e is None else e.inputs for q, e in self.steps}
        return self._deps

    def solve(self, given: dict[Q, int] | None = None) -> int:
        """Compute every needed value in order (``given`` supplies answer references); return the answer."""
        values: dict[Q, int] = dict(given or {})
        for q, expr in self.steps:
            if expr is None:
                values[q] = abstract_value(self.world, q, values)
            else:
                values[q] = expr.evaluate(values)
        for q, expr in self.distractors:
            values[q] = expr.evaluate(values)
        self.values = values
        return values[self.query]

    def depth(self) -> int:
        """Nodes on the longest dependency chain ending at the query (answer references excluded)."""
        memo: dict[Q, int] = {}
        for q, ins in self.dep_map().items():
            memo[q] = 1 + max((memo[d] for d in ins if d.kind != "ans"), default=0)
        return memo[self.query]

    def breadth(self) -> int:
        """The largest number of distinct quantities one needed quantity depends on."""
        return max(len({d for d in ins if d.kind != "ans"}) for ins in self.dep_map().values())

    def operations(self) -> int:
        """iGSM's operation count: 1 per quantity of at most 2 inputs (a constant counts), else inputs - 1."""
        total = 0
        deps = self.dep_map()
        for q, expr in self.steps:
            n = len(deps[q]) + (1 if expr is not None and (expr.mod or expr.combine == "const") else 0)
            total += 1 if n <= 2 else n - 1
        return total

    def sentences(self) -> list[str]:
        """Every stated sentence (needed and distractor), unshuffled."""
        out = [sentence(q, e) for q, e in self.steps if e is not None]
        return out + [sentence(q, e) for q, e in self.distractors]

    def solution(self, rng: random.Random, given: dict[Q, int] | None = None) -> str:
        """A step-by-step solution in topological order, with random symbol names."""
        if self.query not in self.values:
            self.solve(given)
        symbols = list(SYMBOLS[: max(26, len(self.steps))])
        rng.shuffle(symbols)
        sym: dict[Q, str] = {}
        lines = []
        deps = self.dep_map()
        for i, (q, expr) in enumerate(self.steps):
            sym[q] = symbols[i]
            for d in deps[q]:
                if d.kind == "ans" and d not in sym:
                    sym[d] = d.name()
            formula, numbers = self._formula(q, expr, sym)
            label = f"{q.owner}'s {q.target}" if q.kind == "abs" else q.name()
            chain = [formula, numbers, str(self.values[q])]
            shown = [c for i, c in enumerate(chain) if c and c not in chain[:i]]
            lines.append(f"Define {label} as {sym[q]}; so {sym[q]} = {' = '.join(shown)}.")
        lines.append(f"Thus, the answer is {self.values[self.query]}.")
        return " ".join(lines)

    def _formula(self, q: Q, expr: Expr | None, sym: dict[Q, str]) -> tuple[str, str]:
        v = self.values
        if expr is None:
            kids = abstract_terms(self.world, q)
            f = " + ".join(sym[a] if b is None else f"{sym[a]} * {sym[b]}" for a, b in kids)
            n = " + ".join(str(v[a]) if b is None else f"{v[a]} * {v[b]}" for a, b in kids)
            return f, n
        if expr.combine == "const":
            return str(expr.const), ""
        joiner = " - " if expr.combine == "diff" else " + "
        f = joiner.join(sym[d] for d in expr.inputs)
        n = joiner.join(str(v[d]) for d in expr.inputs)
        if len(expr.inputs) > 1 and expr.mod == "times":
            f, n = f"({f})", f"({n})"
        if expr.mod == "plus":
            f, n = f"{f} + {expr.const}", f"{n} + {expr.const}"
        elif expr.mod == "times":
            f, n = f"{expr.const} * {f}", f"{expr.const} * {n}"
        return f, n

    def degenerate(self) -> bool:
        """True when the answer does not depend on any stated constant (e.g. the difference of a copy).

        Every quantity is affine mod 23 in the constants and answer references, so the answer is
        uniform over 0..22 exactly when one of its coefficients is non-zero; this tracks them.
        """
        coef: dict[Q, dict[Q, int]] = {}
        for q, expr in self.steps:
            acc: dict[Q, int] = {}
            if expr is None:
                terms = abstract_terms(self.world, q)
                if any(b is not None for _, b in terms):
                    return False  # a product of quantities: not affine, never built by the generator
                parts, signs = [coef[a] for a, _ in terms], [1] * len(terms)
            elif expr.combine == "const":
                parts, signs = [{q: 1}], [1]
            else:
                parts = [coef.get(d, {d: 1}) for d in expr.inputs]
                signs = [1, -1] if expr.combine == "diff" else [1] * len(parts)
            scale = expr.const if expr is not None and expr.mod == "times" else 1
            for part, sign in zip(parts, signs, strict=True):
                for leaf, c in part.items():
                    acc[leaf] = (acc.get(leaf, 0) + sign * scale * c) % MOD
            coef[q] = {leaf: c for leaf, c in acc.items() if c}
        return not coef[self.query]

    def reset(self) -> None:
        """Forget cached values and sketch after the steps changed."""
        self.values = {}
        self._sketch = None
        self._shape = None
        self._deps = None

    def sketch(self) -> str:
        """The name- and number-free sketch of the solution in canonical form (see ``templates.py``)."""
        if self._sketch is None:
            self._sketch = self.shape().sketch()
        return self._sketch

    def template(self) -> tuple[str, int]:
        """The canonical template hash of the sketch and its split bucket (0..22)."""
        return self.shape().template()

    def shape(self) -> Shape:
        """The template graph with its digests (built once per drawing of the operations)."""
        if self._shape is None:
            self._shape = Shape(self._shape_nodes(), self.query)
        return self._shape

    def _shape_nodes(self) -> dict[Hashable, ShapeNode]:
        """The graph a sketch writes: ``Inst``/``Inter`` quantities, no numbers, references as ``Ans``."""
        nodes: dict[Hashable, ShapeNode] = {}
        deps = self.dep_map()
        for q, expr in self.steps:
            ins = tuple("Ans" if d.kind == "ans" else d for d in deps[q])
            op = "total" if expr is None else f"{expr.combine}[{expr.mod}]"
            nodes[q] = ShapeNode("Inter" if q.kind == "abs" else "Inst", op, ins)
        return nodes


def abstract_terms(world: World, q: Q) -> list[tuple[Q, Q | None]]:
    """An abstract total as terms: count(owner, child) times (1 or the child's own total)."""
    lvl = world.categories.index(q.target)
    terms: list[tuple[Q, Q | None]] = []
    for child in world.children(q.owner):
        count = Q("inst", q.owner, child)
        terms.append((count, None if world.level_of(child) == lvl else Q("abs", child, q.target)))
    return terms


def abstract_deps(world: World, q: Q) -> tuple[Q, ...]:
    """The quantities an abstract total depends on, in order, without repeats."""
    out: list[Q] = []
    for a, b in abstract_terms(world, q):
        out.append(a)
        if b is not None:
            out.append(b)
    return tuple(out)


def abstract_value(world: World, q: Q, values: dict[Q, int]) -> int:
    """The value of an abstract total from its terms."""
    total = 0
    for a, b in abstract_terms(world, q):
        total += values[a] * (1 if b is None else values[b])
    return total % MOD
