"""Placing a model's counted ops on the device's roofline, with their measured times, and aggregating them.

Pure: counted :class:`~roofline.report.records.OpRecord` values + a measured
:class:`~roofline.report.records.Timing` + a :class:`~roofline.device.Device` -> :class:`Placed`, which holds

- one :class:`OpPoint` per counted op (its record, its measured time, achieved rates, the roof it runs against,
  the attainable rate at its intensity, efficiency and bound);
- :class:`Aggregate` values by op call site (op + module + shapes), by op type and by module path;
- a :class:`Summary` (time, FLOPs, bytes, MFU/MBU, GPU idle share, kernel count);
- the ops no cost formula covers (:class:`UncountedOp`): listed, never counted as zero.

Conventions (architecture.md): an op's roofline time is max(FLOPs / roof, bytes / DRAM bandwidth), without the
launch floor; efficiency = roofline time / measured time (1.0 = on the roof). The bound is 'launch' when the
measured time is within LAUNCH_FACTOR of the launch floor (x kernels on a GPU; one dispatch per op on the CPU),
else the roofline's compute or memory; 'none' for ops that do no work and take no device time (views on a GPU).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from roofline.device import Device, Roof
from roofline.dtypes import BITS
from roofline.errors import UsageError
from roofline.report.records import OpRecord, Timing

#: a measured time within this factor of the launch floor (x kernels) reads as launch-bound (as in bench)
LAUNCH_FACTOR = 2.0

PointBound = Literal["compute", "memory", "launch", "none"]


class OpPoint(BaseModel):
    """One counted op on the roofline: its record's fields, what was measured and where it sits. Units in names."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # the record (OpRecord)
    index: int
    op: str
    module: str
    module_type: str
    phase: str
    input_shapes: list[list[int]]
    input_dtypes: list[str]
    output_shapes: list[list[int]]
    flops: int
    bytes: int
    dtype: str
    math: str
    non_contiguous: bool = False
    note: str = ""
    # measured
    timed: bool  # a timing was matched to this op
    time_s: float  # device time (GPU: its kernels; CPU: the op's self time), 0 when not timed
    kernels: int = 0
    cpu_time_s: float = 0.0
    launch_delay_s: float = 0.0
    samples_s: list[float] = []  # its device time in each timed iteration (what `roofline gate` tests)
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    # the roofline
    intensity: float | None = None  # FLOP/byte (None: moves no bytes)
    roof: str = ""  # compute roof label, e.g. 'bf16 tensor' ('' for ops doing no math)
    peak_flops_per_s: float = 0.0
    bandwidth_bytes_per_s: float
    ridge: float | None = None
    attainable_flops_per_s: float | None = None  # min(peak, intensity x bandwidth)
    compute_time_s: float = 0.0  # FLOPs / roof
    memory_time_s: float = 0.0  # bytes / DRAM bandwidth
    roof_time_s: float = 0.0  # max(compute, memory): the roofline time, no launch floor
    launch_floor_s: float = 0.0  # the launch floor x kernels (CPU: one dispatch)
    efficiency: float | None = None  # roof_time_s / time_s
    bound: PointBound
    roofline_bound: PointBound  # the analytic bound: compute | memory | none (no work)

    @property
    def rows(self) -> int:
        """Number of output elements (the largest output)."""
        return max((_numel(s) for s in self.output_shapes), default=0)

    def signature(self) -> tuple[str, tuple[tuple[int, ...], ...]]:
        return self.op, tuple(tuple(s) for s in self.input_shapes)

    @property
    def minimum_time_s(self) -> float:
        """The iron-law time: roofline time plus the launch floor."""
        return self.roof_time_s + self.launch_floor_s


class Aggregate(BaseModel):
    """Ops grouped by call site, op type or module: sums and the rates they imply."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    key: str  # the op type, the module path, or 'op @ module shapes'
    op: str = ""
    module: str = ""
    module_type: str = ""
    input_shapes: list[list[int]] = []
    count: int
    time_s: float
    time_share: float  # of the summed op time
    flops: int
    bytes: int
    kernels: int = 0
    intensity: float | None = None
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    attainable_flops_per_s: float | None = None  # FLOPs / summed roofline time
    roof_time_s: float = 0.0
    efficiency: float | None = None  # summed roofline time / summed measured time
    bound: str  # the bound holding most of the measured time
    roof: str = ""


class Aggregates(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    ops: list[Aggregate] = []  # by call site: op + module + input shapes + phase
    op_types: list[Aggregate] = []
    modules: list[Aggregate] = []


class UncountedOp(BaseModel):
    """Ops no cost formula covers, grouped by op: they took time but their FLOPs and bytes are unknown."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    op: str
    count: int
    time_s: float
    modules: list[str]
    input_shapes: list[list[int]]  # of the first one
    note: str = ""


class Summary(BaseModel):
    """The whole iteration. Rates over the end-to-end wall time; shares of the device's peaks."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    device_kind: str  # cuda | cpu
    iterations: int
    wall_s: float  # end-to-end time of one iteration
    op_time_s: float  # summed device time of every timed op (counted and uncounted)
    counted_time_s: float
    uncounted_time_s: float
    unmatched_time_s: float  # device time no op could be matched to
    roof_time_s: float  # summed roofline time of the counted ops
    flops: int
    bytes: int
    ops: int  # counted ops
    work_ops: int  # counted ops doing work (not views)
    timed_ops: int
    uncounted_ops: int
    kernel_count: int
    achieved_flops_per_s: float  # FLOPs / wall
    achieved_bytes_per_s: float  # bytes / wall
    mfu_roof: str  # the roof MFU is measured against: the one holding the most FLOPs
    peak_flops_per_s: float
    mfu: float  # achieved FLOP/s / peak of the dominant roof
    mbu: float  # achieved bytes/s / DRAM bandwidth
    dram_bandwidth_bytes_per_s: float
    gpu_busy_s: float = 0.0
    gpu_idle_s: float = 0.0
    gpu_idle_share: float | None = None  # idle / (busy + idle); None on the CPU
    host_overhead_share: float  # 1 - op time / wall: time outside the ops (Python, dispatch, idle)
    launch_floor_s: float


class Placed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    points: list[OpPoint]
    aggregates: Aggregates
    summary: Summary
    uncounted: list[UncountedOp]
    notes: list[str] = []


# ----------------------------------------------------------------------------------------------- helpers


def _numel(shape: Iterable[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def bits_of(dtype: str, fallback: str = "fp32") -> int:
    """Storage bits of a canonical dtype name; ``fallback``'s for names we do not know ('' or int64 etc.)."""
    if dtype in BITS:
        return BITS[dtype]
    return {"int64": 64, "int32": 32, "int16": 16, "uint8": 8, "bool": 8}.get(dtype, BITS.get(fallback, 32))


def tensor_bytes(shape: Sequence[int], dtype: str, fallback: str = "fp32") -> int:
    return -(-_numel(shape) * bits_of(dtype, fallback) // 8)


def input_bytes(point: OpPoint, which: Iterable[int] | None = None) -> int:
    """Bytes of the point's tensor inputs (all, or the positions in ``which``), each read once."""
    positions = range(len(point.input_shapes)) if which is None else which
    total = 0
    for i in positions:
        if 0 <= i < len(point.input_shapes):
            dtype = point.input_dtypes[i] if i < len(point.input_dtypes) else point.dtype
            total += tensor_bytes(point.input_shapes[i], dtype or point.dtype, point.dtype)
    return total


def output_bytes(point: OpPoint) -> int:
    """Bytes of the point's outputs, in the op's dtype."""
    return sum(tensor_bytes(s, point.dtype) for s in point.output_shapes)


def roof_for(device: Device, dtype: str, math: str) -> tuple[Roof, str]:
    """The roof an op runs against, and a note when the device has none for its dtype (the fp32 one is used)."""
    unit = "tensor" if math == "tensor" else "vector"
    try:
        return device.roof(dtype or "fp32", unit), ""  # type: ignore[arg-type]
    except UsageError:
        pass
    for candidate in (("fp32", unit), ("fp32", "vector")):
        try:
            roof = device.roof(*candidate)  # type: ignore[arg-type]
        except UsageError:
            continue
        return roof, f"{device.name} has no {dtype or 'unnamed-dtype'} {unit} roof: {roof.label} used"
    raise UsageError(f"{device.name} has no fp32 roof: cannot place ops on it")


def per_op_floor(device: Device, kernels: int, device_kind: str) -> float:
    """The launch floor of one op: x its kernels on a GPU; one dispatch on the CPU."""
    if device_kind == "cpu":
        return device.launch_floor_s
    return device.launch_floor_s * kernels


def place_op(record: OpRecord, timing: Any | None, device: Device, device_kind: str) -> tuple[OpPoint, str]:
    """One counted record with its timing (an OpTiming or None) on ``device``: the point and a note ('' if none)."""
    assert record.flops is not None and record.bytes is not None
    flops, nbytes = int(record.flops), int(record.bytes)
    bw = device.dram_bandwidth
    time_s = float(timing.device_time_s) if timing is not None else 0.0
    kernels = int(timing.kernels) if timing is not None else 0
    floor = per_op_floor(device, kernels, device_kind)
    note = ""
    work = record.math != "none" and (flops > 0 or nbytes > 0)
    if record.math == "none":
        roof_label, peak, ridge = "", 0.0, None
        compute_s = 0.0
    else:
        roof, note = roof_for(device, record.dtype, record.math)
        roof_label, peak, ridge = roof.label, roof.flops_per_s, roof.flops_per_s / bw
        compute_s = flops / peak
    memory_s = nbytes / bw
    roof_time = max(compute_s, memory_s)
    intensity = flops / nbytes if nbytes else None
    if intensity is not None and peak:
        attainable: float | None = min(peak, intensity * bw)
    elif flops and peak:
        attainable = peak
    else:
        attainable = None
    roofline_bound: PointBound = ("compute" if compute_s >= memory_s else "memory") if work else "none"
    if floor > 0 and 0 < time_s <= LAUNCH_FACTOR * floor:
        bound: PointBound = "launch"
    elif not work and (time_s > 0 and device_kind == "cpu"):
        bound = "launch"  # a view's host time is all dispatch
    else:
        bound = roofline_bound
    point = OpPoint(
        index=record.index,
        op=record.op,
        module=record.module,
        module_type=record.module_type,
        phase=record.phase,
        input_shapes=[list(s) for s in record.input_shapes],
        input_dtypes=list(record.input_dtypes),
        output_shapes=[list(s) for s in record.output_shapes],
        flops=flops,
        bytes=nbytes,
        dtype=record.dtype,
        math=record.math,
        non_contiguous=record.non_contiguous,
        note=record.note,
        timed=timing is not None,
        time_s=time_s,
        kernels=kernels,
        cpu_time_s=float(getattr(timing, "cpu_time_s", 0.0) or 0.0) if timing is not None else 0.0,
        launch_delay_s=float(getattr(timing, "launch_delay_s", 0.0) or 0.0) if timing is not None else 0.0,
        samples_s=[float(x) for x in getattr(timing, "samples_s", ())] if timing is not None else [],
        achieved_flops_per_s=flops / time_s if time_s > 0 else None,
        achieved_bytes_per_s=nbytes / time_s if time_s > 0 else None,
        intensity=intensity,
        roof=roof_label,
        peak_flops_per_s=peak,
        bandwidth_bytes_per_s=bw,
        ridge=ridge,
        attainable_flops_per_s=attainable,
        compute_time_s=compute_s,
        memory_time_s=memory_s,
        roof_time_s=roof_time,
        launch_floor_s=floor,
        efficiency=roof_time / time_s if time_s > 0 and work else None,
        bound=bound,
        roofline_bound=roofline_bound,
    )
    return point, note


# ------------------------------------------------------------------------------------------- aggregation


def aggregate(key: str, points: Sequence[OpPoint], total_time_s: float, **labels: Any) -> Aggregate:
    """Sums over ``points`` and the rates they imply (attainable = FLOPs / summed roofline time)."""
    time_s = sum(p.time_s for p in points)
    flops = sum(p.flops for p in points)
    nbytes = sum(p.bytes for p in points)
    roof_time = sum(p.roof_time_s for p in points)
    by_bound: dict[str, float] = defaultdict(float)
    by_roof: dict[str, int] = defaultdict(int)
    for p in points:
        by_bound[p.bound] += p.time_s if time_s > 0 else 1.0
        if p.roof:
            by_roof[p.roof] += p.flops + 1
    bound = max(by_bound, key=lambda b: by_bound[b]) if by_bound else "none"
    return Aggregate(
        key=key,
        count=len(points),
        time_s=time_s,
        time_share=time_s / total_time_s if total_time_s > 0 else 0.0,
        flops=flops,
        bytes=nbytes,
        kernels=sum(p.kernels for p in points),
        intensity=flops / nbytes if nbytes else None,
        achieved_flops_per_s=flops / time_s if time_s > 0 else None,
        achieved_bytes_per_s=nbytes / time_s if time_s > 0 else None,
        attainable_flops_per_s=flops / roof_time if roof_time > 0 else None,
        roof_time_s=roof_time,
        efficiency=roof_time / time_s if time_s > 0 and roof_time > 0 else None,
        bound=bound,
        roof=max(by_roof, key=lambda r: by_roof[r]) if by_roof else "",
        **labels,
    )


def _shapes_text(shapes: Sequence[Sequence[int]]) -> str:
    return ", ".join("x".join(str(d) for d in s) if s else "scalar" for s in shapes)


def call_site_key(p: OpPoint) -> str:
    where = p.module or "(model)"
    phase = " (backward)" if p.phase == "backward" else ""
    return f"{p.op} @ {where} [{_shapes_text(p.input_shapes)}]{phase}"


def aggregate_points(points: Sequence[OpPoint], total_time_s: float | None = None) -> Aggregates:
    """By call site (op + module + shapes + phase), by op type and by module path (the module that issued the
    op, children not included), each sorted by measured time, largest first."""
    total = sum(p.time_s for p in points) if total_time_s is None else total_time_s

    def agg(points_: Sequence[OpPoint], key: Callable[[OpPoint], Any], labels: Callable[[Any, list], dict]):
        groups: dict[Any, list[OpPoint]] = {}
        for p in points_:
            groups.setdefault(key(p), []).append(p)
        rows = [aggregate(points=members, total_time_s=total, **labels(k, members)) for k, members in groups.items()]
        return sorted(rows, key=lambda a: (-a.time_s, -a.flops, a.key))

    sites = agg(
        points,
        lambda p: (p.op, p.module, p.signature()[1], p.phase),
        lambda k, m: {
            "key": call_site_key(m[0]),
            "op": m[0].op,
            "module": m[0].module,
            "module_type": m[0].module_type,
            "input_shapes": m[0].input_shapes,
        },
    )
    op_types = agg(points, lambda p: p.op, lambda k, m: {"key": k, "op": k})
    modules = agg(
        points,
        lambda p: p.module,
        lambda k, m: {"key": k or "(model)", "module": k, "module_type": m[0].module_type},
    )
    return Aggregates(ops=sites, op_types=op_types, modules=modules)


# ------------------------------------------------------------------------------------------------ place


def _uncounted(records: Sequence[OpRecord], times: dict[int, float]) -> list[UncountedOp]:
    groups: dict[str, list[OpRecord]] = {}
    for r in records:
        groups.setdefault(r.op, []).append(r)
    out = [
        UncountedOp(
            op=op,
            count=len(members),
            time_s=sum(times.get(r.index, 0.0) for r in members),
            modules=list(dict.fromkeys(r.module or "(model)" for r in members))[:5],
            input_shapes=[list(s) for s in members[0].input_shapes],
            note=members[0].note,
        )
        for op, members in groups.items()
    ]
    return sorted(out, key=lambda u: (-u.time_s, -u.count, u.op))


def device_kind_of(timing: Timing) -> str:
    """'cuda' or 'cpu' for a Timing's device ('cuda:1' reads as 'cuda')."""
    return "cpu" if str(timing.device).startswith("cpu") else "cuda"


def summarize(points: Sequence[OpPoint], uncounted: Sequence[UncountedOp], timing: Timing, device: Device) -> Summary:
    """Totals of one iteration: time, FLOPs, bytes, MFU (against the roof holding the most FLOPs), MBU, idle."""
    kind = device_kind_of(timing)
    counted_time = sum(p.time_s for p in points)
    uncounted_time = sum(u.time_s for u in uncounted)
    op_time = counted_time + uncounted_time
    flops = sum(p.flops for p in points)
    nbytes = sum(p.bytes for p in points)
    by_roof: dict[str, float] = defaultdict(float)
    peaks: dict[str, float] = {}
    for p in points:
        if p.roof:
            by_roof[p.roof] += p.flops
            peaks[p.roof] = p.peak_flops_per_s
    if by_roof:
        mfu_roof = max(by_roof, key=lambda r: (by_roof[r], peaks[r]))
        peak = peaks[mfu_roof]
    else:
        fallback = device.roof("fp32", "vector")
        mfu_roof, peak = fallback.label, fallback.flops_per_s
    wall = float(timing.wall_s)
    achieved = flops / wall if wall > 0 else 0.0
    achieved_bw = nbytes / wall if wall > 0 else 0.0
    span = timing.gpu_busy_s + timing.gpu_idle_s
    return Summary(
        device_kind=kind,
        iterations=timing.iterations,
        wall_s=wall,
        op_time_s=op_time,
        counted_time_s=counted_time,
        uncounted_time_s=uncounted_time,
        unmatched_time_s=timing.unmatched_time_s,
        roof_time_s=sum(p.roof_time_s for p in points),
        flops=flops,
        bytes=nbytes,
        ops=len(points),
        work_ops=sum(1 for p in points if p.math != "none"),
        timed_ops=sum(1 for p in points if p.timed),
        uncounted_ops=sum(u.count for u in uncounted),
        kernel_count=timing.kernel_count,
        achieved_flops_per_s=achieved,
        achieved_bytes_per_s=achieved_bw,
        mfu_roof=mfu_roof,
        peak_flops_per_s=peak,
        mfu=achieved / peak if peak else 0.0,
        mbu=achieved_bw / device.dram_bandwidth,
        dram_bandwidth_bytes_per_s=device.dram_bandwidth,
        gpu_busy_s=timing.gpu_busy_s,
        gpu_idle_s=timing.gpu_idle_s,
        gpu_idle_share=(timing.gpu_idle_s / span if span > 0 else 0.0) if kind == "cuda" else None,
        host_overhead_share=max(0.0, 1.0 - op_time / wall) if wall > 0 else 0.0,
        launch_floor_s=device.launch_floor_s,
    )


def place(records: Sequence[OpRecord], timing: Timing, device: Device) -> Placed:
    """Every counted record with its timing on ``device``'s roofline; aggregates; the summary; the uncounted ops."""
    kind = device_kind_of(timing)
    by_index: dict[int, Any] = {}
    for t in timing.ops:
        if t.index in by_index:  # NB: several timings for one op (should not happen): their times add up
            prev = by_index[t.index]
            by_index[t.index] = type(t)(
                index=t.index,
                device_time_s=prev.device_time_s + t.device_time_s,
                kernels=prev.kernels + t.kernels,
                launch_delay_s=prev.launch_delay_s + t.launch_delay_s,
                cpu_time_s=prev.cpu_time_s + t.cpu_time_s,
                samples_s=tuple(a + b for a, b in zip(prev.samples_s, t.samples_s, strict=False)),
            )
        else:
            by_index[t.index] = t
    points: list[OpPoint] = []
    notes: list[str] = []
    uncounted: list[OpRecord] = []
    for record in sorted(records, key=lambda r: r.index):
        if not record.counted:
            uncounted.append(record)
            continue
        point, note = place_op(record, by_index.get(record.index), device, kind)
        points.append(point)
        if note and note not in notes:
            notes.append(note)
    times = {i: t.device_time_s for i, t in by_index.items()}
    uncounted_ops = _uncounted(uncounted, times)
    summary = summarize(points, uncounted_ops, timing, device)
    aggregates = aggregate_points(points, summary.op_time_s)
    return Placed(points=points, aggregates=aggregates, summary=summary, uncounted=uncounted_ops, notes=notes)


__all__ = [
    "LAUNCH_FACTOR",
    "Aggregate",
    "Aggregates",
    "OpPoint",
    "Placed",
    "Summary",
    "UncountedOp",
    "aggregate",
    "aggregate_points",
    "bits_of",
    "call_site_key",
    "device_kind_of",
    "input_bytes",
    "output_bytes",
    "place",
    "place_op",
    "roof_for",
    "summarize",
    "tensor_bytes",
]
