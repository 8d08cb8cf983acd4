"""Measuring a GPU's ceilings: DRAM and L2 bandwidth, GEMM rate per dtype, launch floor (CUDA device).

Conventions and the progress callback: :mod:`roofline.measure.ceilings`. torch is passed in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from roofline.device import Device
from roofline.measure.calibration import Calibration, Ceiling, gemm_roof_key
from roofline.measure.ceilings import (
    GIB,
    MIB,
    Progress,
    Steps,
    ceiling_time,
    check_output,
    latency_ceiling,
    rate_ceiling,
    size_text,
)
from roofline.measure.engine import measure
from roofline.measure.stats import StoppingRule
from roofline.specs.detect import describe_cuda, nvml_index

# GPU sizes. fp32 and fp64 GEMMs run on CUDA cores / fp64 units and are slow: 4096 keeps them short.
GEMM_SIZE = {"bf16": 8192, "fp16": 8192, "tf32": 8192, "fp8": 8192, "int8": 8192, "fp32": 4096, "fp64": 4096}
# A GEMM ceiling is measured from a rested GPU: GEMM_REST_S idle, a short warm-up, then at least 10 samples
# within GEMM_MAX_TIME_S. NB: under sustained load a GPU can hit its power cap within a second (on the lent
# H100 a bf16 8192^3 GEMM fell from ~800 to ~690 TFLOP/s, SM clock 1980 -> 1425 MHz, NVML 'sw-power-cap').
# The ceiling is the median of the samples NVML did not flag as throttled; throttled samples are counted.
GEMM_REST_S = 1.0
# NB: best of 3 bursts: on the lent H100s one burst of the same GEMM varied between 694 and 800 TFLOP/s (clocks
# at 1980 MHz, nothing flagged); a ceiling is the best rate the device sustains for a burst, so the fastest
# burst's median is kept (each burst's samples are still a median, never a single best sample).
GEMM_BURSTS = 3
GEMM_BURST_REST_S = 0.3
GEMM_WARMUP_S = 0.01
GEMM_MIN_TIME_S = 0.0
GEMM_MAX_TIME_S = 0.25
FIRST_GEMM_WARMUP_S = 0.05  # the first GEMM also pays cuBLAS start-up (not timed: the untimed first call)
GPU_DRAM_MIN_BYTES = 256 * MIB
GPU_DRAM_LARGE_BYTES = GIB  # used when the GPU has room for it
CUDA_STEPS = (
    "dram-copy",
    "dram-read",
    "dram-write",
    "l2-copy",
    "gemm-bf16",
    "gemm-fp16",
    "gemm-tf32",
    "gemm-fp32",
    "gemm-fp64",
    "gemm-fp8",
    "gemm-int8",
    "launch-events",
    "launch-host",
)


class HostSync:
    """End-to-end host time of one call: synchronize, host clock, call, synchronize (launch included)."""

    method = "host-sync"

    def __init__(self, torch: Any) -> None:
        self._torch = torch

    def time_once(self, fn: Callable[[], object], before: Callable[[], object] | None) -> float:
        if before is not None:
            before()
        self._torch.cuda.synchronize()
        start = time.perf_counter_ns()
        fn()
        self._torch.cuda.synchronize()
        return (time.perf_counter_ns() - start) * 1e-9

    def synchronize(self) -> None:
        self._torch.cuda.synchronize()


def calibrate_cuda(
    torch: Any,
    *,
    spec: Device | None = None,
    progress: Progress | None = None,
    budget_s: float = 25.0,
) -> Calibration:
    """Measure torch's current CUDA device. ``spec``: the roofs of its spec sheet (roofline.roofs resolves it),
    which give spec values and ratios; None: no sheet matches. ``budget_s`` bounds the whole run (each
    measurement gets a share, 0.3-1.5 s).
    """
    from roofline.measure.backends import CudaEvents, CudaGraph, l2_flush, nvml_clock

    started = time.perf_counter()
    index = torch.cuda.current_device()
    machine = describe_cuda(torch, spec.name if spec is not None else None)
    dram_spec = spec.bandwidth.get("dram") if spec is not None else None
    l2_spec = spec.bandwidth.get("l2") if spec is not None else None
    roofs = dict(spec.compute) if spec is not None else {}
    steps = Steps(CUDA_STEPS, progress)
    dev = torch.device("cuda", index)
    events = CudaEvents(torch)
    clock = nvml_clock(nvml_index(torch, index))
    notes: list[str] = []
    if clock is None:
        notes.append("NVML unavailable: SM clock not sampled, throttling not checked")

    def rule(min_time_s: float) -> StoppingRule:
        left = len(CUDA_STEPS) - steps.index + 1
        share = (budget_s - (time.perf_counter() - started)) / max(left, 1)
        cap = min(max(share, 0.3), 1.5)
        return StoppingRule(min_time_s=min(min_time_s, cap / 2), max_time_s=cap)

    def timed(
        fn: Callable[[], object],
        backend: Any = events,
        flush: Any = None,
        warmup_s: float = 0.05,
        min_time_s: float = 0.05,
    ) -> Any:
        return measure(fn, backend, flush=flush, rule=rule(min_time_s), warmup_s=warmup_s, clock=clock)

    def timed_gemm(fn: Callable[[], object], warmup_s: float = GEMM_WARMUP_S) -> Any:
        """A GEMM from a rested GPU: GEMM_BURSTS bursts, each an idle pause, a short warm-up and >= 10 cold
        samples within GEMM_MAX_TIME_S; the burst with the fastest ceiling time is kept (best of N)."""
        gemm_rule = StoppingRule(min_samples=10, min_time_s=GEMM_MIN_TIME_S, max_time_s=GEMM_MAX_TIME_S)
        bursts = []
        for burst in range(GEMM_BURSTS):
            torch.cuda.synchronize()
            time.sleep(GEMM_REST_S if burst == 0 else GEMM_BURST_REST_S)
            bursts.append(measure(fn, events, flush=flush, rule=gemm_rule, warmup_s=warmup_s, clock=clock))
        return min(bursts, key=lambda m: ceiling_time(m)[0])

    l2_bytes = machine.l2_bytes or 50 * MIB
    free_bytes, _ = torch.cuda.mem_get_info(dev)
    nbytes = max(4 * l2_bytes, GPU_DRAM_MIN_BYTES)
    if free_bytes >= 8 * GPU_DRAM_LARGE_BYTES:
        nbytes = max(nbytes, GPU_DRAM_LARGE_BYTES)
    numel = nbytes // 4
    nbytes = numel * 4
    notes_by_name = {
        "dram-copy": "dst.copy_(src): bytes read + written",
        "dram-read": "src.sum(): bytes read",
        "dram-write": "dst.fill_(random nonzero value): bytes written",
    }
    dram_note = f"buffer {size_text(nbytes)} >= 4x L2 ({l2_bytes / MIB:g} MiB): no flush needed"

    # ---- DRAM: copy, read-only, write-only
    def dram() -> None:
        src = torch.rand(numel, device=dev) + 0.5
        dst = torch.empty_like(src)
        fill_value = 0.5 + float(torch.rand(1).item())  # nonzero, random: no all-zero shortcut anywhere
        for name, fn, work, what in (
            ("dram-copy", lambda: dst.copy_(src), 2 * nbytes, "copy"),
            ("dram-read", lambda: src.sum(), nbytes, "sum"),
            ("dram-write", lambda: dst.fill_(fill_value), nbytes, "fill"),
        ):
            steps.run(
                name,
                lambda name=name, fn=fn, work=work, what=what: rate_ceiling(
                    name,
                    "bandwidth",
                    work,
                    timed(fn),
                    "B/s",
                    shape=f"{size_text(nbytes)} fp32 {what}",
                    spec=dram_spec,
                    note=f"{dram_note}; {notes_by_name[name]}",
                ),
            )

    dram()  # the buffers are freed on return

    # ---- L2-resident copy: two buffers of L2/4 each (half the L2 in all), warm, replayed from a CUDA graph.
    # NB: a reduction (sum, amax) over an L2-sized buffer reached only 0.4-2.3 TB/s on an H100, below its DRAM
    # bandwidth (a short reduction kernel is mostly ramp-up and tail); a copy of L2/4 reached 4.9 TB/s.
    def l2_copy() -> Ceiling | None:
        small = max(l2_bytes // 4, MIB) // 4
        src = torch.rand(small, device=dev) + 0.5
        dst = torch.empty_like(src)
        fn = lambda: dst.copy_(src)  # noqa: E731
        m = timed(fn, backend=CudaGraph(torch, fn, calls=50))
        ceiling = rate_ceiling(
            "l2-copy",
            "bandwidth",
            2 * small * 4,
            m,
            "B/s",
            shape=f"{size_text(small * 4)} fp32 copy in L2, graph of 50",
            spec=l2_spec,
            note="lower bound: each call is a few-microsecond kernel whose ramp-up and tail are included",
        )
        dram_copy = next((c.value for c in steps.ceilings if c.name == "dram-copy"), None)
        if dram_copy is not None and ceiling.value <= dram_copy:
            raise RuntimeError(
                f"an L2-resident copy ran at {ceiling.value / 1e12:.2f} TB/s, no faster than DRAM "
                f"({dram_copy / 1e12:.2f} TB/s): not an L2 ceiling"
            )
        return ceiling

    steps.run("l2-copy", l2_copy)

    # ---- GEMMs on random data, L2 flushed before every sample
    flush = l2_flush(torch, l2_bytes, device=str(dev))
    capability = (machine_cc := torch.cuda.get_device_capability(dev))[0] * 10 + machine_cc[1]

    def float_gemm(
        dtype_name: str, torch_dtype: Any, tf32: bool = False, warmup_s: float = GEMM_WARMUP_S
    ) -> Callable[[], Ceiling]:
        def body() -> Ceiling:
            n = GEMM_SIZE[dtype_name]
            a = torch.randn(n, n, device=dev, dtype=torch_dtype)
            b = torch.randn(n, n, device=dev, dtype=torch_dtype)
            holder: list[Any] = []

            def fn() -> None:
                # NB: not mm(out=c): on the lent H100 the out= path ran a bf16 8192^3 GEMM ~9% slower (728 vs
                # 797 TFLOP/s, same clocks), so a ceiling measured through it would be too low.
                holder[:] = [torch.mm(a, b)]

            old = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            try:
                m = timed_gemm(fn, warmup_s=warmup_s)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = old
            check_output(torch, holder[0], f"gemm-{dtype_name}")
            return _gemm_ceiling(dtype_name, n, m)

        return body

    def _gemm_ceiling(dtype_name: str, n: int, m: Any, note: str = "") -> Ceiling:
        key = gemm_roof_key(dtype_name, roofs) if roofs else None
        return rate_ceiling(
            f"gemm-{dtype_name}",
            "compute",
            2.0 * n**3,
            m,
            "OP/s" if dtype_name == "int8" else "FLOP/s",
            shape=f"{n}x{n}x{n}",
            dtype=dtype_name,
            spec=roofs.get(key) if key else None,
            note=note or "random operands, L2 flushed before each sample",
        )

    steps.run("gemm-bf16", float_gemm("bf16", torch.bfloat16, warmup_s=FIRST_GEMM_WARMUP_S))
    steps.run("gemm-fp16", float_gemm("fp16", torch.float16))
    if capability >= 80:
        steps.run("gemm-tf32", float_gemm("tf32", torch.float32, tf32=True))
    else:
        steps.skip("gemm-tf32", f"compute capability {machine.compute_capability} has no TF32 (needs 8.0)")
    steps.run("gemm-fp32", float_gemm("fp32", torch.float32))
    steps.run("gemm-fp64", float_gemm("fp64", torch.float64))

    def fp8() -> Ceiling:
        n = GEMM_SIZE["fp8"]
        a = (torch.randn(n, n, device=dev) * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(n, n, device=dev) * 0.5).to(torch.float8_e4m3fn)  # row-major; b.t() is column-major
        one = torch.ones((), device=dev, dtype=torch.float32)
        bt = b.t()
        holder: list[Any] = []

        def fn() -> None:
            holder[:] = [torch._scaled_mm(a, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)]

        m = timed_gemm(fn)
        check_output(torch, holder[0], "gemm-fp8")
        return _gemm_ceiling(
            "fp8", n, m, "e4m3 operands, B column-major, bf16 output, torch._scaled_mm; L2 flushed before each sample"
        )

    if capability >= 89 and hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm"):
        steps.run("gemm-fp8", fp8)
    else:
        steps.skip("gemm-fp8", f"compute capability {machine.compute_capability}: fp8 GEMMs need 8.9 or later")

    def int8() -> Ceiling:
        n = GEMM_SIZE["int8"]
        a = torch.randint(-128, 128, (n, n), device=dev, dtype=torch.int8)
        b = torch.randint(-128, 128, (n, n), device=dev, dtype=torch.int8)  # row-major; b.t() is column-major
        bt = b.t()
        holder: list[Any] = []

        def fn() -> None:
            holder[:] = [torch._int_mm(a, bt)]

        m = timed_gemm(fn)
        check_output(torch, holder[0], "gemm-int8")
        # NB: a row-major B runs ~7x slower on an H100 (127 vs 956 TOPS, hardware-facts.md)
        return _gemm_ceiling("int8", n, m, "int32 output, B column-major, torch._int_mm; L2 flushed before each sample")

    if hasattr(torch, "_int_mm"):
        steps.run("gemm-int8", int8)
    else:
        steps.skip("gemm-int8", f"torch {torch.__version__} has no torch._int_mm")

    # ---- launch floor: one tiny kernel
    # NB: on an idle GPU the start event fires at once and the events time the host's launch call (20 us on
    # an H100 VM); keeping the GPU busy first (a ~100 us sleep kernel, untimed) queues start event, kernel and
    # end event back to back, so the events see the kernel's own cost on the GPU timeline (3.4 us there).
    tiny = torch.ones(1, device=dev)
    sleep_cycles = int((machine.max_sm_clock_mhz or 2000) * 100)  # ~100 us at the maximum clock
    busy = (lambda: torch.cuda._sleep(sleep_cycles)) if hasattr(torch.cuda, "_sleep") else flush

    def launch_events() -> Ceiling:
        ceiling = latency_ceiling(
            "launch-events",
            timed(lambda: tiny.add_(1), flush=busy, warmup_s=0.02),
            shape="1-element add_ behind a busy GPU",
            note="device view: what one kernel costs on the GPU timeline (analyses use it as the launch floor)",
        )
        if ceiling.measurement is not None:  # the untimed 'before' keeps the GPU busy; it flushes nothing
            ceiling.measurement.cache = "warm"
        return ceiling

    steps.run("launch-events", launch_events)
    steps.run(
        "launch-host",
        lambda: latency_ceiling(
            "launch-host",
            timed(lambda: tiny.add_(1), backend=HostSync(torch), warmup_s=0.02),
            shape="1-element add_, sync before and after",
            note="host view: launch call, kernel and synchronize, end to end",
        ),
    )
    steps.done()
    torch.cuda.empty_cache()
    if spec is None:
        notes.append(f"no spec sheet matches {machine.name!r}: no spec values or ratios")
    return steps.calibration(machine, notes, started)
