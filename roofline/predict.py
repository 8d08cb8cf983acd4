"""Predict a measured report's times on another GPU: each op scaled by what limits it. Pure (docs/predict.md).

Input: a bench or diagnose report (measured times) and the ceilings of the GPU it ran on ("here") and of the target
("there"): the measured ceilings of both where calibrations of both exist, else both sheets' (one basis for the
pair, so that a ratio never mixes a measured ceiling with a spec one). Per op (diagnose row, bench row) of measured
time ``t``, the roof times on both devices from stored counts: compute ``c = FLOPs / compute roof`` and memory
``m = bytes / DRAM bandwidth``; ``R = max(c, m)`` and ``rho = R_there / R_here`` (the roofline's own ratio), ``kappa =
clock_here / clock_there`` (boost clocks from the sheets; 1 when either is unknown). Three scalings:

- same efficiency: ``t * rho`` (the whole time follows the roofline; what the baseline does against spec roofs);
- share: ``min(R, t) * rho + (t - min(R, t)) * kappa`` (the roof's share of the time follows the roof, the rest --
  latency, tails -- follows the clock);
- clock: ``max(t * kappa, R_there)`` (the time does not follow a roof; it cannot beat the target's roofline).

Each op's class (its stored ``limiter``; derived from the shares for bench rows and older reports) picks the
prediction and the range (low, high) around it:

==============  =====================================================  =====================================
class           prediction                                             range
==============  =====================================================  =====================================
compute/memory  mid-way between same efficiency and share              those two
compute (issue) clock (FLOPs under NEAR of the roof: instruction issue)  clock and same efficiency
latency         clock                                                  clock and same efficiency
(derived)       latency without evidence (bench rows, older reports):  same efficiency and clock
                mid-way between same efficiency and clock
parallelism     clock x waves there / waves here (dominant kernel's    that and same efficiency
                blocks over each device's SMs)
launch          launch floors there + the rest x kappa                 that and the time unchanged
host, none      unchanged                                              none
layout          mid-way between same efficiency and clock              those two
==============  =====================================================  =====================================

A model (diagnose) is its ops plus the uncounted ops' time (scaled by the clock, range to the bandwidth ratio) plus
the gaps (the iteration beyond the op time: host time, unchanged). Its range sums each op's low and each op's high
(the ops' errors taken as moving together: a wide, conservative range). The baseline scales by the spec sheets'
peaks at the same efficiency (roofline.report.chart.project_point: what `roofline plot --device` draws); ops it
cannot place (no FLOPs, no roof) and the gaps keep their time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.device import Device
from roofline.errors import UsageError
from roofline.findings.bounds import NEAR
from roofline.report.chart import KnownDevice, project_point
from roofline.report.points import Point, report_points
from roofline.report.rows import KernelFacts, finite_number
from roofline.roofs import Pair, known_devices, target_pairs

SCHEMA = "roofline.predict"
VERSION = 1


# ------------------------------------------------------------------------------------------------ the report


def check_report(report: Any) -> None:
    """UsageError unless ``report`` is a bench or diagnose report with at least one measured time."""
    source = getattr(report, "source", "")
    if source not in ("bench", "diagnose"):
        raise UsageError(
            f"a {source or 'non-measured'} report has no measured times: predict needs a bench or diagnose report"
        )
    if not report.devices:
        raise UsageError("the report names no device it was measured on")
    key = "median_s" if source == "bench" else "time_s"
    if not any((finite_number(row.get(key)) or 0.0) > 0 for row in report.rows):
        raise UsageError("the report has no timed rows: nothing to scale")


# ------------------------------------------------------------------------------------------------ one op


def peak(device: Device, roof: str) -> float | None:
    """The compute roof labelled ``roof`` ('bf16 tensor') on ``device`` (None: none such)."""
    parts = roof.split()
    if len(parts) != 2:
        return None
    dtype, unit = parts
    if (dtype, unit) in device.compute:
        return device.compute[(dtype, unit)]
    try:
        return device.roof(dtype, "tensor" if unit == "tensor" else "vector").flops_per_s
    except UsageError:
        return None


@dataclass(frozen=True)
class OpInput:
    """What the scaling reads of one measured op (bench or diagnose row)."""

    time_s: float
    flops: float = 0.0
    bytes: float = 0.0
    roof: str = ""  # 'bf16 tensor' ('' none)
    kernels: int = 1
    limiter: str = ""  # as stored ('' derive it)
    bound: str = ""  # as stored ('launch' when the row said so)
    blocks: int | None = None  # the dominant kernel's grid blocks
    active_blocks_per_sm: int | None = None

    @classmethod
    def of_row(cls, row: Mapping[str, Any], source: str) -> OpInput:
        facts = _dominant(row.get("kernel_facts"))
        return cls(
            time_s=finite_number(row.get("median_s" if source == "bench" else "time_s")) or 0.0,
            flops=finite_number(row.get("flops")) or 0.0,
            bytes=finite_number(row.get("bytes")) or 0.0,
            roof=str(row.get("roof") or ""),
            kernels=int(finite_number(row.get("kernels")) or 0),
            limiter=str(row.get("limiter") or ""),
            bound=str(row.get("bound") or ""),
            blocks=facts.blocks if facts else None,
            active_blocks_per_sm=facts.active_blocks_per_sm if facts else None,
        )


def _dominant(facts: Any) -> KernelFacts | None:
    if not isinstance(facts, list):
        return None
    parsed = []
    for item in facts:
        try:
            parsed.append(KernelFacts.model_validate(item))
        except ValueError:
            continue
    with_grid = [k for k in parsed if k.grid]
    return max(with_grid, key=lambda k: k.time_s) if with_grid else None


@dataclass(frozen=True)
class OpPrediction:
    time_s: float  # measured here
    predicted_s: float
    low_s: float
    high_s: float
    limiter: str  # the class that decided the scaling
    derived: bool  # the class was derived from the shares (no stored limiter)
    basis: str  # how it was scaled, in words

    @property
    def factor(self) -> float | None:
        return self.predicted_s / self.time_s if self.time_s > 0 else None


def _waves(blocks: int, sms: int, per_sm: int | None) -> float:
    if per_sm:
        return float(math.ceil(blocks / (sms * per_sm)))
    return float(math.ceil(blocks / sms))


def derive_class(op: OpInput, c_here: float, m_here: float) -> str:
    """The class of an op without a stored limiter: launch when its row said so, compute or memory when it achieves
    at least NEAR of that roof (the nearer), none without work, else latency."""
    t = op.time_s
    if op.bound == "launch":
        return "launch"
    if op.flops <= 0 and op.bytes <= 0:
        return "none"
    if max(c_here, m_here) >= NEAR * t:
        return "compute" if c_here >= m_here else "memory"
    return "latency"


def scale_op(op: OpInput, pair: Pair) -> OpPrediction:
    """``op``'s time on ``pair.there``: see the module docstring."""
    t = op.time_s
    if t <= 0:
        return OpPrediction(0.0, 0.0, 0.0, 0.0, "none", False, "not timed")
    here, there = pair.here.device, pair.there.device
    p_here, p_there = peak(here, op.roof), peak(there, op.roof)
    if p_there is None:
        p_there = p_here
    c_here = op.flops / p_here if op.flops > 0 and p_here else 0.0
    c_there = op.flops / p_there if op.flops > 0 and p_there else 0.0
    m_here = op.bytes / here.dram_bandwidth if op.bytes > 0 else 0.0
    m_there = op.bytes / there.dram_bandwidth if op.bytes > 0 else 0.0
    r_here, r_there = max(c_here, m_here), max(c_there, m_there)
    kappa = pair.clock_ratio
    rho = r_there / r_here if r_here > 0 else kappa
    same = t * rho
    roof_part = min(r_here, t)
    share = roof_part * rho + (t - roof_part) * kappa
    clock = max(t * kappa, r_there)
    derived = not op.limiter
    cls = op.limiter or derive_class(op, c_here, m_here)
    if cls == "compute" and c_here < NEAR * t:
        cls = "issue"  # compute by instruction issue (the instruction roof, or a kernel family): FLOPs far below

    def mid(a: float, b: float) -> tuple[float, float, float]:
        return (a + b) / 2, min(a, b), max(a, b)

    def around(point: float, other: float) -> tuple[float, float, float]:
        return point, min(point, other), max(point, other)

    if cls in ("compute", "memory"):
        point, low, high = mid(same, share)
        basis = f"{cls}: roof x{rho:.3g} on {roof_part / t:.0%} of the time, clock x{kappa:.3g} on the rest"
    elif cls == "latency" and derived:  # neither roof near and no launch facts to tell why: mid-way
        point, low, high = mid(same, clock)
        basis = f"neither roof near, no evidence why: mid-way between roof x{rho:.3g} and clock x{kappa:.3g}"
    elif cls in ("issue", "latency"):
        point, low, high = around(clock, same)
        basis = f"{cls}: clock x{kappa:.3g}" + (", the target's roofline caps it" if clock > t * kappa else "")
    elif cls == "parallelism":
        waves = 1.0
        sms_here, sms_there = pair.here.sms, pair.there.sms
        if op.blocks and sms_here and sms_there:
            waves = _waves(op.blocks, sms_there, op.active_blocks_per_sm) / _waves(
                op.blocks, sms_here, op.active_blocks_per_sm
            )
        point, low, high = around(max(t * kappa * waves, r_there), same)
        basis = f"parallelism: waves x{waves:.3g} ({op.blocks or '?'} blocks on {sms_here} -> {sms_there} SMs), clock"
    elif cls == "launch":
        k = max(op.kernels, 1)
        floor_here, floor_there = k * here.launch_floor_s, k * there.launch_floor_s
        if t >= floor_here:
            value = floor_there + (t - floor_here) * kappa
        else:
            value = t * floor_there / floor_here if floor_here > 0 else t
        point, low, high = around(value, t)
        basis = f"launch: {k} launch floor(s) x{floor_there / floor_here if floor_here else 1:.3g}, rest by clock"
    elif cls == "layout":
        point, low, high = mid(same, clock)
        basis = "layout: mid-way between the roofline and the clock"
    else:  # host, none: dispatch and views do not follow the GPU
        point = low = high = t
        basis = f"{cls}: unchanged"
    if derived and cls != "none":
        basis += " (class derived from the shares)"
    return OpPrediction(t, point, low, high, cls, derived, basis)


# ------------------------------------------------------------------------------------------------ a report


def _times(p: GroupPrediction | Total) -> dict[str, Any]:
    """The times a group and the total share in JSON, in their order."""
    return {
        "measured_s": p.measured_s,
        "predicted_s": p.predicted_s,
        "low_s": p.low_s,
        "high_s": p.high_s,
        "factor": p.factor,
        "baseline_s": p.baseline_s,
    }


@dataclass(frozen=True)
class GroupPrediction:
    """One table row: an op group (diagnose: the report's point groups; bench: a row)."""

    label: str
    short_label: str
    calls: int
    limiter: str  # the class holding most of the measured time
    measured_s: float
    predicted_s: float
    low_s: float
    high_s: float
    baseline_s: float  # spec peaks at the same efficiency (the time unchanged when it cannot be projected)
    projected: bool  # the baseline could place it
    basis: str  # of its largest op

    @property
    def factor(self) -> float | None:
        return self.predicted_s / self.measured_s if self.measured_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "calls": self.calls,
            "limiter": self.limiter,
            **_times(self),
            "baseline_projected": self.projected,
            "basis": self.basis,
        }


@dataclass(frozen=True)
class Total:
    """The report's whole time: a model's iteration (diagnose) or the rows' sum (bench)."""

    measured_s: float
    predicted_s: float
    low_s: float
    high_s: float
    baseline_s: float
    ops_s: float  # measured time of the counted ops
    uncounted_s: float  # measured time of ops without a cost formula (scaled by the clock)
    gap_s: float  # the rest of the iteration (host time, unmatched device time): unchanged

    @property
    def factor(self) -> float | None:
        return self.predicted_s / self.measured_s if self.measured_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            **_times(self),
            "ops_s": self.ops_s,
            "uncounted_s": self.uncounted_s,
            "gap_s": self.gap_s,
        }


@dataclass(frozen=True)
class Prediction:
    report: str  # the report's name
    source: str  # bench | diagnose
    pair: Pair
    groups: tuple[GroupPrediction, ...]  # largest measured time first
    total: Total
    ops: tuple[OpPrediction, ...]  # per report row, in the report's order
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        pair = self.pair
        return {
            "report": self.report,
            "source": self.source,
            "here": {"device": pair.here.name, "ceilings": pair.here.source},
            "there": {"device": pair.there.name, "ceilings": pair.there.source},
            "basis": pair.basis,
            "bandwidth_ratio": pair.bandwidth_ratio,
            "clock_ratio": pair.clock_ratio,
            "total": self.total.to_dict(),
            "groups": [g.to_dict() for g in self.groups],
            "notes": list(self.notes),
        }


def _baseline(points: Sequence[Point], report: Any, target: Device, known: Mapping[str, KnownDevice]) -> list:
    info = report.devices[0]
    return [project_point(p, target, info, known.get(p.device) or known.get(info.name)) for p in points]


def _held_most(items: Sequence[tuple[str, float]]) -> str:
    by: dict[str, float] = {}
    for name, time_s in items:
        by[name] = by.get(name, 0.0) + time_s
    return max(by, key=lambda k: by[k]) if by else "none"


def predict(
    report: Any, pair: Pair, known: Mapping[str, KnownDevice], *, name: str = "", per_call: bool = False
) -> Prediction:
    """``report``'s times on ``pair.there``. ``known``: the spec sheets of the report's device and the target
    (roofline.roofs.known_devices), for the baseline."""
    check_report(report)
    source = report.source
    ops = tuple(scale_op(OpInput.of_row(row, source), pair) for row in report.rows)
    points = [p for p in report_points(report, name, per_call=per_call) if p.time_s]
    target_spec = known[pair.there.name].spec
    assert target_spec is not None
    projected = _baseline(points, report, target_spec, known)
    groups = []
    for p, moved in zip(points, projected, strict=True):
        members = [ops[i] for i in p.rows if ops[i].time_s > 0]
        if not members:
            continue
        largest = max(members, key=lambda o: o.time_s)
        baseline = moved.time_s if moved is not None else None
        groups.append(
            GroupPrediction(
                label=p.label,
                short_label=p.short_label,
                calls=p.calls,
                limiter=_held_most([(o.limiter, o.time_s) for o in members]),
                measured_s=sum(o.time_s for o in members),
                predicted_s=sum(o.predicted_s for o in members),
                low_s=sum(o.low_s for o in members),
                high_s=sum(o.high_s for o in members),
                baseline_s=baseline if baseline is not None else sum(o.time_s for o in members),
                projected=baseline is not None,
                basis=largest.basis,
            )
        )
    groups.sort(key=lambda g: -g.measured_s)
    ops_s = sum(o.time_s for o in ops)
    uncounted = gap = 0.0
    notes = [pair.note] if pair.note else []
    if source == "diagnose":
        summary = getattr(report, "summary", None) or {}
        op_time = finite_number(summary.get("op_time_s")) or ops_s
        wall = finite_number(summary.get("wall_s")) or 0.0
        uncounted = max(finite_number(summary.get("uncounted_time_s")) or 0.0, 0.0)
        gap = max(max(op_time, wall) - ops_s - uncounted, 0.0)
    kappa, beta = pair.clock_ratio, pair.bandwidth_ratio
    un_point = uncounted * kappa
    un_low, un_high = min(un_point, uncounted * beta), max(un_point, uncounted * beta)
    if uncounted:
        notes.append("ops without a cost formula scaled by the clock (range: to the bandwidth ratio)")
    if gap:
        notes.append("gaps (iteration time beyond the op time: host, idle, unmatched) kept unchanged")
    grouped = sum(g.measured_s for g in groups)
    total = Total(
        measured_s=ops_s + uncounted + gap,
        predicted_s=sum(o.predicted_s for o in ops) + un_point + gap,
        low_s=sum(o.low_s for o in ops) + un_low + gap,
        high_s=sum(o.high_s for o in ops) + un_high + gap,
        baseline_s=sum(g.baseline_s for g in groups) + (ops_s - grouped) + uncounted + gap,
        ops_s=ops_s,
        uncounted_s=uncounted,
        gap_s=gap,
    )
    return Prediction(name, source, pair, tuple(groups), total, ops, tuple(notes))


def predict_report(
    report: Any,
    targets: Sequence[str],
    *,
    name: str = "",
    roofs: str = "auto",
    calibrations: Sequence[Path] = (),
    spec_files: Sequence[Path] = (),
    per_call: bool = False,
) -> list[Prediction]:
    """``report``'s times on each of ``targets``: the two GPUs' ceilings on one basis
    (:func:`roofline.roofs.target_pairs`), then :func:`predict` per target."""
    check_report(report)
    info = report.devices[0]
    pairs = target_pairs(info, targets, roofs=roofs, calibrations=calibrations, spec_files=spec_files)
    names = [info.name, *(pair.there.name for pair in pairs)]
    known = known_devices(names, spec_files=spec_files)
    return [predict(report, pair, known, name=name, per_call=per_call) for pair in pairs]


def predictions_json(predictions: Sequence[Prediction]) -> dict[str, Any]:
    """`roofline predict --json`."""
    return {"schema": SCHEMA, "version": VERSION, "predictions": [p.to_dict() for p in predictions]}


__all__ = [
    "SCHEMA",
    "VERSION",
    "GroupPrediction",
    "OpInput",
    "OpPrediction",
    "Prediction",
    "Total",
    "check_report",
    "derive_class",
    "peak",
    "predict",
    "predict_report",
    "predictions_json",
    "scale_op",
]
