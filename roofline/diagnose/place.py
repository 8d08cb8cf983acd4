"""Placing a model's counted ops on the device's roofline, with their measured times, and aggregating them.

Pure: counted :class:`~roofline.report.records.OpRecord` values + a measured
:class:`~roofline.report.records.Timing` + a :class:`~roofline.device.Device` -> a
:class:`~roofline.report.rows.Placed`, which holds

- one :class:`~roofline.report.rows.OpPoint` per counted op (its record, its measured time, achieved rates, the
  roof it runs against, the attainable rate at its intensity, efficiency and bound);
- :class:`~roofline.report.rows.Aggregate` values by op call site (op + module + shapes), by op type and by
  module path (roofline.report.aggregate);
- an :class:`~roofline.report.rows.IterationSummary` (time, FLOPs, bytes, MFU/MBU, GPU idle share, kernel count);
- the ops no cost formula covers (:class:`~roofline.report.rows.UncountedOp`): listed, never counted as zero.

Every iron-law number (roofline time, attainable, efficiency, bound; a group's too) comes from roofline.ironlaw:
an op's roofline time is max(FLOPs / roof, bytes / DRAM bandwidth), without the launch floor; efficiency =
roofline time / measured time (1.0 = on the roof). The bound is 'launch' when the measured time is within
LAUNCH_FACTOR of the launch floor (x kernels on a GPU; one dispatch per op on the CPU), else the roofline's
compute or memory; 'none' for ops that do no work and take no device time (views on a GPU).

Each point also stores its ``limiter``, the bound class from evidence (roofline.findings.bounds.classify: compute,
memory, parallelism, latency, launch, host, layout or none) and the one line of numbers that decided it
(``limiter_evidence``), with its kernels' launch facts (``kernel_facts``) and the time of its layout-conversion
kernels (``layout_time_s``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from roofline import ironlaw
from roofline.device import Device, Roof
from roofline.errors import UsageError
from roofline.findings.bounds import classify
from roofline.report.aggregate import aggregate_points, device_kind_of, iteration_summary
from roofline.report.records import OpRecord, Timing
from roofline.report.rows import OpPoint, Placed, PointBound, UncountedOp

# ----------------------------------------------------------------------------------------------- helpers


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


def roofline_weight(device: Device) -> Callable[[OpRecord], float]:
    """An op's roofline time on ``device`` (0 for uncounted ops and views): how a compiled model's fused kernel
    time is shared among the ops it fused (roofline.diagnose.join.attribute_fused)."""

    def weigh(record: OpRecord) -> float:
        if not record.counted or record.math == "none":
            return 0.0
        roof, _ = roof_for(device, record.dtype, record.math)
        compute_s = ironlaw.compute_time(int(record.flops or 0), roof.flops_per_s)
        return ironlaw.roofline_time(compute_s, ironlaw.memory_time(int(record.bytes or 0), device.dram_bandwidth))

    return weigh


def place_op(
    record: OpRecord, timing: Any | None, device: Device, device_kind: str, *, threads: tuple[int, int] = (0, 0)
) -> tuple[OpPoint, str]:
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
        input_producers=list(record.input_producers),
        input_params=list(record.input_params),
        input_layouts=list(record.input_layouts),
        input_ids=list(record.input_ids),
        source=record.source,
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
        kernel_facts=list(getattr(timing, "kernel_facts", ()) or ()) if timing is not None else [],
        layout_time_s=float(getattr(timing, "layout_time_s", 0.0) or 0.0) if timing is not None else 0.0,
        fused_kernel=str(getattr(timing, "fused_kernel", "") or "") if timing is not None else "",
    )
    limiter, evidence = classify(point, device, device_kind, threads=threads)
    return point.model_copy(update={"limiter": limiter, "limiter_evidence": evidence}), note


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
        point, note = place_op(record, by_index.get(record.index), device, kind, threads=(timing.threads, timing.cores))
        points.append(point)
        if note and note not in notes:
            notes.append(note)
    times = {i: t.device_time_s for i, t in by_index.items()}
    uncounted_ops = _uncounted(uncounted, times)
    summary = iteration_summary(points, uncounted_ops, timing, device)
    aggregates = aggregate_points(points, summary.op_time_s)
    return Placed(points=points, aggregates=aggregates, summary=summary, uncounted=uncounted_ops, notes=notes)


__all__ = ["per_op_floor", "place", "place_op", "roof_for"]
