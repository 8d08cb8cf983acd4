"""Gathers and scatters (embedding, index_select, gather, advanced indexing, index_put, scatter, nll_loss): the
rows an op touches, not the whole table."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from roofline.costs.aten.call import (
    Call,
    OpCost,
    compute_dtype,
    flat_tensors,
    io_bytes,
    is_tensor,
    prod,
    read_bytes,
    storage_key,
    tensor_bytes,
    write_bytes,
)
from roofline.costs.aten.registry import Example, Formula, register


def _index_bytes(call: Call, names: Iterable[str]) -> int:
    total = 0
    seen: set[tuple[Any, ...]] = set()
    for name in names:
        for t in flat_tensors(call.args.get(name)):
            key = storage_key(t)
            if key not in seen:
                seen.add(key)
                total += tensor_bytes(t)
    return total


GATHERS: dict[str, tuple[str, tuple[str, ...]]] = {
    # op: (the table argument, the index arguments)
    "embedding": ("weight", ("indices",)),
    "index_select": ("self", ("index",)),
    "gather": ("self", ("index",)),
    "index": ("self", ("indices",)),
    "_unsafe_index": ("self", ("indices",)),
    "take": ("self", ("index",)),
    "take_along_dim": ("self", ("indices",)),
}


def _gather_formula(table: str, indices: tuple[str, ...]) -> Formula:
    def formula(call: Call) -> OpCost:
        # NB: rows touched, not the table: the output has one element per (index, row element), so the table
        # bytes read are the output's numel at the table's element size (a repeated index counts again). The
        # indices are read once and the output written once. 0 FLOPs.
        src = call.tensor(table)
        out = call.out0
        touched = int(out.numel()) * src.element_size()
        total = touched + _index_bytes(call, indices) + write_bytes(call)
        return OpCost(0, total, compute_dtype(call), "vector",
                      f"{call.base}: rows touched ({out.numel()} elements of {src.dtype}), not the whole table; "
                      "indices read once, output written once")  # fmt: skip

    return formula


for _name, (_table, _indices) in GATHERS.items():
    register("gather", _name)(_gather_formula(_table, _indices))


def _indexed_numel(src: Any, indices: list[Any]) -> int:
    """Elements of ``src[indices]`` (advanced indexing) without building it."""
    import torch

    dims = list(src.shape)
    consumed = 0
    kept = 1
    int_shapes: list[tuple[int, ...]] = []
    count = 1
    for idx in indices:
        if idx is None:
            kept *= dims[consumed]
            consumed += 1
        elif idx.dtype in (torch.bool, torch.uint8):
            count *= int(idx.count_nonzero())  # NB: a mask touches its True elements (a device sync)
            consumed += idx.dim()
        else:
            int_shapes.append(tuple(idx.shape))
            consumed += 1
    if int_shapes:
        count *= prod(torch.broadcast_shapes(*int_shapes))
    return count * kept * prod(dims[consumed:])


@register("scatter", "index_put_", "_index_put_impl_", "index_put")
def _index_put(call: Call) -> OpCost:
    # NB: in place: the touched elements are written (read too when accumulating), values and indices read once.
    # Out of place: self is read and the output written in full, plus values and indices. accumulate: 1 add per
    # touched element.
    src = call.tensor("self")
    indices = [t if is_tensor(t) else None for t in call.args.get("indices") or []]
    touched = _indexed_numel(src, indices)
    accumulate = bool(call.args.get("accumulate"))
    flops = touched if accumulate else 0
    values = call.tensor("values")
    values_bytes = tensor_bytes(values) if values is not None else 0
    idx_bytes = _index_bytes(call, ("indices",))
    if call.base.endswith("_"):
        total = values_bytes + idx_bytes + (2 if accumulate else 1) * touched * src.element_size()
        note = f"{call.base}: {touched} touched elements written{' and read (accumulate)' if accumulate else ''}"
    else:
        total = io_bytes(call)
        note = f"{call.base}: self copied, {touched} elements replaced"
    return OpCost(flops, total, compute_dtype(call), "vector", note)


@register("scatter", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_",
          "index_add", "index_add_", "index_fill", "index_fill_", "index_copy", "index_copy_",
          "masked_scatter", "masked_scatter_")  # fmt: skip
def _scatter(call: Call) -> OpCost:
    # NB: rows touched: scatter/scatter_add touch one element per index element (src is read only there);
    # index_add/index_copy touch the whole source; index_fill touches index count x row size. In place: the
    # touched elements of self are written (and read when the op accumulates); out of place: self is read
    # and the output written in full. An accumulating op does 1 FLOP per touched element (2 with alpha).
    src = call.tensor("self")
    index = call.tensor("index", "mask")
    source = call.tensor("src", "source")
    base = call.base.rstrip("_")
    if base == "index_fill":
        dim = int(call.args.get("dim") or 0)
        row = src.numel() // src.shape[dim] if src.dim() else 1
        touched = int(index.numel()) * row
    elif base in ("index_add", "index_copy", "masked_scatter"):
        touched = int(source.numel()) if source is not None else 0
        if base == "masked_scatter":
            touched = int(index.count_nonzero()) if index is not None else touched
    else:
        touched = int(index.numel())
    accumulate = base in ("scatter_add", "scatter_reduce", "index_add") or call.args.get("reduce") is not None
    alpha = call.args.get("alpha", 1)
    flops = touched * (2 if alpha not in (1, None) else 1) if accumulate else 0
    if call.base.endswith("_"):
        source_bytes = 0
        if source is not None:
            source_bytes = touched * source.element_size() if base.startswith("scatter") else tensor_bytes(source)
        index_bytes = tensor_bytes(index) if index is not None else 0
        total = source_bytes + index_bytes + (2 if accumulate else 1) * touched * src.element_size()
        note = f"{call.base}: {touched} touched elements written{' and read (accumulate)' if accumulate else ''}"
    else:
        source_bytes = 0
        if source is not None:
            source_bytes = touched * source.element_size() if base.startswith("scatter") else tensor_bytes(source)
        total = read_bytes(call, skip=("src", "source")) + source_bytes + write_bytes(call)
        note = f"{call.base}: self copied, {touched} elements updated"
    return OpCost(flops, total, compute_dtype(call), "vector", note)


@register("scatter", "embedding_dense_backward", "embedding_backward")
def _embedding_backward(call: Call) -> OpCost:
    # NB: the gradient table (num_weights x dim) is written in full (zero-fill + accumulate of the touched rows,
    # one pass); grad_output and indices read once; one add per grad_output element.
    grad = call.tensor("grad_output", "grad")
    flops = int(grad.numel()) if grad is not None else 0
    return OpCost(flops, io_bytes(call), compute_dtype(call), "vector",
                  "embedding backward: full gradient table written once, one add per grad_output element")  # fmt: skip


@register("gather", "nll_loss_forward", "nll_loss2d_forward")
def _nll_loss(call: Call) -> OpCost:
    # NB: reads one element of self per target (rows touched, not the N x C scores), the targets, one weight
    # per target when weighted; writes the loss and total weight. 1 FLOP per target (negate-and-sum), 2 when
    # weighted.
    src = call.tensor("self")
    target = call.tensor("target")
    weight = call.tensor("weight")
    n = int(target.numel())
    total = n * src.element_size() + tensor_bytes(target) + write_bytes(call)
    if weight is not None:
        total += n * weight.element_size()
    flops = n * (2 if weight is not None else 1)
    return OpCost(flops, total, compute_dtype(call), "vector",
                  f"{call.base}: {n} targets touched, not the whole score matrix")  # fmt: skip


@register("scatter", "nll_loss_backward", "nll_loss2d_backward")
def _nll_loss_backward(call: Call) -> OpCost:
    # NB: grad_input (self's shape) is written in full (zero-fill + one value per target, one pass); self is
    # passed for its shape only (not read); targets, grad_output, total_weight and the touched weights read.
    target = call.tensor("target")
    weight = call.tensor("weight")
    n = int(target.numel())
    total = read_bytes(call, skip=("self", "weight")) + write_bytes(call)
    if weight is not None:
        total += n * weight.element_size()
    return OpCost(n * (2 if weight is not None else 1), total, compute_dtype(call), "vector",
                  f"{call.base}: gradient written in full, {n} targets touched")  # fmt: skip


def _rows(t: Any) -> Any:
    """Row indices [0, 2] of a (4, 3) table."""
    return t.tensor([0, 2])


#: Representative calls for tests/test_formula_examples.py (registry.Example): the ops it cannot build from the schema.
EXAMPLES: dict[str, Example] = {
    "index": lambda t: ((t.randn(4, 3), [_rows(t)]), {}),
    "_unsafe_index": lambda t: ((t.randn(4, 3), [_rows(t)]), {}),
    "scatter_reduce": lambda t: ((t.randn(4, 3), 0, t.zeros(2, 3, dtype=t.int64), t.randn(2, 3), "sum"), {}),
    "scatter_reduce_": lambda t: ((t.randn(4, 3), 0, t.zeros(2, 3, dtype=t.int64), t.randn(2, 3), "amax"), {}),
    "index_add": lambda t: ((t.randn(4, 3), 0, _rows(t), t.randn(2, 3)), {}),
    "index_add_": lambda t: ((t.randn(4, 3), 0, _rows(t), t.randn(2, 3)), {}),
    "index_copy": lambda t: ((t.randn(4, 3), 0, _rows(t), t.randn(2, 3)), {}),
    "index_copy_": lambda t: ((t.randn(4, 3), 0, _rows(t), t.randn(2, 3)), {}),
    "index_fill": lambda t: ((t.randn(4, 3), 0, _rows(t), 1.0), {}),
    "index_fill_": lambda t: ((t.randn(4, 3), 0, _rows(t), 1.0), {}),
    "nll_loss_forward": lambda t: ((t.randn(4, 5).log_softmax(1), t.tensor([0, 1, 2, 3]), None, 1, -100), {}),
    "nll_loss_backward": lambda t: (
        (t.tensor(1.0), t.randn(4, 5).log_softmax(1), t.tensor([0, 1, 2, 3]), None, 1, -100, t.tensor(4.0)),
        {},
    ),
    "nll_loss2d_forward": lambda t: (
        (t.randn(2, 5, 3, 3).log_softmax(1), t.zeros(2, 3, 3, dtype=t.int64), None, 1, -100),
        {},
    ),
    "nll_loss2d_backward": lambda t: (
        (
            t.tensor(1.0),
            t.randn(2, 5, 3, 3).log_softmax(1),
            t.zeros(2, 3, 3, dtype=t.int64),
            None,
            1,
            -100,
            t.tensor(18.0),
        ),
        {},
    ),
}
