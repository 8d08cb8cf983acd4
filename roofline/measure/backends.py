"""Device backends for the timing engine: CUDA events, CUDA graph replay, the CPU clock, the L2 flush and
the NVML clock monitor. torch and pynvml are imported lazily; NVML is only read, never set."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# NVML clock-event reasons that mean the GPU is running slower than it could (bit -> name). 'GPU idle',
# 'applications clocks setting' and 'display clock' are not slowdowns of a running kernel.
NVML_SLOWDOWN_REASONS = {
    0x4: "sw-power-cap",
    0x8: "hw-slowdown",
    0x20: "sw-thermal",
    0x40: "hw-thermal",
    0x80: "hw-power-brake",
}


def decode_reasons(mask: int) -> list[str]:
    return [name for bit, name in NVML_SLOWDOWN_REASONS.items() if mask & bit]


class CpuClock:
    """Host monotonic clock around one call (nanosecond resolution)."""

    method = "cpu-clock"

    def __init__(self, clock_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        self._clock_ns = clock_ns

    def time_once(self, fn: Callable[[], object], before: Callable[[], object] | None) -> float:
        if before is not None:
            before()
        start = self._clock_ns()
        fn()
        return (self._clock_ns() - start) * 1e-9

    def synchronize(self) -> None:
        pass


#: time_batch's lead covers this many times the host's measured time to queue the batch (at most MAX_LEAD_S)
LEAD_FACTOR = 1.5
MAX_LEAD_S = 0.05


class CudaEvents:
    """CUDA events recorded around one call on the current stream: device time of that call."""

    method = "cuda-events"

    def __init__(self, torch: Any, host_clock: Callable[[], float] = time.perf_counter) -> None:
        self._torch = torch
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._pairs: list[tuple[Any, Any]] = []  # time_batch's events, made once and reused
        self._host_clock = host_clock
        self.host_s = 0.0  # the host's time to queue one sample, last seen (time_batch's lead covers it)

    def time_once(self, fn: Callable[[], object], before: Callable[[], object] | None) -> float:
        queued = self._host_clock()
        if before is not None:
            before()
        self._start.record()
        fn()
        self._end.record()
        self.host_s = self._host_clock() - queued  # what the host took to queue one sample (time_batch's lead)
        self._end.synchronize()
        return self._start.elapsed_time(self._end) * 1e-3  # elapsed_time is in ms

    def time_batch(
        self,
        fn: Callable[[], object],
        lead: Callable[[float], object] | None,
        before: Callable[[], object] | None,
        k: int,
    ) -> list[float]:
        """``k`` calls queued back to back, each with ``before`` ahead of it (untimed) and its own pair of events;
        one synchronisation at the end. Device time of each call.

        ``lead(seconds)`` runs once ahead of the batch (a sleep kernel): it is given LEAD_FACTOR times what the host
        took to queue the last sample or batch, for k samples, so that the whole batch is queued before the GPU
        reaches it. NB: otherwise an op of several kernels whose launches take longer than its flush and kernels on
        the GPU leaves the GPU waiting inside the timed region (an H100 lease: a written-out RMSNorm of 6 kernels
        read 129 us in one run, 122 us in the next and under do_bench)."""
        while len(self._pairs) < k:
            event = self._torch.cuda.Event
            self._pairs.append((event(enable_timing=True), event(enable_timing=True)))
        pairs = self._pairs[:k]
        if lead is not None:
            lead(min(LEAD_FACTOR * k * self.host_s, MAX_LEAD_S))
        queued = self._host_clock()
        for start, end in pairs:
            if before is not None:
                before()
            start.record()
            fn()
            end.record()
        self.host_s = (self._host_clock() - queued) / k
        pairs[-1][1].synchronize()
        return [start.elapsed_time(end) * 1e-3 for start, end in pairs]

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()


class CudaGraph:
    """Replay of a CUDA graph holding ``calls`` back-to-back calls; a sample is the replay time / calls.

    Removes CPU launch overhead from the timing (device time of back-to-back kernels, warm cache).
    """

    method = "cuda-graph"

    def __init__(self, torch: Any, fn: Callable[[], object], calls: int = 20) -> None:
        self._torch = torch
        self._calls = calls
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up on a side stream before capture, as CUDA graphs require
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(stream)
        self._graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self._graph):
            for _ in range(calls):
                fn()
        self._events = CudaEvents(torch)

    def time_once(self, fn: Callable[[], object], before: Callable[[], object] | None) -> float:
        return self._events.time_once(self._graph.replay, before) / self._calls

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()


def gpu_busy(torch: Any, max_clock_mhz: float | None, us: float) -> Callable[[], object] | None:
    """A callable that queues a sleep kernel of about ``us`` microseconds at the maximum SM clock (2 GHz when
    unknown), or None where torch has no sleep kernel. Queued (untimed) before a sample, it keeps an idle GPU busy
    while the host queues the start event, the op and the end event back to back: on an idle GPU the start event
    fires at once and the events would time the host's launch of the op too (~20 us on a VM)."""
    sleep_for = gpu_sleep(torch, max_clock_mhz)
    if sleep_for is None:
        return None
    seconds = us * 1e-6

    def busy() -> None:
        sleep_for(seconds)

    return busy


def gpu_sleep(torch: Any, max_clock_mhz: float | None) -> Callable[[float], object] | None:
    """A callable that queues a sleep kernel of about the seconds it is given (at the maximum SM clock; 2 GHz when
    unknown), or None where torch has no sleep kernel."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        return None
    hz = (max_clock_mhz or 2000) * 1e6

    def sleep_for(seconds: float) -> None:
        sleep(max(round(hz * seconds), 1))

    return sleep_for


#: the smallest buffer an L2 flush writes on a GPU (triton.testing.do_bench writes 256 MiB)
GPU_FLUSH_MIN_BYTES = 256 * 2**20
#: the smallest buffer a cache flush writes on a CPU
CPU_FLUSH_MIN_BYTES = 64 * 2**20


def l2_flush(torch: Any, l2_bytes: int, device: str = "cuda") -> Callable[[], object]:
    """A callable that evicts the L2 (a CPU's last-level cache) by writing a buffer twice its size, at least
    GPU_FLUSH_MIN_BYTES on a GPU and CPU_FLUSH_MIN_BYTES on a CPU.

    NB: on a lent H100 (L2 50 MiB) a 100 MiB write left part of an op's operands in the L2: ops of 32-64 MiB ran
    4-6.5% faster than under do_bench's 256 MiB flush (decode GEMVs, 4096^3 GEMM), ops of 117-235 MiB within 2.5%."""
    floor = CPU_FLUSH_MIN_BYTES if str(device).startswith("cpu") else GPU_FLUSH_MIN_BYTES
    nbytes = max(2 * int(l2_bytes), floor)
    buffer = torch.empty(nbytes // 4, dtype=torch.int32, device=device)

    def flush() -> None:
        buffer.fill_(0x5A5A5A5A)

    return flush


class NvmlClock:
    """Reads the SM clock and the slowdown reasons of one GPU through NVML (read-only)."""

    def __init__(self, pynvml: Any, index: int = 0) -> None:
        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        try:
            self.max_clock_mhz: float | None = float(
                pynvml.nvmlDeviceGetMaxClockInfo(self._handle, pynvml.NVML_CLOCK_SM)
            )
        except Exception:
            self.max_clock_mhz = None
        self._reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )

    def sample(self) -> tuple[float | None, list[str]]:
        try:
            mhz: float | None = float(self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))
        except Exception:
            mhz = None
        try:
            reasons = decode_reasons(int(self._reasons(self._handle))) if self._reasons else []
        except Exception:
            reasons = []
        return mhz, reasons


def nvml_clock(index: int = 0) -> NvmlClock | None:
    """The clock monitor for GPU ``index``, or None when NVML is unavailable."""
    try:
        import pynvml

        return NvmlClock(pynvml, index)
    except Exception:
        return None
