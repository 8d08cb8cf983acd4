"""What a chart of collectives shows, from a merged report's stored values: each collective's bus bandwidth against
its bus bytes (the message x nccl-tests' factor), under the communication roof's ceiling curve
bus bytes / max(latency, bus bytes / bus bandwidth). Pure: roofline.render.collectives_figure draws it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from roofline.costs.collectives import CommRoof


@dataclass(frozen=True)
class CollectivePoint:
    bus_bytes: float
    busbw_bytes_per_s: float
    kind: str
    rank: int | None
    calls: float


@dataclass(frozen=True)
class CollectivesChart:
    title: str
    points: tuple[CollectivePoint, ...]
    ceiling: tuple[tuple[float, float], ...]  # (bus bytes, bus bandwidth) along the roof; empty: no roof
    ceiling_label: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)


def collectives_chart(
    section: dict[str, Any], title: str = "Collectives on the communication roof"
) -> CollectivesChart:
    """The chart of a report's ``distributed`` section: its collectives with a bus bandwidth, and the roof's curve
    over their range (x 1/4 .. x 4 beyond, at least 1 KiB .. 1 GiB)."""
    points = tuple(
        CollectivePoint(float(r["bus_bytes"]), float(r["busbw_bytes_per_s"]), r["kind"], r.get("rank"), r["calls"])
        for r in section.get("collectives", [])
        if r.get("bus_bytes") and r.get("busbw_bytes_per_s")
    )
    notes: list[str] = []
    ceiling: tuple[tuple[float, float], ...] = ()
    label = ""
    roof = section.get("roof")
    if roof:
        comm = CommRoof(float(roof["bus_bytes_per_s"]), float(roof["latency_s"]), str(roof["source"]))
        sizes = [p.bus_bytes for p in points] or [1024.0]
        lo = min(min(sizes) / 4, 1024.0)
        hi = max(max(sizes) * 4, float(1 << 30))
        steps = 48
        xs = [lo * (hi / lo) ** (i / steps) for i in range(steps + 1)]
        ceiling = tuple((x, comm.bus_bandwidth(x)) for x in xs)
        label = f"roof ({comm.source}): {comm.bus_bytes_per_s / 1e9:.3g} GB/s, latency {comm.latency_s * 1e6:.3g} us"
    else:
        notes.append("no communication roof: roofline calibrate --collectives measures one")
    if not points:
        notes.append("no collective with bytes and a time to draw")
    return CollectivesChart(title, points, ceiling, label, tuple(notes))


def log_range(values: list[float]) -> tuple[float, float]:
    good = [v for v in values if v > 0 and math.isfinite(v)]
    if not good:
        return 1.0, 10.0
    return min(good) / 2, max(good) * 2


__all__ = ["CollectivePoint", "CollectivesChart", "collectives_chart"]
