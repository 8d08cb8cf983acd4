"""Losses that reach the dispatch mode as one op (smooth L1, Huber, binary cross-entropy, soft margin, the margin
losses, xlogy, CTC) and their backwards. The others decompose before a dispatch mode sees them (l1_loss,
kl_div, cross_entropy, nll_loss, margin_ranking_loss, hinge_embedding_loss, triplet_margin_loss,
cosine_embedding_loss, poisson_nll_loss, ...: CompositeImplicitAutograd) and are counted op by op; mse_loss and
nll_loss_forward have their formulas in the element-wise and gather families.

Element-wise losses: FLOPs per input element (the table below), +1 per element for the reduction's add when
reduction is 'mean' or 'sum' (the mean's divide is per output, not counted); a backward of a 'mean' loss scales
by 1/n (+1 per element). Inputs read once, the output (a scalar, or per element with reduction 'none') written
once."""

from __future__ import annotations

from typing import Any

from roofline.costs.aten.call import Call, OpCost, compute_dtype, io_bytes, is_tensor
from roofline.costs.aten.registry import Example, Formula, register

#: torch's reduction enum (the ``reduction`` argument).
NONE, MEAN, SUM = 0, 1, 2

_LOG_SIGMOID = 4  # NB: -softplus(-x): neg, exp, +1, log (elementwise.py's log_sigmoid_forward)

#: op -> (FLOPs per element before the reduction, the assumption). NB: each stated in its note.
POINTWISE: dict[str, tuple[int, str]] = {
    # d = x - y, |d|, compare with beta, 0.5*d*d/beta (3), |d| - 0.5*beta (1), select
    "smooth_l1_loss": (8, "sub, abs, compare, 0.5*d^2/beta 3, |d| - beta/2 1, select"),
    # d = x - y, |d|, compare with delta, 0.5*d*d (2), delta*(|d| - delta/2) (2), select
    "huber_loss": (8, "sub, abs, compare, 0.5*d^2 2, delta*(|d| - delta/2) 2, select"),
    # x - y, compare, d/beta, sign(d), select, *grad
    "smooth_l1_loss_backward": (6, "sub, compare, d/beta, sign, select, *grad"),
    # x - y, compare, sign, *delta, select, *grad
    "huber_loss_backward": (6, "sub, compare, sign, *delta, select, *grad"),
    # -(y*max(log x, -100) + (1-y)*max(log(1-x), -100)): log, clamp, 1-x, log, clamp, *y, 1-y, *, +, neg
    "binary_cross_entropy": (10, "log x, clamp, 1-x, log, clamp, y*, 1-y, *, add, neg"),
    # grad*(x - y)/max((1 - x)*x, eps): sub, 1-x, *x, max, div, *grad
    "binary_cross_entropy_backward": (6, "x-y, 1-x, *x, max with eps, div, *grad"),
    # (1 - y)*x - log_sigmoid(x): 1-y, *x, log_sigmoid 4, sub
    "binary_cross_entropy_with_logits": (2 + _LOG_SIGMOID + 1, "1-y, *x, log_sigmoid 4, sub"),
    # log(1 + exp(-y*x)): mul, neg, exp, +1, log
    "soft_margin_loss": (5, "y*x, neg, exp, +1, log"),
    # -y*exp(-y*x)/(1 + exp(-y*x))*grad: y*x, neg, exp, +1, div, *-y, *grad
    "soft_margin_loss_backward": (7, "y*x, neg, exp, +1, div, *-y, *grad"),
    # x == 0 ? 0 : x*log(y): log, mul, compare, select
    "xlogy": (4, "log y, x*, compare x == 0, select (0 where x == 0)"),
}

_BACKWARDS = frozenset({"smooth_l1_loss_backward", "huber_loss_backward", "binary_cross_entropy_backward",
                        "soft_margin_loss_backward"})  # fmt: skip


def _reduction(call: Call) -> int:
    value = call.args.get("reduction")
    return MEAN if value is None else int(value)


def _numel(call: Call) -> int:
    x = call.tensor("self", "other")
    return int(x.numel()) if x is not None else 0


def _loss_cost(call: Call, per_element: int, elements: int, note: str) -> OpCost:
    note = f"{call.base}: {per_element} FLOP(s) per element ({note}); inputs read once, output written once"
    return OpCost(per_element * elements, io_bytes(call), compute_dtype(call), "vector", note)


def _pointwise_formula(name: str) -> Formula:
    base, note = POINTWISE[name]

    def formula(call: Call) -> OpCost:
        per = base
        extra: list[str] = []
        if call.base.startswith("binary_cross_entropy"):
            if call.tensor("weight") is not None:
                per += 1
                extra.append("*weight 1")
            if call.tensor("pos_weight") is not None:
                per += 3  # NB: (pos_weight - 1)*y + 1 2, * the log-sigmoid term 1
                extra.append("pos_weight 3")
        if name in _BACKWARDS:
            if _reduction(call) == MEAN:
                per += 1
                extra.append("1/n 1")
        elif name != "xlogy" and _reduction(call) != NONE:
            per += 1
            extra.append("reduction add 1")
        return _loss_cost(call, per, _numel(call), ", ".join([note, *extra]))

    return formula


for _name in POINTWISE:
    register("loss", _name)(_pointwise_formula(_name))
register("loss", "xlogy_")(_pointwise_formula("xlogy"))


# ------------------------------------------------------------------------------------------ margin losses


@register("loss", "multi_margin_loss", "multi_margin_loss_backward")
def _multi_margin(call: Call) -> OpCost:
    # NB: per (sample, class) element: z = margin - x[y] + x[i] 2, max(0, z) 1, the sum 1 (4), +1 with p=2 (the
    # square), +1 with a class weight; the per-sample /C is not counted. Backward: z 2, compare 1, accumulate
    # into x[y] 1, *grad 1 (5), +1 with p=2, +1 with a weight.
    x = call.tensor("self")
    per = 4 if call.base == "multi_margin_loss" else 5
    per += int(call.args.get("p", 1) == 2) + int(call.tensor("weight") is not None)
    return _loss_cost(call, per, int(x.numel()), "hinge per (sample, class)")


def _target_pairs(call: Call) -> tuple[int, str]:
    """(target, class) pairs a multilabel margin loss visits: targets x C per sample. The number of targets is in
    the values (each row's targets end at the first -1): counted from the is_target mask when it has values,
    else at the bound of C targets per sample (meta tensors: a rebuilt trace)."""
    x = call.tensor("self")
    classes = int(x.shape[-1]) if x.dim() else 1
    is_target = call.tensor("is_target")
    if is_target is None and len(call.outputs) > 1:
        is_target = call.outputs[1]  # the forward's second output
    if is_target is not None and is_target.device.type != "meta":
        return int(is_target.count_nonzero()) * classes, "targets counted from is_target"
    return int(x.numel()) * classes, "bound: C targets per sample"


@register("loss", "multilabel_margin_loss_forward")
def _multilabel_margin(call: Call) -> OpCost:
    # NB: for each target j and class i: z = 1 - (x[y_j] - x[i]) 2, max(0, z) 1, the sum 1: 4 per (target, class)
    # pair; the per-sample /C not counted. Also writes the is_target mask.
    pairs, how = _target_pairs(call)
    return OpCost(4 * pairs, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: 4 FLOPs per (target, class) pair, {pairs} pairs ({how})")  # fmt: skip


@register("loss", "multilabel_margin_loss_backward")
def _multilabel_margin_backward(call: Call) -> OpCost:
    # NB: per (target, class) pair: z > 0 1 and the two gradient updates 2 (3), and the 1/C*grad scale per
    # element of self (1).
    pairs, how = _target_pairs(call)
    elements = int(call.tensor("self").numel())
    return OpCost(3 * pairs + elements, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: 3 FLOPs per (target, class) pair, {pairs} pairs ({how}), +1 per element")  # fmt: skip


# ---------------------------------------------------------------------------------------------------- CTC

#: FLOPs per lattice cell of the CTC forward (alpha) or backward (beta) recursion. NB: a log-sum-exp of up to 3
#: predecessors counted at 3 everywhere: max 2, subtract 3, exp 3, add 2, log 1, + the max 1, + log_prob 1 = 13.
CTC_CELL_FLOPS = 13
#: FLOPs per lattice cell to combine alpha and beta into the per-character log-gradient. NB: alpha + beta 1 and a
#: log-sum-exp accumulate (max, subtract, exp, add, log) 5 = 6.
CTC_COMBINE_FLOPS = 6
#: FLOPs per (time, batch, class) element of the gradient. NB: exp(lp) - exp(lcab + nll - lp)*grad: exp, add 2,
#: exp, sub, mul = 6.
CTC_GRAD_FLOPS = 6


def _ctc_cells(call: Call) -> tuple[int, str]:
    """Lattice cells: sum over the batch of input_length x (2 x target_length + 1); with lengths given as meta
    tensors (no values), T x (2 x the longest target + 1) per batch entry."""
    lengths_in, lengths_target = call.args.get("input_lengths"), call.args.get("target_lengths")
    if is_tensor(lengths_in) or is_tensor(lengths_target):
        if any(is_tensor(t) and t.device.type == "meta" for t in (lengths_in, lengths_target)):
            log_alpha = call.tensor("log_alpha") if "log_alpha" in call.args else None
            if log_alpha is None and len(call.outputs) > 1:
                log_alpha = call.outputs[1]
            batch, steps, states = (int(d) for d in log_alpha.shape)
            return batch * steps * states, "bound: every sequence at T and the longest target"
        lengths_in = _as_list(lengths_in)
        lengths_target = _as_list(lengths_target)
    cells = sum(int(t) * (2 * int(n) + 1) for t, n in zip(lengths_in, lengths_target, strict=False))
    return cells, "sum of input_length x (2 x target_length + 1)"


def _as_list(value: Any) -> list[int]:
    return [int(v) for v in value.tolist()] if is_tensor(value) else [int(v) for v in value]


@register("loss", "_ctc_loss")
def _ctc_loss(call: Call) -> OpCost:
    # NB: the alpha recursion over the T x (2L+1) lattice of each sequence, CTC_CELL_FLOPS a cell; log_probs read
    # once (in full, not just the touched classes), the losses and log_alpha written once.
    cells, how = _ctc_cells(call)
    return OpCost(CTC_CELL_FLOPS * cells, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: {CTC_CELL_FLOPS} FLOPs per lattice cell, {cells} cells ({how})")  # fmt: skip


@register("loss", "_ctc_loss_backward")
def _ctc_loss_backward(call: Call) -> OpCost:
    # NB: the beta recursion (CTC_CELL_FLOPS a cell) + alpha-beta combination (CTC_COMBINE_FLOPS a cell) + the
    # gradient per (time, batch, class) element (CTC_GRAD_FLOPS); the gradient written in full.
    cells, how = _ctc_cells(call)
    elements = int(call.tensor("log_probs").numel())
    flops = (CTC_CELL_FLOPS + CTC_COMBINE_FLOPS) * cells + CTC_GRAD_FLOPS * elements
    return OpCost(flops, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: beta + combine {CTC_CELL_FLOPS + CTC_COMBINE_FLOPS} per cell ({cells}, {how}), "
                  f"{CTC_GRAD_FLOPS} per gradient element")  # fmt: skip


@register("loss", "_cudnn_ctc_loss")
def _cudnn_ctc_loss(call: Call) -> OpCost:
    # NB: cuDNN computes the loss and its gradient in one call: alpha and beta recursions, the combination and
    # the gradient (as _ctc_loss + _ctc_loss_backward); the losses and the gradient written once.
    lengths_in, lengths_target = _as_list(call.args["input_lengths"]), _as_list(call.args["target_lengths"])
    cells = sum(t * (2 * n + 1) for t, n in zip(lengths_in, lengths_target, strict=False))
    elements = int(call.tensor("log_probs").numel())
    flops = (2 * CTC_CELL_FLOPS + CTC_COMBINE_FLOPS) * cells + CTC_GRAD_FLOPS * elements
    return OpCost(flops, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: loss and gradient in one call, {cells} lattice cells")  # fmt: skip


@register("loss", "_use_cudnn_ctc_loss")
def _ctc_query(call: Call) -> OpCost:
    # NB: a host-side check of the arguments (returns a bool): no kernel, no bytes.
    return OpCost(0, 0, "", "none", "query: no data moved")


# ------------------------------------------------------------------------------- formula-test examples


def _ctc_inputs(t: Any) -> tuple[Any, Any, list[int], list[int]]:
    """CTC inputs: T 6, batch 2, 5 classes (blank 0), padded (batch, S 3) targets of lengths 3 and 2."""
    log_probs = t.randn(6, 2, 5).log_softmax(2)
    return log_probs, t.tensor([[1, 2, 3], [2, 4, 0]]), [6, 5], [3, 2]


def _ctc_backward(t: Any) -> tuple[Any, ...]:
    log_probs, targets, lengths_in, lengths_target = _ctc_inputs(t)
    nll, log_alpha = t.ops.aten._ctc_loss(log_probs, targets, lengths_in, lengths_target)  # the forward
    return (t.ones(2), log_probs, targets, lengths_in, lengths_target, nll, log_alpha, 0), {}


def _cudnn_ctc(t: Any, query: bool) -> tuple[Any, ...]:
    """cuDNN's CTC (CUDA only: no CPU kernel, so the outputs are given): int32 targets concatenated in one 1-D
    tensor, every input length T, blank 0 (the conditions _use_cudnn_ctc_loss checks)."""
    log_probs = t.randn(6, 2, 5).log_softmax(2)
    targets = t.tensor([1, 2, 3, 2, 4], dtype=t.int32)
    if query:  # NB: a host-side bool query: cuDNN can take this call
        return (log_probs, targets, [6, 6], [3, 2], 0), {}, True
    # NB: outputs (losses (batch,), the gradient with log_probs' shape)
    return (log_probs, targets, [6, 6], [3, 2], 0, True, False), {}, (t.empty(2), t.empty(6, 2, 5))


def _multilabel_backward(t: Any) -> tuple[Any, ...]:
    x = t.randn(3, 5)
    target = t.tensor([[3, 0, -1, 1, 1], [1, -1, 0, 0, 0], [0, 1, 2, 3, 4]])  # each row's targets end at -1
    _, is_target = t.ops.aten.multilabel_margin_loss_forward(x, target, MEAN)  # the forward
    return (t.tensor(1.0), x, target, MEAN, is_target), {}


#: Representative calls for tests/test_formula_examples.py (registry.Example): the ops it cannot build from the schema.
EXAMPLES: dict[str, Example] = {
    "_ctc_loss": lambda t: (_ctc_inputs(t), {}),
    "_ctc_loss_backward": _ctc_backward,
    "_cudnn_ctc_loss": lambda t: _cudnn_ctc(t, query=False),
    "_use_cudnn_ctc_loss": lambda t: _cudnn_ctc(t, query=True),
    "binary_cross_entropy_with_logits": lambda t: ((t.randn(4, 4), t.rand(4, 4)), {"pos_weight": t.rand(4)}),
    "multi_margin_loss": lambda t: ((t.randn(3, 5), t.tensor([0, 4, 2])), {"p": 2, "weight": t.rand(5)}),
    "multi_margin_loss_backward": lambda t: ((t.tensor(1.0), t.randn(3, 5), t.tensor([0, 4, 2]), 1, 1.0), {}),
    "multilabel_margin_loss_backward": _multilabel_backward,
}
