"""Seeded randomness and template-disjoint splits (train: sketch buckets 0..15, test: 16..22)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from typing import Any

from masorch.errors import UsageError

SPLITS = ("train", "test")
BUCKETS = {"train": range(0, 16), "test": range(16, 23)}
"""Sketch-hash buckets (sha256 of the sketch, mod 23) each split accepts."""


class FastRandom(random.Random):
    """``random.Random`` drawing bounded integers from one float each (faster; bias below 2**-40)."""

    def _randbelow(self, n: int) -> int:
        return int(self.random() * n)

    def choice(self, seq):  # type: ignore[no-untyped-def]
        """One element of a non-empty sequence."""
        return seq[int(self.random() * len(seq))]


def derive_rng(*parts: object) -> random.Random:
    """A seeded generator from the sha256 of the parts (seed, axis, value, split, index, attempt, ...)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode("utf-8")).digest()
    return FastRandom(int.from_bytes(digest[:16], "big"))


def check_split(split: str) -> str:
    """Return ``split`` or raise a usage error naming the accepted splits."""
    if split not in BUCKETS:
        raise UsageError(f"unknown split {split!r}", hint="use --split train or --split test")
    return split


def accepts(split: str, bucket: int) -> bool:
    """Whether a sub-task whose sketch falls in ``bucket`` belongs to ``split``."""
    return bucket in BUCKETS[split]


def split_overlap(train: Iterable[dict[str, Any]], test: Iterable[dict[str, Any]]) -> dict[str, list[str]]:
    """Template hashes and question texts that occur in both splits (both lists empty when disjoint)."""

    def collect(records: Iterable[dict[str, Any]]) -> tuple[dict[str, None], dict[str, None]]:
        hashes: dict[str, None] = {}
        texts: dict[str, None] = {}
        for rec in records:
            texts[rec["question"]] = None
            for sub in rec["subtasks"]:
                if sub.get("template_hash"):
                    hashes[sub["template_hash"]] = None
        return hashes, texts

    tr_h, tr_t = collect(train)
    te_h, te_t = collect(test)
    return {
        "template_hashes": [h for h in tr_h if h in te_h],
        "questions": [t for t in tr_t if t in te_t],
    }
