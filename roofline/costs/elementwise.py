"""Element-wise ops: one kernel reading its inputs once and writing its output once."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from roofline.costs.base import Cost, Kernel, Params, register
from roofline.dtypes import nbytes

Size = Annotated[int, Field(gt=0)]

# FLOPs per output element. NB: every arithmetic operation counts 1, and so does every transcendental
# (exp, erf, tanh, log, sqrt): a GPU evaluates them in a few SFU/FMA instructions, and element-wise
# kernels are memory-bound by orders of magnitude, so the exact weight does not move their bound.
FLOPS_PER_ELEMENT: dict[str, int] = {
    "relu": 1,  # NB: max(x, 0): one compare/select
    "gelu": 5,  # NB: erf form (torch default): x/sqrt2, erf, +1, *x, *0.5
    # NB: 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))): x^3 2, *0.044715 1, +x 1, *sqrt(2/pi) 1,
    # tanh 1, +1 1, *x 1, *0.5 1
    "gelu_tanh": 9,
    "silu": 5,  # NB: x*sigmoid(x): neg, exp, +1, div, *x
    "sigmoid": 4,  # NB: 1/(1+exp(-x)): neg, exp, +1, div
    "tanh": 1,  # NB: one transcendental
    "exp": 1,  # NB: one transcendental
    "log": 1,  # NB: one transcendental
    "sqrt": 1,  # NB: one transcendental
    "rsqrt": 1,  # NB: one transcendental
    "neg": 1,  # NB: one sign flip
    "abs": 1,  # NB: one sign clear
    "square": 1,  # NB: x*x
    "add": 1,  # NB: x+y, two tensor inputs of the same shape
    "sub": 1,  # NB: x-y, two tensor inputs
    "mul": 1,  # NB: x*y, two tensor inputs
    "div": 1,  # NB: x/y, two tensor inputs (a divide counts 1)
    "maximum": 1,  # NB: max(x, y), two tensor inputs
    "add_scalar": 1,  # NB: x+c, the scalar is free (a kernel argument)
    "mul_scalar": 1,  # NB: x*c, the scalar is free
    "copy": 0,  # NB: clone/contiguous: pure data movement, read once and write once
    "dropout": 2,  # NB: compare a random number with p, scale by 1/(1-p); random generation not counted
}

# Tensor inputs per op (1 unless listed). NB: binary ops take two full-size inputs; a broadcast input
# would be read once at its own (smaller) size, which this shape-only model does not describe.
INPUTS: dict[str, int] = {"add": 2, "sub": 2, "mul": 2, "div": 2, "maximum": 2}

# Extra outputs. NB: dropout writes its keep-mask as 1 byte per element (torch returns a bool mask).
MASK_BYTES_PER_ELEMENT: dict[str, int] = {"dropout": 1}


class ElementwiseParams(Params):
    sizes = ("numel",)

    op: str
    numel: Size
    dtype: str = "fp16"

    @field_validator("op", mode="before")
    @classmethod
    def _known_op(cls, value: object) -> object:
        if isinstance(value, str):
            key = value.strip().lower().replace("-", "_")
            if key not in FLOPS_PER_ELEMENT:
                known = ", ".join(FLOPS_PER_ELEMENT)
                raise ValueError(f"unknown element-wise op {value!r}: use one of {known}")
            return key
        return value

    def label(self) -> str:
        return f"{self.op} numel={self.numel}"


def arity(op: str) -> int:
    """Number of full-size tensor inputs of ``op``."""
    return INPUTS.get(op, 1)


@register("elementwise", ElementwiseParams, "y = op(x[, y]) element by element over numel elements")
def elementwise(p: ElementwiseParams) -> Cost:
    # NB: compulsory bytes: each input read once, the output written once (plus dropout's 1-byte mask).
    # An in-place op (x.add_(y)) moves the same bytes: x is read and written.
    flops = FLOPS_PER_ELEMENT[p.op] * p.numel
    inputs = arity(p.op) * nbytes(p.numel, p.dtype)
    output = nbytes(p.numel, p.dtype)
    terms = {"inputs": inputs, "outputs": output}
    notes = [
        f"{p.op}: {FLOPS_PER_ELEMENT[p.op]} FLOPs per element (a transcendental counts 1)",
        "each input read once, the output written once",
    ]
    mask_bytes = MASK_BYTES_PER_ELEMENT.get(p.op, 0) * p.numel
    if mask_bytes:
        terms["mask"] = mask_bytes
        notes.append("dropout writes its keep-mask as 1 byte per element")
    return Cost(
        kind="elementwise",
        kernels=(Kernel(p.op, flops, inputs + output + mask_bytes, p.dtype, "vector"),),
        notes=tuple(notes),
        byte_terms=terms,
    )
