"""The timing pass: run the model under torch.profiler (no dispatch mode of ours) and join what it saw (CPU ops,
GPU kernels, kernel launch calls) to the ops the counting pass recorded.

Two layers:
  * pure: :func:`parse_events` turns plain event dicts into :class:`CpuOp`, :class:`~records.KernelEvent` and
    :class:`LaunchCall` values, and :func:`join` matches them to the OpRecords -> :class:`~records.Timing`.
    Tested with hand-built events; no torch.
  * torch: :func:`torch_profile` runs the iterations under ``torch.profiler.profile`` and converts its
    FunctionEvent list into those dicts (:func:`events_from_profiler`); :func:`time_model` drives it all.

Event dicts (what a ``profile`` function returns; times in microseconds on one clock):
  {"kind": "iteration", "start_us", "end_us"}                 one timed iteration (a record_function marker)
  {"kind": "op", "id", "name", "start_us", "end_us", "thread", "input_shapes"}
                                                              a CPU op; input_shapes: tensor inputs only
  {"kind": "kernel", "name", "start_us", "end_us", "stream", "external_id", "correlation"}
                                                              a GPU kernel (memcpy/memset too);
                                                              external_id = id of the CPU op that launched it
  {"kind": "launch", "name", "start_us", "end_us", "thread", "correlation"}
                                                              a launch API call (cudaLaunchKernel...)
Optional in an op: "iteration" (else: the iteration marker containing its start), "parent" (else: the innermost
op containing it on its thread), "self_us" (else: its duration minus its direct children's).
"""

from __future__ import annotations

import bisect
import re
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from roofline.errors import DeviceError, RooflineError, UsageError, UserCodeError, WorkloadError
from roofline.report.records import KernelEvent, OpRecord, OpTiming, Timing

MARKER = "roofline::iteration"  # record_function name around each timed iteration

# profile(step, iters, device) -> (event dicts, seconds the `iters` iterations took end to end)
ProfileFn = Callable[[Callable[[], object], int, str], tuple[list[dict[str, Any]], float]]

# Profiler "dtype" strings of arguments that are not tensors ('' = None, a string, a device...).
NON_TENSOR_DTYPES = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "None", "String"})


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
        else:
            raise ValueError(f"unknown profiler event kind {kind!r}")
    markers.sort()
    out.iterations = len(markers)
    out.ops = _build_ops(raw_ops, markers)
    out.kernels.sort(key=lambda k: k.start_us)
    return out


def _id_or_none(value: Any) -> int | None:
    return int(value) if value not in (None, 0, "") else None


def _iteration_at(markers: Sequence[tuple[float, float]], t: float) -> int | None:
    for index, (start, end) in enumerate(markers):
        if start <= t <= end:
            return index
    return None


def _build_ops(raw: Sequence[Mapping[str, Any]], markers: Sequence[tuple[float, float]]) -> list[CpuOp]:
    """Ops in start order (parents before children) with iteration, parent and self time filled in."""
    ordered = sorted(raw, key=lambda e: (float(e["start_us"]), -float(e["end_us"])))
    parents: dict[int, int | None] = {}
    by_thread: dict[int, list[Mapping[str, Any]]] = defaultdict(list)
    for event in ordered:
        by_thread[int(event.get("thread") or 0)].append(event)
    for events in by_thread.values():
        stack: list[Mapping[str, Any]] = []
        for event in events:
            start, end = float(event["start_us"]), float(event["end_us"])
            while stack and not (float(stack[-1]["start_us"]) <= start and end <= float(stack[-1]["end_us"])):
                stack.pop()
            given = event.get("parent")
            parents[int(event["id"])] = int(given) if given is not None else (int(stack[-1]["id"]) if stack else None)
            stack.append(event)
    child_time: dict[int, float] = defaultdict(float)
    for event in ordered:
        parent = parents[int(event["id"])]
        if parent is not None:
            child_time[parent] += float(event["end_us"]) - float(event["start_us"])
    ops = []
    for event in ordered:
        op_id, start, end = int(event["id"]), float(event["start_us"]), float(event["end_us"])
        iteration = event.get("iteration")
        if iteration is None:
            iteration = _iteration_at(markers, start) if markers else 0
        self_us = event.get("self_us")
        if self_us is None:
            self_us = max(end - start - child_time[op_id], 0.0)
        ops.append(
            CpuOp(
                id=op_id,
                name=str(event["name"]),
                start_us=start,
                end_us=end,
                input_shapes=tuple(tuple(int(d) for d in shape) for shape in event.get("input_shapes") or ()),
                thread=int(event.get("thread") or 0),
                iteration=None if iteration is None else int(iteration),
                parent=parents[op_id],
                self_us=float(self_us),
            )
        )
    return ops


# ------------------------------------------------------------------------------------------------ join


ALIGN_WINDOW = 256  # how far ahead in the profiler's ops a record's match is looked for


def align(a: Sequence[Hashable], b: Sequence[Hashable], window: int = ALIGN_WINDOW) -> list[tuple[int, int]]:
    """Pairs (i, j) with a[i] == b[j], in order in both: each a[i] takes the first equal b[j] within ``window``
    after the last match (else it stays unmatched). NB: linear in len(a) x window; a longest-common-subsequence
    diff (difflib) went quadratic and hung on the ~10k repetitive ops of a recurrent model's training step."""
    positions: dict[Hashable, list[int]] = defaultdict(list)
    for j, item in enumerate(b):
        positions[item].append(j)
    cursor: dict[Hashable, int] = defaultdict(int)  # per item: index into its positions list
    pairs: list[tuple[int, int]] = []
    j = 0
    for i, item in enumerate(a):
        where = positions.get(item)
        if not where:
            continue
        k = cursor[item]
        while k < len(where) and where[k] < j:
            k += 1
        cursor[item] = k
        if k < len(where) and where[k] < j + window:
            pairs.append((i, where[k]))
            j = where[k] + 1
            cursor[item] = k + 1
    return pairs


def _align_records(records: Sequence[OpRecord], candidates: Sequence[CpuOp]) -> list[tuple[int, int]]:
    """Match by (op, input shapes) first; in the gaps left between those matches, by op name alone (shapes
    spelled differently, e.g. a TensorList or a wrapped scalar, must not cost a match)."""
    pairs = align([r.signature() for r in records], [c.signature() for c in candidates])
    out: list[tuple[int, int]] = []
    prev_i = prev_j = 0
    for i, j in [*pairs, (len(records), len(candidates))]:
        if i > prev_i and j > prev_j:
            gap = align([r.op for r in records[prev_i:i]], [c.name for c in candidates[prev_j:j]])
            out += [(prev_i + gi, prev_j + gj) for gi, gj in gap]
        if i < len(records):
            out.append((i, j))
        prev_i, prev_j = i + 1, j + 1
    return out


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
) -> Timing:
    """Join the profiler's ops and kernels to the counted ops; every figure is per iteration (over ``iters``).

    Matching: in each iteration, the records are aligned in order with the profiler's ops by (op name, input
    tensor shapes), among the outermost ops whose name some record has (the profiler also sees composite ops
    such as aten::linear, and the ops called inside a recorded op, which the counting pass does not).
    Attribution: a kernel belongs to the CPU op that launched it (its external id), and so to the nearest
    matched op at or above that one; the same holds for the self CPU time of each op. What reaches no matched
    op is ``unmatched_time_s``. device 'cuda': device time = its kernels' durations, launch delay = kernel
    start - launch call end (clipped at 0); 'cpu' (default when there are no kernels): device time = CPU time.
    """
    if iters < 1:
        raise ValueError("iters must be at least 1")
    kind = ("cuda" if kernels else "cpu") if device is None else ("cuda" if device.startswith("cuda") else "cpu")
    records = sorted(records, key=lambda r: r.index)  # execution order
    cpu_ops = sorted(cpu_ops, key=lambda op: (op.start_us, -op.end_us))
    by_id = {op.id: op for op in cpu_ops}
    names = {r.op for r in records}

    covered: dict[int, bool] = {}  # op id -> it or an op above it has a recorded name

    def is_covered(op_id: int | None) -> bool:
        chain, current = [], op_id
        while current is not None and current in by_id and current not in covered:
            chain.append(current)
            current = by_id[current].parent
        result = covered.get(current, False) if current is not None else False
        for seen in reversed(chain):  # outermost first
            result = result or by_id[seen].name in names
            covered[seen] = result
        return covered.get(op_id, False) if op_id is not None else False

    # ---- match records to ops, per iteration
    candidates: dict[int, list[CpuOp]] = defaultdict(list)
    for op in cpu_ops:  # start order: parents before children
        if op.iteration is not None and op.name in names and not is_covered(op.parent):
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

    def owner(op_id: int | None) -> int | None:
        """Record position of the nearest matched op at or above ``op_id``."""
        chain = []
        while op_id is not None and op_id not in owner_cache:
            if op_id in matched:
                owner_cache[op_id] = matched[op_id]
                break
            chain.append(op_id)
            op_id = by_id[op_id].parent if op_id in by_id else None
        result = owner_cache.get(op_id) if op_id is not None else None
        for seen in chain:
            owner_cache[seen] = result
        return result

    device_us = [0.0] * len(records)
    per_iteration_us: list[dict[int, float]] = [defaultdict(float) for _ in records]  # record -> iteration -> us
    cpu_us = [0.0] * len(records)
    kernel_n = [0] * len(records)
    delay_us = [0.0] * len(records)
    unmatched_us = 0.0
    for op in cpu_ops:
        if op.iteration is None:
            continue
        if op.id in matched:
            cpu_us[matched[op.id]] += op.duration_us
        if kind == "cpu":
            rec = owner(op.id)
            if rec is None:
                unmatched_us += op.self_us
            else:
                device_us[rec] += op.self_us
                per_iteration_us[rec][op.iteration] += op.self_us

    # ---- kernels
    launch_by_corr = {launch.correlation: launch for launch in launches}
    ops_at = _OpsAt(cpu_ops, by_id)
    spans: dict[int, list[tuple[float, float]]] = defaultdict(list)
    unattributed = 0
    for k in kernels:
        launch = launch_by_corr.get(k.correlation) if k.correlation is not None else None
        op_id = k.external_id if k.external_id in by_id else None
        if op_id is None and launch is not None:  # no linked id (torch < 2.13), or an op the profiler folded away
            # (a child of the same name as its parent): the innermost op running when the launch call began
            op_id = ops_at.innermost(launch.thread, launch.start_us)
        op = by_id.get(op_id) if op_id is not None else None
        if op is not None and op.iteration is not None:
            spans[op.iteration].append((k.start_us, k.start_us + k.duration_us))
        rec = owner(op_id) if kind == "cuda" else None
        if rec is None:
            if kind == "cuda":
                unmatched_us += k.duration_us
                unattributed += 1
            continue
        device_us[rec] += k.duration_us
        if op is not None and op.iteration is not None:
            per_iteration_us[rec][op.iteration] += k.duration_us
        kernel_n[rec] += 1
        if launch is not None:
            delay_us[rec] += max(0.0, k.start_us - launch.end_us)

    ops = [
        OpTiming(
            index=record.index,
            device_time_s=device_us[i] * 1e-6 / iters,
            kernels=round(kernel_n[i] / iters),
            launch_delay_s=delay_us[i] * 1e-6 / iters,
            cpu_time_s=cpu_us[i] * 1e-6 / iters,
            samples_s=tuple(per_iteration_us[i][it] * 1e-6 for it in sorted(matched_in[i])),
        )
        for i, record in enumerate(records)
        if hits[i]
    ]
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
    )
    timing.notes += _notes(records, hits, iters, len(candidates), len(kernels), unattributed, kind)
    return timing


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


# ------------------------------------------------------------------------------------------------ torch


def _tensor_shapes(shapes: Any, dtypes: Any) -> list[list[int]]:
    """Shapes of the tensor arguments among the profiler's per-argument shapes (scalars, None and strings
    dropped by their dtype string; TensorLists flattened)."""
    out: list[list[int]] = []
    for position, shape in enumerate(shapes or ()):
        dtype = dtypes[position] if dtypes and position < len(dtypes) else None
        if shape and isinstance(shape[0], (list, tuple)):  # a TensorList: one shape per tensor
            out += [list(s) for s in shape]
        elif dtype is None:
            if shape:
                out.append(list(shape))
        elif dtype not in NON_TENSOR_DTYPES:
            out.append(list(shape))
    return out


_KERNEL_ACTIVITIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "concurrent_kernel"})
_RUNTIME_ACTIVITIES = frozenset(
    {"cuda_runtime", "cuda_driver", "privateuse1_runtime", "privateuse1_driver", "mtia_runtime", "xpu_runtime"}
)
_RUNTIME_NAME = re.compile(r"^(cuda|cu|hip)[A-Z]")  # cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel...
_AUTOGRAD_NODE = re.compile(r"^\w+Backward\d*$")  # AddmmBackward0


def _classify(e: Any, device_type: str, activity: str | None, linked: int, marker: str) -> str | None:
    """'kernel' | 'launch' | 'iteration' | 'op' | None (something else: annotations, kineto's own events).

    torch >= 2.13 names each event's activity type; older versions do not, and then names decide."""
    annotation = bool(getattr(e, "is_user_annotation", False)) or (activity or "").endswith("user_annotation")
    if device_type != "CPU":
        if annotation or e.name == marker:
            return None
        return "kernel" if activity is None or activity in _KERNEL_ACTIVITIES else None
    if getattr(e, "is_async", False):
        return None
    if e.name == marker:
        return "iteration"
    if activity is not None:
        if activity in _RUNTIME_ACTIVITIES or (linked and activity != "cpu_op"):
            return "launch"
        return "op" if activity == "cpu_op" else None
    if _RUNTIME_NAME.match(e.name):
        return "launch"
    if annotation or getattr(e, "is_python_function", False):
        return None
    return "op" if "::" in e.name or _AUTOGRAD_NODE.match(e.name) else None  # not e.g. 'Activity Buffer Request'


def events_from_profiler(function_events: Iterable[Any], marker: str = MARKER) -> list[dict[str, Any]]:
    """torch.profiler's FunctionEvent list (``prof.events()``) -> event dicts.

    A FunctionEvent whose device_type is not CPU is a kernel (or memcpy/memset): ``id`` is its correlation id,
    shared with its launch call, ``device_resource_id`` its stream and, from torch 2.13, ``linked_correlation_id``
    the id of the CPU op that launched it (its 'External id'). A runtime call (cudaLaunchKernel...) is a CPU
    event with the same ``id`` as its kernel. The ops are the other CPU events (``id`` = their External id; the
    two id spaces overlap). Without the linked id (torch < 2.13), :func:`join` finds the launching op as the
    innermost op around the launch call."""
    out: list[dict[str, Any]] = []
    for e in function_events:
        device_type = str(getattr(e, "device_type", "CPU")).rsplit(".", 1)[-1]
        activity = getattr(e, "activity_type", None)
        linked = int(getattr(e, "linked_correlation_id", 0) or 0)
        kind = _classify(e, device_type, activity, linked, marker)
        if kind is None:
            continue
        event: dict[str, Any] = {"kind": kind, "start_us": float(e.time_range.start), "end_us": float(e.time_range.end)}
        if kind == "kernel":
            event |= {
                "name": e.name,
                "stream": int(getattr(e, "device_resource_id", 0) or 0),
                "external_id": linked or None,
                "correlation": int(e.id),
            }
        elif kind == "launch":
            event |= {"name": e.name, "thread": int(e.thread), "correlation": int(e.id)}
        elif kind == "op":
            shapes = getattr(e, "structured_input_shapes", None) or getattr(e, "input_shapes", None)
            event |= {
                "id": int(e.id),
                "name": e.name,
                "thread": int(e.thread),
                "input_shapes": _tensor_shapes(shapes, getattr(e, "input_dtypes", None)),
            }
        out.append(event)
    return out


def torch_profile(step: Callable[[], object], iters: int, device: str) -> tuple[list[dict[str, Any]], float]:
    """Run ``step`` ``iters`` times under torch.profiler (CPU activity, plus CUDA on a GPU; record_shapes), each
    inside a record_function marker, timed end to end (CUDA events around the loop on a GPU, the host clock on
    the CPU). Returns the event dicts and the loop's seconds."""
    import os
    from contextlib import nullcontext

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # kineto's 'profiler_start/stop' lines on stderr, unless asked
    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    on_device = torch.cuda.device(torch.device(device)) if cuda else nullcontext()
    prof = profile(activities=activities, record_shapes=True)
    with on_device:
        with warnings.catch_warnings():
            # torch (2.11 seen) warns once that events are not accumulated across profiling cycles: we run one
            warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle.*")
            prof.start()
        try:
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
            else:
                t0 = time.perf_counter()
            for _ in range(iters):
                with record_function(MARKER):
                    step()
            if cuda:
                end.record()
                end.synchronize()
                loop_s = start.elapsed_time(end) * 1e-3
            else:
                loop_s = time.perf_counter() - t0
        finally:
            prof.stop()
    return events_from_profiler(prof.events()), loop_s


# ------------------------------------------------------------------------------------------------ driver


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.cuda.OutOfMemoryError, a RuntimeError saying 'out of memory', or the host allocator failing (as
    roofline.bench.run decides; repeated here so that diagnose does not import the bench machinery)."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def out_of_memory_error(where: str) -> DeviceError:
    return DeviceError(
        f"out of memory {where}: use less memory with --dtype bf16 (half the bytes of fp32), smaller inputs "
        "in get_inputs() (a smaller batch or sequence length), or --mode inference (no activations kept for "
        "the backward pass)"
    )


def _step(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], mode: str) -> Callable[[], object]:
    from roofline.diagnose.execute import run_once

    zero_grad = getattr(model, "zero_grad", None) if mode == "training" else None

    def step() -> object:
        if zero_grad is not None:
            zero_grad(set_to_none=True)  # every iteration as the first (and the counting pass): no grads yet
        return run_once(model, inputs, kwargs, mode)  # type: ignore[arg-type]

    return step


def time_model(
    model: Any,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    records: Sequence[OpRecord],
    *,
    device: str,
    mode: str = "inference",
    warmup: int = 3,
    iters: int = 10,
    profile: ProfileFn | None = None,
) -> Timing:
    """Warm up ``warmup`` iterations, time ``iters`` uninstrumented ones end to end (-> ``wall_s``), then run
    ``iters`` more under the profiler (``profile``, default :func:`torch_profile`) and join them to ``records``.
    The profiler's per-op overhead slows the iterations (1.7x on a 12-layer GPT on an H100, 6x on a tiny MLP) but
    not the kernels: kernel times and busy time come from the profile, the wall time from the plain run, and
    the GPU idle time is capped at wall - busy.

    WorkloadError when the counting pass saw no ops; DeviceError (naming what reduces memory) on out of memory;
    UserCodeError from the user's model passes through."""
    if not records:
        raise WorkloadError("the model ran no tensor operations")
    if iters < 1:
        raise UsageError(f"--iters {iters}: at least 1")
    if warmup < 0:
        raise UsageError(f"--warmup {warmup}: at least 0")
    cuda = str(device).startswith("cuda")
    step = _step(model, inputs, kwargs, mode)
    try:
        for _ in range(warmup):
            step()
        plain_s = _time_loop(step, iters, str(device))
        events, profiled_s = (profile or torch_profile)(step, iters, str(device))
    except UserCodeError as exc:
        if exc.__context__ is not None and is_out_of_memory(exc.__context__):
            raise out_of_memory_error(f"running the model on {device}") from None
        raise
    except RooflineError:
        raise
    except Exception as exc:
        if is_out_of_memory(exc):
            raise out_of_memory_error(f"running the model on {device}") from None
        raise
    finally:
        zero_grad = getattr(model, "zero_grad", None) if mode == "training" else None
        if zero_grad is not None:
            zero_grad(set_to_none=True)
    parsed = parse_events(events)
    wall_s = plain_s / iters
    timing = join(
        records,
        parsed.ops,
        parsed.kernels,
        iters,
        launches=parsed.launches,
        device="cuda" if cuda else "cpu",
        wall_s=wall_s,
    )
    if cuda and timing.gpu_busy_s > 0:
        # The profiler's per-op overhead delays launches and so stretches the gaps between kernels: the idle time
        # is at most what the uninstrumented iteration leaves beside the kernels.
        timing.gpu_idle_s = min(timing.gpu_idle_s, max(wall_s - timing.gpu_busy_s, 0.0))
    if profiled_s > 1.1 * plain_s > 0:
        from roofline.units import format_time

        what = "GPU idle time is bounded by the uninstrumented run" if cuda else "per-op CPU times include it"
        timing.notes.append(
            f"the profiler slowed each iteration from {format_time(wall_s)} to {format_time(profiled_s / iters)} "
            f"(its per-op overhead): {what}"
        )
    if parsed.iterations and parsed.iterations != iters:
        timing.notes.append(f"the profile holds {parsed.iterations} iterations, {iters} were timed")
    return timing


def _time_loop(step: Callable[[], object], iters: int, device: str) -> float:
    """Seconds that ``iters`` back-to-back calls of ``step`` take, uninstrumented (CUDA events around the loop on
    a GPU, the host clock on the CPU)."""
    if not device.startswith("cuda"):
        start = time.perf_counter()
        for _ in range(iters):
            step()
        return time.perf_counter() - start
    import torch

    with torch.cuda.device(torch.device(device)):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        begin.record()
        for _ in range(iters):
            step()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) * 1e-3


__all__ = [
    "MARKER",
    "CpuOp",
    "LaunchCall",
    "ProfileFn",
    "ProfiledEvents",
    "align",
    "events_from_profiler",
    "is_out_of_memory",
    "join",
    "out_of_memory_error",
    "parse_events",
    "time_model",
    "torch_profile",
]
