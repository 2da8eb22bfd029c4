"""Canonical template shapes: a sketch up to variable names and the order of commutative operands.

A sketch (``Inst v1 = const[](;0); Inst v2 = sum[plus](v1,Ans;0); Inter v3 = total(v2)``) names its
variables in solution order and lists operands as drawn, so ``sum(v1, v2)`` and ``sum(v2, v1)`` would
hash apart although they are the same template. Here a sketch is read back into its graph and

- every node gets a digest of its expression tree: its kind and operation over its operands' digests,
  sorted for the commutative ``sum`` and for the terms of a category ``total`` (a count, or a count
  times a deeper total), in order for ``diff``;
- the template hash is the digest of the query (the sink), so sketches that differ only by names or
  operand order always share it (two sketches with one unfolded tree but different sharing of
  sub-results share it too: coarser than isomorphism, never finer, so splits cannot leak);
- :func:`canonical_sketch` writes the graph again, operands in digest order and variables renamed in
  order of first definition, so the stored sketch shows the shape that was hashed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Hashable
from dataclasses import dataclass

#: The modulus every MASBench quantity lives in (answers are compared mod MOD).
MOD = 23
_PART = re.compile(r"(Inst|Inter) (v\d+) = (?:(total)\(([^()]*)\)|(\w+)\[(\w*)\]\(([^();]*);0\))")


class SketchError(ValueError):
    """The text is not a sketch written by the generator."""


@dataclass(frozen=True)
class ShapeNode:
    """One quantity of a sketch: ``Inst``/``Inter``, its operation, its operands (``"Ans"``: a reference)."""

    kind: str
    op: str  # "total", or "<combine>[<mod>]"
    inputs: tuple[Hashable, ...]


def _parse(sketch: str) -> tuple[dict[Hashable, ShapeNode], Hashable]:
    nodes: dict[Hashable, ShapeNode] = {}
    last = ""
    for part in sketch.split("; "):
        m = _PART.fullmatch(part)
        if not m:
            raise SketchError(f"cannot read the sketch part {part!r}")
        kind, var = m.group(1), m.group(2)
        if m.group(3):
            op, args = "total", m.group(4)
        else:
            op, args = f"{m.group(5)}[{m.group(6)}]", m.group(7)
        inputs = tuple(a for a in args.split(",") if a)
        for a in inputs:
            if a != "Ans" and a not in nodes:
                raise SketchError(f"{var} uses {a} before it is defined")
        if var in nodes:
            raise SketchError(f"{var} is defined twice")
        nodes[var] = ShapeNode(kind, op, inputs)
        last = var
    if not nodes:
        raise SketchError("the sketch is empty")
    return nodes, last


def _terms(nodes: dict[Hashable, ShapeNode], node: ShapeNode) -> list[tuple[Hashable, ...]]:
    """A total's operands grouped as terms: a count, optionally followed by a deeper total it multiplies."""
    terms: list[tuple[Hashable, ...]] = []
    for a in node.inputs:
        if a != "Ans" and nodes[a].kind == "Inter" and terms:
            terms[-1] = (*terms[-1], a)
        else:
            terms.append((a,))
    return terms


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Shape:
    """A sketch's graph with the digest of every node; :meth:`template` and :meth:`sketch` read it."""

    def __init__(self, nodes: dict[Hashable, ShapeNode], query: Hashable) -> None:
        self.nodes, self.query = nodes, query
        self.digests: dict[Hashable, str] = {"Ans": "Ans"}
        for var, node in self.nodes.items():  # solution order: operands come first
            self.digests[var] = _sha(f"{node.kind} {node.op}({','.join(self._operand_digests(node))})")

    def _operand_digests(self, node: ShapeNode) -> list[str]:
        if node.op == "total":
            return sorted("*".join(self.digests[a] for a in t) for t in _terms(self.nodes, node))
        ds = [self.digests[a] for a in node.inputs]
        return sorted(ds) if node.op.startswith("sum[") else ds

    def template(self) -> tuple[str, int]:
        """The template hash (the query's digest) and its bucket (mod 23)."""
        digest = self.digests[self.query]
        return digest, int(digest, 16) % MOD

    def sketch(self) -> str:
        """The canonical sketch text."""
        return _emit(self)

    def ordered_inputs(self, node: ShapeNode) -> list[Hashable]:
        """The operands in canonical order (digest order where the operation is commutative)."""
        if node.op == "total":
            terms = _terms(self.nodes, node)
            terms.sort(key=lambda t: "*".join(self.digests[a] for a in t))
            return [a for t in terms for a in t]
        if node.op.startswith("sum["):
            return sorted(node.inputs, key=lambda a: self.digests[a])
        return list(node.inputs)


def canonical_sketch(sketch: str) -> str:
    """The sketch rewritten canonically: operands in digest order, variables renamed by first definition.

    >>> a = "Inst v1 = const[](;0); Inst v2 = const[](;0); Inst v3 = one[](v1;0); Inst v4 = sum[](v3,v2;0)"
    >>> b = "Inst v1 = const[](;0); Inst v2 = one[](v1;0); Inst v3 = const[](;0); Inst v4 = sum[](v3,v2;0)"
    >>> c = canonical_sketch(a)
    >>> c == canonical_sketch(b), canonical_sketch(c) == c
    (True, True)
    """
    return _emit(Shape(*_parse(sketch)))


def _emit(shape: Shape) -> str:
    names: dict[Hashable, str] = {"Ans": "Ans"}
    parts: list[str] = []
    stack: list[tuple[Hashable, bool]] = [(shape.query, False)]
    while stack:  # post-order without recursion: depth-12 sketches with reuse stay shallow anyway
        var, expanded = stack.pop()
        if var in names:
            continue
        node = shape.nodes[var]
        order = shape.ordered_inputs(node)
        if not expanded:
            stack.append((var, True))
            stack.extend((a, False) for a in reversed(order) if a not in names)
            continue
        names[var] = f"v{len(names)}"
        args = ",".join(names[a] for a in order)
        body = f"total({args})" if node.op == "total" else f"{node.op}({args};0)"
        parts.append(f"{node.kind} {names[var]} = {body}")
    return "; ".join(parts)


def template_hash(sketch: str) -> tuple[str, int]:
    """The canonical template hash of a sketch (the digest of its query's shape) and its bucket (mod 23).

    Operand order and variable names do not change it:

    >>> a = template_hash("Inst v1 = const[](;0); Inst v2 = one[plus](Ans;0); Inst v3 = diff[](v1,v2;0)")
    >>> a == template_hash("Inst v1 = one[plus](Ans;0); Inst v2 = const[](;0); Inst v3 = diff[](v2,v1;0)")
    True
    """
    return Shape(*_parse(sketch)).template()
