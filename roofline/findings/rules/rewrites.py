"""Fusion family, continued: rewrites of the code's spelling that one kernel serves (registered after
:mod:`roofline.findings.rules.fusion`'s rules, so the family keeps its order of preference).

- ``elementwise-pair``: two element-wise ops in a row, when fusing them saves a third of their roofline time;
- ``elementwise-recurrence``: a loop of element-wise ops over the same elements (one kernel for every step);
- ``written-out-topk``: top-k by repeated max + mask, or a sort sliced to k (torch.topk);
- ``kv-cache-cat``: a cache grown by cat/stack (structure.kv_cache_growth).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from roofline.findings import structure
from roofline.findings.base import bounded
from roofline.findings.model import (
    COMPILED_UNFUSED,
    ModelContext,
    ModelFinding,
    already_fused,
    find_chains,
    grouped,
    is_compiled,
    max_numel,
    model_finding,
    ops_text,
    signature_of,
    tiny,
)
from roofline.findings.registry import Rule, Verify, model_rule
from roofline.findings.shapes import op_name as _name
from roofline.ironlaw import memory_time, roofline_time
from roofline.properties import Property
from roofline.report.rows import OpPoint
from roofline.units import format_bytes, format_time

PAIR_SHARE = 0.6

ELEMENTWISE_PAIR = Rule(
    id="elementwise-pair",
    family="fusion",
    bottleneck="that of its ops",
    properties=(Property.LOCALITY,),
    fires=(
        "2 element-wise ops in a row on the same number of elements, the second the only reader of the first's "
        "output (`F.mish(F.mish(x))`), each with more roofline work than one launch floor, outside chains, loops "
        "and the groups above, when fused their roofline time (one launch) is at most 60% of the unfused "
        "(`PAIR_SHARE`: unary into unary 1/2 and unary with binary 3/5 of the bytes fire; two binary ops, 2/3, not)"
    ),
    technique="fusion (`torch.compile`): one kernel, the intermediate never in memory",
    bound="the first's inputs read once, the second's output written once, one launch",
    verify=Verify("compile"),
)

ELEMENTWISE_RECURRENCE = Rule(
    id="elementwise-recurrence",
    family="fusion",
    bottleneck="that of its ops",
    properties=(Property.LOCALITY,),
    fires=(
        "a loop (as `sequential-loop` finds it) whose every op is element-wise on the same number of elements (no "
        "reduction, matmul, copy or creation) and that reads no slice changing step to step (no view in the loop "
        "narrows a tensor: not `x[:, t]`) nor another tensor each step (a list's `xs[t]`): `y = y * a + x` "
        "repeated; each element's steps depend on that element alone"
    ),
    technique="fusion (`torch.compile`): one kernel runs every step, each element's steps in registers",
    bound="one pass: the loop's inputs read once, its output written once, the FLOPs of every step, one launch",
    verify=Verify("compile"),
)

WRITTEN_OUT_TOPK = Rule(
    id="written-out-topk",
    family="fusion",
    bottleneck="memory",
    properties=(Property.REDUNDANCY, Property.ASSOCIATIVITY),
    fires=(
        "a loop (as `sequential-loop` finds it) whose step takes a max/min (argmax) and masks what it found "
        "(scatter, masked_fill, index_put, where) in the tensor the next step reads: top-k by k passes; or a sort "
        "(argsort) whose output is used only through a slice along one axis (`torch.sort(x)[..., :k]`)"
    ),
    technique="`torch.topk` (one pass), or the top-k of chunks merged (the merge is associative)",
    bound="one pass over the input: read once, the k values (and indices) written once, one launch",
    code_change="replace the repeated max (or the sort and slice) with torch.topk",
)


KV_CACHE_CAT = Rule(
    id="kv-cache-cat",
    family="fusion",
    bottleneck="memory",
    properties=(Property.REDUNDANCY,),
    fires=(
        "cat ops whose one input is >= 50% of the output, comes from outside the iteration (not a parameter) or "
        "from an earlier cat, and grows along one axis (and stack ops restacking an earlier stack's inputs)"
    ),
    technique="a preallocated static or paged KV cache",
    bound="only the new slices read and written",
    verify=Verify("static-kv-cache"),
    code_change="preallocate the KV cache (a static cache) instead of torch.cat per step",
)


# NB: registered first of the family: on a tie with the fusion of the same pair ops, the algorithmic change
# (N^2 -> N log N) ranks first


def _loop_span(ctx: ModelContext, indices: Sequence[int]) -> list[OpPoint]:
    lo, hi = min(indices), max(indices)
    return [p for p in ctx.points if lo <= p.index <= hi]


@model_rule(ELEMENTWISE_PAIR)
def elementwise_pair(ctx: ModelContext) -> list[ModelFinding]:
    """Two element-wise ops in a row, the intermediate a round trip through memory: fuse them when that saves at
    least a third of their roofline time."""
    chains = find_chains(ctx.points, ctx.attention_indices() | ctx.loop_indices() | ctx.fusion_indices())
    exclude = ctx.attention_indices() | ctx.loop_indices() | ctx.fusion_indices()
    exclude |= {i for c in chains for i in c.indices}
    items = []
    for pair in structure.elementwise_pairs(ctx.points, exclude, ctx.dataflow()):
        pts = [ctx.by_index[i] for i in pair.indices]
        if (is_compiled(ctx) and already_fused(pts)) or any(tiny(p, ctx.device) for p in pts):
            continue  # NB: ops under one launch floor of work are the launch rules' (their dispatch, not their bytes)
        items.append((signature_of(pts), (pair, pts)))
    findings = []
    bw = ctx.device.dram_bandwidth
    for group in grouped(items):
        pair, pts = group[0]
        before = sum(p.roof_time_s + p.launch_floor_s for p in pts)
        after = (
            roofline_time(sum(p.compute_time_s for p in pts), memory_time(pair.fused_bytes, bw)) + ctx.one_launch_s()
        )
        if after > PAIR_SHARE * before:
            continue
        all_pts = [p for _, members in group for p in members]
        time_now = sum(p.time_s for p in all_pts)
        count = f"; x{len(group)} (the same pair {len(group)} times)" if len(group) > 1 else ""
        ratio = pair.unfused_bytes / pair.fused_bytes if pair.fused_bytes else math.inf
        evidence = (
            f"{_name(pts[0].op)} -> {_name(pts[1].op)} on {max_numel(pts[0]):,} elements, the intermediate a round "
            f"trip through memory: {format_bytes(pair.unfused_bytes)} moved vs {format_bytes(pair.fused_bytes)} "
            f"fused ({ratio:.3g}x fewer bytes){count}; roofline {format_time(before)} -> {format_time(after)} per "
            f"pair (fused at most {PAIR_SHARE:.0%} of unfused: worth a kernel)"
        )
        technique = (
            COMPILED_UNFUSED
            if is_compiled(ctx)
            else "fuse the two ops into one kernel (torch.compile, a Triton kernel): the intermediate never in memory"
        )
        findings.append(
            model_finding(
                ctx,
                ELEMENTWISE_PAIR,
                technique,
                evidence,
                time_now,
                bounded(time_now, before * len(group), after * len(group)),
                all_pts,
            )
        )
    return findings


@model_rule(ELEMENTWISE_RECURRENCE)
def elementwise_recurrence(ctx: ModelContext) -> list[ModelFinding]:
    """A loop of element-wise ops over the same elements (``y = y * a + x`` repeated): no scan needed, one fused
    kernel runs every step with each element in registers."""
    findings = []
    bw = ctx.device.dram_bandwidth
    flow = ctx.dataflow()
    for loop in ctx.loops:
        pts = [ctx.by_index[i] for i in loop.indices]
        fusion = structure.elementwise_recurrence(pts, loop.period, _loop_span(ctx, loop.indices), flow)
        if fusion is None or (is_compiled(ctx) and already_fused(pts)):
            continue
        time_now = ctx.wall_time_of(pts)
        before = sum(p.roof_time_s + p.launch_floor_s for p in pts)
        flops_s = sum(p.compute_time_s for p in pts)
        after = roofline_time(flops_s, memory_time(fusion.fused_bytes, bw)) + ctx.one_launch_s()
        ratio = fusion.unfused_bytes / fusion.fused_bytes if fusion.fused_bytes else math.inf
        evidence = (
            f"{loop.module or '(model)'} runs the same {loop.period} element-wise op{'s' if loop.period > 1 else ''} "
            f"({ops_text(loop.ops)}) {loop.steps} times on the same {max_numel(pts[0]):,} elements, each step "
            f"reading the one before's output: a recurrence per element, no reduction, matmul or slice along a "
            f"sequence axis; {format_bytes(fusion.unfused_bytes)} moved step by step vs "
            f"{format_bytes(fusion.fused_bytes)} in one pass ({ratio:.3g}x fewer bytes); roofline "
            f"{format_time(before)} -> {format_time(after)} (every step's FLOPs, one launch)"
        )
        technique = (
            COMPILED_UNFUSED
            if is_compiled(ctx)
            else (
                "fuse the steps into one kernel (torch.compile, a Triton kernel): each element's steps in registers, "
                "its inputs read once and the result written once; no scan needed, the elements are independent"
            )
        )
        findings.append(
            model_finding(
                ctx,
                ELEMENTWISE_RECURRENCE,
                technique,
                evidence,
                time_now,
                bounded(time_now, before, after),
                pts,
            )
        )
    return findings


@model_rule(WRITTEN_OUT_TOPK)
def written_out_topk(ctx: ModelContext) -> list[ModelFinding]:
    """Top-k by k passes of max + mask, or by a full sort sliced to k: torch.topk reads the input once."""
    flow = ctx.dataflow()
    found = []
    for loop in ctx.loops:
        pts = [ctx.by_index[i] for i in loop.indices]
        selection = structure.repeated_selection(pts, loop.period, loop.steps, flow)
        if selection is not None:
            found.append((selection, pts, ctx.wall_time_of(pts)))
    for selection in structure.sort_slices(ctx.points, flow):
        pts = [ctx.by_index[i] for i in selection.indices]
        found.append((selection, pts, sum(p.time_s for p in pts)))
    findings = []
    bw = ctx.device.dram_bandwidth
    for selection, pts, time_now in found:
        before = sum(p.roof_time_s + p.launch_floor_s for p in pts)
        peak = max((p.peak_flops_per_s for p in pts), default=0.0)
        compute = selection.in_numel / peak if peak > 0 else 0.0
        after = roofline_time(compute, memory_time(selection.in_bytes + selection.out_bytes, bw)) + ctx.one_launch_s()
        moved = sum(p.bytes for p in pts)
        if selection.repeated:
            what = (
                f"top-{selection.k} of {selection.n:,} by {selection.k} passes ({ops_text([p.op for p in pts[:2]])} "
                f"per step: take the extreme, mask it, again)"
            )
        else:
            what = f"a full {_name(pts[0].op)} of {selection.n:,} elements sliced to the first {selection.k}"
        evidence = (
            f"{what}: {format_bytes(moved)} moved vs one pass reading the input once "
            f"({format_bytes(selection.in_bytes)}) and writing the {selection.k} results "
            f"({format_bytes(selection.out_bytes)}); roofline {format_time(before)} -> {format_time(after)}"
        )
        technique = (
            f"torch.topk(x, {selection.k}, dim) (one pass; values and indices); for a very large or streamed input, "
            "the top-k of each chunk merged (top-k of top-ks is the top-k: the merge is associative), or an "
            "approximate top-k where the exact order is not needed"
        )
        findings.append(
            model_finding(
                ctx,
                WRITTEN_OUT_TOPK,
                technique,
                evidence,
                time_now,
                bounded(time_now, before, after),
                pts,
                bottleneck="memory",
            )
        )
    return findings


@model_rule(KV_CACHE_CAT)
def kv_cache_cat(ctx: ModelContext) -> ModelFinding | None:
    """A cache grown by torch.cat/stack: every step copies the whole cache to append one slice."""
    growth = structure.kv_cache_growth(ctx.work(), ctx.dataflow())
    if not growth:
        return None
    bw = ctx.device.dram_bandwidth
    pts = [ctx.by_index[g.index] for g in growth]
    before = sum(p.roof_time_s + p.launch_floor_s for p in pts)
    after = sum(
        roofline_time(p.compute_time_s, memory_time(2 * g.new_bytes, bw)) + p.launch_floor_s
        for p, g in zip(pts, growth, strict=True)
    )
    time_now = sum(p.time_s for p in pts)
    cache = sum(g.cache_bytes for g in growth)
    new = sum(g.new_bytes for g in growth)
    moved = sum(p.bytes for p in pts)
    largest = max(growth, key=lambda g: g.cache_bytes)
    shape = "x".join(str(d) for d in largest.out_shape)
    evidence = (
        f"{len(pts)} {_name(pts[0].op)} op{'s' if len(pts) > 1 else ''} grow a cache from outside the iteration or "
        f"the previous {_name(pts[0].op)} (up to {shape}, along axis {largest.axis}): {format_bytes(cache)} of cache "
        f"copied to append {format_bytes(new)}; {format_bytes(moved)} moved vs {format_bytes(2 * new)} writing only "
        f"the new slices; roofline {format_time(before)} -> {format_time(after)}"
    )
    technique = (
        "a preallocated static KV cache written in place (cache[:, :, pos] = k, index_copy_; transformers "
        "StaticCache) or a paged KV cache (vLLM, FlashInfer): only the new slice is written each step"
    )
    return model_finding(
        ctx,
        KV_CACHE_CAT,
        technique,
        evidence,
        time_now,
        bounded(time_now, before, after),
        pts,
        bottleneck="memory",
    )


__all__ = [
    "ELEMENTWISE_PAIR",
    "ELEMENTWISE_RECURRENCE",
    "KV_CACHE_CAT",
    "PAIR_SHARE",
    "WRITTEN_OUT_TOPK",
    "elementwise_pair",
    "elementwise_recurrence",
    "kv_cache_cat",
    "written_out_topk",
]
