"""GEMM and batched GEMM."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from roofline.costs.base import Cost, Kernel, Params, register
from roofline.dtypes import nbytes

Size = Annotated[int, Field(gt=0)]


class GemmParams(Params):
    sizes = ("m", "n", "k", "batch")

    m: Size
    n: Size
    k: Size
    batch: Size = 1
    dtype: str = "fp16"
    out_dtype: str | None = None
    tf32: bool = False

    def label(self) -> str:
        shape = f"m={self.m} n={self.n} k={self.k}"
        return shape if self.batch == 1 else f"batch={self.batch} {shape}"


@register("gemm", GemmParams, "C[b,m,n] = A[b,m,k] @ B[b,k,n] (batch=1: plain GEMM)")
def gemm(p: GemmParams) -> Cost:
    # NB: 2 FLOPs per multiply-add: 2*m*n*k per batch entry. Compulsory bytes: A and B read once, C
    # written once (no beta*C read; a bias or accumulate-into-C would add one read of C).
    out_dtype = p.out_dtype or p.dtype
    flops = 2 * p.batch * p.m * p.n * p.k
    a = nbytes(p.batch * p.m * p.k, p.dtype)
    b = nbytes(p.batch * p.k * p.n, p.dtype)
    c = nbytes(p.batch * p.m * p.n, out_dtype)
    name = "gemm" if p.batch == 1 else "bmm"
    notes = ("2 FLOPs per multiply-add; A and B read once, C written once (no C read)",)
    return Cost(
        kind="gemm",
        kernels=(Kernel(name, flops, a + b + c, p.dtype, "tensor", tf32=p.tf32),),
        notes=notes,
        byte_terms={"A": a, "B": b, "C": c},
    )
