"""The shift between two sets of timing samples, with a distribution-free confidence interval. Pure Python.

The estimate is the Hodges–Lehmann shift: the median of all n x m differences ``current_j - baseline_i``. Its
confidence interval is the one that inverts the Mann–Whitney (Wilcoxon rank-sum) test: the differences of rank
``C`` and ``n*m + 1 - C``, with ``C = floor(n*m/2 - z * sqrt(n*m*(n+m+1)/12))`` (the normal approximation of the
U distribution; ties are not corrected for, which only widens the interval). It assumes only that the two sets
differ by a shift, not that either is normal: one slow outlier moves the estimate by one rank, not by its size.
Applied to log-times, the shift is a ratio (log(current/baseline)), the form of run-to-run timing noise.

When ``C < 1`` (too few samples for the confidence asked), the interval is unbounded (-inf, inf).

The order statistics of the n*m differences: numpy's partition over all of them when numpy is importable and
n*m is moderate (the same IEEE differences, so the same values), else pure Python: a sort for small n*m, and
for large n*m a selection over the sorted-matrix structure (rows = current samples ascending, columns =
baseline samples descending, so every row and column is sorted), O((n+m) log(nm)) per rank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

#: n*m at or below which the differences are simply built and sorted (faster than selecting in Python)
BRUTE_FORCE_PAIRS = 25_000
#: n*m range in which numpy (when importable) partitions all the differences at once (at most 32 MB)
NUMPY_PAIRS = (1_000, 4_000_000)


@dataclass(frozen=True)
class Shift:
    """current - baseline in the units of the samples given (log-times: a log ratio)."""

    estimate: float  # Hodges–Lehmann
    low: float  # confidence interval; -inf / inf when there are too few samples to bound it
    high: float
    n_baseline: int
    n_current: int
    confidence: float

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)


def rank_bound(n: int, m: int, confidence: float) -> int:
    """C: the 1-based rank of the lower end of the interval among the n*m sorted differences (< 1: unbounded)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence!r} must be between 0 and 1")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12))


def shift(baseline: Sequence[float], current: Sequence[float], confidence: float = 0.99) -> Shift:
    """Hodges–Lehmann shift of ``current`` over ``baseline`` and its Mann–Whitney confidence interval."""
    n, m = len(baseline), len(current)
    if n == 0 or m == 0:
        raise ValueError("shift needs samples on both sides")
    c = rank_bound(n, m, confidence)
    total = n * m
    ranks = [(total + 1) // 2, (total + 2) // 2]  # the median: one rank, or the two middle ones
    if c >= 1:
        ranks += [c, total + 1 - c]
    values = order_statistics(baseline, current, ranks)
    estimate = (values[0] + values[1]) / 2
    low, high = (values[2], values[3]) if c >= 1 else (-math.inf, math.inf)
    return Shift(estimate, low, high, n, m, confidence)


def order_statistics(baseline: Sequence[float], current: Sequence[float], ranks: Sequence[int]) -> list[float]:
    """The differences ``current_j - baseline_i`` of the given 1-based ranks (in sorted order of all n*m)."""
    x = sorted(baseline, reverse=True)  # descending: row j, y_j - x_i, ascends with i
    y = sorted(current)
    total = len(x) * len(y)
    for k in ranks:
        if not 1 <= k <= total:
            raise ValueError(f"rank {k} outside 1..{total}")
    numpy = _numpy() if NUMPY_PAIRS[0] < total <= NUMPY_PAIRS[1] else None
    if numpy is not None:
        differences = numpy.subtract.outer(numpy.asarray(y, dtype=float), numpy.asarray(x, dtype=float)).ravel()
        picked = numpy.partition(differences, sorted({k - 1 for k in ranks}))
        return [float(picked[k - 1]) for k in ranks]
    if total <= BRUTE_FORCE_PAIRS:
        ordered = [yj - xi for yj in y for xi in x]
        ordered.sort()
        return [ordered[k - 1] for k in ranks]
    cache: dict[int, float] = {}
    return [cache.setdefault(k, _select(x, y, k)) for k in ranks]


def _numpy() -> Any:
    try:
        import numpy
    except ImportError:  # not a dependency of ours: the pure-Python paths give the same values
        return None
    return numpy


def _select(x: list[float], y: list[float], k: int) -> float:
    """The k-th smallest (1-based) of y_j - x_i; x descending, y ascending (rows and columns ascend).

    Each row j keeps an active column range [lo_j, hi_j): columns left of it are known to rank below k, right
    of it above. The pivot is the weighted median of the active rows' middle elements, so each round drops at
    least about a quarter of the active elements; the rest are sorted once few remain."""
    n, m = len(x), len(y)
    lo, hi = [0] * m, [n] * m
    below, above = [0] * m, [0] * m
    while True:
        active = sum(h - low for low, h in zip(lo, hi, strict=True))
        if active <= 2 * (n + m):
            rest = sorted(y[j] - x[i] for j in range(m) for i in range(lo[j], hi[j]))
            return rest[k - sum(lo) - 1]
        middles = sorted((y[j] - x[(lo[j] + hi[j]) // 2], hi[j] - lo[j]) for j in range(m) if hi[j] > lo[j])
        half, seen = active / 2, 0
        pivot = middles[-1][0]
        for value, weight in middles:
            seen += weight
            if seen >= half:
                pivot = value
                break
        # below[j] = #{i: y_j - x_i < pivot}, above[j] = #{i: y_j - x_i <= pivot}: both fall as j rises (staircase)
        p = q = n
        for j in range(m):
            yj = y[j]
            while p > 0 and yj - x[p - 1] >= pivot:
                p -= 1
            while q > 0 and yj - x[q - 1] > pivot:
                q -= 1
            below[j], above[j] = p, q
        if k <= sum(below):
            hi = [min(h, b) for h, b in zip(hi, below, strict=True)]
        elif k > sum(above):
            lo = [max(low, a) for low, a in zip(lo, above, strict=True)]
        else:
            return pivot
