"""Data movement: views and allocations (no data moved), copies, creations and overwrites (0 FLOPs, bytes only)."""

from __future__ import annotations

from typing import Any

from roofline.costs.aten.call import Call, OpCost, compute_dtype, io_bytes
from roofline.costs.aten.registry import Example, register

# --------------------------------------------------------------------------------- views and allocation

# NB: a view or alias returns a tensor sharing its input's storage: no kernel, no bytes, no FLOPs. Any op whose
# schema marks its outputs as aliases of an input (torch's OpOverload.is_view) is treated the same way even
# when it is not listed here.
VIEWS = (
    "view", "_unsafe_view", "_reshape_alias", "as_strided", "alias", "detach", "lift_fresh", "t", "transpose",
    "permute", "expand", "slice", "select", "squeeze", "unsqueeze", "split", "split_with_sizes", "unbind",
    "chunk", "narrow", "diagonal", "unfold", "view_as_real", "view_as_complex", "_conj", "_neg_view", "real",
    "imag", "movedim", "swapaxes", "expand_as", "view_as", "unflatten", "_indices", "_values", "indices",
    "values", "tensor_split", "hsplit", "vsplit", "numpy_T", "mT", "mH", "adjoint", "positive",
)  # fmt: skip


# NB: unsafe_split / unsafe_split_with_sizes / unsafe_chunk are split without the autograd view tracking: views.
# The in-place view ops (transpose_, t_, squeeze_, unsqueeze_, as_strided_, detach_, swapaxes_, swapdims_)
# rewrite the tensor's sizes and strides (metadata on the host): no kernel, no bytes.
UNSAFE_VIEWS = ("unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk")
IN_PLACE_VIEWS = ("transpose_", "t_", "squeeze_", "unsqueeze_", "as_strided_", "detach_", "swapaxes_", "swapdims_")


@register("view", *VIEWS, *UNSAFE_VIEWS, *IN_PLACE_VIEWS)
def _view(call: Call) -> OpCost:
    return OpCost(0, 0, compute_dtype(call), "none", "view: no data moved")


# NB: an allocation reserves memory without touching it (empty, empty_like, resize_), and an assertion or a
# metadata op checks values the host already has: no kernel, no bytes.
ALLOCATIONS = (
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted", "resize_",
    "resize_as_", "_resize_output_", "set_", "_assert_async", "_assert_tensor_metadata", "_functional_assert_async",
    "sym_constrain_range", "sym_constrain_range_for_size", "_assert_scalar", "record_stream",
)  # fmt: skip


@register("allocation", *ALLOCATIONS)
def _allocation(call: Call) -> OpCost:
    return OpCost(0, 0, compute_dtype(call), "none", "allocation or metadata: no data moved")


@register("view", "reshape", "contiguous", "flatten", "ravel")
def _view_or_copy(call: Call) -> OpCost:
    # NB: these return a view when the strides allow and a copy otherwise: a view when the output shares the
    # input's storage (0 bytes), else a copy (read once, written once).
    src = call.tensor("self", "input")
    out = call.out0
    if src is not None and out is not None and _same_storage(src, out):
        return _view(call)
    return _copy(call)


def _same_storage(a: Any, b: Any) -> bool:
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return a is b


# ---------------------------------------------------------------------------------------------- copies

# NB: pure data movement: 0 FLOPs, each input read once and the output written once, on the vector (memory)
# units. The *_copy ops (view_copy, split_with_sizes_copy, ...) are the out-of-place twins of views: they copy.
# as_strided_scatter copies self and writes src into the strided window: self and src read, the output written.
# A dtype conversion (_to_copy) reads at the source dtype and writes at the target dtype. A copy of a
# transposed tensor is where the record's non_contiguous flag matters.
COPIES = (
    "_to_copy", "clone", "cat", "stack", "hstack", "vstack", "concat", "concatenate", "repeat", "flip", "roll",
    "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
    "replication_pad2d", "replication_pad3d", "_copy_from", "_copy_from_and_resize", "lift_fresh_copy",
    "narrow_copy", "slice_backward", "select_backward", "tril", "triu", "_local_scalar_dense", "view_copy",
    "permute_copy", "transpose_copy", "t_copy", "expand_copy", "slice_copy", "select_copy", "unsqueeze_copy",
    "squeeze_copy", "alias_copy", "detach_copy", "split_copy", "split_with_sizes_copy", "unbind_copy", "_reshape_copy",
    "as_strided_copy", "diagonal_copy", "unfold_copy", "unfold_backward", "slice_scatter", "select_scatter",
    "diagonal_scatter", "as_strided_scatter", "masked_select", "im2col", "col2im", "pixel_shuffle",
    "pixel_unshuffle", "channel_shuffle", "_pad_enum", "to_dense", "resolve_conj", "resolve_neg",
    "diag", "diag_embed", "diagflat",
)  # fmt: skip


@register("copy", *COPIES)
def _copy(call: Call) -> OpCost:
    note = "copy: read once, written once, 0 FLOPs"
    if call.base in ("tril", "triu"):
        note += " (the mask is an index comparison, not counted)"
    return OpCost(0, io_bytes(call), compute_dtype(call), "vector", note)


# NB: these overwrite their first argument without reading it: only the write is compulsory.
OVERWRITES = frozenset({"copy_", "fill_", "zero_", "uniform_", "normal_", "random_", "exponential_", "cauchy_",
                        "log_normal_", "geometric_", "bernoulli_"})  # fmt: skip


@register("copy", "copy_")
def _copy_into(call: Call) -> OpCost:
    return OpCost(0, io_bytes(call, skip=("self",)), compute_dtype(call), "vector",
                  "copy_: source read once, destination written once (not read)")  # fmt: skip


# NB: a creation op writes its output once and reads nothing; arange/linspace/eye compute their values from
# the index (not counted) and random generators' bit generation is not counted (0 FLOPs).
CREATIONS = (
    "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "new_zeros", "new_ones", "new_full",
    "scalar_tensor", "arange", "linspace", "logspace", "eye", "rand", "randn", "randint", "randperm", "rand_like",
    "randn_like", "randint_like", "normal", "tensor", "fill",
)  # fmt: skip


@register("creation", *CREATIONS)
def _creation(call: Call) -> OpCost:
    return OpCost(0, io_bytes(call), compute_dtype(call), "vector", "creation: output written once, 0 FLOPs")


@register("creation", "fill_", "zero_", "uniform_", "normal_", "random_", "exponential_", "cauchy_",
          "log_normal_", "geometric_")  # fmt: skip
def _overwrite(call: Call) -> OpCost:
    note = f"{call.base}: written once, not read; 0 FLOPs"
    if call.base not in ("fill_", "zero_"):
        note += " (random bit generation not counted)"
    return OpCost(0, io_bytes(call, skip=("self",)), compute_dtype(call), "vector", note)


# NB: the backward of a reflection/replication pad accumulates every grad_output element into the zeroed
# grad_input (the border's reflected/replicated positions receive several): one add per grad_output element;
# grad_output read once, grad_input written once, self passed for its shape only (not read).
PAD_BACKWARDS = tuple(f"{kind}_pad{n}d_backward" for kind in ("reflection", "replication") for n in (1, 2, 3))


@register("copy", *PAD_BACKWARDS)
def _pad_backward(call: Call) -> OpCost:
    grad = call.tensor("grad_output")
    return OpCost(int(grad.numel()), io_bytes(call, skip=("self",)), compute_dtype(call), "vector",
                  f"{call.base}: one add per grad_output element; grad_output read, grad_input written")  # fmt: skip


def _pad_backward_example(t: Any, kind: str, shape: tuple[int, ...], padding: list[int]) -> tuple[Any, ...]:
    """grad_output with the padded forward's shape, self the unpadded input."""
    x = t.randn(shape)
    out = getattr(t.ops.aten, f"{kind}_pad{len(padding) // 2}d")(x, padding)  # the forward
    return (t.randn_like(out), x, padding), {}


_PAD_EXAMPLE_SHAPES = {1: ((2, 3, 8), [2, 2]), 2: ((2, 3, 6, 6), [1, 1, 1, 1]), 3: ((1, 2, 4, 4, 4), [1] * 6)}


def _sparse(t: Any) -> Any:
    return t.eye(4).to_sparse().coalesce()


#: Representative calls for tests/test_formula_examples.py (registry.Example): the ops it cannot build from the schema.
EXAMPLES: dict[str, Example] = {
    "view_as_real": lambda t: ((t.randn(4, 4, dtype=t.complex64),), {}),
    "view_as_complex": lambda t: ((t.randn(4, 4, 2),), {}),
    "_conj": lambda t: ((t.randn(4, 4, dtype=t.complex64),), {}),
    "imag": lambda t: ((t.randn(4, 4, dtype=t.complex64),), {}),
    "unflatten": lambda t: ((t.randn(4, 6), 1, [2, 3]), {}),
    "_indices": lambda t: ((_sparse(t),), {}),
    "_values": lambda t: ((_sparse(t),), {}),
    "indices": lambda t: ((_sparse(t),), {}),
    "values": lambda t: ((_sparse(t),), {}),
    "empty_permuted": lambda t: (([2, 3, 4], [0, 2, 1]), {}),
    "_resize_output_": lambda t: ((t.empty(4, 4), [4, 4], t.device("cpu")), {}, t.empty(4, 4)),
    "_functional_assert_async": lambda t: ((t.tensor(True), "message", t.empty(0)), {}),
    "_assert_scalar": lambda t: ((True, "message"), {}),
    "record_stream": lambda t: ((t.randn(4), None), {}, None),
    "reflection_pad1d": lambda t: ((t.randn(2, 3, 8), [2, 2]), {}),
    "reflection_pad2d": lambda t: ((t.randn(2, 3, 8, 8), [1, 1, 1, 1]), {}),
    "reflection_pad3d": lambda t: ((t.randn(1, 2, 4, 4, 4), [1] * 6), {}),
    "replication_pad3d": lambda t: ((t.randn(1, 2, 4, 4, 4), [1] * 6), {}),
    "_copy_from": lambda t: ((t.randn(4, 4), t.empty(4, 4)), {}, t.empty(4, 4)),
    "_copy_from_and_resize": lambda t: ((t.randn(4, 4), t.empty(0)), {}, t.empty(4, 4)),
    "im2col": lambda t: ((t.randn(1, 2, 5, 5), [2, 2], [1, 1], [0, 0], [1, 1]), {}),
    "col2im": lambda t: ((t.randn(1, 8, 16), [5, 5], [2, 2], [1, 1], [0, 0], [1, 1]), {}),
    "geometric_": lambda t: ((t.randn(4, 4), 0.5), {}),
    **{
        f"{kind}_pad{n}d_backward": (lambda t, kind=kind, n=n: _pad_backward_example(t, kind, *_PAD_EXAMPLE_SHAPES[n]))
        for kind in ("reflection", "replication")
        for n in (1, 2, 3)
    },
}


@register("creation", "fft_fftfreq", "fft_rfftfreq")
def _fftfreq(call: Call) -> OpCost:
    # NB: the frequency grid: the index values (an arange, not counted) times 1/(n*d): 1 multiply per element;
    # the output written once, nothing read.
    out = call.out0
    return OpCost(int(out.numel()), io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: 1 multiply per element (the scale 1/(n*d)), written once")  # fmt: skip
