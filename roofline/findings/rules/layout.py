"""Layout family: data in a layout its consumer reads slowly.

- ``conv-layout``: convolutions reading NCHW where the library's fast kernels want NHWC (cuDNN with fp16/bf16
  tensor cores, oneDNN on the CPU), or with permute + contiguous copies around them (patterns.conv_layouts);
- ``conv-layout-norm``: the same convolutions followed by a group or instance norm, which runs slower in NHWC: the
  layout together with torch.compile (Inductor generates the norm for NHWC and fuses it), not the layout alone;
- ``conv-layout-compile``: the convolutions of ``conv-layout`` on a GPU in an eager model long enough
  (COMPILE_WORTH_S) to hide the compiled call's host time: the layout together with torch.compile;
- ``non-contiguous``: memory-bound element-wise ops on strided inputs far below the DRAM bandwidth.

They leave out ops whose roofline time is below one launch floor (overhead-bound: the launch rule's).
"""

from __future__ import annotations

from dataclasses import replace

from roofline.findings import patterns
from roofline.findings.base import at_floor
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
from roofline.findings.shapes import op_name as _name
from roofline.properties import Property
from roofline.report.rows import OpPoint
from roofline.units import format_rate, format_time

NHWC_DTYPES = frozenset({"bf16", "fp16"})  # dtypes whose cuDNN convolutions run NHWC on tensor cores
#: norms whose eager kernels run slower in NHWC than in NCHW (their reductions are per (sample, group/channel) over
#: the spatial dims, contiguous only in NCHW): seen by module type or op
NHWC_SLOW_NORM_MODULES = frozenset({"GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"})
NHWC_SLOW_NORM_OPS = frozenset({"native_group_norm", "group_norm", "instance_norm"})
#: how many element-wise ops may stand between a convolution and such a norm (an activation, a bias add)
NORM_DEPTH = 2
#: GPU: an eager iteration at least this long hides the compiled callable's own host time (the advice oracle on an
#: H100, bf16: every convolution problem of 0.8-5 ms ran faster with channels_last + compile than with the layout
#: alone, 1.1-1.5x more; the example conv model of 0.29 ms and a 0.09 ms conv ran slower: 1.44x vs 1.92x, 0.83x vs
#: 1.16x)
COMPILE_WORTH_S = 0.5e-3


CONV_LAYOUT = Rule(
    id="conv-layout",
    family="layout",
    bottleneck="layout when layout-conversion kernels hold time, else that of its ops",
    properties=(Property.LOCALITY,),
    fires=(
        "convolutions with a 4-D NCHW-contiguous input (channels and spatial size > 1) in bf16/fp16 on a GPU or "
        "any dtype on the CPU, below 50% of the roofline, with layout-conversion kernel time, or with permute + "
        "contiguous copies feeding or reading them"
    ),
    technique="`channels_last` for the model and its input",
    bound="the convolutions' own roofline time (the copies go)",
    verify=Verify("channels_last"),
)


CONV_LAYOUT_NORM = Rule(
    id="conv-layout-norm",
    family="layout",
    bottleneck="layout when layout-conversion kernels hold time, else that of its ops",
    properties=(Property.LOCALITY,),
    fires=(
        "the convolutions of `conv-layout`, where a group or instance norm reads their output (directly or after "
        "at most 2 element-wise ops): the norm runs slower in NHWC"
    ),
    technique=(
        "`channels_last` together with `torch.compile` (the norm generated for NHWC and fused), not the layout "
        "alone; or keep NCHW for this block"
    ),
    bound="the convolutions' own roofline time (the copies go) and the norms' roofline time, fused",
    verify=Verify("channels_last+compile"),
)


CONV_LAYOUT_COMPILE = replace(
    CONV_LAYOUT,  # NB: its bottleneck, properties and bound; what fires it and the technique differ
    id="conv-layout-compile",
    fires=(
        "the convolutions of `conv-layout` on a GPU in an eager model whose iteration takes at least 0.5 ms "
        "(`COMPILE_WORTH_S`: the compiled callable's own host time, about 0.1 ms, hides behind it)"
    ),
    technique=(
        "`channels_last` together with `torch.compile`: the layout, and the conversions at the model's edges and "
        "the convolutions' epilogues (bias, activation, norm) fused for NHWC"
    ),
    verify=Verify("channels_last+compile"),
)


NON_CONTIGUOUS = Rule(
    id="non-contiguous",
    family="layout",
    bottleneck="memory",
    properties=(Property.LOCALITY,),
    fires="memory-bound element-wise ops on strided/transposed inputs below 50% of the DRAM bandwidth",
    technique="contiguous layout, coalesced access (`.contiguous()` once, `channels_last`)",
    bound="the roofline time of those ops",
    code_change="make the tensor contiguous where it is produced",
)


def slow_norm_after(p: OpPoint, flow: patterns.Dataflow) -> OpPoint | None:
    """A group or instance norm reading ``p``'s output, directly or after at most NORM_DEPTH element-wise ops."""
    frontier = list(flow.consumers.get(p.index, []))
    for _ in range(NORM_DEPTH + 1):
        following: list[int] = []
        for index in frontier:
            q = flow.by_index.get(index)
            if q is None:
                continue
            if q.module_type in NHWC_SLOW_NORM_MODULES or _name(q.op) in NHWC_SLOW_NORM_OPS:
                return q
            if q.math == "vector" and not patterns.is_conv(q):
                following += flow.consumers.get(q.index, [])
        frontier = following
    return None


@model_rule(CONV_LAYOUT, CONV_LAYOUT_NORM, CONV_LAYOUT_COMPILE)
def conv_layout(ctx: ModelContext) -> list[ModelFinding]:
    """Convolutions reading NCHW inputs where the library's fast kernels want NHWC (cuDNN with fp16/bf16 tensor
    cores; oneDNN on the CPU), or with permute + contiguous copies around them: one finding for those whose
    output no slow-in-NHWC norm reads (``conv-layout``), one for those it does (``conv-layout-norm``: the layout
    with torch.compile)."""
    gpu = ctx.summary.device_kind == "cuda"
    flow = ctx.dataflow()
    plain: list[tuple[patterns.ConvLayout, OpPoint]] = []
    normed: list[tuple[patterns.ConvLayout, OpPoint]] = []
    norms: list[OpPoint] = []
    for c in patterns.conv_layouts(ctx.points, flow):
        p = ctx.by_index[c.conv]
        if tiny(p, ctx.device) or (gpu and p.dtype not in NHWC_DTYPES):
            continue
        conv_layout_s = float(getattr(p, "layout_time_s", 0.0) or 0.0)  # NB: from the kernels, where measured
        slow = p.efficiency is not None and p.efficiency < FAR_BELOW
        if conv_layout_s <= 0 and not slow and not c.copies:
            continue
        norm = slow_norm_after(p, flow)
        if norm is None:
            plain.append((c, p))
        else:
            normed.append((c, p))
            if norm not in norms:
                norms.append(norm)
    worth = gpu and not is_compiled(ctx) and ctx.total_time_s >= COMPILE_WORTH_S
    found = [_conv_finding(ctx, CONV_LAYOUT_COMPILE if worth else CONV_LAYOUT, plain, [], gpu)] if plain else []
    if normed:
        found.append(_conv_finding(ctx, CONV_LAYOUT_NORM, normed, norms, gpu))
    return [f for f in found if f is not None]


def _conv_finding(
    ctx: ModelContext,
    rule: Rule,
    chosen: list[tuple[patterns.ConvLayout, OpPoint]],
    norms: list[OpPoint],
    gpu: bool,
) -> ModelFinding | None:
    convs = [p for _, p in chosen]
    copies: list[OpPoint] = []
    layout_s = 0.0
    for c, p in chosen:
        layout_s += float(getattr(p, "layout_time_s", 0.0) or 0.0)
        copies += [ctx.by_index[i] for i in c.copies if ctx.by_index[i] not in copies]
    example = chosen[0][0]
    pts = convs + copies + norms
    time_now = sum(p.time_s for p in pts)
    # the copies go; a norm (conv-layout-norm) is fused: its roofline time, no launch of its own
    best = sum(p.roof_time_s + p.launch_floor_s for p in convs) + sum(p.roof_time_s for p in norms)
    roof = sum(p.roof_time_s for p in convs)
    conv_time = sum(p.time_s for p in convs)
    shape = "x".join(str(d) for d in example.shape)
    library = "cuDNN's tensor-core kernels want NHWC" if gpu else "oneDNN's convolutions run in NHWC/blocked layouts"
    evidence = (
        f"{len(convs)} convolution{'s' if len(convs) > 1 else ''} read NCHW {convs[0].dtype} inputs (e.g. {shape} in "
        f"{ctx.by_index[example.conv].module or '(model)'}): {library} and convert the layout on every call; at "
        f"{percent(ratio(roof, conv_time))} of the roofline"
    )
    if layout_s > 0:
        evidence += f"; {format_time(layout_s)} of their time is in layout-conversion kernels"
    if copies:
        evidence += (
            f"; {len(copies)} permute + contiguous cop{'ies' if len(copies) > 1 else 'y'} around them "
            f"({format_time(sum(p.time_s for p in copies))})"
        )
    technique = (
        "channels_last memory format: model.to(memory_format=torch.channels_last) and "
        "x.to(memory_format=torch.channels_last), no permute/contiguous copies around the convolutions"
    )
    if rule is CONV_LAYOUT_COMPILE:
        technique = (
            "channels_last together with torch.compile: model.to(memory_format=torch.channels_last), the input in "
            "channels_last, then torch.compile(model) (the conversions at the model's edges and the convolutions' "
            f"epilogues fused for NHWC; the iteration, {format_time(ctx.total_time_s)}, hides the compiled call's "
            "own host time)"
        )
    if norms:
        kinds = sorted({"group" if "group" in (n.module_type + n.op).lower() else "instance" for n in norms})
        evidence += (
            f"; a {' and '.join(kinds)} norm reads their output ({len(norms)}: "
            f"{format_time(sum(n.time_s for n in norms))}), which runs slower in NHWC"
        )
        technique = (
            "channels_last together with torch.compile: model.to(memory_format=torch.channels_last), the input "
            "in channels_last, then torch.compile(model) (Inductor generates the norm for NHWC and fuses it); "
            "channels_last alone slows the norm; or keep NCHW for this block"
        )
    return model_finding(
        ctx,
        rule,
        technique,
        evidence,
        time_now,
        at_floor(time_now, best),
        pts,
        bottleneck="layout" if layout_s > 0 else None,
    )


@model_rule(NON_CONTIGUOUS)
def non_contiguous(ctx: ModelContext) -> ModelFinding | None:
    """Memory-bound element-wise ops on strided/transposed inputs, far below the DRAM bandwidth."""
    bw = ctx.device.dram_bandwidth
    pts = [
        p
        for p in ctx.work()
        if p.math == "vector"
        and p.non_contiguous
        and p.roofline_bound == "memory"
        and not tiny(p, ctx.device)
        and p.achieved_bytes_per_s is not None
        and p.achieved_bytes_per_s < FAR_BELOW * bw
    ]
    if not pts:
        return None
    time_now = sum(p.time_s for p in pts)
    moved = sum(p.bytes for p in pts)
    best = sum(p.roof_time_s + p.launch_floor_s for p in pts)
    achieved = moved / time_now if time_now else 0.0
    example = max(pts, key=lambda p: p.time_s)
    shapes = ", ".join("x".join(str(d) for d in s) for s in example.input_shapes)
    evidence = (
        f"{len(pts)} memory-bound op{'s' if len(pts) > 1 else ''} read strided/transposed inputs at "
        f"{format_rate(achieved, 'B/s')} ({percent(achieved / bw)} of DRAM {format_rate(bw, 'B/s')}), e.g. "
        f"{_name(example.op)} on {shapes} in {example.module or '(model)'}"
    )
    technique = (
        "keep tensors contiguous in the layout the consumer reads (transpose once, .contiguous() before a chain, "
        "channels_last for convolutions), so accesses are coalesced"
    )
    return model_finding(
        ctx,
        NON_CONTIGUOUS,
        technique,
        evidence,
        time_now,
        at_floor(time_now, best),
        pts,
        bottleneck="memory",
    )


__all__ = [
    "COMPILE_WORTH_S",
    "CONV_LAYOUT",
    "CONV_LAYOUT_COMPILE",
    "CONV_LAYOUT_NORM",
    "NHWC_DTYPES",
    "NON_CONTIGUOUS",
    "conv_layout",
    "non_contiguous",
    "slow_norm_after",
]
