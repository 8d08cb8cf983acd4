"""Analytic family: findings for one analytic row (``roofline analyze``, a bench row's analytic fields): which
bottleneck, which property fits, which technique, what gain.

Each rule is a small pure function of the row's context (:class:`roofline.findings.analytic.AnalyticContext`)
returning a Finding or None, registered in the analytic stage in the order of preference (the architecture table's)
that breaks ranking ties. Gains are upper bounds from the roofline: a what-if cost (another dtype, the fused
variant) placed on the same device. That placement's time is also the finding's ``floor_s`` (the roofline time
after the technique): the row's time is itself a roofline time, so the best time is the floor.
"""

from __future__ import annotations

import math

from roofline.findings.analytic import AnalyticContext
from roofline.findings.base import TILE_M, TILE_N, Finding, at_floor, labelled, trimmed_waves, wave_times
from roofline.findings.registry import Rule, analytic_rule
from roofline.properties import Property
from roofline.units import format_bytes, format_time

LAUNCH_BOUND = Rule(
    id="launch-bound", family="analytic", bottleneck="launch", properties=(Property.LOCALITY, Property.ASSOCIATIVITY)
)
NAIVE_ATTENTION = Rule(
    id="naive-attention", family="analytic", bottleneck="memory", properties=(Property.ASSOCIATIVITY, Property.LOCALITY)
)
FP32_MATMUL = Rule(id="fp32-matmul", family="analytic", bottleneck="compute", properties=(Property.REDUNDANCY,))
WAVE_QUANTIZATION = Rule(
    id="wave-quantization", family="analytic", bottleneck="compute", properties=(Property.LOCALITY,)
)
MEMORY_BOUND_WEIGHTS = Rule(
    id="memory-bound-weights", family="analytic", bottleneck="memory", properties=(Property.REDUNDANCY,)
)
ELEMENTWISE_ROUND_TRIP = Rule(
    id="elementwise-round-trip", family="analytic", bottleneck="memory", properties=(Property.LOCALITY,)
)
COMPUTE_BOUND = Rule(
    id="compute-bound",
    family="analytic",
    bottleneck="compute",
    properties=(Property.SPARSITY, Property.SEPARABILITY, Property.SYMMETRY),
    changes_math=True,
)
LOWER_PRECISION = Rule(
    id="lower-precision",
    family="analytic",
    bottleneck="compute",
    properties=(Property.REDUNDANCY,),
    changes_math=True,
)


def _finding(ctx: AnalyticContext, rule: Rule, technique: str, evidence: str, best: float | None) -> Finding:
    """A finding of ``rule`` on the row. ``best``: the roofline time after the technique (the floor; the best time
    when below the row's time)."""
    best, floor = at_floor(ctx.placement.time_s, best) if best is not None else (None, None)
    return Finding(
        rule=rule.id,
        bottleneck=ctx.placement.bound,
        properties=[p.value for p in rule.properties],
        technique=labelled(technique, rule.change),
        change=rule.change,
        evidence=evidence,
        time_s=ctx.placement.time_s,
        best_time_s=best,
        floor_s=floor,
    )


@analytic_rule(LAUNCH_BOUND)
def launch_bound(ctx: AnalyticContext) -> Finding | None:
    p = ctx.placement
    if p.bound != "launch":
        return None
    work = p.roof_time_s
    best = max(work, ctx.device.launch_floor_s)  # one graph launch / one fused kernel at best
    evidence = (
        f"{p.kernels} kernel(s) x {format_time(ctx.device.launch_floor_s)} launch floor = "
        f"{format_time(p.launch_s)} of {format_time(p.time_s)}; the work itself needs {format_time(work)}"
    )
    technique = "fuse kernels (torch.compile), capture CUDA graphs (mode='reduce-overhead'), batch small ops"
    return _finding(ctx, LAUNCH_BOUND, technique, evidence, best)


@analytic_rule(NAIVE_ATTENTION)
def naive_attention(ctx: AnalyticContext) -> Finding | None:
    impl = getattr(ctx.params, "impl", None) or getattr(ctx.params, "attention", None)
    if impl != "naive":
        return None
    key = "impl" if hasattr(ctx.params, "impl") else "attention"
    fused = ctx.what_if(**{key: "fused"})
    if fused is None:
        return None
    evidence = (
        f"materialises the score and probability matrices: {format_bytes(ctx.placement.bytes)} moved vs "
        f"{format_bytes(fused.bytes)} fused ({ctx.placement.bytes / fused.bytes:.3g}x)"
    )
    technique = "online softmax + tiling: F.scaled_dot_product_attention / FlashAttention"
    return _finding(ctx, NAIVE_ATTENTION, technique, evidence, fused.time_s)


@analytic_rule(FP32_MATMUL)
def fp32_matmul(ctx: AnalyticContext) -> Finding | None:
    if ctx.cost.dtype != "fp32" or ctx.cost.math != "tensor" or any(k.tf32 for k in ctx.cost.kernels):
        return None
    if ("tf32", "tensor") not in ctx.device.compute:
        return None
    tf32 = ctx.what_if(tf32=True)
    if tf32 is None or tf32.time_s >= ctx.placement.time_s:
        return None
    evidence = (
        f"fp32 matmul runs on the {ctx.placement.roof_label} roof "
        f"({ctx.placement.peak_flops_per_s / 1e12:.3g} TFLOP/s); TF32 tensor cores offer "
        f"{ctx.device.compute[('tf32', 'tensor')] / 1e12:.3g}"
    )
    technique = "TF32 (torch.backends.cuda.matmul.allow_tf32 = True) or bf16 autocast"
    return _finding(ctx, FP32_MATMUL, technique, evidence, tf32.time_s)


@analytic_rule(WAVE_QUANTIZATION)
def wave_quantization(ctx: AnalyticContext) -> Finding | None:
    if ctx.kind != "gemm" or ctx.placement.bound != "compute" or not ctx.device.compute_units:
        return None
    m, n = ctx.params.m, ctx.params.n  # type: ignore[attr-defined]
    sms = ctx.device.compute_units
    waves = trimmed_waves(m, n, getattr(ctx.params, "batch", 1), sms)
    if waves is None:
        return None
    p = ctx.placement
    # NB: the roofline time assumes every SM busy; with whole tiles in waves, the last wave's idle SMs stretch it.
    # The trimmed GEMM is bounded the same way, so its time is never below its own roofline time.
    now_s, after_s = wave_times(p.roof_time_s, waves)
    launch = p.time_s - p.roof_time_s
    # NB: padding or trimming is a shape fix: the same work is never done below its own roofline time
    best, floor = at_floor(now_s + launch, max(after_s, p.roof_time_s) + launch)
    if best is None:
        return None
    unit = ctx.device.unit_name
    evidence = (
        f"with {TILE_M}x{TILE_N} tiles: {waves.tiles} tiles on {sms} {unit}s = {waves.waves} waves, the last one "
        f"{waves.tiles - (waves.waves - 1) * sms}/{sms} full, so the {unit}s are busy "
        f"{100 * waves.busy:.0f}% of the time: about {format_time(now_s + launch)}, not the roofline's "
        f"{format_time(p.time_s)}; m={waves.trimmed_m} n={waves.trimmed_n} needs {waves.trimmed_tiles} tiles = "
        f"{waves.trimmed_waves} wave(s): {format_time(after_s + launch)}"
    )
    technique = (
        f"pad or trim M, N to tile multiples so the tiles fill whole waves (m={waves.trimmed_m} n={waves.trimmed_n})"
    )
    return Finding(
        rule=WAVE_QUANTIZATION.id,
        bottleneck=p.bound,
        properties=[q.value for q in WAVE_QUANTIZATION.properties],
        technique=technique,
        evidence=evidence,
        time_s=now_s + launch,
        best_time_s=best,
        floor_s=floor,
    )


@analytic_rule(MEMORY_BOUND_WEIGHTS)
def memory_bound_weights(ctx: AnalyticContext) -> Finding | None:
    """Decode / GEMV: weight bytes dominate; batching amortises them, quantisation shrinks them."""
    p = ctx.placement
    if p.bound != "memory" or ctx.kind not in ("decode", "gemm"):
        return None
    headroom = p.ridge / p.intensity if p.intensity else math.inf
    evidence = (
        f"intensity {p.intensity:.3g} FLOP/B vs ridge {p.ridge:.3g}: "
        f"up to ~{headroom:.0f}x more work per byte fits before compute binds"
    )
    best = None
    technique = "batch requests (intensity grows with batch), quantize weights/KV (int8/int4/fp8), speculative decoding"
    if ctx.kind == "decode":
        current = getattr(ctx.params, "weight_dtype", None)
        if current not in ("int4", "fp4"):
            int4 = ctx.what_if(weight_dtype="int4")
            if int4 is not None and int4.time_s < p.time_s:
                best = int4.time_s
                evidence += f"; int4 weights: {format_time(int4.time_s)} per step"
    return _finding(ctx, MEMORY_BOUND_WEIGHTS, technique, evidence, best)


@analytic_rule(ELEMENTWISE_ROUND_TRIP)
def memory_bound_elementwise(ctx: AnalyticContext) -> Finding | None:
    p = ctx.placement
    if p.bound != "memory" or ctx.kind not in ("elementwise", "norm"):
        return None
    evidence = (
        f"{p.intensity:.3g} FLOP/B, far below the ridge ({p.ridge:.3g}): the op is one round trip of "
        f"{format_bytes(p.bytes)} through DRAM"
    )
    technique = "fuse it into its neighbours (torch.compile, Triton): inside a fused kernel its round trip vanishes"
    # Fused into a neighbour, its DRAM round trip vanishes and only its arithmetic remains.
    best = p.compute_s or None
    return _finding(ctx, ELEMENTWISE_ROUND_TRIP, technique, evidence, best)


@analytic_rule(COMPUTE_BOUND)
def compute_bound(ctx: AnalyticContext) -> Finding | None:
    p = ctx.placement
    if p.bound != "compute":
        return None
    evidence = f"intensity {p.intensity:.4g} FLOP/B is above the ridge {p.ridge:.4g}: the {p.roof_label} roof binds"
    technique = "do fewer FLOPs: 2:4 structured sparsity, MoE, low-rank factorisation, weight sharing / FFT"
    best = None
    # NB: NVIDIA Ampere and later (the parts with TF32) run 2:4-sparse tensor math at twice the dense rate.
    if ctx.device.vendor == "nvidia" and ("tf32", "tensor") in ctx.device.compute and ctx.cost.math == "tensor":
        best = max(p.compute_s / 2, p.memory_s) + p.launch_s
        evidence += "; 2:4 sparsity doubles this roof"
    return _finding(ctx, COMPUTE_BOUND, technique, evidence, best)


@analytic_rule(LOWER_PRECISION)
def lower_precision(ctx: AnalyticContext) -> Finding | None:
    """A compute-bound fp16/bf16 matmul on a device with fp8 tensor cores."""
    p = ctx.placement
    if p.bound != "compute" or ctx.cost.dtype not in ("fp16", "bf16") or not hasattr(ctx.params, "dtype"):
        return None
    if ("fp8", "tensor") not in ctx.device.compute:
        return None
    fp8 = ctx.what_if(dtype="fp8")
    if fp8 is None or fp8.time_s >= p.time_s:
        return None
    evidence = (
        f"fp8 tensor roof {ctx.device.compute[('fp8', 'tensor')] / 1e12:.4g} vs {p.peak_flops_per_s / 1e12:.4g} TFLOP/s"
    )
    technique = "fp8 matmuls (torch._scaled_mm, Transformer Engine) where accuracy allows"
    return _finding(ctx, LOWER_PRECISION, technique, evidence, fp8.time_s)


__all__ = [
    "COMPUTE_BOUND",
    "ELEMENTWISE_ROUND_TRIP",
    "FP32_MATMUL",
    "LAUNCH_BOUND",
    "LOWER_PRECISION",
    "MEMORY_BOUND_WEIGHTS",
    "NAIVE_ATTENTION",
    "WAVE_QUANTIZATION",
    "compute_bound",
    "fp32_matmul",
    "launch_bound",
    "lower_precision",
    "memory_bound_elementwise",
    "memory_bound_weights",
    "naive_attention",
    "wave_quantization",
]
