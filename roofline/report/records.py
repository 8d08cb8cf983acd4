"""Plain values passed between the diagnose stages (load -> count -> time -> place -> diagnose -> report).

Every stage is a pure function of these (the torch-touching stages produce them), so each is tested on CPU
with hand-built values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from roofline.report.rows import KernelFacts

Phase = Literal["forward", "backward"]


@dataclass(frozen=True)
class OpRecord:
    """One aten op seen by the counting pass (a TorchDispatchMode), in execution order."""

    index: int  # position in execution order within one iteration
    op: str  # aten op, 'aten::mm' style (the profiler's spelling)
    module: str  # nn.Module path that issued it, e.g. 'blocks.0.attn.q_proj' ('' = the top-level model)
    module_type: str  # class name of that module, e.g. 'Linear'
    phase: Phase
    input_shapes: tuple[tuple[int, ...], ...]  # tensor inputs only, in argument order
    input_dtypes: tuple[str, ...]  # canonical names (roofline.dtypes), '' for dtypes we do not name
    output_shapes: tuple[tuple[int, ...], ...]
    flops: int | None  # None: no cost formula for this op (listed as uncounted, never silently 0)
    bytes: int | None  # compulsory bytes: inputs read once, outputs written once (views 0, broadcasts once)
    dtype: str  # the dtype its roof is chosen by
    math: Literal["tensor", "vector", "none"]  # 'none': moves no data and does no math (views, metadata)
    non_contiguous: bool = False  # some tensor input is strided/transposed (not contiguous)
    note: str = ""  # an assumption behind the count, or why it is uncounted
    # dataflow, per tensor input (empty: unknown): the index of the op of this iteration that produced it (None: a
    # model input, parameter/buffer, constant or a tensor from before the iteration); whether it is a parameter or
    # buffer of the model; its layout ('contiguous' | 'channels_last' | 'strided', '' unknown)
    input_producers: tuple[int | None, ...] = ()
    input_params: tuple[bool, ...] = ()
    input_layouts: tuple[str, ...] = ()
    # the storage each tensor input reads, numbered in the iteration's order of first use (the same number: the
    # same storage, e.g. x in x * x; None unknown): tells one tensor read twice from two tensors of one shape
    input_ids: tuple[int | None, ...] = ()
    # where in the user's code it was called: '/abs/path/model.py:42' ('' unknown; roofline.diagnose.source)
    source: str = ""

    @property
    def counted(self) -> bool:
        return self.flops is not None and self.bytes is not None

    def signature(self) -> tuple[str, tuple[tuple[int, ...], ...]]:
        """Op and input shapes: how timing events are matched to counted ops."""
        return self.op, self.input_shapes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class KernelEvent:
    """One GPU kernel from the profiler trace."""

    name: str
    start_us: float
    duration_us: float
    stream: int
    external_id: int | None  # id of the CPU op that launched it ('External id' in the Kineto trace)
    correlation: int | None  # shared with its launch API call
    # launch facts from the profiler's trace (Kineto's kernel args; None where the trace has none: an older torch,
    # ROCm, a memcpy/memset)
    grid: tuple[int, ...] | None = None  # blocks [x, y, z]
    block: tuple[int, ...] | None = None  # threads per block [x, y, z]
    registers_per_thread: int | None = None
    shared_memory_bytes: int | None = None  # static + dynamic, per block
    blocks_per_sm: float | None = None  # grid blocks / SMs (Kineto's 'blocks per SM')
    warps_per_sm: float | None = None  # grid warps / SMs
    occupancy: float | None = None  # Kineto's estimated achieved occupancy, 0..1
    active_blocks_per_sm: int | None = None  # blocks one SM can hold at once (Kineto's occupancy detail), if given

    @property
    def has_facts(self) -> bool:
        return self.grid is not None


@dataclass(frozen=True)
class OpTiming:
    """The measured time of one counted op (matched by signature and order)."""

    index: int  # OpRecord.index it belongs to
    device_time_s: float  # GPU: sum of its kernels' durations; CPU: the op's self CPU time
    kernels: int  # kernels it launched (0 on the CPU)
    launch_delay_s: float = 0.0  # summed: kernel start - (launch call end), clipped at 0
    cpu_time_s: float = 0.0  # host time of the op call
    samples_s: tuple[float, ...] = ()  # device time in each timed iteration it ran in (the gate's samples)
    kernel_facts: tuple[KernelFacts, ...] = ()  # its kernels by time, at most 4, per iteration (GPU only)
    layout_time_s: float = 0.0  # time in layout/format-conversion kernels it launched, per iteration
    fused_kernel: str = ""  # a compiled model: the fused kernel (inductor's name) whose time it shares, '' none


@dataclass
class Timing:
    """The timing pass of one iteration (averaged over the timed iterations)."""

    device: str  # 'cuda' | 'cpu'
    iterations: int
    wall_s: float  # end-to-end time of one iteration (synchronised)
    ops: list[OpTiming] = field(default_factory=list)
    kernel_count: int = 0
    gpu_busy_s: float = 0.0  # union of kernel intervals (0 on the CPU)
    gpu_idle_s: float = 0.0  # span of the kernels minus busy
    unmatched_time_s: float = 0.0  # device time of kernels/ops no counted op could be matched to
    threads: int = 0  # CPU: torch's intra-op threads during the timing (torch.get_num_threads()); 0 unknown
    cores: int = 0  # CPU: the cores this process may run on; 0 unknown
    compiled: bool = False  # the timed callable is torch.compile'd (its fused kernels attributed by name)
    compile_s: float = 0.0  # a compiled model: its first call (compilation included), not in the timings
    # a compiled model, what torch.compile did during the run (roofline.diagnose.dynamo): graphs compiled, graph
    # breaks as (reason, count), recompilations (the guard that failed)
    graphs: int = 0
    graph_breaks: list[tuple[str, int]] = field(default_factory=list)
    recompiles: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # which profiler op went to which counted op (its index): the ops matched, and every op whose time an op owns
    # (the matched one, its children, the launcher of a kernel); ids are the trace's External ids
    matched_ops: dict[int, int] = field(default_factory=dict)
    op_owners: dict[int, int] = field(default_factory=dict)
    trace: dict[str, Any] | None = None  # the profiler's Chrome trace, when asked for (--export-trace)
    warmup_calls: int = 0  # warm-up calls made before the timed iterations (sized from a budget, or --warmup)
    # host seconds of the timing pass's parts: 'warmup', 'timed' (uninstrumented loop), 'profiled', 'events'
    # (the profile read, parsed and joined); empty where the timing stage does not say (a fake, a trace)
    stage_s: dict[str, float] = field(default_factory=dict)


#: diagnose's own stages, in the order they run, and how the console names them (`diagnose.stages` in a report:
#: name -> seconds). python: process start to the command (Python, our CLI's imports); setup: the command's
#: own start (the diagnosis's modules imported, the options and output files checked); torch_import; cuda_init:
#: the device resolved and CUDA initialised (a context on the GPU); load: the model file run, the model and its
#: inputs on the device; roofs; first_call: the model's first plain call on a GPU (its lazy initialisation: cuBLAS,
#: kernels loaded), a model iteration; count: the counting pass; warmup, timed (the uninstrumented iterations), profiled
#: (the iterations under torch.profiler), events (the profile read, parsed and joined); place: placement and
#: findings; counters (--counters), verify (--verify); render (the report built, the console tables or the JSON)
#: and write (the report file, the plot and the --export-trace file; the console only: the report is written
#: with the others).
STAGES: dict[str, str] = {
    "python": "python",
    "setup": "setup",
    "torch_import": "torch import",
    "cuda_init": "CUDA init",
    "load": "load",
    "roofs": "roofs",
    "first_call": "first call",
    "count": "count",
    "warmup": "warm-up",
    "timed": "timed",
    "profiled": "profiled",
    "events": "events",
    "time": "timing",
    "place": "place",
    "counters": "counters",
    "verify": "verify",
    "render": "render",
    "write": "write",
}
#: the fixed floor: what any diagnose pays before the model is touched (Python + torch import + CUDA init)
FLOOR_STAGES = ("python", "torch_import", "cuda_init")


def floor_seconds(stages: dict[str, float]) -> float:
    """The fixed floor of a diagnose run: the seconds of its FLOOR_STAGES present in ``stages``."""
    return sum(stages.get(name, 0.0) for name in FLOOR_STAGES)
