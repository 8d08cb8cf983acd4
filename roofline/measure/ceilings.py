"""Measuring this machine's ceilings: DRAM/L2 bandwidth, GEMM rate per dtype, launch floor (GPU); GEMM rate,
copy and triad bandwidth, per-op overhead (CPU).

torch is passed in (the CLI imports it lazily), so importing this module is cheap; nothing here prints: a
``progress(step_name, index, total)`` callback reports each step (called before step ``index`` starts, and
once more with ``index == total`` at the end).

Conventions (measurement-facts.md, "Empirical ceilings"):
- Bandwidth counts the logical bytes of the kernel: a copy moves 2 x size (read + write), a read-only
  reduction size, a write-only fill size, a triad 3 x size (STREAM's convention: a CPU's write-allocate
  read of the destination is not counted).
- DRAM buffers are at least 4x the last-level cache (GPU: L2), so a sample cannot be served from cache and no
  flush is needed. GEMMs flush the L2 before every sample (outside the timed region).
- Every GEMM runs on random data (never zeros: tensor cores are ~13% faster on zeros), and its output is
  checked (finite, not all zero).
- The timing engine takes the median of samples; the SM clock is sampled through NVML (read-only) and
  samples below 75% of the maximum clock or with a slowdown reason are counted as throttled.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roofline.device import Device
from roofline.measure import StoppingRule, measure
from roofline.measure.calibration import Calibration, Ceiling, Machine, Skipped, Summary, gemm_roof_key, now_utc

Progress = Callable[[str, int, int], None]

GIB = 2**30
MIB = 2**20

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
MIN_UNTHROTTLED = 5  # fewer unthrottled samples than this: the ceiling is the median of all samples
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

# CPU sizes: buffers >= 4x the last-level cache and at least 128 MiB; GEMM size chosen so one call takes
# about CPU_GEMM_CALL_S on this machine.
CPU_DRAM_MIN_BYTES = 128 * MIB
CPU_LLC_FALLBACK_BYTES = 32 * MIB
CPU_GEMM_CALL_S = 0.08
CPU_STEPS = ("cpu-gemm-fp32", "cpu-gemm-fp64", "cpu-copy", "cpu-triad", "launch-host")


# --------------------------------------------------------------------------------------------- helpers


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


class _Steps:
    """Runs named steps in order, reports progress, turns a failing step into a 'skipped' entry."""

    def __init__(self, names: tuple[str, ...], progress: Progress | None) -> None:
        self.names = names
        self.progress = progress
        self.index = 0
        self.ceilings: list[Ceiling] = []
        self.skipped: list[Skipped] = []

    def run(self, name: str, body: Callable[[], Ceiling | list[Ceiling] | None]) -> None:
        if self.progress is not None:
            self.progress(name, self.index, len(self.names))
        self.index += 1
        try:
            result = body()
        except Exception as exc:  # one unsupported dtype or kernel must not end the calibration
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.skipped.append(Skipped(name=name, reason=f"{type(exc).__name__}: {text[:200]}"))
            return
        if result is None:
            return
        self.ceilings.extend(result if isinstance(result, list) else [result])

    def skip(self, name: str, reason: str) -> None:
        if self.progress is not None:
            self.progress(name, self.index, len(self.names))
        self.index += 1
        self.skipped.append(Skipped(name=name, reason=reason))

    def done(self) -> None:
        if self.progress is not None:
            self.progress("done", len(self.names), len(self.names))


def ceiling_time(m: Any) -> tuple[float, str]:
    """The time a ceiling is computed from: the median of unthrottled samples when there are enough of them
    (a ceiling is what the device does at its clocks, not under a power cap), else the median of all."""
    from roofline.measure import median

    if not m.throttled or not any(m.throttled):
        return m.median_s, ""
    kept = [t for t, slow in zip(m.samples_s, m.throttled, strict=True) if not slow]
    if len(kept) >= MIN_UNTHROTTLED:
        return median(kept), f"median of {len(kept)} unthrottled samples ({m.throttled_count} throttled set aside)"
    return m.median_s, f"{m.throttled_count} of {m.n} samples throttled: the ceiling is probably low"


def _rate_ceiling(
    name: str,
    kind: str,
    work: float,
    m: Any,
    unit: str,
    *,
    shape: str,
    dtype: str | None = None,
    spec: float | None = None,
    note: str = "",
) -> Ceiling:
    seconds, how = ceiling_time(m)
    value = work / seconds
    note = "; ".join(part for part in (note, how) if part)
    return Ceiling(
        name=name,
        kind=kind,  # type: ignore[arg-type]
        value=value,
        unit=unit,
        dtype=dtype,
        spec_value=spec,
        ratio=value / spec if spec else None,
        work=work,
        shape=shape,
        note=note,
        measurement=Summary.from_measurement(m),
    )


def _latency_ceiling(name: str, m: Any, *, shape: str, note: str = "") -> Ceiling:
    return Ceiling(
        name=name,
        kind="latency",
        value=m.median_s,
        unit="s",
        shape=shape,
        note=note,
        measurement=Summary.from_measurement(m),
    )


def _size_text(nbytes: int) -> str:
    if nbytes >= GIB and nbytes % GIB == 0:
        return f"{nbytes // GIB} GiB"
    return f"{nbytes / MIB:.4g} MiB"


def _check_output(torch: Any, out: Any, name: str) -> None:
    """The kernel wrote its output: finite and not all zero (an unwritten or degenerate result is no ceiling)."""
    values = out.float() if out.dtype not in (torch.float32, torch.float64) else out
    if not bool(torch.isfinite(values).all()) or not bool(values.ne(0).any()):
        raise RuntimeError(f"{name}: output not written (non-finite or all zero)")


# ------------------------------------------------------------------------------------------------ CUDA


def _nvml_index(env: dict[str, str] | None = None) -> int:
    """NVML index of torch's CUDA device 0 (CUDA_VISIBLE_DEVICES=3,5 -> 3); 0 when it cannot tell."""
    env = os.environ if env is None else env
    first = env.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def _driver_version() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            value = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def describe_cuda(torch: Any, sheet_name: str | None = None) -> Machine:
    """This machine's CUDA device 0 (its key does not depend on anything measured)."""
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    clock = getattr(props, "clock_rate", 0) or 0
    return Machine(
        kind="cuda",
        name=props.name,
        sheet=sheet_name,
        driver=_driver_version(),
        cuda=getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None),
        torch=torch.__version__,
        compute_capability=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None) or None,
        memory_bytes=props.total_memory,
        max_sm_clock_mhz=clock / 1000 if clock else None,
    )


def _spec_values(sheet: Any) -> tuple[float | None, float | None, dict[tuple[str, str], float]]:
    """(DRAM B/s, L2 B/s, compute roofs) of a spec sheet, or Nones."""
    if sheet is None:
        return None, None, {}
    device = Device.from_sheet(sheet)
    return device.bandwidth.get("dram"), device.bandwidth.get("l2"), device.compute


def calibrate_cuda(
    torch: Any,
    *,
    sheet: Any = None,
    progress: Progress | None = None,
    budget_s: float = 25.0,
) -> Calibration:
    """Measure CUDA device 0. ``sheet`` (a SpecSheet) gives spec values and ratios; None: match the GPU name
    against the built-in sheets. ``budget_s`` bounds the whole run (each measurement gets a share, 0.3-1.5 s).
    """
    from roofline.measure.backends import CudaEvents, CudaGraph, l2_flush, nvml_clock

    started = time.perf_counter()
    if sheet is None:
        from roofline.specs.loader import load_registry

        sheet = load_registry().find(torch.cuda.get_device_properties(torch.cuda.current_device()).name)
    machine = describe_cuda(torch, sheet.name if sheet is not None else None)
    dram_spec, l2_spec, roofs = _spec_values(sheet)
    steps = _Steps(CUDA_STEPS, progress)
    dev = torch.device("cuda", torch.cuda.current_device())
    events = CudaEvents(torch)
    clock = nvml_clock(_nvml_index())
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
    dram_note = f"buffer {_size_text(nbytes)} >= 4x L2 ({l2_bytes / MIB:g} MiB): no flush needed"

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
                lambda name=name, fn=fn, work=work, what=what: _rate_ceiling(
                    name,
                    "bandwidth",
                    work,
                    timed(fn),
                    "B/s",
                    shape=f"{_size_text(nbytes)} fp32 {what}",
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
        ceiling = _rate_ceiling(
            "l2-copy",
            "bandwidth",
            2 * small * 4,
            m,
            "B/s",
            shape=f"{_size_text(small * 4)} fp32 copy in L2, graph of 50",
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
            _check_output(torch, holder[0], f"gemm-{dtype_name}")
            return _gemm_ceiling(dtype_name, n, m)

        return body

    def _gemm_ceiling(dtype_name: str, n: int, m: Any, note: str = "") -> Ceiling:
        key = gemm_roof_key(dtype_name, roofs) if roofs else None
        return _rate_ceiling(
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
        _check_output(torch, holder[0], "gemm-fp8")
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
        _check_output(torch, holder[0], "gemm-int8")
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
        ceiling = _latency_ceiling(
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
        lambda: _latency_ceiling(
            "launch-host",
            timed(lambda: tiny.add_(1), backend=HostSync(torch), warmup_s=0.02),
            shape="1-element add_, sync before and after",
            note="host view: launch call, kernel and synchronize, end to end",
        ),
    )
    steps.done()
    torch.cuda.empty_cache()
    if sheet is None:
        notes.append(f"no spec sheet matches {machine.name!r}: no spec values or ratios")
    return Calibration(
        created_utc=now_utc(),
        machine=machine,
        ceilings=steps.ceilings,
        skipped=steps.skipped,
        notes=notes,
        elapsed_s=time.perf_counter() - started,
    )


# ------------------------------------------------------------------------------------------------- CPU


def llc_bytes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> int | None:
    """Size of the highest-level cache of cpu0 from sysfs, or None where sysfs does not say."""
    best: tuple[int, int] | None = None
    base = Path(root)
    try:
        entries = sorted(base.glob("index*"))
    except OSError:
        return None
    for entry in entries:
        try:
            level = int((entry / "level").read_text().strip())
            size = _parse_cache_size((entry / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if size and (best is None or level > best[0] or (level == best[0] and size > best[1])):
            best = (level, size)
    return best[1] if best else None


def _parse_cache_size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def _available_memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cpu_model() -> str:
    from roofline.specs.detect import CPUINFO_PATH

    try:
        with open(CPUINFO_PATH, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip().lower() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def describe_cpu(torch: Any) -> Machine:
    """This machine's CPU as torch uses it (its key does not depend on anything measured)."""
    cpu_backend = getattr(getattr(torch, "backends", None), "cpu", None)
    try:
        isa = cpu_backend.get_cpu_capability() if cpu_backend is not None else None
    except Exception:
        isa = None
    return Machine(
        kind="cpu",
        name=_cpu_model(),
        torch=torch.__version__,
        cpu_threads=torch.get_num_threads(),
        logical_cores=os.cpu_count(),
        isa=isa,
        llc_bytes=llc_bytes(),
    )


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
    steps = _Steps(CPU_STEPS, progress)
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
            _check_output(torch, c, f"cpu-gemm-{dtype_name}")
            return _rate_ceiling(
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
        notes.append(f"copy/triad buffers capped at {_size_text(nbytes)} by free memory (LLC {_size_text(llc)})")
    numel = nbytes // 4
    nbytes = numel * 4
    where = f"buffers {_size_text(nbytes)} >= 4x LLC ({_size_text(llc)})" if not quick else "quick mode buffers"

    def streams() -> None:
        # Values do not change a CPU copy's speed; fill_ with a nonzero constant is fast (first touch faults pages).
        a = torch.empty(numel, dtype=torch.float32).fill_(1.0)
        b = torch.empty(numel, dtype=torch.float32).fill_(1.5)
        c = torch.empty(numel, dtype=torch.float32).fill_(2.5)
        steps.run(
            "cpu-copy",
            lambda: _rate_ceiling(
                "cpu-copy",
                "bandwidth",
                2 * nbytes,
                timed(lambda: a.copy_(b)),
                "B/s",
                shape=f"{_size_text(nbytes)} fp32 copy",
                note=where + "; bytes read + written",
            ),
        )
        steps.run(
            "cpu-triad",
            lambda: _rate_ceiling(
                "cpu-triad",
                "bandwidth",
                3 * nbytes,
                timed(lambda: torch.add(b, c, alpha=0.5, out=a)),
                "B/s",
                shape=f"{_size_text(nbytes)} fp32 triad",
                note=where + "; a = b + s*c via torch.add(b, c, alpha=s, out=a): 2 reads + 1 write "
                "(STREAM convention: no write-allocate read)",
            ),
        )

    streams()  # the buffers are freed on return

    # ---- per-op overhead: a tiny op's host time
    tiny = torch.ones(1)
    steps.run(
        "launch-host",
        lambda: _latency_ceiling(
            "launch-host",
            timed(lambda: tiny.add_(1)),
            shape="1-element add_",
            note="torch dispatch overhead of one op: the CPU's launch floor",
        ),
    )
    steps.done()
    return Calibration(
        created_utc=now_utc(),
        machine=machine,
        ceilings=steps.ceilings,
        skipped=steps.skipped,
        notes=notes,
        elapsed_s=time.perf_counter() - started,
        quick=quick,
    )
