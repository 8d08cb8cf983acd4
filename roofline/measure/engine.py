"""The timing engine: one loop for every backend (CUDA events, CUDA graph replay, CPU clock).

The loop is pure logic over injected parts -- a backend that times one call, an optional flush run before
every timed call (outside the timed region), an optional clock monitor, and a host clock for the budget --
so its behaviour is tested on any machine with fakes. Device backends live in ``backends.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Protocol, runtime_checkable

from roofline.measure.stopping import StoppingRule
from roofline.samples import SampleSet, relative_spread


class Backend(Protocol):
    """Times one call of ``fn`` in seconds; ``before`` runs first, outside the timed region."""

    method: str  # 'cuda-events' | 'cuda-graph' | 'cpu-clock'

    def time_once(self, fn: Callable[[], object], before: Callable[[], object] | None) -> float: ...

    def synchronize(self) -> None: ...


@runtime_checkable
class BatchBackend(Backend, Protocol):
    """A backend that can also time ``k`` calls queued back to back (one synchronisation for the batch)."""

    def time_batch(
        self,
        fn: Callable[[], object],
        lead: Callable[[float], object] | None,
        before: Callable[[], object] | None,
        k: int,
    ) -> list[float]: ...


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
    elapsed_s: float  # wall time spent measuring, warm-up, flushes, second set and re-measurement included
    throttled: list[bool] = field(default_factory=list)  # per sample
    clocks_mhz: list[float | None] = field(default_factory=list)  # per sample
    throttle_reasons: list[str] = field(default_factory=list)  # union over samples
    threads: int | None = None  # CPU: torch's intra-op thread count
    discarded: int = 0  # leading samples dropped as measured drift (StoppingRule.drift), over every pass
    confirm_samples_s: list[float] = field(default_factory=list)  # the second, independent set (check=True)
    remeasured: bool = False  # the first measurement failed the stability check and was taken again
    remeasure_reason: str = ""  # why the first measurement was not trusted
    unstable: bool = False  # the re-measurement failed the check too
    unstable_reason: str = ""  # why (StoppingRule.disagreement): a second set that disagrees, or bimodal
    batch: int = 1  # samples per synchronisation (1: each sample synchronised on its own)

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
#: the second sample set stops at its time budget only once it holds this many samples (a rank test needs some)
CONFIRM_FLOOR = 5
_CAPS = ("time-cap", "sample-cap")
#: samples per synchronisation at most (``batch_s`` set): a batch is about batch_s of the op's time
MAX_BATCH = 50


@dataclass(frozen=True)
class _Sampler:
    """How samples are taken: one at a time (``before`` -- the flush, then the lead -- ahead of each call, then a
    synchronisation), or ``batch`` at a time where the backend can (``cover`` once, then per sample the flush and
    the timed call, all queued back to back, one synchronisation)."""

    fn: Callable[[], object]
    backend: Backend
    before: Callable[[], object] | None
    flush: Callable[[], object] | None = None
    cover: Callable[[float], object] | None = None  # the batch's lead: a sleep of the seconds it is given
    batch: int = 1

    def take(self, limit: int) -> list[float]:
        k = max(1, min(self.batch, limit))
        if k == 1 or not isinstance(self.backend, BatchBackend):
            return [self.backend.time_once(self.fn, self.before)]
        return list(self.backend.time_batch(self.fn, self.cover, self.flush, k))


def _chain(*parts: Callable[[], object] | None) -> Callable[[], object] | None:
    present = [p for p in parts if p is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def both() -> None:
        for part in present:
            part()

    return both


def batch_size(estimate_s: float, batch_s: float, supported: bool) -> int:
    """Samples per synchronisation: about ``batch_s`` of calls of ``estimate_s`` each (1 to MAX_BATCH); 1 when
    ``batch_s`` is 0 or the backend cannot batch. Pure."""
    if batch_s <= 0 or not supported or estimate_s <= 0:
        return 1
    return max(1, min(MAX_BATCH, int(batch_s / estimate_s)))


@dataclass
class _Pass:
    """One sample set as it is collected: the samples (kept sorted), their clocks, what drift removed."""

    stats: SampleSet = field(default_factory=SampleSet)
    throttled: list[bool] = field(default_factory=list)
    clocks: list[float | None] = field(default_factory=list)
    reasons: set[str] = field(default_factory=set)
    discarded: int = 0
    stop: str = ""

    def take(self, sampler: _Sampler, clock: ClockMonitor | None, limit: int = MAX_BATCH) -> None:
        """One sample, or one batch (at most ``limit``); the clock is read once after it and holds for each."""
        taken = sampler.take(limit)
        for value in taken:
            self.stats.add(value)
        if clock is not None:
            mhz, why = clock.sample()
            low = mhz is not None and clock.max_clock_mhz is not None and mhz < THROTTLE_FRACTION * clock.max_clock_mhz
            self.clocks.extend([mhz] * len(taken))
            self.throttled.extend([bool(low or why)] * len(taken))
            self.reasons.update(why)

    def drop(self, k: int) -> None:
        """Discard the k oldest samples (the sorted copy and its spreads are rebuilt: rare, O(n log n))."""
        self.discarded += k
        self.stats = SampleSet(self.stats.values[k:])
        del self.throttled[:k], self.clocks[:k]


def _main_pass(sampler: _Sampler, rule: StoppingRule, clock: ClockMonitor | None, now: Callable[[], float]) -> _Pass:
    """Samples until ``rule`` says stop (asked after each sample or batch). Whenever it would stop, the drift test
    runs: measured drift is dropped and sampling goes on (unless a cap was reached)."""
    run = _Pass()
    start = now()
    stop: str | None = None
    while stop is None:
        run.take(sampler, clock, max(rule.max_samples - len(run.stats), 1))
        stop = rule.decide(run.stats, now() - start)
        if stop is not None:
            drift = rule.drift(run.stats.values)
            if drift:
                run.drop(drift)
                if stop not in _CAPS:
                    stop = None
    run.stop = stop
    return run


def _confirm_pass(
    sampler: _Sampler, rule: StoppingRule, clock: ClockMonitor | None, now: Callable[[], float], first: int
) -> _Pass:
    """The second, independent set after a first of ``first`` samples: StoppingRule.confirm_count samples, or
    fewer (at least CONFIRM_FLOOR) once StoppingRule.confirm_time_s is spent."""
    run = _Pass(stop="confirm")
    count, budget = rule.confirm_count(first), rule.confirm_time_s()
    start = now()
    while len(run.stats) < count and not (len(run.stats) >= CONFIRM_FLOOR and now() - start >= budget):
        run.take(sampler, clock, count - len(run.stats))
    return run


def measure(
    fn: Callable[[], object],
    backend: Backend,
    *,
    flush: Callable[[], object] | None = None,
    lead: Callable[[], object] | None = None,
    cover: Callable[[float], object] | None = None,
    batch_s: float = 0.0,
    rule: StoppingRule | None = None,
    warmup_s: float = 0.02,
    max_warmup_calls: int = 1000,
    clock: ClockMonitor | None = None,
    now: Callable[[], float] = time.perf_counter,
    threads: int | None = None,
    check: bool = False,
) -> Measurement:
    """Time ``fn``: one untimed call (lazy init), one timed call as the first estimate, warm-up calls sized
    from it to fill ``warmup_s``, then timed samples until ``rule`` says stop. With ``flush`` every sample
    is cold-cache (the flush runs before it, untimed); without it the cache is warm.

    NB: the rule's clock starts with the first sample: a slow first call (library initialisation, autotuning)
    must not use up the sampling budget before any sample is taken. Leading samples that drifted (a rank test
    over blocks against the latest half: StoppingRule.drift) are discarded as late warm-up and counted in
    ``discarded``; a drift-free stream loses none; the time cap still holds.

    With ``check`` (bench rows), a second, independent set of samples follows (StoppingRule.confirm_count:
    a quarter of the first set's samples, at least 10; about a quarter of max_time_s for slow calls). When the
    two disagree or the first set is bimodal (StoppingRule.disagreement), both sets are taken again, once; the
    re-measurement is the result, and ``unstable`` with the reason when it fails the check too. The extra cost:
    a quarter for a stable row; at most about 2.5x the unchecked time for a re-measured one.

    ``lead`` (untimed, e.g. a sleep kernel keeping the GPU busy) runs before each sample after ``flush``. With
    ``batch_s`` > 0 on a backend that can batch (CudaEvents.time_batch) samples are taken about ``batch_s`` of
    calls at a time (batch_size, at most MAX_BATCH), each its flush and its call queued back to back, one
    synchronisation per batch, as a model's kernels run and as triton.testing.do_bench times them; ``cover``
    (a sleep of the seconds it is given) runs once ahead of each batch, long enough for the host to queue it.
    NB: on an H100, 20-30 us ops timed with a synchronisation after each sample read 3-5% below the same protocol
    queued back to back (and do_bench), at the same SM clock (docs/performance.md)."""
    rule = rule or StoppingRule()
    start = now()
    fn()
    backend.synchronize()
    before = _chain(flush, lead)
    estimate = backend.time_once(fn, before)
    warmup_calls = int(min(max(warmup_s / estimate, 1), max_warmup_calls)) if estimate > 0 else max_warmup_calls
    for _ in range(warmup_calls):
        fn()
    backend.synchronize()

    batch = batch_size(estimate, batch_s, isinstance(backend, BatchBackend))
    sampler = _Sampler(fn, backend, before, flush=flush, cover=cover, batch=batch)
    run = _main_pass(sampler, rule, clock, now)
    discarded = run.discarded
    confirm: _Pass | None = None
    remeasure_reason = unstable_reason = ""
    if check:
        confirm = _confirm_pass(sampler, rule, clock, now, len(run.stats))
        remeasure_reason = rule.disagreement(run.stats, confirm.stats) or ""
        if remeasure_reason:
            run = _main_pass(sampler, rule, clock, now)
            discarded += run.discarded
            confirm = _confirm_pass(sampler, rule, clock, now, len(run.stats))
            unstable_reason = rule.disagreement(run.stats, confirm.stats) or ""
    stats = run.stats
    return Measurement(
        median_s=stats.median,
        p20_s=stats.quantile(0.2),
        p80_s=stats.quantile(0.8),
        samples_s=list(stats.values),
        method=backend.method,
        cache="cold" if flush is not None else "warm",
        stop_reason=run.stop,
        warmup_calls=warmup_calls,
        elapsed_s=now() - start,
        throttled=run.throttled,
        clocks_mhz=run.clocks,
        throttle_reasons=sorted(run.reasons),
        threads=threads,
        discarded=discarded,
        confirm_samples_s=list(confirm.stats.values) if confirm is not None else [],
        remeasured=bool(remeasure_reason),
        remeasure_reason=remeasure_reason,
        unstable=bool(unstable_reason),
        unstable_reason=unstable_reason,
        batch=batch,
    )
