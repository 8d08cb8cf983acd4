"""Measuring the CPU's ceilings: fp32/fp64 GEMM rate, copy and triad bandwidth, per-op overhead; and how busy the
machine was meanwhile (:class:`LoadProbe`: load average, /proc/stat), which marks a calibration ``busy``
(roofline.measure.calibration.busy_reasons).

Conventions and the progress callback: :mod:`roofline.measure.ceilings`. torch is passed in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from roofline.measure.calibration import Calibration, Ceiling, Load, busy_reasons
from roofline.measure.ceilings import MIB, Progress, Steps, check_output, latency_ceiling, rate_ceiling, size_text
from roofline.measure.engine import measure
from roofline.measure.stopping import StoppingRule
from roofline.specs.detect import describe_cpu

# CPU sizes: buffers >= 4x the last-level cache and at least 128 MiB; GEMM size chosen so one call takes
# about CPU_GEMM_CALL_S on this machine.
CPU_DRAM_MIN_BYTES = 128 * MIB
CPU_LLC_FALLBACK_BYTES = 32 * MIB
CPU_GEMM_CALL_S = 0.08
CPU_STEPS = ("cpu-gemm-fp32", "cpu-gemm-fp64", "cpu-copy", "cpu-triad", "launch-host")
CPU_STEP_MAX_S = 1.5  # the stopping rule's time cap per step
PROC_STAT = "/proc/stat"


def estimated_seconds() -> float:
    """What a CPU calibration takes at most, from its configured time per step (sampling is capped at
    CPU_STEP_MAX_S per step; set-up, warm-up and the GEMM size probe add a little)."""
    return len(CPU_STEPS) * CPU_STEP_MAX_S


# ------------------------------------------------------------------------------------------------- load


def loadavg() -> float | None:
    """The 1-minute load average, None where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def _cpu_jiffies(path: str = PROC_STAT) -> tuple[int, int] | None:
    """(busy, total) clock ticks of all CPUs since boot, from the first line of /proc/stat; None elsewhere."""
    try:
        with open(path, encoding="ascii") as f:
            fields = f.readline().split()
    except (OSError, UnicodeDecodeError):
        return None
    if not fields or fields[0] != "cpu":
        return None
    try:
        values = [int(v) for v in fields[1:9]] + [0] * 8
    except ValueError:
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def _own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def others_share(
    before: tuple[int, int] | None, after: tuple[int, int] | None, own_s: float, ticks_per_s: float
) -> float | None:
    """The share of all CPUs' time that others (other processes, steal) took between two /proc/stat readings,
    given this process's CPU seconds ``own_s`` meanwhile. Pure."""
    if before is None or after is None or ticks_per_s <= 0:
        return None
    total = after[1] - before[1]
    if total <= 0:
        return None
    busy_s = (after[0] - before[0]) / ticks_per_s
    return min(max((busy_s - own_s) / (total / ticks_per_s), 0.0), 1.0)


class LoadProbe:
    """Reads the machine's load when a calibration starts and when it ends (:meth:`load`)."""

    def __init__(self) -> None:
        self.loadavg_before = loadavg()
        self.jiffies = _cpu_jiffies()
        self.own_s = _own_cpu_s()

    def load(self, spread: float | None) -> Load:
        try:
            ticks = float(os.sysconf("SC_CLK_TCK"))
        except (ValueError, OSError, AttributeError):
            ticks = 100.0
        share = others_share(self.jiffies, _cpu_jiffies(), _own_cpu_s() - self.own_s, ticks)
        return Load(
            loadavg_before=self.loadavg_before,
            loadavg_after=loadavg(),
            cpus=os.cpu_count(),
            others_share=share,
            spread=spread,
        )


# ------------------------------------------------------------------------------------------------ measure


def _available_memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cpu_gemm_size(torch: Any, dtype: Any, target_s: float, quick: bool) -> int:
    """A square size (multiple of 256, 512-4096) whose GEMM takes about ``target_s`` here."""
    if quick:
        return 128
    n = 1024
    a = torch.randn(n, n, dtype=dtype)
    b = torch.randn(n, n, dtype=dtype)
    torch.mm(a, b)  # warm the BLAS
    start = time.perf_counter()
    torch.mm(a, b)
    rate = 2.0 * n**3 / max(time.perf_counter() - start, 1e-6)
    size = int((target_s * rate / 2) ** (1 / 3)) // 256 * 256
    return min(max(size, 512), 4096)


def calibrate_cpu(torch: Any, *, progress: Progress | None = None, quick: bool = False) -> Calibration:
    """Measure the CPU with torch's current thread count. ``quick``: tiny sizes (tests), not a ceiling."""
    from roofline.measure.backends import CpuClock

    started = time.perf_counter()
    probe = LoadProbe()
    machine = describe_cpu(torch)
    threads = machine.cpu_threads
    steps = Steps(CPU_STEPS, progress)
    backend = CpuClock()
    notes: list[str] = []
    if quick:
        notes.append("quick mode: small sizes, not a ceiling")
    rule = (
        StoppingRule(min_samples=3, min_time_s=0.0, max_time_s=0.05)
        if quick
        else StoppingRule(max_time_s=CPU_STEP_MAX_S)
    )

    def timed(fn: Callable[[], object], warmup_s: float = 0.02) -> Any:
        return measure(fn, backend, rule=rule, warmup_s=warmup_s, threads=threads)

    # ---- GEMMs with all of torch's threads
    def gemm(dtype_name: str, torch_dtype: Any) -> Callable[[], Ceiling]:
        def body() -> Ceiling:
            n = _cpu_gemm_size(torch, torch_dtype, CPU_GEMM_CALL_S, quick)
            a = torch.randn(n, n, dtype=torch_dtype)
            b = torch.randn(n, n, dtype=torch_dtype)
            c = torch.empty(n, n, dtype=torch_dtype)
            m = timed(lambda: torch.mm(a, b, out=c), warmup_s=0 if quick else 0.1)
            check_output(torch, c, f"cpu-gemm-{dtype_name}")
            return rate_ceiling(
                f"cpu-gemm-{dtype_name}",
                "compute",
                2.0 * n**3,
                m,
                "FLOP/s",
                shape=f"{n}x{n}x{n}",
                dtype=dtype_name,
                note="random operands; the rate of a large torch matmul, not a theoretical peak",
            )

        return body

    steps.run("cpu-gemm-fp32", gemm("fp32", torch.float32))
    steps.run("cpu-gemm-fp64", gemm("fp64", torch.float64))

    # ---- copy and triad on buffers >= 4x the last-level cache
    llc = machine.llc_bytes or CPU_LLC_FALLBACK_BYTES
    nbytes = 4 * MIB if quick else max(4 * llc, CPU_DRAM_MIN_BYTES)
    available = _available_memory_bytes()
    if not quick and available and 3 * nbytes > available // 2:  # three buffers in at most half the free memory
        nbytes = max(available // 6, 16 * MIB)
        notes.append(f"copy/triad buffers capped at {size_text(nbytes)} by free memory (LLC {size_text(llc)})")
    numel = nbytes // 4
    nbytes = numel * 4
    where = f"buffers {size_text(nbytes)} >= 4x LLC ({size_text(llc)})" if not quick else "quick mode buffers"

    def streams() -> None:
        # Values do not change a CPU copy's speed; fill_ with a nonzero constant is fast (first touch faults pages).
        a = torch.empty(numel, dtype=torch.float32).fill_(1.0)
        b = torch.empty(numel, dtype=torch.float32).fill_(1.5)
        c = torch.empty(numel, dtype=torch.float32).fill_(2.5)
        steps.run(
            "cpu-copy",
            lambda: rate_ceiling(
                "cpu-copy",
                "bandwidth",
                2 * nbytes,
                timed(lambda: a.copy_(b)),
                "B/s",
                shape=f"{size_text(nbytes)} fp32 copy",
                note=where + "; bytes read + written",
            ),
        )
        steps.run(
            "cpu-triad",
            lambda: rate_ceiling(
                "cpu-triad",
                "bandwidth",
                3 * nbytes,
                timed(lambda: torch.add(b, c, alpha=0.5, out=a)),
                "B/s",
                shape=f"{size_text(nbytes)} fp32 triad",
                note=where + "; a = b + s*c via torch.add(b, c, alpha=s, out=a): 2 reads + 1 write "
                "(STREAM convention: no write-allocate read)",
            ),
        )

    streams()  # the buffers are freed on return

    # ---- per-op overhead: a tiny op's host time
    tiny = torch.ones(1)
    steps.run(
        "launch-host",
        lambda: latency_ceiling(
            "launch-host",
            timed(lambda: tiny.add_(1)),
            shape="1-element add_",
            note="torch dispatch overhead of one op: the CPU's launch floor",
        ),
    )
    steps.done()
    spreads = [
        c.measurement.relative_spread
        for c in steps.ceilings
        if c.kind == "compute" and c.measurement is not None and c.measurement.relative_spread is not None
    ]
    load = probe.load(max(spreads) if spreads else None)
    reasons = [] if quick else busy_reasons(load)  # quick mode is no ceiling: nothing to re-measure
    if reasons:
        notes.append(f"measured while the machine was busy: {'; '.join(reasons)}")
    return steps.calibration(machine, notes, started, quick=quick, load=load, busy=bool(reasons))
