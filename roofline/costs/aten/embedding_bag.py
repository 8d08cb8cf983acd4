"""embedding_bag (forward, its inference-only twin, backward): the rows the bags gather, reduced per bag."""

from __future__ import annotations

from typing import Any

from roofline.costs.aten.call import Call, OpCost, compute_dtype, io_bytes, read_bytes, tensor_bytes, write_bytes
from roofline.costs.aten.registry import Example, register

#: embedding_bag's mode argument.
BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


def _mode(call: Call) -> str:
    return BAG_MODES.get(int(call.get("mode", 0)), "sum")


@register("embedding bag", "_embedding_bag", "_embedding_bag_forward_only")
def _embedding_bag(call: Call) -> OpCost:
    # NB: a gather + per-bag reduction. Gathered elements g = indices x row size (rows touched, repeats counted;
    # padding_idx rows are counted too: which indices hit it is data, not shape). FLOPs: sum 1 add per gathered
    # element (+1 multiply with per_sample_weights), mean 1 add per gathered element + 1 divide per output
    # element, max 1 compare per gathered element. Bytes: the touched rows (g x the table's element size), the
    # indices, offsets and per_sample_weights read once; the output and the bookkeeping outputs (offset2bag,
    # bag_size, max_indices, as torch returns them) written once.
    weight = call.tensor("weight")
    indices = call.tensor("indices")
    row = int(weight.numel()) // max(1, int(weight.shape[0]))
    gathered = int(indices.numel()) * row
    mode = _mode(call)
    flops = gathered
    if mode == "sum" and call.tensor("per_sample_weights") is not None:
        flops += gathered
    if mode == "mean":
        flops += int(call.out0.numel())
    total = gathered * weight.element_size() + read_bytes(call, skip=("weight",)) + write_bytes(call)
    return OpCost(flops, total, compute_dtype(call), "vector",
                  f"{call.base} ({mode}): {gathered} gathered elements; rows touched, not the table")  # fmt: skip


@register("embedding bag", "_embedding_bag_backward", "_embedding_bag_dense_backward",
          "_embedding_bag_sparse_backward")  # fmt: skip
def _embedding_bag_backward(call: Call) -> OpCost:
    # NB: each gathered element (indices x row size) receives its bag's gradient: sum 1 add (+1 multiply with
    # per_sample_weights), mean 2 (divide by the bag size, add), max 1 add per grad element (only the maximum
    # gets it). Bytes: every input read once (grad, indices, offsets, offset2bag, bag_size, max indices,
    # per_sample_weights); dense: the gradient table written in full (zero-fill + accumulate, one pass); sparse:
    # its values (one row per index) and int64 indices written once.
    grad = call.tensor("grad")
    indices = call.tensor("indices")
    row = int(grad.shape[-1]) if grad.dim() else 1
    gathered = int(indices.numel()) * row
    mode = _mode(call)
    if mode == "max":
        flops = int(grad.numel())
    elif mode == "mean":
        flops = 2 * gathered
    else:
        flops = gathered * (2 if call.tensor("per_sample_weights") is not None else 1)
    out = call.out0
    if out is not None and out.layout != grad.layout:  # sparse: values and indices, not the dense numel
        written = tensor_bytes(out._values()) + tensor_bytes(out._indices())
        total = read_bytes(call) + written
        note = "sparse gradient: one row per index written"
    else:
        total = io_bytes(call)
        note = "dense gradient table written once"
    return OpCost(flops, total, compute_dtype(call), "vector", f"{call.base} ({mode}): {note}")


@register("embedding bag", "_embedding_bag_per_sample_weights_backward")
def _embedding_bag_per_sample_weights_backward(call: Call) -> OpCost:
    # NB: one dot product per index: its bag's gradient row . its weight row, 2 FLOPs per element (row size);
    # bytes: the touched weight rows (indices x row), grad, indices, offsets and offset2bag read once, the
    # per-index output written once.
    weight = call.tensor("weight")
    indices = call.tensor("indices")
    row = int(weight.shape[-1]) if weight.dim() else 1
    gathered = int(indices.numel()) * row
    total = gathered * weight.element_size() + read_bytes(call, skip=("weight",)) + write_bytes(call)
    return OpCost(2 * gathered, total, compute_dtype(call), "vector",
                  f"{call.base}: a dot product of row size per index; weight rows touched, not the table")  # fmt: skip


# ------------------------------------------------------------------------ examples for the formula test


def _bags(t: Any) -> tuple[Any, Any, Any, Any, Any]:
    """(weight 10 x 3, indices 8, offsets of 2 bags of 4, offset2bag, bag_size), the last two from a mean-mode
    _embedding_bag (the sum fast path leaves offset2bag empty)."""
    weight, indices, offsets = t.randn(10, 3), t.tensor([0, 2, 4, 5, 4, 3, 2, 9]), t.tensor([0, 4])
    _, offset2bag, bag_size, _ = t.ops.aten._embedding_bag(weight, indices, offsets, False, 1)
    return weight, indices, offsets, offset2bag, bag_size


def _per_sample_weights_backward_example(t: Any) -> tuple[Any, ...]:
    """_embedding_bag_per_sample_weights_backward: sum mode (the only one with per-sample weights)."""
    weight, indices, offsets, offset2bag, _ = _bags(t)
    return (t.randn(2, 3), weight, indices, offsets, offset2bag, 0), {}


def _sparse_backward_example(t: Any) -> tuple[Any, ...]:
    """_embedding_bag_sparse_backward: mean mode, 10 rows, no per-sample weights."""
    _, indices, offsets, offset2bag, bag_size = _bags(t)
    return (t.randn(2, 3), indices, offsets, offset2bag, bag_size, 10, False, 1, None), {}


#: NB: the calls generated from these ops' schemas abort the process in torch's kernels: they need examples.
EXAMPLES: dict[str, Example] = {
    "_embedding_bag_forward_only": lambda t: (
        (t.randn(10, 3), t.tensor([0, 2, 4, 5, 4, 3, 2, 9]), t.tensor([0, 4])),
        {},
    ),
    "_embedding_bag_per_sample_weights_backward": _per_sample_weights_backward_example,
    "_embedding_bag_sparse_backward": _sparse_backward_example,
}
