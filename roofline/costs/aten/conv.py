"""Convolutions (forward and backward) as implicit GEMMs on the tensor units: FLOPs from torch.utils.flop_counter,
the roof's dtype as for matmuls (cuDNN's TF32 setting)."""

from __future__ import annotations

import math

from roofline.costs.aten.call import Call, OpCost
from roofline.costs.aten.matmul import matmul_cost, torch_flops
from roofline.costs.aten.registry import Example, register


@register("conv", "convolution", "_convolution", "cudnn_convolution", "convolution_overrideable",
          "convolution_backward")  # fmt: skip
def _torch_conv(call: Call) -> OpCost:
    # NB: torch.utils.flop_counter: 2 * output elements * Cin/groups * prod(kernel) (transposed: per input
    # element); the bias is not counted. Backward: grad_input as a transposed conv and grad_weight as a conv,
    # each where output_mask asks for it. The forward ``convolution`` computed here (conv_flops), the others read
    # from torch's registry.
    flops = conv_flops(call) if call.base == "convolution" else torch_flops(call)
    return matmul_cost(call, flops, "2 per multiply-add over the implicit GEMM "
                        "(torch.utils.flop_counter's formula); bias not counted", kind="conv")  # fmt: skip


def conv_flops(call: Call) -> int:
    """aten::convolution's FLOPs, torch.utils.flop_counter's formula from the shapes: 2 x batch x the spatial
    positions (the output's; a transposed conv's: the input's) x the weight's two channel dims x its kernel
    elements. NB: computed here, not imported: importing torch.utils.flop_counter took 0.43 s of the counting
    pass on an H100 (torch 2.11)."""
    x, weight = call.tensor("input"), call.tensor("weight")
    transposed = bool(call.args.get("transposed"))
    spatial = (x.shape if transposed else call.out0.shape)[2:]
    return 2 * int(x.shape[0]) * math.prod(int(size) for size in (*spatial, *weight.shape))


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
