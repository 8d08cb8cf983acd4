"""Dataflow patterns in a placed model's ops: what the structural rules of :mod:`roofline.findings.rules` read.

Pure: functions of :class:`~roofline.report.rows.OpPoint` values. The counting pass records, per tensor input of
an op, the op of the iteration that produced it (``input_producers``; None for model inputs, parameters, buffers,
constants) and whether it is a parameter or buffer (``input_params``); points of older reports have neither
(empty lists: unknown), and every pattern here then finds nothing or falls back (:func:`dataflow_known`).

- :class:`Dataflow`: producers seen through views (a view's producer is the producer of what it views) and the
  consumers of each op;
- :func:`repeats`: runs of a sequence repeating a block of <= MAX_PERIOD items >= MIN_STEPS times (the loops);
- :func:`carried`: whether each step of such a run consumes an output of the step before (a recurrence);
- :func:`fusion_groups`: element-wise and reduction ops connected by producers around a reduction or a
  ``x * f(x)`` diamond (a norm, a softmax, an activation written out), what fused op they match, and their bytes
  fused (external inputs read once, outputs written once);
- :func:`elementwise_recurrence`: a loop whose every op is element-wise on the same elements (one kernel runs
  every step); :func:`elementwise_pairs`: two element-wise ops in a row;
- :func:`repeated_selection`, :func:`sort_slices`: top-k written out (k maxima one by one; a sort sliced to k);
- :func:`all_pairs`: a tensor broadcast against itself into its N x N pairs and the ops on the pairs;
- :func:`softmax_path`: the ops between an attention's two matmuls (a softmax op or one written out, a mask built
  in the call);
- :func:`kv_cache_growth`: cat/stack ops copying a large cache from outside the iteration (or from the previous
  cat) to append a slice: a KV cache grown by concatenation;
- :func:`large_operand_is_param`: whether a matmul's larger operand is a parameter (weights) or an activation;
- :func:`diag_matmuls`: matmuls with an operand built by torch.diag (a broadcasted multiply written as an O(n^3)
  product);
- :func:`conv_layouts`: convolutions reading 4-D NCHW inputs, and the copies around them that convert layouts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from roofline.report.rows import OpPoint, numel, output_bytes, tensor_bytes

MIN_STEPS = 8
MAX_PERIOD = 64
CARRIED_SHARE = 0.5  # at least this share of a run's step transitions consume the step before: a recurrence
BACK_DEPTH = 2  # element-wise producers of a reduction pulled into its fusion group
MAX_GROUP = 16  # ops in one fusion group at most
KV_SHARE = 0.5  # the cache input of a cat is at least this share of its output
VIEW_DEPTH = 16  # views followed to find a producer

CAT_OPS = frozenset({"cat", "concat", "concatenate", "_cat"})
STACK_OPS = frozenset({"stack", "_stack"})
DIAG_OPS = frozenset({"diag", "diag_embed", "diagflat"})
CONV_OPS = frozenset(
    {
        "convolution",
        "_convolution",
        "conv1d",
        "conv2d",
        "conv3d",
        "cudnn_convolution",
        "mkldnn_convolution",
        "_conv_depthwise2d",
        "conv_depthwise2d",
        "thnn_conv2d",
        "_slow_conv2d_forward",
        "slow_conv_dilated2d",
        "miopen_convolution",
    }
)
LAYOUT_COPIES = frozenset({"clone", "_to_copy", "copy_", "contiguous", "to"})
# NB: data movement and creation ops are not element-wise math: a fusion group holds ops that do FLOPs
MOVEMENT = CAT_OPS | STACK_OPS | LAYOUT_COPIES | frozenset({"repeat", "index_select", "gather", "scatter"})


def op_name(op: str) -> str:
    """'aten::mean.dim' -> 'mean'."""
    return op.rsplit("::", 1)[-1].split(".", 1)[0]


def dataflow_known(point: OpPoint) -> bool:
    """Whether the counting pass recorded the producers of this op's tensor inputs (older reports did not)."""
    return len(point.input_producers) == len(point.input_shapes)


def max_numel(point: OpPoint) -> int:
    return max((numel(s) for s in [*point.input_shapes, *point.output_shapes]), default=0)


def out_numel(point: OpPoint) -> int:
    return max((numel(s) for s in point.output_shapes), default=0)


def in_numel(point: OpPoint) -> int:
    return max((numel(s) for s in point.input_shapes), default=0)


def is_reduction(point: OpPoint) -> bool:
    return point.math == "vector" and bool(point.output_shapes) and out_numel(point) < in_numel(point)


class Dataflow:
    """Producers (seen through views) and consumers of the ops of one iteration."""

    def __init__(self, points: Iterable[OpPoint]) -> None:
        self.by_index: dict[int, OpPoint] = {p.index: p for p in points}
        self.consumers: dict[int, list[int]] = {}
        for p in self.by_index.values():
            for s in dict.fromkeys(self.sources(p)):
                if s is not None:
                    self.consumers.setdefault(s, []).append(p.index)

    def source(self, index: int | None) -> int | None:
        """The op that produced a tensor, through the views between (a view's input is what it views)."""
        for _ in range(VIEW_DEPTH):
            p = self.by_index.get(index) if index is not None else None
            if p is None or p.math != "none" or not p.input_producers:
                return index
            index = p.input_producers[0]
        return index

    def sources(self, point: OpPoint) -> list[int | None]:
        """The producers of the point's tensor inputs (through views); [] when unknown."""
        return [self.source(i) for i in point.input_producers]

    def param(self, point: OpPoint, i: int) -> bool:
        return i < len(point.input_params) and point.input_params[i]


# ------------------------------------------------------------------------------------------- recurrences


def _best_run(seq: Sequence[int], lo: int, hi: int) -> tuple[int, int, int] | None:
    """(start, period, steps) of the run of seq[lo:hi] repeating a block of <= MAX_PERIOD items >= MIN_STEPS
    times that covers the most items (the shortest period on a tie)."""
    best: tuple[int, int, int, int] | None = None  # (coverage, -period, start, steps)
    for period in range(1, min(MAX_PERIOD, (hi - lo) // MIN_STEPS) + 1):
        run = 0
        for i in range(lo, hi - period + 1):
            if i < hi - period and seq[i] == seq[i + period]:
                run += 1
                continue
            if run:
                steps = run // period + 1
                candidate = (steps * period, -period, i - run, steps)
                if steps >= MIN_STEPS and (best is None or candidate[:2] > best[:2]):
                    best = candidate
            run = 0
    return None if best is None else (best[2], -best[1], best[3])


def repeats(seq: Sequence[int], lo: int = 0, hi: int | None = None) -> list[tuple[int, int, int]]:
    """Every run (start, period, steps) of ``seq`` where a block of <= MAX_PERIOD items repeats >= MIN_STEPS
    times in a row, largest coverage first then recursively left and right of it; in order of start."""
    out: list[tuple[int, int, int]] = []
    _runs(seq, lo, len(seq) if hi is None else hi, out)
    return sorted(out)


def _runs(seq: Sequence[int], lo: int, hi: int, out: list[tuple[int, int, int]]) -> None:
    found = _best_run(seq, lo, hi)
    if found is None:
        return
    start, period, steps = found
    _runs(seq, lo, start, out)
    out.append(found)
    _runs(seq, start + period * steps, hi, out)


@dataclass(frozen=True)
class Carried:
    """Whether the steps of a repeated run depend on each other: ``known`` False when producers were not
    recorded; ``links`` the step transitions where an op of step t consumes an output of step t-1;
    ``example`` one such (consumer, producer) pair."""

    known: bool
    links: int
    transitions: int
    example: tuple[int, int] | None = None

    @property
    def recurrent(self) -> bool:
        return self.known and self.transitions > 0 and self.links >= CARRIED_SHARE * self.transitions


def carried(points: Sequence[OpPoint], period: int, steps: int, flow: Dataflow) -> Carried:
    """Does step t (``points[t*period:(t+1)*period]``) consume an output of step t-1, for most t?"""
    if not points or not all(dataflow_known(p) for p in points):
        return Carried(False, 0, max(steps - 1, 0))
    links = 0
    example: tuple[int, int] | None = None
    previous: set[int] = set()
    for t in range(steps):
        step = points[t * period : (t + 1) * period]
        hit = None
        for p in step:
            for s in flow.sources(p):
                if s is not None and s in previous:
                    hit = (p.index, s)
                    break
            if hit:
                break
        if hit and t > 0:
            links += 1
            example = example or hit
        previous = {p.index for p in step}
    return Carried(True, links, steps - 1, example)


# ------------------------------------------------------------------------------------------- fusion

FUSED_OPS = {
    "rms_norm": "nn.RMSNorm / F.rms_norm",
    "layer_norm": "F.layer_norm (nn.LayerNorm)",
    "softmax": "torch.softmax (F.softmax)",
    "silu": "F.silu",
    "gelu": "F.gelu (approximate='tanh' for the tanh form)",
}


def fused_op(names: Iterable[str]) -> str | None:
    """The fused op a set of written-out element-wise/reduction ops computes ('rms_norm', 'layer_norm',
    'softmax', 'silu', 'gelu'), or None."""
    n = set(names)
    root = bool(n & {"sqrt", "rsqrt"})
    scale = bool(n & {"div", "mul", "reciprocal"})
    if (n & {"var", "var_mean", "std"}) or ({"mean", "sub"} <= n and root and scale):
        return "layer_norm"
    if "mean" in n and bool(n & {"pow", "mul", "square"}) and root and scale:
        return "rms_norm"
    if bool(n & {"amax", "max"}) and "exp" in n and "sum" in n and scale:
        return "softmax"
    if "erf" in n and "mul" in n:
        return "gelu"
    if "tanh" in n and "add" in n and bool(n & {"pow", "mul"}) and len(n) >= 3:
        return "gelu"
    if n == {"sigmoid", "mul"}:
        return "silu"
    return None


@dataclass(frozen=True)
class Fusion:
    """Element-wise and reduction ops connected by producers that one kernel could compute."""

    indices: tuple[int, ...]
    kind: str | None  # a key of FUSED_OPS, or None (torch.compile)
    unfused_bytes: int  # what the ops move now
    fused_bytes: int  # external inputs read once + outputs written once
    reductions: int
    broadcasts: int

    @property
    def fused_op(self) -> str | None:
        return FUSED_OPS.get(self.kind) if self.kind else None


def fusible(p: OpPoint) -> bool:
    return p.math == "vector" and p.flops > 0 and op_name(p.op) not in MOVEMENT and dataflow_known(p)


def external_key(p: OpPoint, i: int, source: int | None) -> tuple[Any, ...]:
    shape = tuple(p.input_shapes[i])
    if source is not None:
        return ("op", source, shape)
    if i < len(p.input_ids) and p.input_ids[i] is not None:  # the storage itself: exact
        return ("storage", p.input_ids[i], shape)
    param = i < len(p.input_params) and p.input_params[i]
    # NB: without input_ids (older reports), two distinct model inputs of the same shape read by one group would be
    # counted once (producers do not tell them apart); parameters of the same shape likewise
    return ("ext", shape, param)


@dataclass
class _Grower:
    flow: Dataflow
    blocked: set[int]
    phase: str
    full: int
    group: set[int] = field(default_factory=set)
    roots: set[tuple[Any, ...]] = field(default_factory=set)

    def eligible(self, index: int | None) -> bool:
        p = self.flow.by_index.get(index) if index is not None else None
        return (
            p is not None
            and index not in self.group
            and index not in self.blocked
            and p.phase == self.phase
            and fusible(p)
            and max_numel(p) <= self.full
        )

    def add(self, index: int) -> None:
        p = self.flow.by_index[index]
        self.group.add(index)
        for i, s in enumerate(self.flow.sources(p)):
            if s not in self.group:
                self.roots.add(external_key(p, i, s))

    def inside(self, p: OpPoint, i: int, s: int | None) -> bool:
        """An input the group already has: its own output, a root it reads, or a small parameter/constant."""
        if s is not None and s in self.group:
            return True
        key = external_key(p, i, s)
        if key in self.roots:
            return True
        return s is None and (self.flow.param(p, i) or numel(p.input_shapes[i]) < self.full)

    def grow_back(self, start: int) -> None:
        frontier = [start]
        for _ in range(BACK_DEPTH):
            nxt = []
            for index in frontier:
                for s in self.flow.sources(self.flow.by_index[index]):
                    if (
                        self.eligible(s)
                        and s is not None
                        and not is_reduction(self.flow.by_index[s])
                        and max_numel(self.flow.by_index[s]) == self.full
                    ):
                        nxt.append(s)
            for s in nxt:
                self.group.add(s)
            frontier = nxt
        for index in list(self.group):
            self.add(index)

    def grow_forward(self) -> None:
        changed = True
        while changed and len(self.group) < MAX_GROUP:
            changed = False
            for index in sorted(self.group):
                for c in self.flow.consumers.get(index, []):
                    if not self.eligible(c) or len(self.group) >= MAX_GROUP:
                        continue
                    cp = self.flow.by_index[c]
                    absorb: list[int] = []
                    ok = True
                    for i, s in enumerate(self.flow.sources(cp)):
                        if self.inside(cp, i, s):
                            continue
                        if self.eligible(s) and s is not None and self._sibling(self.flow.by_index[s]):
                            absorb.append(s)
                            continue
                        ok = False
                        break
                    if ok:
                        for s in [*absorb, c]:
                            self.add(s)
                        changed = True

    def _sibling(self, p: OpPoint) -> bool:
        """An op beside the group that reads only what the group reads (0.5 * x beside erf(x / sqrt 2))."""
        return all(self.inside(p, i, s) for i, s in enumerate(self.flow.sources(p)))


def _diamond(p: OpPoint, flow: Dataflow) -> bool:
    """x -> f(x) -> g(x, f(x)): a consumer of the op reads one of the op's own inputs too."""
    mine = {s for s in flow.sources(p) if s is not None}
    mine_ext = {tuple(s) for s, src in zip(p.input_shapes, flow.sources(p), strict=False) if src is None}
    for c in flow.consumers.get(p.index, []):
        cp = flow.by_index.get(c)
        if cp is None:
            continue
        for shape, s in zip(cp.input_shapes, flow.sources(cp), strict=False):
            if s == p.index:
                continue
            if (s is not None and s in mine) or (s is None and tuple(shape) in mine_ext and numel(shape) > 1):
                return True
    return False


def fusion_groups(points: Sequence[OpPoint], exclude: Iterable[int] = (), flow: Dataflow | None = None) -> list[Fusion]:
    """Groups of >= 2 element-wise/reduction ops connected by producers, each grown from a reduction or from a
    ``x * f(x)`` diamond: its element-wise producers on the same elements (BACK_DEPTH), then every consumer that
    reads only the group's outputs, the tensors the group already reads, parameters and smaller constants (a
    sibling that reads only those joins with it), at most MAX_GROUP ops. Ops without recorded producers, views,
    copies and the ``exclude`` indices take no part."""
    flow = flow or Dataflow(points)
    used = set(exclude)
    groups: list[Fusion] = []
    for p in sorted(points, key=lambda q: q.index):
        if p.index in used or not fusible(p):
            continue
        reduction = is_reduction(p)
        if not reduction and not _diamond(p, flow):
            continue
        grower = _Grower(flow, used, p.phase, in_numel(p) if reduction else max_numel(p))
        grower.group.add(p.index)
        grower.grow_back(p.index)
        grower.grow_forward()
        if len(grower.group) < 2:
            continue
        used |= grower.group
        groups.append(fusion_of(sorted(grower.group), flow))
    return groups


def fusion_of(indices: Sequence[int], flow: Dataflow) -> Fusion:
    members = [flow.by_index[i] for i in indices]
    inside = set(indices)
    external: dict[tuple[Any, ...], int] = {}
    broadcasts = 0
    for p in members:
        sizes = {numel(s) for s in p.input_shapes}
        broadcasts += len(sizes) > 1
        for i, s in enumerate(flow.sources(p)):
            if s in inside:
                continue
            dtype = p.input_dtypes[i] if i < len(p.input_dtypes) and p.input_dtypes[i] else p.dtype
            external[external_key(p, i, s)] = tensor_bytes(p.input_shapes[i], dtype, p.dtype)
    # NB: an output read outside the group, or by no counted op (a model output), is written once
    written = sum(
        output_bytes(p) for p in members if p.index not in flow.consumers or not set(flow.consumers[p.index]) <= inside
    )
    unfused = sum(p.bytes for p in members)
    fused = min(sum(external.values()) + written, unfused)
    kind = fused_op(op_name(p.op) for p in members)
    return Fusion(tuple(indices), kind, unfused, fused, sum(is_reduction(p) for p in members), broadcasts)


# ------------------------------------------------------------------------------------------- matmul operands


def large_operand_is_param(point: OpPoint, a: int, b: int) -> bool | None:
    """Whether the larger of the matmul operands at input positions ``a`` and ``b`` is a parameter or buffer of the
    model (weights); None when the counting pass did not record it."""
    if len(point.input_params) != len(point.input_shapes) or max(a, b) >= len(point.input_shapes):
        return None
    big = a if numel(point.input_shapes[a]) >= numel(point.input_shapes[b]) else b
    return point.input_params[big]


@dataclass(frozen=True)
class DiagMatmul:
    diag: int  # the op that built the diagonal matrix
    matmul: int
    position: int  # its input position in the matmul
    n: int  # the diagonal's length


def diag_matmuls(points: Sequence[OpPoint], flow: Dataflow | None = None) -> list[DiagMatmul]:
    """Matmuls reading a square matrix built by torch.diag / diag_embed (an O(n^2 m) product for O(n m) work)."""
    flow = flow or Dataflow(points)
    found = []
    for p in points:
        if p.math != "tensor" or not dataflow_known(p):
            continue
        for i, s in enumerate(flow.sources(p)):
            producer = flow.by_index.get(s) if s is not None else None
            shape = p.input_shapes[i]
            if producer is not None and op_name(producer.op) in DIAG_OPS and len(shape) >= 2 and shape[-1] == shape[-2]:
                found.append(DiagMatmul(producer.index, p.index, i, shape[-1]))
                break
    return found


# ------------------------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class ConvLayout:
    """A convolution whose 4-D input is NCHW-contiguous (not channels_last), and the layout copies around it."""

    conv: int
    copies: tuple[int, ...]
    shape: tuple[int, ...]


def is_conv(point: OpPoint) -> bool:
    return op_name(point.op) in CONV_OPS


def conv_layouts(points: Sequence[OpPoint], flow: Dataflow | None = None) -> list[ConvLayout]:
    """Convolutions reading an NCHW 4-D input (channels > 1 and a spatial size > 1: the two layouts differ), with
    the copies (clone, _to_copy, copy_ of a permuted/strided tensor) that feed them or read their output."""
    flow = flow or Dataflow(points)
    found = []
    for p in points:
        if not is_conv(p) or not p.input_shapes or len(p.input_layouts) != len(p.input_shapes):
            continue
        shape = tuple(p.input_shapes[0])
        if len(shape) != 4 or shape[1] <= 1 or shape[2] * shape[3] <= 1 or p.input_layouts[0] != "contiguous":
            continue
        copies: list[int] = []
        sources = flow.sources(p) if dataflow_known(p) else []
        neighbours = [s for s in sources[:1] if s is not None] + flow.consumers.get(p.index, [])
        for n in neighbours:
            q = flow.by_index.get(n)
            if q is not None and op_name(q.op) in LAYOUT_COPIES and "strided" in q.input_layouts:
                copies.append(q.index)
        found.append(ConvLayout(p.index, tuple(copies), shape))
    return found


__all__ = [
    "BACK_DEPTH",
    "CARRIED_SHARE",
    "FUSED_OPS",
    "KV_SHARE",
    "MAX_GROUP",
    "MAX_PERIOD",
    "MIN_STEPS",
    "Carried",
    "ConvLayout",
    "Dataflow",
    "DiagMatmul",
    "Fusion",
    "carried",
    "conv_layouts",
    "dataflow_known",
    "diag_matmuls",
    "external_key",
    "fused_op",
    "fusible",
    "fusion_groups",
    "fusion_of",
    "in_numel",
    "is_conv",
    "is_reduction",
    "large_operand_is_param",
    "max_numel",
    "op_name",
    "out_numel",
    "repeats",
]
