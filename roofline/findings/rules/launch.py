"""Launch family: time spent launching, dispatching and stepping rather than computing.

- ``compile-blockers``: a compiled model whose graph broke or recompiled (dynamo's counters);
- ``launch-bound``: many short ops (GPU: kernels with the GPU idle between them; CPU: per-op dispatch);
- ``sequential-loop``: a Python loop over a time axis (the same ops step after step, a recurrence), except the
  loops the fusion rules take by their structure (structure.loop_structure).
"""

from __future__ import annotations

from statistics import median

from roofline.findings import structure
from roofline.findings.base import bounded
from roofline.findings.model import (
    SHORT_FACTOR,
    ModelContext,
    ModelFinding,
    is_compiled,
    is_short,
    model_finding,
    ops_text,
    percent,
)
from roofline.findings.registry import Rule, Verify, model_rule
from roofline.findings.shapes import op_name as _name
from roofline.properties import Property
from roofline.units import format_time

MIN_LAUNCH_OPS = 16  # short ops (or kernels) that make a launch-bound model
LAUNCH_SHARE = 0.5  # ... and at least this share of the timed ops
#: a GPU idle at least this share of the span between its kernels waits for launches. NB: idle a third of the span,
#: the kernels back to back (a CUDA graph) take the span to 2/3: a 1.5x gain, the size the advice oracle counts
#: (an LLM decode step's small GEMMs on an H100: idle ~36%, CUDA graphs 1.57x; 0.5 missed it)
IDLE_SHARE = 1 / 3
BUSY_GPU_IDLE = 0.2  # a GPU idle less than this share of the span keeps up with its launches: not launch-bound


COMPILE_BLOCKERS = Rule(
    id="compile-blockers",
    family="launch",
    bottleneck="launch",
    properties=(Property.LOCALITY,),
    fires=(
        "a compiled model whose graph broke or recompiled during the run (dynamo's own counters: graph breaks "
        "with their reasons, recompilations with the guard that failed)"
    ),
    technique=(
        "remove the graph breaks (`torch._dynamo.explain`, `fullgraph=True`) and the recompilations "
        "(`torch._dynamo.mark_dynamic`)"
    ),
    bound=(
        "the element-wise/reduction ops that ran unfused, one kernel each, fused into one kernel at their "
        "roofline time; none when nothing ran unfused"
    ),
    code_change="remove the graph breaks and recompilations in the code",
)


LAUNCH_BOUND = Rule(
    id="launch-bound",
    family="launch",
    bottleneck="launch",
    properties=(Property.LOCALITY, Property.ASSOCIATIVITY),
    fires=(
        ">= 16 *short* ops (outside detected loops) and at least half of the ops doing work, except on a GPU idle "
        "less than 20% of the span (`BUSY_GPU_IDLE`: the host keeps up); or, on a GPU, >= 16 kernels (outside "
        "loops) with the GPU idle >= a third of the span (with a loop of small ops the idle time is the loop's). "
        "Short: bound `launch`, or less roofline work than one launch floor and at most 4 floors measured"
    ),
    technique=(
        "CUDA graphs / `torch.compile(mode='reduce-overhead')`, fusion, batching small GEMMs (CPU: "
        "`torch.compile`, batching)"
    ),
    bound=(
        "one launch per op -> one launch for all: the ops' roofline time plus one launch (the evidence also gives "
        "the device time alone: what a CUDA graph of the same kernels would take)"
    ),
    verify=Verify("reduce-overhead", "compile"),
)


SEQUENTIAL_LOOP = Rule(
    id="sequential-loop",
    family="launch",
    bottleneck="launch when most of its ops are short, else that of its ops",
    properties=(Property.ASSOCIATIVITY,),
    fires=(
        "the same op sequence (op, input shapes, module) of <= 64 ops repeats >= 8 times in a row and, where "
        "producers are recorded, step t reads an output of step t-1 in >= 50% of the steps (a recurrence, "
        "whatever the ops' durations; independent steps are no loop); without producers (older reports), its ops "
        "small (mean time <= 20x the per-op launch floor); not a loop `elementwise-recurrence` or "
        "`written-out-topk` takes (a recurrence along a sequence axis or through a matmul stays a scan)"
    ),
    technique=(
        "parallel scan / chunked recurrence; hoist the input projections into one GEMM; a fused cell; without a "
        "code change, CUDA graphs (`torch.compile(mode='reduce-overhead')`: the loop's launches replayed at once; "
        "the CPU: `torch.compile`)"
    ),
    bound="every step's ops at once (same FLOPs and bytes): one launch per op of one step",
    # NB: the mechanical technique removes the per-step launches, not the sequential dependency: its gain is at
    # most the loop's host/launch time (the advice oracle on an H100: the RNN-loop example 11.6x with CUDA graphs)
    verify=Verify("reduce-overhead", "compile"),
)


@model_rule(COMPILE_BLOCKERS)
def compile_blockers(ctx: ModelContext) -> ModelFinding | None:
    """A compiled model whose graph broke or recompiled during the run (dynamo's own counters): the ops between
    the graphs run eagerly, one kernel each, with Python between them."""
    t = ctx.timing
    if not is_compiled(ctx) or not (t.graph_breaks or t.recompiles):
        return None
    timed = [p for p in ctx.work() if p.timed]
    # NB: the ops that ran as their own kernel although a compiled graph would fuse them (vector math, no fused
    # kernel): a whole graph fuses them at best into one kernel at their roofline time
    eager = [p for p in timed if p.math == "vector" and not p.fused_kernel]
    parts = []
    if t.graph_breaks:
        breaks = sum(count for _, count in t.graph_breaks)
        listed = "; ".join(f"{reason} (x{count})" for reason, count in t.graph_breaks[:3])
        more = f"; and {len(t.graph_breaks) - 3} more reasons" if len(t.graph_breaks) > 3 else ""
        parts.append(f"{breaks} graph break{'s' if breaks != 1 else ''} ({t.graphs} graphs compiled): {listed}{more}")
    if t.recompiles:
        listed = "; ".join(dict.fromkeys(t.recompiles[:3]))
        parts.append(
            f"{len(t.recompiles)} recompilation{'s' if len(t.recompiles) != 1 else ''} (guard failed: {listed})"
        )
    if eager:
        parts.append(f"{len(eager)} element-wise/reduction ops ran unfused, one kernel each")
    techniques = []
    if t.graph_breaks:
        techniques.append(
            "remove the graph breaks so one graph covers the forward (torch._dynamo.explain(model)(*inputs) shows "
            "each with its source line; torch.compile(fullgraph=True) makes each an error)"
        )
    if t.recompiles:
        techniques.append(
            "stop the recompilations: mark the changing dimension dynamic (torch._dynamo.mark_dynamic) or pass the "
            "changing Python value as a tensor (TORCH_LOGS=recompiles shows each)"
        )
    if eager:
        time_now = ctx.wall_time_of(eager)
        before = sum(p.roof_time_s + p.launch_floor_s for p in eager)
        after = sum(p.roof_time_s for p in eager) + ctx.one_launch_s()
        bound = bounded(time_now, before, after, measured=sum(p.time_s for p in eager))
        points = eager
    else:
        # NB: nothing measured to gain: the finding names what blocks the compiler, with no bound
        time_now, bound, points = ctx.total_time_s, (None, None), timed
    return model_finding(
        ctx,
        COMPILE_BLOCKERS,
        "; ".join(techniques),
        "; ".join(parts),
        time_now,
        bound,
        points,
        bottleneck="launch",
        where=None if eager else "the compiled model",
    )


@model_rule(LAUNCH_BOUND)
def launch_bound(ctx: ModelContext) -> ModelFinding | None:
    """Many short ops near the launch floor (GPU: kernels with the GPU idle between them; CPU: per-op dispatch)."""
    s = ctx.summary
    in_loops = ctx.loop_indices()
    work = [p for p in ctx.work() if p.index not in in_loops]
    timed = [p for p in work if p.timed]
    launch = [p for p in timed if is_short(p, ctx.device)]
    gpu = s.device_kind == "cuda"
    idle = s.gpu_idle_share or 0.0
    many = len(launch) >= MIN_LAUNCH_OPS and len(launch) >= LAUNCH_SHARE * len(timed)
    if gpu and s.gpu_idle_share is not None and idle < BUSY_GPU_IDLE:
        many = False  # NB: short kernels back to back: the host keeps up, a graph would not shorten the span
    # NB: with a loop of small ops, the GPU's idle time is the loop's (its Python steps): the loop's finding
    kernels = sum(p.kernels for p in timed)
    idle_bound = gpu and kernels >= MIN_LAUNCH_OPS and idle >= IDLE_SHARE and len(in_loops) < len(work)
    if not (many or idle_bound) or not timed:
        return None
    time_now = ctx.wall_time_of(timed)
    before = sum(p.roof_time_s + p.launch_floor_s for p in timed)
    after = sum(p.roof_time_s for p in timed) + ctx.one_launch_s()
    device_time = sum(p.time_s for p in timed)  # the ops without the gaps between them
    # NB: a bound: the roofline time of the same ops as one graph / fused kernel (their work plus one launch)
    bound = bounded(time_now, before, after, measured=device_time)
    floor = ctx.device.launch_floor_s
    typical = median(p.time_s for p in timed)
    parts = [
        f"{len(launch)} of {len(timed)} ops are short (less work than one launch floor of {format_time(floor)}"
        f"{' per kernel' if gpu else ' per op'}, at most {SHORT_FACTOR:g}x it measured); median op "
        f"{format_time(typical)}"
    ]
    if gpu:
        parts.append(
            f"{kernels} kernels; GPU idle {percent(idle)} of the span between them (without the gaps, as a CUDA "
            f"graph replays them: {format_time(device_time)})"
        )
    elif s.host_overhead_share > 0:
        parts.append(f"{percent(s.host_overhead_share)} of the wall time is spent outside the ops (Python, dispatch)")
    parts.append(
        f"roofline: {format_time(before)} with one launch per op vs {format_time(after)} as one graph/fused kernel"
    )
    if gpu and is_compiled(ctx):
        technique = (
            "the model is compiled, but its kernels are still launched one by one with the GPU idle between them: "
            "capture CUDA graphs (torch.compile(model, mode='reduce-overhead')), batch small GEMMs (bmm / grouped "
            "GEMM) and grow the work per launch (larger batch)"
        )
    elif gpu:
        technique = (
            "capture CUDA graphs (torch.compile(mode='reduce-overhead'), torch.cuda.graphs), fuse the small ops "
            "(torch.compile), batch small GEMMs (bmm / grouped GEMM) and grow the work per launch (larger batch)"
        )
    elif is_compiled(ctx):
        technique = (
            "the model is compiled: batch small ops into fewer large ones (one bmm instead of many mm) and grow "
            "the work per call (larger batch)"
        )
    else:
        technique = (
            "torch.compile (fuses the small ops, removes the per-op dispatch and Python overhead), batch small ops "
            "into fewer large ones (one bmm instead of many mm), grow the work per call (larger batch)"
        )
    return model_finding(
        ctx,
        LAUNCH_BOUND,
        technique,
        "; ".join(parts),
        time_now,
        bound,
        timed,
        bottleneck="launch",
        where=f"{len(timed)} ops in {len({p.module for p in timed})} modules",
    )


@model_rule(SEQUENTIAL_LOOP)
def sequential_loop(ctx: ModelContext) -> list[ModelFinding]:
    """A Python loop over a time axis: the same small ops, step after step, in one module."""
    findings = []
    flow = ctx.dataflow()
    for loop in ctx.loops:
        pts = [ctx.by_index[i] for i in loop.indices]
        lo, hi = min(loop.indices), max(loop.indices)
        span = [p for p in ctx.points if lo <= p.index <= hi]
        if structure.loop_structure(pts, loop.period, loop.steps, span, flow) is not None:
            continue  # NB: no scan: an element-wise recurrence per element, or top-k by repeated max (fusion rules)
        time_now = ctx.wall_time_of(pts)  # its ops and the gaps between them (Python stepping the loop)
        own = sum(p.time_s for p in pts)
        before = sum(p.roof_time_s + p.launch_floor_s for p in pts)
        step_floors = sum(p.launch_floor_s for p in pts) / loop.steps
        after = sum(p.roof_time_s for p in pts) + max(step_floors, ctx.one_launch_s())
        where = f"{loop.module or '(model)'} ({loop.module_type})" if loop.module_type else loop.module or "(model)"
        evidence = (
            f"{where} runs the same {loop.period} op{'s' if loop.period > 1 else ''} ({ops_text(loop.ops)}) "
            f"{loop.steps} times in a row{' in the backward pass' if loop.phase == 'backward' else ''}: "
            f"{loop.steps} sequential steps of {format_time(time_now / loop.steps)}, mean op "
            f"{format_time(own / len(pts))} (launch floor {format_time(ctx.device.launch_floor_s)}); "
            f"roofline: {format_time(before)} step by step vs {format_time(after)} as one pass over all steps"
        )
        link = loop.carried
        if link is not None and link.recurrent and link.example is not None:
            consumer, producer = link.example
            evidence += (
                f"; a recurrence: in {link.links} of {link.transitions} steps an op reads the step before's output "
                f"(e.g. {_name(ctx.by_index[consumer].op)} #{consumer} reads "
                f"{_name(ctx.by_index[producer].op) if producer in ctx.by_index else 'op'} #{producer})"
            )
        technique = (
            "parallel scan over the time axis (associative recurrences: linear RNNs, SSMs, cumulative sums) or a "
            "chunked recurrence; at least hoist the non-recurrent work out of the loop (one GEMM for every step's "
            "input projection) and fuse the step (torch.compile, cuDNN nn.RNN/LSTM/GRU); without a code change, "
            + (
                "capture the loop in CUDA graphs (torch.compile(mode='reduce-overhead')): its launches replayed at once"
                if ctx.summary.device_kind == "cuda"
                else "torch.compile the model (the step's ops fused, no dispatch per op)"
            )
        )
        if is_compiled(ctx):
            technique = technique.replace("torch.compile, cuDNN", "the model is compiled: cuDNN")
        short = sum(1 for p in pts if is_short(p, ctx.device))
        findings.append(
            model_finding(
                ctx,
                SEQUENTIAL_LOOP,
                technique,
                evidence,
                time_now,
                bounded(time_now, before, after),
                pts,
                where=where,
                bottleneck="launch" if short >= len(pts) / 2 else None,
            )
        )
    return findings


__all__ = [
    "BUSY_GPU_IDLE",
    "COMPILE_BLOCKERS",
    "IDLE_SHARE",
    "LAUNCH_BOUND",
    "LAUNCH_SHARE",
    "MIN_LAUNCH_OPS",
    "SEQUENTIAL_LOOP",
    "compile_blockers",
    "launch_bound",
    "sequential_loop",
]
