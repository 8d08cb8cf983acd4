"""Fusion family: ops that each round-trip memory where one kernel would read the inputs once and write the result
once, and caches copied to append one slice.

- ``elementwise-chain``: consecutive element-wise/norm ops on the same number of elements;
- ``fused-op`` / ``fusion-across-reduction``: norms, softmax, activations written out (patterns.fusion_groups);
- ``naive-attention``: matmul -> softmax -> matmul with the scores in memory (the softmax and a mask written out
  too);
- ``elementwise-pair``: two element-wise ops in a row, when fusing them saves a third of their roofline time;
- ``elementwise-recurrence``: a loop of element-wise ops over the same elements (one kernel for every step);
- ``written-out-topk``: top-k by repeated max + mask, or a sort sliced to k (torch.topk);
- ``all-pairs``: a tensor broadcast against itself into N x N pairs (symmetry; a far-field tree);
- ``kv-cache-cat``: a cache grown by cat/stack (structure.kv_cache_growth).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from roofline.findings import patterns, structure
from roofline.findings.base import bounded
from roofline.findings.bounds import floor_time_s, instruction_floor_s
from roofline.findings.model import (
    COMPILED_UNFUSED,
    Attention,
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
)
from roofline.findings.registry import Rule, Verify, model_rule
from roofline.findings.shapes import gemm_dims
from roofline.findings.shapes import op_name as _name
from roofline.ironlaw import memory_time, roofline_time
from roofline.properties import Property
from roofline.report.rows import OpPoint, input_bytes, output_bytes
from roofline.units import format_bytes, format_time

ELEMENTWISE_CHAIN = Rule(
    id="elementwise-chain",
    family="fusion",
    bottleneck="that of its ops",
    properties=(Property.LOCALITY,),
    fires=(
        ">= 3 consecutive element-wise/norm ops (views between them allowed) on the same number of elements, "
        "outside loops and the groups below; names the fused op when the chain computes one (F.gelu)"
    ),
    technique="fusion (`torch.compile`, Triton, a fused op)",
    bound=(
        "bytes unfused vs fused (first op's inputs read once, last output written once), one launch; never below the "
        "instruction time of the ops' arithmetic (`bounds.instruction_floor_s`: a fused kernel still issues it)"
    ),
    verify=Verify("compile"),
)


FUSED_OP = Rule(
    id="fused-op",
    family="fusion",
    bottleneck="that of its ops",
    properties=(Property.LOCALITY,),
    fires=(
        "element-wise ops and reductions connected by producers, grown from a reduction or an `x * f(x)` diamond "
        "(its element-wise producers 2 deep, then consumers reading only the group's tensors, parameters and "
        "smaller constants; <= 16 ops), not inside one chain or a loop: RMSNorm, LayerNorm, softmax, SiLU, GELU "
        "written out (`fused-op`) or any other (`fusion-across-reduction`)"
    ),
    technique=(
        "the fused op (`nn.RMSNorm` / `F.rms_norm`, `F.layer_norm`, `torch.softmax`, `F.silu`, `F.gelu`), else "
        "`torch.compile`"
    ),
    bound=(
        "external inputs read once, outputs written once, one launch; never below that roofline time nor the ops' "
        "arithmetic's instruction time"
    ),
    verify=Verify("compile"),
)


FUSION_ACROSS_REDUCTION = Rule(
    id="fusion-across-reduction",
    family="fusion",
    bottleneck="that of its ops",
    properties=(Property.LOCALITY,),
    verify=Verify("compile"),
    docs_with="fused-op",
)


NAIVE_ATTENTION = Rule(
    id="naive-attention",
    family="fusion",
    bottleneck="that of its ops",
    properties=(Property.ASSOCIATIVITY, Property.LOCALITY),
    fires=(
        "matmul -> (scale, mask) -> softmax -> (dropout) -> matmul where the softmax tensor is the first matmul's "
        "output with >= 16 keys (S_q x S_k per head): the ops in a row, or (producers recorded) connected by their "
        "tensors with the softmax written out (max, sub, exp, sum, div; <= 16 ops) and a mask built in the call "
        "(ones, triu/tril, comparisons)"
    ),
    technique=(
        "online softmax + tiling: `F.scaled_dot_product_attention` / FlashAttention (`is_causal=True` for a "
        "triangular mask built in the call); without a code change, `torch.compile`, whose attention patterns "
        "rewrite the common spellings (matmul, scale, mask, softmax, dropout, matmul) into SDPA and fuse the rest"
    ),
    bound="the pattern's bytes (the mask's included) vs Q, K, V read once and the output written once, one launch",
    # NB: Inductor's fuse_attention passes (torch/_inductor/fx_passes/fuse_attention.py) replace matmul -> (div or
    # mul) -> (mask) -> softmax -> (dropout) -> matmul with aten.scaled_dot_product_attention; a spelling they do
    # not match is still fused element-wise (the scores once written, once read)
    verify=Verify("compile"),
)

#: the fused roofline time (one launch) of two element-wise ops in a row at most this share of the unfused (two
#: launches): worth a finding. By bytes a unary op into a unary op keeps 1/2, a unary and a binary op 3/5 (they
#: fire), two binary ops 4/6 (they do not: a saving of a third at most)
ALL_PAIRS = Rule(
    id="all-pairs",
    family="fusion",
    bottleneck="that of its ops",
    properties=(Property.SEPARABILITY, Property.LOCALITY, Property.SYMMETRY),
    fires=(
        "a binary element-wise op broadcasting one tensor against itself across two axes (`x[None] - x[:, None]`: "
        "an N x N (x d) result, N >= 64), with the element-wise ops and reductions reading the pairs after it"
    ),
    technique=(
        "symmetry: f_ij = -f_ji (Newton's third law) computes half the pairs (at most 2x on the pair ops); "
        "separability + locality: the far field by a multipole expansion / Barnes-Hut tree, O(N log N) instead of "
        "N^2; pairwise distances alone: `torch.cdist`"
    ),
    bound=(
        "the pair ops' roofline time with their pair count N^2 -> N log2 N (a tree's interactions) at the same "
        "per-pair cost, each op's launch kept"
    ),
    code_change="restructure the all-pairs interaction (a tree / fast multipole method, or half the pairs)",
)


@model_rule(ALL_PAIRS)
def all_pairs(ctx: ModelContext) -> list[ModelFinding]:
    """A tensor broadcast against itself into N x N pairs, per-pair math and a sum over one axis: an all-pairs
    interaction (N-body, pairwise distances, kernels)."""
    findings = []
    for pairs in structure.all_pairs(ctx.work(), ctx.dataflow()):
        pts = [ctx.by_index[i] for i in pairs.indices]
        n = pairs.n
        keep = math.log2(n) / n  # N log2 N of the N^2 pairs
        before = sum(p.roof_time_s + p.launch_floor_s for p in pts)
        after = sum(p.roof_time_s * keep + p.launch_floor_s for p in pts)
        half = sum(p.roof_time_s / 2 + p.launch_floor_s for p in pts)
        time_now = sum(p.time_s for p in pts)
        origin = ctx.by_index[pairs.origin]
        a, b = ("x".join(str(d) for d in s) for s in origin.input_shapes[:2])
        shape = "x".join(str(d) for d in pairs.shape)
        names = {_name(p.op) for p in pts}
        distance = bool(names & {"sqrt", "rsqrt", "pow", "norm", "linalg_vector_norm"})
        reduced = f", summed over one axis by {pairs.reductions} reduction{'s' if pairs.reductions != 1 else ''}"
        evidence = (
            f"{_name(origin.op)} #{origin.index} broadcasts one tensor against itself ({a} against {b}) into its "
            f"{n:,} x {n:,} pairs ({shape}), then {len(pts) - 1} ops on the pairs "
            f"({ops_text([p.op for p in pts[1:]], 8)}){reduced if pairs.reductions else ''}: {n * n:,} interactions; "
            f"roofline {format_time(before)}; half the pairs (symmetry) {format_time(half)}; N log2 N = "
            f"{n * math.log2(n):,.0f} interactions (a tree) {format_time(after)}"
        )
        technique = (
            "all pairs of one set: if the interaction is antisymmetric (f_ij = -f_ji, Newton's third law) or "
            "symmetric, compute each pair once (half the pairs: at most 2x on the pair ops); for a decaying "
            "interaction approximate the far field (separability + locality): a Barnes-Hut tree or the fast "
            "multipole method, O(N log N) instead of N^2; fuse the per-pair math into one tiled kernel "
            f"({'Triton' if is_compiled(ctx) else 'torch.compile, Triton'}) so no N x N tensor is written"
        )
        if distance:
            technique += "; where the pair math is a distance (pow/sqrt here): torch.cdist(x, x) computes it without "
            technique += "the N x N x d differences"
        else:
            technique += "; for pairwise distances alone: torch.cdist(x, x), without the N x N x d differences"
        findings.append(
            model_finding(
                ctx,
                ALL_PAIRS,
                technique,
                evidence,
                time_now,
                bounded(time_now, before, after),
                pts,
            )
        )
    return findings


@model_rule(ELEMENTWISE_CHAIN)
def elementwise_chain(ctx: ModelContext) -> list[ModelFinding]:
    """Consecutive element-wise/norm ops each reading and writing the whole tensor: fuse them."""
    chains = find_chains(ctx.points, ctx.attention_indices() | ctx.loop_indices() | ctx.fusion_indices())
    items = []
    for chain in chains:
        pts = [ctx.by_index[i] for i in chain.indices]
        if is_compiled(ctx) and already_fused(pts):
            continue  # inductor fused them already
        items.append((signature_of(pts), pts))
    findings = []
    bw = ctx.device.dram_bandwidth
    for group in grouped(items):
        first_chain = group[0]
        unfused = sum(p.bytes for p in first_chain)
        fused = min(input_bytes(first_chain[0]) + output_bytes(first_chain[-1]), unfused)
        compute = sum(p.compute_time_s for p in first_chain)
        # NB: each op's floor is its roofline time or its instruction time (bounds.instruction_roof), the longer; the
        # fused kernel still issues every op's arithmetic (bounds.instruction_floor_s)
        before = floor_time_s(first_chain, ctx.device) + sum(p.launch_floor_s for p in first_chain)
        issue = instruction_floor_s(first_chain, ctx.device)
        after = max(roofline_time(compute, memory_time(fused, bw)), issue) + ctx.one_launch_s()
        all_pts = [p for chain_pts in group for p in chain_pts]
        time_now = sum(p.time_s for p in all_pts)
        numel = max_numel(first_chain[0])
        count = f" x{len(group)} (the same chain {len(group)} times)" if len(group) > 1 else ""
        evidence = (
            f"{len(first_chain)} element-wise/norm ops in a row on {numel:,} elements "
            f"({ops_text([p.op for p in first_chain])}){count}, each a round trip through memory: "
            f"{format_bytes(unfused)} moved vs {format_bytes(fused)} fused (first input read once, last output "
            f"written once: {unfused / fused if fused else math.inf:.3g}x fewer bytes); roofline "
            f"{format_time(before)} -> {format_time(after)} per chain"
        )
        technique = "fuse the chain into one kernel (torch.compile, a Triton kernel, or a fused op such as F.gelu)"
        kind = patterns.fused_op(_name(p.op) for p in first_chain)
        if is_compiled(ctx):
            fused = f"; or use {patterns.FUSED_OPS[kind]} (one kernel)" if kind is not None else ""
            technique = COMPILED_UNFUSED + fused
        elif kind is not None:
            technique = (
                f"use {patterns.FUSED_OPS[kind]}: the chain computes a {kind.replace('_', ' ')} (one kernel); or "
                "fuse it (torch.compile, a Triton kernel)"
            )
        findings.append(
            model_finding(
                ctx,
                ELEMENTWISE_CHAIN,
                technique,
                evidence,
                time_now,
                bounded(time_now, before * len(group), after * len(group)),  # every chain of the group
                all_pts,
            )
        )
    return findings


@model_rule(FUSED_OP, FUSION_ACROSS_REDUCTION)
def written_out_fusion(ctx: ModelContext) -> list[ModelFinding]:
    """Norms, softmax and activations written out: element-wise ops and reductions connected by producers
    (roofline.findings.patterns.fusion_groups), each op a round trip through memory; the fused op, or torch.compile
    across the reduction."""
    items = []
    for fusion in ctx.fusions:
        pts = [ctx.by_index[i] for i in fusion.indices]
        if is_compiled(ctx) and already_fused(pts):
            continue  # inductor fused them already
        items.append(((signature_of(pts), fusion.kind), (fusion, pts)))
    findings = []
    bw = ctx.device.dram_bandwidth
    for group in grouped(items):
        fusion, pts = group[0]
        compute = sum(p.compute_time_s for p in pts)
        before = (floor_time_s(pts, ctx.device) + sum(p.launch_floor_s for p in pts)) * len(group)
        fused_roof = max(
            roofline_time(compute, memory_time(fusion.fused_bytes, bw)), instruction_floor_s(pts, ctx.device)
        )
        after = (fused_roof + ctx.one_launch_s()) * len(group)
        all_pts = [p for _, members in group for p in members]
        time_now = sum(p.time_s for p in all_pts)
        count = f"; x{len(group)} (the same ops {len(group)} times)" if len(group) > 1 else ""
        across = []
        if fusion.reductions:
            across.append(f"{fusion.reductions} reduction{'s' if fusion.reductions > 1 else ''}")
        if fusion.broadcasts:
            across.append(f"{fusion.broadcasts} broadcast{'s' if fusion.broadcasts > 1 else ''}")
        what = f" compute a {fusion.kind.replace('_', ' ')}" if fusion.kind else ""
        ratio = fusion.unfused_bytes / fusion.fused_bytes if fusion.fused_bytes else math.inf
        evidence = (
            f"{len(pts)} ops written out ({ops_text([p.op for p in pts], 8)}){what}, connected by their tensors "
            f"across {' and '.join(across) or 'their inputs'}, each a round trip through memory: "
            f"{format_bytes(fusion.unfused_bytes)} moved vs {format_bytes(fusion.fused_bytes)} fused (external inputs "
            f"read once, outputs written once: {ratio:.3g}x fewer bytes){count}; roofline "
            f"{format_time(before / len(group))} -> {format_time(after / len(group))} per group"
        )
        if fusion.fused_op:
            rule = FUSED_OP
            technique = f"use {fusion.fused_op} (one fused kernel) instead of the written-out ops, or torch.compile"
            if is_compiled(ctx):
                technique = f"use {fusion.fused_op} instead of the written-out ops; {COMPILED_UNFUSED}"
        elif is_compiled(ctx):
            rule = FUSION_ACROSS_REDUCTION
            technique = COMPILED_UNFUSED
        else:
            rule = FUSION_ACROSS_REDUCTION
            technique = (
                "fuse the ops across the reduction/broadcast into one kernel (torch.compile, a Triton kernel): the "
                "inputs read once, the result written once"
            )
        findings.append(
            model_finding(
                ctx,
                rule,
                technique,
                evidence,
                time_now,
                bounded(time_now, before, after),
                all_pts,
            )
        )
    return findings


def _attention_family(att: Attention, pts: Sequence[OpPoint]) -> tuple[Any, ...]:
    """What groups attentions into one finding: the same ops and ranks, and the same scores shape but for the key
    length (every layer of a model; every step of a decode loop whose KV cache grows by one token)."""
    return (tuple((p.op, p.phase, tuple(len(s) for s in p.input_shapes)) for p in pts), att.scores_shape[:-1])


@model_rule(NAIVE_ATTENTION)
def naive_attention(ctx: ModelContext) -> list[ModelFinding]:
    """Attention written as matmul -> softmax -> matmul: the S x S scores go to memory and back."""
    items = []
    for att in ctx.attention:
        pts = [ctx.by_index[i] for i in att.indices]
        items.append((_attention_family(att, pts), (att, pts)))
    findings = []
    bw = ctx.device.dram_bandwidth
    for group in grouped(items):
        naive = fused = before = after = 0.0
        for att, pts in group:
            first, second = ctx.by_index[att.first], ctx.by_index[att.second]
            dims2 = gemm_dims(second)
            assert dims2 is not None
            others = [i for i in range(len(second.input_shapes)) if i != dims2.a]
            one_naive = sum(p.bytes for p in pts)
            one_fused = min(input_bytes(first) + input_bytes(second, others) + output_bytes(second), one_naive)
            naive, fused = naive + one_naive, fused + one_fused
            before += sum(p.roof_time_s + p.launch_floor_s for p in pts)
            compute = sum(p.compute_time_s for p in pts)
            after += roofline_time(compute, memory_time(one_fused, bw)) + ctx.one_launch_s()
        att, pts = group[0]
        first, second = ctx.by_index[att.first], ctx.by_index[att.second]
        all_pts = [p for _, members in group for p in members]
        time_now = sum(p.time_s for p in all_pts)
        shapes = sorted({a.scores_shape for a, _ in group}, key=lambda shape: shape[-1])
        scores = "x".join(str(d) for d in shapes[0])
        if len(shapes) > 1:
            scores += f" .. {'x'.join(str(d) for d in shapes[-1])}"
        score_bytes = output_bytes(first)
        n = len(group)
        if n == 1:
            count = ""
        elif len(shapes) == 1:
            count = f"; x{n} (every layer)"
        else:
            count = f"; x{n} (the key length growing: a KV cache)"
        per = "per attention" if n == 1 else f"for the {n} attentions"
        evidence = (
            f"{_name(first.op)} -> softmax -> {_name(second.op)} materialises the {scores} scores "
            f"({format_bytes(score_bytes)}{' the first' if len(shapes) > 1 else ''}, written and read back by "
            f"{len(pts)} ops): {format_bytes(naive)} moved vs {format_bytes(fused)} fused "
            f"({naive / fused if fused else math.inf:.3g}x){count}; roofline {format_time(before)} -> "
            f"{format_time(after)} {per}"
        )
        names = [_name(p.op) for p in pts]
        written = not any("softmax" in n for n in names)
        mask = [n for n in names if n in structure.MASK_BUILDERS]
        if written:
            softmax = [p.op for p in pts if p.math == "vector" and _name(p.op) not in structure.MASK_BUILDERS]
            evidence += f"; the softmax written out ({ops_text(softmax, 8)})"
        if mask:
            evidence += f"; a mask built in every call ({', '.join(dict.fromkeys(mask))})"
        causal = bool(set(mask) & structure.TRIANGULAR)
        technique = (
            "online softmax + tiling: F.scaled_dot_product_attention (FlashAttention / memory-efficient kernels) "
            "instead of matmul -> softmax -> matmul; without a code change, torch.compile (its attention patterns "
            "rewrite the common spellings into SDPA)"
        )
        if causal:
            technique += (
                "; the mask is triangular (triu/tril): pass is_causal=True instead of building it (no mask tensor, "
                "the masked blocks skipped)"
            )
        findings.append(
            model_finding(
                ctx,
                NAIVE_ATTENTION,
                technique,
                evidence,
                time_now,
                bounded(time_now, before, after),  # every attention of the group
                all_pts,
            )
        )
    return findings


__all__ = [
    "ALL_PAIRS",
    "ELEMENTWISE_CHAIN",
    "FUSED_OP",
    "FUSION_ACROSS_REDUCTION",
    "NAIVE_ATTENTION",
    "all_pairs",
    "elementwise_chain",
    "naive_attention",
    "written_out_fusion",
]
