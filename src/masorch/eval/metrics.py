"""Accuracy statistics: means, percentile-bootstrap intervals and paired differences (pure).

Every function is a pure function of its inputs and seed. Intervals are percentile-bootstrap
intervals: resample the samples with replacement ``n_boot`` times, take the statistic of each
resample, and report the ``alpha/2`` and ``1 - alpha/2`` quantiles (linear interpolation, numpy's
default). The paired difference resamples *sample indices* once and uses the same indices for both
systems, so the interval reflects that both were run on the same questions.

>>> iv = bootstrap_mean([1, 1, 1, 1])
>>> (iv.mean, iv.low, iv.high)
(1.0, 1.0, 1.0)
>>> d = paired_difference([1, 1, 0, 1], [0, 1, 0, 0])
>>> d.mean
0.5
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: Default number of bootstrap resamples.
N_BOOT = 2000
#: Default confidence level of the intervals: 95 %.
ALPHA = 0.05


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval ``[low, high]`` over ``n`` samples."""

    mean: float
    low: float
    high: float
    n: int

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in ``[low, high]``."""
        return self.low <= value <= self.high

    @property
    def degenerate(self) -> bool:
        """Whether the interval has no width over at least one sample.

        A percentile interval has no width when (nearly) every resample gives the same statistic:
        for a mean, when all samples are alike (all right, all wrong, one sample, or a paired
        difference that is the same on every sample). Such an interval understates the uncertainty.

        >>> Interval(1.0, 1.0, 1.0, 5).degenerate, Interval(0.0, 0.0, 0.0, 0).degenerate
        (True, False)
        """
        return self.n > 0 and self.low == self.high

    def format(self, scale: float = 100.0, digits: int = 1) -> str:
        """``'mean [low, high]'`` scaled (percent by default); ``'n/a'`` over no samples.

        >>> Interval(0.5, 0.25, 0.75, 4).format()
        '50.0 [25.0, 75.0]'
        >>> Interval(0.0, 0.0, 0.0, 0).format()
        'n/a'
        """
        if self.n == 0:
            return "n/a"
        f = f"{{:.{digits}f}}"
        return f"{f.format(self.mean * scale)} [{f.format(self.low * scale)}, {f.format(self.high * scale)}]"


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean; 0.0 for no values.

    >>> mean([1, 0, 1, 0])
    0.5
    >>> mean([])
    0.0
    """
    return float(sum(values) / len(values)) if values else 0.0


def resample_indices(n: int, n_boot: int = N_BOOT, seed: int = 0) -> npt.NDArray[np.int64]:
    """``n_boot`` rows of ``n`` indices drawn with replacement from ``range(n)`` (seeded)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_boot, n), dtype=np.int64)


def interval_from_resamples(
    values: Sequence[float], indices: npt.NDArray[np.int64], alpha: float = ALPHA
) -> Interval:
    """The percentile interval of the mean of ``values`` over the given resamples (rows of indices).

    >>> import numpy as np
    >>> iv = interval_from_resamples([0, 1], np.array([[0, 0], [0, 1], [1, 1]]), alpha=0.5)
    >>> (iv.mean, iv.low, iv.high)
    (0.5, 0.25, 0.75)
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Interval(0.0, 0.0, 0.0, 0)
    means = data[indices].mean(axis=1)
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Interval(float(data.mean()), float(low), float(high), int(data.size))


def bootstrap_mean(
    values: Sequence[float], *, n_boot: int = N_BOOT, alpha: float = ALPHA, seed: int = 0
) -> Interval:
    """The mean of ``values`` with its percentile-bootstrap interval (``1 - alpha`` level).

    >>> iv = bootstrap_mean([0, 1] * 50, seed=1)
    >>> iv.mean, iv.low < 0.5 < iv.high, 0.35 < iv.low, iv.high < 0.65
    (0.5, True, True, True)
    """
    if not values:
        return Interval(0.0, 0.0, 0.0, 0)
    return interval_from_resamples(values, resample_indices(len(values), n_boot, seed), alpha)


def paired_difference(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_boot: int = N_BOOT,
    alpha: float = ALPHA,
    seed: int = 0,
) -> Interval:
    """Mean of ``a[i] - b[i]`` with a paired-bootstrap interval (same resampled indices for both).

    ``a`` and ``b`` must be aligned: position ``i`` is the same sample for both systems.

    >>> paired_difference([1, 0, 1], [1, 0, 1]).format()
    '0.0 [0.0, 0.0]'
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} vs {len(b)}")
    diffs = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    return bootstrap_mean(diffs, n_boot=n_boot, alpha=alpha, seed=seed)


def bootstrap_ratio(
    num: Sequence[float], den: Sequence[float], *, n_boot: int = N_BOOT, alpha: float = ALPHA, seed: int = 0
) -> Interval:
    """``sum(num) / sum(den)`` with a percentile-bootstrap interval that resamples the samples
    (the pairs ``num[i], den[i]``: e.g. a run's good calls and all its calls); 0 where ``den`` sums to 0.

    >>> iv = bootstrap_ratio([1, 2, 0], [1, 2, 2])
    >>> iv.mean, iv.low <= iv.mean <= iv.high, iv.n
    (0.6, True, 3)
    """
    return paired_ratio_difference(
        num, den, [0.0] * len(num), [1.0] * len(num), n_boot=n_boot, alpha=alpha, seed=seed
    )


def paired_ratio_difference(
    num_a: Sequence[float],
    den_a: Sequence[float],
    num_b: Sequence[float],
    den_b: Sequence[float],
    *,
    n_boot: int = N_BOOT,
    alpha: float = ALPHA,
    seed: int = 0,
) -> Interval:
    """``sum(num_a)/sum(den_a) - sum(num_b)/sum(den_b)`` over aligned samples, with a paired
    bootstrap interval (the same resampled indices for both ratios); a ratio over 0 is 0.

    >>> paired_ratio_difference([1, 1], [1, 1], [0, 1], [1, 1]).mean
    0.5
    """
    arrays = [np.asarray(x, dtype=float) for x in (num_a, den_a, num_b, den_b)]
    n = arrays[0].size
    if any(a.size != n for a in arrays):
        raise ValueError(f"ratio samples differ in length: {[a.size for a in arrays]}")
    if n == 0:
        return Interval(0.0, 0.0, 0.0, 0)

    def ratio(num: npt.NDArray[np.float64], den: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        total = den.sum(axis=-1)
        return np.where(total > 0, num.sum(axis=-1) / np.where(total > 0, total, 1.0), 0.0)

    idx = resample_indices(n, n_boot, seed)
    point = ratio(arrays[0], arrays[1]) - ratio(arrays[2], arrays[3])
    draws = ratio(arrays[0][idx], arrays[1][idx]) - ratio(arrays[2][idx], arrays[3][idx])
    low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    return Interval(float(point), float(low), float(high), n)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points (cost, accuracy) not dominated by another (cheaper-or-equal and better).

    >>> pareto_front([(1.0, 0.5), (2.0, 0.4), (3.0, 0.9), (1.0, 0.6)])
    [2, 3]
    """
    front = []
    for i, (cost_i, acc_i) in enumerate(points):
        dominated = any(
            (c <= cost_i and a >= acc_i) and (c < cost_i or a > acc_i)
            for j, (c, a) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(i)
    return front
