"""Counters family: what Nsight Compute measured against what we counted.

- ``excess-dram-traffic`` (property locality): an op whose measured DRAM bytes are at least LOCALITY_FACTOR x its
  compulsory bytes (and the compulsory bytes at least MIN_LOCALITY_BYTES: smaller tensors sit in L2 and the ratio
  is noise), when the excess traffic is what sets its floor (the DRAM time of the measured bytes is above its
  roofline time). Technique: block/tile for reuse or fuse so each byte is read once. Its bound
  (roofline.findings.base.bounded): the op's roofline time with compulsory bytes -- never below it. Where its L1
  traffic dominates (``OpCounters.l1_dominant``) the evidence says so, with its L1 and L2 bytes.

The counters are attached to the ops by :func:`roofline.findings.counters.attach`.
"""

from __future__ import annotations

from collections.abc import Sequence

from roofline.findings.base import Finding, bounded, rank
from roofline.findings.context import FindingContext
from roofline.findings.counters import LOCALITY_FACTOR, Counters, OpCounters
from roofline.findings.model import MIN_FINDING_SHARE, ModelFinding, with_sources
from roofline.findings.registry import Rule, register
from roofline.ironlaw import memory_time, roofline_time
from roofline.properties import Property
from roofline.report.rows import OpPoint
from roofline.units import format_bytes, format_time

MIN_LOCALITY_BYTES = 1 << 20  # compulsory bytes below which the ratio is not judged (the tensors sit in L2)

EXCESS_DRAM_TRAFFIC = Rule(
    id="excess-dram-traffic",
    family="counters",
    bottleneck="memory",
    properties=(Property.LOCALITY,),
    fires=(
        "an op whose measured DRAM bytes (Nsight Compute) are >= 2x its compulsory bytes (`LOCALITY_FACTOR`), with "
        ">= 1 MiB of compulsory bytes (`MIN_LOCALITY_BYTES`), where that traffic sets its floor, >= 1% of the "
        "iteration"
    ),
    technique="block/tile for reuse, or fuse with the neighbours, so each byte comes from DRAM once",
    bound="the op's roofline time with compulsory bytes",
)
RULE = EXCESS_DRAM_TRAFFIC.id


def locality_findings(
    counters: Counters, points: Sequence[OpPoint], iteration_s: float, *, factor: float = LOCALITY_FACTOR
) -> list[ModelFinding]:
    """One finding per op moving at least ``factor`` x its compulsory bytes where that traffic sets its floor;
    ranked, those under MIN_FINDING_SHARE of the iteration dropped."""
    by_index = {p.index: p for p in points}
    out = []
    for c in counters.ops:
        p = by_index.get(c.index)
        if p is None or not p.timed or c.ratio is None or c.ratio < factor or p.bytes < MIN_LOCALITY_BYTES:
            continue
        if p.bandwidth_bytes_per_s <= 0:
            continue
        before = roofline_time(p.compute_time_s, memory_time(c.dram_bytes, p.bandwidth_bytes_per_s))
        best, floor = bounded(p.time_s, before, p.roof_time_s)
        if best is None:
            continue  # the excess traffic is not what holds it (compute sets its floor) or it runs at the floor
        share = p.time_s / iteration_s if iteration_s > 0 else 0.0
        if share < MIN_FINDING_SHARE:
            continue
        out.append(
            ModelFinding(
                rule=RULE,
                bottleneck="memory",
                properties=[q.value for q in EXCESS_DRAM_TRAFFIC.properties],
                technique=(
                    "block/tile it for reuse (or fuse it with its neighbours) so each byte comes from DRAM once: "
                    "it re-reads data that does not stay in cache"
                ),
                evidence=(
                    f"{p.op} moved {format_bytes(c.dram_bytes)} from/to DRAM per iteration (Nsight Compute), "
                    f"{c.ratio:.3g}x its {format_bytes(p.bytes)} compulsory bytes (threshold {factor:g}x); at that "
                    f"traffic its floor is {format_time(before)}, with compulsory bytes {format_time(p.roof_time_s)}"
                    + _l1_clause(c)
                ),
                time_s=p.time_s,
                best_time_s=best,
                floor_s=floor,
                where=with_sources(f"{p.op} @ {p.module}" if p.module else p.op, [p]),
                ops=[p.index],
                share=share,
            )
        )
    return rank(out)


def _l1_clause(c: OpCounters) -> str:
    """Where its L1 traffic dominates: the reuse it has is in L1 (its L1 and L2 bytes), not in L2."""
    if not c.l1_dominant or not c.l1_bytes or c.l2_bytes is None:
        return ""
    return (
        f"; its L1 traffic dominates ({format_bytes(c.l1_bytes)} through L1, {format_bytes(c.l2_bytes)} through L2): "
        "the reuse it gets is in L1"
    )


@register("counters", EXCESS_DRAM_TRAFFIC)
def produce(ctx: FindingContext) -> list[Finding]:
    """The locality findings of the counters attached to ``ctx.points`` (nothing without counters)."""
    if ctx.counters is None:
        return []
    return list(locality_findings(ctx.counters, ctx.points, ctx.iteration_s))


__all__ = ["EXCESS_DRAM_TRAFFIC", "MIN_LOCALITY_BYTES", "RULE", "locality_findings", "produce"]
