"""Collectives in a diagnosed rank: taken out of the counted ops, found in the profiler's trace, timed, placed on
the communication roof, and the communication measured against the compute it overlaps. Pure: no torch.

- :func:`split_records`: the counting pass's records -> the compute records (renumbered, what the roofline places)
  and the collective calls (kind, message bytes exact from the shapes; :mod:`roofline.costs.collectives`);
- :func:`trace_activity`: a torch.profiler Chrome trace -> the collectives' work (gloo's and NCCL's record_function
  events on the CPU, NCCL's kernels on a GPU) and the compute intervals (aten ops on the CPU, other kernels on a GPU);
- :func:`match_ranks`: every rank's work -> the same work with each call's wait told from its transfer: a collective
  is matched across the ranks by its place in the process group's sequence (the k-th call of its class on every
  rank is one call); its transfer is its shortest duration across the ranks (the rank that arrived last waited for
  nobody), the rest of each rank's duration is wait (for a rank behind it: skew, a straggler upstream);
- :func:`collective_rows`: calls x work -> one row per call (median transfer time over the profiled iterations,
  algbw, busbw, the roof's time and the efficiency, all of the transfer; the wait apart);
- :func:`overlap`: exposed vs overlapped communication, from intervals (the transfers; the waits apart);
- :func:`skew`: per-rank iteration times -> the slowest rank against the median, the stragglers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from roofline.costs.collectives import (
    CommRoof,
    bus_factor,
    is_communication_op,
    kind_of,
    message_bytes,
    work_class,
    work_kind,
)
from roofline.dtypes import BITS
from roofline.report.records import OpRecord
from roofline.samples import median

Interval = tuple[float, float]  # (start, end), seconds or microseconds alike

#: a rank is a straggler when its iteration takes this much longer than the median rank's
STRAGGLER_RATIO = 1.10

#: the profiler's element type names (a trace's "Input type") -> bytes per element
_TRACE_ITEMSIZE = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "long": 8,
    "int64_t": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
}


@dataclass(frozen=True)
class CollectiveCall:
    """One collective the counting pass saw in an iteration, in order."""

    position: int  # among the iteration's collectives
    op: str  # 'c10d::allreduce_'
    kind: str  # 'all_reduce'
    bytes: int | None  # S (nccl-tests' message size); None: a dtype we cannot size
    dtype: str
    phase: str
    module: str
    shapes: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Work:
    """A collective's work in the trace: gloo's/NCCL's record_function event or an NCCL kernel."""

    name: str
    cls: str  # its work class ('all_reduce', ..., 'sendrecv')
    start_us: float
    end_us: float
    bytes: int | None = None  # from the event's input dims and type (gloo: the input tensor), None unknown
    wait_us: float = 0.0  # of the duration, the wait for the last rank (match_ranks)
    call_transfer_us: float | None = None  # the matched call's transfer (match_ranks); None: duration - wait
    shortest_us: float | None = None  # the matched call's shortest duration across the ranks, as measured
    early: bool = False  # the shortest duration was under the roof's time: peers sent before the last arrived

    @property
    def duration_us(self) -> float:
        return max(self.end_us - self.start_us, 0.0)

    @property
    def transfer_us(self) -> float:
        if self.call_transfer_us is not None:
            return self.call_transfer_us
        return max(self.duration_us - self.wait_us, 0.0)

    @property
    def transfer_interval(self) -> Interval:
        """When the message moved on this rank: the end of the call (a collective's kernel starts, waits for its
        peers, then moves the data), at most the whole call."""
        return (max(self.start_us, self.end_us - self.transfer_us), self.end_us)

    @property
    def wait_interval(self) -> Interval:
        return (self.start_us, self.start_us + min(self.wait_us, self.duration_us))


@dataclass
class Activity:
    """What a rank's trace shows: the collectives' work, the compute intervals and the profiled iterations."""

    work: list[Work] = field(default_factory=list)
    compute: list[Interval] = field(default_factory=list)  # microseconds
    iterations: int = 0  # roofline::iteration markers seen
    iteration_us: list[float] = field(default_factory=list)  # their durations: the profiled iterations' times
    device: str = "cpu"  # 'cuda' when the trace holds kernels


@dataclass(frozen=True)
class Overlap:
    """Communication against compute on one rank, per iteration (seconds)."""

    communication_s: float  # the union of the collectives' intervals
    overlapped_s: float  # of it, while compute ran
    exposed_s: float  # of it, with no compute running: what the step waits for

    @property
    def exposed_share(self) -> float:
        return self.exposed_s / self.communication_s if self.communication_s > 0 else 0.0


@dataclass(frozen=True)
class Skew:
    """Per-rank iteration times: the median, the slowest rank and how far it is above the median."""

    median_s: float
    slowest_rank: int
    slowest_s: float
    ratio: float  # slowest / median
    stragglers: tuple[int, ...]  # ranks above STRAGGLER_RATIO x the median


# ------------------------------------------------------------------------------------------------ counting


def itemsize(dtype: str) -> int | None:
    bits = BITS.get(dtype)
    return None if bits is None or bits % 8 else bits // 8


def split_records(records: Sequence[OpRecord], ranks: int) -> tuple[list[OpRecord], list[CollectiveCall]]:
    """The counted records without the communication ops (renumbered in order, their inputs' producers remapped;
    a collective's output becomes an input from outside), and the collective calls with their message bytes."""
    keep: dict[int, int] = {}
    compute: list[OpRecord] = []
    calls: list[CollectiveCall] = []
    for record in records:
        kind = kind_of(record.op)
        if kind is not None:
            dtype = next((d for d in record.input_dtypes if d), "")
            size = itemsize(dtype)
            shapes = record.input_shapes
            nbytes = None if size is None else message_bytes(record.op, shapes, record.output_shapes, size, ranks)
            calls.append(
                CollectiveCall(len(calls), record.op, kind, nbytes, dtype, record.phase, record.module, shapes)
            )
            continue
        if is_communication_op(record.op):
            continue
        keep[record.index] = len(compute)
        producers = tuple(None if p is None else keep.get(p) for p in record.input_producers)
        compute.append(dataclasses.replace(record, index=len(compute), input_producers=producers))
    return compute, calls


def without_communication(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The timing pass's event dicts without the communication ops and kernels, so the join times compute only."""
    out = []
    for event in events:
        name = str(event.get("name", ""))
        if event.get("kind") == "op" and is_communication_op(name):
            continue
        if event.get("kind") == "kernel" and work_kind(name) is not None:
            continue
        out.append(event)
    return out


# ------------------------------------------------------------------------------------------------ the trace


#: the profiler's NCCL metadata dtype names (record_param_comms, and the NCCL kernels' args) -> bytes per element
_COMMS_ITEMSIZE = {"Float": 4, "BFloat16": 2, "Half": 2, "Double": 8, "Long": 8, "Int": 4, "Short": 2, "Byte": 1,
                   "Char": 1, "Bool": 1, "Float8_e4m3fn": 1, "Float8_e5m2": 1}  # fmt: skip


def _comms_bytes(args: dict[str, Any], cls: str) -> int | None:
    """S from the profiler's NCCL metadata ('In msg nelems', 'Out msg nelems', 'dtype'), where an event has it:
    the gathered output for an all-gather, the input otherwise."""
    size = _COMMS_ITEMSIZE.get(str(args.get("dtype", "")))
    key = "Out msg nelems" if cls == "all_gather" else "In msg nelems"
    count = args.get(key)
    if size is None or not isinstance(count, int):
        return None
    return count * size


def _trace_bytes(args: dict[str, Any]) -> int | None:
    dims, types = args.get("Input Dims"), args.get("Input type")
    if not isinstance(dims, list) or not dims or not isinstance(types, list) or not types:
        return None
    size = _TRACE_ITEMSIZE.get(str(types[0]))
    if size is None or not isinstance(dims[0], list) or not all(isinstance(d, int) for d in dims[0]):
        return None
    count = 1
    for d in dims[0]:
        count *= d
    return count * size


def trace_activity(trace: Any, marker: str = "roofline::iteration") -> Activity:
    """A Chrome trace (torch.profiler's export, parsed) -> the collectives' work, compute intervals, iterations.

    A GPU trace (NCCL kernels in it): the work is the NCCL kernels and the compute every other kernel; a CPU trace:
    the work is the backends' record_function events ('gloo:all_reduce', on gloo's worker threads), and the
    compute every aten op (the c10d ops that only enqueue the work are not compute)."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    activity = Activity()
    if not isinstance(events, list):
        return activity
    kernels = [e for e in events if isinstance(e, dict) and str(e.get("cat", "")).lower() == "kernel"]
    activity.device = "cuda" if kernels else "cpu"
    ops: list[tuple[Any, float, float]] = []  # aten ops: (thread, start, end)
    enqueue: list[tuple[Any, float, float]] = []  # c10d ops on the CPU: (thread, start, end)
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        name = str(event.get("name", ""))
        cat = str(event.get("cat", "")).lower()
        try:
            start = float(event["ts"])
            end = start + float(event.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        if name == marker and cat == "user_annotation":
            activity.iterations += 1
            activity.iteration_us.append(end - start)
            continue
        cls = work_kind(name)
        if activity.device == "cuda":
            if cat != "kernel":
                continue
            if cls is not None:
                args = event.get("args") if isinstance(event.get("args"), dict) else {}
                activity.work.append(Work(name, cls, start, end, _comms_bytes(args, cls)))
            else:
                activity.compute.append((start, end))
            continue
        if cls is not None and cat in ("user_annotation", "cpu_instant_event", "cpu_op"):
            args = event.get("args") if isinstance(event.get("args"), dict) else {}
            activity.work.append(Work(name, cls, start, end, _trace_bytes(args)))
        elif cat == "cpu_op" and name.startswith("aten::"):
            ops.append((event.get("tid"), start, end))
        elif cat == "cpu_op" and is_communication_op(name):
            enqueue.append((event.get("tid"), start, end))
    # NB: aten ops inside a c10d op on its thread (gloo's chunking and copies of the buffers) are the collective's
    if activity.device == "cpu":
        activity.compute = [
            (a, b) for tid, a, b in ops if not any(t == tid and s <= a and b <= e for t, s, e in enqueue)
        ]
    activity.work.sort(key=lambda w: w.start_us)
    return activity


# ------------------------------------------------------------------------------------------------ intervals


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """The intervals merged: sorted, disjoint."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def length(intervals: Iterable[Interval]) -> float:
    return sum(b - a for a, b in union(intervals))


def intersection(a: Iterable[Interval], b: Iterable[Interval]) -> float:
    """The length of union(a) intersected with union(b)."""
    left, right = union(a), union(b)
    i = j = 0
    total = 0.0
    while i < len(left) and j < len(right):
        lo = max(left[i][0], right[j][0])
        hi = min(left[i][1], right[j][1])
        if hi > lo:
            total += hi - lo
        if left[i][1] < right[j][1]:
            i += 1
        else:
            j += 1
    return total


def overlap(
    communication: Sequence[Interval], compute: Sequence[Interval], iterations: int, scale: float = 1e-6
) -> Overlap:
    """Communication vs compute over ``iterations`` (per iteration; ``scale`` turns the intervals' unit into
    seconds, 1e-6 for a trace's microseconds): the union of the collectives' intervals, the part of it during which
    some compute ran (overlapped), the rest (exposed)."""
    n = max(iterations, 1)
    total = length(communication)
    hidden = intersection(communication, compute)
    return Overlap(total * scale / n, hidden * scale / n, (total - hidden) * scale / n)


def skew(times: dict[int, float], ratio: float = STRAGGLER_RATIO) -> Skew | None:
    """The ranks' iteration times -> the slowest against the median, and the stragglers (above ``ratio`` x the
    median). None without times."""
    if not times:
        return None
    mid = median(list(times.values()))
    slowest = max(times, key=lambda r: (times[r], -r))
    over = tuple(sorted(r for r, t in times.items() if mid > 0 and t > ratio * mid))
    return Skew(mid, slowest, times[slowest], times[slowest] / mid if mid > 0 else 1.0, over)


def match_ranks(
    work: dict[int, Sequence[Work]], floor_us: Callable[[Work], float] | None = None
) -> tuple[dict[int, list[Work]], list[str]]:
    """Every rank's collective work with each call's wait told from its transfer, and notes.

    A call is matched across the ranks by its place in the process group's sequence: the k-th work event of a class
    (all-reduce, all-gather, ...) on every rank, in start order, is the same call (NCCL and gloo run a group's
    collectives in the order every rank issued them). Its transfer is the shortest duration across the ranks: the
    rank that arrived last waited for nobody. Every other rank's duration beyond it is wait. A class whose count
    differs between the ranks is left as it is (all of its time counted as transfer) and named in a note.

    ``floor_us``: the least time a call can move its message in (the communication roof's time for its bytes).
    The transfer is never below it: a last rank's call shorter than its message at the roof found most of the
    message already there, sent by its peers into its buffers while it was not yet in the call (NCCL's buffers
    take up to NCCL_BUFFSIZE per channel before the receiver runs); that call's transfer is the roof's time, its
    peers' wait shrinks by as much, and it is marked ``early`` (seen on two H100s: a 170 MB all-reduce whose last
    rank took 118 us, 1.4 TB/s of bus bandwidth)."""
    ranks = sorted(work)
    if len(ranks) < 2:
        return {r: list(work[r]) for r in ranks}, []
    by_class: dict[int, dict[str, list[int]]] = {}
    for r in ranks:
        classes: dict[str, list[int]] = {}
        ordered = sorted(range(len(work[r])), key=lambda i: work[r][i].start_us)
        for i in ordered:
            classes.setdefault(work[r][i].cls, []).append(i)
        by_class[r] = classes
    out = {r: list(work[r]) for r in ranks}
    notes: list[str] = []
    for cls in sorted({c for r in ranks for c in by_class[r]}):
        counts = {r: len(by_class[r].get(cls, [])) for r in ranks}
        if len(set(counts.values())) != 1:
            shown = ", ".join(f"rank {r}: {n}" for r, n in counts.items())
            notes.append(f"{cls}: the ranks ran different numbers of calls ({shown}): wait not told from transfer")
            continue
        for k in range(counts[ranks[0]]):
            places = {r: by_class[r][cls][k] for r in ranks}
            shortest = min(work[r][i].duration_us for r, i in places.items())
            least = max((floor_us(work[r][i]) for r, i in places.items()), default=0.0) if floor_us else 0.0
            transfer = max(shortest, least)
            for r, i in places.items():
                w = work[r][i]
                out[r][i] = dataclasses.replace(
                    w,
                    wait_us=max(w.duration_us - transfer, 0.0),
                    call_transfer_us=transfer,
                    shortest_us=shortest,
                    early=least > shortest,
                )
    return out, notes


def roof_floor(roof: CommRoof, ranks: int) -> Callable[[Work], float]:
    """The least transfer of a work event on ``roof`` (microseconds): the roof's time for its bytes, its latency
    where the trace gives no bytes."""

    def floor(work: Work) -> float:
        kind = {"sendrecv": "send", "nccl": "all_reduce"}.get(work.cls, work.cls)
        if work.bytes is None:
            return roof.latency_s * 1e6
        return roof.time_s(kind, work.bytes, ranks) * 1e6

    return floor


@dataclass(frozen=True)
class Waits:
    """One rank's wait in its collectives, per iteration (seconds): all of it, and the part with no compute beside."""

    wait_s: float
    exposed_s: float


def waits(work: Sequence[Work], compute: Sequence[Interval], iterations: int, scale: float = 1e-6) -> Waits:
    """The wait intervals of ``work`` (match_ranks) against compute, per iteration."""
    intervals = [w.wait_interval for w in work if w.wait_us > 0]
    n = max(iterations, 1)
    total = length(intervals)
    return Waits(total * scale / n, (total - intersection(intervals, compute)) * scale / n)


# ------------------------------------------------------------------------------------------------ rows


def _classes(calls: Sequence[CollectiveCall], backend: str) -> dict[str, list[CollectiveCall]]:
    out: dict[str, list[CollectiveCall]] = {}
    for call in calls:
        cls = work_class(call.kind)
        if backend == "gloo" and call.kind == "reduce_scatter":
            cls = "all_reduce"  # NB: gloo runs reduce_scatter_tensor as an all-reduce (its profile says so)
        out.setdefault(cls, []).append(call)
    return out


def collective_rows(
    calls: Sequence[CollectiveCall],
    work: Sequence[Work],
    iterations: int,
    ranks: int,
    *,
    backend: str = "",
    roof: CommRoof | None = None,
    rank: int | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per counted collective call (its median transfer time over the profiled iterations: the k-th work
    event of its class in each iteration is its; its wait apart, see match_ranks), and rows for the work no counted
    call explains (its bytes from the trace where the trace gives them). Returns (rows, notes)."""
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    by_class = _classes(calls, backend)
    work_by_class: dict[str, list[Work]] = {}
    for w in work:
        work_by_class.setdefault(w.cls, []).append(w)
    if "nccl" in work_by_class:  # NB: kernels that do not name their collective: every call matched in order
        by_class = {"nccl": list(calls)} if calls else {}
        work_by_class = {"nccl": sorted(work, key=lambda w: w.start_us)}
    n = max(iterations, 1)
    for cls in sorted(set(by_class) | set(work_by_class)):
        counted = by_class.get(cls, [])
        seen = work_by_class.get(cls, [])
        if counted and len(seen) == len(counted) * n:
            for k, call in enumerate(counted):
                mine = [seen[i * len(counted) + k] for i in range(n)]
                rows.append(_row(call.kind, call.op, call.bytes, mine, 1.0, call, ranks, roof, rank, "counted"))
            continue
        if counted and seen and all(w.bytes is not None for w in seen):
            # NB: DDP packs its buckets anew after its first iterations (the counting pass saw those): the profile's
            # calls, with their bytes from the trace, are what the step does now
            notes.append(
                f"{cls}: the counting pass saw {len(counted)} call(s) an iteration, the profile {len(seen)} in "
                f"{n} iteration(s) (DDP rebuilds its buckets after its first iterations): the profile's calls, "
                "bytes from the trace"
            )
            phases = {c.phase for c in counted}
            phase = phases.pop() if len(phases) == 1 else ""  # the counted calls' phase, where they share one
            for size, group in _by_bytes(seen).items():
                row = _row(
                    counted[0].kind, group[0].name, size, group, len(group) / n, None, ranks, roof, rank, "profile"
                )
                rows.append({**row, "phase": phase})
            continue
        if counted:
            notes.append(
                f"{cls}: the counting pass saw {len(counted)} call(s) an iteration, the profile {len(seen)} in "
                f"{n} iteration(s): timed by the median of the kind's calls"
            )
            for call in counted:
                rows.append(_row(call.kind, call.op, call.bytes, list(seen), 1.0, call, ranks, roof, rank, "counted"))
            continue
        for size, group in _by_bytes(seen).items():
            kind = {"sendrecv": "send", "nccl": "all_reduce"}.get(cls, cls)  # NB: the factor of an unnamed kernel
            rows.append(_row(kind, group[0].name, size, group, len(group) / n, None, ranks, roof, rank, "profile"))
        notes.append(
            f"{cls}: {len(seen)} call(s) in the profile that the counting pass did not see (bytes from the trace)"
        )
    return rows, notes


def _by_bytes(work: Sequence[Work]) -> dict[int | None, list[Work]]:
    groups: dict[int | None, list[Work]] = {}
    for w in work:
        groups.setdefault(w.bytes, []).append(w)
    return groups


def _row(
    kind: str,
    op: str,
    size: int | None,
    work: Sequence[Work],
    calls: float,
    call: CollectiveCall | None,
    ranks: int,
    roof: CommRoof | None,
    rank: int | None,
    source: str,
) -> dict[str, Any]:
    factor = bus_factor(kind, ranks)
    time_s = median([w.transfer_us * 1e-6 for w in work]) if work else 0.0
    wait_s = median([w.wait_us * 1e-6 for w in work]) if work else 0.0
    shortest = [w.shortest_us * 1e-6 for w in work if w.shortest_us is not None]
    alg = size / time_s if size is not None and time_s > 0 else None
    roof_s = roof.time_s(kind, size, ranks) if roof is not None and size is not None else None
    return {
        "rank": rank,
        "kind": kind,
        "op": op,
        "phase": call.phase if call else "",
        "module": call.module if call else "",
        "dtype": call.dtype if call else "",
        "calls": calls,  # per iteration
        "bytes": size,  # S, one call
        "bus_bytes": None if size is None else size * factor,
        "time_s": time_s,  # one call's transfer, median over the iterations (the shortest across the ranks)
        "wait_s": wait_s,  # one call's wait for the last rank on this rank, median over the iterations
        "duration_s": median([w.duration_us * 1e-6 for w in work]) if work else 0.0,  # this rank's: wait + transfer
        # the call's shortest duration across the ranks as measured, and whether it was under the roof's time
        # (its peers sent before its last rank arrived; the transfer is then the roof's time: match_ranks)
        "shortest_s": median(shortest) if shortest else None,
        "early": any(w.early for w in work),
        "algbw_bytes_per_s": alg,
        "busbw_bytes_per_s": None if alg is None else alg * factor,
        "roof_time_s": roof_s,
        "efficiency": roof_s / time_s if roof_s is not None and time_s > 0 else None,  # of the transfer
        "source": source,  # 'counted': bytes from the counting pass; 'profile': from the trace
    }


__all__ = [
    "Activity",
    "CollectiveCall",
    "Overlap",
    "Skew",
    "Waits",
    "Work",
    "collective_rows",
    "intersection",
    "length",
    "match_ranks",
    "overlap",
    "roof_floor",
    "skew",
    "split_records",
    "trace_activity",
    "union",
    "waits",
    "without_communication",
]
