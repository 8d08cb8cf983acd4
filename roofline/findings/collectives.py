"""Findings about a distributed step's communication: exposed communication, small messages, stragglers.

Each finding's gain is a bound, as everywhere (roofline.findings.base): the best time assumes the technique hides
or removes all that it could, never an estimate of what it will.

- ``communication-exposed``: collectives the step waits for (exposed, no compute beside them). Techniques:
  overlap them with compute (DDP's buckets ready earlier: smaller first buckets, ``gradient_as_bucket_view``;
  FSDP's prefetching), or send less (compression: bf16 or fp8 gradients, PowerSGD -- redundancy) or another
  parallelism. Bound: the step without its exposed communication.
- ``small-messages``: calls whose time is mostly the roof's latency (the message is below latency x bus
  bandwidth): fewer and larger messages (larger DDP buckets, coalesced collectives). Bound: the calls of a kind
  merged into one message on the roof: latency + sum of bus bytes / bus bandwidth.
- ``straggler``: a rank whose iteration takes longer than the median rank's: the others wait for it in their
  collectives. Bound: the step at the median rank's time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roofline.findings.base import rank as rank_findings
from roofline.findings.model import ModelFinding
from roofline.units import format_bytes, format_time

#: exposed communication below this share of the step is not worth a finding
EXPOSED_SHARE = 0.05


def communication_findings(
    step_s: float,
    exposed_s: float,
    communication_s: float,
    rows: Sequence[dict[str, Any]],
    *,
    latency_s: float | None = None,
    bus_bytes_per_s: float | None = None,
    skew: dict[str, Any] | None = None,
) -> list[ModelFinding]:
    """The communication findings of one rank's step (``step_s``: its iteration time; ``rows``: its collectives,
    as roofline.diagnose.collectives.collective_rows gives them), ranked by saving."""
    out: list[ModelFinding] = []
    if step_s > 0 and exposed_s > EXPOSED_SHARE * step_s:
        out.append(
            ModelFinding(
                rule="communication-exposed",
                bottleneck="communication",
                properties=["redundancy"],
                technique=(
                    "overlap the collectives with compute (DDP: buckets ready earlier in the backward; FSDP: "
                    "prefetch the next all-gather), send fewer bytes (bf16/fp8 gradients, PowerSGD compression) "
                    "or use another parallelism"
                ),
                evidence=(
                    f"{format_time(exposed_s)} of {format_time(communication_s)} communication is exposed "
                    f"(no compute beside it): {exposed_s / step_s:.0%} of the {format_time(step_s)} step"
                ),
                time_s=step_s,
                best_time_s=step_s - exposed_s,
                floor_s=step_s - exposed_s,
                where="collectives",
                share=exposed_s / step_s,
            )
        )
    if latency_s and bus_bytes_per_s:
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            if row.get("bus_bytes") is not None and row.get("time_s"):
                by_kind.setdefault(row["kind"], []).append(row)
        for kind, group in sorted(by_kind.items()):
            small = [r for r in group if r["bus_bytes"] < latency_s * bus_bytes_per_s]
            calls = sum(r["calls"] for r in small)
            if calls < 2:
                continue
            now = sum(r["time_s"] * r["calls"] for r in small)
            merged = latency_s + sum(r["bus_bytes"] * r["calls"] for r in small) / bus_bytes_per_s
            if merged >= now:
                continue
            size = sum(r["bytes"] * r["calls"] for r in small)
            out.append(
                ModelFinding(
                    rule="small-messages",
                    bottleneck="latency",
                    properties=["associativity"],
                    technique=(
                        f"fewer and larger {kind} messages: larger buckets (DDP bucket_cap_mb), coalesced "
                        "collectives, one flat buffer"
                    ),
                    evidence=(
                        f"{calls:g} {kind} call(s) an iteration below latency x bus bandwidth "
                        f"({format_bytes(latency_s * bus_bytes_per_s)}), {format_bytes(size)} in all, take "
                        f"{format_time(now)}; one message on the roof: {format_time(merged)}"
                    ),
                    time_s=now,
                    best_time_s=merged,
                    floor_s=merged,
                    where=kind,
                    share=now / step_s if step_s > 0 else 0.0,
                )
            )
    if skew and skew.get("stragglers"):
        slowest, middle = float(skew["slowest_s"]), float(skew["median_s"])
        out.append(
            ModelFinding(
                rule="straggler",
                bottleneck="imbalance",
                properties=["symmetry"],
                technique=(
                    "balance the ranks' work (equal batch shapes, sequence lengths, data loading; no other job on "
                    "the slow rank's device): the others wait for it in every collective"
                ),
                evidence=(
                    f"rank {skew['slowest_rank']} takes {format_time(slowest)} an iteration, the median rank "
                    f"{format_time(middle)} ({skew['ratio']:.2f}x); stragglers: "
                    + ", ".join(str(r) for r in skew["stragglers"])
                ),
                time_s=slowest,
                best_time_s=middle,
                floor_s=middle,
                where=f"rank {skew['slowest_rank']}",
                share=(slowest - middle) / slowest if slowest > 0 else 0.0,
            )
        )
    return rank_findings(out)


__all__ = ["EXPOSED_SHARE", "communication_findings"]
