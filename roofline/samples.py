"""The one home of sample statistics: quantile, median, relative spread, a rank test between two sets, a bimodality
test, :class:`SampleSet` (samples kept sorted as they arrive), and the shift between two sets with its confidence
interval (:func:`shift`: the gate's comparison). Pure, at the base layer, so that reports, baselines, the gate and
the timing engine read samples the same way.

NB: the shift. The estimate is the Hodges–Lehmann shift: the median of all n x m differences
``current_j - baseline_i``. Its confidence interval is the one that inverts the Mann–Whitney (Wilcoxon rank-sum)
test: the differences of rank ``C`` and ``n*m + 1 - C``, with ``C = floor(n*m/2 - z * sqrt(n*m*(n+m+1)/12))``
(the normal approximation of the U distribution; ties are not corrected for, which only widens the interval). It
assumes only that the two sets differ by a shift, not that either is normal: one slow outlier moves the estimate
by one rank, not by its size. Applied to log-times, the shift is a ratio (log(current/baseline)), the form of
run-to-run timing noise.

When ``C < 1`` (too few samples for the confidence asked), the interval is unbounded (-inf, inf).

The order statistics of the n*m differences: numpy's partition over all of them when numpy is importable and
n*m is moderate (the same IEEE differences, so the same values), else pure Python: a sort for small n*m, and
for large n*m a selection over the sorted-matrix structure (rows = current samples ascending, columns =
baseline samples descending, so every row and column is sorted), O((n+m) log(nm)) per rank. :func:`shifts` gives
the shifts of many pairs at once (numpy: the pairs of the same sizes stacked, their differences sorted row by row;
:func:`shift_rows` the same for pairs already stacked as two arrays) and :func:`quantile_rows` the quantiles of many
sets (:func:`quantile_columns`: of the sorted rows of an array): the same values as one at a time, with or without
numpy.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any


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


# ------------------------------------------------------------------- the shift between two sets (the gate)

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


def numpy_or_none() -> Any:
    """numpy where importable, else None (the callers' pure-Python paths give the same values)."""
    return _numpy()


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


#: pairs of sets shifted at once by :func:`shifts` (numpy): at most this many differences in one array (32 MB)
BATCH_DIFFERENCES = 4_000_000


def shifts(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], confidence: float = 0.99, *, vectorised: bool = True
) -> list[Shift]:
    """:func:`shift` of each (baseline, current) pair, the same values: with numpy (where importable and
    ``vectorised``), the pairs of the same sizes are stacked and all their differences partitioned in one call per
    batch (sorted: numpy's SIMD sort of each row is faster than its partition here; the gate of 100,000 points:
    200,000 shifts of 20 x 20 samples in about a second, not ten); else one
    :func:`shift` per pair. The differences are the same IEEE subtractions (``current_j - baseline_i``) and their
    order statistics the same values, in whatever order they are partitioned, so both paths agree exactly."""
    numpy = _numpy() if vectorised else None
    if numpy is None:
        return [shift(x, y, confidence) for x, y in pairs]
    out: list[Shift | None] = [None] * len(pairs)
    by_size: dict[tuple[int, int], list[int]] = {}
    for index, (x, y) in enumerate(pairs):
        n, m = len(x), len(y)
        if n == 0 or m == 0:
            raise ValueError("shift needs samples on both sides")
        by_size.setdefault((n, m), []).append(index)
    for indices in by_size.values():
        x = numpy.array([pairs[i][0] for i in indices], dtype=float)  # (P, n)
        y = numpy.array([pairs[i][1] for i in indices], dtype=float)  # (P, m)
        for i, found in zip(indices, shift_rows(x, y, confidence), strict=True):
            out[i] = found
    return out  # type: ignore[return-value]


def shift_rows(x: Any, y: Any, confidence: float = 0.99) -> list[Shift]:
    """:func:`shift` of each row of the numpy arrays ``x`` (P, n: the baselines) and ``y`` (P, m: the currents),
    the same values (:func:`shifts` with numpy): the n x m differences of as many rows as BATCH_DIFFERENCES allows
    sorted at once."""
    rows, n = x.shape
    m = y.shape[1]
    if n == 0 or m == 0:
        raise ValueError("shift needs samples on both sides")
    c = rank_bound(n, m, confidence)
    total = n * m
    ranks = [(total + 1) // 2, (total + 2) // 2]
    if c >= 1:
        ranks += [c, total + 1 - c]
    step = max(1, BATCH_DIFFERENCES // total)
    out: list[Shift] = []
    for start in range(0, rows, step):
        xs, ys = x[start : start + step], y[start : start + step]
        differences = (ys[:, :, None] - xs[:, None, :]).reshape(len(xs), total)
        differences.sort(axis=1)  # NB: numpy's SIMD sort of each row: faster than a partition at these sizes
        for values in differences[:, [k - 1 for k in ranks]].tolist():
            estimate = (values[0] + values[1]) / 2
            low, high = (values[2], values[3]) if c >= 1 else (-math.inf, math.inf)
            out.append(Shift(estimate, low, high, n, m, confidence))
    return out


def quantile_rows(
    sets: Sequence[Sequence[float]], qs: Sequence[float], *, vectorised: bool = True
) -> list[list[float]]:
    """:func:`quantile` of each set at each of ``qs`` (each set non-empty, no NaN), the same values: with numpy
    (where importable and ``vectorised``), the sets of one length sorted as rows of one array and each quantile
    interpolated for all of them at once (the same IEEE operations in the same order); else one by one."""
    numpy = _numpy() if vectorised else None
    if numpy is None:
        return [[quantile_sorted(ordered, q) for q in qs] for ordered in map(sorted, sets)]
    out: list[list[float]] = [[] for _ in sets]
    by_size: dict[int, list[int]] = {}
    for index, values in enumerate(sets):
        by_size.setdefault(len(values), []).append(index)
    for n, indices in by_size.items():
        if n == 0:
            raise ValueError("no samples")
        ordered = numpy.array([sets[i] for i in indices], dtype=float)
        ordered.sort(axis=1)
        columns = [column.tolist() for column in quantile_columns(ordered, qs)]
        for i, values in zip(indices, zip(*columns, strict=True), strict=True):
            out[i] = list(values)
    return out


def quantile_columns(ordered: Any, qs: Sequence[float]) -> list[Any]:
    """Each quantile ``qs`` of each row of ``ordered`` (a numpy array, each row sorted), as one array per quantile:
    :func:`quantile_sorted`'s arithmetic, a column at a time (the same IEEE operations in the same order)."""
    n = ordered.shape[1]
    columns = []
    for q in qs:
        position = q * (n - 1)
        low = math.floor(position)
        high = min(low + 1, n - 1)
        columns.append(ordered[:, low] + (ordered[:, high] - ordered[:, low]) * (position - low))
    return columns
