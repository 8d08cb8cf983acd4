"""Summaries of timing samples: quantile, median, relative spread, a rank test between two sets, a bimodality
test, and :class:`SampleSet` (samples kept sorted as they arrive). Pure, at the base layer, so that reports,
baselines, the gate and the timing engine read samples the same way."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass


def quantile_sorted(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (q in [0, 1]) of samples already in ascending order."""
    if not ordered:
        raise ValueError("no samples")
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def quantile(samples: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (q in [0, 1]) of unsorted samples."""
    return quantile_sorted(sorted(samples), q)


def median(samples: Sequence[float]) -> float:
    return quantile(samples, 0.5)


def spread_sorted(ordered: Sequence[float]) -> float:
    """(p80 - p20) / median of samples already in ascending order (inf when the median is not positive)."""
    mid = quantile_sorted(ordered, 0.5)
    return (quantile_sorted(ordered, 0.8) - quantile_sorted(ordered, 0.2)) / mid if mid > 0 else math.inf


def relative_spread(samples: Sequence[float]) -> float:
    """(p80 - p20) / median: a robust width of the central 60% of samples, relative to the median."""
    return spread_sorted(sorted(samples))


class SampleSet:
    """Samples in arrival order plus a sorted copy kept by insertion (``bisect.insort``): adding a sample is a
    binary search and one list insertion (a memmove), never a sort, and quantiles read the sorted copy. The
    relative spread after each addition is kept too (``spread_at``), for the stopping rule's plateau test."""

    def __init__(self, samples: Iterable[float] = ()) -> None:
        self.values: list[float] = []
        self.ordered: list[float] = []
        self._spreads: list[float] = []
        for value in samples:
            self.add(value)

    def add(self, value: float) -> None:
        self.values.append(value)
        insort(self.ordered, value)
        self._spreads.append(spread_sorted(self.ordered))

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[float]:
        return iter(self.values)

    def quantile(self, q: float) -> float:
        return quantile_sorted(self.ordered, q)

    @property
    def median(self) -> float:
        return quantile_sorted(self.ordered, 0.5)

    @property
    def spread(self) -> float:
        """(p80 - p20) / median of the samples now held."""
        return self._spreads[-1] if self._spreads else math.inf

    def spread_at(self, n: int) -> float:
        """The relative spread of the first ``n`` samples (as it was when the n-th arrived)."""
        return self._spreads[n - 1]


def rank_z(a: Sequence[float], b_sorted: Sequence[float]) -> float:
    """Mann-Whitney U of ``a`` against ``b_sorted`` (ascending) as a z score, by its normal approximation with
    the tie correction (timers tick, so equal samples are common): positive when ``a`` tends to be larger.
    0.0 when either side is empty or every sample is equal. O((n + m) log(n + m))."""
    n, m = len(a), len(b_sorted)
    if n == 0 or m == 0:
        return 0.0
    u = 0.0
    for x in a:
        below = bisect_left(b_sorted, x)
        u += below + 0.5 * (bisect_right(b_sorted, x) - below)
    total = n + m
    ties = sum(t**3 - t for t in _run_lengths(sorted([*a, *b_sorted])))
    variance = n * m / 12 * (total + 1 - ties / (total * (total - 1)))
    return (u - n * m / 2) / math.sqrt(variance) if variance > 0 else 0.0


def _run_lengths(ordered: Sequence[float]) -> Iterator[int]:
    """Lengths of the runs of equal values in ascending samples."""
    run = 0
    for i, x in enumerate(ordered):
        run += 1
        if i + 1 == len(ordered) or ordered[i + 1] != x:
            yield run
            run = 0


@dataclass(frozen=True)
class Modes:
    """Two groups of samples split at the best two-means cut, and the density between them."""

    low: float  # the low group's median
    high: float  # the high group's median
    n_low: int
    n_high: int
    near_low: int  # samples within a sixth of (high - low) of low
    near_high: int  # ... of high
    between: int  # samples in the middle third between low and high


def two_modes(ordered: Sequence[float]) -> Modes | None:
    """The split of ascending samples into two groups that minimises their summed squared deviations (the
    two-means cut, O(n) with prefix sums), with the counts ``bimodal`` tests. None for fewer than 4 samples."""
    n = len(ordered)
    if n < 4:
        return None
    prefix, prefix_sq = [0.0], [0.0]
    for x in ordered:
        prefix.append(prefix[-1] + x)
        prefix_sq.append(prefix_sq[-1] + x * x)

    def sse(i: int, j: int) -> float:  # of ordered[i:j]
        total = prefix[j] - prefix[i]
        return prefix_sq[j] - prefix_sq[i] - total * total / (j - i)

    cut = min(range(2, n - 1), key=lambda k: sse(0, k) + sse(k, n))
    low, high = quantile_sorted(ordered[:cut], 0.5), quantile_sorted(ordered[cut:], 0.5)
    width = (high - low) / 3

    def count(lo: float, hi: float) -> int:
        return bisect_right(ordered, hi) - bisect_left(ordered, lo)

    return Modes(
        low=low,
        high=high,
        n_low=cut,
        n_high=n - cut,
        near_low=count(low - width / 2, low + width / 2),
        near_high=count(high - width / 2, high + width / 2),
        between=count(low + width, high - width),
    )


def bimodal(
    ordered: Sequence[float],
    *,
    min_gap: float = 0.1,
    min_fraction: float = 0.1,
    min_count: int = 5,
    alpha: float = 1e-3,
) -> Modes | None:
    """The two modes of ascending samples when they are bimodal, else None.

    NB: the test. Cut the samples where the two groups' summed squared deviations are smallest (two-means);
    each group must hold at least ``min_fraction`` of the samples and ``min_count`` of them, and their medians
    must differ by more than ``min_gap`` of the low one. Then the valley: take the middle third between the two
    medians and the emptier of the two equally wide windows centred on them. For any unimodal density the
    middle third holds, in expectation, at least as many samples as that window (it lies nearer the mode than
    one of them), so of the samples in the two, the middle third's share is at least one half. Bimodal when a
    one-sided binomial test rejects that share at ``alpha`` (so a window of w samples over an empty valley needs
    2**-w < alpha: w >= 10 at 1e-3)."""
    modes = two_modes(ordered)
    if modes is None or modes.low <= 0:
        return None
    n = len(ordered)
    smaller = min(modes.n_low, modes.n_high)
    if smaller < max(min_count, min_fraction * n) or modes.high <= modes.low * (1 + min_gap):
        return None
    window = min(modes.near_low, modes.near_high)
    if window < min_count or modes.between >= window:
        return None
    trials = window + modes.between
    p = sum(math.comb(trials, k) for k in range(modes.between + 1)) / 2**trials
    return modes if p < alpha else None
