"""The MASBench vocabulary: four category chains of four levels, read from package data files."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from masorch.errors import UsageError

CHAIN_FILES = ("city", "wildlife", "school", "ecosystem")
"""The vocabulary files under ``masbench/data/`` (one category chain each), in a fixed order."""

_NAME = re.compile(r"^[A-Z][A-Za-z]*( [A-Z][A-Za-z]*)*$")
_FORBIDDEN_WORDS = {"And", "Each", "The", "Of", "More", "Than", "Times", "Sum", "Difference"}


@dataclass(frozen=True)
class SubCategory:
    """One sub-category of a level: a name and its item names."""

    name: str
    items: tuple[str, ...]


@dataclass(frozen=True)
class CategoryLevel:
    """One level of a chain: the category (plural, as written in questions) and its sub-categories."""

    category: str
    subcategories: tuple[SubCategory, ...]


@dataclass(frozen=True)
class Chain:
    """A category chain: four levels, outermost first (e.g. Districts > Markets > Stalls > Products)."""

    name: str
    levels: tuple[CategoryLevel, ...]


def parse_chain(text: str, source: str = "<text>") -> Chain:
    """Parse one vocabulary file (``chain``, ``level``, ``sub name: a, b, ...`` lines) and validate it."""
    name = ""
    levels: list[tuple[str, list[SubCategory]]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word == "chain":
            name = rest.strip()
        elif word == "level":
            levels.append((rest.strip(), []))
        elif word == "sub" and levels and ":" in rest:
            sub, _, items = rest.partition(":")
            levels[-1][1].append(SubCategory(sub.strip(), tuple(i.strip() for i in items.split(","))))
        else:
            raise UsageError(
                f"{source}:{lineno}: cannot read the line {line!r}",
                hint="use 'chain NAME', 'level CATEGORY' or 'sub NAME: item, item, ...'",
            )
    chain = Chain(name, tuple(CategoryLevel(c, tuple(s)) for c, s in levels))
    _validate(chain, source)
    return chain


def _validate(chain: Chain, source: str) -> None:
    if not chain.name or len(chain.levels) != 4:
        raise UsageError(f"{source}: a chain needs a name and exactly four levels", hint="fix the data file")
    seen: set[str] = {lvl.category for lvl in chain.levels}
    for lvl in chain.levels:
        if len(lvl.subcategories) < 2:
            raise UsageError(f"{source}: level {lvl.category} needs at least two sub-categories", hint="")
        for sub in lvl.subcategories:
            if len(sub.items) < 8:
                raise UsageError(f"{source}: sub-category {sub.name!r} needs at least 8 items", hint="")
            for item in sub.items:
                words = set(item.split(" "))
                if not _NAME.match(item) or words & _FORBIDDEN_WORDS:
                    raise UsageError(
                        f"{source}: item name {item!r} is not allowed",
                        hint="use capitalised letters-only words, no apostrophes and no grammar words",
                    )
                if item in seen:
                    raise UsageError(
                        f"{source}: the name {item!r} occurs twice in the chain", hint="rename it"
                    )
                seen.add(item)


@lru_cache(maxsize=1)
def load_chains() -> tuple[Chain, ...]:
    """The four built-in chains, parsed once from ``masorch/masbench/data/*.txt``."""
    root = resources.files("masorch.masbench") / "data"
    chains = tuple(parse_chain((root / f"{n}.txt").read_text("utf-8"), f"{n}.txt") for n in CHAIN_FILES)
    check_disjoint(chains)
    return chains


def check_disjoint(chains: tuple[Chain, ...]) -> None:
    """Raise unless no item name occurs in two chains (worlds from different chains never share names)."""
    owner: dict[str, str] = {}
    for chain in chains:
        for lvl in chain.levels:
            for sub in lvl.subcategories:
                for item in sub.items:
                    if owner.setdefault(item, chain.name) != chain.name:
                        raise UsageError(
                            f"the name {item!r} occurs in chains {owner[item]} and {chain.name}",
                            hint="rename it in one of the data files",
                        )
