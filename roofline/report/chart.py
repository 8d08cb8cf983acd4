"""What a roofline chart shows, as plain values: roofs, ridge points, the launch band, points, labels, notes.

Pure: reports and what is known about their devices (spec sheet, calibration) in, a ChartSpec out; no
matplotlib (roofline.render.figure draws it). One panel per device: the devices the reports were placed on,
then each ``--device`` the points are re-drawn on ("what this profile would look like there").

Definitions (docs/plot.md):
- Roofs: the compute roof of every precision the points use and the DRAM roof, as the report placed them
  (spec or measured); beside them the other kind where known (the sheet's spec roofs beside measured ones,
  a cached calibration's measured roofs beside spec ones), with measured / spec ratios; L2 and shared memory
  where the sheet or the calibration knows their bandwidth.
- Launch band: a kernel of F FLOPs cannot take less than the launch floor L, so it cannot go above F / L.
  The band is drawn under F* / L, F* the largest FLOPs per launch among the launch-bound points: every
  kernel at most that size is capped by it; a bigger kernel below the line is not launch-bound.
- Above roof: throughput over the attainable rate at its intensity (efficiency > 1).
- Projection: the same intensity and the same efficiency against the other device's spec roof for the
  point's precision (efficiency taken against the source device's spec roofs where its sheet is known).
- Verified arrows (``verified=True``, diagnose reports written with ``--verify``): from an op's measured point
  up (or down) to its point with the technique of the finding that covers it, at the same intensity (the same
  counted FLOPs and bytes), the rate from its time in the verified run: the per-op time --verify stored for it
  (its profiled pass of the fixed model; the smallest, when several findings stored one). Where none is stored
  (a report written before per-op verification, an op that run did not time) the time is estimated: the op's
  measured time divided by that finding's measured whole-model gain (the largest, when several findings with a
  measured gain cover it). Only ops of findings whose outputs matched. On the report's own panels only.
- Cache points (diagnose ``--counters``, the hierarchical roofline): where Nsight Compute measured an op's L2
  bytes (every call of the point), a second point at its L2 intensity (its FLOPs / its measured L2 bytes per
  iteration) and the same throughput, linked to its DRAM point, placed against the panel's primary L2 roof. On a
  device with no L2 bandwidth (spec sheet or calibration) the L2 points are drawn without the roof (their
  intensity and rate are measured), and a note says so. Likewise an L1 point
  where it measured the op's L1 bytes (``l1tex__t_bytes.sum``), at FLOPs / its L1 bytes, placed against the
  panel's shared-memory roof (L1 and shared memory are one on-chip memory per SM, with one data path; the sheet's
  where the panel's roofs are measured: no calibration measures it): on a device with no such bandwidth (spec sheet
  ``memory.smem.bandwidth_gb_per_s``: no shipped sheet gives one) the L1 points are drawn without it, and a note
  says so. On the report's own panels only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from roofline.device import Device
from roofline.errors import UsageError
from roofline.ironlaw import attainable, ridge_point
from roofline.report.points import SKIP_FLAGS, SKIP_REASONS, Point, report_points
from roofline.report.rows import positive_number
from roofline.report.verified import AfterOps, report_verified
from roofline.units import format_count, format_intensity, format_rate, format_time

RoofKind = Literal["compute", "memory"]
RoofSource = Literal["spec", "measured"]
MERGE_RATIO = 1.05  # compute roofs closer than this share one label (bf16 and fp16 tensor: the same peak)
MEMORY_NAMES = {"dram": "DRAM", "l2": "L2", "llc": "LLC", "smem": "shared memory"}
DEFAULT_TOP = 10
#: the cache levels a diagnose --counters report may give an op's measured bytes of (level -> OpCounters field), and
#: the roof (a MEMORY_NAMES key) each level's points are placed against
CACHE_LEVELS = {"L2": "l2_bytes", "L1": "l1_bytes"}
CACHE_ROOFS = {"L2": "l2", "L1": "smem"}


@dataclass(frozen=True)
class KnownDevice:
    """What is known about a device besides a report: its spec sheet and its measured ceilings."""

    name: str
    display_name: str
    spec: Device | None = None  # roofs from the sheet
    measured: Device | None = None  # the sheet's roofs replaced by a calibration's (roofline.measure.calibration.apply)


@dataclass(frozen=True)
class NamedReport:
    name: str  # shown in legends and notes (the file stem)
    report: Any  # roofline.report.schema.Report
    # its points, report_points(report, name, per_call=...) with the chart's per_call, where the caller has them
    # (a page shows the chart and the same points): made once; None: the chart makes them
    points: Sequence[Point] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ChartRoof:
    kind: RoofKind
    name: str  # 'bf16 tensor', 'DRAM', 'L2', 'shared memory'
    value: float  # FLOP/s (compute) or byte/s (memory)
    source: RoofSource
    primary: bool  # the roofs this panel's points are placed on
    label: str  # '' when another roof of the same look carries the label (merged)
    ratio: float | None = None  # measured / spec
    start: tuple[float, float] = (0.0, 0.0)  # segment ends (intensity, FLOP/s)
    end: tuple[float, float] = (0.0, 0.0)


@dataclass(frozen=True)
class Ridge:
    intensity: float
    throughput: float
    label: str


@dataclass(frozen=True)
class Band:
    """The launch band: a kernel of at most ``flops`` FLOPs cannot go above ``top`` = flops / launch floor.

    It spans the intensities of the launch-bound points (``x_range``), where those kernels are."""

    top: float
    flops: float
    launch_floor_s: float
    x_range: tuple[float, float]
    label: str


@dataclass(frozen=True)
class Mark:
    """One point as drawn on one panel."""

    x: float  # intensity, FLOP/byte
    y: float  # throughput, FLOP/s
    series: int  # index into ChartSpec.series (which report)
    bound: str
    share: float | None
    above_roof: bool
    label: str | None  # the top N by time carry their short label
    point: Point


@dataclass(frozen=True)
class Arrow:
    """One op before and after its finding's technique (``--verify``): from its measured point (x, y) to
    (x, y_after), y_after = its FLOPs / ``time_after_s``. Each covered op call's time after is its time in the
    verified run where --verify stored one, else an estimate: its time divided by the measured whole-model gain of
    the finding that covers it (see the module docstring)."""

    x: float  # intensity, FLOP/byte (unchanged: the same counted FLOPs and bytes)
    y: float  # measured throughput, FLOP/s (the mark's)
    y_after: float  # FLOP/s at the time with the technique
    time_s: float  # measured time of the point's op calls
    time_after_s: float  # covered calls: verified (or estimated) time; the others as measured
    gain: float  # time_s / time_after_s
    techniques: tuple[str, ...]  # the techniques whose times it took
    series: int
    above_roof: bool  # y_after above the point's attainable rate
    point: Point
    measured: bool = False  # every covered call's time after is the verified run's own; False: some estimated


@dataclass(frozen=True)
class CacheMark:
    """One op's point at a cache level's intensity (diagnose --counters): FLOPs / the level's measured bytes, at
    the throughput of its DRAM point (x_dram, y), to which it is linked."""

    level: str  # 'L2' | 'L1'
    x: float  # FLOPs / the level's measured bytes, FLOP/byte
    y: float  # throughput, FLOP/s (its DRAM point's)
    x_dram: float  # its DRAM point's intensity (counted bytes)
    series: int
    level_bytes: float  # the level's measured bytes per iteration, summed over the point's calls
    point: Point


@dataclass(frozen=True)
class Panel:
    device: str
    title: str
    projected: bool
    roofs: tuple[ChartRoof, ...]
    ridges: tuple[Ridge, ...]
    band: Band | None
    marks: tuple[Mark, ...]
    arrows: tuple[Arrow, ...] = ()  # verified=True: ops before and after their finding's technique
    cache_marks: tuple[CacheMark, ...] = ()  # diagnose --counters: L2 and L1 points (see CacheMark)


@dataclass(frozen=True)
class ChartSpec:
    title: str
    series: tuple[str, ...]  # report names, in marker order
    panels: tuple[Panel, ...]
    notes: tuple[str, ...]
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    subtitle: str = ""
    counts: dict[str, int] = field(default_factory=dict)  # plotted, skipped, above-roof


# ------------------------------------------------------------------------------------------------ roofs


def _split(label: str) -> tuple[str, str] | None:
    parts = label.split()
    return (parts[0], parts[1]) if len(parts) == 2 else None


def _spec_compute(device: Device, roof: str) -> float | None:
    key = _split(roof)
    return device.compute.get(key) if key else None


def _rate_label(name: str, value: float, unit: str, source: RoofSource, ratio: float | None) -> str:
    text = f"{name} {format_rate(value, unit)}"
    if source == "measured":
        return text + (f" (measured, {ratio:.0%} of spec)" if ratio else " (measured)")
    return text + " (spec)"


def _merged_name(names: Sequence[str]) -> str:
    """'bf16 tensor' + 'fp16 tensor' -> 'bf16/fp16 tensor'; 'fp32 tensor' + 'fp32 vector' -> 'fp32 tensor/vector'."""
    pairs = [_split(n) for n in names]
    if all(pairs) and len({p[1] for p in pairs}) == 1:  # type: ignore[index]
        return "/".join(p[0] for p in pairs) + f" {pairs[0][1]}"  # type: ignore[index]
    if all(pairs) and len({p[0] for p in pairs}) == 1:  # type: ignore[index]
        return f"{pairs[0][0]} " + "/".join(p[1] for p in pairs)  # type: ignore[index]
    return " / ".join(names)


def _compute_roofs(values: Mapping[str, float], source: RoofSource, primary: bool, spec: Mapping[str, float]) -> list:
    """Compute roofs, highest first; roofs within MERGE_RATIO of the one above share its label."""
    ordered = sorted(values.items(), key=lambda item: -item[1])
    groups: list[list[tuple[str, float]]] = []
    for name, value in ordered:
        if groups and groups[-1][0][1] / value < MERGE_RATIO:
            groups[-1].append((name, value))
        else:
            groups.append([(name, value)])
    roofs = []
    for group in groups:
        lead_name, lead_value = group[0]
        ratio = lead_value / spec[lead_name] if source == "measured" and spec.get(lead_name) else None
        texts = {format_rate(v) for _, v in group}
        name = _merged_name([n for n, _ in group]) if len(texts) == 1 else " · ".join(n for n, _ in group)
        label = _rate_label(name, lead_value, "FLOP/s", source, ratio)
        if len(texts) > 1:  # close but not equal: name each rate
            label = " · ".join(f"{n} {format_rate(v)}" for n, v in group) + (
                " (measured)" if source == "measured" else " (spec)"
            )
        for i, (roof_name, value) in enumerate(group):
            r = value / spec[roof_name] if source == "measured" and spec.get(roof_name) else None
            roofs.append(ChartRoof("compute", roof_name, value, source, primary, label if i == 0 else "", r))
    return roofs


def _memory_roofs(
    values: Mapping[str, float], source: RoofSource, primary: bool, spec: Mapping[str, float]
) -> list[ChartRoof]:
    roofs = []
    for level, value in sorted(values.items(), key=lambda item: item[1]):
        name = MEMORY_NAMES.get(level, level)
        ratio = value / spec[level] if source == "measured" and spec.get(level) else None
        roofs.append(
            ChartRoof("memory", name, value, source, primary, _rate_label(name, value, "B/s", source, ratio), ratio)
        )
    return roofs


@dataclass(frozen=True)
class _RoofSet:
    source: RoofSource
    compute: dict[str, float]
    memory: dict[str, float]  # level -> byte/s


def _measured_bandwidth(measured: Device, spec: Device | None) -> dict[str, float]:
    """Bandwidths a calibration measured: those that differ from the sheet's (apply() keeps the others)."""
    base = spec.bandwidth if spec is not None else {}
    return {level: bw for level, bw in measured.bandwidth.items() if base.get(level) != bw}


def _sets_for_report_device(info: Any, known: KnownDevice | None, roofs: Sequence[str]) -> list[_RoofSet]:
    """(primary, secondary...) roof sets for a device a report placed its points on."""
    compute = {r: info.compute_flops_per_s[r] for r in roofs if r in info.compute_flops_per_s}
    sets = []
    spec = known.spec if known else None
    measured = known.measured if known else None
    if info.roof_source == "spec":
        memory = {"dram": info.dram_bandwidth_bytes_per_s}
        if spec is not None:
            memory.update({lvl: bw for lvl, bw in spec.bandwidth.items() if lvl != "dram"})
        sets.append(_RoofSet("spec", compute, memory))
        if measured is not None:
            m_compute = {
                r: measured.compute[k] for r in compute if (k := _split(r)) in measured.measured and k is not None
            }
            sets.append(_RoofSet("measured", m_compute, _measured_bandwidth(measured, spec)))
        return sets
    memory = {"dram": info.dram_bandwidth_bytes_per_s}
    if measured is not None:
        memory.update({lvl: bw for lvl, bw in _measured_bandwidth(measured, spec).items() if lvl != "dram"})
    sets.append(_RoofSet("measured", compute, memory))
    if spec is not None:
        s_compute = {r: v for r in compute if (v := _spec_compute(spec, r)) is not None}
        sets.append(_RoofSet("spec", s_compute, dict(spec.bandwidth)))
    return sets


def _panel_roofs(sets: Sequence[_RoofSet]) -> list[ChartRoof]:
    """Roofs of every set, primary (the first) first, with the spec values for ratios."""
    spec_set = next((s for s in sets if s.source == "spec"), None)
    spec_compute = dict(spec_set.compute) if spec_set else {}
    spec_memory = dict(spec_set.memory) if spec_set else {}
    roofs: list[ChartRoof] = []
    for i, roof_set in enumerate(sets):
        roofs += _compute_roofs(roof_set.compute, roof_set.source, i == 0, spec_compute)
        roofs += _memory_roofs(roof_set.memory, roof_set.source, i == 0, spec_memory)
    return roofs


def _with_segments(roofs: Sequence[ChartRoof], x_range: tuple[float, float]) -> tuple[ChartRoof, ...]:
    """Segment ends: a memory roof rises until the highest compute roof of its set; a compute roof starts where
    the fastest memory roof of its set meets it (the classic hierarchical roofline)."""
    from dataclasses import replace

    x_lo, x_hi = x_range
    out = []
    for roof in roofs:
        kin = [r for r in roofs if r.source == roof.source and r.primary == roof.primary]
        top = max((r.value for r in kin if r.kind == "compute"), default=None)
        fastest = max((r.value for r in kin if r.kind == "memory"), default=None)
        if roof.kind == "memory":
            x_end = min(top / roof.value, x_hi) if top else x_hi
            out.append(replace(roof, start=(x_lo, x_lo * roof.value), end=(x_end, x_end * roof.value)))
        else:
            x_start = max(roof.value / fastest, x_lo) if fastest else x_lo
            out.append(replace(roof, start=(x_start, roof.value), end=(x_hi, roof.value)))
    return tuple(out)


def _ridges(roofs: Sequence[ChartRoof]) -> tuple[Ridge, ...]:
    """Where each labelled primary compute roof meets the primary DRAM roof."""
    dram = next((r for r in roofs if r.primary and r.kind == "memory" and r.name == "DRAM"), None)
    if dram is None:
        return ()
    ridges = []
    for roof in roofs:
        if roof.primary and roof.kind == "compute" and roof.label:
            ridge = ridge_point(roof.value, dram.value)
            ridges.append(Ridge(ridge, roof.value, f"ridge {format_intensity(ridge)} FLOP/B"))
    return tuple(ridges)


# ------------------------------------------------------------------------------------------------ points


def _band(entries: Sequence[tuple[Point, float]], launch_floor_s: float, highest: float | None) -> Band | None:
    """The launch band under F*/L, F* the largest FLOPs per launch among the launch-bound points, over their
    intensities (x 1/2 .. 2): kernels there of at most F* FLOPs cannot rise above it. Drawn no higher than the
    highest compute roof (above it the roof binds, not the launch floor)."""
    bound = [(p, x) for p, x in entries if p.bound == "launch" and p.flops]
    if not bound or launch_floor_s <= 0:
        return None
    flops = max(p.flops / p.launches for p, _ in bound)  # type: ignore[operator]
    top = flops / launch_floor_s
    xs = [x for _, x in bound]
    label = (
        f"launch band ({format_time(launch_floor_s)} floor):\n"
        f"kernels of ≤ {format_count(flops)} stay below {format_rate(top)}"
    )
    return Band(min(top, highest or top), flops, launch_floor_s, (min(xs) / 2, max(xs) * 2), label)


def _top_labels(marks: list[tuple[Point, float, float, bool, str]], top: int) -> set[int]:
    """The ``top`` marks by share, then time (heapq.nsmallest: sorted()[:top] without sorting them all)."""
    import heapq

    def key(i: int) -> tuple[float, float, int]:
        p = marks[i][0]
        return -(p.share or 0.0), -(p.time_s or 0.0), i

    return set(heapq.nsmallest(max(top, 0), range(len(marks)), key=key))


def _marks(entries: list[tuple[Point, float, float, bool, str]], series: Mapping[str, int], top: int) -> tuple:
    labelled = _top_labels(entries, top)
    marks = []
    for i, (p, x, y, above, bound) in enumerate(entries):
        mark = object.__new__(Mark)  # NB: every field at once (a frozen dataclass sets them one by one: 100,000 marks)
        mark.__dict__.update(
            x=x,
            y=y,
            series=series[p.report],
            bound=bound,
            share=p.share,
            above_roof=above,
            label=p.short_label if i in labelled else None,
            point=p,
        )
        marks.append(mark)
    return tuple(marks)


def _target_roof(device: Device, roof: str) -> tuple[str, float] | None:
    """The roof of ``device`` a point on ``roof`` ('bf16 tensor') runs against there, or None."""
    key = _split(roof)
    if key is None:
        return None
    if key in device.compute:
        return roof, device.compute[key]
    try:
        found = device.roof(key[0], "tensor" if key[1] == "tensor" else "vector")
    except UsageError:
        return None
    return found.label, found.flops_per_s


def _names(points: Sequence[Point], limit: int = 3) -> str:
    names = [p.short_label for p in points[:limit]]
    return ", ".join(names) + (f" and {len(points) - limit} more" if len(points) > limit else "")


def _percent(share: float) -> str:
    return f"{share:.1%}" if share < 0.1 else f"{share:.0%}"


# ------------------------------------------------------------------------------------------------ build


def _range(values: Sequence[float], pad: float) -> tuple[float, float]:
    return min(values) / pad, max(values) * pad


def build_chart(
    reports: Sequence[NamedReport],
    *,
    known: Mapping[str, KnownDevice] | None = None,
    projections: Sequence[str] = (),
    top: int = DEFAULT_TOP,
    per_call: bool = False,
    verified: bool = False,
    marks: bool = True,
) -> ChartSpec:
    """The chart of ``reports``: one panel per device they were placed on, then one per projection device.

    ``known``: spec sheet and calibration per device name (those of the reports' devices, where found, and
    every projection device, which must have a spec sheet). ``verified``: an arrow per op a verified finding
    covers (diagnose --verify), with a note per report saying how it is estimated. ``marks`` False: panels
    without their marks, for a caller that shows the notes and counts alone (a page without the chart)."""
    known = dict(known or {})
    if not reports:
        raise UsageError("no report to plot: give at least one REPORT.json")
    series = {r.name: i for i, r in enumerate(reports)}
    if len(series) < len(reports):  # two files of the same stem: tell them apart by position
        reports = [NamedReport(f"{r.name} ({i + 1})", r.report) for i, r in enumerate(reports)]
        series = {r.name: i for i, r in enumerate(reports)}
    notes: list[str] = []
    all_points: list[Point] = []
    infos: dict[str, Any] = {}
    by_device: dict[str, list[Point]] = {}
    for named in reports:
        points = (
            list(named.points)
            if named.points is not None
            else report_points(named.report, named.name, per_call=per_call)
        )
        all_points += points
        for info in named.report.devices:
            infos.setdefault(info.name, info)
            by_device.setdefault(info.name, [])  # a panel even when none of its points can be drawn
        for p in points:
            by_device.setdefault(p.device, []).append(p)
        skipped = [p for p in points if not p.plottable]
        if skipped:
            notes.append(_skip_note(named, points, skipped))
        if named.report.source == "analytic":
            notes.append(
                f"{named.name}: analytic report: each point is a prediction (FLOPs / minimum time with the launch "
                "floor), not a measurement"
            )
    plotted = [p for p in all_points if p.plottable]
    level_bytes = {
        level: {named.name: counter_bytes(named.report, field) for named in reports}
        for level, field in CACHE_LEVELS.items()
    }
    arrows: dict[str, list[Arrow]] = {}  # device -> arrows on its own panel
    if verified:
        for named in reports:
            found, note = _verified_arrows(named, [p for p in all_points if p.report == named.name], series)
            notes.append(note)
            for arrow in found:
                arrows.setdefault(arrow.point.device, []).append(arrow)
    panels_data: list[tuple[str, str, bool, list[_RoofSet], list[tuple[Point, float, float, bool, str]], float]] = []
    for device, points in by_device.items():
        info = infos.get(device)
        if info is None:
            continue  # a row naming a device the report does not describe: nothing to place it on
        k = known.get(device)
        roof_names = sorted({p.roof for p in points if p.roof and p.roof in info.compute_flops_per_s})
        sets = _sets_for_report_device(info, k, roof_names)
        entries = [(p, p.intensity, p.throughput, p.above_roof, p.bound) for p in points if p.plottable]
        source = "measured roofs" if info.roof_source == "measured" else "spec roofs"
        title = f"{info.display_name} ({device}) · {source}"
        panels_data.append((device, title, False, sets, entries, info.launch_floor_s))  # type: ignore[arg-type]
        notes += _above_notes([p for p in points if p.above_roof], info, k)
    for target in projections:
        k = known.get(target)
        if k is None or k.spec is None:
            raise UsageError(f"--device {target}: no spec sheet to re-draw the points on (see `roofline specs list`)")
        entries, missing = _project(plotted, k.spec, infos, known)
        used = sorted({p.roof for p, *_ in entries})
        sets = [_RoofSet("spec", {r: v for r in used if (v := _spec_compute(k.spec, r))}, dict(k.spec.bandwidth))]
        if k.measured is not None:
            measured = k.measured
            m_compute = {r: measured.compute[key] for r in used if (key := _split(r)) in measured.measured}
            sets.append(_RoofSet("measured", m_compute, _measured_bandwidth(measured, k.spec)))
        title = f"{k.display_name} ({target}) · projected: same efficiency against its spec roofs"
        panels_data.append((target, title, True, sets, entries, k.spec.launch_floor_s))
        if missing:
            roofs = sorted({p.roof for p in missing})
            notes.append(
                f"{target}: {len(missing)} point(s) not re-drawn: it has no roof for {', '.join(roofs)} "
                f"({_names(missing)})"
            )
    cache_marks: list[tuple[CacheMark, ...]] = []
    for device, _, projected, sets, entries, _ in panels_data:
        levels: tuple[CacheMark, ...] = ()
        for level, measured in () if projected else level_bytes.items():
            placed, note = _cache_marks(device, _panel_roofs(sets), entries, measured, series, level)
            levels += placed
            notes += [note] if note else []
        cache_marks.append(levels)
    cache_xs = [m.x for found in cache_marks for m in found]
    x_range, y_range = _ranges(panels_data, [a.y_after for found in arrows.values() for a in found], cache_xs)
    panels = []
    for (device, title, projected, sets, entries, launch_floor), cache in zip(panels_data, cache_marks, strict=True):
        roofs = _with_segments(_panel_roofs(sets), x_range)
        highest = max((r.value for r in roofs if r.primary and r.kind == "compute"), default=None)
        band = _band([(p, x) for p, x, _, _, bound in entries if bound == "launch"], launch_floor, highest)
        if band is not None and band.top <= y_range[0]:
            band = None
        shown = () if projected else tuple(arrows.get(device, ()))
        drawn = _marks(entries, series, top) if marks else ()
        panels.append(Panel(device, title, projected, roofs, _ridges(roofs), band, drawn, shown, cache))
    names = ", ".join(f"{r.name} ({r.report.source})" for r in reports)
    subtitle = ""
    if any(r.report.source == "diagnose" for r in reports):
        subtitle = (
            "diagnose: one point per op call"
            if per_call
            else "diagnose: one point per op and input shapes, its calls summed"
        )
    return ChartSpec(
        title=f"Roofline · {names}",
        series=tuple(r.name for r in reports),
        panels=tuple(panels),
        notes=tuple(notes),
        x_range=x_range,
        y_range=y_range,
        subtitle=subtitle,
        counts={
            "points": len(all_points),
            "plotted": len(plotted),
            "skipped": len(all_points) - len(plotted),
            "above_roof": sum(1 for p in plotted if p.above_roof),
            **({"arrows": sum(len(found) for found in arrows.values())} if verified else {}),
        },
    )


def counter_bytes(report: Any, field_name: str) -> dict[int, float]:
    """A diagnose --counters report's measured bytes of one level per op (``l2_bytes``, ``l1_bytes``), by its
    row's place in ``report.rows``; empty without counters."""
    counters = getattr(report, "counters", None)
    if not isinstance(counters, Mapping):
        return {}
    by_op: dict[int, float] = {}
    for oc in counters.get("ops") or ():
        value = positive_number(oc.get(field_name)) if isinstance(oc, Mapping) else None
        if value is not None and isinstance(oc.get("index"), int):
            by_op[oc["index"]] = value
    if not by_op:
        return {}
    out: dict[int, float] = {}
    for position, row in enumerate(report.rows):
        index = row.get("index", position)
        if isinstance(index, int) and index in by_op:
            out[position] = by_op[index]
    return out


def _cache_marks(
    device: str,
    roofs: Sequence[ChartRoof],
    entries: Sequence[tuple[Point, float, float, bool, str]],
    level_bytes: Mapping[str, Mapping[int, float]],
    series: Mapping[str, int],
    level: str = "L2",
) -> tuple[tuple[CacheMark, ...], str]:
    """The ``level`` points (CACHE_LEVELS) of one panel's plotted points whose every call has measured bytes of
    that level, and a note when the panel has such points but no roof of that level (CACHE_ROOFS) to place them
    against."""
    found: list[tuple[Point, float, float, float, float]] = []
    if not any(level_bytes.values()):
        return (), ""  # no report measured any: nothing to place (and no walk of every point)
    for p, x, y, _, _ in entries:
        measured = level_bytes.get(p.report, {})
        rows = p.rows or (p.index,)
        if not p.flops or not all(r in measured for r in rows):
            continue
        moved = sum(measured[r] for r in rows)
        found.append((p, p.flops / moved, y, x, moved))
    if not found:
        return (), ""
    roof = MEMORY_NAMES[CACHE_ROOFS[level]]
    # NB: no calibration measures shared memory: on a panel of measured roofs the sheet's L1 roof is the one there
    placed = [r for r in roofs if r.kind == "memory" and r.name == roof and (r.primary or level == "L1")]
    marks = tuple(CacheMark(level, x, y, x_dram, series[p.report], moved, p) for p, x, y, x_dram, moved in found)
    if not placed:  # NB: the point needs no roof (its intensity and rate are measured): drawn, and the gap said
        where = "spec sheet or calibration" if level == "L2" else "spec sheet: memory.smem.bandwidth_gb_per_s"
        return marks, (
            f"{device}: Nsight Compute measured {level} bytes for {len(found)} op(s), but no {roof} bandwidth is known "
            f"for it ({where}): the {level} points are drawn without a {roof} roof"
        )
    return marks, ""


def _verified_arrows(named: NamedReport, points: Sequence[Point], series: Mapping[str, int]) -> tuple[list[Arrow], str]:
    """The arrows of one report's plottable points (see Arrow) and the note that says what they are."""
    verified = report_verified(named.report)
    if verified is None:
        return [], f"{named.name}: no verified results (written without diagnose --verify): no arrows"
    lookup = AfterOps.of(verified)
    rows = named.report.rows
    found: list[Arrow] = []
    for p in points:
        if not p.plottable or p.intensity is None or p.throughput is None:
            continue
        if not any(lookup.covers(r) for r in p.rows):
            continue
        before = after = 0.0
        taken: list[Any] = []
        for r in p.rows:
            time_s = positive_number(rows[r].get("time_s")) if 0 <= r < len(rows) else None
            if time_s is None:
                continue
            before += time_s
            changed = lookup.after(r, time_s)
            after += time_s if changed is None else changed.time_after_s
            if changed is not None:
                taken.append(changed)
        if before <= 0 or after <= 0 or not taken:
            continue
        y_after = p.throughput * before / after
        found.append(
            Arrow(
                x=p.intensity,
                y=p.throughput,
                y_after=y_after,
                time_s=before,
                time_after_s=after,
                gain=before / after,
                techniques=tuple(sorted({t.entry.technique for t in taken})),
                series=series[p.report],
                above_roof=p.attainable is not None and y_after > p.attainable,
                point=p,
                measured=all(t.measured for t in taken),
            )
        )
    if not found:
        why = "no finding's technique was measured with matching outputs on a plotted op"
        return [], f"{named.name}: verified, but {why}: no arrows"
    measured = [a for a in found if a.measured]
    estimated = [a for a in found if not a.measured]
    parts = []
    if measured:
        parts.append(
            f"{len(measured)} arrow(s) from an op's measured point to its point in the verified run (its per-op time "
            "with the technique of the finding that covers it, profiled by --verify)"
        )
    if estimated:
        why = (
            "the report stores no per-op verified times (written before diagnose --verify profiled per op, or its "
            "per-op passes failed)"
            if not any(v.op_times_s is not None for v in verified)
            else "no per-op verified time is stored for some of their calls (the finding's per-op pass failed, or "
            "the verified run did not time those calls)"
        )
        parts.append(
            f"{len(estimated)} arrow(s) to an estimated point (dashed): the op's time divided by its finding's "
            f"measured whole-model gain, since {why}"
        )
    note = f"{named.name}: " + "; ".join(parts)
    above_estimated = [a.point for a in estimated if a.above_roof]
    if above_estimated:
        note += (
            f"; {len(above_estimated)} estimated end above the op's roof ({_names(above_estimated)}): for those ops "
            "the whole-model gain overstates what the technique can give them"
        )
    above_measured = [a.point for a in measured if a.above_roof]
    if above_measured:
        note += (
            f"; {len(above_measured)} verified end above the op's roof ({_names(above_measured)}): drawn at the "
            "op's counted bytes, which the technique no longer moves (a fused kernel keeps the intermediates on "
            "chip), or a fused kernel's time shared among its ops by their roofline time"
        )
    return found, note


def _skip_note(named: NamedReport, points: Sequence[Point], skipped: Sequence[Point]) -> str:
    total = sum(p.time_s or 0.0 for p in points)
    counts: dict[str, list[Point]] = {}
    for p in skipped:
        flag = next(f for f in p.flags if f in SKIP_FLAGS)
        counts.setdefault(flag, []).append(p)
    parts = []
    for flag in SKIP_FLAGS:
        group = counts.get(flag)
        if not group:
            continue
        time = sum(p.time_s or 0.0 for p in group)
        share = f", {_percent(time / total)} of the time" if total and time else ""
        parts.append(f"{len(group)} {SKIP_REASONS[flag]}{share}")
    return f"{named.name}: {len(skipped)} of {len(points)} point(s) not plotted: " + "; ".join(parts)


def _above_notes(points: Sequence[Point], info: Any, known: KnownDevice | None) -> list[str]:
    """Points above their roof: a counting error where the roof is a hard limit (spec), else say which roof."""
    if not points:
        return []
    spec = known.spec if known else None
    if info.roof_source == "measured" and spec is not None:
        hard = []
        soft = []
        for p in points:
            peak = _spec_compute(spec, p.roof)
            limit = attainable(p.intensity, peak, spec.dram_bandwidth) if peak and p.intensity else None
            (hard if limit is None or (p.throughput or 0) > limit else soft).append(p)
        notes = []
        if soft:
            notes.append(
                f"{len(soft)} point(s) above the measured roof but under the spec roof ({_names(soft)}): the "
                "calibration measured less than these kernels reach"
            )
        if hard:
            notes.append(_counting_note(hard, "the spec roof"))
        return notes
    return [_counting_note(list(points), "their roof")]


def _counting_note(points: Sequence[Point], roof: str) -> str:
    worst = max(p.efficiency or 0.0 for p in points)
    return (
        f"{len(points)} point(s) above {roof} (up to {worst:.0%} of it: {_names(points)}): a roof is a hard "
        "limit, so the FLOP or byte counts or the measured time are wrong, or the data came from a cache "
        "faster than the roof's memory"
    )


def _project(
    points: Sequence[Point], target: Device, infos: Mapping[str, Any], known: Mapping[str, KnownDevice]
) -> tuple[list[tuple[Point, float, float, bool, str]], list[Point]]:
    """Points re-drawn on ``target``: same intensity, same efficiency against its spec roofs."""
    entries = []
    missing = []
    for p in points:
        moved = project_point(p, target, infos.get(p.device), known.get(p.device))
        if moved is None:
            missing.append(p)
            continue
        entries.append((moved.point, moved.intensity, moved.throughput, moved.efficiency > 1.0, moved.bound))
    return entries, missing


@dataclass(frozen=True)
class Projected:
    """A point re-drawn on another device's spec roofs (``roofline plot --device``)."""

    point: Point  # the point with the target's roof label
    intensity: float  # unchanged
    throughput: float  # FLOP/s there: the same efficiency against the target's attainable rate
    efficiency: float  # against the source device's spec roofs (as the report stored it when it used them)
    bound: str

    @property
    def time_s(self) -> float | None:
        """The point's time there: its FLOPs at that throughput (None without FLOPs)."""
        flops = self.point.flops
        return flops / self.throughput if flops and self.throughput > 0 else None


def project_point(p: Point, target: Device, info: Any, known: KnownDevice | None) -> Projected | None:
    """``p`` re-drawn on ``target`` (a spec sheet's roofs): the same intensity, the same efficiency against the
    target's spec roof for its precision and DRAM bandwidth (``info``/``known``: the report's DeviceInfo and what
    is known about the device it was measured on). None when it cannot be placed (no roof, intensity or time)."""
    found = _target_roof(target, p.roof)
    if found is None or p.intensity is None or p.throughput is None:
        return None
    roof_name, peak = found
    efficiency = _source_efficiency(p, info, known)
    if efficiency is None:
        return None
    reach = attainable(p.intensity, peak, target.dram_bandwidth)
    bound = p.bound
    if bound != "launch":
        bound = "compute" if p.intensity >= ridge_point(peak, target.dram_bandwidth) else "memory"
    from dataclasses import replace

    return Projected(replace(p, roof=roof_name), p.intensity, efficiency * reach, efficiency, bound)


def _source_efficiency(p: Point, info: Any, known: KnownDevice | None) -> float | None:
    """The point's efficiency against its own device's spec roofs when the report used measured ones."""
    spec = known.spec if known else None
    if info is not None and info.roof_source == "measured" and spec is not None and p.intensity and p.throughput:
        peak = _spec_compute(spec, p.roof)
        if peak:
            return p.throughput / attainable(p.intensity, peak, spec.dram_bandwidth)
    return p.efficiency


def _ranges(
    panels: Sequence[tuple], extra_ys: Sequence[float] = (), extra_xs: Sequence[float] = ()
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Shared ranges: every point, arrow end (``extra_ys``), cache point (``extra_xs``) and ridge with room
    around; the DRAM roof visible at the left."""
    xs: list[float] = list(extra_xs)
    ys: list[float] = list(extra_ys)
    tops: list[float] = []
    bws: list[float] = []
    for _, _, _, sets, entries, _ in panels:
        xs += [x for _, x, _, _, _ in entries]
        ys += [y for _, _, y, _, _ in entries]
        for roof_set in sets:
            bws += list(roof_set.memory.values())
            tops += list(roof_set.compute.values())
            dram = roof_set.memory.get("dram")
            if dram:
                xs += [ridge_point(v, dram) for v in roof_set.compute.values()]
    if not xs:
        xs = [1.0]
    x_lo, x_hi = _range(xs, 2.5)
    y_top = max([*tops, *ys], default=1e12)
    y_hi = y_top * 4  # head room for the roof labels
    lowest = min([*ys, *(x_lo * bw for bw in bws)], default=y_top / 1e4)
    y_lo = min(lowest, y_top / 100) / 3
    return (x_lo, x_hi), (y_lo, y_hi)


__all__ = [
    "Arrow",
    "Band",
    "CacheMark",
    "ChartRoof",
    "ChartSpec",
    "KnownDevice",
    "Mark",
    "NamedReport",
    "Panel",
    "Projected",
    "Ridge",
    "build_chart",
    "counter_bytes",
    "project_point",
]


# ------------------------------------------------------------------------------------------ a report's chart

#: What is known about devices by name (roofline.api.known_devices: spec sheets and calibrations).
KnownLookup = Callable[[Sequence[str]], Mapping[str, KnownDevice]]


def check_top(top: int) -> int:
    """``top`` (points labelled) when it is zero or more, else a UsageError."""
    if top < 0:
        raise UsageError(f"--top {top}: zero or more")
    return top


def report_chart(
    reports: Sequence[NamedReport],
    known: KnownLookup,
    *,
    devices: Sequence[str] = (),
    top: int = DEFAULT_TOP,
    per_call: bool = False,
    verified: bool = False,
    marks: bool = True,
) -> ChartSpec:
    """The chart of ``reports``, re-drawn on ``devices`` too (spec-sheet names): ``known`` looks up every device
    the reports were placed on and every one of ``devices``. The one way plot, --plot, report and the notebook
    API build a chart. ``verified``: the --verify arrows (see Arrow); ``marks`` False: no marks (build_chart)."""
    check_top(top)
    names = [info.name for named in reports for info in named.report.devices] + list(devices)
    return build_chart(
        reports,
        known=known(names),
        projections=list(dict.fromkeys(devices)),
        top=top,
        per_call=per_call,
        verified=verified,
        marks=marks,
    )


__all__ += ["KnownLookup", "check_top", "report_chart"]
