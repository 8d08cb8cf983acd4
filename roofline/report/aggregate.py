"""Sums of diagnosed ops (roofline.report.rows.OpPoint): by call site, op type and module path, each by the iron
law's group rule (roofline.ironlaw.group), and the whole iteration's summary. Pure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from roofline import ironlaw
from roofline.device import Device
from roofline.report.records import Timing
from roofline.report.rows import Aggregate, Aggregates, IterationSummary, OpPoint, UncountedOp


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
        limiter=held_most((p.limiter, p.time_s) for p in points),
        **labels,
    )


def held_most(members: Iterable[tuple[str, float]]) -> str:
    """The class holding most of the time among (class, time) pairs ('' classes left out; by count when nothing
    was timed; '' when none has a class): a group's limiter."""
    held: dict[str, float] = {}
    listed = [(name, time_s) for name, time_s in members if name]
    timed = any(time_s > 0 for _, time_s in listed)
    for name, time_s in listed:
        held[name] = held.get(name, 0.0) + (time_s if timed else 1.0)
    return max(held, key=lambda name: held[name]) if held else ""


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
            "sources": list(dict.fromkeys(p.source for p in m if p.source)),
        },
    )
    op_types = agg(points, lambda p: p.op, lambda k, m: {"key": k, "op": k})
    modules = agg(
        points,
        lambda p: p.module,
        lambda k, m: {"key": k or "(model)", "module": k, "module_type": m[0].module_type},
    )
    return Aggregates(ops=sites, op_types=op_types, modules=modules)


def device_kind_of(timing: Timing) -> str:
    """'cuda' or 'cpu' for a Timing's device ('cuda:1' reads as 'cuda')."""
    return "cpu" if str(timing.device).startswith("cpu") else "cuda"


def iteration_summary(
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


__all__ = ["aggregate", "aggregate_points", "call_site_key", "device_kind_of", "held_most", "iteration_summary"]
