"""Matmul family: GEMMs and GEMVs, judged by their side of the ridge, their operands and their shapes.

- ``memory-bound-gemv``: memory-bound matmuls whose largest operand (the weights, a parameter) dominates the bytes;
- ``activation-matmul``: memory-bound matmuls of two activations;
- ``cheaper-algorithm``: torch.diag(a) @ b (patterns.diag_matmuls);
- ``fp32-matmul``: fp32 matmuls on a device with TF32 tensor cores;
- ``compute-bound``: compute-bound matmuls near their roof;
- ``awkward-shapes``: compute-bound matmuls far below their roof with dims off the tile grid or a partial wave;
- ``tensor-cores-idle``: 16-bit matmuls and convolutions whose kernel runs on the CUDA cores (a fallback:
  roofline.findings.bounds.cuda_core_fallback).

They leave out ops whose roofline time is below one launch floor (overhead-bound: the launch rule's).
"""

from __future__ import annotations

import math

from roofline.findings import patterns
from roofline.findings.base import TILE_M, TILE_N, at_floor, bounded, trimmed_waves, wave_times
from roofline.findings.bounds import cuda_core_fallback, tensor_core_cause
from roofline.findings.model import (
    FAR_BELOW,
    ModelContext,
    ModelFinding,
    is_compiled,
    model_finding,
    percent,
    ratio,
    tiny,
)
from roofline.findings.registry import Rule, Verify, model_rule
from roofline.findings.shapes import ALIGN, GemmDims, gemm_dims, off_grid
from roofline.findings.shapes import op_name as _name
from roofline.ironlaw import memory_time, min_time, roofline_time
from roofline.properties import Property
from roofline.report.rows import OpPoint, bits_of, input_bytes, numel, output_bytes, tensor_bytes
from roofline.units import format_bytes, format_intensity, format_rate, format_time

WEIGHT_SHARE = 0.5  # the largest operand's share of a memory-bound matmul's bytes that makes it a GEMV
NEAR_ROOF = 0.7  # a compute-bound matmul at or above this efficiency is near its roof
TF32_SUSPECT = 1.2  # an fp32 matmul this far above the fp32 roof already runs on TF32 tensor cores
QUANT_BITS = 4  # weight-only quantisation bound of the GEMV finding (int4)


MEMORY_BOUND_GEMV = Rule(
    id="memory-bound-gemv",
    family="matmul",
    bottleneck="memory",
    properties=(Property.REDUNDANCY,),
    fires=(
        "memory-bound matmuls (roofline) whose largest operand (the weights) is >= 50% of their bytes and, where "
        "recorded, a parameter: decode, GEMV"
    ),
    technique="batch requests, quantize weights/KV, KV cache, speculative decoding",
    bound="int4 weights (a quarter of bf16's weight bytes)",
    code_change="batch the requests or quantise the weights",
)


ACTIVATION_MATMUL = Rule(
    id="activation-matmul",
    family="matmul",
    bottleneck="memory",
    properties=(Property.LOCALITY, Property.ASSOCIATIVITY),
    fires="memory-bound matmuls whose larger operand is not a parameter (producers recorded)",
    technique="fuse with the producer/consumer (SDPA for attention), batch independent products, restructure",
    bound="the ops' own roofline time",
    code_change="multiply by the structure the finding names instead of a dense matrix",
)


CHEAPER_ALGORITHM = Rule(
    id="cheaper-algorithm",
    family="matmul",
    bottleneck="that of its ops",
    properties=(Property.SPARSITY,),
    fires="a matmul reading a square matrix built by `torch.diag` / `diag_embed`",
    technique="`a[:, None] * b` instead of `torch.diag(a) @ b`",
    bound="the broadcasted multiply's roofline time (b read once, the output written once), one launch",
    qualifier="structure",
    code_change="use the cheaper algorithm the finding names",
)


FP32_MATMUL = Rule(
    id="fp32-matmul",
    family="matmul",
    bottleneck="compute",
    properties=(Property.REDUNDANCY,),
    fires=(
        "fp32 matmuls on the fp32 roof of a device with a TF32 tensor roof (not those already running > 1.2x "
        "above the fp32 roof: TF32 is on)"
    ),
    technique="TF32 (`torch.set_float32_matmul_precision('high')`) or bf16 autocast",
    bound="fp32 roof vs TF32 roof (bf16 in the evidence)",
    qualifier="precision",
    verify=Verify("tf32", "bf16-autocast"),
)


COMPUTE_BOUND = Rule(
    id="compute-bound",
    family="matmul",
    bottleneck="compute",
    properties=(Property.SPARSITY, Property.SEPARABILITY, Property.SYMMETRY),
    fires="compute-bound matmuls at efficiency >= 0.7",
    technique="2:4 sparsity, MoE, low-rank, weight sharing / FFT",
    bound="2:4 sparsity doubles the tensor roof (NVIDIA Ampere and later); none known elsewhere",
    code_change="fewer FLOPs or a faster unit: the op is at its roof",
    changes_math=True,
)


AWKWARD_SHAPES = Rule(
    id="awkward-shapes",
    family="matmul",
    bottleneck="compute",
    properties=(Property.LOCALITY,),
    fires=(
        "compute-bound matmuls at efficiency < 0.5 with M, N or K >= 64 not a multiple of 64, or losing a partial "
        "wave of 256x128 tiles on the GPU's SMs"
    ),
    technique="pad (or trim) to tile multiples",
    bound=(
        "the roofline time at the padded shape, or the measured time x waves after / waves now; never below the "
        "GEMM's own roofline time"
    ),
    verify=Verify("pad"),
)


@model_rule(MEMORY_BOUND_GEMV)
def memory_bound_gemv(ctx: ModelContext) -> ModelFinding | None:
    """Matmuls with few rows (decode, GEMV): the weight bytes dominate, the roofline says memory."""
    skip = ctx.attention_indices() | ctx.loop_indices()
    hits: list[tuple[OpPoint, GemmDims, int]] = []
    for p in ctx.work():
        if p.index in skip or p.roofline_bound != "memory" or tiny(p, ctx.device):
            continue
        dims = gemm_dims(p)
        if dims is None:
            continue
        weight = max(input_bytes(p, [dims.a]), input_bytes(p, [dims.b]))
        if patterns.large_operand_is_param(p, dims.a, dims.b) is False:
            continue  # two activations: activation_matmul's
        if weight >= WEIGHT_SHARE * p.bytes:
            hits.append((p, dims, weight))
    if not hits:
        return None
    pts = [p for p, _, _ in hits]
    bw = ctx.device.dram_bandwidth
    time_now = sum(p.time_s for p in pts)
    before = sum(p.roof_time_s + p.launch_floor_s for p in pts)
    after = 0.0
    for p, _, weight in hits:
        bits = bits_of(p.dtype)
        smaller = p.bytes - weight + weight * min(QUANT_BITS, bits) / bits
        after += roofline_time(p.compute_time_s, memory_time(smaller, bw)) + p.launch_floor_s
    weights = sum(w for _, _, w in hits)
    moved = sum(p.bytes for p in pts)
    flops = sum(p.flops for p in pts)
    intensity = flops / moved if moved else 0.0
    ridge = max((p.ridge or 0.0) for p in pts)
    rows = sorted({d.m * d.batch for _, d, _ in hits})
    rows_text = ", ".join(str(r) for r in rows[:4]) + (", ..." if len(rows) > 4 else "")
    headroom = f"up to ~{ridge / intensity:.0f}x more rows fit before compute binds" if intensity else ""
    evidence = (
        f"{len(pts)} memory-bound matmul{'s' if len(pts) > 1 else ''} with M = {rows_text}: the largest operand "
        f"(the weights) is {format_bytes(weights)} of {format_bytes(moved)} moved; intensity "
        f"{format_intensity(intensity)} FLOP/B vs ridge {format_intensity(ridge)}: {headroom}; int{QUANT_BITS} "
        f"weights: roofline {format_time(before)} -> {format_time(after)}"
    )
    technique = (
        "batch requests or tokens (intensity grows with M), quantize weights/KV (int8/int4/fp8), keep a KV cache, "
        "speculative decoding"
    )
    return model_finding(
        ctx,
        MEMORY_BOUND_GEMV,
        technique,
        evidence,
        time_now,
        bounded(time_now, before, after),
        pts,
        bottleneck="memory",
    )


@model_rule(ACTIVATION_MATMUL)
def activation_matmul(ctx: ModelContext) -> ModelFinding | None:
    """Memory-bound (skinny or batched) matmuls of two activations: no weights to batch or quantize."""
    skip = ctx.attention_indices() | ctx.loop_indices()
    skip |= {d.matmul for d in patterns.diag_matmuls(ctx.points, ctx.dataflow())}
    hits: list[tuple[OpPoint, GemmDims]] = []
    for p in ctx.work():
        if p.index in skip or p.roofline_bound != "memory" or tiny(p, ctx.device):
            continue
        dims = gemm_dims(p)
        if dims is None or patterns.large_operand_is_param(p, dims.a, dims.b) is not False:
            continue
        hits.append((p, dims))
    if not hits:
        return None
    pts = [p for p, _ in hits]
    time_now = sum(p.time_s for p in pts)
    best = sum(p.roof_time_s + p.launch_floor_s for p in pts)
    moved = sum(p.bytes for p in pts)
    flops = sum(p.flops for p in pts)
    intensity = flops / moved if moved else 0.0
    ridge = max((p.ridge or 0.0) for p in pts)
    example, dims = max(hits, key=lambda h: h[0].time_s)
    roof = sum(p.roof_time_s for p in pts)
    evidence = (
        f"{len(pts)} memory-bound matmul{'s' if len(pts) > 1 else ''} of two activations (neither operand is a "
        f"parameter: batching requests or quantizing weights does not apply), e.g. {_name(example.op)} "
        f"batch={dims.batch} M={dims.m} N={dims.n} K={dims.k} in {example.module or '(model)'}; intensity "
        f"{format_intensity(intensity)} FLOP/B vs ridge {format_intensity(ridge)}; at "
        f"{percent(ratio(roof, time_now))} of the roofline"
    )
    technique = (
        "fuse the product with the op that produces or consumes its large operand (torch.compile; q @ K^T -> "
        "softmax -> @ V: F.scaled_dot_product_attention), batch independent products into one bmm, or restructure "
        "the math (a diagonal or low-rank operand: a broadcasted multiply or two thin products)"
    )
    if is_compiled(ctx):
        technique = technique.replace("(torch.compile; q @ K^T", "(q @ K^T")
    return model_finding(
        ctx,
        ACTIVATION_MATMUL,
        technique,
        evidence,
        time_now,
        at_floor(time_now, best),
        pts,
        bottleneck="memory",
    )


def _vector_roof(ctx: ModelContext, dtype: str) -> float:
    for candidate in (dtype or "fp32", "fp32"):
        try:
            return ctx.device.roof(candidate, "vector").flops_per_s  # type: ignore[arg-type]
        except Exception:  # NB: UsageError: no such roof on this device
            continue
    return 0.0


@model_rule(CHEAPER_ALGORITHM)
def cheaper_algorithm(ctx: ModelContext) -> ModelFinding | None:
    """torch.diag(a) @ b: an O(n^2 m) matmul with a diagonal matrix built for it, for O(n m) work."""
    hits = patterns.diag_matmuls(ctx.points, ctx.dataflow())
    if not hits:
        return None
    bw = ctx.device.dram_bandwidth
    covered: list[OpPoint] = []
    before = after = 0.0
    work = 0
    for h in hits:
        mm, diag = ctx.by_index[h.matmul], ctx.by_index[h.diag]
        dims = gemm_dims(mm)
        others = [i for i in range(min(len(mm.input_shapes), 2)) if i != h.position]
        if dims is not None:
            others = [dims.b if h.position == dims.a else dims.a]
        elements = max((numel(s) for s in mm.output_shapes), default=0)
        nbytes = tensor_bytes([h.n], mm.dtype) + input_bytes(mm, others) + output_bytes(mm)
        peak = _vector_roof(ctx, mm.dtype)
        compute = elements / peak if peak else 0.0
        after += roofline_time(compute, memory_time(nbytes, bw)) + ctx.one_launch_s()
        work += elements
        for p in (diag, mm):
            if p not in covered:
                covered.append(p)
                before += p.roof_time_s + p.launch_floor_s
    time_now = sum(p.time_s for p in covered)
    flops = sum(ctx.by_index[h.matmul].flops for h in hits)
    n = max(h.n for h in hits)
    evidence = (
        f"{len(hits)} matmul{'s' if len(hits) > 1 else ''} multipl{'y' if len(hits) > 1 else 'ies'} by a diagonal "
        f"matrix built by torch.diag (n = {n}: n^2 elements, n of them nonzero): {flops:,} FLOPs for {work:,} "
        f"products of work; as a broadcasted multiply: roofline {format_time(before)} -> {format_time(after)}"
    )
    technique = (
        "a cheaper algorithm: torch.diag(a) @ b is the broadcasted multiply a[:, None] * b (and b @ torch.diag(a) is "
        "b * a): O(n m) FLOPs and bytes instead of O(n^2 m), no n x n matrix"
    )
    return model_finding(
        ctx,
        CHEAPER_ALGORITHM,
        technique,
        evidence,
        time_now,
        bounded(time_now, before, after),
        covered,
    )


@model_rule(FP32_MATMUL)
def fp32_matmul(ctx: ModelContext) -> ModelFinding | None:
    """fp32 matmuls on a device with TF32 tensor cores."""
    c = ctx.device.compute
    if ("tf32", "tensor") not in c or not ctx.device.has_tensor_cores():
        return None
    candidates = [
        p
        for p in ctx.work()
        if p.math == "tensor" and p.dtype == "fp32" and p.roof.startswith("fp32") and not tiny(p, ctx.device)
    ]
    fast = [p for p in candidates if p.efficiency is not None and p.efficiency > TF32_SUSPECT]
    pts = [p for p in candidates if p not in fast]
    if not pts:
        return None
    bw = ctx.device.dram_bandwidth
    tf32 = c[("tf32", "tensor")]
    before = sum(p.roof_time_s + p.launch_floor_s for p in pts)
    after = sum(min_time(p.flops, p.bytes, tf32, bw, p.launch_floor_s) for p in pts)
    time_now = sum(p.time_s for p in pts)
    evidence = (
        f"{len(pts)} fp32 matmul{'s' if len(pts) > 1 else ''} run on the {pts[0].roof} roof "
        f"({format_rate(pts[0].peak_flops_per_s)}); TF32 tensor cores offer {format_rate(tf32)}: roofline "
        f"{format_time(before)} -> {format_time(after)}"
    )
    if ("bf16", "tensor") in c:
        bf16 = c[("bf16", "tensor")]
        after_bf16 = sum(min_time(p.flops, p.bytes / 2, bf16, bw, p.launch_floor_s) for p in pts)
        evidence += f"; bf16 ({format_rate(bf16)}, half the bytes): {format_time(after_bf16)}"
    if fast:
        evidence += f" ({len(fast)} other fp32 matmuls already run above the fp32 roof: TF32 is on for them)"
    technique = (
        "TF32 (torch.set_float32_matmul_precision('high') / torch.backends.cuda.matmul.allow_tf32 = True) or "
        "bf16 autocast (torch.autocast('cuda', torch.bfloat16))"
    )
    bound = bounded(time_now, before, after)
    if bound[0] is None:
        return None
    return model_finding(ctx, FP32_MATMUL, technique, evidence, time_now, bound, pts, bottleneck="compute")


@model_rule(COMPUTE_BOUND)
def compute_bound(ctx: ModelContext) -> ModelFinding | None:
    """Compute-bound matmuls near their roof: only fewer FLOPs (or a higher roof) helps."""
    skip = ctx.attention_indices()
    pts = [
        p
        for p in ctx.work()
        if p.math == "tensor"
        and p.index not in skip
        and p.roofline_bound == "compute"
        and not tiny(p, ctx.device)
        and p.efficiency is not None
        and p.efficiency >= NEAR_ROOF
    ]
    if not pts:
        return None
    time_now = sum(p.time_s for p in pts)
    roof = sum(p.roof_time_s for p in pts)
    flops = sum(p.flops for p in pts)
    dev = ctx.device
    labels = sorted({p.roof for p in pts})
    evidence = (
        f"{len(pts)} compute-bound matmul{'s' if len(pts) > 1 else ''} at {percent(ratio(roof, time_now))} "
        f"of the {', '.join(labels)} roof ({format_rate(flops / time_now if time_now else 0)} achieved); intensity "
        f"above the ridge, so neither fusion nor layout helps: only fewer FLOPs or a higher roof"
    )
    bound: tuple[float | None, float | None] = (None, None)  # no FLOP-saving technique with a known roofline
    if dev.vendor == "nvidia" and ("tf32", "tensor") in dev.compute and all(p.roof.endswith("tensor") for p in pts):
        before = sum(p.roof_time_s + p.launch_floor_s for p in pts)
        after = sum(max(p.compute_time_s / 2, p.memory_time_s) + p.launch_floor_s for p in pts)
        bound = bounded(time_now, before, after)
        evidence += "; 2:4 structured sparsity doubles the tensor roof"
    technique = "do fewer FLOPs: 2:4 structured sparsity, MoE, low-rank factorisation, weight sharing / FFT"
    return model_finding(
        ctx,
        COMPUTE_BOUND,
        technique,
        evidence,
        time_now,
        bound,
        pts,
        bottleneck="compute",
    )


@model_rule(AWKWARD_SHAPES)
def awkward_shapes(ctx: ModelContext) -> ModelFinding | None:
    """Compute-bound matmuls far below their roof with dims off the tile grid."""
    hits: list[tuple[OpPoint, float, str]] = []
    # NB: padding or trimming is a shape fix: the same work (M x N x K) is never done below its own roofline time
    for p in ctx.work():
        if p.roofline_bound != "compute" or tiny(p, ctx.device) or p.efficiency is None or p.efficiency >= FAR_BELOW:
            continue
        dims = gemm_dims(p)
        if dims is None:
            continue
        odd = off_grid(dims)
        waves = trimmed_waves(dims.m, dims.n, dims.batch, ctx.device.compute_units)
        if not odd and waves is None:
            continue
        padded = 1.0
        for v in odd.values():
            padded *= math.ceil(v / ALIGN) * ALIGN / v
        best = p.roof_time_s * padded + p.launch_floor_s
        text = f"m={dims.m} n={dims.n} k={dims.k}"
        if waves is not None:
            tiles, now, m2, n2, _, better = waves[:6]
            # NB: fewer waves shorten the measured time at most in proportion, and never below the trimmed GEMM's
            # own wave-quantized roofline time
            floor = max(wave_times(p.roof_time_s, waves)[1], p.roof_time_s) + p.launch_floor_s
            best = min(best, max(p.time_s * better / now, floor))
            text += (
                f" ({tiles} {TILE_M}x{TILE_N} tiles = {now} waves on {ctx.device.compute_units} "
                f"{ctx.device.unit_name}s; m={m2} n={n2}: {better})"
            )
        hits.append((p, max(min(best, p.time_s), p.roof_time_s + p.launch_floor_s), text))
    if not hits:
        return None
    pts = [p for p, _, _ in hits]
    time_now = sum(p.time_s for p in pts)
    best = sum(b for _, b, _ in hits)
    roof = sum(p.roof_time_s for p in pts)
    examples = "; ".join(dict.fromkeys(text for _, _, text in hits))
    evidence = (
        f"{len(pts)} compute-bound matmul{'s' if len(pts) > 1 else ''} at {percent(ratio(roof, time_now))} "
        f"of the roof with dims off the {ALIGN}-multiple tile grid: {examples}"
    )
    if len(examples) > 240:
        evidence = evidence[:237] + "..."
    technique = f"pad (or trim) M, N, K to multiples of {ALIGN} (128 for large GEMMs) so whole tiles and waves are used"
    floor = sum(p.roof_time_s + p.launch_floor_s for p in pts)  # every op's best is at least this
    return model_finding(
        ctx,
        AWKWARD_SHAPES,
        technique,
        evidence,
        time_now,
        (best if best < time_now else None, floor),
        pts,
        bottleneck="compute",
    )


TENSOR_CORES_IDLE = Rule(
    id="tensor-cores-idle",
    family="matmul",
    bottleneck="compute",
    properties=(Property.LOCALITY,),
    fires=(
        "a 16-bit matmul or convolution whose dominant kernel runs on the CUDA cores (`implicit_convolveNd_sgemm`, "
        "a gemv, torch's slow convolutions: `bounds.CUDA_CORE_MARKERS`), on a GPU"
    ),
    technique=(
        "engage the tensor cores: channels (convolutions) or K and N (matmuls) padded to multiples of 8 with zeros "
        "(the same math), channels_last, `torch.backends.cudnn.benchmark = True`"
    ),
    bound="the ops' roofline time on the tensor roof, plus their launch floors",
    qualifier="the right unit",
    code_change="pad the channels or dims to multiples of 8 in the model",
)


@model_rule(TENSOR_CORES_IDLE)
def tensor_cores_idle(ctx: ModelContext) -> ModelFinding | None:
    """16-bit matmuls and convolutions on a CUDA-core fallback kernel (bounds.cuda_core_fallback): the tensor roof
    is what they could reach with the tensor cores engaged (the cause, from the shapes, in the evidence)."""
    pts = [p for p in ctx.work() if p.timed and cuda_core_fallback(p) is not None and not tiny(p, ctx.device)]
    if not pts:
        return None
    time_now = sum(p.time_s for p in pts)
    best = sum(p.roof_time_s + p.launch_floor_s for p in pts)
    first = pts[0]
    kernel = cuda_core_fallback(first) or ""
    evidence = (
        f"{len(pts)} {first.dtype} op{'s' if len(pts) > 1 else ''} ({_name(first.op)} in "
        f"{first.module or '(model)'}) ran on the CUDA cores ({kernel.split('(')[0][:80]}): "
        f"{tensor_core_cause(first)}; at {percent(ratio(best, time_now))} of the tensor roof"
    )
    technique = TENSOR_CORES_IDLE.technique
    if "conv" in first.op and first.input_shapes and len(first.input_shapes[0]) > 1 and first.input_shapes[0][1] % 8:
        cin = first.input_shapes[0][1]
        technique += f" (here: {cin} input channels -> {-(-cin // 8) * 8})"
    return model_finding(
        ctx, TENSOR_CORES_IDLE, technique, evidence, time_now, at_floor(time_now, best), pts, bottleneck="compute"
    )


__all__ = [
    "ACTIVATION_MATMUL",
    "AWKWARD_SHAPES",
    "CHEAPER_ALGORITHM",
    "COMPUTE_BOUND",
    "FP32_MATMUL",
    "MEMORY_BOUND_GEMV",
    "NEAR_ROOF",
    "QUANT_BITS",
    "TF32_SUSPECT",
    "WEIGHT_SHARE",
    "activation_matmul",
    "awkward_shapes",
    "cheaper_algorithm",
    "compute_bound",
    "fp32_matmul",
    "memory_bound_gemv",
]
