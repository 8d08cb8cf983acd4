"""The adaptive stopping rule of the timing engine, its drift rule and its stability check (sample statistics
live in roofline.samples). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from roofline.samples import SampleSet, bimodal, quantile_sorted, rank_z
from roofline.units import format_time


@dataclass(frozen=True)
class StoppingRule:
    """When to stop sampling: after min_samples and min_time_s, once the relative spread is under
    target_spread, or once it has stopped shrinking (changed by less than plateau_tolerance of itself over
    the last plateau_window samples); always at max_time_s or max_samples.

    NB: the defaults follow measurement-facts.md: >= 10 samples, a minimum total time, then a 1-2% spread
    target or a settled spread estimate, with a time cap.

    The drift rule (:meth:`drift`) and the stability check (:meth:`confirm_count`, :meth:`disagreement`) are
    described on their methods and in docs/bench.md ("How a row is timed").
    """

    min_samples: int = 10
    min_time_s: float = 0.05
    target_spread: float = 0.02
    plateau_window: int = 10
    plateau_tolerance: float = 0.1
    max_time_s: float = 2.0
    max_samples: int = 5000
    drift_tolerance: float = 0.1  # a leading block is drift only when its median is this far from the settled one
    drift_block: int = 10  # samples per block of the drift test
    drift_z: float = 3.5  # ... and its rank test against the settled samples reaches |z| >= this (p < 5e-4)
    confirm_fraction: float = 0.25  # the second sample set: this fraction of the first set's samples ...
    confirm_min_samples: int = 10  # ... or this many, whichever is more (time: see confirm_count)
    confirm_tolerance: float = 0.05  # the two sets disagree when their medians differ by more than this ...
    confirm_z: float = 3.0  # ... and the rank test between them reaches |z| >= this (p < 0.003)
    bimodal_gap: float = 0.1  # two modes count only when their medians differ by more than this

    def drift(self, samples: Sequence[float]) -> int:
        """How many leading samples (arrival order) to discard as measured drift: 0 for a drift-free stream.

        NB: the test. The latest half of the samples is the settled level. The earlier half is cut into blocks
        of drift_block samples; from the first block on, a block is drift when (a) its median differs from the
        settled median by more than drift_tolerance and (b) a Mann-Whitney rank test (tie-corrected) of its
        samples against the settled ones gives |z| >= drift_z (two-sided p < 5e-4 at 3.5), in the same direction
        as (a) and as the blocks before it. The first block that is not drift ends the scan; the cut then moves
        to the sample where the drift ended: past the leading run of later samples still beyond the tolerance
        (in the drift's direction), or back over the last drifted block's trailing samples already within it.
        On independent samples (no drift) both conditions must hold by chance; the engine runs the test only
        when the stopping rule would stop (and again after a drop), so a drift-free stream keeps every sample
        (tests/test_timing.py checks several seeds of 10% noise) and a transient slow phase in mid-run is judged
        with every sample in, not taken for a new level."""
        block = self.drift_block
        n = len(samples)
        half = n // 2
        if half < block:
            return 0
        settled = sorted(samples[half:])
        settled_median = quantile_sorted(settled, 0.5)
        if settled_median <= 0:
            return 0
        direction, drop = 0, 0
        for start in range(0, half - block + 1, block):
            part = samples[start : start + block]
            shift = quantile_sorted(sorted(part), 0.5) / settled_median - 1
            z = rank_z(part, settled)
            sign = 1 if shift > 0 else -1
            if abs(shift) <= self.drift_tolerance or abs(z) < self.drift_z or (z > 0) != (shift > 0):
                break
            if direction and sign != direction:
                break
            direction, drop = sign, start + block
        if not drop:
            return 0
        limit = settled_median * (1 + direction * self.drift_tolerance)

        def beyond(i: int) -> bool:  # still drifted: past the tolerance, in the drift's direction
            return (samples[i] - limit) * direction > 0

        end = drop
        while end < n - block and beyond(end):  # where the drift ended: the leading drifted run after the blocks
            end += 1
        if end > drop:
            return end
        while end > drop - block and not beyond(end - 1):  # ... or inside the last drifted block
            end -= 1
        return end

    def decide(self, samples: Sequence[float] | SampleSet, elapsed_s: float) -> str | None:
        """The reason to stop now ('converged', 'spread-stable', 'time-cap', 'sample-cap'), or None. A
        :class:`SampleSet` answers from its kept spreads; a plain sequence is sorted once."""
        n = len(samples)
        if elapsed_s >= self.max_time_s:
            return "time-cap"
        if n >= self.max_samples:
            return "sample-cap"
        if n < self.min_samples or elapsed_s < self.min_time_s:
            return None
        stats = samples if isinstance(samples, SampleSet) else SampleSet(samples)
        spread = stats.spread
        if spread <= self.target_spread:
            return "converged"
        if n >= self.min_samples + self.plateau_window:
            before = stats.spread_at(n - self.plateau_window)
            if abs(spread - before) <= self.plateau_tolerance * spread:
                return "spread-stable"
        return None

    # ------------------------------------------------------------------------------------ stability check

    def confirm_count(self, n: int) -> int:
        """Samples in the second, independent set taken after a first set of ``n``: a quarter of n, at least
        confirm_min_samples. NB: the budget: the engine also stops the second set once it has 5 samples and
        has used confirm_fraction of max_time_s, so it costs at most max(confirm_fraction of the first set's
        samples, 10 samples) and, for slow calls, about confirm_fraction of the row's time cap."""
        return max(self.confirm_min_samples, math.ceil(self.confirm_fraction * n))

    def confirm_time_s(self) -> float:
        return self.confirm_fraction * self.max_time_s

    def disagreement(self, first: SampleSet, second: SampleSet) -> str | None:
        """Why the first sample set cannot be trusted, or None: the second set's median differs from the
        first's by more than confirm_tolerance with a Mann-Whitney |z| >= confirm_z (the same direction), or
        the first set is bimodal (roofline.samples.bimodal, modes more than bimodal_gap apart)."""
        if len(first) and len(second) and first.median > 0:
            ratio = second.median / first.median
            z = rank_z(second.values, first.ordered)
            if abs(ratio - 1) > self.confirm_tolerance and abs(z) >= self.confirm_z and (z > 0) == (ratio > 1):
                return (
                    f"a second sample set's median is {ratio:.2f}x the first's "
                    f"({format_time(second.median)} vs {format_time(first.median)})"
                )
        modes = bimodal(first.ordered, min_gap=self.bimodal_gap)
        if modes is not None:
            return (
                f"bimodal: {modes.n_high} of {len(first)} samples near {format_time(modes.high)}, "
                f"the rest near {format_time(modes.low)}"
            )
        return None
