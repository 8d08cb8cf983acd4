"""Nsight Compute counters beside a diagnosis: measured bytes per op and the counters' bound.

:func:`attach` gives each diagnosed op (:class:`roofline.report.rows.OpPoint`) the counters of its kernels, found
by name: an op's kernels are its ``kernel_facts`` (the torch profiler's names, launches per iteration). Names are
compared as given, then normalised (no return type, parameters, namespaces, spaces or integer suffixes: ncu and
the torch profiler demangle differently), then by the bare function name. The launches of one kernel name are
shared out in the ops' order (eager ops launch in that order): when ncu holds a whole number of iterations of
them, launch by launch; otherwise each op gets its share of that name's summed counters by its measured kernel
time (``approximate``). Per op, per iteration: DRAM bytes read + written (measured) against the op's compulsory
bytes, L2 and L1 bytes, and the throughputs (% of peak, weighted by kernel duration).

The counters' bound is the busier unit: ``memory`` when the memory throughput % is at least the SM throughput %,
else ``compute``; ``low`` marks ops where both are under LOW_PCT (Nsight Compute's own rule for a kernel limited by
latency, neither unit near its peak). It agrees with ours when it equals the op's roofline bound.

Where the counters and our class differ on instruction issue, the measured SM throughput decides
(:func:`measured_limiter`, :func:`relabel`; the diagnose pipeline re-draws the aggregates and findings from them);
the agreement stays that of our class before them.

An op whose measured DRAM bytes are under L2_RESIDENT of its measured L2 bytes is L2-resident
(``OpCounters.l2_resident``): its data is served from L2, so its memory bound is the L2 roof, not DRAM. Its
evidence says so, and where the device's L2 bandwidth is known its memory time is its L2 bytes at that bandwidth
(:func:`l2_roofed`; the roofline time, attainable rate and efficiency with it).

An op whose measured L2 bytes are under L1_REUSE of its measured L1 bytes (``l1tex__t_bytes.sum``) has its L1 traffic
dominate (``OpCounters.l1_dominant``): its data is re-read from L1, which the DRAM and L2 points do not show. Its
evidence says so (:func:`l1_noted`), and where the device's L1/shared-memory bandwidth is known, its memory time is
at least its L1 bytes at that bandwidth (the hierarchical bound: every level must move its bytes).

The locality finding on these counters (rule ``excess-dram-traffic``) is the counters family's
(:mod:`roofline.findings.rules.counters`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from roofline.findings.bounds import NEAR
from roofline.measure.ncu import KernelCounters
from roofline.report.rows import OpPoint
from roofline.units import format_count, format_rate, format_time

LOCALITY_FACTOR = 2.0  # measured DRAM bytes / compulsory bytes at or above which the locality finding is raised
LOW_PCT = 60.0  # both throughputs under this % of peak: neither unit is the limit (latency)
L2_RESIDENT = 0.5  # measured DRAM bytes under this share of the measured L2 bytes: the op's data is L2-resident
L1_REUSE = 0.5  # measured L2 bytes under this share of the measured L1 bytes: the op's L1 traffic dominates


class OpCounters(BaseModel):
    """One op's counters per iteration, beside what we counted."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int  # the op's OpPoint index
    op: str
    module: str
    kernels: list[str]  # the kernel names matched
    launches: float  # kernel launches per iteration the counters cover
    approximate: bool = False  # shared out by kernel time, not launch by launch
    compulsory_bytes: int
    dram_read_bytes: float
    dram_write_bytes: float
    dram_bytes: float
    ratio: float | None  # measured DRAM bytes / compulsory bytes (None: no compulsory bytes)
    l2_bytes: float | None = None
    l2_resident: bool = False  # DRAM bytes < L2_RESIDENT x L2 bytes: its memory bound is the L2 roof
    l1_bytes: float | None = None  # through the L1/TEX cache (l1tex__t_bytes.sum)
    l1_dominant: bool = False  # L2 bytes < L1_REUSE x L1 bytes: its data is re-read from L1
    sm_pct: float | None = None
    memory_pct: float | None = None
    occupancy_pct: float | None = None
    tensor_pct: float | None = None
    duration_s: float | None = None  # ncu's kernel time per iteration (clocks as they were)
    counters_bound: str | None = None  # compute | memory (None: no throughput metrics)
    low: bool = False  # both throughputs under LOW_PCT
    roofline_bound: str  # ours: compute | memory | none
    limiter: str = ""  # ours: the evidence bound class
    agree: bool | None = None  # counters_bound == roofline_bound (None: either unknown)


class Counters(BaseModel):
    """The counters of a diagnose report: per op, and what could not be matched."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str  # the CSV file, or 'ncu' (diagnose --counters)
    launches: int  # kernel launches in the export
    matched_launches: int
    unmatched_kernels: list[str]  # names in the export no op launched (at most 20)
    unmatched_dram_bytes: int
    ops: list[OpCounters]
    agreement: float | None  # share of the ops with both bounds whose bounds agree
    locality_factor: float = LOCALITY_FACTOR
    notes: list[str] = []


# ------------------------------------------------------------------------------------------------ names

_NAMESPACE = re.compile(r"[A-Za-z_]\w*::")
_ANONYMOUS_ARG = re.compile(r"(?<=\w)<unnamed>::")  # a template argument: 'k<<unnamed>::T' written 'k<unnamed>::T'
_ANONYMOUS = re.compile(r"<?unnamed>::")
_INT_SUFFIX = re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
_NCU_LAMBDA = re.compile(r"\[lambda\(([^)]*)\) \(instance (\d+)\)\]")  # ncu: [lambda(float) (instance 1)]
#: a C-style cast on an integer template argument: ncu_report's demangled names write '<(int)4, ..., (unsigned long)3>'
#: where the CSV's --print-kernel-base demangled and the torch profiler write '<4, ..., 3>' (seen on an H100, Nsight
#: Compute 2025.3.1)
_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long long|long|short|char|bool|unsigned)\)(?=-?\d)")
_BOOLS = {"false": "0", "true": "1"}


def _cut_params(text: str) -> str:
    """The name before its parameter list: the first '(' outside template brackets."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0 and i > 0:
            return text[:i]
    return text


def normalized(name: str) -> str:
    """A kernel name as both tools agree on it: no return type, parameters, namespaces, spaces or integer
    suffixes, ncu's lambdas and template booleans written as the torch profiler writes them.
    'void at::native::k<4, at::native::F<float>, std::array<char*, 3ul> >(int, ...)' ->
    'k<4,F<float>,array<char*,3>>'."""
    text = re.sub(r"^void\s+", "", name.strip())
    # NB: ncu writes the anonymous namespace '<unnamed>::', and for some kernels 'unnamed>::', the '<' dropped
    # (seen on an H100, ncu of CUDA 13: 'void unnamed>::vectorized_layer_norm_kernel<BFloat16, float, 0>(...)',
    # 'void unnamed>::CatArrayBatchedCopy_vectorized<unnamed>::OpaqueType<2>, unsigned int, ...>(...)', where
    # the '<' left is the template's)
    text = text.replace("(anonymous namespace)::", "")
    text = _ANONYMOUS.sub("", _ANONYMOUS_ARG.sub("<", text))
    text = _NCU_LAMBDA.sub(r"{lambda(\1)#\2}", text)  # as the torch profiler writes it: {lambda(float)#1}
    text = _CAST.sub("", text)
    text = _cut_params(text)
    text = re.sub(r"\b(false|true)\b", lambda m: _BOOLS[m.group(1)], text)
    text = _NAMESPACE.sub("", text)
    text = _INT_SUFFIX.sub(r"\1", text)
    return re.sub(r"\s+", "", text)


def base_name(name: str) -> str:
    """The bare function name: 'k<4, ...>(...)' -> 'k'."""
    text = normalized(name)
    cut = min((i for i in (text.find("<"), text.find("(")) if i > 0), default=len(text))
    return text[:cut]


# ------------------------------------------------------------------------------------------------ attaching


class _Share:
    """What one op gets of one kernel name: counters summed with a weight, per iteration."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.launches = 0.0
        self.read = 0.0
        self.write = 0.0
        self.l2: float | None = None
        self.l1: float | None = None
        self.weighted: dict[str, float] = defaultdict(float)  # metric -> sum of pct x duration
        self.weights: dict[str, float] = defaultdict(float)
        self.duration: float | None = None
        self.approximate = False

    def add(self, k: KernelCounters, weight: float) -> None:
        self.launches += weight
        self.read += k.dram_read_bytes * weight
        self.write += k.dram_write_bytes * weight
        if k.l2_bytes is not None:
            self.l2 = (self.l2 or 0.0) + k.l2_bytes * weight
        if k.l1_bytes is not None:
            self.l1 = (self.l1 or 0.0) + k.l1_bytes * weight
        if k.duration_s is not None:
            self.duration = (self.duration or 0.0) + k.duration_s * weight
        time = (k.duration_s or 1e-9) * weight
        for metric in ("sm_pct", "memory_pct", "occupancy_pct", "tensor_pct"):
            value = getattr(k, metric)
            if value is not None:
                self.weighted[metric] += value * time
                self.weights[metric] += time

    def mean(self, metric: str) -> float | None:
        weight = self.weights.get(metric, 0.0)
        return self.weighted[metric] / weight if weight > 0 else None


def _assign(
    wanted: dict[str, list[tuple[int, int, float]]],
    launches: dict[str, list[KernelCounters]],
    shares: dict[int, _Share],
) -> set[str]:
    """Share each key's launches among the ops that want it (``wanted``: key -> [(op index, launches per
    iteration, kernel time)] in op order); returns the keys used."""
    used = set()
    for key, ops in wanted.items():
        found = launches.get(key)
        if not found:
            continue
        used.add(key)
        per_iteration = sum(n for _, n, _ in ops)
        if per_iteration > 0 and len(found) % per_iteration == 0:
            iterations = len(found) // per_iteration
            position = 0
            for _ in range(iterations):
                for index, n, _ in ops:
                    for k in found[position : position + n]:
                        shares[index].add(k, 1.0 / iterations)
                    position += n
            for index, _, _ in ops:
                shares[index].names.append(found[0].name)
            continue
        total_time = sum(t for _, _, t in ops)
        iterations = len(found) / per_iteration if per_iteration > 0 else 1.0
        for index, n, t in ops:  # that name's counters by kernel time (by launches when no time)
            share = t / total_time if total_time > 0 else n / max(per_iteration, 1)
            for k in found:
                shares[index].add(k, share / iterations)
            shares[index].approximate = True
            shares[index].names.append(found[0].name)
    return used


def attach(points: Sequence[OpPoint], kernels: Sequence[KernelCounters], source: str) -> Counters:
    """The counters of ``kernels`` (one ncu export) on the diagnosed ops ``points``."""
    shares: dict[int, _Share] = defaultdict(_Share)
    by_index = {p.index: p for p in points}
    left = list(kernels)
    left_ops = {p.index: list(p.kernel_facts) for p in points if p.kernel_facts}
    for key_of in (lambda name: name, normalized, base_name):
        wanted: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
        owner: dict[tuple[int, str], str] = {}
        for index in sorted(left_ops):
            for fact in left_ops[index]:
                key = key_of(fact.name)
                wanted[key].append((index, max(fact.launches, 1), fact.time_s))
                owner[(index, fact.name)] = key
        launches: dict[str, list[KernelCounters]] = defaultdict(list)
        for k in sorted(left, key=lambda k: k.id):
            launches[key_of(k.name)].append(k)
        used = _assign(wanted, launches, shares)
        left = [k for k in left if key_of(k.name) not in used]
        left_ops = {i: [f for f in facts if owner[(i, f.name)] not in used] for i, facts in left_ops.items()}
        left_ops = {i: facts for i, facts in left_ops.items() if facts}
    ops = [_op_counters(by_index[i], shares[i]) for i in sorted(shares) if i in by_index]
    judged = [o for o in ops if o.agree is not None]
    unmatched = sorted({k.name for k in left})
    notes = []
    if any(o.approximate for o in ops):
        notes.append(
            "some kernels were launched a different number of times under ncu than under the torch profiler: "
            "their counters were shared out by kernel time (approximate)"
        )
    return Counters(
        source=source,
        launches=len(kernels),
        matched_launches=len(kernels) - len(left),
        unmatched_kernels=unmatched[:20],
        unmatched_dram_bytes=sum(k.dram_bytes for k in left),
        ops=ops,
        agreement=sum(o.agree for o in judged) / len(judged) if judged else None,
        notes=notes,
    )


def our_bound(point: OpPoint) -> str | None:
    """Our verdict in the counters' terms (compute or memory; None when neither): the op's limiter where it names
    one of the two (an element-wise op limited by instruction issue is 'compute' though it sits left of the
    ridge), 'memory' for layout (conversion kernels, a matmul's unaligned rows loaded a few bytes at a time: the
    memory pipeline is the busier unit, as ncu read SM 26% against memory 76% for GPT-2's lm_head on an H100),
    else the side of the ridge it sits on.

    NB: on an H100 the broadcast sub/div/mul of a written-out softmax and RMSNorm sit left of the ridge, their
    limiter says compute (issue), and ncu read SM 66-73% against memory 43-46%: judged by the side of the ridge
    they disagreed (softmax 2/5, RMSNorm 4/6), judged by the verdict they agree."""
    if point.limiter in ("compute", "memory"):
        return point.limiter
    if point.limiter == "layout":  # conversion kernels, rows loaded narrowly: the memory pipeline, not the FLOPs
        return "memory"
    return point.roofline_bound if point.roofline_bound in ("compute", "memory") else None


def _op_counters(point: OpPoint, share: _Share) -> OpCounters:
    measured = share.read + share.write
    sm, memory = share.mean("sm_pct"), share.mean("memory_pct")
    bound = None if sm is None or memory is None else ("memory" if memory >= sm else "compute")
    ours = our_bound(point)
    return OpCounters(
        index=point.index,
        op=point.op,
        module=point.module,
        kernels=share.names,
        launches=round(share.launches, 6),
        approximate=share.approximate,
        compulsory_bytes=point.bytes,
        dram_read_bytes=share.read,
        dram_write_bytes=share.write,
        dram_bytes=measured,
        ratio=measured / point.bytes if point.bytes > 0 else None,
        l2_bytes=share.l2,
        l2_resident=share.l2 is not None and share.l2 > 0 and measured < L2_RESIDENT * share.l2,
        l1_bytes=share.l1,
        l1_dominant=share.l1 is not None and share.l2 is not None and share.l1 > 0 and share.l2 < L1_REUSE * share.l1,
        sm_pct=sm,
        memory_pct=memory,
        occupancy_pct=share.mean("occupancy_pct"),
        tensor_pct=share.mean("tensor_pct"),
        duration_s=share.duration,
        counters_bound=bound,
        low=sm is not None and memory is not None and max(sm, memory) < LOW_PCT,
        roofline_bound=point.roofline_bound,
        limiter=point.limiter,
        agree=None if bound is None or ours is None else bound == ours,
    )


#: Nsight Compute's SM throughput at least this % of peak, and above its memory throughput: limited by instruction
#: issue (bounds.NEAR, as a percentage: the share of a roof that makes it the limit)
SM_BOUND_PCT = 100 * NEAR


def measured_limiter(point: OpPoint, oc: OpCounters) -> tuple[str, str] | None:
    """(limiter, evidence) where the op's measured throughputs (--counters) overrule the class our estimate gave:
    SM throughput at least SM_BOUND_PCT and above the memory throughput makes a 'memory', 'latency' or
    'parallelism' op 'compute' (instruction issue, measured); an op the instruction estimate called instruction-bound
    whose memory throughput is at least its SM throughput becomes 'memory' (memory at least SM_BOUND_PCT) or
    'latency'. None: the counters agree, say nothing, or the op's class is not one they decide (launch, host,
    layout, the other compute causes)."""
    sm, memory = oc.sm_pct, oc.memory_pct
    if sm is None or memory is None:
        return None
    measured = f"Nsight Compute: SM {sm:.0f}%, memory {memory:.0f}% of peak"
    was = f"(the estimate said {point.limiter}: {point.limiter_evidence})" if point.limiter_evidence else ""
    if point.limiter in ("memory", "latency", "parallelism") and sm >= SM_BOUND_PCT and sm > memory:
        return "compute", f"instruction issue, measured: {measured}, the SM the busier unit {was}".rstrip()
    by_estimate = point.limiter == "compute" and point.limiter_evidence.startswith("instruction issue:")
    if by_estimate and memory >= sm:
        limiter = "memory" if memory >= SM_BOUND_PCT else "latency"
        return limiter, f"{measured}: the memory side the busier, not instruction issue {was}".rstrip()
    return None


def l2_roofed(point: OpPoint, oc: OpCounters, l2_bandwidth: float | None) -> OpPoint | None:
    """An L2-resident op (``oc.l2_resident``) with its memory bound the L2 roof: its evidence says so, and with
    ``l2_bandwidth`` (byte/s, the device's L2) its memory time is its measured L2 bytes at that bandwidth (roofline
    time, attainable rate and efficiency with it). None: not L2-resident."""
    if not oc.l2_resident or not oc.l2_bytes:
        return None
    said = (
        f"L2-resident: Nsight Compute measured {format_count(oc.dram_bytes, 'B')} from DRAM against "
        f"{format_count(oc.l2_bytes, 'B')} through L2 (under {L2_RESIDENT:g}x): its memory bound is the L2 roof, "
        "not DRAM"
    )
    update: dict[str, object] = {}
    if l2_bandwidth and l2_bandwidth > 0:
        memory_s = oc.l2_bytes / l2_bandwidth
        said += f" (L2 {format_rate(l2_bandwidth, 'B/s')}: memory time {format_time(memory_s)})"
        update = _memory_time(point, memory_s)
    else:
        said += " (no L2 bandwidth known for this device: its memory time stays DRAM's)"
    return _noted(point, said, update)


def _noted(point: OpPoint, said: str, update: dict[str, object]) -> OpPoint:
    """``point`` with ``update`` and ``said`` added to its limiter evidence (after what it said already)."""
    evidence = f"{point.limiter_evidence}; {said}" if point.limiter_evidence else said
    return point.model_copy(update={**update, "limiter_evidence": evidence})


def _memory_time(point: OpPoint, memory_s: float) -> dict[str, object]:
    """The fields of ``point`` that change when its memory time is ``memory_s``: the roofline time, and the
    attainable rate and efficiency with it."""
    roof_s = max(point.compute_time_s, memory_s)
    update: dict[str, object] = {"memory_time_s": memory_s, "roof_time_s": roof_s}
    if roof_s > 0:
        update["attainable_flops_per_s"] = point.flops / roof_s if point.flops > 0 else point.attainable_flops_per_s
        if point.timed and point.time_s > 0:
            update["efficiency"] = roof_s / point.time_s
    return update


def l1_noted(point: OpPoint, oc: OpCounters, l1_bandwidth: float | None) -> OpPoint | None:
    """An op whose L1 traffic dominates (``oc.l1_dominant``): its evidence says so, with its measured L1, L2 and
    DRAM bytes; with ``l1_bandwidth`` (byte/s, the device's L1/shared memory) its memory time is at least its L1
    bytes at that bandwidth (the hierarchical bound: the roofline time, attainable rate and efficiency with it
    where that raises it). None: its L1 traffic does not dominate."""
    if not oc.l1_dominant or not oc.l1_bytes or oc.l2_bytes is None:
        return None
    said = (
        f"L1 traffic dominates: Nsight Compute measured {format_count(oc.l1_bytes, 'B')} through L1 against "
        f"{format_count(oc.l2_bytes, 'B')} through L2 (under {L1_REUSE:g}x) and {format_count(oc.dram_bytes, 'B')} "
        "from DRAM: its data is re-read from L1"
    )
    update: dict[str, object] = {}
    if l1_bandwidth and l1_bandwidth > 0:
        l1_s = oc.l1_bytes / l1_bandwidth
        said += f" (L1 {format_rate(l1_bandwidth, 'B/s')}: L1 time {format_time(l1_s)}"
        if l1_s > point.memory_time_s:
            said += ", above its memory time: the L1 sets its memory bound)"
            update = _memory_time(point, l1_s)
        else:
            said += ", within its memory time)"
    else:
        said += " (no L1 bandwidth known for this device: its memory time stays as it was)"
    return _noted(point, said, update)


def relabel(
    points: Sequence[OpPoint],
    counters: Counters,
    *,
    l2_bandwidth: float | None = None,
    l1_bandwidth: float | None = None,
) -> list[OpPoint]:
    """``points`` with the class of each op whose counters overrule it (:func:`measured_limiter`), the L2 roof
    for each L2-resident op (:func:`l2_roofed`, ``l2_bandwidth`` the device's L2, byte/s, None: unknown) and the L1
    for each op whose L1 traffic dominates (:func:`l1_noted`, ``l1_bandwidth`` the device's L1/shared memory); the
    others as they are. NB: the counters' own agreement (``OpCounters.agree``) stays the estimate's, measured
    before this."""
    by_index = {oc.index: oc for oc in counters.ops}
    out: list[OpPoint] = []
    for p in points:
        oc = by_index.get(p.index)
        if oc is None:
            out.append(p)
            continue
        decided = measured_limiter(p, oc)
        if decided is not None:
            p = p.model_copy(update={"limiter": decided[0], "limiter_evidence": decided[1]})
        p = l2_roofed(p, oc, l2_bandwidth) or p
        out.append(l1_noted(p, oc, l1_bandwidth) or p)
    return out


# ------------------------------------------------------------------------------------------------ the finding


__all__ = [
    "L1_REUSE",
    "L2_RESIDENT",
    "LOCALITY_FACTOR",
    "LOW_PCT",
    "SM_BOUND_PCT",
    "Counters",
    "OpCounters",
    "attach",
    "base_name",
    "l1_noted",
    "l2_roofed",
    "measured_limiter",
    "normalized",
    "relabel",
]
