"""The statistics the chapters lean on: known values, coverage, determinism, clear errors."""

from __future__ import annotations

import math

import pytest
import torch

from mlm_lib.stats import (Interval, bootstrap_interval, distinguishable, mean_and_standard_error,
                           paired_difference, proportion_interval, seed_interval,
                           t_quantile)


def test_mean_and_standard_error_by_hand():
    mean, se = mean_and_standard_error([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5
    assert se == pytest.approx(math.sqrt(5 / 3) / 2)  # sample variance 5/3, n = 4


def test_t_quantiles_fall_towards_the_normal():
    assert t_quantile(1) == 12.706 and t_quantile(4) == 2.776 and t_quantile(1000) == 1.96
    values = [t_quantile(d) for d in range(1, 32)]
    assert all(a > b for a, b in zip(values, values[1:]))
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile(0)


def test_seed_interval_is_mean_plus_minus_t_times_se():
    iv = seed_interval([0.20, 0.22, 0.21, 0.25, 0.19])
    mean, se = mean_and_standard_error([0.20, 0.22, 0.21, 0.25, 0.19])
    assert iv.mean == pytest.approx(mean) and iv.n == 5
    assert iv.high - iv.mean == pytest.approx(2.776 * se)
    assert str(iv).startswith("0.214 [")
    with pytest.raises(ValueError, match="at least 2"):
        seed_interval([0.3])


def test_bootstrap_interval_covers_the_truth_and_narrows_with_more_items():
    g = torch.Generator().manual_seed(0)
    small = (torch.rand(200, generator=g) < 0.3).double()
    large = (torch.rand(5000, generator=g) < 0.3).double()
    a, b = bootstrap_interval(small), bootstrap_interval(large)
    assert a.low < 0.3 < a.high and b.low < 0.3 < b.high
    assert (b.high - b.low) < 0.5 * (a.high - a.low)  # width ~ 1/sqrt(n)
    # the normal approximation for a proportion agrees with the percentile bootstrap
    half = 1.96 * math.sqrt(b.mean * (1 - b.mean) / 5000)
    assert b.high - b.low == pytest.approx(2 * half, rel=0.1)
    assert bootstrap_interval(small) == a  # seeded: the same interval every time


def test_paired_difference_sees_a_real_gap_and_not_a_null_one():
    g = torch.Generator().manual_seed(1)
    hard = torch.rand(2000, generator=g)  # how hard each blank is, shared by both models
    weak = (torch.rand(2000, generator=g) > hard).double()
    strong = torch.maximum(weak, (torch.rand(2000, generator=g) < 0.05).double())
    assert paired_difference(strong, weak).excludes_zero()
    same = paired_difference(weak, weak[torch.randperm(2000, generator=g)])
    assert not same.excludes_zero()
    with pytest.raises(ValueError, match="same length"):
        paired_difference([1.0, 0.0], [1.0])


def test_distinguishable_means_non_overlapping():
    assert distinguishable(Interval(0.5, 0.45, 0.55, 10), Interval(0.7, 0.6, 0.8, 10))
    assert not distinguishable(Interval(0.5, 0.45, 0.62, 10), Interval(0.7, 0.6, 0.8, 10))


def test_bad_values_are_clear_errors():
    with pytest.raises(ValueError, match="finite"):
        bootstrap_interval([0.1, float("nan")])
    with pytest.raises(ValueError, match="at least 1"):
        bootstrap_interval([])


def test_the_t_table_is_students():
    stats = pytest.importorskip("scipy.stats")
    for dof in range(1, 31):
        assert t_quantile(dof) == pytest.approx(stats.t.ppf(0.975, dof), abs=5e-4)


def test_proportion_interval_is_wilsons():
    # Wilson's interval is the set of p0 whose score test accepts the observed share: at its ends
    # the observed share lies exactly 1.96 standard errors (taken at p0) away from p0.
    iv = proportion_interval(81, 263)
    assert iv.mean == pytest.approx(81 / 263)
    for p0 in (iv.low, iv.high):
        assert abs(iv.mean - p0) == pytest.approx(1.96 * math.sqrt(p0 * (1 - p0) / 263))
    assert proportion_interval(0, 50).low == 0.0 and proportion_interval(0, 50).high > 0.0
    assert proportion_interval(50, 50).high == 1.0
    with pytest.raises(ValueError, match="successes"):
        proportion_interval(5, 3)
