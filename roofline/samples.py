"""Summaries of timing samples: quantile, median, relative spread. Pure, at the base layer, so that reports,
baselines and the gate read samples the way the timing engine does."""

from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(samples: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (q in [0, 1]) of unsorted samples."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(samples: Sequence[float]) -> float:
    return quantile(samples, 0.5)


def relative_spread(samples: Sequence[float]) -> float:
    """(p80 - p20) / median: a robust width of the central 60% of samples, relative to the median."""
    mid = median(samples)
    return (quantile(samples, 0.8) - quantile(samples, 0.2)) / mid if mid > 0 else math.inf
