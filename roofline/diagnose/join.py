"""The pure half of the timing pass: join what the profiler saw (CPU ops, GPU kernels, kernel launch calls) to the
ops the counting pass recorded. No torch: tested with hand-built events.

:func:`parse_events` turns plain event dicts into :class:`CpuOp`, :class:`~roofline.report.records.KernelEvent` and
:class:`LaunchCall` values, and :func:`join` matches them to the OpRecords -> :class:`~roofline.report.records.Timing`.
:mod:`roofline.diagnose.profile` produces the event dicts from torch.profiler and drives the pass.

Event dicts (what a ``profile`` function returns; times in microseconds on one clock):
  {"kind": "iteration", "start_us", "end_us"}                 one timed iteration (a record_function marker)
  {"kind": "op", "id", "name", "start_us", "end_us", "thread", "input_shapes"}
                                                              a CPU op; input_shapes: tensor inputs only
  {"kind": "kernel", "name", "start_us", "end_us", "stream", "external_id", "correlation"}
                                                              a GPU kernel (memcpy/memset too);
                                                              external_id = id of the CPU op that launched it
  {"kind": "launch", "name", "start_us", "end_us", "thread", "correlation"}
                                                              a launch API call (cudaLaunchKernel...)
  {"kind": "note", "text"}                                    something the profile lacks, for the report's notes
Optional in a kernel, its launch facts (any missing or malformed: None): "grid" [x, y, z], "block" [x, y, z],
"registers_per_thread", "shared_memory_bytes", "blocks_per_sm", "warps_per_sm", "occupancy" (0..1),
"active_blocks_per_sm".
Optional in an op: "iteration" (else: the iteration marker containing its start), "parent" (else: the innermost
op containing it on its thread), "self_us" (else: its duration minus its direct children's).
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from roofline.findings.bounds import is_layout_kernel
from roofline.report.records import KernelEvent, OpRecord, OpTiming, Timing
from roofline.report.rows import KernelFacts

#: kernels per op kept with their launch facts (the longest first)
TOP_KERNELS = 4
NO_FACTS = "bound classes from roofline numbers only"

# ------------------------------------------------------------------------------------------------ plain values


@dataclass(frozen=True)
class CpuOp:
    """One CPU op from the profiler (aten ops, autograd nodes...)."""

    id: int
    name: str
    start_us: float
    end_us: float
    input_shapes: tuple[tuple[int, ...], ...] = ()  # tensor inputs only, TensorLists flattened, in order
    thread: int = 0
    iteration: int | None = None  # index of the timed iteration it ran in (None: outside them)
    parent: int | None = None  # id of the innermost op containing it on its thread
    self_us: float = 0.0  # its duration minus its direct children's

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us

    def signature(self) -> tuple[str, tuple[tuple[int, ...], ...]]:
        return self.name, self.input_shapes


@dataclass(frozen=True)
class LaunchCall:
    """A launch API call on the host (cudaLaunchKernel, cuLaunchKernel, cudaMemcpyAsync...)."""

    correlation: int  # shared with the kernel it launched
    start_us: float
    end_us: float
    name: str = ""
    thread: int = 0


@dataclass
class ProfiledEvents:
    ops: list[CpuOp] = field(default_factory=list)
    kernels: list[KernelEvent] = field(default_factory=list)
    launches: list[LaunchCall] = field(default_factory=list)
    iterations: int = 0  # iteration markers seen
    notes: list[str] = field(default_factory=list)  # what the profile lacks ('note' events)


# ------------------------------------------------------------------------------------------------ parsing


def parse_events(events: Iterable[Mapping[str, Any]]) -> ProfiledEvents:
    """Plain event dicts (see the module docstring) -> ops (with iteration, parent and self time), kernels and
    launch calls."""
    markers: list[tuple[float, float]] = []
    raw_ops: list[Mapping[str, Any]] = []
    out = ProfiledEvents()
    for event in events:
        kind = event.get("kind")
        if kind == "iteration":
            markers.append((float(event["start_us"]), float(event["end_us"])))
        elif kind == "op":
            raw_ops.append(event)
        elif kind == "kernel":
            start = float(event["start_us"])
            duration = float(event["end_us"]) - start if "end_us" in event else float(event["dur_us"])
            out.kernels.append(
                KernelEvent(
                    name=str(event.get("name", "")),
                    start_us=start,
                    duration_us=max(duration, 0.0),
                    stream=int(event.get("stream") or 0),
                    external_id=_id_or_none(event.get("external_id")),
                    correlation=_id_or_none(event.get("correlation")),
                    **launch_facts(event),
                )
            )
        elif kind == "launch":
            out.launches.append(
                LaunchCall(
                    correlation=int(event["correlation"]),
                    start_us=float(event["start_us"]),
                    end_us=float(event["end_us"]),
                    name=str(event.get("name", "")),
                    thread=int(event.get("thread") or 0),
                )
            )
        elif kind == "note":
            text = str(event.get("text") or "")
            if text and text not in out.notes:
                out.notes.append(text)
        else:
            raise ValueError(f"unknown profiler event kind {kind!r}")
    markers.sort()
    out.iterations = len(markers)
    out.ops = _build_ops(raw_ops, markers)
    out.kernels.sort(key=lambda k: k.start_us)
    return out


def _float_or_none(value: Any) -> float | None:
    """A trace value (a number or its text) as a finite number >= 0, else None (a bool is not a number here)."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _int_or_none(value: Any) -> int | None:
    """:func:`_float_or_none`, when it is a whole number."""
    number = _float_or_none(value)
    return int(number) if number is not None and number == int(number) else None


def _dims_or_none(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, (list, tuple)) or not value:
        return None
    dims = tuple(_int_or_none(v) for v in value)
    if any(d is None or d < 1 for d in dims):
        return None
    return dims  # type: ignore[return-value]


def launch_facts(event: Mapping[str, Any]) -> dict[str, Any]:
    """A kernel event's launch facts as KernelEvent fields; a missing or malformed one is None (never an error)."""
    occupancy = _float_or_none(event.get("occupancy"))
    return {
        "grid": _dims_or_none(event.get("grid")),
        "block": _dims_or_none(event.get("block")),
        "registers_per_thread": _int_or_none(event.get("registers_per_thread")),
        "shared_memory_bytes": _int_or_none(event.get("shared_memory_bytes")),
        "blocks_per_sm": _float_or_none(event.get("blocks_per_sm")),
        "warps_per_sm": _float_or_none(event.get("warps_per_sm")),
        "occupancy": occupancy if occupancy is not None and occupancy <= 1 else None,
        "active_blocks_per_sm": _int_or_none(event.get("active_blocks_per_sm")) or None,
    }


def _id_or_none(value: Any) -> int | None:
    return int(value) if value not in (None, 0, "") else None


def _iteration_at(markers: Sequence[tuple[float, float]], t: float, starts: Sequence[float] = ()) -> int | None:
    """The index of the iteration marker around ``t`` (markers sorted; ``starts``: their start times, for a
    bisection instead of a scan; they do not overlap)."""
    if starts:
        index = bisect.bisect_right(starts, t) - 1
        if index >= 0 and markers[index][0] <= t <= markers[index][1]:
            return index
        return None
    for index, (start, end) in enumerate(markers):
        if start <= t <= end:
            return index
    return None


def _build_ops(raw: Sequence[Mapping[str, Any]], markers: Sequence[tuple[float, float]]) -> list[CpuOp]:
    """Ops in start order (parents before children) with iteration, parent and self time filled in.

    NB: each event's values are read and converted once (a many-op model's profile holds tens of thousands of
    ops); an input shape seen before (the same shapes recur every iteration) is converted once."""
    # (start, -end, position, end, id, thread, event): sorted, the order of (start, -end) with ties kept in order
    rows = sorted(
        (
            (start := float(event["start_us"]), -(end := float(event["end_us"])), position, end, int(event["id"]),
             int(event.get("thread") or 0), event)
            for position, event in enumerate(raw)
        ),
        key=lambda row: (row[0], row[1]),
    )  # fmt: skip
    parents: dict[int, int | None] = {}
    by_thread: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for row in rows:
        by_thread[row[5]].append(row)
    for listed in by_thread.values():
        stack: list[tuple[float, float, int]] = []  # (start, end, id) of the ops open around the current one
        for start, _, _, end, op_id, _, event in listed:
            while stack and not (stack[-1][0] <= start and end <= stack[-1][1]):
                stack.pop()
            given = event.get("parent")
            parents[op_id] = int(given) if given is not None else (stack[-1][2] if stack else None)
            stack.append((start, end, op_id))
    disjoint = all(a[1] < b[0] for a, b in itertools.pairwise(markers))
    starts = [start for start, _ in markers] if disjoint else []
    child_time: dict[int, float] = defaultdict(float)
    for start, _, _, end, op_id, _, _ in rows:
        parent = parents[op_id]
        if parent is not None:
            child_time[parent] += end - start
    shapes_seen: dict[tuple[Any, ...], tuple[tuple[int, ...], ...]] = {}
    ops = []
    for start, _, _, end, op_id, thread, event in rows:
        iteration = event.get("iteration")
        if iteration is None:
            iteration = _iteration_at(markers, start, starts) if markers else 0
        self_us = event.get("self_us")
        if self_us is None:
            self_us = max(end - start - child_time[op_id], 0.0)
        ops.append(
            CpuOp(
                id=op_id,
                name=str(event["name"]),
                start_us=start,
                end_us=end,
                input_shapes=_shapes(event.get("input_shapes"), shapes_seen),
                thread=thread,
                iteration=None if iteration is None else int(iteration),
                parent=parents[op_id],
                self_us=float(self_us),
            )
        )
    return ops


def _shapes(given: Any, seen: dict[tuple[Any, ...], tuple[tuple[int, ...], ...]]) -> tuple[tuple[int, ...], ...]:
    """An event's input shapes as tuples of ints, each distinct spelling converted once (``seen``)."""
    if not given:
        return ()
    try:
        key = tuple(tuple(shape) for shape in given)
        shapes = seen.get(key)
    except TypeError:  # not lists of dimensions: converted (and refused) as they are
        return tuple(tuple(int(d) for d in shape) for shape in given)
    if shapes is None:
        shapes = seen[key] = tuple(tuple(int(d) for d in shape) for shape in given)
    return shapes


# ------------------------------------------------------------------------------------------------ join


ALIGN_WINDOW = 256  # how far ahead in the profiler's ops a record's match is looked for
LOOKAHEAD = 8  # records looked at ahead before a record takes a match that skips profiler ops


def align(
    a: Sequence[Hashable], b: Sequence[Hashable], window: int = ALIGN_WINDOW, *, greedy: bool = False
) -> list[tuple[int, int]]:
    """Pairs (i, j) with a[i] == b[j], in order in both: each a[i] takes the first equal b[j] within ``window``
    after the last match (else it stays unmatched) -- unless that match skips items of ``b`` and, over the next
    ``LOOKAHEAD`` items of ``a``, fewer items of either sequence are left unmatched when a[i] is left out: then
    a[i] stays unmatched. (A record the profile spells differently, say a ``where`` whose scalar the profiler
    does not list, would otherwise take its twin one transformer layer later and leave that layer unmatched.)
    ``greedy``: each a[i] takes the first equal b[j] within the window, whatever it skips.

    NB: linear in len(a) x LOOKAHEAD; a longest-common-subsequence diff (difflib) went quadratic and hung on the
    ~10k repetitive ops of a recurrent model's training step."""
    positions: dict[Hashable, list[int]] = defaultdict(list)
    for j, item in enumerate(b):
        positions[item].append(j)

    def first(item: Hashable, j: int) -> int | None:
        where = positions.get(item)
        if not where:
            return None
        k = bisect.bisect_left(where, j)
        return where[k] if k < len(where) and where[k] < j + window else None

    def ahead(i: int, j: int) -> tuple[int, int]:
        """(matched, skipped) of a[i:i + LOOKAHEAD] aligned greedily from b[j]."""
        matched = skipped = 0
        for item in a[i : i + LOOKAHEAD]:
            k = first(item, j)
            if k is None:
                skipped += 1
                continue
            matched, skipped, j = matched + 1, skipped + k - j, k + 1
        return matched, skipped

    pairs: list[tuple[int, int]] = []
    j = 0
    for i, item in enumerate(a):
        k = first(item, j)
        if k is None:
            continue
        if k > j and not greedy:  # the match skips profiler ops: is a[i] the odd one out instead?
            taken, taken_skips = ahead(i + 1, k + 1)
            left, left_skips = ahead(i + 1, j)
            if (1 + left_skips, -left) < (k - j + taken_skips, -1 - taken):
                continue  # fewer items left unmatched without a[i]'s match: a[i] stays unmatched
        pairs.append((i, k))
        j = k + 1
    return pairs


#: ops the profiler records under another name than the counting pass (a TorchDispatchMode) sees for the same call:
#: aten::reshape calls _reshape_alias, but view when a Python dispatch key is set (any dispatch mode)
SAME_CALL = {"aten::_reshape_alias": "aten::view"}


def match_key(name: str) -> str:
    """The name an op is matched by: its counting-pass spelling (:data:`SAME_CALL`), an in-place variant as its
    op (``aten::add_`` -> ``aten::add``: under a dispatch mode autograd accumulates a gradient out of place, in a
    real run in place; the two cost the same). Dunder ops (``aten::__and__``) keep their name."""
    name = SAME_CALL.get(name, name)
    if name.endswith("_") and not name.endswith("__") and "::" in name:
        return name[:-1]
    return name


def _align_records(records: Sequence[OpRecord], candidates: Sequence[CpuOp]) -> list[tuple[int, int]]:
    """Match by (op, input shapes) first; in the gaps left between those matches, by op name alone (shapes
    spelled differently, e.g. a TensorList or a wrapped scalar, must not cost a match). Names are compared by
    :func:`match_key`. Last, the records still unmatched take the ops still unmatched of the same name and shapes,
    in order among themselves, then those of the same name.

    NB: that last pass is for a stretch the counting pass saw in another order than the run: a backward formula
    takes another path under a dispatch mode (linalg_matrix_exp's backward: cat and zeros_like under the counting
    pass, zeros, narrow and copy_ in the run) and the in-order alignment, having matched the slices after the
    recorded matrix_exp to the ones before the real one, leaves the heavy op unmatched; it takes only ops no record
    took, so it never pulls a match away from its place, and it is greedy (:func:`align`'s ``greedy``: an op it
    skips is one no record took anyway)."""
    keys = [(match_key(r.op), r.input_shapes) for r in records]
    seen = [(match_key(c.name), c.input_shapes) for c in candidates]
    out = _align_in_gaps(records, candidates, align(keys, seen))
    taken_i, taken_j = {i for i, _ in out}, {j for _, j in out}
    free_i = [i for i in range(len(records)) if i not in taken_i]
    free_j = [j for j in range(len(candidates)) if j not in taken_j]
    for exact in (True, False):  # by name and shapes, then by name alone
        if not free_i or not free_j:
            break
        a = [keys[i] if exact else keys[i][0] for i in free_i]
        b = [seen[j] if exact else seen[j][0] for j in free_j]
        late = align(a, b, greedy=True)
        out += [(free_i[x], free_j[y]) for x, y in late]
        taken_i, taken_j = {free_i[x] for x, _ in late}, {free_j[y] for _, y in late}
        free_i = [i for i in free_i if i not in taken_i]
        free_j = [j for j in free_j if j not in taken_j]
    return out


def _align_in_gaps(
    records: Sequence[OpRecord], candidates: Sequence[CpuOp], pairs: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """``pairs`` (matched by name and shapes) with, in the gaps between them, matches by name alone."""
    out: list[tuple[int, int]] = []
    prev_i = prev_j = 0
    for i, j in [*pairs, (len(records), len(candidates))]:
        if i > prev_i and j > prev_j:
            gap = align([match_key(r.op) for r in records[prev_i:i]], [match_key(c.name) for c in candidates[prev_j:j]])
            out += [(prev_i + gi, prev_j + gj) for gi, gj in gap]
        if i < len(records):
            out.append((i, j))
        prev_i, prev_j = i + 1, j + 1
    return out


class _Gaps:
    """Where an op under no matched op, holding none, goes when no op around it holds one either: the records
    the counting pass saw between the matched ops before and after its outermost op (in the iteration's time
    order), that were matched in none of the iteration's ops and weigh something (``weigh``), in proportion to
    their weights."""

    def __init__(
        self,
        records: Sequence[OpRecord],
        ops: Sequence[CpuOp],
        by_id: Mapping[int, CpuOp],
        matched: Mapping[int, int],
        matched_in: Sequence[set[int]],
        weigh: Callable[[OpRecord], float],
    ) -> None:
        self._by_id = by_id
        self._weights = [max(float(weigh(r)), 0.0) for r in records]
        self._aligned = [set(found) for found in matched_in]  # NB: a copy: the matches of the alignment only
        self._matched: dict[int, tuple[list[float], list[int]]] = {}  # iteration -> (starts, record positions)
        for op in ops:  # start order
            if op.id in matched and op.iteration is not None:
                starts, positions = self._matched.setdefault(op.iteration, ([], []))
                starts.append(op.start_us)
                positions.append(matched[op.id])
        self._cache: dict[tuple[int, int, int], list[tuple[int, float]]] = {}

    def shares(self, op: CpuOp) -> list[tuple[int, float]]:
        """(record position, share) of the open records of ``op``'s gap; [] when there are none."""
        iteration = op.iteration
        if iteration is None or iteration not in self._matched:
            return []
        root = op
        while root.parent is not None and root.parent in self._by_id:
            root = self._by_id[root.parent]
        starts, positions = self._matched[iteration]
        at = bisect.bisect_right(starts, root.start_us)
        lo = positions[at - 1] if at > 0 else -1
        hi = positions[at] if at < len(positions) else len(self._weights)
        key = (iteration, lo, hi)
        if key not in self._cache:
            open_ = [i for i in range(lo + 1, hi) if iteration not in self._aligned[i] and self._weights[i] > 0]
            total = sum(self._weights[i] for i in open_)
            self._cache[key] = [(i, self._weights[i] / total) for i in open_]
        return self._cache[key]


def _heirs(by_id: Mapping[int, CpuOp], matched: Mapping[int, int]) -> dict[int, list[int]]:
    """For each op under no matched op that holds matched ops: the ids of the nearest ones (matched ops inside it
    with no matched op between), in start order."""
    heirs: dict[int, list[int]] = defaultdict(list)
    for op_id in sorted(matched, key=lambda i: (by_id[i].start_us, -by_id[i].end_us) if i in by_id else (0.0, 0.0)):
        op = by_id.get(op_id)
        parent = op.parent if op is not None else None
        while parent is not None and parent not in matched and parent in by_id:
            heirs[parent].append(op_id)
            parent = by_id[parent].parent
    return heirs


def _heir_ops(op: CpuOp, by_id: Mapping[int, CpuOp], heirs: Mapping[int, list[int]]) -> list[int]:
    """The matched ops that take the time of ``op`` (under no matched op): the nearest matched ops inside the
    innermost op around it, itself included, that holds any; [] when none does."""
    current: CpuOp | None = op
    while current is not None:
        found = heirs.get(current.id)
        if found:
            return found
        current = by_id.get(current.parent) if current.parent is not None else None
    return []


def _union_us(intervals: Iterable[tuple[float, float]]) -> float:
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def join(
    records: Sequence[OpRecord],
    cpu_ops: Sequence[CpuOp],
    kernels: Sequence[KernelEvent],
    iters: int,
    *,
    launches: Sequence[LaunchCall] = (),
    device: str | None = None,
    wall_s: float = 0.0,
    weigh: Callable[[OpRecord], float] | None = None,
    compiled: bool = False,
) -> Timing:
    """Join the profiler's ops and kernels to the counted ops; every figure is per iteration (over ``iters``).

    Matching: in each iteration, the records are aligned in order with the profiler's ops by (op name, input
    tensor shapes), among the outermost ops whose name some record has (the profiler also sees composite ops
    such as aten::linear, and the ops called inside a recorded op, which the counting pass does not); names are
    compared by :func:`match_key` (an in-place variant and its op, _reshape_alias and view are one).
    Attribution: a kernel belongs to the CPU op that launched it (its external id), and so to the nearest
    matched op at or above that one; the same holds for the self CPU time of each op. An eager model's time that
    reaches no matched op that way (a kernel, or an op's self time) goes, in this order of preference:
    (1) to the matched ops nearest below the innermost op around it, itself included, that holds any, in
    proportion to the time those ops were given directly (equally where that is 0): a composite the counting
    pass did not record (aten::linear, aten::gru, an autograd node such as LinalgMatrixExpBackward0) gives its
    own time, and that of the unrecorded ops inside it (aten::t, a zeros, a narrow), to the counted ops it holds;
    (2) else, to the records of its gap (:class:`_Gaps`): those between the matched ops before and after its
    outermost op that no op of the iteration matched and that weigh something (``weigh``, default compulsory
    bytes), by weight: an op the run calls as one (aten::mish_backward, native_channel_shuffle) that the
    counting pass saw decomposed; those records count as found;
    (3) else it stays ``unmatched_time_s``.
    NB: a composite's own time is real time the model spends in it: it was left unmatched before, 10% of the
    CPU census's device time (issue 26). What still stays unmatched is time no counted op is near: the autograd
    engine's own time on a node that runs no counted op (AddBackward0, which passes its gradient on, at the top
    of the backward), an op outside the iterations, a kernel with no launching op. The device time of the ops plus
    ``unmatched_time_s`` is the total either way.
    device 'cuda': device time = its kernels' durations, launch delay = kernel start - launch call end (clipped at
    0); 'cpu' (default when there are no kernels): device time = CPU time (each op's self time).
    A compiled model's fused kernels (inductor's ``triton_poi_fused_add_mul_tanh_0``), launched outside any aten op,
    go to the counted ops they fused (:func:`attribute_fused`), their time split by ``weigh`` (the ops' roofline
    time; default their compulsory bytes); what cannot be attributed stays in ``unmatched_time_s``: the device
    time of the ops plus ``unmatched_time_s`` is always the sum of the kernels' times. A ``compiled`` model's
    kernels launched by an aten op matched to no counted op (an extern mm for a counted addmm) go to an open op of
    the same family (:func:`extern_names`); on the CPU, its generated kernels (profiled by inductor's
    ``cpp.enable_kernel_profile``) and the aten ops it calls are attributed the same way (not by (1) and (2),
    which would take a fused kernel the graph's call launched away from the ops it fused).
    """
    if iters < 1:
        raise ValueError("iters must be at least 1")
    kind = ("cuda" if kernels else "cpu") if device is None else ("cuda" if device.startswith("cuda") else "cpu")
    records = sorted(records, key=lambda r: r.index)  # execution order
    cpu_ops = sorted(cpu_ops, key=lambda op: (op.start_us, -op.end_us))
    by_id = {op.id: op for op in cpu_ops}
    names = {match_key(r.op) for r in records}

    covered: dict[int, bool] = {}  # op id -> it or an op above it has a recorded name

    def is_covered(op_id: int | None) -> bool:
        chain, current = [], op_id
        while current is not None and current in by_id and current not in covered:
            chain.append(current)
            current = by_id[current].parent
        result = covered.get(current, False) if current is not None else False
        for seen in reversed(chain):  # outermost first
            result = result or match_key(by_id[seen].name) in names
            covered[seen] = result
        return covered.get(op_id, False) if op_id is not None else False

    # ---- match records to ops, per iteration
    candidates: dict[int, list[CpuOp]] = defaultdict(list)
    for op in cpu_ops:  # start order: parents before children
        if op.iteration is not None and match_key(op.name) in names and not is_covered(op.parent):
            candidates[op.iteration].append(op)
    matched: dict[int, int] = {}  # op id -> record position
    hits = [0] * len(records)
    matched_in: list[set[int]] = [set() for _ in records]  # iterations in which each record was found
    for iteration, iteration_ops in candidates.items():
        for i, j in _align_records(records, iteration_ops):
            matched[iteration_ops[j].id] = i
            hits[i] += 1
            matched_in[i].add(iteration)

    owner_cache: dict[int, int | None] = {}

    def owner_op(op_id: int | None) -> int | None:
        """Id of the nearest matched op at or above ``op_id``."""
        chain = []
        while op_id is not None and op_id not in owner_cache:
            if op_id in matched:
                owner_cache[op_id] = op_id
                break
            chain.append(op_id)
            op_id = by_id[op_id].parent if op_id in by_id else None
        result = owner_cache.get(op_id) if op_id is not None else None
        for seen in chain:
            owner_cache[seen] = result
        return result

    def owner(op_id: int | None) -> int | None:
        """Record position of the nearest matched op at or above ``op_id``."""
        found = owner_op(op_id)
        return matched[found] if found is not None else None

    heirs = _heirs(by_id, matched) if not compiled else {}
    direct_us: dict[int, float] = defaultdict(float)  # matched op id -> the time it owns directly
    # time under no matched op: (op, us, the matched ops that take it ([]: the open records of its gap), kernel,
    # launch); an eager model's only (a compiled one's has its own rules below)
    pending: list[tuple[CpuOp, float, list[int], KernelEvent | None, LaunchCall | None]] = []
    gaps = _Gaps(records, cpu_ops, by_id, matched, matched_in, weigh or _weight_of)

    device_us = [0.0] * len(records)
    per_iteration_us: list[dict[int, float]] = [defaultdict(float) for _ in records]  # record -> iteration -> us
    cpu_us = [0.0] * len(records)
    kernel_n = [0] * len(records)
    owned: list[list[KernelEvent]] = [[] for _ in records]
    delay_us = [0.0] * len(records)
    unmatched_us = 0.0
    for op in cpu_ops:
        if op.iteration is None:
            continue
        if op.id in matched:
            cpu_us[matched[op.id]] += op.duration_us
        if kind == "cpu":
            top = owner_op(op.id)
            if top is None:
                if op.self_us > 0 and not compiled:
                    pending.append((op, op.self_us, _heir_ops(op, by_id, heirs), None, None))
                else:
                    unmatched_us += op.self_us
            else:
                rec = matched[top]
                device_us[rec] += op.self_us
                per_iteration_us[rec][op.iteration] += op.self_us
                direct_us[top] += op.self_us

    # ---- kernels
    launch_by_corr = {launch.correlation: launch for launch in launches}
    ops_at = _OpsAt(cpu_ops, by_id)
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    unattributed = 0
    leftover: list[tuple[KernelEvent, int | None, int | None]] = []  # (kernel, iteration, launch op id)
    for k in kernels:
        launch = launch_by_corr.get(k.correlation) if k.correlation is not None else None
        op_id = k.external_id if k.external_id in by_id else None
        if op_id is None and launch is not None:  # no linked id (torch < 2.13), or an op the profiler folded away
            # (a child of the same name as its parent): the innermost op running when the launch call began
            op_id = ops_at.innermost(launch.thread, launch.start_us)
        op = by_id.get(op_id) if op_id is not None else None
        if op is not None and op.iteration is not None:
            spans[op.iteration].append((k.start_us, k.start_us + k.duration_us))
        top = owner_op(op_id) if kind == "cuda" else None
        if top is None:
            if kind == "cuda":
                if op is not None and op.iteration is not None and not compiled and not fused_ops(k.name):
                    pending.append((op, k.duration_us, _heir_ops(op, by_id, heirs), k, launch))
                else:
                    leftover.append((k, op.iteration if op is not None else None, op_id))
            continue
        rec = matched[top]
        direct_us[top] += k.duration_us
        device_us[rec] += k.duration_us
        if op is not None and op.iteration is not None:
            per_iteration_us[rec][op.iteration] += k.duration_us
        kernel_n[rec] += 1
        owned[rec].append(k)
        if launch is not None:
            delay_us[rec] += max(0.0, k.start_us - launch.end_us)

    # ---- time under no counted op: the counted ops inside the innermost op around it that holds any, else the
    # open records of its gap (see the docstring's NB)
    for op, us, tops, k, launch in pending:
        iteration: int = op.iteration  # type: ignore[assignment]
        if tops:
            weights = [direct_us[top] for top in tops]
            total = sum(weights)
            shares = [
                (matched[top], w / total if total > 0 else 1 / len(tops)) for top, w in zip(tops, weights, strict=True)
            ]
        else:
            shares = gaps.shares(op)
        if not shares:
            if k is None:
                unmatched_us += us
            else:
                leftover.append((k, iteration, op.id))
            continue
        for rec, fraction in shares:
            device_us[rec] += us * fraction
            per_iteration_us[rec][iteration] += us * fraction
            if iteration not in matched_in[rec]:  # an open record of the gap: timed in this iteration now
                matched_in[rec].add(iteration)
                hits[rec] += 1
        if k is not None:  # one launch: counted once, with the heaviest share
            heaviest = max(shares, key=lambda item: item[1])[0]
            kernel_n[heaviest] += 1
            owned[heaviest].append(k)
            if launch is not None:
                delay_us[heaviest] += max(0.0, k.start_us - launch.end_us)

    # ---- a compiled CPU model's generated kernels (profiled as ops named graph_0_cpp_fused_..., under no counted
    # op) and the aten ops its graph calls under no counted op (with the ops inside them)
    if kind == "cpu" and compiled:
        for op in cpu_ops:
            if op.iteration is None or owner(op.id) is not None:
                continue
            if fused_ops(op.name) and op.self_us > 0:
                leftover.append((_as_kernel(op, op.self_us), op.iteration, op.id))
                unmatched_us -= op.self_us  # attributed below, or added back
            elif _launcher(op) is not None and _launcher(by_id.get(op.parent)) is None and op.duration_us > 0:
                leftover.append((_as_kernel(op, op.duration_us), op.iteration, op.id))
                unmatched_us -= op.duration_us  # its self time and its children's, all unowned

    # ---- fused kernels of a compiled model: by inductor's kernel name, on the ops no aten op timed; and the
    # kernels of the aten ops a compiled graph calls as they are (extern kernels: an mm for a counted addmm)
    fused_name: dict[int, str] = {}
    if leftover:
        by_iteration: dict[int | None, list[int]] = defaultdict(list)
        for position, (_, iteration, _) in enumerate(leftover):
            by_iteration[iteration].append(position)
        open_ops = [hits[i] == 0 for i in range(len(records))]
        for iteration, positions in by_iteration.items():
            launchers = [_launcher(by_id.get(leftover[p][2])) if compiled else None for p in positions]
            shares = attribute_fused(
                records, [leftover[p][0].name for p in positions], open_ops, weigh=weigh, launchers=launchers
            )
            for position, share in zip(positions, shares, strict=True):
                k = leftover[position][0]
                if not share:
                    unmatched_us += k.duration_us
                    unattributed += 1
                    continue
                heaviest = max(share, key=lambda item: item[1])[0]
                for rec, fraction in share:
                    device_us[rec] += k.duration_us * fraction
                    if fused_ops(k.name):  # NB: an extern kernel (a GEMM) fused nothing
                        fused_name.setdefault(rec, k.name)
                    if iteration is not None:
                        per_iteration_us[rec][iteration] += k.duration_us * fraction
                        if iteration not in matched_in[rec]:
                            matched_in[rec].add(iteration)
                            hits[rec] += 1
                    elif not hits[rec]:
                        hits[rec] = iters
                        matched_in[rec].update(range(iters))
                if kind == "cpu":
                    continue  # a CPU kernel: no launch, no launch facts
                kernel_n[heaviest] += 1  # one launch: its floor counted once
                owned[heaviest].append(k)
                launch = launch_by_corr.get(k.correlation) if k.correlation is not None else None
                if launch is not None:
                    delay_us[heaviest] += max(0.0, k.start_us - launch.end_us)

    ops = [
        OpTiming(
            index=record.index,
            device_time_s=device_us[i] * 1e-6 / iters,
            kernels=round(kernel_n[i] / iters),
            launch_delay_s=delay_us[i] * 1e-6 / iters,
            cpu_time_s=cpu_us[i] * 1e-6 / iters,
            samples_s=tuple(per_iteration_us[i][it] * 1e-6 for it in sorted(matched_in[i])),
            kernel_facts=kernel_facts(owned[i], iters),
            layout_time_s=sum(k.duration_us for k in owned[i] if is_layout_kernel(k.name)) * 1e-6 / iters,
            fused_kernel=fused_name.get(i, ""),
        )
        for i, record in enumerate(records)
        if hits[i]
    ]
    matched_ops = {op_id: records[i].index for op_id, i in matched.items()}
    op_owners = {op.id: records[rec].index for op in cpu_ops if (rec := owner(op.id)) is not None}
    busy_us = sum(_union_us(intervals) for intervals in spans.values())
    span_us = sum(max(e for _, e in iv) - min(s for s, _ in iv) for iv in spans.values())
    timing = Timing(
        device=kind,
        iterations=iters,
        wall_s=wall_s,
        ops=ops,
        kernel_count=round(len(kernels) / iters) if kind == "cuda" else 0,
        gpu_busy_s=busy_us * 1e-6 / iters if kind == "cuda" else 0.0,
        gpu_idle_s=max(span_us - busy_us, 0.0) * 1e-6 / iters if kind == "cuda" else 0.0,
        unmatched_time_s=unmatched_us * 1e-6 / iters,
        matched_ops=matched_ops,
        op_owners=op_owners,
    )
    timing.notes += _notes(records, hits, iters, len(candidates), len(kernels), unattributed, kind)
    if kind == "cuda" and kernels and not any(k.has_facts for k in kernels):
        timing.notes.append(f"no kernel launch facts (the profiler's trace has no grid or block): {NO_FACTS}")
    elif kind == "cpu":
        timing.notes.append(f"no kernel launch facts (a CPU run): {NO_FACTS}")
    return timing


# ------------------------------------------------------------------------------------------------ fused kernels

#: inductor's kernel names: triton_poi_fused_add_mul_tanh_0, triton_red_fused__softmax_1, cpp_fused_add_mul_0,
#: triton_per_fused_native_layer_norm_0, triton_tem_fused_addmm_0 (kind_, 'fused_', the aten ops, '_N'); a CPU
#: kernel profiled by inductor (cpp.enable_kernel_profile) is named graph_0_cpp_fused_add_mul_0
FUSED_KERNEL = re.compile(r"^(?:graph_\d+_)?(?:triton|cpp)_(?:[a-z]+_)?fused_(?P<ops>.+?)(?:_\d+)?$")

#: aten ops that do one counted op's work under another name in a compiled graph (inductor calls mm and adds the
#: bias in a fused kernel for a counted addmm; attention and convolution have several spellings): families
EXTERN_FAMILIES: tuple[frozenset[str], ...] = (
    frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot", "_addmm_activation"}),
    frozenset({"convolution", "_convolution", "cudnn_convolution", "conv2d", "conv1d", "conv3d", "mkldnn_convolution"}),
    frozenset(
        {
            "scaled_dot_product_attention",
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
            "_scaled_dot_product_flash_attention_for_cpu",
            "_flash_attention_forward",
            "_efficient_attention_forward",
        }
    ),
)


def extern_names(op: str) -> frozenset[str]:
    """The counted ops' short names an aten op launched by a compiled graph may stand for: its family's, or its own."""
    name = short_name(op)
    for family in EXTERN_FAMILIES:
        if name in family:
            return family
    return frozenset({name})


def _launcher(op: CpuOp | None) -> tuple[int, str] | None:
    """(op id, name) of the aten op that launched a kernel, None for anything else (a compiled region's wrapper)."""
    return (op.id, op.name) if op is not None and op.name.startswith("aten::") else None


def _as_kernel(op: CpuOp, duration_us: float) -> KernelEvent:
    """A CPU op of a compiled graph (a generated kernel, an aten op it calls) as a kernel event."""
    return KernelEvent(op.name, op.start_us, duration_us, stream=0, external_id=None, correlation=None)


FUSED_WINDOW = 512  # how far ahead of the last claimed op a fused kernel's first op is looked for


def short_name(op: str) -> str:
    """'aten::native_layer_norm' -> 'native_layer_norm' (inductor's spelling in kernel names)."""
    return op.split("::", 1)[-1].split(".", 1)[0]


def fused_ops(kernel: str, known: Iterable[str] = ()) -> list[str]:
    """The aten ops (short names) inductor fused into ``kernel``, from its name: [] when it is not a fused kernel.
    The '_'-joined tail is split into ``known`` names where it can be (op names hold '_' themselves:
    native_layer_norm, _softmax); the tail's '_'-separated words otherwise."""
    match = FUSED_KERNEL.match(kernel.split(".", 1)[0])
    if match is None:
        return []
    tail = match.group("ops")
    words = tail.split("_")
    names = {tuple(name.split("_")): name for name in known if name}
    best: list[list[str] | None] = [None] * (len(words) + 1)  # best[i]: a split of words[:i] into known names
    best[0] = []
    for i in range(len(words)):
        if best[i] is None:
            continue
        for key, name in names.items():
            j = i + len(key)
            if tuple(words[i:j]) == key and best[j] is None:
                best[j] = [*best[i], name]  # type: ignore[misc]
    if best[len(words)] is not None:
        return list(dict.fromkeys(best[len(words)]))  # type: ignore[arg-type]
    return list(dict.fromkeys(word for word in words if word))


def _weight_of(record: OpRecord) -> float:
    return float(record.bytes or 0)


def attribute_fused(
    records: Sequence[OpRecord],
    kernels: Sequence[str],
    open_ops: Sequence[bool],
    *,
    weigh: Callable[[OpRecord], float] | None = None,
    window: int = FUSED_WINDOW,
    launchers: Sequence[tuple[int, str] | None] = (),
) -> list[list[tuple[int, float]]]:
    """Per kernel name (one iteration's fused kernels, in launch order), the counted ops it fused as (record
    position, share of its time); [] where it cannot be attributed. Pure.

    ``records`` in execution order; ``open_ops[i]``: record i was not timed by an aten op of the profile (the
    ones a compiled graph fused away). A kernel takes, from where the previous kernel's ops ended, the first open
    op whose name its name holds and the open ops right after it whose names it holds too (views, which do no
    work, are skipped over; an op of another name, or one an aten op timed, ends the run); failing that, the
    first such run anywhere in the iteration not yet claimed. Its time is split in proportion to ``weigh``
    (roofline time; default compulsory bytes), equally where every weight is 0.

    ``launchers[i]``: (id, name) of the aten op that launched kernel i, where one did (a compiled graph calls
    cuBLAS, cuDNN and attention kernels through aten ops, which may not be the counted op: mm for an addmm). Such a
    kernel, unless its name is a fused kernel's, goes whole to one open counted op of its op's family
    (:func:`extern_names`), the first from the cursor; the kernels of one launching op go to the same counted op."""
    weigh = weigh or _weight_of
    short = [short_name(r.op) for r in records]
    known = set(short)
    claimed = [False] * len(records)
    extern_claimed = [False] * len(records)  # an extern op's counted op (a fused kernel may hold a share too)
    by_launcher: dict[int, list[tuple[int, float]]] = {}
    out: list[list[tuple[int, float]]] = []
    cursor = 0
    extern_cursor = 0

    def run_from(start: int, names: set[str]) -> list[int]:
        run = [start]
        i = start + 1
        while i < len(records):
            if open_ops[i] and not claimed[i] and short[i] in names:
                run.append(i)
            elif records[i].math != "none" or not open_ops[i]:
                break
            i += 1
        return run

    for position, kernel in enumerate(kernels):
        names = set(fused_ops(kernel, known))
        launcher = launchers[position] if position < len(launchers) else None
        if not names and launcher is not None:
            if launcher[0] in by_launcher:  # another kernel of the same op (a split-K GEMM's reduction)
                out.append(by_launcher[launcher[0]])
                continue
            family = extern_names(launcher[1])
            free = [i for i in range(len(records)) if open_ops[i] and not extern_claimed[i] and short[i] in family]
            if not free:  # NB: all claimed: the next iteration's extern ops (see below), the claims start over
                free = [i for i in range(len(records)) if open_ops[i] and short[i] in family]
                extern_claimed[:] = [False] * len(records)
                extern_cursor = 0
            ahead = [i for i in free if i >= extern_cursor]
            if not free:
                out.append([])
                continue
            chosen = (ahead or free)[0]
            extern_claimed[chosen] = True
            extern_cursor = chosen + 1
            by_launcher[launcher[0]] = [(chosen, 1.0)]
            out.append(by_launcher[launcher[0]])
            continue
        candidates = [i for i in range(len(records)) if open_ops[i] and not claimed[i] and short[i] in names]
        if not candidates:
            again = [i for i in range(len(records)) if open_ops[i] and short[i] in names]
            if not again:
                out.append([])
                continue
            # NB: every op of this name is claimed: the kernels of the next iteration (kernels whose iteration
            # is unknown come as one sequence), so the claims start over
            claimed[:] = [False] * len(records)
            cursor, candidates = 0, again
        ahead = [i for i in candidates if cursor <= i < cursor + window]
        run = run_from((ahead or candidates)[0], names)
        for i in run:
            claimed[i] = True
        cursor = run[-1] + 1
        weights = [max(float(weigh(records[i])), 0.0) for i in run]
        total = sum(weights)
        out.append([(i, w / total if total > 0 else 1 / len(run)) for i, w in zip(run, weights, strict=True)])
    return out


def kernel_facts(kernels: Sequence[KernelEvent], iters: int, top: int = TOP_KERNELS) -> tuple[KernelFacts, ...]:
    """An op's kernels grouped by name, per iteration (time and launches over ``iters``), the longest ``top``
    first; each with the launch facts of its longest launch."""
    by_name: dict[str, list[KernelEvent]] = defaultdict(list)
    for k in kernels:
        by_name[k.name].append(k)
    out = []
    for name, launches in by_name.items():
        longest = max(launches, key=lambda k: (k.has_facts, k.duration_us))
        out.append(
            KernelFacts(
                name=name,
                time_s=sum(k.duration_us for k in launches) * 1e-6 / iters,
                launches=max(round(len(launches) / iters), 1),
                grid=list(longest.grid) if longest.grid else None,
                block=list(longest.block) if longest.block else None,
                registers_per_thread=longest.registers_per_thread,
                shared_memory_bytes=longest.shared_memory_bytes,
                blocks_per_sm=longest.blocks_per_sm,
                warps_per_sm=longest.warps_per_sm,
                occupancy=longest.occupancy,
                active_blocks_per_sm=longest.active_blocks_per_sm,
            )
        )
    out.sort(key=lambda f: (-f.time_s, f.name))
    return tuple(out[:top])


class _OpsAt:
    """The innermost op around a time on a thread: the last op started by then, or the nearest of its parents
    that is still running (ops on one thread nest)."""

    def __init__(self, ops: Sequence[CpuOp], by_id: Mapping[int, CpuOp]) -> None:
        self._by_id = by_id
        self._threads: dict[int, tuple[list[float], list[CpuOp]]] = {}
        for op in ops:  # start order
            starts, listed = self._threads.setdefault(op.thread, ([], []))
            starts.append(op.start_us)
            listed.append(op)

    def innermost(self, thread: int, t: float) -> int | None:
        starts, listed = self._threads.get(thread, ([], []))
        position = bisect.bisect_right(starts, t) - 1
        op = listed[position] if position >= 0 else None
        while op is not None and op.end_us < t:
            op = self._by_id.get(op.parent) if op.parent is not None else None
        return op.id if op is not None else None


def _notes(
    records: Sequence[OpRecord], hits: list[int], iters: int, seen: int, kernels: int, unattributed: int, kind: str
) -> list[str]:
    notes = []
    if not seen:
        notes.append("the profiler recorded none of the counted ops: no per-op times")
        return notes
    missing = [r for r, n in zip(records, hits, strict=True) if n == 0]
    if missing:
        ops = sorted({r.op for r in missing})
        shown = ", ".join(ops[:5]) + (", ..." if len(ops) > 5 else "")
        notes.append(f"{len(missing)} of {len(records)} counted ops were not found in the profile ({shown})")
    partial = sum(1 for n in hits if 0 < n < iters)
    if partial:
        notes.append(f"{partial} counted ops were found in only some of the {iters} timed iterations")
    if kind == "cuda" and not kernels:
        notes.append("the profiler recorded no GPU kernels (is CUPTI available to this process?)")
    if unattributed and kind == "cuda":
        notes.append(f"{round(unattributed / iters)} kernels per iteration could not be attributed to a counted op")
    return notes


__all__ = [
    "ALIGN_WINDOW",
    "FUSED_KERNEL",
    "LOOKAHEAD",
    "NO_FACTS",
    "TOP_KERNELS",
    "CpuOp",
    "LaunchCall",
    "ProfiledEvents",
    "align",
    "attribute_fused",
    "fused_ops",
    "join",
    "kernel_facts",
    "launch_facts",
    "match_key",
    "parse_events",
    "short_name",
]
