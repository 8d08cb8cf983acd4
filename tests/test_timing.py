"""The timing engine's logic with injected fakes: statistics, stopping rule, flush, warm-up, clocks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline.measure.backends import CpuClock, CudaEvents, NvmlClock, decode_reasons, l2_flush
from roofline.measure.engine import measure
from roofline.measure.stats import StoppingRule
from roofline.samples import median, quantile, relative_spread


def test_quantiles_interpolate():
    data = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert median(data) == 3.0
    assert quantile(data, 0.0) == 1.0 and quantile(data, 1.0) == 5.0
    assert quantile(data, 0.2) == pytest.approx(1.8)  # position 0.8 between 1 and 2
    assert quantile(data, 0.8) == pytest.approx(4.2)
    assert relative_spread(data) == pytest.approx((4.2 - 1.8) / 3.0)
    assert median([2.0, 4.0]) == 3.0


@given(st.lists(st.floats(min_value=1e-9, max_value=1.0), min_size=1, max_size=200))
def test_quantiles_are_ordered_and_bounded(samples):
    p20, p50, p80 = (quantile(samples, q) for q in (0.2, 0.5, 0.8))
    assert min(samples) <= p20 <= p50 <= p80 <= max(samples)


class TestStoppingRule:
    rule = StoppingRule(
        min_samples=10,
        min_time_s=0.05,
        target_spread=0.02,
        plateau_window=5,
        plateau_tolerance=0.1,
        max_time_s=1.0,
        max_samples=100,
    )

    def test_needs_min_samples_and_min_time(self):
        flat = [1e-3] * 9
        assert self.rule.decide(flat, elapsed_s=0.5) is None  # 9 < 10 samples
        assert self.rule.decide([*flat, 1e-3], elapsed_s=0.01) is None  # not enough time yet
        assert self.rule.decide([*flat, 1e-3], elapsed_s=0.05) == "converged"

    def test_caps(self):
        assert self.rule.decide([1e-3], elapsed_s=1.0) == "time-cap"
        noisy = [1e-3 * (1 + (i % 2)) for i in range(100)]
        assert self.rule.decide(noisy, elapsed_s=0.2) == "sample-cap"

    def test_noisy_but_settled_spread_stops(self):
        # 1.0-1.4 ms in a cycle: the spread stays ~25%, far above target, but it no longer changes.
        noisy = [1e-3 * (1 + 0.1 * (i % 5)) for i in range(20)]
        assert self.rule.decide(noisy, elapsed_s=0.2) == "spread-stable"

    def test_shrinking_spread_keeps_sampling(self):
        # A few wild early samples, then a tight cluster: the spread is still shrinking -> go on.
        samples = [5e-3, 4e-3, 3e-3, 2e-3, 1.5e-3] + [1e-3, 1.1e-3] * 5
        assert self.rule.decide(samples, elapsed_s=0.2) is None


class FakeBackend:
    """Returns scripted sample times; records every call and flush order."""

    method = "fake"

    def __init__(self, times, clock):
        self.times = list(times)
        self.clock = clock
        self.events: list[str] = []

    def time_once(self, fn, before):
        if before is not None:
            before()
        self.events.append("timed")
        fn()
        t = self.times.pop(0) if self.times else 1e-3
        self.clock.t += t
        return t

    def synchronize(self):
        self.events.append("sync")


class FakeNow:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_measure_flushes_before_every_timed_call_and_sizes_warmup():
    now = FakeNow()
    calls = []
    backend = FakeBackend([1e-3] * 50, now)
    flushes = []

    def fn():
        calls.append(1)
        now.t += 0.0  # host time advances only through the backend's samples

    result = measure(
        fn,
        backend,
        flush=lambda: flushes.append(len(backend.events)),
        warmup_s=0.02,
        now=now,
        rule=StoppingRule(min_samples=10, min_time_s=0.0, max_time_s=10.0),
    )
    # first estimate 1 ms -> 20 warm-up calls to fill 20 ms
    assert result.warmup_calls == 20
    assert result.cache == "cold"
    assert result.n == 10 and result.stop_reason == "converged"
    assert len(flushes) == result.n + 1  # every timed call (estimate + samples), none for warm-up
    assert result.median_s == pytest.approx(1e-3)
    # 1 untimed init call + 1 estimate + 20 warm-up + 10 samples
    assert len(calls) == 1 + 1 + 20 + 10


def test_measure_warm_cache_and_time_cap():
    now = FakeNow()
    backend = FakeBackend([0.4] * 10, now)
    result = measure(lambda: None, backend, now=now, warmup_s=0.0, rule=StoppingRule(min_samples=10, max_time_s=1.0))
    assert result.cache == "warm"
    assert result.stop_reason == "time-cap"
    assert result.n < 10  # the cap wins over the minimum sample count
    assert result.warmup_calls == 1


def test_measure_marks_throttled_samples():
    class FakeClock:
        max_clock_mhz = 2000.0

        def __init__(self):
            self.readings = [(1980.0, []), (1400.0, []), (1990.0, ["sw-thermal"])] + [(1980.0, [])] * 20

        def sample(self):
            return self.readings.pop(0)

    now = FakeNow()
    result = measure(
        lambda: None,
        FakeBackend([1e-3] * 30, now),
        now=now,
        clock=FakeClock(),
        rule=StoppingRule(min_samples=10, min_time_s=0.0),
    )
    assert result.throttled[:3] == [False, True, True]  # 1400 < 0.75 * 2000; a slowdown reason
    assert result.throttled_count == 2
    assert result.throttle_reasons == ["sw-thermal"]
    assert result.clocks_mhz[1] == 1400.0
    doc = result.to_dict()
    assert doc["throttled_count"] == 2 and doc["n"] == result.n


def test_cpu_clock_uses_nanoseconds():
    ticks = iter([1_000, 251_000])
    before = []
    backend = CpuClock(clock_ns=lambda: next(ticks))
    assert backend.time_once(lambda: None, lambda: before.append(1)) == pytest.approx(250e-6)
    assert before == [1]


def test_cpu_end_to_end_records_threads():
    import torch

    a, b = torch.randn(64, 64), torch.randn(64, 64)
    result = measure(
        lambda: a @ b,
        CpuClock(),
        threads=torch.get_num_threads(),
        rule=StoppingRule(min_samples=10, min_time_s=0.0, max_time_s=0.2),
    )
    assert result.n >= 10 or result.stop_reason == "time-cap"
    assert result.method == "cpu-clock" and result.threads == torch.get_num_threads()
    assert result.p20_s <= result.median_s <= result.p80_s


class FakeEvent:
    def __init__(self, log, name):
        self.log, self.name = log, name

    def record(self):
        self.log.append(f"record-{self.name}")

    def synchronize(self):
        self.log.append("event-sync")

    def elapsed_time(self, other):
        return 2.5  # milliseconds, as torch reports


class FakeTorch:
    def __init__(self):
        self.log: list[str] = []
        self.allocated: list[int] = []
        log = self.log
        names = iter(["start", "end"])

        class Cuda:
            @staticmethod
            def Event(enable_timing):  # mirrors torch.cuda.Event
                assert enable_timing
                return FakeEvent(log, next(names))

            @staticmethod
            def synchronize():
                log.append("sync")

        self.cuda = Cuda
        self.int32 = "int32"

    def empty(self, numel, dtype, device):
        self.allocated.append(numel * 4)

        class Buffer:
            def fill_(inner, value):
                self.log.append("flush")

        return Buffer()


def test_cuda_events_flush_outside_the_timed_region_and_ms_to_s():
    torch = FakeTorch()
    backend = CudaEvents(torch)
    seconds = backend.time_once(lambda: torch.log.append("fn"), lambda: torch.log.append("flush"))
    assert seconds == pytest.approx(2.5e-3)
    assert torch.log == ["flush", "record-start", "fn", "record-end", "event-sync"]


def test_l2_flush_buffer_is_at_least_twice_the_l2():
    torch = FakeTorch()
    flush = l2_flush(torch, l2_bytes=50 * 2**20)
    assert torch.allocated == [100 * 2**20]
    flush()
    assert torch.log == ["flush"]
    small = FakeTorch()
    l2_flush(small, l2_bytes=4 * 2**20)
    assert small.allocated == [64 * 2**20]  # never below 64 MiB


def test_nvml_clock_reads_only():
    class FakeNvml:
        NVML_CLOCK_SM = 1

        def nvmlInit(self):
            pass

        def nvmlDeviceGetHandleByIndex(self, index):
            return "h"

        def nvmlDeviceGetMaxClockInfo(self, handle, kind):
            return 1980

        def nvmlDeviceGetClockInfo(self, handle, kind):
            return 1755

        def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
            return 0x1 | 0x4 | 0x40  # idle (ignored), sw power cap, hw thermal

        def __getattr__(self, name):
            if name.startswith("nvmlDeviceSet") or name.startswith("nvmlDeviceReset"):
                raise AssertionError(f"{name} must never be called")
            raise AttributeError(name)

    monitor = NvmlClock(FakeNvml())
    assert monitor.max_clock_mhz == 1980.0
    assert monitor.sample() == (1755.0, ["sw-power-cap", "hw-thermal"])
    assert decode_reasons(0x1 | 0x2 | 0x100) == []  # idle, app clocks, display: not slowdowns


@pytest.mark.gpu
def test_cuda_events_time_a_real_kernel():
    import torch

    from roofline.measure.backends import CudaGraph

    x = torch.randn(2**24, device="cuda")
    flush = l2_flush(torch, torch.cuda.get_device_properties(0).L2_cache_size)
    cold = measure(lambda: x.mul_(1.0001), CudaEvents(torch), flush=flush)
    warm = measure(lambda: x.mul_(1.0001), CudaGraph(torch, lambda: x.mul_(1.0001), calls=20))
    assert cold.cache == "cold" and warm.cache == "warm" and warm.method == "cuda-graph"
    # 2^24 floats read + written = 134 MB: at most a few TB/s, so tens of microseconds
    assert 10e-6 < cold.median_s < 5e-3
    assert warm.median_s < cold.median_s * 1.5


def test_drifting_samples_are_discarded_as_late_warmup():
    rule = StoppingRule(min_samples=10, min_time_s=0.0, plateau_window=5, max_time_s=10.0)
    assert not rule.drifting([1e-3] * 10)
    assert rule.drifting([3e-3] * 5 + [1e-3] * 5)  # first window 3x the last
    now = FakeNow()
    slow_then_fast = [3e-3] * 8 + [1e-3] * 40
    result = measure(lambda: None, FakeBackend([1e-3, *slow_then_fast], now), now=now, warmup_s=0.0, rule=rule)
    assert result.discarded > 0
    assert result.median_s == pytest.approx(1e-3)  # the settled time, not a mix
    assert result.to_dict()["discarded"] == result.discarded
