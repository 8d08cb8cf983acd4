"""The timing engine's logic with injected fakes: statistics, stopping rule, flush, warm-up, clocks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline.measure.backends import CpuClock, CudaEvents, NvmlClock, decode_reasons, l2_flush
from roofline.measure.engine import measure
from roofline.measure.stopping import StoppingRule
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
    flush = l2_flush(torch, l2_bytes=200 * 2**20)
    assert torch.allocated == [400 * 2**20]
    flush()
    assert torch.log == ["flush"]
    h100 = FakeTorch()
    l2_flush(h100, l2_bytes=50 * 2**20)
    assert h100.allocated == [256 * 2**20]  # a GPU's: never below 256 MiB (do_bench's)
    cpu = FakeTorch()
    l2_flush(cpu, l2_bytes=4 * 2**20, device="cpu")
    assert cpu.allocated == [64 * 2**20]  # a CPU's: never below 64 MiB


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
    assert rule.drift([1e-3] * 10) == 0
    assert rule.drift([3e-3] * 8 + [1e-3] * 20) == 8  # the slow samples, no more
    now = FakeNow()
    slow_then_fast = [3e-3] * 8 + [1e-3] * 40
    result = measure(lambda: None, FakeBackend([1e-3, *slow_then_fast], now), now=now, warmup_s=0.0, rule=rule)
    assert result.discarded == 8
    assert result.median_s == pytest.approx(1e-3)  # the settled time, not a mix
    assert result.to_dict()["discarded"] == result.discarded


# ------------------------------------------------------------------- drift, incremental spread, stability check


def noisy(seed: int, level=lambda i: 1.0, noise: float = 0.1, shape: str = "gauss"):
    """Sample i (0 = the engine's first estimate) of a fake timer: 1 ms x level(i) x (1 + noise)."""
    import random

    rng = random.Random(seed)

    def sample(i: int) -> float:
        draw = rng.gauss(0, 1) if shape == "gauss" else rng.uniform(-1, 1)
        return 1e-3 * level(i) * (1 + noise * draw)

    return sample


class ScriptedBackend:
    """Sample i is ``times(i)``; host time advances by each sample."""

    method = "fake"

    def __init__(self, times, now):
        self.times, self.now, self.calls = times, now, 0

    def time_once(self, fn, before):
        fn()
        value = self.times(self.calls)
        self.calls += 1
        self.now.t += value
        return value

    def synchronize(self):
        pass


def run_fake(times, rule=None, check=True):
    now = FakeNow()
    backend = ScriptedBackend(times, now)
    result = measure(
        lambda: None, backend, now=now, warmup_s=0.0, rule=rule or StoppingRule(max_time_s=1.0), check=check
    )
    return result, backend


def test_sample_set_is_sorted_by_insertion_not_by_sorting(monkeypatch):
    import random

    import roofline.samples as samples_module
    from roofline.samples import SampleSet

    values = [random.Random(3).random() for _ in range(200)]
    ordered = sorted(values)

    def no_sort(*args, **kwargs):
        raise AssertionError("a sort per sample")

    monkeypatch.setattr(samples_module, "sorted", no_sort, raising=False)
    stats = SampleSet()
    for v in values:
        stats.add(v)
    rule = StoppingRule(min_samples=10, min_time_s=0.0, plateau_window=10, target_spread=0.0, plateau_tolerance=0.0)
    rule.decide(stats, 1.0)  # a SampleSet: the spreads are read, nothing is sorted
    monkeypatch.undo()
    assert stats.ordered == ordered and stats.values == values
    for q in (0.0, 0.2, 0.5, 0.8, 1.0):
        assert stats.quantile(q) == quantile(values, q)
    assert stats.spread == pytest.approx(relative_spread(values))
    assert stats.spread_at(50) == pytest.approx(relative_spread(values[:50]))


@pytest.mark.parametrize("shape", ["gauss", "uniform"])
@pytest.mark.parametrize("seed", range(6))
def test_a_drift_free_stream_loses_no_sample(seed, shape):
    # The rule itself, at every block boundary of an 840-sample stream (the engine runs it far less often) ...
    stream = [noisy(seed, shape=shape)(i) for i in range(840)]
    rule = StoppingRule()
    assert all(rule.drift(stream[:n]) == 0 for n in range(20, 841, 10))
    # ... and the engine, sampling to 840 samples with no drift: none dropped, none re-measured
    capped = StoppingRule(min_time_s=0.0, max_time_s=1e9, max_samples=840, plateau_tolerance=-1.0)
    result, _ = run_fake(noisy(seed, shape=shape), capped)
    assert result.n == 840 and result.discarded == 0
    assert not result.remeasured and not result.unstable
    default, _ = run_fake(noisy(seed, shape=shape))
    assert default.discarded == 0 and not default.remeasured


@pytest.mark.parametrize("seed", range(6))
def test_a_planted_drift_is_removed_and_counted(seed):
    # the first 15 samples 1.5x slow (clocks ramping, lazy init), then settled; 2% noise
    result, _ = run_fake(noisy(seed, level=lambda i: 1.5 if 1 <= i <= 15 else 1.0, noise=0.02))
    assert result.discarded == 15
    assert result.median_s == pytest.approx(1e-3, rel=0.01)
    assert max(result.samples_s) < 1.2e-3
    # a ramp from 2x down to 1x over 25 samples: the samples still beyond 10% go
    ramp, _ = run_fake(noisy(seed, level=lambda i: max(1.0, 2 - i / 25), noise=0.02))
    assert 18 <= ramp.discarded <= 25 and ramp.median_s == pytest.approx(1e-3, rel=0.01)


# fixed counts: 20 samples (sample cap), then a second set of max(10, 20 / 4) = 10
FIXED = StoppingRule(min_samples=20, max_samples=20, min_time_s=0.0, max_time_s=1e9)


@pytest.mark.parametrize("seed", range(8))
def test_a_slow_sample_set_is_remeasured_and_flagged_when_it_persists(seed):
    # samples 1-20 first set, 21-30 second set; re-measurement: 31-50, 51-60
    once, backend = run_fake(noisy(seed, level=lambda i: 1.5 if 1 <= i <= 20 else 1.0), FIXED)
    assert once.remeasured and "second sample set" in once.remeasure_reason
    assert not once.unstable and once.median_s == pytest.approx(1e-3, rel=0.1)  # the re-measurement
    assert backend.calls == 1 + 20 + 10 + 20 + 10
    slow_second = noisy(seed, level=lambda i: 1.5 if 21 <= i <= 30 or 51 <= i <= 60 else 1.0)
    twice, _ = run_fake(slow_second, FIXED)
    assert twice.remeasured and twice.unstable
    assert twice.unstable_reason.startswith("a second sample set's median is 1.")
    assert twice.to_dict()["unstable"] is True and len(twice.confirm_samples_s) == 10


@pytest.mark.parametrize("seed", range(8))
def test_bimodal_samples_are_flagged(seed):
    import random

    rng = random.Random(seed)
    # 40 samples, each 1.5x slow with probability 0.4 (a kernel alternating between two speeds), 2% noise
    two_speeds = noisy(seed, level=lambda i: 1.5 if rng.random() < 0.4 else 1.0, noise=0.02)
    result, _ = run_fake(two_speeds, StoppingRule(min_samples=40, max_samples=40, min_time_s=0.0, max_time_s=1e9))
    assert result.unstable and result.unstable_reason.startswith("bimodal: ")


@pytest.mark.parametrize("seed", range(20))
def test_unimodal_noise_is_not_bimodal(seed):
    import math
    import random

    from roofline.samples import bimodal

    rng = random.Random(seed)
    for n in (20, 50, 200):
        for draw in (lambda: rng.gauss(1, 0.1), lambda: rng.uniform(0.9, 1.1), lambda: math.exp(rng.gauss(0, 0.3))):
            assert bimodal(sorted(draw() for _ in range(n))) is None
    clean = [1.0 + 0.01 * i for i in range(12)] + [1.5 + 0.01 * i for i in range(12)]
    modes = bimodal(sorted(clean))
    assert modes is not None and modes.n_low == modes.n_high == 12


def test_the_second_set_is_bounded():
    rule = StoppingRule(max_time_s=1.0)
    assert rule.confirm_count(12) == 10 and rule.confirm_count(400) == 100
    # slow calls: after 5 samples the second set stops at a quarter of max_time_s
    result, backend = run_fake(lambda i: 0.1, StoppingRule(min_samples=10, min_time_s=0.0, max_time_s=1.0))
    assert result.n == 10 and len(result.confirm_samples_s) == 5
    assert backend.calls == 1 + 10 + 5
    unchecked, backend = run_fake(lambda i: 0.1, StoppingRule(min_samples=10, min_time_s=0.0), check=False)
    assert unchecked.confirm_samples_s == [] and backend.calls == 1 + 10


def test_rank_z_with_ties():
    from roofline.samples import rank_z

    assert rank_z([2.0] * 10, sorted([1.0] * 10)) > 3.5
    assert rank_z([1.0] * 10, [1.0] * 10) == 0.0
    assert rank_z([], [1.0]) == 0.0
    assert rank_z([1.0, 2.0], [1.0, 2.0]) == pytest.approx(0.0)


def test_gpu_busy_queues_a_sleep_of_the_asked_microseconds_or_is_none():
    from types import SimpleNamespace

    from roofline.measure.backends import gpu_busy

    slept = []
    fake = SimpleNamespace(cuda=SimpleNamespace(_sleep=slept.append))
    busy = gpu_busy(fake, 1980.0, 50)
    assert busy is not None
    busy()
    assert slept == [99_000]  # 50 us at 1980 MHz
    gpu_busy(fake, None, 100)()
    assert slept[-1] == 200_000  # 2 GHz when the clock is unknown
    assert gpu_busy(SimpleNamespace(cuda=SimpleNamespace()), 1980.0, 50) is None


# ------------------------------------------------------------------------------------------------ batches


def test_batch_size_is_about_batch_s_of_calls_capped():
    from roofline.measure.engine import MAX_BATCH, batch_size

    assert batch_size(2e-3, 0.01, True) == 5
    assert batch_size(20e-6, 0.01, True) == MAX_BATCH == 50
    assert batch_size(0.02, 0.01, True) == 1  # a call longer than a batch: one at a time
    assert batch_size(20e-6, 0.0, True) == 1  # batching off
    assert batch_size(20e-6, 0.01, False) == 1  # a backend that cannot batch


class FakeBatchBackend(FakeBackend):
    """FakeBackend that can also time a batch: the lead once, then the flush and the call per sample."""

    def time_batch(self, fn, lead, before, k):
        if lead is not None:
            lead(1e-3)
        out = []
        for _ in range(k):
            if before is not None:
                before()
            self.events.append("timed")
            fn()
            t = self.times.pop(0) if self.times else 1e-3
            self.clock.t += t
            out.append(t)
        self.events.append("batch-sync")
        return out


class CountingClock:
    max_clock_mhz = 2000.0

    def __init__(self):
        self.reads = 0

    def sample(self):
        self.reads += 1
        return 1980.0, []


def test_batched_samples_run_the_lead_once_per_batch_and_the_flush_per_sample():
    now = FakeNow()
    backend = FakeBatchBackend([], now)  # every call 1 ms
    log = []
    backend.events = log
    clock = CountingClock()
    rule = StoppingRule(min_samples=10, min_time_s=0.0, max_time_s=10.0, max_samples=12)
    result = measure(
        lambda: None,
        backend,
        flush=lambda: log.append("flush"),
        lead=lambda: log.append("lead"),
        cover=lambda seconds: log.append("cover"),
        batch_s=5e-3,
        rule=rule,
        warmup_s=0.0,
        clock=clock,
        now=now,
    )
    assert result.batch == 5  # 5 ms of 1 ms calls
    first = log.index("batch-sync")
    assert log[first - 11 : first + 1] == ["cover", *(["flush", "timed"] * 5), "batch-sync"]
    # the estimate (one call, flush then lead ahead of it) came before the batches
    assert log[:4] == ["sync", "flush", "lead", "timed"]
    assert result.n == 10 and log.count("batch-sync") == 2  # converged after two batches of 5
    assert clock.reads == 2 and result.clocks_mhz == [1980.0] * 10  # the clock read once per batch


def test_a_batch_never_passes_the_sample_cap():
    now = FakeNow()
    backend = FakeBatchBackend([1e-3 * (1 + (i % 2)) for i in range(200)], now)  # noisy: runs to the cap
    rule = StoppingRule(min_samples=10, min_time_s=0.0, max_time_s=10.0, max_samples=12, target_spread=1e-6)
    result = measure(lambda: None, backend, batch_s=5e-3, rule=rule, warmup_s=0.0, now=now)
    assert result.n <= 12 and result.stop_reason in ("sample-cap", "spread-stable", "converged")


def test_cuda_events_time_a_batch_with_one_synchronisation():
    log: list[str] = []

    class Event:
        def __init__(self, enable_timing):
            self.name = f"e{len(made)}"
            made.append(self)

        def record(self):
            log.append("record")

        def synchronize(self):
            log.append("sync")

        def elapsed_time(self, other):
            return 0.02  # ms

    made: list[Event] = []

    import types

    fake_torch = types.SimpleNamespace(cuda=types.SimpleNamespace(Event=Event))
    host = iter([0.0, 30e-6, 100.0, 100.0 + 3 * 40e-6])  # the host's clock: 30 us to queue one sample, then 40
    backend = CudaEvents(fake_torch, host_clock=lambda: next(host))
    assert backend.time_once(lambda: log.append("fn"), None) == pytest.approx(2e-5)
    assert backend.host_s == pytest.approx(30e-6)
    log.clear()
    covered = []

    def lead(seconds):
        covered.append(seconds)
        log.append("lead")

    times = backend.time_batch(lambda: log.append("fn"), lead, lambda: log.append("flush"), 3)
    assert times == pytest.approx([2e-5] * 3)
    assert log == ["lead", *(["flush", "record", "fn", "record"] * 3), "sync"]
    assert covered == [pytest.approx(1.5 * 3 * 30e-6)]  # the lead covers 1.5x the host's time to queue the batch
    assert backend.host_s == pytest.approx(40e-6)  # learned from this batch for the next
    backend._host_clock = lambda: 0.0
    backend.time_batch(lambda: None, None, None, 2)
    assert len(made) == 2 + 6  # time_once's pair, then three pairs made once and reused
