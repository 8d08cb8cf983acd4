"""Dataflow patterns of a model's structure, whatever its spelling (pure; the building blocks are
:mod:`roofline.findings.patterns`): element-wise ops in a row and loops over the same elements, a selection
repeated in a loop or a sort sliced to k (top-k written out), a tensor broadcast against itself into all pairs,
the path of a written-out softmax between two matmuls, and a KV cache grown by cat."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from roofline.findings.patterns import (
    CAT_OPS,
    KV_SHARE,
    STACK_OPS,
    Dataflow,
    Fusion,
    dataflow_known,
    external_key,
    fused_op,
    fusible,
    fusion_of,
    in_numel,
    is_reduction,
    max_numel,
    op_name,
    out_numel,
)
from roofline.report.rows import OpPoint, numel, output_bytes, tensor_bytes

# ------------------------------------------------------------------------------------------- structure

SELECT_OPS = frozenset({"max", "amax", "argmax", "min", "amin", "argmin"})
# NB: what masks the element a step selected so that the next step finds the next one
MASKING_OPS = frozenset(
    {"scatter", "scatter_", "index_put", "index_put_", "masked_fill", "masked_fill_", "index_fill", "index_fill_",
     "where", "masked_scatter"}
)  # fmt: skip
SORT_OPS = frozenset({"sort", "argsort", "msort"})
MIN_PAIRS = 64  # elements a tensor is broadcast against itself over that make an all-pairs (N x N) pattern
PAIR_DEPTH = 32  # ops on the pairs followed at most


def elementwise_recurrence(
    loop_points: Sequence[OpPoint], period: int, span: Sequence[OpPoint], flow: Dataflow
) -> Fusion | None:
    """A loop (``loop_points``: its ops, every step; ``span``: every point between its first and last op, views
    included) whose every op is element-wise on the same number of elements -- no reduction, matmul, copy or
    creation -- and that reads no slice changing from step to step (no view in its span makes a smaller tensor, as
    ``x[:, t]`` does) nor another tensor each step (every step after the first reads the same tensors from outside
    the loop; the first the initial state too): each element's steps depend only on that element's earlier steps,
    so one kernel runs every step with the element in registers. The loop's ops as a :class:`Fusion` (its external
    inputs read once, the outputs used after the loop written once); None otherwise. ``period``: ops per step."""
    if not loop_points or not all(fusible(p) and not is_reduction(p) for p in loop_points):
        return None
    n = out_numel(loop_points[0])
    if n <= 1 or any(out_numel(p) != n or max_numel(p) != n for p in loop_points):
        return None
    for p in span:
        if p.math == "none" and p.input_shapes and out_numel(p) < in_numel(p):
            return None  # a slice of a larger tensor: a recurrence along a sequence axis (a scan)
    inside = {p.index for p in loop_points}
    steps = len(loop_points) // period if period else 0
    reads = [
        {external_key(p, i, s) for p in loop_points[t * period : (t + 1) * period]
         for i, s in enumerate(flow.sources(p)) if s not in inside}
        for t in range(steps)
    ]  # fmt: skip
    if any(r != reads[1] for r in reads[2:]) or (len(reads) > 1 and not reads[1] <= reads[0]):
        return None  # another tensor each step (a list of inputs): a sequence, not the same elements
    return fusion_of(sorted(inside), flow)


def elementwise_pairs(
    points: Sequence[OpPoint], exclude: Iterable[int] = (), flow: Dataflow | None = None
) -> list[Fusion]:
    """Two element-wise ops in a row on the same number of elements, the second reading the first's output and
    the only one to read it (``F.mish(F.mish(x))``): as a :class:`Fusion` (the first's inputs and the second's
    other inputs read once, the second's output written once). The ``exclude`` indices take no part; each op is
    in one pair at most."""
    flow = flow or Dataflow(points)
    excluded = set(exclude)
    work = [p for p in sorted(points, key=lambda q: q.index) if p.math != "none"]
    found: list[Fusion] = []
    used: set[int] = set()
    for a, b in pairwise(work):
        if {a.index, b.index} & (excluded | used) or a.phase != b.phase:
            continue
        if not all(fusible(p) and not is_reduction(p) for p in (a, b)) or max_numel(a) != max_numel(b):
            continue
        if a.index not in flow.sources(b) or flow.consumers.get(a.index, []) != [b.index]:
            continue
        used |= {a.index, b.index}
        found.append(fusion_of((a.index, b.index), flow))
    return found


@dataclass(frozen=True)
class Selection:
    """Top-k written out: ``k`` extremes taken one by one, each step masking the one before's (``repeated``), or a
    whole sort sliced to its first ``k`` (not ``repeated``), along an axis of ``n`` elements."""

    indices: tuple[int, ...]
    repeated: bool
    k: int
    n: int
    in_bytes: int  # the input, read once
    out_bytes: int  # the k values (and indices), written once
    in_numel: int


def repeated_selection(loop_points: Sequence[OpPoint], period: int, steps: int, flow: Dataflow) -> Selection | None:
    """A loop whose step takes a max (min, argmax) and masks what it found (scatter, masked_fill, index_put,
    where) in the tensor the next step's max reads: top-k as k passes over the input."""
    step = loop_points[:period]
    select = next((p for p in step if op_name(p.op) in SELECT_OPS and is_reduction(p)), None)
    if select is None or not any(op_name(p.op) in MASKING_OPS for p in step) or not dataflow_known(select):
        return None
    later = loop_points[period : 2 * period]
    nxt = next((p for p in later if p.signature() == select.signature()), None)
    masks = {p.index for p in step if op_name(p.op) in MASKING_OPS}
    if nxt is None or not masks & {s for s in flow.sources(nxt) if s is not None}:
        return None
    per_step = max(out_numel(select), 1)
    first_in = max(range(len(select.input_shapes)), key=lambda i: numel(select.input_shapes[i]))
    n = in_numel(select) // per_step
    dtype = select.input_dtypes[first_in] if first_in < len(select.input_dtypes) else select.dtype
    return Selection(
        indices=tuple(p.index for p in loop_points),
        repeated=True,
        k=steps,
        n=n,
        in_bytes=tensor_bytes(select.input_shapes[first_in], dtype, select.dtype),
        out_bytes=steps * output_bytes(select),
        in_numel=in_numel(select),
    )


def loop_structure(
    loop_points: Sequence[OpPoint], period: int, steps: int, span: Sequence[OpPoint], flow: Dataflow
) -> Fusion | Selection | None:
    """What a loop's structure makes of it other than a scan: an element-wise recurrence over the same elements
    (:func:`elementwise_recurrence`) or top-k by repeated selection (:func:`repeated_selection`); None: a
    recurrence along a sequence axis (or unknown)."""
    found = elementwise_recurrence(loop_points, period, span, flow)
    return found or repeated_selection(loop_points, period, steps, flow)


def sort_slices(points: Sequence[OpPoint], flow: Dataflow) -> list[Selection]:
    """sort (argsort) ops whose output is used only through slices along one axis (``torch.sort(x)[..., :k]``):
    a full sort for k of the n elements."""
    found = []
    for p in points:
        if op_name(p.op) not in SORT_OPS or not p.output_shapes or not dataflow_known(p):
            continue
        full = tuple(p.output_shapes[0])
        slices = [
            q for q in points if q.math == "none" and q.input_producers and flow.source(q.input_producers[0]) == p.index
        ]
        shrinking = [q for q in slices if q.output_shapes and out_numel(q) < numel(full)]
        readers = [flow.by_index[c] for c in flow.consumers.get(p.index, []) if flow.by_index[c].math != "none"]
        whole = any(
            numel(shape) >= numel(full)
            for r in readers
            for shape, s in zip(r.input_shapes, flow.sources(r), strict=False)
            if s == p.index
        )
        if not shrinking or whole:
            continue
        cut = tuple(shrinking[0].output_shapes[0])
        axes = [d for d, (a, b) in enumerate(zip(full, cut, strict=False)) if a != b] if len(cut) == len(full) else []
        if len(axes) != 1:
            continue
        k, n = cut[axes[0]], full[axes[0]]
        out = sum(tensor_bytes(shape, p.dtype) for shape in p.output_shapes) * k // max(n, 1)
        dtype = p.input_dtypes[0] if p.input_dtypes else p.dtype
        found.append(
            Selection((p.index,), False, k, n, tensor_bytes(p.input_shapes[0], dtype, p.dtype), out, in_numel(p))
        )
    return found


@dataclass(frozen=True)
class AllPairs:
    """A tensor broadcast against itself into its N x N pairs (``x[None] - x[:, None]``) and the ops on the pairs
    after it, up to the reductions over one of the two axes."""

    origin: int  # the op that pairs the tensor with itself
    indices: tuple[int, ...]  # the origin and the ops reading N x N (x d) pair tensors, in order
    n: int
    shape: tuple[int, ...]  # the pairs' tensor
    reductions: int  # ops among them summing over one axis of the pairs


def _paired_axes(a: Sequence[int], b: Sequence[int], out: Sequence[int]) -> int | None:
    """N where ``a`` and ``b`` broadcast one tensor against itself: axes i != j with a[i] = 1, b[i] = N and
    a[j] = N, b[j] = 1 (the output N x N there)."""
    if not (len(a) == len(b) == len(out)):
        return None
    ones_a = [d for d in range(len(a)) if a[d] == 1 and b[d] > 1]
    ones_b = [d for d in range(len(a)) if b[d] == 1 and a[d] > 1]
    for i in ones_a:
        for j in ones_b:
            if b[i] == a[j] == out[i] == out[j]:
                return b[i]
    return None


def _same_tensor(p: OpPoint, flow: Dataflow) -> bool:
    ids = p.input_ids[:2]
    if len(ids) == 2 and ids[0] is not None:
        return ids[0] == ids[1]
    sources = flow.sources(p)[:2]
    return len(sources) == 2 and sources[0] is not None and sources[0] == sources[1]


def all_pairs(points: Sequence[OpPoint], flow: Dataflow) -> list[AllPairs]:
    """Binary element-wise ops pairing one tensor with itself across two axes (an N x N result, N >= MIN_PAIRS),
    with the element-wise ops and reductions that read the pairs after them (at most PAIR_DEPTH)."""
    found = []
    used: set[int] = set()
    for p in sorted(points, key=lambda q: q.index):
        if p.index in used or p.math != "vector" or len(p.input_shapes) != 2 or not p.output_shapes:
            continue
        if not dataflow_known(p) or not _same_tensor(p, flow):
            continue
        n = _paired_axes(p.input_shapes[0], p.input_shapes[1], max(p.output_shapes, key=numel))
        if n is None or n < MIN_PAIRS:
            continue
        pairs = n * n
        members = [p.index]
        frontier = [p.index]
        while frontier and len(members) < PAIR_DEPTH:
            index = frontier.pop(0)
            for c in flow.consumers.get(index, []):
                q = flow.by_index.get(c)
                if q is None or c in members or q.math != "vector" or q.phase != p.phase or in_numel(q) < pairs:
                    continue
                members.append(c)
                if out_numel(q) >= pairs:
                    frontier.append(c)
        indices = tuple(sorted(members))
        used.update(indices)
        reductions = sum(1 for i in indices if out_numel(flow.by_index[i]) < pairs)
        found.append(AllPairs(p.index, indices, n, tuple(max(p.output_shapes, key=numel)), reductions))
    return found


# ------------------------------------------------------------------------------------------- attention

MASK_BUILDERS = frozenset(
    {"ones", "zeros", "full", "empty", "triu", "tril", "arange", "ones_like", "zeros_like", "full_like", "ge", "gt",
     "le", "lt", "eq", "ne", "logical_not", "bitwise_not", "to", "_to_copy"}
)  # fmt: skip
TRIANGULAR = frozenset({"triu", "tril"})
ATTENTION_OPS = 16  # element-wise ops and reductions between the two matmuls of a written-out attention at most


@dataclass(frozen=True)
class SoftmaxPath:
    """What lies between an attention's two matmuls: the ops on the scores (a softmax op, or one written out),
    the ops building a mask in the call, and the second matmul."""

    ops: tuple[int, ...]
    mask: tuple[int, ...]
    second: int
    softmax: int  # the softmax op, or the written-out softmax's last op


def softmax_path(first: int, size: int, keys: int, flow: Dataflow) -> SoftmaxPath | None:
    """From a matmul's scores (``size`` elements, ``keys`` last), the element-wise ops and reductions reading
    scores-sized tensors (scale, mask, max, sub, exp, sum, div: <= ATTENTION_OPS) up to the one matmul reading the
    probabilities (a ``size`` operand, ``keys`` last): an attention when they hold a softmax op or compute one
    (:func:`fused_op`); the mask built in the call (ones, triu/tril, comparisons) with them."""
    ops: list[int] = []
    seconds: set[int] = set()
    frontier = [first]
    while frontier:
        index = frontier.pop(0)
        for c in flow.consumers.get(index, []):
            q = flow.by_index.get(c)
            if q is None or c in ops or c in seconds:
                continue
            if q.math == "tensor":
                if any(numel(s) == size and s and s[-1] == keys for s in q.input_shapes):
                    seconds.add(c)
                    continue
                return None  # the scores feed another matmul: not this pattern
            if q.math != "vector" or in_numel(q) != size:
                continue
            ops.append(c)
            frontier.append(c)
            if len(ops) > ATTENTION_OPS:
                return None
    if len(seconds) != 1 or not ops:
        return None
    names = [op_name(flow.by_index[i].op) for i in ops]
    if not any("softmax" in n for n in names) and fused_op(names) != "softmax":
        return None
    softmax = next((i for i, n in zip(ops, names, strict=True) if "softmax" in n), max(ops))
    mask: list[int] = []
    back = [s for i in ops for s in flow.sources(flow.by_index[i]) if s is not None and s not in ops and s != first]
    while back:
        s = back.pop()
        q = flow.by_index.get(s)
        if q is None or s in mask or op_name(q.op) not in MASK_BUILDERS or out_numel(q) >= size:
            continue
        mask.append(s)
        back.extend(x for x in flow.sources(q) if x is not None)
    return SoftmaxPath(tuple(sorted(ops)), tuple(sorted(mask)), next(iter(seconds)), softmax)


# ------------------------------------------------------------------------------------------- KV cache


@dataclass(frozen=True)
class CacheGrowth:
    """A cat (stack) that copies a large cache to append a slice: the cache is ``cache_bytes`` of its
    ``out_bytes`` output, the new slice the rest."""

    index: int
    axis: int
    cache_bytes: int
    new_bytes: int
    out_shape: tuple[int, ...]
    from_previous: bool  # the cache is the output of an earlier cat (a loop), not a tensor from outside


def _grown_axis(small: Sequence[int], big: Sequence[int]) -> int | None:
    if len(small) != len(big):
        return None
    diff = [d for d, (a, b) in enumerate(zip(small, big, strict=True)) if a != b]
    if len(diff) != 1 or small[diff[0]] >= big[diff[0]]:
        return None
    return diff[0]


def kv_cache_growth(points: Sequence[OpPoint], flow: Dataflow | None = None) -> list[CacheGrowth]:
    """cat ops whose one input is >= KV_SHARE of the output and comes from outside the iteration (not a
    parameter) or from an earlier cat, the output growing along one axis; stack ops restacking the inputs of an
    earlier stack plus new ones (a list of past states stacked again each step)."""
    flow = flow or Dataflow(points)
    found: list[CacheGrowth] = []
    stacks: list[set[Any]] = []
    for p in sorted(points, key=lambda q: q.index):
        name = op_name(p.op)
        if not dataflow_known(p) or not p.output_shapes or name not in CAT_OPS | STACK_OPS:
            continue
        out = tuple(max(p.output_shapes, key=numel))
        total = output_bytes(p)
        sources = flow.sources(p)
        if name in STACK_OPS:
            keys = {(s, tuple(shape)) if s is not None else ("ext", i) for i, (s, shape) in
                    enumerate(zip(sources, p.input_shapes, strict=False))}  # fmt: skip
            for previous in reversed(stacks):
                if previous and previous < keys:
                    per = total // max(len(p.input_shapes), 1)
                    new = per * (len(keys) - len(previous))
                    found.append(CacheGrowth(p.index, 0, total - new, new, out, True))
                    break
            stacks.append(keys)
            continue
        for i, shape in enumerate(p.input_shapes):
            s = sources[i]
            producer = flow.by_index.get(s) if s is not None else None
            previous_cat = producer is not None and op_name(producer.op) in CAT_OPS
            outside = s is None and not flow.param(p, i)
            if not (outside or previous_cat):
                continue
            axis = _grown_axis(shape, out)
            cache = tensor_bytes(shape, p.input_dtypes[i] if i < len(p.input_dtypes) else p.dtype, p.dtype)
            if axis is None or cache < KV_SHARE * total:
                continue
            found.append(CacheGrowth(p.index, axis, cache, max(total - cache, 0), out, previous_cat))
            break
    return found


__all__ = [
    "ATTENTION_OPS",
    "MASKING_OPS",
    "MASK_BUILDERS",
    "MIN_PAIRS",
    "PAIR_DEPTH",
    "SELECT_OPS",
    "SORT_OPS",
    "TRIANGULAR",
    "AllPairs",
    "CacheGrowth",
    "Selection",
    "SoftmaxPath",
    "all_pairs",
    "elementwise_pairs",
    "elementwise_recurrence",
    "kv_cache_growth",
    "loop_structure",
    "repeated_selection",
    "softmax_path",
    "sort_slices",
]
