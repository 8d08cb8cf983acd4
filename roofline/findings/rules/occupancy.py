"""Occupancy family: ops that leave the GPU's SMs idle.

- ``under-filled-gpu``: ops (groups of identical ops) taking >= UNDERFILL_SHARE of the iteration whose evidence
  bound class (roofline.findings.bounds) is 'parallelism': too few thread blocks, a partial last wave, low
  occupancy.
"""

from __future__ import annotations

from roofline.findings.base import at_floor
from roofline.findings.model import (
    ModelContext,
    ModelFinding,
    grouped,
    is_compiled,
    model_finding,
    percent,
    ratio,
)
from roofline.findings.registry import Rule, Verify, model_rule
from roofline.findings.shapes import op_name as _name
from roofline.properties import Property
from roofline.units import format_time

UNDERFILL_SHARE = 0.05  # an op (group) taking at least this share of the iteration with the GPU not filled


UNDER_FILLED_GPU = Rule(
    id="under-filled-gpu",
    family="occupancy",
    bottleneck="parallelism",
    properties=(Property.ASSOCIATIVITY, Property.LOCALITY),
    fires=(
        "an op, or a group of identical ops, taking >= 5% of the iteration (`UNDERFILL_SHARE`) with the bound "
        "class `parallelism` (too few blocks for the SMs, a partial last wave, low occupancy)"
    ),
    technique=(
        "split the reduction across more blocks (split-K, a two-pass reduction), a kernel that parallelises the "
        "other axis, or `torch.compile`"
    ),
    bound="the ops' roofline time plus their launch floors: every SM working at the roof",
    qualifier="split the work",
    verify=Verify("compile"),
)


@model_rule(UNDER_FILLED_GPU)
def under_filled(ctx: ModelContext) -> list[ModelFinding]:
    """Ops (or groups of identical ops) taking at least UNDERFILL_SHARE of the iteration whose evidence bound class
    is 'parallelism' (roofline.findings.bounds): too few thread blocks for the SMs, a partial last wave, or low
    occupancy. The bound on the gain is the ops' own roofline time plus their launch floors (every SM working
    at the roof), never less."""
    items = [((p.signature(), p.phase), [p]) for p in ctx.work() if p.limiter == "parallelism" and p.timed]
    findings = []
    for group in grouped(items):
        pts = [p for members in group for p in members]
        time_now = sum(p.time_s for p in pts)
        if ctx.total_time_s <= 0 or time_now < UNDERFILL_SHARE * ctx.total_time_s:
            continue
        floor = sum(p.roof_time_s + p.launch_floor_s for p in pts)
        example = max(pts, key=lambda p: p.time_s)
        shapes = ", ".join("x".join(str(d) for d in s) for s in example.input_shapes)
        count = f" x{len(pts)}" if len(pts) > 1 else ""
        evidence = (
            f"{_name(example.op)} [{shapes}]{count} at {percent(ratio(sum(p.roof_time_s for p in pts), time_now))} "
            f"of its roofline, the GPU not filled: {example.limiter_evidence}; every SM at the roof: "
            f"{format_time(floor)} (roofline time + launch floor) vs {format_time(time_now)}"
        )
        technique = (
            "split the reduction across more blocks (split-K / a two-pass reduction), a kernel that parallelises "
            "the other axis, or torch.compile (generates a kernel shaped for these sizes)"
        )
        if is_compiled(ctx):
            technique = (
                "split the reduction across more blocks (split-K / a two-pass reduction) or a kernel that "
                "parallelises the other axis (the model is compiled: inductor's kernel for these sizes leaves SMs "
                "idle)"
            )
        findings.append(
            model_finding(
                ctx,
                UNDER_FILLED_GPU,
                technique,
                evidence,
                time_now,
                at_floor(time_now, floor),
                pts,
                bottleneck="parallelism",
            )
        )
    return findings


__all__ = ["UNDERFILL_SHARE", "UNDER_FILLED_GPU", "under_filled"]
