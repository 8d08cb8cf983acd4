"""2-D convolution (NCHW, square kernel), counted as the implicit GEMM it is."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from roofline.costs.base import Cost, Kernel, Params, register
from roofline.dtypes import nbytes

Size = Annotated[int, Field(gt=0)]


class Conv2dParams(Params):
    sizes = ("batch", "in_channels", "out_channels", "height", "width", "kernel_size")

    batch: Size = 1
    in_channels: Size
    height: Size
    width: Size
    out_channels: Size
    kernel_size: Size = 3
    stride: Size = 1
    padding: Annotated[int, Field(ge=0)] = 0
    dilation: Size = 1
    groups: Size = 1
    dtype: str = "fp16"
    tf32: bool = False
    bias: bool = False

    @model_validator(mode="after")
    def _check(self) -> Conv2dParams:
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(
                f"in_channels ({self.in_channels}) and out_channels ({self.out_channels}) must both be "
                f"divisible by groups ({self.groups})"
            )
        if self.out_height < 1 or self.out_width < 1:
            raise ValueError(
                f"the output would be empty ({self.out_height} x {self.out_width}): the input "
                f"{self.height} x {self.width} with padding {self.padding} is smaller than the kernel "
                f"{self.kernel_size} at dilation {self.dilation}"
            )
        return self

    def _out(self, size: int) -> int:
        span = self.dilation * (self.kernel_size - 1) + 1
        return (size + 2 * self.padding - span) // self.stride + 1

    @property
    def out_height(self) -> int:
        return self._out(self.height)

    @property
    def out_width(self) -> int:
        return self._out(self.width)

    def label(self) -> str:
        text = (
            f"n={self.batch} c={self.in_channels} h={self.height} w={self.width} "
            f"k={self.out_channels} r={self.kernel_size}"
        )
        for name, default in (("stride", 1), ("padding", 0), ("dilation", 1), ("groups", 1)):
            if getattr(self, name) != default:
                text += f" {name}={getattr(self, name)}"
        return text


@register("conv2d", Conv2dParams, "y = conv2d(x, w) in NCHW with a square kernel (implicit GEMM)")
def conv2d(p: Conv2dParams) -> Cost:
    # NB: 2 FLOPs per multiply-add: 2 * output elements * (in_channels/groups) * kernel_size^2; a bias
    # adds one FLOP per output element. Multiplies by padded zeros are counted (the kernel does them).
    # NB: compulsory bytes: input, weights (and bias) read once, output written once. Padding is
    # generated on chip (not read); an explicit im2col buffer would add ~kernel_size^2 x the input.
    outputs = p.batch * p.out_channels * p.out_height * p.out_width
    macs_per_output = (p.in_channels // p.groups) * p.kernel_size * p.kernel_size
    flops = 2 * outputs * macs_per_output + (outputs if p.bias else 0)
    x = nbytes(p.batch * p.in_channels * p.height * p.width, p.dtype)
    w = nbytes(p.out_channels * macs_per_output, p.dtype)
    b = nbytes(p.out_channels, p.dtype) if p.bias else 0
    y = nbytes(outputs, p.dtype)
    terms = {"input": x, "weights": w, "output": y}
    if p.bias:
        terms["bias"] = b
    notes = (
        "2 FLOPs per multiply-add over (in_channels/groups) x kernel_size^2 per output element",
        "input and weights read once, output written once; padding generated on chip (implicit GEMM)",
    )
    return Cost(
        kind="conv2d",
        kernels=(Kernel("conv2d", flops, x + w + b + y, p.dtype, "tensor", tf32=p.tf32),),
        notes=notes,
        byte_terms=terms,
    )
