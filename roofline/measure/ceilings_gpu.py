"""Measuring a GPU's ceilings: DRAM and L2 bandwidth, GEMM rate per dtype, launch floor (CUDA device).

Conventions and the progress callback: :mod:`roofline.measure.ceilings`. torch is passed in.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any

from roofline.device import Device
from roofline.measure.calibration import Calibration, Ceiling, gemm_roof_key
from roofline.measure.ceilings import (
    GIB,
    MIB,
    GemmPlan,
    Progress,
    Shape,
    Steps,
    Trial,
    best_rate,
    check_output,
    dram_roof,
    error_text,
    gemm_burst,
    gemm_sustained,
    latency_ceiling,
    plan_gemms,
    rate_ceiling,
    shape_text,
    size_text,
    triton_note,
)
from roofline.measure.engine import measure
from roofline.measure.stopping import StoppingRule
from roofline.specs.detect import describe_cuda, nvml_index

# GEMM shapes per dtype, (m, n, k), best first as far as known: each dtype's GEMM ceiling is the best over the first
# few (GemmPlan.shapes), as the MAMF finder does with its sweep (a small sweep here, bounded by the time budget).
# fp32 and fp64 GEMMs run on CUDA cores / fp64 units and are slow: 4096^3 keeps them short.
# NB: on a lent H200 (bf16, do_bench after 1 s idle) 4096x16384x8192 ran fastest of nine shapes from 4096^3 to
# 16384^3, 8192x8192x16384 and 8192^3 among the next; which shape wins moves from run to run by a few percent.
TENSOR_SHAPES = ((4096, 16384, 8192), (8192, 8192, 8192), (8192, 8192, 16384))
GEMM_SHAPES = {
    "bf16": TENSOR_SHAPES,
    "fp16": TENSOR_SHAPES,
    "tf32": TENSOR_SHAPES,
    "fp8": TENSOR_SHAPES,
    "int8": TENSOR_SHAPES,
    "fp32": ((4096, 4096, 4096),),
    "fp64": ((4096, 4096, 4096),),
}
GEMM_ORDER = ("bf16", "fp16", "tf32", "fp32", "fp64", "fp8", "int8")
# A GEMM burst is measured from a rested GPU: GemmPlan.rest_s idle, a short warm-up, then at least 10 samples
# within GemmPlan.burst_s. NB: under sustained load a GPU can hit its power cap within a second (on the lent H100
# a bf16 8192^3 GEMM fell from ~800 to ~690 TFLOP/s, SM clock 1980 -> 1425 MHz, NVML 'sw-power-cap'): the burst
# figure is the median of the samples NVML did not flag as throttled (throttled samples are counted), and the
# sustained figure, measured after a thermal soak of back-to-back GEMMs, the median of all samples. The sustained
# figure is the roof; the burst figure is shown beside it.
# NB: one burst of the same GEMM varied between 694 and 800 TFLOP/s on the lent H100s (clocks at 1980 MHz, nothing
# flagged): the best shape gets more bursts and the fastest burst's median is kept (never a single best sample).
GEMM_WARMUP_S = 0.01
FIRST_GEMM_WARMUP_S = 0.05  # the first GEMM also pays cuBLAS start-up (not timed: the untimed first call)
GEMM_MIN_SAMPLES = 10
#: seconds kept for the steps after the GEMMs (the launch floor) when the GEMM plan is sized from the budget
AFTER_GEMMS_S = 1.5
GPU_DRAM_MIN_BYTES = 256 * MIB
GPU_DRAM_LARGE_BYTES = GIB  # used when the GPU has room for it (and at least 8x its L2)
CUDA_STEPS = (
    "dram-read",
    "dram-copy",
    "dram-write",
    "l2-copy",
    *(f"gemm-{name}-burst" for name in GEMM_ORDER),
    "gemm-soak",
    *(f"gemm-{name}" for name in GEMM_ORDER),
    "launch-events",
    "launch-host",
)


def dram_bytes(l2_bytes: int, free_bytes: int) -> int:
    """The size of each DRAM test buffer: at least 8x the L2 and 1 GiB when two such buffers fit in a quarter of
    the free memory, else at least 4x the L2 and 256 MiB. Pure."""
    large = max(8 * l2_bytes, GPU_DRAM_LARGE_BYTES)
    if free_bytes >= 8 * large:
        return large
    return max(4 * l2_bytes, GPU_DRAM_MIN_BYTES)


DRAM_ORDER = ("dram-read", "dram-copy", "dram-write")
TORCH_DRAM_KERNELS = {
    "dram-read": "torch: src.sum()",
    "dram-copy": "torch: dst.copy_(src)",
    "dram-write": "torch: dst.fill_(v)",
}


def dram_kernels(kernels: Any) -> dict[str, list[tuple[str, Any]]]:
    """For each DRAM ceiling, the kernels to try in order: (label, config) for each configuration of the Triton
    kernel module ``kernels`` (READ_CONFIGS, COPY_CONFIGS, WRITE_CONFIGS), then torch's kernel (label, None), kept
    as the fallback; ``kernels`` None (no Triton): torch's alone. Pure."""
    plan: dict[str, list[tuple[str, Any]]] = {}
    for name in DRAM_ORDER:
        what = name.removeprefix("dram-")
        configs = getattr(kernels, f"{what.upper()}_CONFIGS", ()) if kernels is not None else ()
        plan[name] = [(config.label(what), config) for config in configs] + [(TORCH_DRAM_KERNELS[name], None)]
    return plan


def triton_kernels(import_module: Callable[[str], Any] = importlib.import_module) -> tuple[Any, str | None]:
    """The Triton kernel module (:mod:`roofline.measure.kernels_triton`), or None and why it could not be imported
    (Triton missing, or broken): the DRAM ceilings then use torch's kernels alone."""
    try:
        return import_module("roofline.measure.kernels_triton"), None
    except Exception as exc:  # ImportError, or a Triton that fails while importing
        return None, error_text(exc)


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


Checker = Callable[[], None]  # raises when a kernel did not write what it should have

#: each DRAM kernel tried gets this sampling cap (a 1 GiB read takes well under a millisecond)
DRAM_TRIAL_MAX_S = 0.3
DRAM_TRIAL_MIN_S = 0.05


def calibrate_cuda(
    torch: Any,
    *,
    spec: Device | None = None,
    progress: Progress | None = None,
    budget_s: float = 24.0,
    gemm_plan: GemmPlan | None = None,
    import_kernels: Callable[[], tuple[Any, str | None]] = triton_kernels,
) -> Calibration:
    """Measure torch's current CUDA device. ``spec``: the roofs of its spec sheet (roofline.roofs resolves it),
    which give spec values and ratios; None: no sheet matches. ``budget_s`` bounds the whole run: the GEMM sweep
    is planned from what is left of it (:func:`roofline.measure.ceilings.plan_gemms`; ``gemm_plan`` overrides the
    full plan), the other measurements get a share each (0.3-1.5 s). ``import_kernels``: the Triton kernels, or
    None and why (then torch's kernels alone, with a note).
    """
    from roofline.measure.backends import CudaEvents, CudaGraph, gpu_busy, l2_flush, nvml_clock

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

    l2_bytes = machine.l2_bytes or 50 * MIB
    free_bytes, _ = torch.cuda.mem_get_info(dev)
    numel = dram_bytes(l2_bytes, free_bytes) // 4
    nbytes = numel * 4
    dram_note = f"buffer {size_text(nbytes)}, {nbytes / l2_bytes:.0f}x L2 ({l2_bytes / MIB:g} MiB): no flush needed"

    # an untimed ~100 us sleep kernel before a sample (see the launch floor below); None without torch's sleep
    busy = gpu_busy(torch, machine.max_sm_clock_mhz, 100)

    # ---- DRAM: read-only, copy, write-only; each the best of the Triton kernels and torch's
    kernels, import_error = import_kernels()

    def dram() -> None:
        src = torch.rand(numel, device=dev) + 0.5
        dst = torch.empty_like(src)
        fill_value = 0.5 + float(torch.rand(1).item())  # nonzero, random: no all-zero shortcut anywhere
        dram_rule = StoppingRule(min_time_s=DRAM_TRIAL_MIN_S, max_time_s=DRAM_TRIAL_MAX_S)

        def timed_dram(fn: Callable[[], object]) -> Any:
            # NB: the GPU kept busy before each sample (a sleep kernel, untimed): on an idle GPU the start event
            # fires at once and the events would add the host's launch of the kernel (10-30 us: 3-8% of a 1 GiB
            # read) to its time
            return measure(fn, events, flush=busy, rule=dram_rule, warmup_s=0.02, clock=clock)

        def copied() -> None:
            if not bool(torch.equal(dst, src)):
                raise RuntimeError("the copy did not write its destination")

        def written() -> None:
            if not bool(dst.eq(fill_value).all()):
                raise RuntimeError("the write did not fill its destination")

        def trial(kernel: str, work: int, build: Callable[[], tuple[Callable[[], object], Checker]]) -> Trial:
            def run() -> Any:
                dst.zero_()
                fn, check = build()
                m = timed_dram(fn)
                check()
                return m

            return Trial(kernel=kernel, shape=f"{size_text(nbytes)} fp32", work=work, run=run)

        def triton_read(config: Any) -> tuple[Callable[[], object], Checker]:
            fn, partial = kernels.read(torch, src, config)
            return fn, lambda: check_output(torch, partial, "dram-read")

        def torch_read() -> tuple[Callable[[], object], Checker]:
            holder: list[Any] = []
            return (lambda: holder.__setitem__(slice(None), [src.sum()])), lambda: check_output(
                torch, holder[0], "dram-read"
            )

        def build(name: str, config: Any) -> Callable[[], tuple[Callable[[], object], Checker]]:
            if name == "dram-read":
                return (lambda: triton_read(config)) if config is not None else torch_read
            if name == "dram-copy":
                if config is not None:
                    return lambda: (kernels.copy(src, dst, config), copied)
                return lambda: ((lambda: dst.copy_(src)), copied)
            if config is not None:
                return lambda: (kernels.write(dst, fill_value, config), written)
            return lambda: ((lambda: dst.fill_(fill_value)), written)

        plan = dram_kernels(kernels)
        work = {"dram-read": nbytes, "dram-copy": 2 * nbytes, "dram-write": nbytes}
        read_trials, copy_trials, write_trials = (
            [trial(label, work[name], build(name, config)) for label, config in plan[name]] for name in DRAM_ORDER
        )
        for name, trials, what in (
            ("dram-read", read_trials, "bytes read (a sum: Triton writes one partial sum per program)"),
            ("dram-copy", copy_trials, "bytes read + written"),
            ("dram-write", write_trials, "bytes written, a random nonzero value"),
        ):
            steps.run(
                name,
                lambda name=name, trials=trials, what=what: best_rate(
                    name,
                    "bandwidth",
                    "B/s",
                    trials,
                    spec=dram_spec,
                    note=f"{dram_note}; {what}; best of {len(trials)} kernels",
                ),
            )

    dram()  # the buffers are freed on return
    roof = dram_roof(steps.ceilings)
    tried = [c for ceiling in steps.ceilings if ceiling.name.startswith("dram-") for c in ceiling.candidates]
    kernel_note = triton_note(import_error, tried)
    if kernel_note:
        notes.append(kernel_note)

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
        ceiling.kernel = "torch: dst.copy_(src)"
        dram_copy = next((c.value for c in steps.ceilings if c.name == "dram-copy"), None)
        if dram_copy is not None and ceiling.value <= dram_copy:
            raise RuntimeError(
                f"an L2-resident copy ran at {ceiling.value / 1e12:.2f} TB/s, no faster than DRAM "
                f"({dram_copy / 1e12:.2f} TB/s): not an L2 ceiling"
            )
        return ceiling

    steps.run("l2-copy", l2_copy)

    # ---- GEMMs on random data, L2 flushed before every sample: a burst sweep per dtype from rest, a thermal
    # soak, then a sustained figure per dtype (its best shape, no idle pause)
    flush = l2_flush(torch, l2_bytes, device=str(dev))
    # NB: each GEMM sample runs the flush, then the untimed sleep kernel (measure's lead): the flush alone may end
    # before the host has queued the start event and the GEMM (a cuBLAS call on a slow host), and the events then
    # time that launch too: on a lent H100 the fp32 and int8 bursts read 0.969 and 0.968 of do_bench's torch.mm of
    # the same shape, whose launches queue back to back

    capability = (machine_cc := torch.cuda.get_device_capability(dev))[0] * 10 + machine_cc[1]
    kinds = _gemm_kinds(torch, dev, capability, machine.compute_capability)
    runnable = [name for name in GEMM_ORDER if kinds[name].skip is None]
    left = budget_s - (time.perf_counter() - started) - AFTER_GEMMS_S
    plan = plan_gemms(left, [len(GEMM_SHAPES[name]) for name in runnable], gemm_plan or GemmPlan())
    best_shapes: dict[str, Shape] = {}
    burst_medians: dict[str, float] = {}
    first = [True]

    def burst_of(kind: GemmKind) -> Callable[[Shape], Any]:
        def burst(shape: Shape) -> Any:
            fn, out = kind.build(shape)
            warmup_s = FIRST_GEMM_WARMUP_S if first[0] else GEMM_WARMUP_S
            first[0] = False
            torch.cuda.synchronize()
            time.sleep(plan.rest_s)
            gemm_rule = StoppingRule(min_samples=GEMM_MIN_SAMPLES, min_time_s=0.0, max_time_s=plan.burst_s)
            with kind.mode():
                m = measure(fn, events, flush=flush, lead=busy, rule=gemm_rule, warmup_s=warmup_s, clock=clock)
            check_output(torch, out(), f"gemm-{kind.name}")
            return m

        return burst

    def burst_step(kind: GemmKind) -> Callable[[], Ceiling]:
        def body() -> Ceiling:
            ceiling, shape = gemm_burst(
                kind.name,
                GEMM_SHAPES[kind.name],
                burst_of(kind),
                plan=plan,
                unit=kind.unit,
                kernel=kind.kernel,
                spec=_spec(kind.name),
                note=kind.note,
                progress=steps.detail,
            )
            best_shapes[kind.name] = shape
            if ceiling.measurement is not None:
                burst_medians[kind.name] = ceiling.measurement.median_s
            return ceiling

        return body

    def _spec(dtype_name: str) -> float | None:
        key = gemm_roof_key(dtype_name, roofs) if roofs else None
        return roofs.get(key) if key else None

    for name in GEMM_ORDER:
        if kinds[name].skip is not None:
            steps.skip(f"gemm-{name}-burst", kinds[name].skip or "")
        else:
            steps.run(f"gemm-{name}-burst", burst_step(kinds[name]))

    soak_started: list[float] = []

    def back_to_back(fn: Callable[[], object], seconds: float, per_call_s: float) -> tuple[list[float], set[str]]:
        """Run ``fn`` back to back for ``seconds`` (synchronising about every 50 ms); the SM clocks and slowdown
        reasons NVML reported at each synchronisation."""
        batch = max(1, int(0.05 / per_call_s)) if per_call_s > 0 else 1
        clocks: list[float] = []
        reasons: set[str] = set()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(batch):
                fn()
            torch.cuda.synchronize()
            if clock is not None:
                mhz, why = clock.sample()
                if mhz is not None:
                    clocks.append(mhz)
                reasons.update(why)
        return clocks, reasons

    def soak() -> None:
        name = next((n for n in GEMM_ORDER if n in best_shapes), None)
        if name is None:
            raise RuntimeError("no GEMM ran: nothing to soak with")
        kind = kinds[name]
        fn, _ = kind.build(best_shapes[name])
        soak_started.append(time.perf_counter())
        with kind.mode():
            clocks, reasons = back_to_back(fn, plan.soak_s, burst_medians.get(name, 1e-3))
        seen = f"; SM clock {min(clocks):,.0f}-{max(clocks):,.0f} MHz" if clocks else ""
        why = f", slowdown reasons seen: {', '.join(sorted(reasons))}" if reasons else ""
        notes.append(
            f"thermal soak before the sustained GEMM figures: {plan.soak_s:.1f} s of back-to-back {name} "
            f"{shape_text(best_shapes[name])} GEMMs{seen}{why}"
        )

    if best_shapes:
        steps.run("gemm-soak", soak)
    else:
        steps.skip("gemm-soak", "no GEMM burst ran")

    def sustained_step(kind: GemmKind) -> Callable[[], Ceiling]:
        def sustain(shape: Shape) -> Any:
            fn, out = kind.build(shape)
            gemm_rule = StoppingRule(min_samples=GEMM_MIN_SAMPLES, min_time_s=0.0, max_time_s=plan.sustain_s)
            with kind.mode():
                back_to_back(fn, plan.sustain_warmup_s, burst_medians.get(kind.name, 1e-3))
                soaked[0] = time.perf_counter() - (soak_started[0] if soak_started else started_sustained[0])
                m = measure(fn, events, flush=flush, lead=busy, rule=gemm_rule, warmup_s=0.0, clock=clock)
            check_output(torch, out(), f"gemm-{kind.name}")
            return m

        soaked = [0.0]

        def body() -> Ceiling:
            if not started_sustained:
                started_sustained.append(time.perf_counter())
            measured = sustain(best_shapes[kind.name])
            return gemm_sustained(
                kind.name,
                best_shapes[kind.name],
                lambda _shape: measured,
                soaked_s=soaked[0],
                unit=kind.unit,
                kernel=kind.kernel,
                spec=_spec(kind.name),
                note=kind.note,
            )

        return body

    started_sustained: list[float] = []
    for name in GEMM_ORDER:
        if name in best_shapes:
            steps.run(f"gemm-{name}", sustained_step(kinds[name]))
        else:
            steps.skip(f"gemm-{name}", kinds[name].skip or f"gemm-{name}-burst did not run")

    # ---- launch floor: one tiny kernel
    # NB: on an idle GPU the start event fires at once and the events time the host's launch call (20 us on
    # an H100 VM); keeping the GPU busy first (a ~100 us sleep kernel, untimed) queues start event, kernel and
    # end event back to back, so the events see the kernel's own cost on the GPU timeline (3.4 us there).
    tiny = torch.ones(1, device=dev)
    busy_or_flush = busy if busy is not None else flush

    def launch_events() -> Ceiling:
        ceiling = latency_ceiling(
            "launch-events",
            timed(lambda: tiny.add_(1), flush=busy_or_flush, warmup_s=0.02),
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
    return steps.calibration(machine, notes, started, dram_roof=roof)


class GemmKind:
    """How one dtype's GEMM is run: ``build(shape)`` allocates random operands and returns the call and a getter of
    its last output; ``mode()`` is the context it runs in (TF32 on or off); ``skip``: why this GPU or torch cannot
    run it (None: it can)."""

    def __init__(
        self,
        name: str,
        build: Callable[[Shape], tuple[Callable[[], object], Callable[[], Any]]],
        *,
        mode: Callable[[], Any],
        unit: str = "FLOP/s",
        kernel: str = "torch.mm",
        note: str = "",
        skip: str | None = None,
    ) -> None:
        self.name, self.build, self.mode, self.unit, self.kernel, self.note, self.skip = (
            name,
            build,
            mode,
            unit,
            kernel,
            note,
            skip,
        )


def _gemm_kinds(torch: Any, dev: Any, capability: int, cc_text: str | None) -> dict[str, GemmKind]:
    """The GEMM of every dtype on this device (torch.mm, torch._scaled_mm for fp8, torch._int_mm for int8)."""

    class tf32_mode:
        def __init__(self, on: bool) -> None:
            self.on = on

        def __enter__(self) -> None:
            self.old = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = self.on

        def __exit__(self, *exc: object) -> None:
            torch.backends.cuda.matmul.allow_tf32 = self.old

    def float_mm(torch_dtype: Any) -> Callable[[Shape], tuple[Callable[[], object], Callable[[], Any]]]:
        def build(shape: Shape) -> tuple[Callable[[], object], Callable[[], Any]]:
            m, n, k = shape
            a = torch.randn(m, k, device=dev, dtype=torch_dtype)
            b = torch.randn(k, n, device=dev, dtype=torch_dtype)
            holder: list[Any] = [None]

            def fn() -> None:
                # NB: not mm(out=c): on the lent H100 the out= path ran a bf16 8192^3 GEMM ~9% slower (728 vs
                # 797 TFLOP/s, same clocks), so a ceiling measured through it would be too low.
                holder[0] = torch.mm(a, b)

            return fn, lambda: holder[0]

        return build

    def fp8(shape: Shape) -> tuple[Callable[[], object], Callable[[], Any]]:
        m, n, k = shape
        a = (torch.randn(m, k, device=dev) * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device=dev) * 0.5).to(torch.float8_e4m3fn)  # row-major (n, k); b.t() column-major
        one = torch.ones((), device=dev, dtype=torch.float32)
        bt = b.t()
        holder: list[Any] = [None]

        def fn() -> None:
            holder[0] = torch._scaled_mm(a, bt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        return fn, lambda: holder[0]

    def int8(shape: Shape) -> tuple[Callable[[], object], Callable[[], Any]]:
        m, n, k = shape
        a = torch.randint(-128, 128, (m, k), device=dev, dtype=torch.int8)
        b = torch.randint(-128, 128, (n, k), device=dev, dtype=torch.int8)  # row-major (n, k); b.t() column-major
        bt = b.t()
        holder: list[Any] = [None]

        def fn() -> None:
            holder[0] = torch._int_mm(a, bt)

        return fn, lambda: holder[0]

    off, on = (lambda: tf32_mode(False)), (lambda: tf32_mode(True))
    cc = cc_text or f"{capability // 10}.{capability % 10}"
    note = "random operands, L2 flushed before each sample"
    return {
        "bf16": GemmKind("bf16", float_mm(torch.bfloat16), mode=off, note=note),
        "fp16": GemmKind("fp16", float_mm(torch.float16), mode=off, note=note),
        "tf32": GemmKind(
            "tf32",
            float_mm(torch.float32),
            mode=on,
            note=f"fp32 operands with TF32 on; {note}",
            skip=None if capability >= 80 else f"compute capability {cc} has no TF32 (needs 8.0)",
        ),
        "fp32": GemmKind("fp32", float_mm(torch.float32), mode=off, note=note),
        "fp64": GemmKind("fp64", float_mm(torch.float64), mode=off, note=note),
        "fp8": GemmKind(
            "fp8",
            fp8,
            mode=off,
            kernel="torch._scaled_mm",
            note="e4m3 operands, B column-major, bf16 output; L2 flushed before each sample",
            skip=None
            if capability >= 89 and hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")
            else f"compute capability {cc}: fp8 GEMMs need 8.9 or later",
        ),
        # NB: a row-major B runs ~7x slower on an H100 (127 vs 956 TOPS, hardware-facts.md)
        "int8": GemmKind(
            "int8",
            int8,
            mode=off,
            unit="OP/s",
            kernel="torch._int_mm",
            note="int32 output, B column-major; L2 flushed before each sample",
            skip=None if hasattr(torch, "_int_mm") else f"torch {torch.__version__} has no torch._int_mm",
        ),
    }
