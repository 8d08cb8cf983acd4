"""A diagnosed model as the rules see it: :class:`ModelContext` (placed ops, their summary, the timing, the device,
and the patterns found in the ops), :class:`ModelFinding`, and the helpers the rule families share.

The patterns several rules read are found once here: Python loops over a time axis (:func:`find_loops`),
written-out attention (:func:`find_attention`), element-wise chains (:func:`find_chains`) and written-out norms,
softmax and activations (:func:`find_fusions`). The rules themselves live by family in
:mod:`roofline.findings.rules` (launch, fusion, matmul, layout, occupancy), each declared once in the registry
(:mod:`roofline.findings.registry`); docs/diagnose.md's rule table is generated from it.

Every finding names the bottleneck, the evidence (numbers), the property (associativity, separability, locality,
sparsity, redundancy, symmetry), the technique and an upper bound on the gain that the roofline allows: the best
time is ``floor_s``, the roofline time (launch floors included where launches remain) of the ops after the
technique (:func:`roofline.findings.base.bounded`). :func:`model_finding` builds one.

Findings concerning less than MIN_FINDING_SHARE of the iteration are dropped (the registry's model stage).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from pydantic import Field

from roofline.device import Device
from roofline.findings import patterns, structure
from roofline.findings.base import Finding, labelled
from roofline.findings.patterns import MAX_PERIOD, MIN_STEPS, Carried, Dataflow, Fusion, max_numel
from roofline.findings.shapes import gemm_dims
from roofline.findings.shapes import op_name as _name
from roofline.properties import Property
from roofline.report.aggregate import aggregate_points, iteration_summary
from roofline.report.records import Timing
from roofline.report.rows import (
    Aggregates,
    IterationSummary,
    OpPoint,
    Placed,
    UncountedOp,
    numel,
    sources_text,
)

SHORT_FACTOR = 4.0  # an op doing less than one launch floor of work and taking at most this many floors is short
SMALL_OP_FACTOR = 20.0  # without producers, a repeated run is a loop when its mean op is at most this many floors
MIN_CHAIN = 3  # element-wise/norm ops in a row that make a chain
MIN_KEYS = 16  # keys of a scores tensor that make a written-out attention
GATHER_DEPTH = 8  # ops looked ahead for the softmax and the second matmul of an attention
FAR_BELOW = 0.5  # an op below this share of its roof (or of DRAM) is far below it
MIN_FINDING_SHARE = 0.01  # findings concerning less than this share of the iteration are dropped


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


def find_attention(points: Sequence[OpPoint], flow: Dataflow | None = None) -> list[Attention]:
    """matmul -> softmax -> matmul where the softmax tensor is the first matmul's output (S_q x S_k per head): the
    ops in a row, or, where producers are recorded, connected by their tensors with the softmax written out and a
    mask built in the call (roofline.findings.structure.softmax_path)."""
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
    return sorted([*found, *_attention_by_dataflow(fw, used, flow or Dataflow(points))], key=lambda a: a.first)


def _attention_by_dataflow(fw: Sequence[OpPoint], used: set[int], flow: Dataflow) -> list[Attention]:
    found: list[Attention] = []
    for first in fw:
        if first.index in used or gemm_dims(first) is None or not first.output_shapes:
            continue
        if not patterns.dataflow_known(first):
            continue
        scores = max(first.output_shapes, key=numel)
        if len(scores) < 2 or scores[-1] < MIN_KEYS:
            continue
        path = structure.softmax_path(first.index, numel(scores), scores[-1], flow)
        if path is None or used & {*path.ops, *path.mask, path.second}:
            continue
        core = {first.index, *path.ops, *path.mask, path.second}
        views = {
            p.index
            for p in fw
            if p.math == "none" and first.index < p.index < path.second and flow.source(p.index) in core
        }
        members = tuple(sorted(core | views))
        used.update(members)
        found.append(Attention(members, first.index, path.softmax, path.second, tuple(scores)))
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
        size = max_numel(p)
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
    uncounted: tuple[UncountedOp, ...] = ()  # the ops with no cost, grouped by op (their time is not in the points)

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
        attention = tuple(find_attention(points, flow))
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
            uncounted=tuple(placed.uncounted if placed is not None else uncounted),
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


# ------------------------------------------------------------------------------------------- helpers


def where_of(points: Sequence[OpPoint], limit: int = 3) -> str:
    modules = list(dict.fromkeys(p.module or "(model)" for p in points))
    text = ", ".join(modules[:limit])
    if len(modules) > limit:
        text += f" and {len(modules) - limit} more"
    return text


def with_sources(where: str, points: Sequence[OpPoint]) -> str:
    """``where`` and the places in the user's code of ``points`` (their stored sources): 'blocks.0.mlp at
    model.py:42' (relative to the working directory: roofline.report.rows.source_text); ``where`` alone when
    none is known."""
    at = sources_text(p.source for p in points)
    return f"{where} at {at}" if at and where else at or where


def ops_text(ops: Sequence[str], limit: int = 6) -> str:
    names = [_name(op) for op in ops]
    text = ", ".join(names[:limit])
    if len(names) > limit:
        text += f", ... ({len(names)} ops)"
    return text


def dominant_bound(points: Sequence[OpPoint]) -> str:
    share: dict[str, float] = {}
    for p in points:
        share[p.bound] = share.get(p.bound, 0.0) + p.time_s
    bound = max(share, key=lambda b: share[b]) if share else "memory"
    return "launch" if bound == "none" else bound


class Declared(Protocol):
    """What a finding takes from its rule's declaration (roofline.findings.registry.Rule): its id and properties."""

    @property
    def id(self) -> str: ...

    @property
    def properties(self) -> tuple[Property, ...]: ...

    @property
    def change(self) -> str: ...


def model_finding(
    ctx: ModelContext,
    rule: Declared,
    technique: str,
    evidence: str,
    time_s: float,
    bound: tuple[float | None, float | None],
    points: Sequence[OpPoint],
    *,
    bottleneck: str | None = None,
    where: str | None = None,
) -> ModelFinding:
    """A finding of ``rule`` (its id and properties) on ``points``. ``bound``: (best time, floor) from
    :func:`roofline.findings.base.bounded` (or ``at_floor``)."""
    best, floor = bound
    return ModelFinding(
        rule=rule.id,
        bottleneck=bottleneck or dominant_bound(points),
        properties=[p.value for p in rule.properties],
        technique=labelled(technique, rule.change),
        change=rule.change,
        evidence=evidence,
        time_s=time_s,
        best_time_s=best,
        floor_s=floor,
        where=with_sources(where_of(points) if where is None else where, points),
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


def tiny(p: OpPoint, device: Device) -> bool:
    """Less roofline work than one launch floor: overhead-bound whatever its layout, dtype or shape."""
    return p.bound == "launch" or p.roof_time_s < max(p.launch_floor_s, device.launch_floor_s)


def ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def percent(value: float) -> str:
    return f"{100 * value:.0f}%" if value >= 0.1 else f"{100 * value:.1f}%"


T = TypeVar("T")


def grouped(items: Iterable[tuple[Any, T]]) -> list[list[T]]:
    """Patterns grouped by their op signature sequence (the same chain in every layer: one finding)."""
    by_key: dict[Any, list[T]] = {}
    for key, members in items:
        by_key.setdefault(key, []).append(members)
    return list(by_key.values())


def signature_of(points: Sequence[OpPoint]) -> tuple[Any, ...]:
    return tuple((p.signature(), p.phase) for p in points)


# ------------------------------------------------------------------------------------------- compiled models


def is_compiled(ctx: ModelContext) -> bool:
    """The timed model runs through torch.compile (roofline.diagnose.loader.is_compiled): its rules never name
    torch.compile as the technique, and skip ops it already fused."""
    return bool(getattr(ctx.timing, "compiled", False))


def already_fused(points: Sequence[OpPoint]) -> bool:
    """Some of ``points`` ran inside a compiled model's fused kernel: fusing them is done."""
    return any(p.fused_kernel for p in points)


#: what a compiled model's ops that still run one kernel each are told (instead of "use torch.compile")
COMPILED_UNFUSED = (
    "the model is compiled but these ops ran unfused: find the graph break or the op inductor falls back on "
    "(torch._dynamo.explain(model)(*inputs), TORCH_LOGS=graph_breaks) and remove it"
)


__all__ = [
    "COMPILED_UNFUSED",
    "FAR_BELOW",
    "MAX_PERIOD",
    "MIN_FINDING_SHARE",
    "MIN_STEPS",
    "Attention",
    "Chain",
    "Declared",
    "Loop",
    "ModelContext",
    "ModelFinding",
    "already_fused",
    "dominant_bound",
    "find_attention",
    "find_chains",
    "find_fusions",
    "find_loops",
    "grouped",
    "is_compiled",
    "is_short",
    "max_numel",
    "model_finding",
    "ops_text",
    "percent",
    "ratio",
    "signature_of",
    "tiny",
    "where_of",
    "with_sources",
]
