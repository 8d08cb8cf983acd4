"""Bound classes from evidence: what limits one diagnosed op, and which numbers say so. Pure.

Below the ridge is not the same as limited by memory bandwidth: an op is 'memory' only when its achieved DRAM
bandwidth is near the ceiling, 'compute' only when its achieved FLOP/s is near its compute roof. When neither
roof is near, the kernel launch facts the profiler recorded (grid, block, blocks and warps per SM, estimated
occupancy) tell a GPU that is not filled ('parallelism') from one that is filled and still slow ('latency': a
dependency chain or instruction issue). :func:`classify` returns the class and a one-line evidence; the diagnose
placement (roofline.diagnose.place) stores both in every point, so every reader reads the stored value. The
instruction roof is a bound too: :func:`instruction_floor_s` (the ops' arithmetic, which a fused kernel still
issues) and :func:`floor_time_s` (each op's roofline or instruction time, the longer) keep the fusion and coverage
findings' bounds from going below it.

The classes, in the order they are decided (thresholds are the module constants; docs/diagnose.md has the table):

- none: not timed, or no work counted (a view) and not dispatch-bound;
- launch (GPU) / host (CPU): the time within ironlaw.LAUNCH_FACTOR of the launch floor (ironlaw.measured_bound);
  on the CPU also when the op's dispatch (host time beyond its self time) exceeds its own time;
- layout (GPU): at least LAYOUT_SHARE of the op's time in layout/format-conversion kernels (:func:`is_layout_kernel`);
- compute (instruction issue, GPU): the op has an instruction estimate (roofline.costs.instructions: element-wise
  ops, scans, flip) and the device an SM count and clock, and the time its SMs need to issue it
  (:func:`instruction_roof`: elements x instructions per element at SMs x 4 schedulers x 32 lanes x clock, the SFU
  part at 16 per SM per clock) is at least NEAR of the measured time and above both roofs' shares: issuing takes
  longer than the bytes (a bf16 softplus at 63% of DRAM on an H100, Nsight Compute reading SM 91%);
- compute / memory: achieved FLOP/s (bytes/s) at least NEAR of the compute roof (DRAM bandwidth); the nearer wins;
- parallelism (GPU): neither near and the dominant kernel leaves the GPU unfilled (:func:`under_filled`): fewer
  blocks than SMs, a partial last wave leaving at least TAIL_IDLE of the SM slots idle, or (element-wise and
  reduction kernels) an estimated occupancy below LOW_OCCUPANCY;
- layout (GPU, unaligned rows): neither near, the GPU filled, and a matmul right of the ridge with a dim off the
  tile grid whose rows are not 16-byte aligned (roofline.findings.shapes.misaligned): its kernel loads narrowly;
- compute (awkward shapes): the same with the rows aligned: a dim of at least roofline.findings.shapes.ALIGN that
  is not a multiple of it (the awkward-shapes finding's test): partial tiles;
- compute (tensor cores not engaged, GPU): a 16-bit GEMM or convolution whose dominant kernel is a CUDA-core
  fallback (:func:`cuda_core_fallback`: implicit_convolveNd_sgemm, a gemv, torch's slow convolutions), neither roof
  near: it is measured against the CUDA-core roof of its dtype, with the cause (channels or dims not multiples of
  8, the layout) in the evidence;
- compute (instruction issue by kernel name): only for an op without an instruction estimate (or a device without
  a clock): neither near, the GPU filled, and the dominant kernel of a family that spends its issue slots on index
  arithmetic (:func:`is_instruction_bound_kernel`);
- parallelism (CPU): neither near and torch runs ops on fewer threads than the cores the process may use;
- latency: neither near and the GPU filled, or no launch facts to tell (the evidence says which).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from roofline import ironlaw
from roofline.costs.instructions import Estimate, estimate, instruction_time, issue_rates, pool_window
from roofline.device import Device
from roofline.findings.shapes import ALIGN, ROW_ALIGN_BYTES, gemm_dims, misaligned, off_grid
from roofline.report.rows import KernelFacts, OpPoint, bits_of
from roofline.units import format_rate, format_time

#: achieved at least this share of a roof: limited by that roof
NEAR = 0.6
#: a tensor-core op right of the ridge, the GPU filled, at least this share of its roof: compute (its tensor pipes'
#: pace), not latency. NB: a judgement: the H100 convolutions ncu read SM-bound (SM 90-93%) ran at 37-50% of the dense
#: bf16 peak (whole op, advice corpus); further below, the pipes' pace alone is not taken as the cause
TENSOR_PACE = 0.3
#: at least this share of an op's time in layout-conversion kernels: limited by layout
LAYOUT_SHARE = 0.3
#: a partial last wave leaving at least this share of the SM slots idle over the kernel: not filled
TAIL_IDLE = 0.25
#: estimated achieved occupancy below this (element-wise/reduction kernels): too few warps to hide latency
LOW_OCCUPANCY = 0.25
#: CPU: the op's dispatch (host time beyond its own) above this multiple of its own time: host-bound
HOST_FACTOR = 1.0

# Kernels that only change a tensor's layout or format (cuDNN's NCHW<->NHWC conversions and tensor transforms,
# transposes, channel padding), matched case-insensitively in the kernel name.
LAYOUT_MARKERS = (
    "nchwtonhwc",
    "nhwctonchw",
    "nchwtofoldednhwc",
    "foldednhwctonchw",
    "tensortransform",
    "transpose",
    "convertTensor",
    "addpadding",
    "reformat",
)
# Kernel families whose time goes to instruction issue, not FLOPs or bytes, when neither roof is near on a filled
# GPU: PyTorch's generic (non-vectorized) element-wise kernel computes every element's offsets (broadcast or
# strided inputs), its direct depthwise convolution indexes every tap, its softmax kernels spend theirs on the
# row reductions and an exp per element. NB: Nsight Compute shows them with high SM throughput and DRAM well below
# its peak (H100, 2026-11-23: a broadcast div 73% SM / 43% memory, a depthwise conv and a bf16 softmax 77% SM /
# 39% memory); matched in the kernel name.
INSTRUCTION_BOUND_MARKERS = ("at::native::elementwise_kernel<", "conv_depthwise2d", "SoftMaxForward")
# ... unless the kernel is a GEMM or convolution that merely carries such a word in its template arguments
NOT_LAYOUT_MARKERS = ("gemm", "conv", "fprop", "dgrad", "wgrad", "xmma", "mma")


# Kernels that run a GEMM or a convolution on the CUDA cores (no tensor-core instructions): cuDNN's implicit-GEMM
# fallback (`implicit_convolveNd_sgemm`, seen on an H100 for a bf16 convolution of 3 input channels: SM 81%, DRAM
# 5%, 3-5% of the tensor roof), cuBLAS's fp32 sgemm and gemv kernels, torch's own slow convolutions; lower-cased.
CUDA_CORE_MARKERS = ("implicit_convolve", "sgemm", "gemv", "gemmsn", "gemmk1", "dot_kernel", "slow_conv", "naive_conv")
# ... unless the name says tensor cores (mma instructions, cuBLAS/CUTLASS tensor-op and Hopper kernels)
TENSOR_CORE_MARKERS = ("mma", "tensorop", "s1688", "h1688", "s16816", "h16816", "h884", "xmma", "nvjet", "wgmma")
#: the element widths (bits) whose GEMMs and convolutions tensor cores take only with dims that are multiples of 8
TENSOR_CORE_ALIGN = 8


def cuda_core_fallback(point: OpPoint) -> str | None:
    """The name of the dominant kernel of a 16-bit GEMM or convolution that runs on the CUDA cores (a fallback
    without tensor cores; :data:`CUDA_CORE_MARKERS`), None otherwise."""
    if point.math != "tensor" or bits_of(point.dtype) != 16 or not point.kernel_facts:
        return None
    kernel = max(point.kernel_facts, key=lambda k: k.time_s)
    lowered = kernel.name.lower()
    if any(m in lowered for m in TENSOR_CORE_MARKERS) or not any(m in lowered for m in CUDA_CORE_MARKERS):
        return None
    return kernel.name


def tensor_core_cause(point: OpPoint) -> str:
    """Why a 16-bit GEMM or convolution missed the tensor cores, from its shapes: channels (a convolution) or K/N
    (a matmul) not multiples of 8, else the algorithm cuDNN/cuBLAS chose."""
    shapes = [list(s) for s in point.input_shapes]
    name = point.op.split("::")[-1]
    odd: list[str] = []
    if "conv" in name and len(shapes) >= 2 and len(shapes[0]) >= 3 and len(shapes[1]) >= 2:
        cin, cout = shapes[0][1], shapes[1][0]
        odd = [f"{label} {v}" for label, v in (("input channels", cin), ("output channels", cout)) if v % 8]
    else:
        dims = gemm_dims(point)
        if dims is not None:
            odd = [f"{label} {v}" for label, v in (("K", dims.k), ("N", dims.n)) if v % TENSOR_CORE_ALIGN]
    if odd:
        return f"{', '.join(odd)} not a multiple of {TENSOR_CORE_ALIGN}"
    return "the algorithm chosen (dims aligned): try torch.backends.cudnn.benchmark = True or channels_last"


def is_instruction_bound_kernel(name: str) -> bool:
    """A kernel family that is instruction-bound when neither roof is near (INSTRUCTION_BOUND_MARKERS)."""
    return any(marker in name for marker in INSTRUCTION_BOUND_MARKERS)


def hardware_class(limiter: str | None, kernels: Iterable[str] = ()) -> str | None:
    """The hardware side a limiter puts an op's time on, as Nsight Compute's SpeedOfLight classes a kernel:
    'compute' (the SM: FLOPs or instruction issue), 'memory', or 'neither' (launch, latency, parallelism, host, no
    work); None without a limiter. ``layout`` is a cause, not a side: its time is in conversion kernels, which are
    'compute' where PyTorch's generic element-wise copy does them (its index arithmetic: the instruction-bound family,
    INSTRUCTION_BOUND_MARKERS; on an H100 ncu read those copies SM 67-71%, memory 37-46%, in all 11 convolutions of
    the advice corpus) and 'memory' where a dedicated transpose kernel moves the bytes. ``kernels``: the op's
    kernel names (its longest first is enough)."""
    if not limiter:
        return None
    if limiter in ("compute", "memory"):
        return limiter
    if limiter == "layout":
        return "compute" if any(is_instruction_bound_kernel(k) for k in kernels) else "memory"
    return "neither"


def is_layout_kernel(name: str) -> bool:
    """A kernel that only converts layout/format: cuDNN nchwToNhwc/nhwcToNchw, tensorTransformGeneric,
    transpose kernels, convertTensor, NCHW/NHWC padding."""
    lowered = name.lower()
    if not any(marker.lower() in lowered for marker in LAYOUT_MARKERS):
        return False
    return not any(marker in lowered for marker in NOT_LAYOUT_MARKERS)


def instruction_roof(point: OpPoint, device: Device) -> tuple[float, Estimate] | None:
    """(seconds, estimate): the time the device's SMs need to issue the op's instructions (an NVIDIA GPU's SMs x 4
    schedulers x 32 lanes x its clock, the SFU part at 16 per SM per clock: roofline.costs.instructions), None where
    the op has no estimate or the device no SM count or clock."""
    rates = issue_rates(device.compute_units, device.clock_hz, device.vendor)
    if rates is None or point.rows <= 0:
        return None
    output = max(point.output_shapes, key=lambda s: math.prod(s) if s else 1, default=[])
    window = pool_window(point.op, point.flops, point.rows)
    per_element = estimate(
        point.op, point.dtype, point.input_shapes, output, strided=point.non_contiguous, window=window
    )
    if per_element is None:
        return None
    return instruction_time(point.rows, per_element, rates), per_element


def instruction_floor_s(points: Iterable[OpPoint], device: Device) -> float:
    """The time the ops' arithmetic takes to issue, summed (0 for ops without an estimate or a device without an
    issue rate): a kernel fusing them shares their loads, stores, conversions and index math but still issues the
    arithmetic of every op, so a bound on them never goes below it."""
    rates = issue_rates(device.compute_units, device.clock_hz, device.vendor)
    if rates is None:
        return 0.0
    total = 0.0
    for p in points:
        roof = instruction_roof(p, device)
        if roof is not None:
            total += instruction_time(p.rows, roof[1].arithmetic(), rates)
    return total


def floor_time_s(points: Iterable[OpPoint], device: Device) -> float:
    """Each op's roofline time or its instruction time, the longer, summed: the ops' floor before a fusion."""
    total = 0.0
    for p in points:
        roof = instruction_roof(p, device)
        total += max(p.roof_time_s, roof[0] if roof is not None else 0.0)
    return total


def _percent(value: float) -> str:
    return f"{100 * value:.0f}%" if value >= 0.1 else f"{100 * value:.2g}%"


def _dims(values: list[int] | None) -> str:
    return "x".join(str(v) for v in values) if values else "?"


def sm_count(facts: KernelFacts, device: Device) -> int:
    """The device's SMs (CUs); from the kernel's own facts (blocks / blocks per SM) when the device does not say."""
    if device.compute_units:
        return device.compute_units
    blocks = facts.blocks
    if blocks and facts.blocks_per_sm:
        return max(round(blocks / facts.blocks_per_sm), 1)
    return 0


def describe(facts: KernelFacts, device: Device) -> str:
    """'grid 16x1x1 = 16 blocks of 1024 threads on 132 SMs (0.12 per SM), est. occupancy 6%'."""
    sms, blocks = sm_count(facts, device), facts.blocks or 0
    unit = device.unit_name or "SM"
    text = f"grid {_dims(facts.grid)} = {blocks:,} blocks"
    if facts.threads_per_block:
        text += f" of {facts.threads_per_block} threads"
    if sms:
        text += f" on {sms} {unit}s ({blocks / sms:.2g} per {unit})"
    if facts.occupancy is not None:
        text += f", est. occupancy {_percent(facts.occupancy)}"
    return text


def under_filled(facts: KernelFacts, device: Device, math_unit: str = "vector") -> str | None:
    """Why a kernel leaves the GPU unfilled ('' reasons joined), or None when its launch facts show it filled (or
    it has none). ``math_unit``: the op's ('tensor' kernels run few large blocks by design: their occupancy is
    not read)."""
    blocks = facts.blocks
    if not blocks:
        return None
    sms = sm_count(facts, device)
    unit = device.unit_name or "SM"
    if sms and blocks < sms:
        return f"fewer blocks than {unit}s: {sms - blocks} of {sms} {unit}s get none"
    if sms and facts.active_blocks_per_sm:
        waves = blocks / (sms * facts.active_blocks_per_sm)
        if waves > 1:
            idle = 1 - waves / math.ceil(waves)
            if idle >= TAIL_IDLE:
                return (
                    f"{facts.active_blocks_per_sm} resident per {unit}: {waves:.2f} waves, the last one partial "
                    f"({_percent(idle)} of the {unit} slots idle)"
                )
    if math_unit != "tensor" and facts.occupancy is not None and facts.occupancy < LOW_OCCUPANCY:
        return f"est. occupancy {_percent(facts.occupancy)}: too few warps resident to hide memory latency"
    return None


def dominant_kernel(point: OpPoint) -> KernelFacts | None:
    """The op's longest kernel that carries launch facts (None: no facts)."""
    with_facts = [k for k in point.kernel_facts if k.grid]
    return max(with_facts, key=lambda k: k.time_s) if with_facts else None


def _roofs_text(point: OpPoint) -> str:
    parts = []
    if point.compute_time_s > 0 and point.roof:
        parts.append(
            f"{format_rate(point.flops / point.time_s)} = {_percent(point.compute_time_s / point.time_s)} of the "
            f"{point.roof} roof"
        )
    if point.memory_time_s > 0:
        parts.append(
            f"{format_rate(point.bytes / point.time_s, 'B/s')} = {_percent(point.memory_time_s / point.time_s)} of "
            f"DRAM {format_rate(point.bandwidth_bytes_per_s, 'B/s')}"
        )
    return "; ".join(parts) or "no roof"


def classify(
    point: OpPoint, device: Device, device_kind: str | None = None, *, threads: tuple[int, int] = (0, 0)
) -> tuple[str, str]:
    """(limiter, evidence) of one placed op: see the module docstring. ``device_kind`` 'cuda' | 'cpu' (default:
    'cuda' when the op launched kernels). ``threads``: on the CPU, torch's intra-op threads and the cores the
    process may use ((0, 0): unknown)."""
    kind = device_kind or ("cuda" if point.kernels else "cpu")
    gpu = kind == "cuda"
    time_s = point.time_s
    if not point.timed or time_s <= 0:
        return "none", "not timed"
    work = point.math != "none" and (point.flops > 0 or point.bytes > 0)
    floor = point.launch_floor_s
    if ironlaw.measured_bound("", time_s, floor, overhead_only=not work and not gpu) == "launch":
        if gpu:
            kernels = f"{point.kernels} kernel{'s' if point.kernels != 1 else ''}"
            return "launch", (
                f"{format_time(time_s)} within {ironlaw.LAUNCH_FACTOR:g}x its launch floor {format_time(floor)} "
                f"({kernels}): the kernels are shorter than their launches"
            )
        if not work:
            return "host", f"does no work (a view or metadata op): its {format_time(time_s)} is host dispatch"
        return "host", (
            f"{format_time(time_s)} within {ironlaw.LAUNCH_FACTOR:g}x one op dispatch ({format_time(floor)}): "
            "dispatch, not work"
        )
    if not work:
        return "none", f"no FLOPs or bytes counted (a view or metadata op), {format_time(time_s)} measured"
    if not gpu:
        dispatch = point.cpu_time_s - time_s
        if dispatch > HOST_FACTOR * time_s:
            return "host", (
                f"host time {format_time(point.cpu_time_s)} vs its own {format_time(time_s)}: "
                f"{format_time(dispatch)} of dispatch"
            )
    if gpu and point.layout_time_s >= LAYOUT_SHARE * time_s:
        names = [k.name for k in point.kernel_facts if is_layout_kernel(k.name)]
        shown = f" ({_short(names[0])}{', ...' if len(names) > 1 else ''})" if names else ""
        return "layout", (
            f"{format_time(point.layout_time_s)} of its {format_time(time_s)} "
            f"({_percent(point.layout_time_s / time_s)}) in layout/format-conversion kernels{shown}"
        )
    compute_share = point.compute_time_s / time_s
    memory_share = point.memory_time_s / time_s
    roofs = _roofs_text(point)
    issue = instruction_roof(point, device) if gpu else None
    if issue is not None and issue[0] / time_s >= NEAR and issue[0] / time_s > max(compute_share, memory_share):
        seconds, per_element = issue
        rate = f"{device.compute_units} SMs x 4 schedulers x 32 lanes x {device.clock_hz / 1e9:.3g} GHz"
        return "compute", (
            f"instruction issue: {per_element.describe()} x {point.rows:,} elements = {format_time(seconds)} at the "
            f"SM issue rate ({rate}): achieved {_percent(seconds / time_s)} of the SM issue rate, nearer than {roofs}"
        )
    if max(compute_share, memory_share) >= NEAR:
        limiter = "compute" if compute_share >= memory_share else "memory"
        return limiter, f"achieved {roofs} (at least {_percent(NEAR)} of a roof: {limiter})"
    if not gpu:
        used, cores = threads
        if 0 < used < cores:
            return "parallelism", (
                f"neither roof near ({roofs}); torch runs ops on {used} of the {cores} cores this process may use "
                "(torch.get_num_threads()): the roofs assume them all"
            )
        busy = f"torch uses all {cores} cores" if used and used >= cores else "threads unknown"
        return "latency", (
            f"neither roof near ({roofs}) ({busy}): latency or too few busy threads for this op's size (a "
            "dependency chain, instruction issue, a serial kernel); no kernel launch facts on the CPU"
        )
    fallback = cuda_core_fallback(point)
    if fallback is not None:
        # NB: the CUDA cores' rate of the op's dtype; the fp32 one where the device lists none for it (CUDA cores
        # run a 16-bit FMA at least at the fp32 rate)
        key = (point.dtype, "vector") if (point.dtype, "vector") in device.compute else ("fp32", "vector")
        vector = device.compute.get(key)
        share = f"{_percent(point.flops / time_s / vector)} of the {key[0]} CUDA-core roof" if vector else ""
        return "compute", (
            f"tensor cores not engaged: its kernel {_kernel_text(fallback)} runs on the CUDA cores "
            f"({tensor_core_cause(point)}); {roofs}{'; ' + share if share else ''}"
        )
    facts = dominant_kernel(point)
    if facts is None:
        return "latency", (
            f"neither roof near ({roofs}); no kernel launch facts, so an unfilled GPU cannot be told from latency "
            "(a dependency chain or instruction issue): Nsight Compute's launch and occupancy sections would tell"
        )
    shape = describe(facts, device)
    reason = under_filled(facts, device, point.math)
    if reason is not None:
        return "parallelism", f"neither roof near ({roofs}); {shape}: {reason}"
    odd, unaligned = _off_grid_matmul(point)
    if unaligned:
        return "layout", (
            f"neither roof near ({roofs}) with the GPU filled ({shape}); a matmul whose rows are not "
            f"{ROW_ALIGN_BYTES}-byte aligned ({unaligned}): its kernel ({_kernel_text(facts.name)}) loads the operands "
            f"a few bytes at a time, the load pipeline busy and the tensor cores idle (awkward shapes: pad to "
            f"multiples of {ALIGN})"
        )
    if odd:
        return "compute", (
            f"neither roof near ({roofs}) with the GPU filled ({shape}); a matmul right of the ridge with "
            f"{odd} off the {ALIGN}-multiple tile grid: partial tiles waste its tensor-core work (awkward shapes: "
            f"pad to multiples of {ALIGN})"
        )
    if issue is None and is_instruction_bound_kernel(facts.name):
        return "compute", (
            f"neither roof near ({roofs}) with the GPU filled ({shape}); its kernel ({_short(facts.name)}) spends "
            "its issue slots on index arithmetic (a generic element-wise or direct depthwise kernel), not FLOPs: "
            "instruction-bound"
        )
    if point.math == "tensor" and point.roofline_bound == "compute" and compute_share >= TENSOR_PACE:
        # NB: right of the ridge, on tensor cores, the GPU filled and the operands aligned: what is left is the
        # tensor pipes' own pace (tile shape and pipeline depth, the clock under load), which Nsight Compute reads
        # as SM throughput (an H100's bf16 implicit-GEMM convolutions under this class before: ncu SM 90-93%, DRAM
        # 10-20%; benchmarks/results/advice/advice-h100.json, r3)
        return "compute", (
            f"neither roof near ({roofs}) with the GPU filled ({shape}); a tensor-core kernel right of the ridge at "
            f"{_percent(compute_share)} of its roof: its tensor pipes set the pace below their peak (tile shape, "
            "pipeline depth, the clock under load)"
        )
    return "latency", (
        f"neither roof near ({roofs}) with the GPU filled ({shape}): latency (a dependency chain or instruction "
        "issue); Nsight Compute's warp-state section would tell"
    )


def _off_grid_matmul(point: OpPoint) -> tuple[str, str]:
    """('n=50257', 'n=50257 x 2 B') for a matmul right of the ridge with dims off the tile grid, the second part
    naming the dims whose rows are not 16-byte aligned (('', '') when neither).

    NB: on an H100, GPT-2's lm_head (8192x768 @ 768x50257, bf16) ran at 13% of the tensor roof with the GPU
    filled: cuBLAS ran a CUTLASS sm75 'align1' kernel and Nsight Compute read SM 26% against memory 76% (the load
    pipeline, DRAM at 5%); 'latency' named no cause. With the vocabulary padded to 50304 it ran 5.4x faster at 69%
    of the roof (benchmarks/models/lm_head.py, docs/performance.md)."""
    if point.roofline_bound != "compute":
        return "", ""
    dims = gemm_dims(point)
    if dims is None:
        return "", ""
    odd = off_grid(dims)
    size = bits_of(point.dtype) / 8 if point.dtype else 0.0
    rows = misaligned(dims, size) if odd else {}
    bytes_text = f"{size:g} B" if size else ""
    return (
        " ".join(f"{name}={value}" for name, value in odd.items()),
        " ".join(f"{name}={value} x {bytes_text}" for name, value in rows.items()),
    )


def _kernel_text(name: str) -> str:
    """A GEMM kernel's name for the evidence: the template argument naming its alignment when there is one
    ('cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_nn_align1'), else the name shortened."""
    found = re.search(r"([A-Za-z0-9_]*align\d+[A-Za-z0-9_]*)", name)
    return found.group(1) if found else _short(name, 64)


def _short(name: str, limit: int = 48) -> str:
    return name if len(name) <= limit else name[: limit - 3] + "..."


__all__ = [
    "CUDA_CORE_MARKERS",
    "HOST_FACTOR",
    "INSTRUCTION_BOUND_MARKERS",
    "LAYOUT_MARKERS",
    "LAYOUT_SHARE",
    "LOW_OCCUPANCY",
    "NEAR",
    "TAIL_IDLE",
    "TENSOR_CORE_MARKERS",
    "TENSOR_PACE",
    "classify",
    "cuda_core_fallback",
    "describe",
    "dominant_kernel",
    "floor_time_s",
    "hardware_class",
    "instruction_floor_s",
    "instruction_roof",
    "is_instruction_bound_kernel",
    "is_layout_kernel",
    "sm_count",
    "tensor_core_cause",
    "under_filled",
]
