"""Typed report rows: what analyze, bench and diagnose store, one pydantic model per row kind (extra="forbid").

- :class:`Row`: one workload on one device (`roofline analyze`), with its :class:`Finding` values;
- :class:`BenchRow`: a Row plus what `roofline bench` measured;
- :class:`OpPoint`: one counted op of a diagnosed model; :class:`Aggregate` sums of them (by call site, op type,
  module; roofline.report.aggregate sums them), :class:`IterationSummary` the whole iteration,
  :class:`UncountedOp` the ops no cost formula covers, :class:`Placed` all of them together; the bytes of an
  op's tensors (:func:`input_bytes`, :func:`output_bytes`).

Every row kind stores the iron-law values of roofline.ironlaw once: ``intensity``, ``attainable_flops_per_s``,
``roof_time_s``, ``efficiency`` and ``bound``; readers read them (:class:`Stored`), never recompute them.

A report keeps its rows as JSON objects (tolerant reading: unknown keys are kept). :func:`upgrade_rows` fills the
stored values a row lacks -- rows written by version 1 (analytic rows had no ``roof_time_s`` nor ``efficiency``)
and rows built by hand -- once, when the report is loaded; :func:`parse_rows` gives the typed rows of a report.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from roofline import ironlaw
from roofline.dtypes import BITS
from roofline.properties import Property, join
from roofline.units import format_time

PointBound = Literal["compute", "memory", "launch", "none"]

#: the iron-law values every row kind stores
STORED_FIELDS = ("intensity", "attainable_flops_per_s", "roof_time_s", "efficiency", "bound")


class Finding(BaseModel):
    """A bottleneck, the property that fits, the technique it enables and the roofline's bound on the gain."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    rule: str
    # the finding's bound (docs/architecture.md, Vocabulary): compute | memory | launch | parallelism (the diagnose
    # rules may name other bound classes)
    bottleneck: str
    properties: list[str]
    technique: str
    evidence: str
    time_s: float  # the row's minimum time now
    best_time_s: float | None = None  # minimum time after the technique (None: no bound known)
    # the roofline time (launch floors included where launches remain) of the ops the finding covers, after its
    # technique: best_time_s is never below it (None: unknown; reports written before it read fine)
    floor_s: float | None = None
    # what the technique changes (the rule's, roofline.findings.registry): 'none' (applied without a code change,
    # the model's math kept: compile, CUDA graphs, a layout), 'code' (a code change keeping the math), 'math' (the
    # model's numbers change: sparsity, a lower precision, low rank); '' unknown (reports written before it)
    change: str = ""

    @property
    def gain(self) -> float | None:
        """How many times faster at most: time now / best time (None without a bound)."""
        return ironlaw.gain(self.time_s, self.best_time_s)

    @property
    def saving_s(self) -> float:
        """Seconds the technique could save at most (0 without a bound)."""
        return ironlaw.saving(self.time_s, self.best_time_s)

    def summary(self) -> str:
        props = join(tuple(Property(p) for p in self.properties))
        text = f"{props}: {self.technique}" if props else self.technique
        gain = self.gain
        if gain is not None:
            text += f"; at most {gain:.3g}x ({format_time(self.time_s)} -> {format_time(self.best_time_s or 0)})"
        return text


# ------------------------------------------------------------------------------------------------ analytic


class Serving(BaseModel):
    """What one LLM step (decode or prefill, on one GPU of ``tp``) means for serving: tokens per second, the launch
    overhead and what CUDA graphs save, the communication, and the batches where compute binds and memory runs out.
    Computed once by roofline.analysis from the row's placement; units in the field names."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    tokens_per_step: int  # decode: batch; prefill: batch x seq
    tokens_per_s: float  # tokens_per_step / the row's minimum time (launches and communication included)
    time_per_token_s: float  # the row's minimum time / tokens_per_step (decode batch 1: the time per token)
    roofline_tokens_per_s: float  # at the roofline time alone (no launch floors)
    weights_time_s: float  # the weights per GPU read once from DRAM: the weight-streaming floor of a step
    weights_tokens_per_s: float  # tokens_per_step / weights_time_s (the source texts' "bandwidth-only limit")
    launches: int  # kernel launches per step (all-reduces included)
    launch_floor_s: float  # per launch
    launch_time_s: float  # launches x launch floor
    graph_time_s: float  # with CUDA graphs: the roofline time plus one graph launch (one launch floor)
    graph_saving_s: float  # launch_time_s - one launch floor
    graph_tokens_per_s: float
    tp: int = 1
    link: str = ""  # the peer link tensor parallelism uses, as the sheet gives it ('' when tp is 1 or none)
    all_reduces: int = 0  # per step
    all_reduce_bytes: int = 0  # the message of one all-reduce
    link_bytes: int = 0  # what one GPU sends over the link per step
    comm_time_s: float = 0.0  # link bytes / the link's bandwidth per direction
    comm_modelled: bool = True  # False: tp > 1 on a sheet without a peer link
    memory_budget_bytes: float = 0.0  # per GPU
    memory_budget_source: str = ""  # 'device capacity' or '--memory'
    weight_memory_bytes: int = 0  # per GPU, as stored
    kv_cache_per_request_bytes: int = 0  # per GPU, at context + new tokens (0: not modelled)
    activation_per_request_bytes: int = 0  # per GPU, the live activations of one request's new tokens
    memory_batch: int | None = None  # the largest batch that fits the budget (None: not computed)
    compute_batch: int | None = None  # the smallest batch where compute time reaches memory time (None: not found)
    compute_batch_limit: int = 0  # the largest batch searched for compute_batch


class Row(BaseModel):
    """One workload on one device. Field names carry their units; this is what reports store."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    kind: str
    label: str
    params: dict[str, Any]
    device: str
    dtype: str
    roof: str  # compute roof used, e.g. 'bf16 tensor'
    roof_source: str  # 'spec' (sheet) or 'measured' (calibration)
    flops: int
    bytes: int
    kernels: int
    intensity: float  # FLOP/byte
    ridge: float  # FLOP/byte
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    attainable_flops_per_s: float  # FLOPs / roof_time_s
    compute_time_s: float
    memory_time_s: float
    launch_time_s: float
    roof_time_s: float  # summed roofline time of the kernels, no launch floors
    time_s: float  # minimum time: roof_time_s + launch_time_s
    efficiency: float  # roof_time_s / time_s (bench: / median_s)
    bound: str  # compute | memory | launch
    byte_terms: dict[str, int] = {}
    notes: list[str] = []
    findings: list[Finding] = []
    comm_time_s: float = 0.0  # link time of the collectives (tensor parallelism), inside roof_time_s
    serving: Serving | None = None  # decode and prefill rows

    @property
    def top(self) -> Finding | None:
        return self.findings[0] if self.findings else None


# ------------------------------------------------------------------------------------------------ bench


class BenchRow(Row):
    """An analytic Row (cost and placement on the roofs) plus what was measured. Units in field names.

    ``efficiency`` = roof_time_s / median_s (1.0 = on the roof; launches excluded). ``bound`` is the analytic
    bound, or 'launch' when the median is within LAUNCH_FACTOR of the launch floor summed over the kernels
    (roofline.ironlaw.measured_bound); ``analytic_bound`` keeps the analytic one.
    """

    name: str = ""
    op: str = ""  # the torch call that ran
    bench_notes: list[str] = Field(
        default_factory=list
    )  # what ran differs from what the cost model counts, or how it ran
    median_s: float
    p20_s: float
    p80_s: float
    samples_s: list[float]
    n: int
    relative_spread: float  # (p80 - p20) / median
    method: str  # cuda-events | cuda-graph | cpu-clock
    cache: str  # cold | warm
    stop_reason: str
    throttled_count: int = 0
    throttle_reasons: list[str] = Field(default_factory=list)
    clocks_mhz: list[float | None] = Field(default_factory=list)
    threads: int | None = None
    discarded: int = 0  # leading samples dropped as measured drift (roofline.measure.StoppingRule.drift)
    confirm_n: int = 0  # samples in the second, independent set taken after the first (0: no check)
    confirm_median_s: float | None = None  # its median
    remeasured: bool = False  # the first measurement failed the stability check and was taken again
    remeasure_reason: str = ""
    unstable: bool = False  # the re-measurement failed it too: a second sample set disagreed, or bimodal
    unstable_reason: str = ""
    batch: int = 1  # samples per synchronisation (queued back to back; 1: each sample on its own)
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    analytic_bound: str


# ------------------------------------------------------------------------------------------------ diagnose


def numel(shape: Iterable[int]) -> int:
    """Elements of a tensor of ``shape``."""
    n = 1
    for d in shape:
        n *= int(d)
    return n


#: the evidence bound classes of a diagnosed op (roofline.findings.bounds)
LIMITERS = ("compute", "memory", "parallelism", "latency", "launch", "host", "layout", "none")


class KernelFacts(BaseModel):
    """One kernel an op launched, per iteration, with its launch facts from the profiler's trace (None: the trace
    had none -- an older torch, ROCm, a memcpy)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str
    time_s: float  # its summed time per iteration
    launches: int  # launches per iteration
    grid: list[int] | None = None  # blocks [x, y, z]
    block: list[int] | None = None  # threads per block [x, y, z]
    registers_per_thread: int | None = None
    shared_memory_bytes: int | None = None  # per block
    blocks_per_sm: float | None = None  # grid blocks / SMs
    warps_per_sm: float | None = None  # grid warps / SMs
    occupancy: float | None = None  # estimated achieved occupancy, 0..1
    active_blocks_per_sm: int | None = None  # blocks one SM holds at once, when the trace says

    @property
    def blocks(self) -> int | None:
        """Thread blocks in its grid (None without launch facts)."""
        return numel(self.grid) if self.grid else None

    @property
    def threads_per_block(self) -> int | None:
        return numel(self.block) if self.block else None


class OpPoint(BaseModel):
    """One counted op on the roofline: its record's fields, what was measured and where it sits. Units in names."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    # the record (OpRecord)
    index: int
    op: str
    module: str
    module_type: str
    phase: str
    input_shapes: list[list[int]]
    input_dtypes: list[str]
    output_shapes: list[list[int]]
    flops: int
    bytes: int
    dtype: str
    math: str
    non_contiguous: bool = False
    note: str = ""
    # dataflow per tensor input (empty = unknown, as in older reports): the index of the op that produced it
    # (None: model input, parameter/buffer, constant), whether it is a parameter/buffer, its layout
    input_producers: list[int | None] = []
    input_params: list[bool] = []
    input_layouts: list[str] = []
    input_ids: list[int | None] = []  # the storage each input reads, numbered by first use (same number: same tensor)
    source: str = ""  # where the user's code called it: '/abs/path/model.py:42' ('' unknown; see source_text)
    # measured
    timed: bool  # a timing was matched to this op
    time_s: float  # device time (GPU: its kernels; CPU: the op's self time), 0 when not timed
    kernels: int = 0
    cpu_time_s: float = 0.0
    launch_delay_s: float = 0.0
    samples_s: list[float] = []  # its device time in each timed iteration (what `roofline gate` tests)
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    # the roofline
    intensity: float | None = None  # FLOP/byte (None: moves no bytes)
    roof: str = ""  # compute roof label, e.g. 'bf16 tensor' ('' for ops doing no math)
    peak_flops_per_s: float = 0.0
    bandwidth_bytes_per_s: float
    ridge: float | None = None
    attainable_flops_per_s: float | None = None  # FLOPs / roof_time_s (None: no roof)
    compute_time_s: float = 0.0  # FLOPs / roof
    memory_time_s: float = 0.0  # bytes / DRAM bandwidth
    roof_time_s: float = 0.0  # max(compute, memory): the roofline time, no launch floor
    launch_floor_s: float = 0.0  # the launch floor x kernels (CPU: one dispatch)
    efficiency: float | None = None  # roof_time_s / time_s
    bound: PointBound
    roofline_bound: PointBound  # the roofline bound, from the counted work alone: compute | memory | none (no work)
    # the evidence (roofline.findings.bounds, stored at placement; '' in reports written before it)
    kernel_facts: list[KernelFacts] = []  # its kernels by time, at most 4, per iteration, with launch facts
    layout_time_s: float = 0.0  # time in layout/format-conversion kernels it launched
    fused_kernel: str = ""  # a compiled model: the fused kernel whose time it shares ('' not fused)
    # the evidence bound (docs/architecture.md, Vocabulary): compute | memory | parallelism | latency | launch |
    # host | layout | none
    limiter: str = ""
    limiter_evidence: str = ""  # the numbers that decided it, one line
    rank: int | None = None  # a distributed run (diagnose --nproc, torchrun): the rank it ran on; None: one process

    @property
    def rows(self) -> int:
        """Number of output elements (the largest output)."""
        return max((numel(s) for s in self.output_shapes), default=0)

    def signature(self) -> tuple[str, tuple[tuple[int, ...], ...]]:
        return self.op, tuple(tuple(s) for s in self.input_shapes)


def source_text(source: str, cwd: str | None = None) -> str:
    """How every output shows an op's stored source ('/abs/path/model.py:42'): relative to ``cwd`` (default: the
    working directory) where the file is under it, else as stored; '' stays ''."""
    import os

    path, colon, line = source.rpartition(":")
    if not colon or not os.path.isabs(path):
        return source
    root = os.path.abspath(cwd if cwd is not None else os.getcwd())
    try:
        if os.path.commonpath([root, path]) != root:
            return source
    except ValueError:  # NB: another drive (Windows)
        return source
    return f"{os.path.relpath(path, root)}:{line}"


def sources_text(sources: Iterable[str], limit: int = 2, lines: int = 4) -> str:
    """Distinct sources as one short text, lines of one file together: 'model.py:30,31,32; train.py:8 and 2 more'
    (at most ``limit`` files and ``lines`` lines a file shown; '' none)."""
    by_file: dict[str, list[str]] = {}
    for shown in dict.fromkeys(source_text(s) for s in sources if s):
        path, colon, line = shown.rpartition(":")
        by_file.setdefault(path if colon else shown, []).append(line if colon else "")
    parts: list[str] = []
    hidden = 0
    for number, (path, found) in enumerate(by_file.items()):
        if number >= limit:
            hidden += len(found)
            continue
        hidden += max(len(found) - lines, 0)
        parts.append(f"{path}:{','.join(found[:lines])}" if found[0] else path)
    return "; ".join(parts) + (f" and {hidden} more" if hidden else "")


def bits_of(dtype: str, fallback: str = "fp32") -> int:
    """Storage bits of a canonical dtype name; ``fallback``'s for names we do not know ('' or int64 etc.)."""
    if dtype in BITS:
        return BITS[dtype]
    return {"int64": 64, "int32": 32, "int16": 16, "uint8": 8, "bool": 8}.get(dtype, BITS.get(fallback, 32))


def tensor_bytes(shape: Sequence[int], dtype: str, fallback: str = "fp32") -> int:
    return -(-numel(shape) * bits_of(dtype, fallback) // 8)


def input_bytes(point: OpPoint, which: Iterable[int] | None = None) -> int:
    """Bytes of the point's tensor inputs (all, or the positions in ``which``), each read once: an input that reads
    the same storage as an earlier one (``input_ids``: x in x * x) is not counted again."""
    positions = range(len(point.input_shapes)) if which is None else which
    total = 0
    seen: set[int] = set()
    for i in positions:
        same = point.input_ids[i] if i < len(point.input_ids) else None
        if same is not None:
            if same in seen:
                continue
            seen.add(same)
        if 0 <= i < len(point.input_shapes):
            dtype = point.input_dtypes[i] if i < len(point.input_dtypes) else point.dtype
            total += tensor_bytes(point.input_shapes[i], dtype or point.dtype, point.dtype)
    return total


def output_bytes(point: OpPoint) -> int:
    """Bytes of the point's outputs, in the op's dtype."""
    return sum(tensor_bytes(s, point.dtype) for s in point.output_shapes)


class Aggregate(BaseModel):
    """Ops grouped by call site, op type or module: sums and the rates they imply (roofline.ironlaw.group)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    key: str  # the op type, the module path, or 'op @ module shapes'
    op: str = ""
    module: str = ""
    module_type: str = ""
    input_shapes: list[list[int]] = []
    count: int
    time_s: float
    time_share: float  # of the summed op time
    flops: int
    bytes: int
    kernels: int = 0
    intensity: float | None = None
    achieved_flops_per_s: float | None = None
    achieved_bytes_per_s: float | None = None
    attainable_flops_per_s: float | None = None  # FLOPs / summed roofline time
    roof_time_s: float = 0.0
    efficiency: float | None = None  # summed roofline time / summed measured time
    bound: str  # the bound holding most of the measured time
    roof: str = ""
    limiter: str = ""  # the evidence bound holding most of the measured time ('' in older reports)
    sources: list[str] = []  # by call site: its ops' sources (OpPoint.source), distinct, in order; [] unknown


class Aggregates(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    ops: list[Aggregate] = []  # by call site: op + module + input shapes + phase
    op_types: list[Aggregate] = []
    modules: list[Aggregate] = []


class UncountedOp(BaseModel):
    """Ops no cost formula covers, grouped by op: they took time but their FLOPs and bytes are unknown."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    op: str
    count: int
    time_s: float
    modules: list[str]
    input_shapes: list[list[int]]  # of the first one
    note: str = ""


class IterationSummary(BaseModel):
    """The whole iteration. Rates over the end-to-end wall time; shares of the device's peaks."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    device_kind: str  # cuda | cpu
    iterations: int
    wall_s: float  # end-to-end time of one iteration
    op_time_s: float  # summed device time of every timed op (counted and uncounted)
    counted_time_s: float
    uncounted_time_s: float
    unmatched_time_s: float  # device time no op could be matched to
    roof_time_s: float  # summed roofline time of the counted ops
    flops: int
    bytes: int
    ops: int  # counted ops
    work_ops: int  # counted ops doing work (not views)
    timed_ops: int
    uncounted_ops: int
    kernel_count: int
    achieved_flops_per_s: float  # FLOPs / wall
    achieved_bytes_per_s: float  # bytes / wall
    mfu_roof: str  # the roof MFU is measured against: the one holding the most FLOPs
    peak_flops_per_s: float
    mfu: float  # achieved FLOP/s / peak of the dominant roof
    mbu: float  # achieved bytes/s / DRAM bandwidth
    dram_bandwidth_bytes_per_s: float
    gpu_busy_s: float = 0.0
    gpu_idle_s: float = 0.0
    gpu_idle_share: float | None = None  # idle / (busy + idle); None on the CPU
    host_overhead_share: float  # 1 - op time / wall: time outside the ops (Python, dispatch, idle)
    launch_floor_s: float

    @property
    def iteration_s(self) -> float:
        """The iteration: the larger of the summed op time and the wall time (what a finding's share and the
        combined bound are of)."""
        return max(self.op_time_s, self.wall_s)


class Placed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    points: list[OpPoint]
    aggregates: Aggregates
    summary: IterationSummary
    uncounted: list[UncountedOp]
    notes: list[str] = []


# ------------------------------------------------------------------------------------------------ reading

#: the row model of each report source
ROW_MODELS: dict[str, type[BaseModel]] = {"analytic": Row, "bench": BenchRow, "diagnose": OpPoint}


class Stored(BaseModel):
    """The iron-law values a stored row carries, as every reader reads them (other keys are not looked at)."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    intensity: float | None = None
    attainable_flops_per_s: float | None = None
    roof_time_s: float | None = None
    efficiency: float | None = None
    bound: str = ""

    @classmethod
    def of(cls, row: Mapping[str, Any] | BaseModel) -> Stored:
        get = (lambda name: getattr(row, name, None)) if isinstance(row, BaseModel) else row.get
        return cls.model_validate({name: value for name in STORED_FIELDS if (value := get(name)) is not None})

    def member(self, flops: float | None, nbytes: float | None, time_s: float) -> ironlaw.Member:
        """This row as a member of a group (roofline.ironlaw.group)."""
        return ironlaw.Member(flops, nbytes, self.roof_time_s or 0.0, time_s, self.bound)


def parse_rows(source: str, rows: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The typed rows of a report of ``source`` (Row, BenchRow or OpPoint); keys a later version added are
    ignored. A row missing a field its model requires raises pydantic's ValidationError."""
    model = ROW_MODELS.get(source)
    if model is None:
        raise ValueError(f"no row model for a {source!r} report")
    fields = set(model.model_fields)
    return [model.model_validate({k: v for k, v in row.items() if k in fields}) for row in rows]


# ------------------------------------------------------------------------------------------------ checking

#: the times a stored row may hold (seconds): each a number at least 0, or null
TIME_FIELDS = frozenset(
    (
        "median_s",
        "p20_s",
        "p80_s",
        "time_s",
        "roof_time_s",
        "compute_time_s",
        "memory_time_s",
        "launch_time_s",
        "cpu_time_s",
        "confirm_median_s",
        "layout_time_s",
    )
)
_NUMBER = (int, float)
_SAMPLE_TYPES = frozenset((int, float, type(None)))
_FLOAT = {float}
_TIME_TYPES = frozenset((int, float, type(None)))
_NUMBER_TYPES = frozenset((int, float))
_LIST_TYPES = frozenset((list, type(None)))


def _time_problem(value: Any) -> str:
    if value is None or (type(value) is float and value >= 0):  # NB: the common case first
        return ""
    if isinstance(value, bool) or not isinstance(value, _NUMBER):
        return f"not a number (got {value!r:.40}): a time in seconds"
    return f"negative (got {value!r}): a time is at least 0" if value < 0 else ""


def _samples_problem(value: Any) -> str:
    if value is None or value == []:
        return ""  # no samples: a gate refuses the report (roofline.report.baseline.require_measured)
    if type(value) is not list:
        return f"not a list of times (got {value!r:.40})"
    kinds = set(map(type, value))
    if kinds == _FLOAT:  # NB: the common case: one set of types and a min, both in C
        return f"a negative sample (got {min(value)!r}): a time is at least 0" if min(value) < 0 else ""
    if not kinds <= _SAMPLE_TYPES:
        bad = next(item for item in value if type(item) not in _SAMPLE_TYPES)
        return f"a sample that is not a number (got {bad!r:.40}): times in seconds"
    numbers = [item for item in value if item is not None]
    if numbers and min(numbers) < 0:
        return f"a negative sample (got {min(numbers)!r}): a time is at least 0"
    return ""


def _clean(rows: list[Any]) -> bool:
    """Whether every row passes check_rows, decided column by column (a set of types and a min per field, in C):
    3x faster than row by row; the row-by-row pass runs only to name the problem."""
    if not all(type(row) is dict and row for row in rows):
        return False
    for name in TIME_FIELDS:
        values = list(map(dict.get, rows, itertools.repeat(name)))  # NB: row.get(name) of every row, in C
        kinds = set(map(type, values))
        if not kinds <= _TIME_TYPES:
            return False
        if float in kinds or int in kinds:
            numbers = values if type(None) not in kinds else [value for value in values if value is not None]
            if min(numbers) < 0:
                return False
    lists = list(map(dict.get, rows, itertools.repeat("samples_s")))
    if not set(map(type, lists)) <= _LIST_TYPES:
        return False
    samples = list(itertools.chain.from_iterable(value for value in lists if value))
    kinds = set(map(type, samples))
    return not samples or (kinds <= _NUMBER_TYPES and min(samples) >= 0)


def check_rows(rows: Any) -> str:
    """The first problem of a report's stored rows, as ``rows[I].FIELD: what: fix`` ('' when none): a row that is
    not an object or is empty, a time that is not a number or is negative, samples that are not a list of times.
    One pass over the rows, looking only at those keys (a 100,000-row report: a tenth of its parse). Rows may
    lack any field (hand-built ones do); a gate needs samples (roofline.report.baseline.require_measured)."""
    if type(rows) is not list:
        return ""  # the model says what it expected
    if _clean(rows):
        return ""
    for index, row in enumerate(rows):
        if type(row) is not dict or not row:
            what = "an empty row ({})" if row == {} else f"not an object (got {row!r:.40})"
            return f"rows[{index}]: {what}: re-create the report"
        for name in row.keys() & TIME_FIELDS:
            problem = _time_problem(row[name])
            if problem:
                return f"rows[{index}].{name}: {problem}"
        samples = row.get("samples_s")
        if samples:
            problem = _samples_problem(samples)
            if problem:
                return f"rows[{index}].samples_s: {problem}"
        elif samples is not None and samples != []:
            return f"rows[{index}].samples_s: not a list of times (got {samples!r:.40})"
    return ""


# ------------------------------------------------------------------------------------------------ upgrading


def finite_number(value: Any) -> float | None:
    """A stored number as a float: None for a bool, a non-number, NaN or an infinity."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def positive_number(value: Any) -> float | None:
    """A finite stored number above 0, else None."""
    number = finite_number(value)
    return number if number is not None and number > 0 else None


def _roofs(row: Mapping[str, Any], devices: Mapping[str, Any], default: Any) -> tuple[float | None, float | None]:
    """The compute roof and DRAM bandwidth a row was placed on: its own, else its device's (a DeviceInfo)."""
    device = devices.get(str(row.get("device") or "")) or default
    peak = positive_number(row.get("peak_flops_per_s"))
    bandwidth = positive_number(row.get("bandwidth_bytes_per_s"))
    if device is not None:
        roof = str(row.get("roof") or "")
        if roof and peak is None:
            peak = positive_number(device.compute_flops_per_s.get(roof))
        bandwidth = bandwidth or positive_number(device.dram_bandwidth_bytes_per_s)
    return peak, bandwidth


def _filled(source: str, row: dict[str, Any], devices: Mapping[str, Any], default: Any) -> dict[str, Any]:
    flops, nbytes = finite_number(row.get("flops")), finite_number(row.get("bytes"))
    peak, bandwidth = _roofs(row, devices, default)
    row = dict(row)
    if "intensity" not in row:
        row["intensity"] = ironlaw.intensity(flops, nbytes) if flops is not None and nbytes else None
    if "roof_time_s" not in row:
        time_s, launch_s = finite_number(row.get("time_s")), finite_number(row.get("launch_time_s"))
        roof: float | None = None
        if source in ("analytic", "bench") and time_s is not None and launch_s is not None:
            roof = time_s - launch_s  # a version-1 analytic row: its minimum time less its launch floors
        elif flops is not None and nbytes is not None and bandwidth:
            compute = ironlaw.compute_time(flops, peak) if peak else 0.0
            roof = ironlaw.roofline_time(compute, ironlaw.memory_time(nbytes, bandwidth))
        row["roof_time_s"] = roof
    roof = finite_number(row.get("roof_time_s"))
    if "attainable_flops_per_s" not in row:
        row["attainable_flops_per_s"] = (
            ironlaw.attainable_rate(flops, roof) if flops is not None and roof is not None and peak else None
        )
    if "efficiency" not in row:
        efficiency: float | None = None
        if roof is not None and source == "analytic":
            time_s = positive_number(row.get("time_s"))
            efficiency = ironlaw.efficiency(roof, time_s) if time_s else None
        elif roof is not None and row.get("timed") is not False:
            time_s = finite_number(row.get("median_s" if source == "bench" else "time_s"))
            efficiency = ironlaw.row_efficiency(roof, time_s) if time_s is not None else None
        row["efficiency"] = efficiency
    return row


_FILLED = frozenset(STORED_FIELDS[:-1])


def upgrade_rows(source: str, rows: Sequence[Mapping[str, Any]], devices: Sequence[Any]) -> list[dict[str, Any]]:
    """The rows with every stored iron-law value (STORED_FIELDS but ``bound``, which every version stores): a value
    a row lacks is computed here via roofline.ironlaw, once, from the row's counts, times and the roofs the report
    placed it on (``devices``: its DeviceInfo list). Rows that have them all are returned as they are.

    Version-1 analytic rows lack ``roof_time_s`` (= time_s - launch_time_s) and ``efficiency``
    (= roof_time_s / time_s); hand-built rows may lack any (one kernel is assumed: max(FLOPs / roof, bytes /
    DRAM bandwidth))."""
    by_name = {d.name: d for d in devices}
    default = devices[0] if devices else None
    out = []
    for row in rows:
        if type(row) is dict and row.keys() >= _FILLED:  # NB: every row a roofline wrote: one set check in C
            out.append(row)
        elif all(name in row for name in STORED_FIELDS[:-1]):
            out.append(row if isinstance(row, dict) else dict(row))
        else:
            out.append(_filled(source, dict(row), by_name, default))
    return out


__all__ = [
    "LIMITERS",
    "ROW_MODELS",
    "STORED_FIELDS",
    "TIME_FIELDS",
    "Aggregate",
    "Aggregates",
    "BenchRow",
    "Finding",
    "IterationSummary",
    "KernelFacts",
    "OpPoint",
    "Placed",
    "PointBound",
    "Row",
    "Serving",
    "Stored",
    "UncountedOp",
    "bits_of",
    "check_rows",
    "finite_number",
    "input_bytes",
    "numel",
    "output_bytes",
    "parse_rows",
    "positive_number",
    "tensor_bytes",
    "upgrade_rows",
]
