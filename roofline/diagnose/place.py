"""Placing a model's counted ops on the device's roofline, with their measured times, and aggregating them.

Pure: counted :class:`~roofline.report.records.OpRecord` values + a measured
:class:`~roofline.report.records.Timing` + a :class:`~roofline.device.Device` -> a
:class:`~roofline.report.rows.Placed`, which holds

- one :class:`~roofline.report.rows.OpPoint` per counted op (its record, its measured time, achieved rates, the
  roof it runs against, the attainable rate at its intensity, efficiency and bound);
- :class:`~roofline.report.rows.Aggregate` values by op call site (op + module + shapes), by op type and by
  module path;
- an :class:`~roofline.report.rows.IterationSummary` (time, FLOPs, bytes, MFU/MBU, GPU idle share, kernel count);
- the ops no cost formula covers (:class:`~roofline.report.rows.UncountedOp`): listed, never counted as zero.

Every iron-law number (roofline time, attainable, efficiency, bound; a group's too) comes from roofline.ironlaw:
an op's roofline time is max(FLOPs / roof, bytes / DRAM bandwidth), without the launch floor; efficiency =
roofline time / measured time (1.0 = on the roof). The bound is 'launch' when the measured time is within
LAUNCH_FACTOR of the launch floor (x kernels on a GPU; one dispatch per op on the CPU), else the roofline's
compute or memory; 'none' for ops that do no work and take no device time (views on a GPU).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from roofline import ironlaw
from roofline.device import Device, Roof
from roofline.dtypes import BITS
from roofline.errors import UsageError
from roofline.report.records import OpRecord, Timing
from roofline.report.rows import (
    Aggregate,
    Aggregates,
    IterationSummary,
    OpPoint,
    Placed,
    PointBound,
    UncountedOp,
)

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
        roof_label, peak, ridge = roof.label, roof.flops_per_s, ironlaw.ridge_point(roof.flops_per_s, bw)
        compute_s = ironlaw.compute_time(flops, peak)
    memory_s = ironlaw.memory_time(nbytes, bw)
    roof_time = ironlaw.roofline_time(compute_s, memory_s)
    roofline_bound: PointBound = ironlaw.bound(compute_s, memory_s) if work else "none"
    # NB: a view's host time on the CPU is all dispatch: launch-bound whatever its length
    bound = ironlaw.measured_bound(roofline_bound, time_s, floor, overhead_only=not work and device_kind == "cpu")
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
        intensity=ironlaw.intensity(flops, nbytes) if nbytes else None,
        roof=roof_label,
        peak_flops_per_s=peak,
        bandwidth_bytes_per_s=bw,
        ridge=ridge,
        attainable_flops_per_s=ironlaw.attainable_rate(flops, roof_time) if peak else None,
        compute_time_s=compute_s,
        memory_time_s=memory_s,
        roof_time_s=roof_time,
        launch_floor_s=floor,
        efficiency=ironlaw.row_efficiency(roof_time, time_s) if work else None,
        bound=bound,  # type: ignore[arg-type]
        roofline_bound=roofline_bound,
    )
    return point, note


# ------------------------------------------------------------------------------------------- aggregation


def aggregate(key: str, points: Sequence[OpPoint], total_time_s: float, **labels: Any) -> Aggregate:
    """Sums over ``points`` and the rates they imply: roofline.ironlaw.group (attainable = FLOPs / summed roofline
    time, efficiency = summed roofline time / summed measured time, the bound holding most of the time)."""
    law = ironlaw.group(ironlaw.Member(p.flops, p.bytes, p.roof_time_s, p.time_s, p.bound) for p in points)
    time_s = law.time_s
    flops = sum(p.flops for p in points)
    nbytes = sum(p.bytes for p in points)
    by_roof: dict[str, int] = defaultdict(int)
    for p in points:
        if p.roof:
            by_roof[p.roof] += p.flops + 1
    return Aggregate(
        key=key,
        count=len(points),
        time_s=time_s,
        time_share=time_s / total_time_s if total_time_s > 0 else 0.0,
        flops=flops,
        bytes=nbytes,
        kernels=sum(p.kernels for p in points),
        intensity=law.intensity,
        achieved_flops_per_s=flops / time_s if time_s > 0 else None,
        achieved_bytes_per_s=nbytes / time_s if time_s > 0 else None,
        attainable_flops_per_s=law.attainable_flops_per_s,
        roof_time_s=law.roof_time_s,
        efficiency=law.efficiency,
        bound=law.bound or "none",
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


def summarize(
    points: Sequence[OpPoint], uncounted: Sequence[UncountedOp], timing: Timing, device: Device
) -> IterationSummary:
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
    return IterationSummary(
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
