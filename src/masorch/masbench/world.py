"""Worlds: a category chain cut to 2-4 consecutive levels, items per level and a structure graph."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from typing import Any

from masorch.masbench.vocab import Chain

MAX_ITEMS_PER_LEVEL = 8


@dataclass(frozen=True)
class World:
    """A structure graph: items of level ``i`` contain items of level ``i + 1`` along ``edges``.

    ``levels`` are the chain's level indices in use (consecutive), ``categories`` and
    ``subcategories`` name them, ``items`` lists the chosen item names per level.
    """

    chain: str
    levels: tuple[int, ...]
    categories: tuple[str, ...]
    subcategories: tuple[str, ...]
    items: tuple[tuple[str, ...], ...]
    edges: tuple[tuple[str, str], ...]
    _level_of: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    _children: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for lvl, names in enumerate(self.items):
            for name in names:
                self._level_of[name] = lvl
                self._children[name] = []
        for parent, child in self.edges:
            self._children[parent].append(child)

    def level_of(self, name: str) -> int:
        """The level (0 = outermost used level) of an item name."""
        return self._level_of[name]

    def children(self, name: str) -> list[str]:
        """The items directly inside ``name``, in edge order."""
        return self._children[name]

    def keys(self) -> list[tuple[str, int, str]]:
        """(chain, chain level, sub-category) per level: worlds with no key in common share no name."""
        return [(self.chain, lv, sub) for lv, sub in zip(self.levels, self.subcategories, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view of the world."""
        return {
            "chain": self.chain,
            "levels": [
                {"level": lv, "category": cat, "subcategory": sub, "items": list(names)}
                for lv, cat, sub, names in zip(
                    self.levels, self.categories, self.subcategories, self.items, strict=True
                )
            ],
            "edges": [list(e) for e in self.edges],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> World:
        """Rebuild a world from :meth:`to_dict` output."""
        levels = data["levels"]
        return cls(
            chain=data["chain"],
            levels=tuple(int(lv["level"]) for lv in levels),
            categories=tuple(lv["category"] for lv in levels),
            subcategories=tuple(lv["subcategory"] for lv in levels),
            items=tuple(tuple(lv["items"]) for lv in levels),
            edges=tuple((p, c) for p, c in data["edges"]),
        )


def _pick_chain(
    rng: random.Random, chains: tuple[Chain, ...], levels: range, avoid: frozenset[tuple[str, int, str]]
) -> tuple[Chain, list[int]]:
    """A random chain with a sub-category outside ``avoid`` at every level, and those sub-categories."""
    chain_order = list(range(len(chains)))
    rng.shuffle(chain_order)
    for ci in chain_order:
        chain = chains[ci]
        subs: list[int] = []
        for lv in levels:
            free = [
                si
                for si, sub in enumerate(chain.levels[lv].subcategories)
                if (chain.name, lv, sub.name) not in avoid
            ]
            if not free:
                break
            subs.append(rng.choice(free))
        if len(subs) == len(levels):
            return chain, subs
    raise ValueError("no chain has a free sub-category at every level; too many disjoint worlds")


def _edges(
    rng: random.Random, sizes: list[int], *, min_edges: int, fanout: int, hub: tuple[int, int]
) -> set[tuple[int, int, int]]:
    """(level, parent, child) edges: every item linked up and down, the hub's ``fanout`` children,
    then random extra edges up to ``min_edges``."""
    n_lv = len(sizes)
    edges: set[tuple[int, int, int]] = set()
    for i in range(n_lv - 1):
        for c in range(sizes[i + 1]):
            edges.add((i, rng.randrange(sizes[i]), c))
        parents = {e[1] for e in edges if e[0] == i}
        for p in range(sizes[i]):
            if p not in parents:
                edges.add((i, p, rng.randrange(sizes[i + 1])))
    if fanout:
        i, p = hub
        edges = {e for e in edges if (e[0], e[1]) != hub}
        edges.update((i, p, c) for c in rng.sample(range(sizes[i + 1]), fanout))
        has_parent = {e[2] for e in edges if e[0] == i}
        for c in range(sizes[i + 1]):
            if c not in has_parent:
                edges.add((i, 1 + rng.randrange(sizes[i] - 1), c))
    if len(edges) < min_edges:
        all_pairs = [(i, p, c) for i in range(n_lv - 1) for p in range(sizes[i]) for c in range(sizes[i + 1])]
        missing = [e for e in all_pairs if e not in edges and (e[0], e[1]) != hub]
        edges.update(rng.sample(missing, min(len(missing), min_edges - len(edges))))
    return edges


def build_world(
    rng: random.Random,
    chains: tuple[Chain, ...],
    *,
    min_edges: int,
    avoid: frozenset[tuple[str, int, str]] = frozenset(),
    n_levels: int | None = None,
    fanout: int = 0,
) -> World:
    """A random world with at least ``min_edges`` structure edges, using no (chain, level, sub) in ``avoid``.

    Every item of a non-last level contains at least one item and every item of a non-first level is
    inside at least one item; extra edges are added at random until there are enough. ``fanout`` > 0
    gives one item exactly that many children (at most ``MAX_ITEMS_PER_LEVEL``).
    """
    n_lv = n_levels if n_levels is not None else rng.choice((2, 3, 3, 4, 4))
    n_lv = max(n_lv, 2)
    start = rng.randint(0, 4 - n_lv)
    chain, subs = _pick_chain(rng, chains, range(start, start + n_lv), avoid)
    levels = tuple(range(start, start + n_lv))
    sizes = [rng.randint(2, 4) for _ in levels]
    while sum(a * b for a, b in itertools.pairwise(sizes)) < min_edges + min_edges // 3:
        grow = [i for i, s in enumerate(sizes) if s < MAX_ITEMS_PER_LEVEL]
        if not grow:
            break
        sizes[min(grow, key=lambda i: (sizes[i], i))] += 1
    hub = (rng.randrange(n_lv - 1), 0) if fanout else (-1, -1)
    if fanout:
        sizes[hub[0] + 1] = max(sizes[hub[0] + 1], fanout)
    items: list[tuple[str, ...]] = []
    for lv, si, size in zip(levels, subs, sizes, strict=True):
        pool = list(chain.levels[lv].subcategories[si].items)
        items.append(tuple(rng.sample(pool, size)))
    ordered = sorted(_edges(rng, sizes, min_edges=min_edges, fanout=fanout, hub=hub))
    return World(
        chain=chain.name,
        levels=levels,
        categories=tuple(chain.levels[lv].category for lv in levels),
        subcategories=tuple(
            chain.levels[lv].subcategories[si].name for lv, si in zip(levels, subs, strict=True)
        ),
        items=tuple(items),
        edges=tuple((items[i][p], items[i + 1][c]) for i, p, c in ordered),
    )
