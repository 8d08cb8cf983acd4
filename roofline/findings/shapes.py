"""Matmul shapes: M, N, K of a matmul-like op from its stored input shapes, and the dims off the tile grid. Pure.

Read by the bound classes (roofline.findings.bounds: a matmul far below its roof with dims off the grid) and the
model findings (awkward-shapes, the pad technique), so that both judge a shape the same way."""

from __future__ import annotations

from dataclasses import dataclass

from roofline.report.rows import OpPoint, numel

#: GEMM dims are judged against multiples of this (the tile edge of tensor-core GEMM kernels; 64 x 2 B rows keep
#: every row 16-byte aligned as their vectorised and TMA loads need)
ALIGN = 64


@dataclass(frozen=True)
class GemmDims:
    batch: int
    m: int
    n: int
    k: int
    a: int  # input position of the left operand
    b: int  # input position of the right operand (the weight of a Linear)


def op_name(op: str) -> str:
    """An aten op's bare name: 'aten::addmm.out' -> 'addmm'."""
    return op.rsplit("::", 1)[-1].split(".", 1)[0]


BIAS_FIRST = frozenset({"addmm", "addmm_", "baddbmm", "baddbmm_", "addmv", "addmv_", "addbmm", "addbmm_"})


def gemm_dims(point: OpPoint) -> GemmDims | None:
    """M, N, K (and batch) of a matmul-like op from its input shapes; None for convolutions and other ops."""
    if point.math != "tensor":
        return None
    name = op_name(point.op)
    shapes = point.input_shapes
    if "conv" in name or len(shapes) < 2:
        return None
    if name == "linear":  # input [..., K], weight [N, K]
        a, w = shapes[0], shapes[1]
        if len(a) < 1 or len(w) != 2 or a[-1] != w[1]:
            return None
        return GemmDims(1, numel(a[:-1]), w[0], a[-1], 0, 1)
    ia, ib = (1, 2) if name in BIAS_FIRST and len(shapes) >= 3 else (0, 1)
    a, b = shapes[ia], shapes[ib]
    if len(a) < 2 or len(b) < 1:
        return None
    if len(b) == 1:  # matrix-vector
        if a[-1] != b[0]:
            return None
        return GemmDims(numel(a[:-2]), a[-2], 1, a[-1], ia, ib)
    if a[-1] != b[-2]:
        return None
    return GemmDims(max(numel(a[:-2]), numel(b[:-2])), a[-2], b[-1], a[-1], ia, ib)


def off_grid(dims: GemmDims) -> dict[str, int]:
    """The dims of at least ALIGN that are not a multiple of it ({'n': 50257}); small dims are not judged."""
    return {name: v for name, v in (("m", dims.m), ("n", dims.n), ("k", dims.k)) if v >= ALIGN and v % ALIGN}


#: the row alignment (bytes) tensor-core GEMM kernels load at full width (16-byte vectors, TMA)
ROW_ALIGN_BYTES = 16


def misaligned(dims: GemmDims, element_bytes: float) -> dict[str, int]:
    """The dims that set a row stride (K: the left operand's rows; N: the right operand's and the output's)
    whose rows are not ROW_ALIGN_BYTES-aligned ({'n': 50257} for bf16); {} when the element size is unknown."""
    if element_bytes <= 0:
        return {}
    return {name: v for name, v in (("k", dims.k), ("n", dims.n)) if (v * element_bytes) % ROW_ALIGN_BYTES}


__all__ = ["ALIGN", "BIAS_FIRST", "ROW_ALIGN_BYTES", "GemmDims", "gemm_dims", "misaligned", "off_grid", "op_name"]
