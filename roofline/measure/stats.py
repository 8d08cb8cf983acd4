"""The adaptive stopping rule of the timing engine (sample statistics live in roofline.samples). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from roofline.samples import median, relative_spread


@dataclass(frozen=True)
class StoppingRule:
    """When to stop sampling: after min_samples and min_time_s, once the relative spread is under
    target_spread, or once it has stopped shrinking (changed by less than plateau_tolerance of itself over
    the last plateau_window samples); always at max_time_s or max_samples.

    NB: the defaults follow measurement-facts.md: >= 10 samples, a minimum total time, then a 1-2% spread
    target or a settled spread estimate, with a time cap.
    """

    min_samples: int = 10
    min_time_s: float = 0.05
    target_spread: float = 0.02
    plateau_window: int = 10
    plateau_tolerance: float = 0.1
    max_time_s: float = 2.0
    max_samples: int = 5000
    drift_tolerance: float = 0.1

    def drifting(self, samples: Sequence[float]) -> bool:
        """True when the last plateau_window samples' median differs from the first window's by more than
        drift_tolerance: the device was still settling (clocks ramping, lazy autotuning) when sampling began."""
        window = self.plateau_window
        if len(samples) < 2 * window:
            return False
        first, last = median(samples[:window]), median(samples[-window:])
        return first > 0 and abs(last / first - 1) > self.drift_tolerance

    def decide(self, samples: Sequence[float], elapsed_s: float) -> str | None:
        """The reason to stop now ('converged', 'spread-stable', 'time-cap', 'sample-cap'), or None."""
        n = len(samples)
        if elapsed_s >= self.max_time_s:
            return "time-cap"
        if n >= self.max_samples:
            return "sample-cap"
        if n < self.min_samples or elapsed_s < self.min_time_s:
            return None
        spread = relative_spread(samples)
        if spread <= self.target_spread:
            return "converged"
        if n >= self.min_samples + self.plateau_window:
            before = relative_spread(samples[: n - self.plateau_window])
            if abs(spread - before) <= self.plateau_tolerance * spread:
                return "spread-stable"
        return None
