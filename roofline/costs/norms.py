"""Row-wise normalisations (LayerNorm, RMSNorm, softmax): one kernel over a rows x cols tensor."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from roofline.costs.base import Cost, Kernel, Params, register
from roofline.dtypes import nbytes

Size = Annotated[int, Field(gt=0)]

# FLOPs per element, (with affine weights, without). NB: the per-row work (one rsqrt or reciprocal,
# dividing a sum by cols) is O(rows) and not counted.
FLOPS_PER_ELEMENT: dict[str, tuple[int, int]] = {
    # NB: mean 1 (sum), center 1 (x - mean), square + sum 2, scale by rstd 1; affine 2 (*weight, +bias)
    "layernorm": (7, 5),
    # NB: square 1, sum 1, scale by rms 1; affine 1 (*weight, no bias)
    "rmsnorm": (4, 3),
    # NB: max 1, subtract 1, exp 1, sum 1, divide 1; softmax has no weights
    "softmax": (5, 5),
}

# Weight vectors of length cols read when affine. NB: LayerNorm has weight and bias, RMSNorm a weight.
WEIGHT_VECTORS: dict[str, int] = {"layernorm": 2, "rmsnorm": 1, "softmax": 0}


class NormParams(Params):
    sizes = ("rows", "cols")

    op: str
    rows: Size
    cols: Size
    dtype: str = "fp16"
    affine: bool = True

    @field_validator("op", mode="before")
    @classmethod
    def _known_op(cls, value: object) -> object:
        if isinstance(value, str):
            key = value.strip().lower().replace("_", "").replace("-", "")
            if key not in FLOPS_PER_ELEMENT:
                raise ValueError(f"unknown norm op {value!r}: use one of {', '.join(FLOPS_PER_ELEMENT)}")
            return key
        return value

    def label(self) -> str:
        return f"{self.op} rows={self.rows} cols={self.cols}"


@register("norm", NormParams, "LayerNorm / RMSNorm / softmax over the last dim of a rows x cols tensor")
def norm(p: NormParams) -> Cost:
    # NB: one fused kernel: x read once, y written once, the weight vectors (cols elements each, same
    # dtype) read once when affine. Inference: the per-row statistics are not written out. Softmax has
    # no weights, so affine does not change it.
    numel = p.rows * p.cols
    with_weights, without = FLOPS_PER_ELEMENT[p.op]
    affine = p.affine and WEIGHT_VECTORS[p.op] > 0
    per_element = with_weights if affine else without
    x = nbytes(numel, p.dtype)
    y = nbytes(numel, p.dtype)
    w = nbytes(WEIGHT_VECTORS[p.op] * p.cols, p.dtype) if affine else 0
    notes = [
        f"{p.op}: {per_element} FLOPs per element{' with affine weights' if affine else ''}; "
        "per-row rsqrt/reciprocal not counted",
        "x read once, y written once, weights read once; row statistics kept on chip",
    ]
    return Cost(
        kind="norm",
        kernels=(Kernel(p.op, per_element * numel, x + y + w, p.dtype, "vector"),),
        notes=tuple(notes),
        byte_terms={"input": x, "output": y, "weights": w},
    )
