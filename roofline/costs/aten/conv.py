"""Convolutions (forward and backward) as implicit GEMMs on the tensor units: FLOPs from torch.utils.flop_counter,
the roof's dtype as for matmuls (cuDNN's TF32 setting)."""

from __future__ import annotations

from roofline.costs.aten.call import Call, OpCost
from roofline.costs.aten.matmul import matmul_cost, torch_flops
from roofline.costs.aten.registry import register


@register("conv", "convolution", "_convolution", "cudnn_convolution", "_slow_conv2d_forward",
          "convolution_overrideable", "convolution_backward")  # fmt: skip
def _torch_conv(call: Call) -> OpCost:
    # NB: torch.utils.flop_counter: 2 * output elements * Cin/groups * prod(kernel) (transposed: per input
    # element); the bias is not counted. Backward: grad_input as a transposed conv and grad_weight as a conv,
    # each where output_mask asks for it.
    return matmul_cost(call, torch_flops(call), "2 per multiply-add over the implicit GEMM "
                        "(torch.utils.flop_counter); bias not counted", kind="conv")  # fmt: skip
