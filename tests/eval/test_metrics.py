"""Bootstrap intervals and paired differences against values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from masorch.eval.metrics import (
    Interval,
    bootstrap_mean,
    interval_from_resamples,
    mean,
    paired_difference,
    pareto_front,
    resample_indices,
)


def test_interval_from_explicit_resamples_matches_hand_computation() -> None:
    values = [1, 0, 0, 1, 1]
    rows = np.array(
        [
            [0, 0, 0, 0, 0],  # mean 1.0
            [1, 1, 1, 1, 1],  # 0.0
            [0, 1, 2, 3, 4],  # 0.6
            [0, 3, 4, 1, 1],  # 0.6
            [1, 2, 1, 2, 0],  # 0.2
        ]
    )
    # sorted means: 0.0, 0.2, 0.6, 0.6, 1.0; alpha 0.5 -> quantiles 0.25 and 0.75 -> positions 1 and 3
    iv = interval_from_resamples(values, rows, alpha=0.5)
    assert iv.mean == pytest.approx(0.6)
    assert (iv.low, iv.high, iv.n) == (pytest.approx(0.2), pytest.approx(0.6), 5)
    # alpha 0.2 -> quantiles 0.1 and 0.9 -> positions 0.4 and 3.6: 0.0 + 0.4*0.2, 0.6 + 0.6*0.4
    iv = interval_from_resamples(values, rows, alpha=0.2)
    assert iv.low == pytest.approx(0.08)
    assert iv.high == pytest.approx(0.84)


def test_bootstrap_of_one_success_in_five_matches_the_binomial_quantiles() -> None:
    # A resample's mean is k/5 with k ~ Binomial(5, 0.2): P(k=0)=0.328 covers the 2.5% quantile,
    # cumulative P(k<=2)=0.942 < 0.975 <= P(k<=3)=0.993, so the 97.5% quantile is 3/5.
    iv = bootstrap_mean([1, 0, 0, 0, 0], n_boot=20000, seed=3)
    assert (iv.mean, iv.low, iv.high) == (pytest.approx(0.2), 0.0, pytest.approx(0.6))


def test_paired_difference_uses_the_same_indices_for_both_systems() -> None:
    a = [1, 1, 1, 0]
    b = [0, 1, 1, 0]
    # differences [1, 0, 0, 0]: k ~ Binomial(4, 0.25); P(k<=2)=0.949 < 0.975 <= P(k<=3)=0.996
    d = paired_difference(a, b, n_boot=20000, seed=1)
    assert (d.mean, d.low, d.high, d.n) == (pytest.approx(0.25), 0.0, pytest.approx(0.75), 4)
    # identical to bootstrapping the per-sample differences with the same resampled indices
    rows = resample_indices(4, 500, seed=9)
    same = interval_from_resamples([1.0, 0.0, 0.0, 0.0], rows)
    assert paired_difference(a, b, n_boot=500, seed=9) == same


def test_paired_difference_is_narrower_than_unpaired_when_systems_agree() -> None:
    # Two systems right on the same 30 of 60 questions, one extra for a: the paired interval is tight.
    a = [1] * 31 + [0] * 29
    b = [1] * 30 + [0] * 30
    d = paired_difference(a, b, seed=0)
    assert d.mean == pytest.approx(1 / 60)
    assert d.low == 0.0 and d.high <= 0.05
    unpaired = bootstrap_mean(a, seed=0).high - bootstrap_mean(b, seed=1).low
    assert d.high < unpaired


def test_mismatched_pairs_and_empty_inputs() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        paired_difference([1, 0], [1])
    assert bootstrap_mean([]) == Interval(0.0, 0.0, 0.0, 0)
    assert mean([]) == 0.0


def test_pareto_front_and_interval_format() -> None:
    points = [(0.10, 0.50), (0.05, 0.50), (0.30, 0.70), (0.20, 0.40)]
    assert pareto_front(points) == [1, 2]
    assert Interval(0.25, 0.0, 0.75, 4).format() == "25.0 [0.0, 75.0]"
    assert Interval(0.25, 0.0, 0.75, 4).contains(0.5)
