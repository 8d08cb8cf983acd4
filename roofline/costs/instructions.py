"""Instructions an op issues per output element on an NVIDIA GPU, and the SM's issue rate: the instruction roof.

An element-wise op left of the ridge can still be limited by its SMs: each element costs loads, stores, 16-bit <->
fp32 conversions, index math and the arithmetic of its formula, and a transcendental is a libdevice routine of
several instructions, not one FLOP. :func:`estimate` returns the per-element count of one aten op (None where the op
is not in the tables below), :func:`issue_rates` the device's rates and :func:`instruction_time` the time the SMs
need at those rates. roofline.findings.bounds classes an op 'compute (instruction issue)' when its measured time is
near that time (docs/diagnose.md, the bound classes); the findings' bounds never go below it.

The unit is a thread-instruction (one lane of one warp-instruction): a warp-instruction issues 32 of them. Every
count is for the fp32 math PyTorch's CUDA kernels do for fp32, bf16 and fp16 tensors alike (``opmath_t``).

What it does not model: dual issue or a pipe other than the SFU saturating first (FMA-heavy code on the fp32 pipe,
integer division), instruction-cache or register-bank stalls, the kernel's tail, the SM clock under load (the
sheet's boost clock is taken: a card running below it issues fewer, so the estimate is a floor on time), data-
dependent branches (a transcendental's slow path, NaN/denormal handling), fast-math builds, AMD GPUs (wave64, other
pipes: no estimate), and ops outside the tables (norms, softmax, reductions, GEMMs, adaptive pooling: no estimate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# ------------------------------------------------------------------------------------------------ the device

#: warp schedulers per SM, each issuing at most one warp-instruction a clock. NB: 4 on Volta, Turing, Ampere, Ada
#: and Hopper (NVIDIA's architecture whitepapers: the SM is partitioned into four processing blocks, each with a
#: warp scheduler and a dispatch unit of one warp-instruction per clock); sm_60 and older differ, and AMD CUs are
#: not modelled.
SCHEDULERS_PER_SM = 4
#: threads per warp (lanes): one warp-instruction is this many thread-instructions
WARP_LANES = 32
#: SFU (MUFU: ex2, lg2, rcp, rsq, sin, cos, tanh.approx) results per SM per clock. NB: the CUDA C++ Programming
#: Guide's table "Throughput of Native Arithmetic Instructions" (section Arithmetic Instructions) gives 16 for
#: 32-bit reciprocal, reciprocal square root, log2/exp2 and sine/cosine on compute capabilities 7.x, 8.x and 9.0; a
#: copy of an older edition found here shows 32 for Maxwell (the docs search did not return the 8.x/9.0 columns, so
#: this figure is the guide's as recalled, not re-read).
SFU_PER_SM_PER_CLOCK = 16


@dataclass(frozen=True)
class IssueRates:
    """A GPU's instruction roofs, in thread-instructions per second."""

    issue_per_s: float  # SMs x schedulers x 1 warp-instruction x 32 lanes x clock
    sfu_per_s: float  # SMs x 16 SFU results x clock

    def describe(self) -> str:
        return f"{self.issue_per_s / 1e12:.3g} T thread-instructions/s issue, {self.sfu_per_s / 1e12:.3g} T/s SFU"


def issue_rates(sms: int, clock_hz: float, vendor: str = "nvidia") -> IssueRates | None:
    """The issue and SFU rates of ``sms`` SMs at ``clock_hz`` (None when either is unknown or not NVIDIA)."""
    if vendor != "nvidia" or sms <= 0 or clock_hz <= 0:
        return None
    return IssueRates(
        issue_per_s=sms * SCHEDULERS_PER_SM * WARP_LANES * clock_hz,
        sfu_per_s=sms * SFU_PER_SM_PER_CLOCK * clock_hz,
    )


# ------------------------------------------------------------------------------------------------ the arithmetic

# (thread-instructions, of which SFU) per element for the fp32 routine PyTorch's kernel calls. NB: estimates of the
# libdevice routines' SASS as CUDA 12 compiles them without fast-math (PyTorch's build): not read from the SASS of
# torch's own kernels here; a SASS dump (cuobjdump -sass) of the kernel is the check. Each is the common path:
#   expf: range reduction (FMUL, FFMA.RM, FADD, 2 FFMA), MUFU.EX2, scaling (SHL/FMUL), the fast-path test: ~8, 1 SFU;
#   logf: denormal scaling, exponent/mantissa split (integer ops), a degree-8 polynomial by FFMA, the ln2 term and the
#     special-value select: ~18, no SFU; log1pf: the same with the 1+x reduction and its correction: ~22, no SFU;
#   tanhf: |x| >= 0.6 through ex2 and a reciprocal (MUFU.EX2, MUFU.RCP), else a short odd polynomial: ~14, 2 SFU;
#   erff: a polynomial in x (|x| < 1) or exp of a polynomial (|x| >= 1): ~16, 1 SFU;
#   an IEEE fp32 divide (div.rn.f32): MUFU.RCP, 4 FFMA refinements, FCHK and its branch: ~10, 1 SFU;
#   sqrtf (sqrt.rn.f32): MUFU.RSQ and the Newton correction: ~7, 1 SFU; rsqrtf: MUFU.RSQ and the denormal test: ~4.
EXP = (8, 1)
LOG = (18, 0)
LOG1P = (22, 0)
TANH = (14, 2)
ERF = (16, 1)
DIV = (10, 1)
SQRT = (7, 1)
RSQRT = (4, 1)


def _sum(*parts: tuple[int, int]) -> tuple[int, int]:
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


ONE = (1, 0)  # one FADD/FMUL/FFMA/FMNMX/select
# The formula each op's CUDA functor evaluates (aten/src/ATen/native/cuda/*), per element, in fp32.
ARITHMETIC: dict[str, tuple[int, int]] = {
    "add": ONE,  # NB: a + alpha * b: one FFMA
    "sub": ONE,  # NB: a - alpha * b: one FFMA
    "mul": ONE,
    "div": DIV,  # NB: true division; a 0-dim divisor becomes a multiply by its reciprocal (see estimate)
    "neg": ONE,
    "abs": ONE,
    "relu": (2, 0),  # NB: clamp_min(x, 0) with NaN propagation: a compare and a select
    "maximum": (3, 0),  # NB: FMNMX and the NaN test (isnan(a) || a > b)
    "minimum": (3, 0),
    "clamp": (4, 0),  # NB: a min, a max and their NaN tests
    "exp": EXP,
    "log": LOG,
    "log1p": LOG1P,
    "tanh": TANH,
    "erf": ERF,
    "sqrt": SQRT,
    "rsqrt": RSQRT,
    "sigmoid": _sum(EXP, ONE, DIV),  # NB: 1 / (1 + exp(-x)): the negation folds into the exp's first FMUL
    "silu": _sum(EXP, ONE, DIV),  # NB: x / (1 + exp(-x))
    "softplus": _sum((3, 0), EXP, LOG1P, DIV),  # NB: x*beta > threshold ? x : log1p(exp(x*beta)) / beta: FMUL,
    # compare, select, the exp, the log1p and an IEEE divide by beta
    "mish": _sum(EXP, LOG1P, TANH, ONE),  # NB: x * tanh(log1p(exp(x)))
    "gelu": _sum((4, 0), ERF),  # NB: the erf form (torch's default): x * 0.5 * (1 + erf(x * M_SQRT1_2)); the tanh
    # form (approximate='tanh') is not told apart here: x^3 and 3 FFMA around a tanh, ~20, 2 SFU
    "hardswish": (5, 0),  # NB: x * min(max(x + 3, 0), 6) / 6: FADD, 2 FMNMX, 2 FMUL
    "hardsigmoid": (4, 0),
    "leaky_relu": (2, 0),  # NB: x > 0 ? x : x * slope: FMUL, select
    "elu": _sum((3, 0), EXP),  # NB: x > 0 ? x : alpha * (exp(x) - 1)
    "pow": _sum(LOG, EXP, (4, 0)),  # NB: powf through exp2(y * log2(x)) with the sign and special-value tests
    "reciprocal": DIV,
    "square": ONE,
    "copy": (0, 0),  # NB: clone/contiguous/copy_: data movement (a dtype cast adds its conversions below)
    "clone": (0, 0),
    "where": (1, 0),  # NB: a select on the (bool) condition
}

# Scans (cumsum, cumprod, logcumsumexp): the combine op of each
SCAN_COMBINE: dict[str, tuple[int, int]] = {
    "cumsum": ONE,
    "cumprod": ONE,
    "logcumsumexp": _sum(EXP, LOG1P, (3, 0)),  # NB: max + log1p(exp(min - max)) per combine
}
#: log2 of the threads of PyTorch's innermost-dim scan block. NB: ScanUtils.cuh (tensor_kernel_scan_innermost_dim,
#: get_log_num_threads_x_inner_scan) splits 2**9 threads between the row and the rows: log2(threads along the row)
#: = (9 + ceil(log2(row)) - ceil(log2(rows))) // 2, kept within [4, 9]; each thread holds 2 elements of a row chunk
#: of 2 x that many, scanned in shared memory by an up-sweep and a down-sweep (log2(chunk) steps each).
SCAN_LOG_THREADS = 9
#: thread-instructions per element per step of the shared-memory scan (each of the 2 x log2(chunk) steps: shared
#: loads and stores, the combine, the barrier, the index math and predicates for the 2 elements a thread holds). NB:
#: measured (benchmarks/instruction_counts_gpu.py, ncu on an H100, 2026-11-27): a bf16 cumsum along rows of 4096
#: (16 threads along a row: 10 steps) executed 98.2 thread-instructions an element; the combine, load, store,
#: conversions and carry (9) leave 89 for the 10 steps. One shape measured (2 per step was the reading of the source)
SCAN_STEP = 9
#: thread-instructions per element for the scan's chunk loop: the carry from the previous chunk combined in, the
#: row and chunk index math. NB: an estimate
SCAN_CARRY = 4


def scan_threads_x(shape: tuple[int, ...]) -> int:
    """Threads along the scanned row of PyTorch's innermost-dim scan kernel for an output of ``shape`` (the last dim
    scanned). NB: the scan's dim is not recorded with the op: the innermost is assumed (dim=-1, the common case); a
    scan over an outer dim runs tensor_kernel_scan_outer_dim, a sequential loop per column with no shared-memory
    steps, and is over-counted here."""
    row = shape[-1] if shape else 1
    rows = max(_numel(shape) // max(row, 1), 1)
    log_x = math.ceil(math.log2(max(row, 1)))
    log_y = math.ceil(math.log2(rows))
    return 1 << min(max((SCAN_LOG_THREADS + log_x - log_y) // 2, 4), SCAN_LOG_THREADS)


# ------------------------------------------------------------------------------------------------ memory and index

#: bytes per vectorized load or store: PyTorch's vectorized element-wise kernel moves 16 bytes per instruction for
#: contiguous inputs (aten/src/ATen/native/cuda/MemoryAccess.cuh: vec_size elements of one aligned_vector)
VECTOR_BYTES = 16
#: thread-instructions per vector of output elements for the vectorized kernel's loop and address math. NB: an
#: estimate (the loop counter, the bounds test, 64-bit address arithmetic)
VECTOR_LOOP = 4
#: the generic (strided or broadcast) kernel's index math: GENERIC_FIXED an element (its unrolled loop, bounds tests,
#: 64-bit addresses) and GENERIC_DIM a dim of the output (OffsetCalculator's divmod by the dim's size, IntDivider:
#: IMAD.HI, SHF, IMAD, and its bookkeeping), besides one a dim per operand (its stride accumulated) and one for the
#: output's. NB: measured on an H100 (2026-11-27): ncu read 70.8 thread-instructions an element for the 4-d bf16
#: NCHW -> NHWC copy before a convolution (benchmarks/instruction_counts_gpu.py; 2 + 25 + 4 x (9 + 2) = 71), and
#: the SM throughput of a 2-d bf16 broadcast multiply (x * rsqrt(...) of RMSNorm written out, 8192 x 8192: 65.9%
#: in 170 us) gives 56 issued an element (7 + 25 + 2 x (9 + 3) = 56), where in the six kernels counted the issued
#: share equalled the SM throughput within a point; the broadcast divide of softmax written out (16384 x 8192,
#: 72.8% in 361 us: 65.5) is predicted at 65. The reading of the source alone gave 3 a dim and nothing fixed: 3.2x
#: too few. torch coalesces contiguous dims first, so the output's rank (dims of size 1 dropped) over-counts where
#: dims coalesce
GENERIC_FIXED = 25
GENERIC_DIM = 9
#: thread-instructions per 16-bit element converted to or from fp32. NB: a bf16 -> fp32 is a shift or PRMT, an
#: fp32 -> bf16/fp16 is one F2F (sm_80+ packs two in one F2FP: an upper count by half an instruction)
CONVERT = 1
#: 16-bit storage dtypes whose math runs in fp32 (opmath)
HALF_DTYPES = ("bf16", "fp16")
DTYPE_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}

#: ops read as element-wise-by-index: the output's index decides the input's (no arithmetic)
INDEX_OPS = ("flip", "roll")

# Pooling: PyTorch's max/avg pool kernels (aten/src/ATen/native/cuda/DilatedMaxPool2d.cu, AveragePool2d.cu and their
# 1-d/3-d kin) run one thread per output element: the output index split into its pooled coordinates by runtime
# integer divisions (below 20 instructions each, 64-bit ones far more), the window's bounds clipped to the input,
# then a loop over the window's taps, each a scalar load. Per tap: one load, a conversion for a 16-bit input, the
# arithmetic (max: the compare, its NaN test and the two selects, 4; avg: one FADD) and the tap's index math (its
# 64-bit offset and address, the loops' bounds and branches: POOL_TAP_INDEX); per output the coordinates, bounds and
# pointers (POOL_OUTPUT_INDEX), the store, and max's index store (2) or avg's divide. NB: the two index terms are
# measured (benchmarks/instruction_counts_gpu.py, ncu on an H100, 2026-11-27): MaxPool2d(3, 2, 1) read 447
# thread-instructions an output (8.95 taps) and AvgPool2d(2) 293 (4 taps), bf16 NCHW; taking the index math per tap
# and per output as the same code in both kernels, 24 a tap and 172 an output give both back (the reading of the
# source alone gave 2 and 17: 5-6x too few). 2-d pools measured; the 1-d and 3-d kernels are taken alike
POOL_TAP_ARITHMETIC = {"max": 4.0, "avg": 1.0}
POOL_TAP_INDEX = 24.0
POOL_OUTPUT_INDEX = 172.0
#: the pooling ops by kind
POOL_OPS: dict[str, str] = {
    **{f"max_pool{n}d{w}": "max" for n in (1, 2, 3) for w in ("", "_with_indices")},
    **{f"avg_pool{n}d": "avg" for n in (1, 2, 3)},
}


def pool_window(op: str, flops: float, outputs: int) -> float | None:
    """The mean taps per window of a pooling op from its counted FLOPs (roofline.costs.aten.pooling: max counts one
    compare per tap read, avg one add per tap and one divide per output); None for other ops."""
    kind = POOL_OPS.get(op_key(op))
    if kind is None or outputs <= 0:
        return None
    taps = flops - outputs if kind == "avg" else flops
    return max(taps / outputs, 0.0)


@dataclass(frozen=True)
class Estimate:
    """Thread-instructions per output element, split: ``total`` includes ``sfu``; ``parts`` names each term."""

    total: float
    sfu: float
    parts: tuple[tuple[str, float], ...]

    def arithmetic(self) -> Estimate:
        """The part a fused kernel doing the same math still issues: the arithmetic (and a scan's steps), without
        the loads, stores, conversions and index math that fusion shares among the ops."""
        kept = tuple((name, value) for name, value in self.parts if name in ("arithmetic", "scan"))
        return Estimate(sum(v for _, v in kept), self.sfu, kept)

    def describe(self) -> str:
        """'~45.8 instructions/element (arithmetic 43 of them 2 SFU, memory 0.25, conversions 2, index 0.5)'."""
        inner = ", ".join(
            f"{name} {value:g}{f' of them {self.sfu:g} SFU' if name == 'arithmetic' and self.sfu else ''}"
            for name, value in self.parts
            if value
        )
        return f"~{self.total:.3g} instructions/element ({inner})"


def op_key(op: str) -> str:
    """'aten::add_.Tensor' -> 'add': the aten name without namespace, overload and in-place suffix."""
    name = op.split("::")[-1].split(".")[0]
    return name[:-1] if name.endswith("_") and not name.endswith("__") else name


def has_estimate(op: str) -> bool:
    key = op_key(op)
    return key in ARITHMETIC or key in SCAN_COMBINE or key in INDEX_OPS or key in POOL_OPS


def _numel(shape: tuple[int, ...] | list[int]) -> int:
    return math.prod(shape) if shape else 1


def estimate(
    op: str,
    dtype: str,
    input_shapes: list[list[int]] | tuple[tuple[int, ...], ...],
    output_shape: list[int] | tuple[int, ...],
    *,
    strided: bool = False,
    window: float | None = None,
) -> Estimate | None:
    """Thread-instructions per output element of ``op`` (None: not in the tables, or an unknown dtype).

    ``window``: a pooling op's mean taps per output (:func:`pool_window`); a pooling op without it has no estimate.

    ``input_shapes``: the tensor inputs (0-dim entries are scalars: a kernel argument, no load); an input whose shape
    is not the output's is broadcast, and that or ``strided`` (non-contiguous inputs) puts the op on the generic
    kernel: one scalar load per operand and offset math per dim instead of 16-byte vectors."""
    key = op_key(op)
    size = DTYPE_BYTES.get(dtype)
    if size is None:
        return None
    out = tuple(output_shape)
    tensors = [tuple(s) for s in input_shapes if len(s) > 0]
    half = dtype in HALF_DTYPES
    if key in SCAN_COMBINE:
        steps = 2 * int(math.log2(2 * scan_threads_x(out)))
        combine = SCAN_COMBINE[key]
        parts = (
            ("arithmetic", float(combine[0])),
            ("memory", 2.0),  # NB: one scalar load and one store per element (the scan kernels do not vectorize)
            ("conversions", 2.0 * CONVERT if half else 0.0),
            ("scan", float(SCAN_STEP * steps + SCAN_CARRY)),
        )
        return Estimate(sum(v for _, v in parts), float(combine[1]), parts)
    if key in POOL_OPS:
        if window is None:
            return None
        kind = POOL_OPS[key]
        # NB: per output: its coordinates, bounds and pointers (POOL_OUTPUT_INDEX), the store (and its conversion),
        # and max's index store or avg's divide by the window's count
        finish = (2.0, 0.0) if kind == "max" else DIV
        parts = (
            ("arithmetic", window * POOL_TAP_ARITHMETIC[kind] + finish[0]),
            ("memory", window + 1.0),
            ("conversions", (window + 1.0) * CONVERT if half else 0.0),
            ("index", window * POOL_TAP_INDEX + POOL_OUTPUT_INDEX),
        )
        return Estimate(sum(v for _, v in parts), float(finish[1]), parts)
    if key in INDEX_OPS:
        dims = len([d for d in out if d != 1])
        # NB: flip/roll: each output element's source offset by the generic kernel's divmods, one scalar load and
        # one store; no arithmetic, no conversion
        parts = (("memory", 2.0), ("index", float(GENERIC_FIXED + dims * (GENERIC_DIM + 2))))
        return Estimate(sum(v for _, v in parts), 0.0, parts)
    if key not in ARITHMETIC:
        return None
    alu, sfu = ARITHMETIC[key]
    if key == "div" and len(input_shapes) >= 2 and len(input_shapes[1]) == 0:
        # NB: torch's div_true_kernel_cuda multiplies by the reciprocal of a CPU-scalar divisor (a 0-dim operand:
        # a Python number), computed on the host: one FMUL
        alu, sfu = ONE
    operands = len(tensors)
    generic = strided or any(s != out for s in tensors)
    per_vector = VECTOR_BYTES / size
    if generic:
        dims = len([d for d in out if d != 1])
        memory = float(operands + 1)
        index = float(GENERIC_FIXED + dims * (GENERIC_DIM + operands + 1))
    else:
        memory = (operands + 1) / per_vector
        index = VECTOR_LOOP / per_vector
    conversions = float((operands + 1) * CONVERT) if half else 0.0
    if key in ("copy", "clone"):
        conversions = 0.0  # NB: a same-dtype copy moves bits; a cast (aten::_to_copy) is not in the table
    parts = (("arithmetic", float(alu)), ("memory", memory), ("conversions", conversions), ("index", index))
    return Estimate(sum(v for _, v in parts), float(sfu), parts)


def instruction_time(elements: int, per_element: Estimate, rates: IssueRates) -> float:
    """Seconds the SMs need to issue ``elements`` x ``per_element``: the issue slots or the SFU pipe, the slower."""
    return elements * max(per_element.total / rates.issue_per_s, per_element.sfu / rates.sfu_per_s)


__all__ = [
    "ARITHMETIC",
    "CONVERT",
    "GENERIC_DIM",
    "GENERIC_FIXED",
    "POOL_OPS",
    "SCAN_COMBINE",
    "SCHEDULERS_PER_SM",
    "SFU_PER_SM_PER_CLOCK",
    "VECTOR_BYTES",
    "VECTOR_LOOP",
    "WARP_LANES",
    "Estimate",
    "IssueRates",
    "estimate",
    "has_estimate",
    "instruction_time",
    "issue_rates",
    "op_key",
    "pool_window",
]
