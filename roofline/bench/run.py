"""The bench loop: workloads x one device -> measured rows placed on that device's roofline.

The loop (:func:`run_bench`) is pure orchestration over injected parts, so it is tested with fakes:

- ``build(kind, params) -> Runnable``: the op to time (``runners.build`` on a real device);
- a :class:`Harness`: the timing backend (CUDA events, CPU clock), the cache flush, the clock monitor and the
  stopping rule, handed to ``roofline.measure.measure``;
- the :class:`~roofline.device.Device` whose roofs place the rows (a spec sheet, a calibration, the CPU).

Per item: the cost formula gives exact FLOPs and bytes, ``place`` the iron-law time on the roofs, the
harness the measured time, and a :class:`BenchRow` holds all three. Efficiency is the roof time over the
measured median (1.0 = on the roof; launches excluded, see :func:`bench_row`). One item running out of memory
is skipped with a note and the rest go on; Ctrl-C stops the loop and returns the rows finished so far.

The real set-up (:func:`open_target`: CUDA or CPU, roofs from the sheet or a calibration) is at the bottom
and imports torch lazily.
"""

from __future__ import annotations

import gc
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field

from roofline.analysis import Row, analyze_one, expand
from roofline.costs.base import get_model
from roofline.device import Device
from roofline.errors import RooflineError, UsageError, WorkloadError
from roofline.measure.engine import Backend, ClockMonitor, Measurement, measure
from roofline.measure.stats import StoppingRule

#: kinds `roofline bench` runs (decode runs as the weight GEMMs of one decoder layer)
BENCH_KINDS = ("gemm", "attention", "elementwise", "norm", "conv2d", "decode")

#: a measured median within this factor of the launch floor (summed over kernels) reads as launch-bound
LAUNCH_FACTOR = 2.0

#: CUDA: seconds of idle before each row. NB: a large GEMM can push an H100 onto its power cap within a second;
#: without a pause the next rows inherit the lowered clocks and the same suite drifts by up to 10% between
#: runs (seen on the lent H100: 8192^3 bf16 at 1481 us, then 1630 us). Throttled samples are still flagged.
REST_S = 0.5

#: default time budget per row in seconds (the stopping rule usually stops far earlier)
DEFAULT_MAX_TIME_S = 1.0

#: CUDA: microseconds of sleep kernel queued before each sample (untimed), so the events time the op, not its launch
BUSY_US = 50


class Runnable(Protocol):
    """What the loop needs from an op (``runners.Bench`` is one)."""

    op: str
    fn: Callable[[], object] | None
    notes: list[str]

    def active(self) -> AbstractContextManager[None]: ...

    def prepare(self) -> None: ...

    def check(self) -> None: ...

    def release(self) -> None: ...


Build = Callable[[str, Any], Runnable]  # (kind, validated params) -> op
Progress = Callable[[int, int, str], None]  # (items done, items in all, label of the one starting or '')


@dataclass(frozen=True)
class BenchItem:
    """One workload to run: a cost-model kind, its (scalar) parameters and the label rows show."""

    kind: str
    values: dict[str, Any]
    label: str
    source: str = ""
    name: str = ""  # the op within a larger workload (decode: 'qkv_proj'), '' for a plain workload
    notes: tuple[str, ...] = ()


class BenchRow(Row):
    """An analytic Row (cost and placement on the roofs) plus what was measured. Units in field names.

    ``roof_time_s`` = ``time_s - launch_time_s``: the iron-law time without launch floors, i.e. the sum over
    kernels of max(FLOPs / peak, bytes / bandwidth). ``efficiency`` = roof_time_s / median_s (1.0 = on the
    roof). ``bound`` is the analytic bound, or 'launch' when the median is within LAUNCH_FACTOR of the
    launch floor summed over the kernels; ``analytic_bound`` keeps the analytic one.
    """

    name: str = ""
    op: str = ""  # the torch call that ran
    bench_notes: list[str] = Field(
        default_factory=list
    )  # what ran differs from what the cost model counts, or how it ran
    median_s: float
    p20_s: float
    p80_s: float
    samples_s: list[float]
    n: int
    relative_spread: float  # (p80 - p20) / median
    method: str  # cuda-events | cuda-graph | cpu-clock
    cache: str  # cold | warm
    stop_reason: str
    throttled_count: int = 0
    throttle_reasons: list[str] = Field(default_factory=list)
    clocks_mhz: list[float | None] = Field(default_factory=list)
    threads: int | None = None
    roof_time_s: float
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    efficiency: float
    analytic_bound: str


@dataclass(frozen=True)
class Skipped:
    """An item that did not run, and why (out of memory, an op this device or torch cannot run)."""

    kind: str
    label: str
    reason: str
    out_of_memory: bool = False
    error: RooflineError | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("error")
        return data


@dataclass
class BenchResult:
    rows: list[BenchRow]
    skipped: list[Skipped]
    total: int
    interrupted: bool = False

    def first_error(self) -> RooflineError | None:
        """The first skip that was not an out-of-memory (a problem to report when nothing ran)."""
        return next((s.error for s in self.skipped if s.error is not None and not s.out_of_memory), None)


def _noop() -> None:
    pass


@dataclass
class Harness:
    """How each item is timed: passed to roofline.measure.measure."""

    backend: Backend
    flush: Callable[[], object] | None = None
    clock: ClockMonitor | None = None
    rule: StoppingRule = field(default_factory=StoppingRule)
    warmup_s: float = 0.02
    threads: int | None = None
    now: Callable[[], float] = time.perf_counter
    cleanup: Callable[[], None] = _noop  # after each item, once its tensors are released (CUDA: empty_cache)
    description: str = ""  # e.g. 'device time per call (CUDA events), L2 flushed before each sample'
    cache: str | None = None  # 'cold' | 'warm' when ``flush`` does more than flush (None: from the measurement)
    rest_s: float = 0.0  # idle time before each item (CUDA: REST_S), after synchronising the device
    sleep: Callable[[float], None] = time.sleep

    def measure(self, fn: Callable[[], object]) -> Measurement:
        if self.rest_s > 0:
            self.backend.synchronize()
            self.sleep(self.rest_s)
        return measure(
            fn,
            self.backend,
            flush=self.flush,
            rule=self.rule,
            warmup_s=self.warmup_s,
            clock=self.clock,
            now=self.now,
            threads=self.threads,
        )


# ----------------------------------------------------------------------------------------------- items


def _canonical(dtype: Any) -> Any:
    from roofline.dtypes import canonical

    try:
        return canonical(dtype) if isinstance(dtype, str) else dtype
    except UsageError:
        return dtype  # the cost model names the problem


def _bench_defaults(kind: str, point: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The parameters as bench runs them: 'sdpa' means fused attention; fp8 GEMMs write bf16 unless told."""
    point = dict(point)
    notes: list[str] = []
    if kind == "attention" and isinstance(point.get("impl"), str) and point["impl"].strip().lower() == "sdpa":
        point["impl"] = "fused"
    if kind == "gemm" and _canonical(point.get("dtype", "fp16")) == "fp8" and point.get("out_dtype") is None:
        point["out_dtype"] = "bf16"
        notes.append("fp8 GEMM (torch._scaled_mm) writes a bf16 C")
    return point, notes


def expand_items(kind: str, values: dict[str, Any], source: str = "") -> list[BenchItem]:
    """The items of workload ``kind`` (list values sweep), each validated by its cost model.

    ``decode`` becomes the weight GEMMs of one decoder layer at M = batch (GEMV-shaped for small batches).
    """
    if kind not in BENCH_KINDS:
        where = f"{source}: " if source else ""
        raise WorkloadError(
            f"{where}bench has no runner for workload kind {kind!r}: use one of {', '.join(BENCH_KINDS)}"
        )
    items: list[BenchItem] = []
    for point in expand({key: value for key, value in values.items() if value is not None}):
        point, notes = _bench_defaults(kind, point)
        if kind == "decode":
            items += _decode_items(point, source)
            continue
        params = get_model(kind).parse(point, source)
        items.append(BenchItem(kind, point, params.label(), source, notes=tuple(notes)))
    return items


def expand_suite(entries: Iterable[tuple[str, dict[str, Any], str]]) -> list[BenchItem]:
    """Items of a loaded suite's (kind, values, source) entries."""
    return [item for kind, values, source in entries for item in expand_items(kind, values, source)]


def decode_layer_gemms(config: Any) -> list[tuple[str, int, int]]:
    """(name, n, k) of the weight GEMMs of one decoder layer of ``config`` (a ModelConfig)."""
    hd, kv = config.dim_head, config.n_kv_heads
    shapes = [("qkv_proj", (config.heads + 2 * kv) * hd, config.hidden), ("o_proj", config.hidden, config.heads * hd)]
    if config.ffn_type == "gated":
        shapes.append(("gate_up_proj", 2 * config.ffn, config.hidden))
    else:
        shapes.append(("up_proj", config.ffn, config.hidden))
    shapes.append(("down_proj", config.hidden, config.ffn))
    return shapes


def _decode_items(point: dict[str, Any], source: str) -> list[BenchItem]:
    where = f"{source}: " if source else ""
    p = get_model("decode").parse(point, source)
    cfg = p.config
    if cfg is None:
        raise WorkloadError(
            f"{where}bench decode runs a model's weight GEMMs: give model (a name or YAML), or one weight "
            "GEMM with -n N -k K, not the napkin form (params, d_model)"
        )
    if p.weight_dtype != p.act_dtype:
        raise WorkloadError(
            f"{where}bench decode runs the weight GEMMs at {p.act_dtype}; weight-only {p.weight_dtype} has no "
            "built-in kernel: drop the weight dtype"
        )
    notes = [
        f"decode {cfg.name}: one layer's weight GEMMs at M = batch (GEMV-shaped); attention, norms, "
        "KV cache and LM head not run"
    ]
    if p.context:
        notes.append("context ignored: the weight GEMMs do not depend on it")
    if cfg.bias:
        notes.append("linear biases not run")
    return [
        _gemm_item(p.batch, n, k, p.act_dtype, source, name, f"decode {cfg.name} {name}", notes)
        for name, n, k in decode_layer_gemms(cfg)
    ]


def _gemm_item(
    m: int, n: int, k: int, dtype: str, source: str, name: str, prefix: str, notes: Sequence[str]
) -> BenchItem:
    values, extra = _bench_defaults("gemm", {"m": m, "n": n, "k": k, "dtype": dtype})
    params = get_model("gemm").parse(values, source)
    return BenchItem("gemm", values, f"{prefix} {params.label()}", source, name, (*notes, *extra))


def decode_gemm_items(batch: Any, n: Any, k: Any, dtype: Any) -> list[BenchItem]:
    """The one-weight-GEMM form of bench decode: y[batch, n] = x[batch, k] @ W[k, n] (lists sweep)."""
    items = []
    for point in expand({"batch": batch, "n": n, "k": k, "dtype": dtype}):
        note = "decode weight GEMM at M = batch (GEMV-shaped)"
        items.append(_gemm_item(point["batch"], point["n"], point["k"], point["dtype"], "", "weight", "decode", [note]))
    return items


# ------------------------------------------------------------------------------------------------ loop


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.cuda.OutOfMemoryError, a RuntimeError saying 'out of memory', or the host allocator failing."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def bench_row(
    row: Row, m: Measurement, item: BenchItem, op: str = "", notes: Sequence[str] = (), cache: str | None = None
) -> BenchRow:
    """``row`` (analytic) with measurement ``m``: achieved rates, efficiency and the measured bound."""
    median = m.median_s
    roof_time = row.time_s - row.launch_time_s
    launch = row.launch_time_s > 0 and median <= LAUNCH_FACTOR * row.launch_time_s
    fields = {name: getattr(row, name) for name in Row.model_fields}
    fields.update(label=item.label, bound="launch" if launch else row.bound)
    return BenchRow(
        **fields,
        name=item.name,
        op=op,
        bench_notes=list(dict.fromkeys([*item.notes, *notes])),
        median_s=median,
        p20_s=m.p20_s,
        p80_s=m.p80_s,
        samples_s=list(m.samples_s),
        n=m.n,
        relative_spread=m.relative_spread if median > 0 else 0.0,
        method=m.method,
        cache=cache or m.cache,
        stop_reason=m.stop_reason,
        throttled_count=m.throttled_count,
        throttle_reasons=list(m.throttle_reasons),
        clocks_mhz=list(m.clocks_mhz),
        threads=m.threads,
        roof_time_s=roof_time,
        achieved_flops_per_s=row.flops / median if median > 0 else 0.0,
        achieved_bytes_per_s=row.bytes / median if median > 0 else 0.0,
        efficiency=roof_time / median if median > 0 else 0.0,
        analytic_bound=row.bound,
    )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def run_bench(
    items: Sequence[BenchItem],
    device: Device,
    harness: Harness,
    build: Build,
    *,
    progress: Progress | None = None,
) -> BenchResult:
    """Cost, place, build, time and check every item on ``device``; see the module docstring."""
    rows: list[BenchRow] = []
    skipped: list[Skipped] = []
    interrupted = False
    for index, item in enumerate(items):
        if progress is not None:
            progress(index, len(items), item.label)
        bench: Runnable | None = None
        failed = False
        try:
            bench = build(item.kind, get_model(item.kind).parse(item.values, item.source))  # can it run here?
            row = analyze_one(item.kind, item.values, device, item.source)  # does the device have its roof?
            with bench.active():
                bench.prepare()  # one call, output checked
                assert bench.fn is not None
                measured = harness.measure(bench.fn)
                bench.check()
            rows.append(bench_row(row, measured, item, bench.op, bench.notes, cache=harness.cache))
        except KeyboardInterrupt:
            interrupted = True
        except Exception as exc:
            failed = True
            if is_out_of_memory(exc):
                skipped.append(Skipped(item.kind, item.label, f"out of memory: {_one_line(exc)}", True))
            elif isinstance(exc, RooflineError):
                skipped.append(Skipped(item.kind, item.label, str(exc), error=exc))
            elif isinstance(exc, (RuntimeError, NotImplementedError)):  # torch cannot run it (dtype, device)
                message = f"{item.kind} {item.label}: torch failed: {_one_line(exc)}"
                skipped.append(Skipped(item.kind, item.label, message, error=WorkloadError(message)))
            else:
                raise
        finally:
            if bench is not None:
                bench.release()
            bench = None
            if failed:
                gc.collect()  # the traceback's frames may hold tensors in reference cycles
            harness.cleanup()
        if interrupted:
            break
    if progress is not None:
        progress(len(items) if not interrupted else len(rows) + len(skipped), len(items), "")
    return BenchResult(rows, skipped, len(items), interrupted)


# ----------------------------------------------------------------------------------------- real devices


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
    if not max_time_s > 0:
        raise UsageError(f"--max-time: {max_time_s!r} must be a positive number of seconds")
    base = StoppingRule()
    return StoppingRule(max_time_s=max_time_s, min_time_s=min(base.min_time_s, max_time_s))


def device_kind(device: str | None) -> str:
    """'cuda' or 'cpu' for a --device value ('cuda', 'cuda:N', 'cpu'; None: cuda when torch sees a GPU)."""
    if device is None:
        return "cuda" if _import_torch().cuda.is_available() else "cpu"
    name = device.strip().lower()
    if re.fullmatch(r"cuda(?::\d+)?", name):
        return "cuda"
    if name == "cpu":
        return "cpu"
    raise UsageError(f"--device {device!r}: use cpu or cuda (cuda:N for GPU N)")


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
    kind = device_kind(device)
    torch = _import_torch()
    if kind == "cpu":
        if sheet:
            raise UsageError("--sheet names a GPU spec sheet: CPU roofs come from measurement (roofline calibrate)")
        return _cpu_target(torch, True if warm is None else warm, rule)
    from roofline.errors import DeviceError

    name = (device or "cuda").strip().lower()
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if getattr(torch.version, "cuda", None) else "a CPU-only build"
        raise DeviceError(f"--device {name}: torch {torch.__version__} ({build}) sees no CUDA GPU: use --device cpu")
    index = int(name.partition(":")[2] or 0)
    if index >= torch.cuda.device_count():
        raise DeviceError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    return _cuda_target(torch, index, sheet, spec_files, bool(warm), rule)


def _builder(torch: Any, torch_device: Any) -> Build:
    from roofline.bench import runners

    def build(kind: str, params: Any) -> Runnable:
        return runners.build(kind, params, torch=torch, device=torch_device)  # looked up per call (tests patch it)

    return build


def _nvml_index(index: int) -> int:
    """NVML's index of torch's CUDA device ``index`` (CUDA_VISIBLE_DEVICES as integers), else ``index``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
        if index < len(entries) and entries[index].isdigit():
            return int(entries[index])
    return index


def gpu_sheet(gpu_names: Sequence[str], sheet: str | None, spec_files: Sequence[Path] = ()) -> Any:
    """The spec sheet for the GPU: --sheet NAME when given, else the first sheet matching a reported name."""
    from roofline.specs.loader import load_registry

    registry = load_registry(spec_files)
    if sheet:
        return registry.get(sheet)
    for gpu in gpu_names:
        found = registry.find(gpu)
        if found is not None:
            return found
    shown = gpu_names[0] if gpu_names else "this GPU"
    raise UsageError(
        f"no spec sheet matches {shown!r}: name its sheet with --sheet NAME (`roofline specs list`), "
        "or add one with --spec FILE (docs/spec-sheets.md)"
    )


def with_calibration(device: Device, sheet_name: str) -> tuple[Device, list[str]]:
    """``device`` with measured roofs when a calibration of ``sheet_name`` is cached, else unchanged (spec)."""
    from roofline.measure import calibration

    try:
        cal = calibration.latest_for_sheet(sheet_name)
        if cal is None:
            return device, []
        measured = calibration.apply(device, cal)
    except RooflineError as exc:
        return device, [f"calibration of {sheet_name} not usable, spec roofs used: {exc}"]
    when = f"{cal.created_utc:%Y-%m-%d %H:%M} UTC"
    return measured, [f"roofs measured by roofline calibrate on {when} ({cal.machine.name})"]


def _cuda_target(
    torch: Any, index: int, sheet: str | None, spec_files: Sequence[Path], warm: bool, rule: StoppingRule
) -> Target:
    from roofline.measure.backends import CudaEvents, l2_flush, nvml_clock
    from roofline.specs.detect import nvml_gpu_names

    torch.cuda.set_device(index)
    torch_device = torch.device("cuda", index)
    props = torch.cuda.get_device_properties(index)
    nvml_index = _nvml_index(index)
    names = nvml_gpu_names()
    reported = [names[nvml_index]] if nvml_index < len(names) else []
    spec = gpu_sheet([*reported, props.name], sheet, spec_files)
    device, notes = with_calibration(Device.from_sheet(spec), spec.name)
    l2_bytes = int(getattr(props, "L2_cache_size", 0) or device.capacities.get("l2", 0))
    flush = None if warm else l2_flush(torch, l2_bytes, device=str(torch_device))
    clock = nvml_clock(nvml_index)
    sleep = getattr(torch.cuda, "_sleep", None)
    # NB: on an idle GPU the start event fires as soon as it is recorded, so the events would time the host's
    # launch of the op (~20 us on a VM), not the op: a short sleep kernel before each sample (untimed, after the
    # flush) keeps the GPU busy until start event, op and end event are queued back to back.
    cycles = int(((clock.max_clock_mhz if clock is not None else None) or 2000) * BUSY_US)

    def before() -> None:
        if flush is not None:
            flush()
        if sleep is not None:
            sleep(cycles)

    description = (
        f"device time per call (CUDA events, GPU rested {REST_S:g} s per row, kept busy before each sample), "
        + ("warm L2 (no flush)" if warm else "L2 flushed before each sample")
    )

    def cleanup() -> None:
        torch.cuda.empty_cache()  # each shape starts with the memory the last one held given back

    harness = Harness(
        backend=CudaEvents(torch),
        flush=before,
        clock=clock,
        rule=rule,
        cleanup=cleanup,
        description=description,
        cache="warm" if warm else "cold",
        rest_s=REST_S,
    )
    info = {
        "device_kind": "cuda",
        "gpu": props.name,
        "index": index,
        "compute_capability": f"{props.major}.{props.minor}",
        "sheet": spec.name,
        "torch": torch.__version__,
        "timing": description,
        "method": harness.backend.method,
        "cache": "warm" if warm else "cold",
        "l2_bytes": l2_bytes,
        "max_time_s": rule.max_time_s,
    }
    return Target("cuda", device, harness, _builder(torch, torch_device), info, notes)


def cpu_device(torch: Any) -> tuple[Device, list[str]]:
    """The CPU's measured roofs: this machine's cached calibration (same CPU, torch and thread count), else
    a calibrate_cpu run now, cached for the next time (as `roofline calibrate --device cpu` does)."""
    from roofline.measure import calibration
    from roofline.measure.ceilings import calibrate_cpu, describe_cpu

    key = calibration.machine_key(describe_cpu(torch))
    notes = []
    try:
        cal = calibration.find(key)
    except RooflineError as exc:
        cal = None
        notes.append(f"cached CPU calibration unreadable, measured again: {exc}")
    if cal is None:
        cal = calibrate_cpu(torch)
        try:
            path = calibration.save(cal)
        except OSError as exc:
            notes.append(f"CPU calibrated now (not cached: {exc.strerror or exc})")
        else:
            notes.append(f"CPU calibrated now (cached in {path})")
    else:
        notes.append(f"CPU roofs from the calibration of {cal.created_utc:%Y-%m-%d %H:%M} UTC (roofline calibrate)")
    return calibration.cpu_device(cal), notes


def _cpu_target(torch: Any, warm: bool, rule: StoppingRule) -> Target:
    from roofline.measure.backends import CpuClock, l2_flush
    from roofline.measure.ceilings import llc_bytes

    threads = torch.get_num_threads()
    device, notes = cpu_device(torch)
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
    return Target("cpu", device, harness, _builder(torch, torch.device("cpu")), info, notes)


def bench_report(command: str, target: Any, result: Any, suite: dict[str, str] | None = None) -> Any:
    """The versioned report of a bench run: its rows, the target's facts, the suite's name and file (``suite``:
    null for a single command; baselines read it), the machine, what was skipped. One home for `roofline bench`
    and `roofline gate SUITE`."""
    from roofline.report.machine import describe
    from roofline.report.schema import new_report

    info = {**target.info, "roof_source": target.device.roof_source, "notes": target.notes, "suite": suite}
    return new_report(command, "bench", [target.device], result.rows).model_copy(
        update={
            "bench": info,
            "machine": describe(f"{target.kind}:{target.info.get('index', 0)}", target.device.name),
            "skipped": [s.to_dict() for s in result.skipped],
            "interrupted": result.interrupted,
            "total": result.total,
        }
    )
