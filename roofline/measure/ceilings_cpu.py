"""Measuring the CPU's ceilings: fp32/fp64 GEMM rate, copy and triad bandwidth, per-op overhead.

Conventions and the progress callback: :mod:`roofline.measure.ceilings`. torch is passed in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from roofline.measure.calibration import Calibration, Ceiling
from roofline.measure.ceilings import MIB, Progress, Steps, check_output, latency_ceiling, rate_ceiling, size_text
from roofline.measure.engine import measure
from roofline.measure.stats import StoppingRule
from roofline.specs.detect import describe_cpu

# CPU sizes: buffers >= 4x the last-level cache and at least 128 MiB; GEMM size chosen so one call takes
# about CPU_GEMM_CALL_S on this machine.
CPU_DRAM_MIN_BYTES = 128 * MIB
CPU_LLC_FALLBACK_BYTES = 32 * MIB
CPU_GEMM_CALL_S = 0.08
CPU_STEPS = ("cpu-gemm-fp32", "cpu-gemm-fp64", "cpu-copy", "cpu-triad", "launch-host")


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
    machine = describe_cpu(torch)
    threads = machine.cpu_threads
    steps = Steps(CPU_STEPS, progress)
    backend = CpuClock()
    notes: list[str] = []
    if quick:
        notes.append("quick mode: small sizes, not a ceiling")
    rule = StoppingRule(min_samples=3, min_time_s=0.0, max_time_s=0.05) if quick else StoppingRule(max_time_s=1.5)

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
    return steps.calibration(machine, notes, started, quick=quick)
