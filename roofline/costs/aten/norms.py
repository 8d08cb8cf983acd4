"""Normalisations and softmax (layer, group, RMS and batch norm, softmax, log-softmax, and their backwards): FLOPs
per element from roofline.costs.norms; x read once, y and the row statistics written once, weights read once."""

from __future__ import annotations

from typing import Any

from roofline.costs.aten.call import Call, OpCost, compute_dtype, io_bytes
from roofline.costs.aten.registry import Example, register
from roofline.costs.norms import FLOPS_PER_ELEMENT as NORMS


def _norm_cost(call: Call, per_element: int, elements: int, note: str) -> OpCost:
    return OpCost(per_element * elements, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: {per_element} FLOPs per element ({note}); x read once, y and row statistics "
                  "written once, weights read once")  # fmt: skip


_LN_WITH, _LN_WITHOUT = NORMS["layernorm"]
_RMS_WITH, _RMS_WITHOUT = NORMS["rmsnorm"]
_SOFTMAX = NORMS["softmax"][0]


@register("norm", "native_layer_norm", "layer_norm", "native_group_norm", "group_norm")
def _layer_norm(call: Call) -> OpCost:
    # NB: roofline.costs.norms 'layernorm': 5 FLOPs per element (mean 1, centre 1, square + sum 2, scale 1),
    # +1 for a weight, +1 for a bias (7 with both). The per-row rsqrt is not counted. Group norm is counted
    # the same way per element.
    x = call.tensor("input")
    weight, bias = call.tensor("weight"), call.tensor("bias")
    per = _LN_WITHOUT + (weight is not None) + (bias is not None)
    assert _LN_WITHOUT + 2 == _LN_WITH
    return _norm_cost(call, per, int(x.numel()), "mean, centre, square+sum, scale, affine per weight vector")


def _ln_backward_per_element(has_weight: bool, mask: list[bool]) -> int:
    # NB: xhat = (x - mean)*rstd 2; grad_input = rstd*(g - mean(g) - xhat*mean(g*xhat)) 7, with g = dy*w 1 more
    # when there is a weight; grad_weight = sum(dy*xhat) 2; grad_bias = sum(dy) 1.
    per = 2
    if mask[0]:
        per += 7 + (1 if has_weight else 0)
    if len(mask) > 1 and mask[1] and has_weight:
        per += 2
    if len(mask) > 2 and mask[2]:
        per += 1
    return per


@register("norm", "native_layer_norm_backward", "native_group_norm_backward")
def _layer_norm_backward(call: Call) -> OpCost:
    x = call.tensor("input")
    mask = list(call.args.get("output_mask") or [True, True, True])
    per = _ln_backward_per_element(call.tensor("weight") is not None, mask)
    return _norm_cost(call, per, int(x.numel()), "xhat 2, grad_input 7 (+1 with a weight), grad_weight 2, grad_bias 1")


@register("norm", "_fused_rms_norm", "rms_norm")
def _rms_norm(call: Call) -> OpCost:
    # NB: roofline.costs.norms 'rmsnorm': 3 FLOPs per element (square 1, sum 1, scale 1), +1 for a weight.
    x = call.tensor("input")
    per = _RMS_WITH if call.tensor("weight") is not None else _RMS_WITHOUT
    return _norm_cost(call, per, int(x.numel()), "square, sum, scale, *weight")


@register("norm", "_fused_rms_norm_backward")
def _rms_norm_backward(call: Call) -> OpCost:
    # NB: xhat = x*rstd 1; grad_input = rstd*(g - xhat*mean(g*xhat)) 5, with g = dy*w 1 more when there is a
    # weight; grad_weight = sum(dy*xhat) 2.
    x = call.tensor("input")
    has_weight = call.tensor("weight") is not None
    mask = list(call.args.get("output_mask") or [True, True])
    per = 1 + ((5 + has_weight) if mask[0] else 0) + (2 if len(mask) > 1 and mask[1] and has_weight else 0)
    return _norm_cost(call, per, int(x.numel()), "xhat 1, grad_input 5 (+1 with a weight), grad_weight 2")


def _bn_training(call: Call) -> bool:
    if call.base in ("_batch_norm_with_update", "_native_batch_norm_legit_functional"):
        return True
    if call.base in ("_batch_norm_no_update", "_native_batch_norm_legit_no_training"):
        return False
    return bool(call.args.get("training", call.args.get("train", True)))


@register("norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
          "_native_batch_norm_legit_functional", "_batch_norm_with_update", "_batch_norm_no_update",
          "cudnn_batch_norm", "miopen_batch_norm", "batch_norm")  # fmt: skip
def _batch_norm(call: Call) -> OpCost:
    # NB: training: the batch statistics are computed as in layer norm (5 per element, +1 per weight vector);
    # the running-stat update is per channel (not counted). Eval: y = x*scale + shift with the per-channel
    # scale and shift folded from weight, bias and the running stats: 2 per element.
    x = call.tensor("input")
    if _bn_training(call):
        per = _LN_WITHOUT + (call.tensor("weight") is not None) + (call.tensor("bias") is not None)
        note = "training: mean, centre, square+sum, scale, affine"
    else:
        per = 2
        note = "eval: x*scale + shift with per-channel constants folded"
    return _norm_cost(call, per, int(x.numel()), note)


@register("norm", "native_batch_norm_backward", "batch_norm_backward", "cudnn_batch_norm_backward",
          "miopen_batch_norm_backward")  # fmt: skip
def _batch_norm_backward(call: Call) -> OpCost:
    # NB: training: as layer norm's backward; eval (train=False): grad_input = dy*scale 1, grad_weight =
    # sum(dy*xhat) 2 + xhat 2, grad_bias 1.
    x = call.tensor("input")
    mask = list(call.args.get("output_mask") or [True, True, True])
    has_weight = call.tensor("weight") is not None
    train = bool(call.args.get("train", call.args.get("update", True)))
    if train:
        per = _ln_backward_per_element(has_weight, mask)
    else:
        per = (1 if mask[0] else 0) + (4 if len(mask) > 1 and mask[1] else 0) + (1 if len(mask) > 2 and mask[2] else 0)
    return _norm_cost(call, per, int(x.numel()), "training as layer norm's backward" if train else "eval")


@register("norm", "_softmax", "softmax", "_safe_softmax", "_log_softmax", "log_softmax")
def _softmax(call: Call) -> OpCost:
    # NB: roofline.costs.norms 'softmax': max 1, subtract 1, exp 1, sum 1, divide 1 = 5 per element. Log-softmax:
    # max, subtract, exp, sum, subtract the log-sum = 5 (the log is per row).
    x = call.tensor("self", "input")
    return _norm_cost(call, _SOFTMAX, int(x.numel()), "max, subtract, exp, sum, divide")


@register("norm", "_softmax_backward_data", "_log_softmax_backward_data")
def _softmax_backward(call: Call) -> OpCost:
    # NB: softmax: dx = y*(dy - sum(dy*y)): mul 1, sum 1, sub 1, mul 1 = 4. Log-softmax: dx = dy - exp(y)*sum(dy):
    # sum 1, exp 1, mul 1, sub 1 = 4.
    grad = call.tensor("grad_output")
    return _norm_cost(call, 4, int(grad.numel()), "4 per element")


# ------------------------------------------------------------------------------ examples (the formula test)


def _nchw(t: Any) -> Any:
    """A (2, 4, 3, 3) activation: 4 channels."""
    return t.randn(2, 4, 3, 3)


def _channel(t: Any, n: int = 1) -> list[Any]:
    return [t.ones(4) for _ in range(n)]


def _rows_stats(t: Any) -> list[Any]:
    """mean and rstd of a layer norm over the last dim of a (2, 4, 3, 3) input."""
    return [t.zeros(2, 4, 3, 1), t.ones(2, 4, 3, 1)]


#: Representative calls for tests/test_formula_examples.py (registry.Example): the ops it cannot build from the schema.
EXAMPLES: dict[str, Example] = {
    "native_group_norm": lambda t: ((_nchw(t), *_channel(t, 2), 2, 4, 9, 2, 1e-5), {}),
    "native_group_norm_backward": lambda t: (
        (_nchw(t), _nchw(t), t.zeros(2, 2), t.ones(2, 2), *_channel(t), 2, 4, 9, 2, [True, True, True]),
        {},
    ),
    "native_layer_norm_backward": lambda t: (
        (_nchw(t), _nchw(t), [3], *_rows_stats(t), t.ones(3), t.ones(3), [True, True, True]),
        {},
    ),
    "_fused_rms_norm_backward": lambda t: (
        (_nchw(t), _nchw(t), [3], t.ones(2, 4, 3, 1), t.ones(3), [True, True]),
        {},
        (_nchw(t), t.ones(3)),
    ),
    "_batch_norm_with_update": lambda t: ((_nchw(t), *_channel(t, 4), 0.1, 1e-5), {}),
    "batch_norm": lambda t: ((_nchw(t), *_channel(t, 4), False, 0.1, 1e-5, False), {}),
    "native_batch_norm_backward": lambda t: ((_nchw(t), _nchw(t), *_channel(t, 5), True, 1e-5, [True, True, True]), {}),
    "batch_norm_backward": lambda t: (
        (_nchw(t), _nchw(t), *_channel(t, 5), True, 1e-5, [True, True, True], t.empty(0)),
        {},
    ),
}
