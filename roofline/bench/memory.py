"""What a bench row needs in memory, known before anything is allocated, and whether it fits.

:func:`estimate` counts, from the same validated parameters the cost formulas use, the bytes a row's runner
(roofline.bench.runners) holds at its peak: its operands and outputs, the intermediates of the naive forms (naive
attention's S x S scores and probabilities per head, RMSNorm's fp32 intermediate, convolution's im2col columns),
a second output where the op allocates a fresh one per call (the new one exists before the old one is freed) and
the fp32 staging of the random inputs (``runners.random`` draws fp32, then converts). :func:`check` compares it
with the free memory of the device the row runs on; a row that needs more than ``FIT_SHARE`` of it is skipped
before allocating, with a reason that names the biggest parts. Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from roofline.costs.elementwise import arity
from roofline.units import format_bytes

#: bytes per element of each dtype bench runs (roofline.bench.runners.TORCH_DTYPES: tf32 is stored as fp32)
ELEMENT_BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1}
#: a row runs when its estimate is at most this share of the free memory (the rest: the allocator's rounding and
#: caching, the kernels' own workspaces, the interpreter)
FIT_SHARE = 0.8
#: bytes of an fp32 element (the staging of random inputs, fp32 intermediates)
FP32 = 4


@dataclass(frozen=True)
class MemoryEstimate:
    """The bytes a row needs at its peak (``total``) and its parts, largest first when shown."""

    parts: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(size for _, size in self.parts)

    def describe(self, limit: int = 3) -> str:
        """'S x S scores and probabilities 256 TB, Q, K, V 768 MB, ...': the biggest ``limit`` parts."""
        parts = sorted((part for part in self.parts if part[1] > 0), key=lambda part: -part[1])
        text = ", ".join(f"{name} {format_bytes(size)}" for name, size in parts[:limit])
        return text + (", ..." if len(parts) > limit else "")


def _size(dtype: str) -> int:
    return ELEMENT_BYTES.get(dtype, FP32)


def _staging(dtype: str, largest: int) -> tuple[str, int]:
    """``runners.random`` draws fp32 and converts: one fp32 copy of the largest random input while it is drawn
    (none for fp32, whose draw is the tensor, nor int8, drawn as int8)."""
    return ("fp32 staging of the inputs", 0 if dtype in ("fp32", "tf32", "int8") else FP32 * largest)


def _gemm(p: Any) -> list[tuple[str, int]]:
    a, b, c = p.batch * p.m * p.k, p.batch * p.k * p.n, p.batch * p.m * p.n
    e = _size(p.dtype)
    if p.dtype == "fp8":  # torch._scaled_mm allocates its output per call: two while the new one is written
        return [("A, B", a + b), ("C (two: one per call)", 2 * c * _size(p.out_dtype or "bf16")), _staging("fp8", a)]
    if p.dtype == "int8":  # int32 C into a preallocated output
        return [("A, B", a + b), ("C (int32)", FP32 * c)]
    return [("A, B", e * (a + b)), ("C", e * c), _staging(p.dtype, max(a, b))]


def _attention(p: Any) -> list[tuple[str, int]]:
    b, h, hkv, sq, skv, d = p.batch, p.heads, p.n_kv_heads, p.seq_q, p.kv_len, p.head_dim
    e = _size(p.dtype)
    q, kv, out = b * h * sq * d, b * hkv * skv * d, b * h * sq * d
    parts = [("Q, K, V", e * (q + 2 * kv))]
    repeated = 2 * e * b * h * skv * d if h != hkv else 0  # K and V repeated to every query head (GQA/MQA)
    if p.impl == "naive":
        parts += [
            ("S x S scores and probabilities", 2 * e * b * h * sq * skv),
            ("K, V repeated per head", repeated),
            ("output", e * out),
        ]
        if p.causal:  # the bool mask, and the int64 positions it is built from
            parts.append(("causal mask", sq * skv + 8 * (2 * sq + skv)))
    else:  # fused: tiles, never S x S; an output per call (two while the new one is written) and the row statistics
        parts += [("output (two: one per call)", 2 * e * out), ("softmax statistics (fp32)", FP32 * b * h * sq)]
    parts.append(_staging(p.dtype, max(q, kv)))
    return parts


def _elementwise(p: Any) -> list[tuple[str, int]]:
    n, e = p.numel, _size(p.dtype)
    inputs = arity(p.op) if p.op != "dropout" else 1
    parts = [("inputs", e * n * inputs), ("output", e * n)]
    if p.op == "dropout":  # F.dropout allocates its output and keep-mask per call: two of each at the peak
        parts.append(("dropout output and mask (two: one per call)", 2 * (e + 1) * n))
    parts.append(_staging(p.dtype, n))
    return parts


def _norm(p: Any) -> list[tuple[str, int]]:
    n, e = p.rows * p.cols, _size(p.dtype)
    if p.op == "softmax":  # into a preallocated output
        return [("input", e * n), ("output", e * n), _staging(p.dtype, n)]
    weights = (2 if p.op == "layernorm" else 1) * e * p.cols if p.affine else 0
    parts = [("input", e * n), ("weights", weights), ("output (two: one per call)", 2 * e * n)]
    if p.op == "layernorm":
        parts.append(("mean and rstd (fp32)", 2 * FP32 * p.rows))
    else:  # RMSNorm: an fp32 intermediate as large as the input (measured on torch 2.13's CPU F.rms_norm)
        parts.append(("fp32 intermediate", FP32 * n))
    parts.append(_staging(p.dtype, n))
    return parts


def _conv2d(p: Any) -> list[tuple[str, int]]:
    e = _size(p.dtype)
    x = p.batch * p.in_channels * p.height * p.width
    w = p.out_channels * (p.in_channels // p.groups) * p.kernel_size**2
    out = p.batch * p.out_channels * p.out_height * p.out_width
    columns = p.in_channels * p.kernel_size**2 * p.out_height * p.out_width  # im2col of one image
    return [
        ("input, weights", e * (x + w + (p.out_channels if p.bias else 0))),
        ("output (two: one per call)", 2 * e * out),
        ("im2col columns (one image)", e * columns),
        _staging(p.dtype, max(x, w)),
    ]


ESTIMATES: dict[str, Callable[[Any], list[tuple[str, int]]]] = {
    "gemm": _gemm,
    "attention": _attention,
    "elementwise": _elementwise,
    "norm": _norm,
    "conv2d": _conv2d,
}


def estimate(kind: str, params: Any) -> MemoryEstimate | None:
    """The peak bytes of one row of ``kind`` with validated ``params`` (a cost model's); None for a kind without a
    runner (nothing is checked)."""
    count = ESTIMATES.get(kind)
    return MemoryEstimate(tuple(count(params))) if count is not None else None


@dataclass(frozen=True)
class Free:
    """Free memory of the device a row runs on: ``bytes`` and ``where`` ('on the host (MemAvailable)',
    'on cuda:0')."""

    bytes: int
    where: str


def check(need: MemoryEstimate | None, free: Free | None, share: float = FIT_SHARE) -> str:
    """'' when ``need`` fits in ``share`` of ``free`` (or either is unknown), else the reason it does not: one
    line for the report and stderr."""
    if need is None or free is None or need.total <= share * free.bytes:
        return ""
    return (
        f"does not fit in memory: needs {format_bytes(need.total)} ({need.describe()}), more than {share:.0%} of "
        f"the {format_bytes(free.bytes)} free {free.where}"
    )
