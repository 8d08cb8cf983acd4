"""Diagnosis of a placed model: ordered rules, each a small pure function of the :class:`ModelContext` returning
findings, ranked by the time they could save.

Every finding names the bottleneck, the evidence (numbers), the property (associativity, separability, locality,
sparsity, redundancy, symmetry), the technique and an upper bound on the gain that the roofline allows: the best
time is ``floor_s``, the roofline time (launch floors included where launches remain) of the ops after the
technique -- fewer bytes for a fusion, a higher roof for TF32, fewer launches for a CUDA graph, the ops' own
roofline for a layout or shape fix -- which every finding records (:func:`roofline.findings.base.bounded`).
Findings extend :class:`roofline.findings.base.Finding`.

Rules and their thresholds (module constants below; docs/diagnose.md has the table):

- launch-bound: >= MIN_LAUNCH_OPS short ops (outside detected loops), at least LAUNCH_SHARE of the ops doing work,
  or on a GPU >= MIN_LAUNCH_OPS kernels with the GPU idle for at least IDLE_SHARE of the span. Short: bound
  'launch' (within LAUNCH_FACTOR of the launch floor), or a roofline time below one launch floor and a measured
  time within SHORT_FACTOR of it (a CPU op's dispatch, under the profiler, takes a few floors);
- sequential-loop: the same op sequence (op + input shapes + module) repeating >= MIN_STEPS times in a row, each
  step reading the step before's output where producers are recorded (a recurrence, whatever the durations);
  without producers, the ops small (mean time <= SMALL_OP_FACTOR x the per-op launch floor);
- elementwise-chain: >= MIN_CHAIN consecutive element-wise/norm ops on the same number of elements (outside loops
  and fusion groups), naming the fused op the chain computes;
- fused-op / fusion-across-reduction: element-wise ops and reductions connected by producers
  (roofline.findings.patterns.fusion_groups): a norm, softmax or activation written out, or another group;
- kv-cache-cat: a cache grown by cat/stack (patterns.kv_cache_growth);
- activation-matmul: memory-bound matmuls whose larger operand is an activation, not a parameter;
- cheaper-algorithm: torch.diag(a) @ b (patterns.diag_matmuls);
- conv-layout: NCHW convolutions where NHWC is preferred (bf16/fp16 on a GPU, the CPU), or layout copies around
  them (patterns.conv_layouts);
- naive-attention: matmul -> softmax -> matmul on a scores tensor of >= MIN_KEYS keys;
- memory-bound-gemv: memory-bound matmuls whose largest operand is >= WEIGHT_SHARE of their bytes (and a parameter,
  where recorded);
- fp32-matmul: fp32 matmuls on a device with TF32 tensor cores (not those running faster than the fp32 roof);
- compute-bound: compute-bound matmuls at efficiency >= NEAR_ROOF;
- awkward-shapes: compute-bound matmuls at efficiency < FAR_BELOW with a dim >= ALIGN not a multiple of ALIGN,
  or losing a partial wave of tiles (roofline.findings.base's tiles);
- non-contiguous: memory-bound element-wise ops on strided inputs at < FAR_BELOW of the DRAM bandwidth;
- under-filled-gpu: ops (groups of identical ops) taking >= UNDERFILL_SHARE of the iteration whose evidence
  bound class (roofline.findings.bounds) is 'parallelism'; bound: their roofline time + launch floors.

The matmul, layout and contiguity rules leave out ops whose roofline time is below one launch floor
(overhead-bound: the launch rule's).
Findings concerning less than MIN_FINDING_SHARE of the iteration are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any, TypeVar

from pydantic import Field

from roofline.device import Device
from roofline.findings import patterns
from roofline.findings.base import TILE_M, TILE_N, Finding, at_floor, bounded, rank, trimmed_waves, wave_times
from roofline.findings.patterns import MAX_PERIOD, MIN_STEPS, Carried, Dataflow, Fusion
from roofline.findings.shapes import ALIGN, GemmDims, gemm_dims, off_grid
from roofline.findings.shapes import op_name as _name
from roofline.ironlaw import memory_time, min_time, roofline_time
from roofline.properties import Property
from roofline.report.aggregate import aggregate_points, iteration_summary
from roofline.report.records import Timing
from roofline.report.rows import (
    Aggregates,
    IterationSummary,
    OpPoint,
    Placed,
    UncountedOp,
    bits_of,
    input_bytes,
    numel,
    output_bytes,
    tensor_bytes,
)
from roofline.units import format_bytes, format_intensity, format_rate, format_time

MIN_LAUNCH_OPS = 16
SHORT_FACTOR = 4.0  # an op doing less than one launch floor of work and taking at most this many floors is short
LAUNCH_SHARE = 0.5
IDLE_SHARE = 0.5
BUSY_GPU_IDLE = 0.2  # a GPU idle less than this share of the span keeps up with its launches: not launch-bound
SMALL_OP_FACTOR = 20.0
MIN_CHAIN = 3
MIN_KEYS = 16
WEIGHT_SHARE = 0.5
NEAR_ROOF = 0.7
FAR_BELOW = 0.5
TF32_SUSPECT = 1.2  # an fp32 matmul this far above the fp32 roof already runs on TF32 tensor cores
MIN_FINDING_SHARE = 0.01
GATHER_DEPTH = 8  # ops looked ahead for the softmax and the second matmul of an attention
QUANT_BITS = 4  # weight-only quantisation bound of the GEMV finding (int4)
UNDERFILL_SHARE = 0.05  # an op (group) taking at least this share of the iteration with the GPU not filled
NHWC_DTYPES = frozenset({"bf16", "fp16"})  # dtypes whose cuDNN convolutions run NHWC on tensor cores


class ModelFinding(Finding):
    """A finding about some ops of a model: where they are and which they are."""

    where: str = ""  # module path(s) and ops it concerns
    ops: list[int] = Field(default_factory=list)  # OpPoint indices it concerns
    share: float = 0.0  # of the iteration (time_s / max(op time, wall))


# ------------------------------------------------------------------------------------------- patterns


@dataclass(frozen=True)
class Loop:
    """The same op sequence repeated ``steps`` times in a row inside one module: one step = ``period`` ops."""

    module: str
    module_type: str
    phase: str
    period: int
    steps: int
    indices: tuple[int, ...]  # every op of the loop (steps x period), in order
    ops: tuple[str, ...]  # one step's op names
    carried: Carried | None = None  # whether step t consumes step t-1's output (None: not looked at)


@dataclass(frozen=True)
class Chain:
    """Consecutive element-wise/norm ops on the same number of elements."""

    indices: tuple[int, ...]
    numel: int


@dataclass(frozen=True)
class Attention:
    """matmul -> (scale, mask) -> softmax -> (dropout) -> matmul over a materialised scores tensor."""

    indices: tuple[int, ...]  # first matmul .. second matmul, the ops in between that belong to it
    first: int
    softmax: int
    second: int
    scores_shape: tuple[int, ...]


def _max_numel(point: OpPoint) -> int:
    return max((numel(s) for s in [*point.input_shapes, *point.output_shapes]), default=0)


def _out_numel(point: OpPoint) -> int:
    return max((numel(s) for s in point.output_shapes), default=0)


def _common_module(modules: Iterable[str]) -> str:
    parts = [m.split(".") if m else [] for m in modules]
    common: list[str] = []
    for names in zip(*parts, strict=False):
        if len(set(names)) != 1:
            break
        common.append(names[0])
    return ".".join(common)


def find_loops(points: Sequence[OpPoint], device: Device, device_kind: str, flow: Dataflow | None = None) -> list[Loop]:
    """Python loops over a time axis: per phase, runs of ops (op + input shapes + module, views left out) where one
    block of <= MAX_PERIOD ops repeats >= MIN_STEPS times in a row (roofline.findings.patterns.repeats). Where the
    counting pass recorded the producers of the ops' inputs, a run is a loop when its steps form a recurrence --
    step t consumes an output of step t-1 (patterns.carried), whatever the ops' durations -- and not when its
    steps are independent; without producers (older reports), when its ops are small (mean time <=
    SMALL_OP_FACTOR x the per-op launch floor). The loop's module is the innermost one holding all its ops.
    Layers of a stack are different modules (layers.0, layers.1), so a stack is not a loop; a loop over a shared
    module is."""
    flow = flow or Dataflow(points)
    loops = []
    for phase in dict.fromkeys(p.phase for p in points):
        members = [p for p in points if p.math != "none" and p.phase == phase]
        ids: dict[Any, int] = {}
        seq = [ids.setdefault((p.signature(), p.module), len(ids)) for p in members]
        for start, period, steps in patterns.repeats(seq):
            loop_points = members[start : start + steps * period]
            link = patterns.carried(loop_points, period, steps, flow)
            if link.known and not link.recurrent:
                continue
            if not link.known:
                cpu_floor = device.launch_floor_s if device_kind == "cpu" else 0.0
                per_op = [max(p.launch_floor_s, cpu_floor) for p in loop_points]
                mean_floor = sum(per_op) / len(per_op)
                mean_time = sum(p.time_s for p in loop_points) / len(loop_points)
                if mean_floor > 0 and mean_time > SMALL_OP_FACTOR * mean_floor:
                    continue
            step = loop_points[:period]
            module = _common_module(p.module for p in step)
            module_type = next((p.module_type for p in step if p.module == module), "")
            loops.append(
                Loop(
                    module=module,
                    module_type=module_type,
                    phase=phase,
                    period=period,
                    steps=steps,
                    indices=tuple(p.index for p in loop_points),
                    ops=tuple(p.op for p in step),
                    carried=link,
                )
            )
    return sorted(loops, key=lambda loop: loop.indices[0])


def find_attention(points: Sequence[OpPoint]) -> list[Attention]:
    """matmul -> softmax -> matmul where the softmax tensor is the first matmul's output (S_q x S_k per head)."""
    fw = [p for p in points if p.phase == "forward"]
    found: list[Attention] = []
    used: set[int] = set()
    for i, first in enumerate(fw):
        dims = gemm_dims(first)
        if dims is None or first.index in used or not first.output_shapes:
            continue
        scores = max(first.output_shapes, key=numel)
        if len(scores) < 2 or scores[-1] < MIN_KEYS:
            continue
        size, keys = numel(scores), scores[-1]
        soft = None
        for j in range(i + 1, min(i + 1 + GATHER_DEPTH, len(fw))):
            p = fw[j]
            if p.math == "tensor":
                break
            if "softmax" in _name(p.op) and p.input_shapes and numel(p.input_shapes[0]) == size:
                if p.input_shapes[0][-1] == keys:
                    soft = j
                break
        if soft is None:
            continue
        second = None
        for j in range(soft + 1, min(soft + 1 + GATHER_DEPTH, len(fw))):
            p = fw[j]
            if p.math == "tensor":
                d = gemm_dims(p)
                if d is not None and numel(p.input_shapes[d.a]) == size and p.input_shapes[d.a][-1] == keys:
                    second = j
                break
            if "softmax" in _name(p.op):
                break
        if second is None:
            continue
        members = tuple(p.index for p in fw[i : second + 1])
        used.update(members)
        found.append(Attention(members, first.index, fw[soft].index, fw[second].index, tuple(scores)))
    return found


def find_chains(points: Sequence[OpPoint], exclude: Iterable[int] = ()) -> list[Chain]:
    """Runs of >= MIN_CHAIN consecutive element-wise/norm ('vector') ops on the same number of elements (views
    between them do not break a run; any other op does, as does a gap in the op order: an uncounted op)."""
    excluded = set(exclude)
    chains: list[Chain] = []
    current: list[OpPoint] = []
    numel = 0
    last_index: int | None = None

    def flush() -> None:
        if len(current) >= MIN_CHAIN:
            chains.append(Chain(tuple(p.index for p in current), numel))
        current.clear()

    for p in sorted(points, key=lambda q: q.index):
        gap = last_index is not None and p.index != last_index + 1
        last_index = p.index
        if gap:
            flush()
        if p.math == "none":
            continue
        if p.math != "vector" or p.index in excluded:
            flush()
            continue
        size = _max_numel(p)
        if current and (size != numel or p.phase != current[-1].phase):
            flush()
        if not current:
            numel = size
        current.append(p)
        if _out_numel(p) < numel:  # a reduction ends the run
            flush()
    flush()
    return chains


def find_fusions(
    points: Sequence[OpPoint],
    loops: Iterable[Loop] = (),
    attention: Iterable[Attention] = (),
    flow: Dataflow | None = None,
) -> list[Fusion]:
    """Written-out norms, softmax and activations (roofline.findings.patterns.fusion_groups) outside loops and
    attention blocks, except those lying inside one element-wise chain (find_chains): the chain rule has them."""
    exclude = {i for loop in loops for i in loop.indices} | {i for a in attention for i in a.indices}
    chains = [set(c.indices) for c in find_chains(points, exclude)]
    groups = patterns.fusion_groups(points, exclude, flow)
    return [g for g in groups if not any(set(g.indices) <= c for c in chains)]


# ------------------------------------------------------------------------------------------- context


@dataclass(frozen=True)
class ModelContext:
    """A placed model's ops, their aggregates and summary, the timing, the device, and the patterns found in the
    ops (loops, attention blocks) that several rules read."""

    points: tuple[OpPoint, ...]
    aggregates: Aggregates
    summary: IterationSummary
    timing: Timing
    device: Device
    loops: tuple[Loop, ...] = ()
    attention: tuple[Attention, ...] = ()
    by_index: dict[int, OpPoint] = field(default_factory=dict)
    fusions: tuple[Fusion, ...] = ()  # written-out norms, softmax, activations across reductions and broadcasts
    flow: Dataflow | None = None

    @classmethod
    def of(
        cls,
        points: Sequence[OpPoint],
        device: Device,
        timing: Timing,
        *,
        uncounted: Sequence[UncountedOp] = (),
        placed: Placed | None = None,
    ) -> ModelContext:
        """The context of placed ops (from :func:`roofline.diagnose.place.place`, or points built by hand)."""
        summary = placed.summary if placed is not None else iteration_summary(points, uncounted, timing, device)
        aggregates = placed.aggregates if placed is not None else aggregate_points(points, summary.op_time_s)
        flow = Dataflow(points)
        loops = tuple(find_loops(points, device, summary.device_kind, flow))
        attention = tuple(find_attention(points))
        return cls(
            points=tuple(points),
            aggregates=aggregates,
            summary=summary,
            timing=timing,
            device=device,
            loops=loops,
            attention=attention,
            by_index={p.index: p for p in points},
            fusions=tuple(find_fusions(points, loops, attention, flow)),
            flow=flow,
        )

    @property
    def total_time_s(self) -> float:
        """The iteration: the larger of the summed op time and the wall time."""
        return self.summary.iteration_s

    def work(self) -> list[OpPoint]:
        return [p for p in self.points if p.math != "none"]

    def loop_indices(self) -> set[int]:
        return {i for loop in self.loops for i in loop.indices}

    def attention_indices(self) -> set[int]:
        return {i for a in self.attention for i in a.indices}

    def fusion_indices(self) -> set[int]:
        return {i for f in self.fusions for i in f.indices}

    def dataflow(self) -> Dataflow:
        return self.flow if self.flow is not None else Dataflow(self.points)

    def wall_time_of(self, points: Sequence[OpPoint]) -> float:
        """The iteration time these ops account for: their own time plus their share of the gaps between ops
        (the iteration's time not inside any op: Python, dispatch, GPU idle), shared out by op count."""
        work = self.work()
        gaps = max(self.total_time_s - self.summary.op_time_s, 0.0)
        own = sum(p.time_s for p in points)
        doing = sum(1 for p in points if p.math != "none")
        return own + (gaps * doing / len(work) if work else 0.0)

    def one_launch_s(self) -> float:
        """The floor of one fused kernel (GPU) or one op dispatch (CPU)."""
        return self.device.launch_floor_s


Rule = Callable[[ModelContext], "ModelFinding | list[ModelFinding] | None"]


# ------------------------------------------------------------------------------------------- helpers


def _where(points: Sequence[OpPoint], limit: int = 3) -> str:
    modules = list(dict.fromkeys(p.module or "(model)" for p in points))
    text = ", ".join(modules[:limit])
    if len(modules) > limit:
        text += f" and {len(modules) - limit} more"
    return text


def _ops_text(ops: Sequence[str], limit: int = 6) -> str:
    names = [_name(op) for op in ops]
    text = ", ".join(names[:limit])
    if len(names) > limit:
        text += f", ... ({len(names)} ops)"
    return text


def _dominant_bound(points: Sequence[OpPoint]) -> str:
    share: dict[str, float] = {}
    for p in points:
        share[p.bound] = share.get(p.bound, 0.0) + p.time_s
    bound = max(share, key=lambda b: share[b]) if share else "memory"
    return "launch" if bound == "none" else bound


def _finding(
    ctx: ModelContext,
    rule: str,
    props: Sequence[Property],
    technique: str,
    evidence: str,
    time_s: float,
    bound: tuple[float | None, float | None],
    points: Sequence[OpPoint],
    *,
    bottleneck: str | None = None,
    where: str | None = None,
) -> ModelFinding:
    """``bound``: (best time, floor) from :func:`roofline.findings.base.bounded` (or ``at_floor``)."""
    best, floor = bound
    return ModelFinding(
        rule=rule,
        bottleneck=bottleneck or _dominant_bound(points),
        properties=[p.value for p in props],
        technique=technique,
        evidence=evidence,
        time_s=time_s,
        best_time_s=best,
        floor_s=floor,
        where=_where(points) if where is None else where,
        ops=sorted(p.index for p in points),
        share=time_s / ctx.total_time_s if ctx.total_time_s > 0 else 0.0,
    )


def is_short(p: OpPoint, device: Device) -> bool:
    """An op whose time is launch/dispatch overhead: bound 'launch', or less than one launch floor of roofline work
    and at most SHORT_FACTOR floors of measured time."""
    if p.bound == "launch":
        return True
    floor = p.launch_floor_s
    return floor > 0 and p.roof_time_s <= floor and p.time_s <= SHORT_FACTOR * floor


def _tiny(p: OpPoint, device: Device) -> bool:
    """Less roofline work than one launch floor: overhead-bound whatever its layout, dtype or shape."""
    return p.bound == "launch" or p.roof_time_s < max(p.launch_floor_s, device.launch_floor_s)


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%" if value >= 0.1 else f"{100 * value:.1f}%"


T = TypeVar("T")


def _groups(items: Iterable[tuple[Any, T]]) -> list[list[T]]:
    """Patterns grouped by their op signature sequence (the same chain in every layer: one finding)."""
    grouped: dict[Any, list[T]] = {}
    for key, members in items:
        grouped.setdefault(key, []).append(members)
    return list(grouped.values())


def _signature(points: Sequence[OpPoint]) -> tuple[Any, ...]:
    return tuple((p.signature(), p.phase) for p in points)


# --------------------------------------------------------------------------------------------- rules


def is_compiled(ctx: ModelContext) -> bool:
    """The timed model runs through torch.compile (roofline.diagnose.loader.is_compiled): its rules never name
    torch.compile as the technique, and skip ops it already fused."""
    return bool(getattr(ctx.timing, "compiled", False))


def _already_fused(points: Sequence[OpPoint]) -> bool:
    """Some of ``points`` ran inside a compiled model's fused kernel: fusing them is done."""
    return any(p.fused_kernel for p in points)


#: what a compiled model's ops that still run one kernel each are told (instead of "use torch.compile")
COMPILED_UNFUSED = (
    "the model is compiled but these ops ran unfused: find the graph break or the op inductor falls back on "
    "(torch._dynamo.explain(model)(*inputs), TORCH_LOGS=graph_breaks) and remove it"
)


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
            f"{kernels} kernels; GPU idle {_percent(idle)} of the span between them (without the gaps, as a CUDA "
            f"graph replays them: {format_time(device_time)})"
        )
    elif s.host_overhead_share > 0:
        parts.append(f"{_percent(s.host_overhead_share)} of the wall time is spent outside the ops (Python, dispatch)")
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
    return _finding(
        ctx,
        "launch-bound",
        (Property.LOCALITY, Property.ASSOCIATIVITY),
        technique,
        "; ".join(parts),
        time_now,
        bound,
        timed,
        bottleneck="launch",
        where=f"{len(timed)} ops in {len({p.module for p in timed})} modules",
    )


def sequential_loop(ctx: ModelContext) -> list[ModelFinding]:
    """A Python loop over a time axis: the same small ops, step after step, in one module."""
    findings = []
    for loop in ctx.loops:
        pts = [ctx.by_index[i] for i in loop.indices]
        time_now = ctx.wall_time_of(pts)  # its ops and the gaps between them (Python stepping the loop)
        own = sum(p.time_s for p in pts)
        before = sum(p.roof_time_s + p.launch_floor_s for p in pts)
        step_floors = sum(p.launch_floor_s for p in pts) / loop.steps
        after = sum(p.roof_time_s for p in pts) + max(step_floors, ctx.one_launch_s())
        where = f"{loop.module or '(model)'} ({loop.module_type})" if loop.module_type else loop.module or "(model)"
        evidence = (
            f"{where} runs the same {loop.period} op{'s' if loop.period > 1 else ''} ({_ops_text(loop.ops)}) "
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
            "input projection) and fuse the step (torch.compile, cuDNN nn.RNN/LSTM/GRU)"
        )
        if is_compiled(ctx):
            technique = technique.replace("torch.compile, cuDNN", "the model is compiled: cuDNN")
        short = sum(1 for p in pts if is_short(p, ctx.device))
        findings.append(
            _finding(
                ctx,
                "sequential-loop",
                (Property.ASSOCIATIVITY,),
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


def elementwise_chain(ctx: ModelContext) -> list[ModelFinding]:
    """Consecutive element-wise/norm ops each reading and writing the whole tensor: fuse them."""
    chains = find_chains(ctx.points, ctx.attention_indices() | ctx.loop_indices() | ctx.fusion_indices())
    items = []
    for chain in chains:
        pts = [ctx.by_index[i] for i in chain.indices]
        if is_compiled(ctx) and _already_fused(pts):
            continue  # inductor fused them already
        items.append((_signature(pts), pts))
    findings = []
    bw = ctx.device.dram_bandwidth
    for group in _groups(items):
        first_chain = group[0]
        unfused = sum(p.bytes for p in first_chain)
        fused = min(input_bytes(first_chain[0]) + output_bytes(first_chain[-1]), unfused)
        compute = sum(p.compute_time_s for p in first_chain)
        before = sum(p.roof_time_s + p.launch_floor_s for p in first_chain)
        after = roofline_time(compute, memory_time(fused, bw)) + ctx.one_launch_s()
        all_pts = [p for chain_pts in group for p in chain_pts]
        time_now = sum(p.time_s for p in all_pts)
        numel = _max_numel(first_chain[0])
        count = f" x{len(group)} (the same chain {len(group)} times)" if len(group) > 1 else ""
        evidence = (
            f"{len(first_chain)} element-wise/norm ops in a row on {numel:,} elements "
            f"({_ops_text([p.op for p in first_chain])}){count}, each a round trip through memory: "
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
            _finding(
                ctx,
                "elementwise-chain",
                (Property.LOCALITY,),
                technique,
                evidence,
                time_now,
                bounded(time_now, before * len(group), after * len(group)),  # every chain of the group
                all_pts,
            )
        )
    return findings


def _attention_family(att: Attention, pts: Sequence[OpPoint]) -> tuple[Any, ...]:
    """What groups attentions into one finding: the same ops and ranks, and the same scores shape but for the key
    length (every layer of a model; every step of a decode loop whose KV cache grows by one token)."""
    return (tuple((p.op, p.phase, tuple(len(s) for s in p.input_shapes)) for p in pts), att.scores_shape[:-1])


def naive_attention(ctx: ModelContext) -> list[ModelFinding]:
    """Attention written as matmul -> softmax -> matmul: the S x S scores go to memory and back."""
    items = []
    for att in ctx.attention:
        pts = [ctx.by_index[i] for i in att.indices]
        items.append((_attention_family(att, pts), (att, pts)))
    findings = []
    bw = ctx.device.dram_bandwidth
    for group in _groups(items):
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
        technique = (
            "online softmax + tiling: F.scaled_dot_product_attention (FlashAttention / memory-efficient kernels) "
            "instead of matmul -> softmax -> matmul"
        )
        findings.append(
            _finding(
                ctx,
                "naive-attention",
                (Property.ASSOCIATIVITY, Property.LOCALITY),
                technique,
                evidence,
                time_now,
                bounded(time_now, before, after),  # every attention of the group
                all_pts,
            )
        )
    return findings


def memory_bound_gemv(ctx: ModelContext) -> ModelFinding | None:
    """Matmuls with few rows (decode, GEMV): the weight bytes dominate, the roofline says memory."""
    skip = ctx.attention_indices() | ctx.loop_indices()
    hits: list[tuple[OpPoint, GemmDims, int]] = []
    for p in ctx.work():
        if p.index in skip or p.roofline_bound != "memory" or _tiny(p, ctx.device):
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
    return _finding(
        ctx,
        "memory-bound-gemv",
        (Property.REDUNDANCY,),
        technique,
        evidence,
        time_now,
        bounded(time_now, before, after),
        pts,
        bottleneck="memory",
    )


def fp32_matmul(ctx: ModelContext) -> ModelFinding | None:
    """fp32 matmuls on a device with TF32 tensor cores."""
    c = ctx.device.compute
    if ("tf32", "tensor") not in c or not ctx.device.has_tensor_cores():
        return None
    candidates = [
        p
        for p in ctx.work()
        if p.math == "tensor" and p.dtype == "fp32" and p.roof.startswith("fp32") and not _tiny(p, ctx.device)
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
    return _finding(
        ctx, "fp32-matmul", (Property.REDUNDANCY,), technique, evidence, time_now, bound, pts, bottleneck="compute"
    )


def compute_bound(ctx: ModelContext) -> ModelFinding | None:
    """Compute-bound matmuls near their roof: only fewer FLOPs (or a higher roof) helps."""
    skip = ctx.attention_indices()
    pts = [
        p
        for p in ctx.work()
        if p.math == "tensor"
        and p.index not in skip
        and p.roofline_bound == "compute"
        and not _tiny(p, ctx.device)
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
        f"{len(pts)} compute-bound matmul{'s' if len(pts) > 1 else ''} at {_percent(_ratio(roof, time_now))} "
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
    return _finding(
        ctx,
        "compute-bound",
        (Property.SPARSITY, Property.SEPARABILITY, Property.SYMMETRY),
        technique,
        evidence,
        time_now,
        bound,
        pts,
        bottleneck="compute",
    )


def awkward_shapes(ctx: ModelContext) -> ModelFinding | None:
    """Compute-bound matmuls far below their roof with dims off the tile grid."""
    hits: list[tuple[OpPoint, float, str]] = []
    # NB: padding or trimming is a shape fix: the same work (M x N x K) is never done below its own roofline time
    for p in ctx.work():
        if p.roofline_bound != "compute" or _tiny(p, ctx.device) or p.efficiency is None or p.efficiency >= FAR_BELOW:
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
        f"{len(pts)} compute-bound matmul{'s' if len(pts) > 1 else ''} at {_percent(_ratio(roof, time_now))} "
        f"of the roof with dims off the {ALIGN}-multiple tile grid: {examples}"
    )
    if len(examples) > 240:
        evidence = evidence[:237] + "..."
    technique = f"pad (or trim) M, N, K to multiples of {ALIGN} (128 for large GEMMs) so whole tiles and waves are used"
    floor = sum(p.roof_time_s + p.launch_floor_s for p in pts)  # every op's best is at least this
    return _finding(
        ctx,
        "awkward-shapes",
        (Property.LOCALITY,),
        technique,
        evidence,
        time_now,
        (best if best < time_now else None, floor),
        pts,
        bottleneck="compute",
    )


def non_contiguous(ctx: ModelContext) -> ModelFinding | None:
    """Memory-bound element-wise ops on strided/transposed inputs, far below the DRAM bandwidth."""
    bw = ctx.device.dram_bandwidth
    pts = [
        p
        for p in ctx.work()
        if p.math == "vector"
        and p.non_contiguous
        and p.roofline_bound == "memory"
        and not _tiny(p, ctx.device)
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
        f"{format_rate(achieved, 'B/s')} ({_percent(achieved / bw)} of DRAM {format_rate(bw, 'B/s')}), e.g. "
        f"{_name(example.op)} on {shapes} in {example.module or '(model)'}"
    )
    technique = (
        "keep tensors contiguous in the layout the consumer reads (transpose once, .contiguous() before a chain, "
        "channels_last for convolutions), so accesses are coalesced"
    )
    return _finding(
        ctx,
        "non-contiguous",
        (Property.LOCALITY,),
        technique,
        evidence,
        time_now,
        at_floor(time_now, best),
        pts,
        bottleneck="memory",
    )


def under_filled(ctx: ModelContext) -> list[ModelFinding]:
    """Ops (or groups of identical ops) taking at least UNDERFILL_SHARE of the iteration whose evidence bound class
    is 'parallelism' (roofline.findings.bounds): too few thread blocks for the SMs, a partial last wave, or low
    occupancy. The bound on the gain is the ops' own roofline time plus their launch floors (every SM working
    at the roof), never less."""
    items = [((p.signature(), p.phase), [p]) for p in ctx.work() if p.limiter == "parallelism" and p.timed]
    findings = []
    for group in _groups(items):
        pts = [p for members in group for p in members]
        time_now = sum(p.time_s for p in pts)
        if ctx.total_time_s <= 0 or time_now < UNDERFILL_SHARE * ctx.total_time_s:
            continue
        floor = sum(p.roof_time_s + p.launch_floor_s for p in pts)
        example = max(pts, key=lambda p: p.time_s)
        shapes = ", ".join("x".join(str(d) for d in s) for s in example.input_shapes)
        count = f" x{len(pts)}" if len(pts) > 1 else ""
        evidence = (
            f"{_name(example.op)} [{shapes}]{count} at {_percent(_ratio(sum(p.roof_time_s for p in pts), time_now))} "
            f"of its roofline, the GPU not filled: {example.limiter_evidence}; every SM at the roof: "
            f"{format_time(floor)} (roofline time + launch floor) vs {format_time(time_now)}"
        )
        technique = (
            "split the reduction across more blocks (split-K / a two-pass reduction), a kernel that parallelises "
            "the other axis, or torch.compile (generates a kernel shaped for these sizes)"
        )
        if is_compiled(ctx):
            technique = (
                "split the reduction across more blocks (split-K / a two-pass reduction) or a kernel that "
                "parallelises the other axis (the model is compiled: inductor's kernel for these sizes leaves SMs "
                "idle)"
            )
        findings.append(
            _finding(
                ctx,
                "under-filled-gpu",
                (Property.ASSOCIATIVITY, Property.LOCALITY),
                technique,
                evidence,
                time_now,
                at_floor(time_now, floor),
                pts,
                bottleneck="parallelism",
            )
        )
    return findings


def written_out_fusion(ctx: ModelContext) -> list[ModelFinding]:
    """Norms, softmax and activations written out: element-wise ops and reductions connected by producers
    (roofline.findings.patterns.fusion_groups), each op a round trip through memory; the fused op, or torch.compile
    across the reduction."""
    items = []
    for fusion in ctx.fusions:
        pts = [ctx.by_index[i] for i in fusion.indices]
        if is_compiled(ctx) and _already_fused(pts):
            continue  # inductor fused them already
        items.append(((_signature(pts), fusion.kind), (fusion, pts)))
    findings = []
    bw = ctx.device.dram_bandwidth
    for group in _groups(items):
        fusion, pts = group[0]
        compute = sum(p.compute_time_s for p in pts)
        before = sum(p.roof_time_s + p.launch_floor_s for p in pts) * len(group)
        after = (roofline_time(compute, memory_time(fusion.fused_bytes, bw)) + ctx.one_launch_s()) * len(group)
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
            f"{len(pts)} ops written out ({_ops_text([p.op for p in pts], 8)}){what}, connected by their tensors "
            f"across {' and '.join(across) or 'their inputs'}, each a round trip through memory: "
            f"{format_bytes(fusion.unfused_bytes)} moved vs {format_bytes(fusion.fused_bytes)} fused (external inputs "
            f"read once, outputs written once: {ratio:.3g}x fewer bytes){count}; roofline "
            f"{format_time(before / len(group))} -> {format_time(after / len(group))} per group"
        )
        if fusion.fused_op:
            rule = "fused-op"
            technique = f"use {fusion.fused_op} (one fused kernel) instead of the written-out ops, or torch.compile"
            if is_compiled(ctx):
                technique = f"use {fusion.fused_op} instead of the written-out ops; {COMPILED_UNFUSED}"
        elif is_compiled(ctx):
            rule = "fusion-across-reduction"
            technique = COMPILED_UNFUSED
        else:
            rule = "fusion-across-reduction"
            technique = (
                "fuse the ops across the reduction/broadcast into one kernel (torch.compile, a Triton kernel): the "
                "inputs read once, the result written once"
            )
        findings.append(
            _finding(
                ctx,
                rule,
                (Property.LOCALITY,),
                technique,
                evidence,
                time_now,
                bounded(time_now, before, after),
                all_pts,
            )
        )
    return findings


def kv_cache_cat(ctx: ModelContext) -> ModelFinding | None:
    """A cache grown by torch.cat/stack: every step copies the whole cache to append one slice."""
    growth = patterns.kv_cache_growth(ctx.work(), ctx.dataflow())
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
    return _finding(
        ctx,
        "kv-cache-cat",
        (Property.REDUNDANCY,),
        technique,
        evidence,
        time_now,
        bounded(time_now, before, after),
        pts,
        bottleneck="memory",
    )


def activation_matmul(ctx: ModelContext) -> ModelFinding | None:
    """Memory-bound (skinny or batched) matmuls of two activations: no weights to batch or quantize."""
    skip = ctx.attention_indices() | ctx.loop_indices()
    skip |= {d.matmul for d in patterns.diag_matmuls(ctx.points, ctx.dataflow())}
    hits: list[tuple[OpPoint, GemmDims]] = []
    for p in ctx.work():
        if p.index in skip or p.roofline_bound != "memory" or _tiny(p, ctx.device):
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
        f"{_percent(_ratio(roof, time_now))} of the roofline"
    )
    technique = (
        "fuse the product with the op that produces or consumes its large operand (torch.compile; q @ K^T -> "
        "softmax -> @ V: F.scaled_dot_product_attention), batch independent products into one bmm, or restructure "
        "the math (a diagonal or low-rank operand: a broadcasted multiply or two thin products)"
    )
    if is_compiled(ctx):
        technique = technique.replace("(torch.compile; q @ K^T", "(q @ K^T")
    return _finding(
        ctx,
        "activation-matmul",
        (Property.LOCALITY, Property.ASSOCIATIVITY),
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
    return _finding(
        ctx,
        "cheaper-algorithm",
        (Property.SPARSITY,),
        technique,
        evidence,
        time_now,
        bounded(time_now, before, after),
        covered,
    )


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
        if _tiny(p, ctx.device) or (gpu and p.dtype not in NHWC_DTYPES):
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
        f"{_percent(_ratio(roof, conv_time))} of the roofline"
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
    return _finding(
        ctx,
        "conv-layout",
        (Property.LOCALITY,),
        technique,
        evidence,
        time_now,
        at_floor(time_now, best),
        pts,
        bottleneck="layout" if layout_s > 0 else None,
    )


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
    return _finding(
        ctx,
        "compile-blockers",
        (Property.LOCALITY,),
        "; ".join(techniques),
        "; ".join(parts),
        time_now,
        bound,
        points,
        bottleneck="launch",
        where=None if eager else "the compiled model",
    )


RULES: tuple[Rule, ...] = (
    compile_blockers,
    launch_bound,
    sequential_loop,
    elementwise_chain,
    written_out_fusion,
    naive_attention,
    kv_cache_cat,
    memory_bound_gemv,
    activation_matmul,
    cheaper_algorithm,
    fp32_matmul,
    compute_bound,
    awkward_shapes,
    conv_layout,
    non_contiguous,
    under_filled,
)


def diagnose(ctx: ModelContext, rules: Sequence[Rule] = RULES) -> list[ModelFinding]:
    """Every rule's findings, those concerning at least MIN_FINDING_SHARE of the iteration, largest possible
    saving first (savings equal to two significant digits keep the rule order)."""
    findings: list[ModelFinding] = []
    for rule in rules:
        result = rule(ctx)
        if result is None:
            continue
        findings += result if isinstance(result, list) else [result]
    return rank(f for f in findings if f.share >= MIN_FINDING_SHARE)


__all__ = [
    "MAX_PERIOD",
    "MIN_STEPS",
    "RULES",
    "Attention",
    "Chain",
    "Loop",
    "ModelContext",
    "ModelFinding",
    "Rule",
    "activation_matmul",
    "awkward_shapes",
    "cheaper_algorithm",
    "compute_bound",
    "conv_layout",
    "diagnose",
    "elementwise_chain",
    "find_attention",
    "find_chains",
    "find_fusions",
    "find_loops",
    "fp32_matmul",
    "is_short",
    "kv_cache_cat",
    "launch_bound",
    "memory_bound_gemv",
    "naive_attention",
    "non_contiguous",
    "sequential_loop",
    "under_filled",
    "written_out_fusion",
]
