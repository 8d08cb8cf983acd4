"""Layout family: data in a layout its consumer reads slowly.

- ``conv-layout``: convolutions reading NCHW where the library's fast kernels want NHWC (cuDNN with fp16/bf16
  tensor cores, oneDNN on the CPU), or with permute + contiguous copies around them (patterns.conv_layouts);
- ``non-contiguous``: memory-bound element-wise ops on strided inputs far below the DRAM bandwidth.

They leave out ops whose roofline time is below one launch floor (overhead-bound: the launch rule's).
"""

from __future__ import annotations

from roofline.findings import patterns
from roofline.findings.base import at_floor
from roofline.findings.model import (
    FAR_BELOW,
    ModelContext,
    ModelFinding,
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


@model_rule(CONV_LAYOUT)
def conv_layout(ctx: ModelContext) -> ModelFinding | None:
    """Convolutions reading NCHW inputs where the library's fast kernels want NHWC (cuDNN with fp16/bf16 tensor
    cores; oneDNN on the CPU), or with permute + contiguous copies around them."""
    gpu = ctx.summary.device_kind == "cuda"
    flow = ctx.dataflow()
    convs: list[OpPoint] = []
    copies: list[OpPoint] = []
    layout_s = 0.0
    example = None
    for c in patterns.conv_layouts(ctx.points, flow):
        p = ctx.by_index[c.conv]
        if tiny(p, ctx.device) or (gpu and p.dtype not in NHWC_DTYPES):
            continue
        conv_layout_s = float(getattr(p, "layout_time_s", 0.0) or 0.0)  # NB: from the kernels, where measured
        slow = p.efficiency is not None and p.efficiency < FAR_BELOW
        if conv_layout_s <= 0 and not slow and not c.copies:
            continue
        convs.append(p)
        layout_s += conv_layout_s
        copies += [ctx.by_index[i] for i in c.copies if ctx.by_index[i] not in copies]
        example = example or c
    if not convs or example is None:
        return None
    pts = convs + copies
    time_now = sum(p.time_s for p in pts)
    best = sum(p.roof_time_s + p.launch_floor_s for p in convs)  # the copies go
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
    return model_finding(
        ctx,
        CONV_LAYOUT,
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


__all__ = ["CONV_LAYOUT", "NHWC_DTYPES", "NON_CONTIGUOUS", "conv_layout", "non_contiguous"]
