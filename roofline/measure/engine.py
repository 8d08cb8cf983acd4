"""The timing engine: one loop for every backend (CUDA events, CUDA graph replay, CPU clock).

The loop is pure logic over injected parts -- a backend that times one call, an optional flush run before
every timed call (outside the timed region), an optional clock monitor, and a host clock for the budget --
so its behaviour is tested on any machine with fakes. Device backends live in ``backends.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Protocol

from roofline.measure.stats import StoppingRule
from roofline.samples import median, quantile, relative_spread


class Backend(Protocol):
    """Times one call of ``fn`` in seconds; ``before`` runs first, outside the timed region."""

    method: str  # 'cuda-events' | 'cuda-graph' | 'cpu-clock'

    def time_once(self, fn: Callable[[], object], before: Callable[[], object] | None) -> float: ...

    def synchronize(self) -> None: ...


class ClockMonitor(Protocol):
    """Samples the SM clock after each timed call: (clock MHz or None, throttle reasons)."""

    max_clock_mhz: float | None

    def sample(self) -> tuple[float | None, list[str]]: ...


@dataclass(frozen=True)
class Measurement:
    median_s: float
    p20_s: float
    p80_s: float
    samples_s: list[float]
    method: str  # how each sample was taken: 'cuda-events', 'cuda-graph' (per call), 'cpu-clock'
    cache: str  # 'cold' (flushed before every sample) or 'warm'
    stop_reason: str
    warmup_calls: int
    elapsed_s: float  # wall time spent measuring, warm-up and flushes included
    throttled: list[bool] = field(default_factory=list)  # per sample
    clocks_mhz: list[float | None] = field(default_factory=list)  # per sample
    throttle_reasons: list[str] = field(default_factory=list)  # union over samples
    threads: int | None = None  # CPU: torch's intra-op thread count
    discarded: int = 0  # early samples dropped because the timings were still drifting

    @property
    def n(self) -> int:
        return len(self.samples_s)

    @property
    def relative_spread(self) -> float:
        return relative_spread(self.samples_s)

    @property
    def throttled_count(self) -> int:
        return sum(self.throttled)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["n"] = self.n
        data["relative_spread"] = self.relative_spread
        data["throttled_count"] = self.throttled_count
        return data


# NB: a sample taken below 75% of the maximum SM clock is marked throttled (measurement-facts.md).
THROTTLE_FRACTION = 0.75


def measure(
    fn: Callable[[], object],
    backend: Backend,
    *,
    flush: Callable[[], object] | None = None,
    rule: StoppingRule | None = None,
    warmup_s: float = 0.02,
    max_warmup_calls: int = 1000,
    clock: ClockMonitor | None = None,
    now: Callable[[], float] = time.perf_counter,
    threads: int | None = None,
) -> Measurement:
    """Time ``fn``: one untimed call (lazy init), one timed call as the first estimate, warm-up calls sized
    from it to fill ``warmup_s``, then timed samples until ``rule`` says stop. With ``flush`` every sample
    is cold-cache (the flush runs before it, untimed); without it the cache is warm.

    NB: the rule's clock starts with the first sample: a slow first call (library initialisation, autotuning)
    must not use up the sampling budget before any sample is taken. When the samples drift (the first window's
    median and the last one's differ by more than the rule's drift_tolerance), the older half is discarded as
    late warm-up and counted in ``discarded``; the time cap still holds."""
    rule = rule or StoppingRule()
    start = now()
    fn()
    backend.synchronize()
    estimate = backend.time_once(fn, flush)
    warmup_calls = int(min(max(warmup_s / estimate, 1), max_warmup_calls)) if estimate > 0 else max_warmup_calls
    for _ in range(warmup_calls):
        fn()
    backend.synchronize()

    sampling_start = now()
    samples: list[float] = []
    throttled: list[bool] = []
    clocks: list[float | None] = []
    reasons: set[str] = set()
    discarded = 0
    stop: str | None = None
    while stop is None:
        samples.append(backend.time_once(fn, flush))
        if clock is not None:
            mhz, why = clock.sample()
            clocks.append(mhz)
            low = mhz is not None and clock.max_clock_mhz is not None and mhz < THROTTLE_FRACTION * clock.max_clock_mhz
            throttled.append(bool(low or why))
            reasons.update(why)
        if rule.drifting(samples):
            half = len(samples) // 2
            discarded += half
            del samples[:half], throttled[:half], clocks[:half]
        stop = rule.decide(samples, now() - sampling_start)
    return Measurement(
        median_s=median(samples),
        p20_s=quantile(samples, 0.2),
        p80_s=quantile(samples, 0.8),
        samples_s=samples,
        method=backend.method,
        cache="cold" if flush is not None else "warm",
        stop_reason=stop,
        warmup_calls=warmup_calls,
        elapsed_s=now() - start,
        throttled=throttled,
        clocks_mhz=clocks,
        throttle_reasons=sorted(reasons),
        threads=threads,
        discarded=discarded,
    )
