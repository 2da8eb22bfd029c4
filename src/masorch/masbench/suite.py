"""Generating many instances (optionally on several processes) and the paper-sized suite."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from masorch.errors import UsageError
from masorch.masbench.axes import MAX_VALUE, MIN_VALUE, check_axis_value, generate_instance
from masorch.masbench.splits import check_split


@dataclass(frozen=True)
class SuitePart:
    """One file of a suite: an axis, a split, the values and how many instances each value gets."""

    axis: str
    split: str
    values: tuple[int, ...]
    total: int

    def counts(self) -> list[tuple[int, int]]:
        """(value, count) pairs: ``total`` spread evenly over the values, the remainder to the first."""
        base, extra = divmod(self.total, len(self.values))
        return [(v, base + (1 if i < extra else 0)) for i, v in enumerate(self.values)]

    @property
    def filename(self) -> str:
        """The file stem of this part: ``<axis>_<split>``."""
        return f"{self.axis}_{self.split}"


def _span(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(range(lo, hi + 1))


PAPER_SUITE: tuple[SuitePart, ...] = (
    SuitePart("depth", "train", _span(2, 8), 3993),
    SuitePart("depth", "test", _span(2, 12), 1195),
    SuitePart("horizon", "train", _span(2, 6), 2174),
    SuitePart("horizon", "test", _span(2, 8), 567),
    SuitePart("breadth", "train", _span(2, 4), 2000),
    SuitePart("breadth", "test", _span(2, 8), 676),
    SuitePart("parallel", "train", _span(2, 4), 1807),
    SuitePart("parallel", "test", _span(2, 8), 567),
    SuitePart("robustness", "train", _span(2, 6), 3000),
    SuitePart("robustness", "test", _span(2, 8), 600),
)
"""The MAS-Orchestra paper's split sizes and value ranges (trained low, tested beyond)."""


def parse_values(text: str) -> tuple[int, ...]:
    """Read axis values like ``2-12``, ``2-4,8`` or ``3``; sorted, without repeats."""
    out: dict[int, None] = {}
    for part in text.replace(" ", "").split(","):
        lo, sep, hi = part.partition("-")
        try:
            a, b = (int(lo), int(hi)) if sep else (int(lo), int(lo))
        except ValueError:
            raise UsageError(f"cannot read the values {text!r}", hint="write e.g. 2-12 or 2-4,8") from None
        if a > b or a < MIN_VALUE or b > MAX_VALUE:
            raise UsageError(
                f"the values {part!r} are not a range within {MIN_VALUE}..{MAX_VALUE}", hint="write e.g. 2-12"
            )
        for v in range(a, b + 1):
            out[v] = None
    return tuple(sorted(out))


Job = tuple[str, int, str, int, int]

#: Most instances of one file: its jobs are listed up front (the paper suite's largest file: 3,993).
MAX_FILE_INSTANCES = 1_000_000


def _one(job: Job) -> dict[str, Any]:
    axis, value, split, seed, index = job
    return generate_instance(axis, value, split=split, seed=seed, index=index)


def jobs_for(axis: str, counts: Sequence[tuple[int, int]], split: str, seed: int) -> list[Job]:
    """The instance arguments of one file, value by value, index 0..count-1."""
    check_split(split)
    for value, _ in counts:
        check_axis_value(axis, value)
    total = sum(n for _, n in counts)
    if total > MAX_FILE_INSTANCES:
        raise UsageError(
            f"{total:,} instances in one file is over the limit of {MAX_FILE_INSTANCES:,}",
            hint="lower --n or give fewer --values; make several files for more",
        )
    return [(axis, value, split, seed, i) for value, n in counts for i in range(n)]


def generate(
    jobs: Sequence[Job], *, workers: int = 1, progress: Callable[[int], None] | None = None
) -> Generator[dict[str, Any], None, None]:
    """Yield the instances of ``jobs`` in order; ``workers`` > 1 uses processes (same output).

    ``progress(1)`` is called as each instance is made, before it is yielded: a consumer that stops
    once it has taken them all (``itertools.islice``) still sees the count reach ``len(jobs)``.
    """
    if workers <= 1:
        for job in jobs:
            rec = _one(job)
            if progress:
                progress(1)
            yield rec
        return
    ctx = multiprocessing.get_context("spawn" if multiprocessing.get_start_method() == "spawn" else "fork")
    with ctx.Pool(workers) as pool:
        for rec in pool.imap(_one, jobs, chunksize=16):
            if progress:
                progress(1)
            yield rec
