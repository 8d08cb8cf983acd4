"""Where `roofline bench` runs: a real device (CUDA or the CPU), its roofs, its timing harness, its runner factory.

The roofs are resolved by :mod:`roofline.roofs` (a GPU: its spec sheet, replaced by a cached calibration of that
sheet; the CPU: its measured roofs). torch is imported lazily, when a target is opened.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline import roofs
from roofline.bench.memory import Free
from roofline.bench.run import Build, Harness, Runnable
from roofline.device import Device
from roofline.errors import UsageError
from roofline.measure.stopping import StoppingRule

#: CUDA: seconds of idle before each row. NB: a large GEMM can push an H100 onto its power cap within a second;
#: without a pause the next rows inherit the lowered clocks and the same suite drifts by up to 10% between
#: runs (seen on the lent H100: 8192^3 bf16 at 1481 us, then 1630 us). Throttled samples are still flagged.
REST_S = 0.5

#: default time budget per row in seconds (the stopping rule usually stops far earlier)
DEFAULT_MAX_TIME_S = 1.0

#: CUDA: microseconds of sleep kernel queued before each sample (untimed), so the events time the op, not its launch
BUSY_US = 50
#: a GPU row's samples are queued back to back, about this much of the op's time per synchronisation
BATCH_S = 0.01


@dataclass
class Target:
    """Where bench runs: the roofs, the timing harness and the runner factory, plus facts for the report."""

    kind: str  # 'cuda' | 'cpu'
    device: Device
    harness: Harness
    build: Build
    info: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _import_torch() -> Any:
    import torch

    return torch


def _rule(max_time_s: float | None) -> StoppingRule:
    if max_time_s is None:
        max_time_s = DEFAULT_MAX_TIME_S
    if not (math.isfinite(max_time_s) and max_time_s > 0):  # nan, inf, 0 and negatives
        raise UsageError(f"--max-time: {max_time_s!r} must be a finite positive number of seconds, e.g. 1")
    base = StoppingRule()
    return StoppingRule(max_time_s=max_time_s, min_time_s=min(base.min_time_s, max_time_s))


def open_target(
    device: str | None,
    *,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    warm: bool | None = None,
    max_time_s: float | None = None,
) -> Target:
    """The target for ``device`` ('cuda', 'cuda:N', 'cpu'; None: CUDA when available, else the CPU).

    ``warm`` None: cold (L2 flushed before each sample) on a GPU, warm on the CPU, whose last-level cache can be
    hundreds of MiB (flushing it would cost more than most ops take)."""
    rule = _rule(max_time_s)
    if roofs.device_kind(device) == "cpu" and sheet:
        raise UsageError(roofs.SHEET_ON_CPU)
    name = roofs.torch_device(device)
    torch = _import_torch()
    if name == "cpu":
        return _cpu_target(torch, True if warm is None else warm, rule)
    return _cuda_target(torch, roofs.torch_index(name), sheet, spec_files, bool(warm), rule)


#: the kinds whose main kernel is a matmul (placed on the 'tensor' roof)
MATMUL_KINDS = ("gemm", "attention", "conv2d")


def _builder(torch: Any, torch_device: Any, *, cpu: bool = False) -> Build:
    from roofline.bench import runners
    from roofline.measure.calibration import CPU_FP32_ROOF_DTYPES, CPU_FP32_ROOF_NOTE

    def build(kind: str, params: Any) -> Runnable:
        bench = runners.build(kind, params, torch=torch, device=torch_device)  # looked up per call (tests patch it)
        dtype = getattr(params, "dtype", None)
        if cpu and kind in MATMUL_KINDS and dtype in CPU_FP32_ROOF_DTYPES:
            bench.notes.append(CPU_FP32_ROOF_NOTE.format(dtype=dtype))
        return bench

    return build


def host_free() -> Free | None:
    """The host memory free now, lowered to the room left under a limit on the process's data (roofline's guard,
    roofline.resources.memory_guard, or ``ulimit -d``); None when it cannot be read."""
    from roofline.resources import data_room, host_memory

    memory = host_memory()
    if memory is None:
        return None
    free = Free(memory.available, f"on the host ({memory.source})")
    room = data_room()
    if room is not None and room < free.bytes:
        free = Free(room, "under the process's data limit (RLIMIT_DATA)")
    return free


def _cuda_free(torch: Any, index: int) -> Callable[[], Free | None]:
    def free() -> Free | None:
        try:
            available, _ = torch.cuda.mem_get_info(index)
        except RuntimeError:  # no context yet, a driver that cannot say: unchecked
            return None
        return Free(int(available), f"on cuda:{index} (torch.cuda.mem_get_info)")

    return free


def _cuda_target(
    torch: Any, index: int, sheet: str | None, spec_files: Sequence[Path], warm: bool, rule: StoppingRule
) -> Target:
    from roofline.measure.backends import CudaEvents, gpu_busy, gpu_sleep, l2_flush, nvml_clock

    torch.cuda.set_device(index)
    torch_device = torch.device("cuda", index)
    props = torch.cuda.get_device_properties(index)
    gpu = roofs.gpu_roofs(torch, index, sheet=sheet, spec_files=spec_files)
    device = gpu.device
    l2_bytes = int(getattr(props, "L2_cache_size", 0) or device.capacities.get("l2", 0))
    flush = None if warm else l2_flush(torch, l2_bytes, device=str(torch_device))
    clock = nvml_clock(gpu.nvml_index)
    # NB: a sleep kernel (untimed) keeps the GPU busy until start event, op and end event are queued back to back
    # (roofline.measure.backends.gpu_sleep): once ahead of each batch of samples, as long as the host takes to queue
    # the batch (CudaEvents.time_batch), the samples then queued back to back (flush, start event, op, end event per
    # sample; one synchronisation per batch: measure's batch_s). On an H100, 20-30 us ops synchronised after every
    # sample read 3-5% below the same ops queued back to back, at the same SM clock; queued back to back they agree
    # with triton.testing.do_bench (docs/performance.md).
    max_mhz = clock.max_clock_mhz if clock is not None else None
    busy = gpu_busy(torch, max_mhz, BUSY_US)
    sleep_for = gpu_sleep(torch, max_mhz)

    def cover(seconds: float) -> None:  # ahead of a batch: as long as the host takes to queue it, BUSY_US at least
        if sleep_for is not None:
            sleep_for(max(seconds, BUSY_US * 1e-6))

    cache_text = "warm L2 (no flush)" if warm else "L2 flushed before each sample"
    description = (
        f"device time per call (CUDA events, GPU rested {REST_S:g} s per row, samples queued back to back in "
        f"batches of about {BATCH_S * 1e3:g} ms), {cache_text}"
    )

    def cleanup() -> None:
        torch.cuda.empty_cache()  # each shape starts with the memory the last one held given back

    torch.cuda.empty_cache()  # what was cached before the first row counts as free too

    harness = Harness(
        backend=CudaEvents(torch),
        flush=flush,
        lead=busy,
        cover=cover,
        batch_s=BATCH_S,
        clock=clock,
        rule=rule,
        cleanup=cleanup,
        description=description,
        cache="warm" if warm else "cold",
        rest_s=REST_S,
        memory=_cuda_free(torch, index),
    )
    info = {
        "device_kind": "cuda",
        "gpu": props.name,
        "index": index,
        "compute_capability": f"{props.major}.{props.minor}",
        "sheet": gpu.sheet.name,
        "torch": torch.__version__,
        "timing": description,
        "method": harness.backend.method,
        "cache": "warm" if warm else "cold",
        "l2_bytes": l2_bytes,
        "max_time_s": rule.max_time_s,
    }
    return Target("cuda", device, harness, _builder(torch, torch_device), info, gpu.notes)


def _cpu_target(torch: Any, warm: bool, rule: StoppingRule) -> Target:
    from roofline.measure.backends import CpuClock, l2_flush
    from roofline.specs.detect import llc_bytes

    threads = torch.get_num_threads()
    device, notes = roofs.device_roofs("cpu")
    llc = llc_bytes() or 0
    flush = None if warm else l2_flush(torch, llc, device="cpu")
    flushed = max(2 * llc, 64 * 2**20)  # what l2_flush writes
    description = f"wall time per call (host clock, {threads} threads), " + (
        "warm caches (no flush)" if warm else f"caches flushed before each sample ({flushed // 2**20} MiB written)"
    )
    harness = Harness(
        backend=CpuClock(),
        flush=flush,
        rule=rule,
        threads=threads,
        description=description,
        memory=host_free,
    )
    info = {
        "device_kind": "cpu",
        "cpu": device.display_name,
        "threads": threads,
        "isa": torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else None,
        "torch": torch.__version__,
        "timing": description,
        "method": harness.backend.method,
        "cache": "warm" if warm else "cold",
        "max_time_s": rule.max_time_s,
    }
    return Target("cpu", device, harness, _builder(torch, torch.device("cpu"), cpu=True), info, notes)
