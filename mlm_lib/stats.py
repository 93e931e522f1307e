"""How sure a number is: intervals for the book's comparisons.

A chapter that compares two runs draws a conclusion only when the difference is larger than the
noise. Two kinds of noise matter here:

- *between runs*: another seed gives another model. :func:`seed_interval` turns the results of a
  few seeds into a mean with a 95% interval (Student's t, since there are only a handful);
- *between test items*: the same model on other held-out blanks scores differently.
  :func:`proportion_interval` gives an accuracy of k right out of n its Wilson interval,
  :func:`bootstrap_interval` resamples the blanks; :func:`paired_difference` compares two models
  on the *same* blanks, which is much sharper than comparing two separate intervals.

An :class:`Interval` prints as ``0.234 [0.221, 0.247]``; :meth:`Interval.excludes_zero` and
:func:`distinguishable` say whether a difference is measurable.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

LEVEL = 0.95  # every interval of the book is a 95% interval
BOOTSTRAP_RESAMPLES = 2000  # enough for the 2.5% and 97.5% percentiles to settle to ~0.001
# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom (any statistics table, e.g.
# NIST/SEMATECH e-Handbook 1.3.6.7.2); beyond 30 the normal 1.96 is within 2%.
T_95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)
Z_95 = 1.96


@dataclass(frozen=True)
class Interval:
    """An estimate with its 95% interval [low, high] and how many values it rests on."""

    mean: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        return f"{self.mean:.3f} [{self.low:.3f}, {self.high:.3f}]"

    def excludes_zero(self) -> bool:
        """For a difference: is zero outside the interval (a measurable difference)?"""
        return self.low > 0 or self.high < 0

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high


def _values(values: Sequence[float] | torch.Tensor, least: int) -> torch.Tensor:
    v = torch.as_tensor(values, dtype=torch.float64).flatten()
    if v.numel() < least:
        raise ValueError(f"need at least {least} values, got {v.numel()}")
    if not bool(torch.isfinite(v).all()):
        raise ValueError("values must be finite")
    return v


def mean_and_standard_error(values: Sequence[float] | torch.Tensor) -> tuple[float, float]:
    """The mean and its standard error, sample std / sqrt(n) (n - 1 in the variance)."""
    v = _values(values, 2)
    return float(v.mean()), float(v.std(unbiased=True)) / math.sqrt(v.numel())


def t_quantile(dof: int) -> float:
    """The two-sided 95% quantile of Student's t with ``dof`` degrees of freedom."""
    if dof < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {dof}")
    return T_95[dof - 1] if dof <= len(T_95) else Z_95


def seed_interval(values: Sequence[float] | torch.Tensor) -> Interval:
    """Mean over runs that differ only in their seed, with a 95% t interval (at least 2 runs)."""
    mean, se = mean_and_standard_error(values)
    n = len(_values(values, 2))
    half = t_quantile(n - 1) * se
    return Interval(mean, mean - half, mean + half, n)


def proportion_interval(successes: int, n: int) -> Interval:
    """An accuracy of ``successes`` out of ``n`` independent items with its 95% Wilson score
    interval (unlike p +- 1.96 SE it stays inside [0, 1] and behaves near 0 and 1)."""
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got {successes} of {n}")
    p, z2 = successes / n, Z_95 ** 2
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z_95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), n)


def bootstrap_interval(scores: Sequence[float] | torch.Tensor, seed: int = 0,
                       resamples: int = BOOTSTRAP_RESAMPLES) -> Interval:
    """Mean of per-item scores (e.g. 1.0 for a blank filled right, else 0.0) with a 95%
    percentile-bootstrap interval: resample the items with replacement, read the 2.5% and 97.5%
    points of the resampled means. Seeded, so a chapter prints the same interval every time."""
    v = _values(scores, 1)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(v.numel(), (resamples, v.numel()), generator=g)
    means = v[idx].mean(dim=1)
    tail = (1 - LEVEL) / 2
    low, high = torch.quantile(means, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return Interval(float(v.mean()), low, high, v.numel())


def paired_difference(a: Sequence[float] | torch.Tensor, b: Sequence[float] | torch.Tensor,
                      seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES) -> Interval:
    """Mean of a - b over the same items (both models scored on the same blanks), with a 95%
    bootstrap interval; the pairing removes the items' own difficulty from the noise."""
    a, b = _values(a, 1), _values(b, 1)
    if a.shape != b.shape:
        raise ValueError(f"paired scores must have the same length, got {a.numel()} and {b.numel()}")
    return bootstrap_interval(a - b, seed, resamples)


def distinguishable(a: Interval, b: Interval) -> bool:
    """Whether two separately measured results can be told apart: their intervals do not overlap.
    (Conservative: overlapping intervals can still differ; pair the items when you can.)"""
    return not a.overlaps(b)
