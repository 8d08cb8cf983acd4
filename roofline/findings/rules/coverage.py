"""Coverage family: every group of identical ops that costs time gets a verdict.

After the model rules (the registry's model stage, :mod:`roofline.findings.rules`), each group of identical ops
(the same op on the same input shapes in the same phase, wherever it is called) taking at least COVER_SHARE of the
iteration is checked:

- below NEAR_ROOF of its roofline and no finding covers it: a **compile-candidate** finding where torch.compile
  generates the ops' kernels itself (element-wise ops, reductions and scans, norms, pooling, gathers, copies:
  GENERATED_FAMILIES): the mechanical thing to try, with the roofline's bound, that --verify measures; else a
  **not-explained** finding -- how much time, how far below the roof, the evidence we have (the limiter and its
  numbers, achieved rates), what to try for its kind of op (a convolution: cudnn.benchmark, channels_last) and the
  next experiment (the Nsight Compute sections that would tell);
- at or above NEAR_ROOF of its roofline and not covered: a **near-roof** finding naming the next property the
  texts give for that roof (memory: fewer bytes -- fuse with the neighbours, lower precision; compute: fewer
  FLOPs -- sparsity, low rank, a cheaper algorithm), with the bound of halving the binding term.

A group is covered when findings already name at least COVERED_SHARE of its time. Pure: the context and the
findings in, the extra findings out (the coverage stage: the model stage's findings are ``ctx.earlier``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from roofline.costs.aten.registry import FAMILY
from roofline.findings.base import Finding, at_floor, bounded, labelled
from roofline.findings.bounds import floor_time_s, instruction_floor_s, is_instruction_bound_kernel
from roofline.findings.context import FindingContext
from roofline.findings.model import ModelContext, ModelFinding, with_sources
from roofline.findings.registry import Rule, Verify, register
from roofline.properties import Property
from roofline.report.rows import OpPoint
from roofline.units import format_rate, format_time

COVER_SHARE = 0.05  # a group taking at least this share of the iteration gets a verdict
NEAR_ROOF = 0.8  # at or above this efficiency a group is near its roofline
COVERED_SHARE = 0.5  # a group is covered when findings name at least this share of its time

NOT_EXPLAINED = Rule(
    id="not-explained",
    family="coverage",
    bottleneck="the limiter holding most of its ops' time",
    properties=(),
    fires=(
        "a group of identical ops (op, input shapes, phase) taking >= 5% of the iteration (`COVER_SHARE`) below 80% "
        "of its roofline (`NEAR_ROOF`) that findings name less than half of (`COVERED_SHARE`)"
    ),
    technique=(
        "the next experiment: the Nsight Compute sections for its limiter (`NEXT_SECTIONS`) on a GPU; "
        "`torch.profiler` with stacks and `perf stat` on the CPU"
    ),
    bound="the ops' roofline time (each op's instruction time where longer) plus their launch floors",
    code_change="no technique is known for these ops",
)
COMPILE_CANDIDATE = Rule(
    id="compile-candidate",
    family="coverage",
    bottleneck="the limiter holding most of its ops' time",
    properties=(Property.LOCALITY,),
    fires=(
        "the group of `not-explained`, of ops whose kernels torch.compile generates itself (element-wise, "
        "reductions and scans, norms, pooling, gathers and copies: `GENERATED_FAMILIES`), on an eager model; on a "
        "GPU only ops that run as several kernels, scans, kernels of an instruction-bound family, or one kernel of "
        "at least 200 us a call (`LONG_OP_S`: the compiled callable's own host time hides behind it)"
    ),
    technique=(
        "`torch.compile`: Inductor generates these ops' kernels and fuses them with their neighbours (one pass "
        "over the data, no launch each)"
    ),
    bound=(
        "the ops' roofline time (each op's instruction time where longer: `bounds.floor_time_s`) plus their launch "
        "floors"
    ),
    verify=Verify("compile"),
)
COMPILE_CANDIDATE_NHWC = replace(
    COMPILE_CANDIDATE,  # NB: its bottleneck, properties and bound; what fires it and the technique differ
    id="compile-candidate-nhwc",
    fires=(
        "`compile-candidate` on a GPU where every op is a pooling or upsampling op over a 4-D NCHW 16-bit image "
        "(`NHWC_FAMILIES`): the kernels Inductor generates for them read whole channel vectors per pixel in NHWC"
    ),
    technique=(
        "`channels_last` together with `torch.compile`: Inductor generates the pooling/upsampling kernels for NHWC "
        "(contiguous channel vectors per window position) and fuses the layout conversions; the layout alone "
        "slows the eager kernels"
    ),
    verify=Verify("channels_last+compile"),
)
NEAR_ROOF_RULE = Rule(
    id="near-roof",
    family="coverage",
    bottleneck="memory or compute: the roof it is near",
    properties=(Property.LOCALITY, Property.REDUNDANCY, Property.SPARSITY, Property.SEPARABILITY, Property.SYMMETRY),
    qualifier="the first two near the memory roof, the last three near the compute roof",
    fires="the same group at or above 80% of its roofline (`NEAR_ROOF`), not covered by a finding",
    technique=(
        "fewer bytes (fuse with the neighbours, a lower precision) near the memory roof; fewer FLOPs (2:4 sparsity, "
        "low rank, a cheaper algorithm) near the compute roof"
    ),
    bound=(
        "half the binding term: half the bytes (fp32 -> bf16, bf16 -> fp8) or half the FLOPs (2:4 sparsity); half "
        "the bytes never below the instruction time of the ops' arithmetic"
    ),
    code_change="the ops are near their roof already",
    changes_math=True,
)

#: op families (roofline.costs.aten's) whose kernels Inductor generates itself rather than calling a library
GENERATED_FAMILIES = frozenset(
    {"elementwise", "reduction", "norm", "pooling", "upsampling", "grid sampling", "gather", "scatter", "copy"}
)
#: families whose generated kernels run faster over NHWC images (the advice oracle on an H100, bf16, 4-D NCHW
#: inputs: max pool compiled 3.9x, channels_last + compiled 4.5x; avg pool 3.3x / 3.4x; bilinear upsampling 1.7x
#: / 3.2x; while group and instance norms, which reduce over the spatial dims, lose: 2.0x / 1.6x, 2.3x / 1.8x)
NHWC_FAMILIES = frozenset({"pooling", "upsampling"})
#: what to try for a convolution no rule explains
CONV_TRY = (
    "torch.backends.cudnn.benchmark = True (cuDNN picks its fastest algorithm), channels_last (with torch.compile "
    "where a norm follows)"
)

UNCOUNTED_SHARE = 0.05  # an uncounted op holding at least this share of the iteration gets a finding
UNCOUNTED_RULE = Rule(
    id="uncounted-op",
    family="coverage",
    bottleneck="unknown: no cost formula",
    properties=(),
    fires="an op with no cost formula (its FLOPs and bytes unknown) holding >= 5% of the iteration (`UNCOUNTED_SHARE`)",
    technique=(
        "give its cost: `roofline.register_cost(op, flops=..., bytes=...)`, a `roofline.costs` entry point, or "
        "torch's `register_flop_formula` (docs/op-costs.md)"
    ),
    bound="unknown until the op is costed",
    code_change="register a cost for the op; nothing to apply to the model",
)

# NB: Nsight Compute sections (ncu --section NAME) that tell what limits a kernel, per limiter
NEXT_SECTIONS = {
    "memory": "MemoryWorkloadAnalysis (DRAM/L2 traffic, cache hit rates, uncoalesced accesses)",
    "compute": "ComputeWorkloadAnalysis and InstructionStats (pipe utilisation, tensor cores used or not)",
    "parallelism": "LaunchStats and Occupancy (grid size vs SMs, waves, registers and shared memory per block)",
    "latency": "WarpStateStats and SchedulerStats (why warps stall: memory dependency, barriers, issue)",
    "layout": "SpeedOfLight per kernel of the op (the conversion kernels beside the main one)",
    "launch": "a timeline (nsys) of the iteration: kernel gaps and host time between launches",
    "host": "a timeline (nsys or torch.profiler) of the host thread: Python and dispatch between ops",
}
# NB: on a CPU: what the threads do
CPU_NEXT = (
    "torch.profiler with with_stack=True (where the op's time goes) and `perf stat` / VTune on the run (threads busy, "
    "vector instructions, cache misses); torch.get_num_threads() should match the cores"
)


def _limiter(points: Sequence[OpPoint]) -> tuple[str, str]:
    """The limiter holding most of the group's time and the evidence of its largest op (H6's stored values when the
    report has them; the roofline bound otherwise)."""
    by_time: dict[str, float] = {}
    for p in points:
        name = getattr(p, "limiter", "") or p.bound
        by_time[name] = by_time.get(name, 0.0) + p.time_s
    limiter = max(by_time, key=lambda k: by_time[k]) if by_time else "none"
    top = max(points, key=lambda p: p.time_s)
    return limiter, getattr(top, "limiter_evidence", "") or ""


def _rates(points: Sequence[OpPoint]) -> str:
    time = sum(p.time_s for p in points)
    if time <= 0:
        return ""
    flops = sum(p.flops for p in points)
    nbytes = sum(p.bytes for p in points)
    top = max(points, key=lambda p: p.time_s)
    parts = []
    if nbytes and top.bandwidth_bytes_per_s:
        rate = nbytes / time
        parts.append(f"DRAM {format_rate(rate, 'B/s')} ({100 * rate / top.bandwidth_bytes_per_s:.0f}% of the ceiling)")
    if flops and top.peak_flops_per_s:
        rate = flops / time
        parts.append(f"{format_rate(rate, 'FLOP/s')} ({100 * rate / top.peak_flops_per_s:.0f}% of the {top.roof} roof)")
    return ", ".join(parts)


def groups(ctx: ModelContext) -> list[list[OpPoint]]:
    """Timed ops doing work, grouped by op, input shapes and phase (identical ops wherever they are called)."""
    grouped: dict[object, list[OpPoint]] = {}
    for p in ctx.work():
        if p.timed and p.time_s > 0:
            grouped.setdefault((p.signature(), p.phase), []).append(p)
    return list(grouped.values())


def _covered(points: Sequence[OpPoint], findings: Sequence[Finding]) -> bool:
    named = {i for f in findings for i in getattr(f, "ops", ())}
    time = sum(p.time_s for p in points)
    return time > 0 and sum(p.time_s for p in points if p.index in named) >= COVERED_SHARE * time


def _label(points: Sequence[OpPoint]) -> str:
    p = points[0]
    shapes = ", ".join("x".join(str(d) for d in s) for s in p.input_shapes[:3])
    count = f"{len(points)} x " if len(points) > 1 else ""
    return f"{count}{p.op.rsplit('::', 1)[-1]} [{shapes}]"


def _verdict(
    rule: str,
    bottleneck: str,
    props: list[str],
    technique: str,
    evidence: str,
    points: Sequence[OpPoint],
    share: float,
    bound: tuple[float | None, float | None],
    change: str,
) -> ModelFinding:
    """A coverage finding on a group of identical ops: their time, where they are, their indices."""
    return ModelFinding(
        rule=rule,
        bottleneck=bottleneck,
        properties=props,
        technique=labelled(technique, change),
        change=change,
        evidence=evidence,
        time_s=sum(p.time_s for p in points),
        best_time_s=bound[0],
        floor_s=bound[1],
        where=with_sources(", ".join(dict.fromkeys(p.module or "(model)" for p in points[:3])), points),
        ops=sorted(p.index for p in points),
        share=share,
    )


#: scans: one eager kernel each, which Inductor's generated scan beats (held-out H100 evidence: cumprod 2.06x)
SCANS = frozenset({"aten::cumsum", "aten::cumprod", "aten::logcumsumexp", "aten::cummax", "aten::cummin"})


#: GPU: a one-kernel op this long (each call) hides the compiled callable's own host time behind its kernel
LONG_OP_S = 200e-6


def generated(points: Sequence[OpPoint], gpu: bool = False) -> bool:
    """Every op of the group is of a family whose kernels torch.compile generates (GENERATED_FAMILIES) and, on a GPU,
    there is something for it to gain: the op runs as several kernels in eager (a group or instance norm), is a scan,
    its kernel is of an instruction-bound family (softmax, the generic element-wise kernel), or it is one kernel far
    from its roof (the group is not explained) and long: each call at least LONG_OP_S (the held-out 2-D max pool,
    11.4 ms eager, 2.5x compiled). NB: on a short op the compiled callable's own host time loses (the advice oracle
    on an H100: one-op models of 30-70 us eager took 75-145 us a call compiled: a layer norm on 32 rows 0.45x,
    RMSNorm 0.57x, a single mish 0.86x)."""
    if not all(FAMILY.get(p.op) in GENERATED_FAMILIES for p in points):
        return False
    if not gpu:
        return True
    return all(
        p.kernels >= 2
        or p.op in SCANS
        or any(is_instruction_bound_kernel(k.name) for k in p.kernel_facts)
        or p.time_s >= LONG_OP_S
        for p in points
    )


def nchw_image(p: OpPoint) -> bool:
    """A pooling or upsampling op (NHWC_FAMILIES) whose first input is a 4-D 16-bit image with channels and a
    spatial extent above 1. NB: the recorded shapes carry no strides: an input already in channels_last reads the
    same; --verify then measures no gain and says so."""
    if FAMILY.get(p.op) not in NHWC_FAMILIES or p.dtype not in ("bf16", "fp16") or not p.input_shapes:
        return False
    shape = p.input_shapes[0]
    return len(shape) == 4 and shape[1] > 1 and shape[2] * shape[3] > 1


def not_explained(ctx: ModelContext, points: Sequence[OpPoint], share: float, efficiency: float) -> ModelFinding:
    limiter, evidence = _limiter(points)
    time_s = sum(p.time_s for p in points)
    # NB: never below the ops' instruction time (bounds.floor_time_s): torch.compile's kernel still issues them
    bound = at_floor(time_s, floor_time_s(points, ctx.device) + sum(p.launch_floor_s for p in points))
    rates = _rates(points)
    text = (
        f"{_label(points)}: {100 * share:.0f}% of the time at {100 * efficiency:.0f}% of the roofline; "
        f"limiter {limiter}" + (f" ({evidence})" if evidence else "") + (f"; achieved {rates}" if rates else "")
    )
    if ctx.summary.device_kind == "cuda":
        section = NEXT_SECTIONS.get(limiter, NEXT_SECTIONS["latency"])
        nxt = f"Nsight Compute --section {section} on its kernels"
    else:
        nxt = CPU_NEXT
    if generated(points, ctx.summary.device_kind == "cuda") and not getattr(ctx.timing, "compiled", False):
        technique = (
            "not explained by a rule; try torch.compile: Inductor generates these ops' kernels and fuses them with "
            f"their neighbours; if it does not help, next: {nxt}"
        )
        rule = COMPILE_CANDIDATE
        if ctx.summary.device_kind == "cuda" and all(nchw_image(p) for p in points):
            rule = COMPILE_CANDIDATE_NHWC
            technique = (
                "not explained by a rule; try channels_last with torch.compile: Inductor generates these pooling/"
                "upsampling kernels for NHWC (whole channel vectors per window) and fuses them with their "
                f"neighbours; channels_last alone slows the eager kernels; if it does not help, next: {nxt}"
            )
        props = [p.value for p in rule.properties]
        return _verdict(rule.id, limiter, props, technique, text, points, share, bound, "none")
    if any(FAMILY.get(p.op) == "conv" for p in points):
        technique = f"not explained by a rule; try {CONV_TRY}; next: {nxt}"
    else:
        technique = f"not explained by a rule; next: {nxt}"
    return _verdict(NOT_EXPLAINED.id, limiter, [], technique, text, points, share, bound, "code")


def near_roof(ctx: ModelContext, points: Sequence[OpPoint], share: float, efficiency: float) -> ModelFinding:
    time_s = sum(p.time_s for p in points)
    memory = sum(p.memory_time_s for p in points)
    compute = sum(p.compute_time_s for p in points)
    launch = sum(p.launch_floor_s for p in points)
    if memory >= compute:
        bottleneck = "memory"
        props = [Property.LOCALITY.value, Property.REDUNDANCY.value]
        fuse = "fuse it with its neighbours" + ("" if getattr(ctx.timing, "compiled", False) else " (torch.compile)")
        technique = (
            f"fewer bytes: {fuse} so its inputs and outputs stay on chip, or "
            "a lower precision (bf16/fp8 activations, int8/int4 weights)"
        )
        # NB: the what-if of half the bytes (fp32 -> bf16, or bf16 -> fp8), the compute term unchanged
        # NB: nor below the instruction time of the ops' arithmetic (bounds.instruction_floor_s)
        after = (
            max(
                sum(max(p.memory_time_s / 2, p.compute_time_s) for p in points), instruction_floor_s(points, ctx.device)
            )
            + launch
        )
    else:
        bottleneck = "compute"
        props = [Property.SPARSITY.value, Property.SEPARABILITY.value, Property.SYMMETRY.value]
        technique = "fewer FLOPs: 2:4 structured sparsity, low-rank factorisation, a cheaper algorithm"
        # NB: the what-if of 2:4 sparsity (half the FLOPs at the same roof), the memory term unchanged
        after = sum(max(p.compute_time_s / 2, p.memory_time_s) for p in points) + launch
    before = sum(p.roof_time_s for p in points) + launch
    bound = bounded(time_s, before, after)
    evidence = (
        f"{_label(points)}: {100 * share:.0f}% of the time at {100 * efficiency:.0f}% of the roofline "
        f"({format_time(time_s)} vs {format_time(before - launch)}): near the {bottleneck} roof, only less "
        f"{'traffic' if bottleneck == 'memory' else 'arithmetic'} makes it faster"
    )
    return _verdict(NEAR_ROOF_RULE.id, bottleneck, props, technique, evidence, points, share, bound, "math")


def cover(ctx: ModelContext, findings: Sequence[Finding]) -> list[ModelFinding]:
    """The not-explained and near-roof findings for the groups of at least COVER_SHARE that ``findings`` leave
    uncovered, largest first."""
    total = ctx.total_time_s
    if total <= 0:
        return []
    extra: list[ModelFinding] = []
    for points in groups(ctx):
        time_s = sum(p.time_s for p in points)
        share = time_s / total
        roof = sum(p.roof_time_s for p in points)
        if share < COVER_SHARE or roof <= 0 or _covered(points, findings):
            continue
        efficiency = roof / time_s
        make = near_roof if efficiency >= NEAR_ROOF else not_explained
        extra.append(make(ctx, points, share, efficiency))
    return sorted(extra, key=lambda f: -f.time_s)


def _how_to_cost(op: str) -> str:
    if op.startswith("triton::"):
        kernel = op.removeprefix("triton::")
        return f"roofline.register_cost({kernel!r}, flops=..., bytes=...) (the kernel or its name)"
    if op.startswith("higher_order::"):
        return (f"its inner ops are hidden from the counting pass; register the op that wraps it, or report the "
                f"higher-order op {op.removeprefix('higher_order::')!r}")  # fmt: skip
    return f"roofline.register_cost({op!r}, flops=..., bytes=...) or torch's register_flop_formula"


def uncounted(ctx: ModelContext) -> list[ModelFinding]:
    """One finding per uncounted op (grouped by op) holding at least UNCOUNTED_SHARE of the iteration, largest
    first: which op, its share, and how to register a cost for it."""
    total = ctx.total_time_s
    if total <= 0:
        return []
    found = []
    for u in sorted(ctx.uncounted, key=lambda u: -u.time_s):
        share = u.time_s / total
        if share < UNCOUNTED_SHARE:
            continue
        calls = f"{u.count} call{'s' if u.count != 1 else ''}"
        shapes = ", ".join("x".join(str(d) for d in s) for s in u.input_shapes[:3])
        evidence = (
            f"{u.op} [{shapes}] ({calls}): {100 * share:.0f}% of the time ({format_time(u.time_s)}) with no cost: "
            "its FLOPs and bytes are unknown, so no roofline judges it"
        )
        if u.note:
            evidence += f" ({u.note})"
        found.append(
            ModelFinding(
                rule=UNCOUNTED_RULE.id,
                bottleneck=UNCOUNTED_RULE.bottleneck,
                properties=[],
                technique=f"give it a cost: {_how_to_cost(u.op)}; docs/op-costs.md, 'Costs of your own ops'",
                evidence=evidence,
                time_s=u.time_s,
                where=", ".join(u.modules[:3]) or "(model)",
                share=share,
            )
        )
    return found


@register("coverage", UNCOUNTED_RULE)
def produce_uncounted(ctx: FindingContext) -> list[Finding]:
    """The uncounted ops holding at least UNCOUNTED_SHARE of the iteration (nothing without a model)."""
    return [] if ctx.model is None else list(uncounted(ctx.model))


@register("coverage", NOT_EXPLAINED, COMPILE_CANDIDATE, COMPILE_CANDIDATE_NHWC, NEAR_ROOF_RULE)
def produce(ctx: FindingContext) -> list[Finding]:
    """The verdicts on the groups the earlier findings leave uncovered (nothing without a model)."""
    return [] if ctx.model is None else list(cover(ctx.model, ctx.earlier))


__all__ = [
    "COMPILE_CANDIDATE",
    "COMPILE_CANDIDATE_NHWC",
    "CONV_TRY",
    "COVERED_SHARE",
    "COVER_SHARE",
    "CPU_NEXT",
    "GENERATED_FAMILIES",
    "LONG_OP_S",
    "NEAR_ROOF",
    "NEAR_ROOF_RULE",
    "NEXT_SECTIONS",
    "NHWC_FAMILIES",
    "NOT_EXPLAINED",
    "UNCOUNTED_RULE",
    "UNCOUNTED_SHARE",
    "cover",
    "generated",
    "groups",
    "nchw_image",
    "near_roof",
    "not_explained",
    "produce",
    "produce_uncounted",
    "uncounted",
]
