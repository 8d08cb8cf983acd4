"""Collectives family: findings about a distributed step's communication: exposed communication, waits for other
ranks, small messages, stragglers (the collectives stage; roofline.diagnose.distributed gives the facts).

Each finding's gain is a bound, as everywhere (roofline.findings.base): the best time assumes the technique hides
or removes all that it could, never an estimate of what it will. The time of a collective is its transfer (the
shortest duration across the ranks: roofline.diagnose.collectives.match_ranks); the rest of a rank's call is wait,
which is imbalance, not the link.

- ``communication-exposed``: transfers the step waits for (exposed, no compute beside them). Techniques: overlap
  them with compute (DDP: ``bucket_cap_mb`` so the first buckets go earlier in the backward,
  ``gradient_as_bucket_view``; FSDP: ``forward_prefetch``, ``backward_prefetch``, ``reshard_after_forward``), fewer
  and larger messages, fewer bytes. Bound: the step with that communication hidden behind compute, never below all
  of the step's communication on the roof (one stream carries it).
- ``communication-wait``: the ranks' collectives wait for the rank that arrives last (exposed wait): balance the
  ranks. Bound: the step at the ranks' mean busy time (step less exposed wait).
- ``small-messages``: calls whose time is mostly the roof's latency (the message is below latency x bus
  bandwidth): fewer and larger messages (larger DDP buckets, coalesced collectives). Bound: the calls of a kind
  merged into one message on the roof: max(latency, sum of bus bytes / bus bandwidth).
- ``straggler``: a rank whose iteration takes longer than the median rank's: the others wait for it in their
  collectives. Bound: the step at the median rank's time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from roofline.findings.base import Finding
from roofline.findings.base import rank as rank_findings
from roofline.findings.context import FindingContext
from roofline.findings.model import ModelFinding
from roofline.findings.registry import Rule, register
from roofline.properties import Property
from roofline.units import format_bytes, format_time

#: exposed communication (or wait) below this share of the step is not worth a finding
EXPOSED_SHARE = 0.05

#: what moves exposed communication, by the framework its collectives tell (all-reduce: DDP; all-gather and
#: reduce-scatter: FSDP)
ADVICE = {
    "ddp": (
        "overlap the all-reduce with the backward: DDP(bucket_cap_mb=...) smaller so the first buckets start "
        "earlier (larger if the calls are small and many), gradient_as_bucket_view=True (no copy into the buckets), "
        "static_graph=True; fewer bytes: bf16 gradients (a DDP comm hook) or PowerSGD"
    ),
    "fsdp": (
        "overlap the all-gathers and reduce-scatters with compute: FSDP(forward_prefetch=True, "
        "backward_prefetch=BACKWARD_PRE) or FSDP2 set_modules_to_forward_prefetch; reshard_after_forward=False "
        "(SHARD_GRAD_OP: no second all-gather in the backward) where memory allows; fewer, larger units to wrap "
        "(fewer and larger messages); bf16 mixed precision for the parameters and gradients"
    ),
    "": (
        "overlap the collectives with compute (issue them asynchronously and wait late), send fewer and larger "
        "messages, fewer bytes (bf16/fp8, compression) or use another parallelism"
    ),
}


COMMUNICATION_EXPOSED = Rule(
    id="communication-exposed",
    family="collectives",
    bottleneck="communication",
    properties=(Property.LOCALITY, Property.REDUNDANCY),
    fires="a rank's collectives' transfer with no compute beside it >= 5% of its step (`EXPOSED_SHARE`)",
    technique=(
        "overlap the collectives with compute (DDP: `bucket_cap_mb`, `gradient_as_bucket_view`; FSDP: "
        "`forward_prefetch`, `backward_prefetch`, `reshard_after_forward`), fewer and larger messages, fewer bytes"
    ),
    bound="the step with that communication hidden behind compute, never below all of its collectives on the roof",
    code_change="a DDP/FSDP setting or overlap in the training script",
)
COMMUNICATION_WAIT = Rule(
    id="communication-wait",
    family="collectives",
    bottleneck="imbalance",
    properties=(Property.SYMMETRY,),
    fires="the ranks' waits for the last rank in their collectives (no compute beside) >= 5% of the step",
    technique="balance the ranks (the same work, no extra work on one, data loaded ahead); CUDA graphs if host-bound",
    bound="the step at the ranks' mean busy time (step less exposed wait)",
    code_change="the ranks' work balanced in the training script",
)
SMALL_MESSAGES = Rule(
    id="small-messages",
    family="collectives",
    bottleneck="latency",
    properties=(Property.ASSOCIATIVITY,),
    fires="two or more calls of a kind an iteration below the roof's knee (latency x bus bandwidth)",
    technique="fewer and larger messages: larger DDP buckets, coalesced collectives, one flat buffer",
    bound="the calls merged into one message on the roof: max(latency, their bus bytes / bus bandwidth)",
    code_change="larger buckets or coalesced collectives in the training script",
)
STRAGGLER = Rule(
    id="straggler",
    family="collectives",
    bottleneck="imbalance",
    properties=(Property.SYMMETRY,),
    fires="a rank's iteration above 1.1x the median rank's (`STRAGGLER_RATIO`)",
    technique="balance the ranks' work (equal shapes, data loading; no other job on the slow rank's device)",
    bound="the step at the median rank's time",
    code_change="the ranks' work balanced",
)


def _finding(rule: Rule, **fields: Any) -> ModelFinding:
    return ModelFinding(rule=rule.id, bottleneck=rule.bottleneck, properties=[p.value for p in rule.properties],
                        change=rule.change, **fields)  # fmt: skip


def framework(rows: Sequence[dict[str, Any]]) -> str:
    """'fsdp' when the step's collectives are all-gathers or reduce-scatters, 'ddp' when all-reduces, else ''."""
    kinds = {r.get("kind") for r in rows}
    if kinds & {"all_gather", "reduce_scatter"}:
        return "fsdp"
    if "all_reduce" in kinds:
        return "ddp"
    return ""


def communication_findings(
    step_s: float,
    exposed_s: float,
    communication_s: float,
    rows: Sequence[dict[str, Any]],
    *,
    latency_s: float | None = None,
    bus_bytes_per_s: float | None = None,
    skew: dict[str, Any] | None = None,
    rank: int | None = None,
) -> list[ModelFinding]:
    """The communication findings of one rank's step (``step_s``: its iteration time; ``exposed_s`` and
    ``communication_s``: its transfers' exposed part and all of them; ``rows``: its collectives, as
    roofline.diagnose.collectives.collective_rows gives them), ranked by saving. The ranks' waits for each other
    are the run's: :func:`wait_findings`."""
    out: list[ModelFinding] = []
    on_roof = sum((r.get("roof_time_s") or 0.0) * (r.get("calls") or 0.0) for r in rows)
    if step_s > 0 and exposed_s > EXPOSED_SHARE * step_s:
        best = max(step_s - exposed_s, min(on_roof, step_s))
        timed = [r for r in rows if r.get("roof_time_s") and r.get("time_s")]
        spent = sum(r["time_s"] * r["calls"] for r in timed)
        roof_part = (
            f"; its calls run at {sum(r['roof_time_s'] * r['calls'] for r in timed) / spent:.0%} of the "
            f"communication roof (all of the step's communication on the roof: {format_time(on_roof)})"
            if spent > 0
            else ""
        )
        out.append(
            _finding(
                COMMUNICATION_EXPOSED,
                technique=ADVICE[framework(rows)],
                evidence=(
                    f"{format_time(exposed_s)} of {format_time(communication_s)} communication is exposed "
                    f"(no compute beside it): {exposed_s / step_s:.0%} of the {format_time(step_s)} step"
                    f"{roof_part}"
                ),
                time_s=step_s,
                best_time_s=best,
                floor_s=best,
                where="collectives" if rank is None else f"collectives (rank {rank})",
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
            merged = max(latency_s, sum(r["bus_bytes"] * r["calls"] for r in small) / bus_bytes_per_s)
            if merged >= now:
                continue
            size = sum(r["bytes"] * r["calls"] for r in small)
            out.append(
                _finding(
                    SMALL_MESSAGES,
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
            _finding(
                STRAGGLER,
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


def wait_findings(ranks: dict[int, tuple[float, float, float]]) -> list[ModelFinding]:
    """``communication-wait``: the ranks wait for each other in their collectives. ``ranks``: rank -> (its step,
    its wait with no compute beside it, all of its wait), seconds a step. A rank's busy time is its step less its
    exposed wait; in a synchronous step the slowest busy rank sets the step, so with the ranks balanced the step is
    at best the mean busy time (the bound)."""
    if len(ranks) < 2:
        return []
    step = max(s for s, _, _ in ranks.values())
    busy = {r: s - exposed for r, (s, exposed, _) in ranks.items()}
    best = sum(busy.values()) / len(busy)
    if step <= 0 or step - best <= EXPOSED_SHARE * step:
        return []
    last = max(busy, key=lambda r: (busy[r], -r))
    waits = ", ".join(f"rank {r} {format_time(e)}" for r, (_, e, _) in sorted(ranks.items()) if r != last)
    return [
        _finding(
            COMMUNICATION_WAIT,
            technique=(
                "balance the ranks: the same shapes and work on every rank, no extra work on one (logging, "
                "checkpointing, evaluation, a slower data loader, another process on its GPU or CPU cores), data "
                "loaded ahead of the step; where the step is host-bound (many small kernels), the slowest host sets "
                "the pace: CUDA graphs or torch.compile shorten every rank's launches"
            ),
            evidence=(
                f"rank {last} arrives last in the collectives (it waits {format_time(ranks[last][1])} a step); the "
                f"others wait with no compute beside them: {waits}; the ranks' busy time is "
                f"{format_time(best)} on average against the {format_time(step)} step"
            ),
            time_s=step,
            best_time_s=best,
            floor_s=best,
            where="collectives (all ranks)",
            share=(step - best) / step,
        )
    ]


@register("collectives", COMMUNICATION_EXPOSED, COMMUNICATION_WAIT, SMALL_MESSAGES, STRAGGLER)
def produce(ctx: FindingContext) -> list[Finding]:
    """The collectives stage: ``ctx.distributed`` holds one rank's step (``step_s``, ``exposed_s``,
    ``communication_s``, ``rows``, ``latency_s``, ``bus_bytes_per_s``, ``rank``) or the run's (``waits``: rank ->
    (step, exposed wait, wait); ``skew``)."""
    facts = ctx.distributed
    if not facts:
        return []
    found: list[Finding] = []
    if "rows" in facts:
        found += communication_findings(
            float(facts.get("step_s") or 0.0),
            float(facts.get("exposed_s") or 0.0),
            float(facts.get("communication_s") or 0.0),
            facts["rows"],
            latency_s=facts.get("latency_s"),
            bus_bytes_per_s=facts.get("bus_bytes_per_s"),
            rank=facts.get("rank"),
        )
    if "waits" in facts:
        found += wait_findings(facts["waits"])
    if facts.get("skew"):
        found += communication_findings(0.0, 0.0, 0.0, [], skew=facts["skew"])
    return found


__all__ = [
    "ADVICE",
    "COMMUNICATION_EXPOSED",
    "COMMUNICATION_WAIT",
    "EXPOSED_SHARE",
    "SMALL_MESSAGES",
    "STRAGGLER",
    "communication_findings",
    "framework",
    "produce",
    "wait_findings",
]
