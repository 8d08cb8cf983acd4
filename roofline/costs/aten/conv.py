"""Convolutions (forward and backward) as implicit GEMMs on the tensor units: FLOPs by torch.utils.flop_counter's
formulas, computed here from the shapes; the roof's dtype as for matmuls (cuDNN's TF32 setting)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from roofline.costs.aten.call import Call, OpCost
from roofline.costs.aten.matmul import matmul_cost
from roofline.costs.aten.registry import Example, register


@register("conv", "convolution", "_convolution", "cudnn_convolution", "convolution_overrideable",
          "convolution_backward")  # fmt: skip
def _torch_conv(call: Call) -> OpCost:
    # NB: torch.utils.flop_counter's formulas: 2 * output elements * Cin/groups * prod(kernel) (transposed: per
    # input element); the bias is not counted. Backward: grad_input as a transposed conv and grad_weight as a
    # conv, each where output_mask asks for it. Computed here from the shapes (conv_flops, conv_backward_flops).
    flops = conv_backward_flops(call) if call.base == "convolution_backward" else conv_flops(call)
    return matmul_cost(call, flops, "2 per multiply-add over the implicit GEMM "
                        "(torch.utils.flop_counter's formula); bias not counted", kind="conv")  # fmt: skip


def _count(x: Sequence[int], w: Sequence[int], out: Sequence[int], transposed: bool) -> int:
    """One convolution's FLOPs: 2 x batch x the spatial positions (the output's; a transposed conv's: the input's)
    x the weight's elements (its two channel dims and its kernel)."""
    spatial = (x if transposed else out)[2:]
    return 2 * int(x[0]) * math.prod(int(size) for size in (*spatial, *w))


def _swap(shape: Sequence[int]) -> list[int]:
    """The shape with its first two dims swapped (batch <-> channels)."""
    return [int(shape[1]), int(shape[0]), *(int(size) for size in shape[2:])]


def conv_flops(call: Call) -> int:
    """A forward convolution's FLOPs (convolution, _convolution, cudnn_convolution, convolution_overrideable),
    torch.utils.flop_counter's formula from the shapes. NB: computed here, not imported: importing
    torch.utils.flop_counter took 0.43 s of the counting pass on an H100 (torch 2.11). NB: cudnn_convolution has
    no 'transposed' argument and is never transposed; torch's formula reads its 'benchmark' flag in that place."""
    x, weight = call.tensor("input", "self"), call.tensor("weight")
    return _count(x.shape, weight.shape, call.out0.shape, bool(call.args.get("transposed")))


def conv_backward_flops(call: Call) -> int:
    """aten::convolution_backward's FLOPs, torch.utils.flop_counter's formula from the shapes: grad_input as the
    transposed conv of grad_output by the weight (output_mask[0]), grad_weight as the conv of the input by
    grad_output, batch and channels swapped (output_mask[1]). NB: grad_input has the input's shape and grad_weight
    the weight's (torch reads them off the outputs); as torch, grad_weight counts the input's channels whole
    (groups not divided out)."""
    grad, x, w = (call.tensor(name).shape for name in ("grad_output", "input", "weight"))
    transposed = bool(call.args.get("transposed"))
    mask = call.args.get("output_mask") or (True, True, True)
    flops = _count(grad, w, x, not transposed) if mask[0] else 0
    if mask[1]:
        flops += (
            _count(_swap(grad), _swap(x), _swap(w), False)
            if transposed
            else _count(_swap(x), _swap(grad), _swap(w), False)
        )
    return flops


@register("conv", "_slow_conv2d_forward")
def _slow_conv2d(call: Call) -> OpCost:
    # NB: torch.utils.flop_counter's formula for this op does not run (it needs a 'transposed' argument the op
    # does not have): ours, 2 * output elements * Cin * kh * kw (the weight's elements per output channel).
    weight, out = call.tensor("weight"), call.out0
    per_output = int(weight.numel()) // int(weight.shape[0])
    return matmul_cost(call, 2 * int(out.numel()) * per_output, "2 * output elements * Cin * kh * kw", kind="conv")


def _conv_args(t: object) -> tuple[object, ...]:
    """A 3x3 conv of a (2, 3, 6, 6) input to 4 channels, padding 1 (fp32)."""
    return (t.randn(2, 3, 6, 6), t.randn(4, 3, 3, 3))  # type: ignore[attr-defined]


#: Representative calls for tests/test_formula_examples.py (registry.Example): the ops it cannot build from the schema.
EXAMPLES: dict[str, Example] = {
    "cudnn_convolution": lambda t: (
        (*_conv_args(t), [1, 1], [1, 1], [1, 1], 1, False, False, False),
        {},
        t.zeros(2, 4, 6, 6),
    ),
    "_slow_conv2d_forward": lambda t: ((*_conv_args(t), [3, 3], None, [1, 1], [1, 1]), {}),
    "convolution_overrideable": lambda t: (
        (*_conv_args(t), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
        {},
        t.zeros(2, 4, 6, 6),
    ),
    "convolution_backward": lambda t: (
        (t.randn(2, 4, 6, 6), *_conv_args(t), [4], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, True]),
        {},
    ),
}
