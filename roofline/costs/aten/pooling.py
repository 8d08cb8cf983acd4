"""Pooling (max, average, adaptive, fractional, unpooling) forward and backward: one compare or add per window
element read, counted exactly from the geometry (padding, dilation, ceil_mode and adaptive windows clipped to the
input), the input read once, the output (and the int64 indices) written once.

Windows are separable: the elements a window reads are the product over the pooled dims of its in-bounds taps
along each dim, so the total over all outputs is the product over dims of the per-dim sums, times the
non-pooled elements (batch x channels). 1-d pools reach the mode as their 2-d op with a size-1 height."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from roofline.costs.aten.call import Call, OpCost, compute_dtype, io_bytes, prod, read_bytes, write_bytes
from roofline.costs.aten.registry import Example, register


def _per_dim(value: Any, nd: int, default: Sequence[int]) -> list[int]:
    """An int[nd] pooling argument as a list of nd ints: empty -> ``default``, one value -> repeated."""
    if value is None:
        values = list(default)
    elif isinstance(value, int):
        values = [value]
    else:
        values = [int(v) for v in value]
    if not values:
        values = list(default)
    if len(values) == 1:
        values = values * nd
    return values


def window_taps(length: int, out: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Input elements read along one dim, summed over the ``out`` windows: the taps ``o*stride - padding +
    k*dilation`` (k < kernel) that fall inside ``[0, length)``.

    NB: a tap in the padding (or past the end with ceil_mode) reads nothing and costs nothing: the kernels of
    torch clip the window to the input (max pooling skips -inf padding, average pooling adds only real elements
    even when count_include_pad divides by the full window)."""
    total = 0
    for o in range(out):
        start = o * stride - padding
        lo = 0 if start >= 0 else (-start + dilation - 1) // dilation  # the first tap at or after 0
        hi = min(kernel - 1, (length - 1 - start) // dilation) if start <= length - 1 else -1  # the last before length
        total += max(0, hi - lo + 1)
    return total


def adaptive_taps(length: int, out: int) -> int:
    """Input elements read along one dim by an adaptive pool, summed over its ``out`` windows: window o spans
    ``[floor(o*length/out), ceil((o+1)*length/out))`` (torch's start/end index formula), exact for any sizes."""
    return sum(-(-((o + 1) * length) // out) - (o * length) // out for o in range(out))


def _pooled(t: Any, nd: int) -> tuple[int, list[int]]:
    """(non-pooled elements, the nd pooled sizes) of a pooling input or output."""
    sizes = [int(s) for s in t.shape[-nd:]]
    return int(t.numel()) // max(1, prod(sizes)), sizes


def _window_reads(call: Call, nd: int, inp: Any, out: Any, *, dilated: bool) -> int:
    """Window elements read over all outputs of a kernel_size/stride/padding(/dilation) pool."""
    kernel = _per_dim(call.get("kernel_size"), nd, [1])
    stride = _per_dim(call.args.get("stride"), nd, kernel)
    padding = _per_dim(call.args.get("padding"), nd, [0])
    dilation = _per_dim(call.args.get("dilation"), nd, [1]) if dilated else [1] * nd
    outer, in_sizes = _pooled(inp, nd)
    _, out_sizes = _pooled(out, nd)
    per_dim = [window_taps(in_sizes[d], out_sizes[d], kernel[d], stride[d], padding[d], dilation[d]) for d in range(nd)]
    return outer * prod(per_dim)


def _adaptive_reads(inp: Any, out: Any, nd: int) -> int:
    outer, in_sizes = _pooled(inp, nd)
    _, out_sizes = _pooled(out, nd)
    return outer * prod(adaptive_taps(in_sizes[d], out_sizes[d]) for d in range(nd))


def _nd(call: Call) -> int:
    for nd in (3, 2, 1):
        if f"{nd}d" in call.base:
            return nd
    return 2


MAX_POOLS = ("max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
             "max_pool3d_with_indices", "quantized_max_pool1d", "quantized_max_pool2d", "quantized_max_pool3d",
             "mkldnn_max_pool2d", "mkldnn_max_pool3d")  # fmt: skip


@register("pooling", *MAX_POOLS)
def _max_pool(call: Call) -> OpCost:
    # NB: 1 compare per window element read (taps clipped to the input: padding and ceil_mode overhang read
    # nothing); the input read once (overlapping windows hit the cache), the output and the int64 indices (the
    # _with_indices ops) written once.
    nd = _nd(call)
    reads = _window_reads(call, nd, call.tensor("self"), call.out0, dilated=True)
    return OpCost(reads, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: 1 compare per window element read ({reads}); input read once, "
                  "output (and indices) written once")  # fmt: skip


@register("pooling", "avg_pool1d", "avg_pool2d", "avg_pool3d")
def _avg_pool(call: Call) -> OpCost:
    # NB: 1 add per window element read (clipped to the input: a padded tap adds nothing, count_include_pad
    # only changes the divisor) + 1 divide per output element; input read once, output written once.
    nd = _nd(call)
    out = call.out0
    reads = _window_reads(call, nd, call.tensor("self"), out, dilated=False)
    return OpCost(reads + int(out.numel()), io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: 1 add per window element read ({reads}) + 1 divide per output")  # fmt: skip


@register("pooling", "avg_pool2d_backward", "avg_pool3d_backward")
def _avg_pool_backward(call: Call) -> OpCost:
    # NB: the transpose of the forward: grad_output / divisor (1 per grad_output element) added to every input
    # element of its window (1 per window element read); grad_output read once, grad_input written in full
    # (zero-fill and accumulate in one pass); self only gives the shape (not read).
    nd = _nd(call)
    grad = call.tensor("grad_output")
    reads = _window_reads(call, nd, call.tensor("self"), grad, dilated=False)
    total = read_bytes(call, skip=("self",)) + write_bytes(call)
    return OpCost(reads + int(grad.numel()), total, compute_dtype(call), "vector",
                  f"{call.base}: 1 divide per grad_output element + 1 add per window element ({reads}); "
                  "grad_input written once, self not read")  # fmt: skip


@register("pooling", "max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward",
          "adaptive_max_pool2d_backward", "adaptive_max_pool3d_backward", "fractional_max_pool2d_backward",
          "fractional_max_pool3d_backward")  # fmt: skip
def _max_pool_backward(call: Call) -> OpCost:
    # NB: a scatter through the saved indices: 1 add per grad_output element (overlapping windows accumulate);
    # grad_output and indices read once, grad_input written in full (zero-fill + scatter, one pass); self only
    # gives the shape (not read).
    grad = call.tensor("grad_output")
    total = read_bytes(call, skip=("self",)) + write_bytes(call)
    return OpCost(int(grad.numel()), total, compute_dtype(call), "vector",
                  f"{call.base}: 1 add per grad_output element through the indices; grad_input written once, "
                  "self not read")  # fmt: skip


@register("pooling", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
          "adaptive_avg_pool3d", "mkldnn_adaptive_avg_pool2d")  # fmt: skip
def _adaptive_avg_pool(call: Call) -> OpCost:
    # NB: window o of a dim spans [floor(o*L/O), ceil((o+1)*L/O)): 1 add per window element read (exact for any
    # output size; windows overlap when L/O is not an integer) + 1 divide per output; input read once, output
    # written once.
    out = call.out0
    reads = _adaptive_reads(call.tensor("self"), out, _nd(call))
    return OpCost(reads + int(out.numel()), io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: 1 add per adaptive window element ({reads}) + 1 divide per output")  # fmt: skip


@register("pooling", "_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d_backward",
          "mkldnn_adaptive_avg_pool2d_backward")  # fmt: skip
def _adaptive_avg_pool_backward(call: Call) -> OpCost:
    # NB: as the forward (1 divide per grad_output element, 1 add per window element); grad_output read once,
    # grad_input written once; self only gives the shape (not read).
    grad = call.tensor("grad_output")
    reads = _adaptive_reads(call.tensor("self"), grad, _nd(call))
    total = read_bytes(call, skip=("self",)) + write_bytes(call)
    return OpCost(reads + int(grad.numel()), total, compute_dtype(call), "vector",
                  f"{call.base}: 1 divide per grad_output element + 1 add per window element ({reads}); "
                  "grad_input written once, self not read")  # fmt: skip


@register("pooling", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")
def _adaptive_max_pool(call: Call) -> OpCost:
    # NB: 1 compare per adaptive window element read (windows as the adaptive average pool); input read once,
    # output and int64 indices written once.
    reads = _adaptive_reads(call.tensor("self"), call.out0, _nd(call))
    return OpCost(reads, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: 1 compare per adaptive window element ({reads}); indices written once")  # fmt: skip


@register("pooling", "fractional_max_pool2d", "fractional_max_pool3d")
def _fractional_max_pool(call: Call) -> OpCost:
    # NB: every window is kernel_size, fully inside the input (its pseudo-random start is clamped to
    # length - kernel): 1 compare per window element = output elements x prod(kernel); input and random_samples
    # read once, output and int64 indices written once.
    nd = _nd(call)
    kernel = _per_dim(call.get("kernel_size"), nd, [1])
    reads = int(call.out0.numel()) * prod(kernel)
    return OpCost(reads, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: 1 compare per window element ({reads}); indices written once")  # fmt: skip


@register("pooling", "max_unpool2d", "max_unpool3d")
def _max_unpool(call: Call) -> OpCost:
    # NB: a scatter: the output is written in full (zero-fill + one value per input element, one pass); self and
    # indices read once; 0 FLOPs. (Its backward is a gather, counted as aten::gather.)
    return OpCost(0, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: scatter, output written once (zeros + values); 0 FLOPs")  # fmt: skip


# ------------------------------------------------------------------------ examples for the formula test


def _max_pool_backward_example(t: Any, nd: int) -> tuple[Any, ...]:
    """max_pool{nd}d_with_indices_backward: grad_output and indices from the forward (kernel 2, stride 2)."""
    x = t.randn(1, 2, *([4] * nd))
    pool = getattr(t.ops.aten, f"max_pool{nd}d_with_indices")
    args = ([2] * nd, [2] * nd, [0] * nd, [1] * nd, False)
    out, indices = pool(x, *args)
    return (t.randn_like(out), x, *args, indices), {}


def _avg_pool_backward_example(t: Any, nd: int) -> tuple[Any, ...]:
    """avg_pool{nd}d_backward: grad_output of the forward's shape (kernel 2, stride 2)."""
    x = t.randn(1, 2, *([4] * nd))
    out = getattr(t.ops.aten, f"avg_pool{nd}d")(x, [2] * nd, [2] * nd)
    return (t.randn_like(out), x, [2] * nd, [2] * nd, [0] * nd, False, True, None), {}


def _fractional_backward_example(t: Any, nd: int) -> tuple[Any, ...]:
    """fractional_max_pool{nd}d_backward: grad_output and indices from the forward (kernel 2, output 3)."""
    x = t.randn(1, 2, *([6] * nd))
    forward = getattr(t.ops.aten, f"fractional_max_pool{nd}d")
    out, indices = forward(x, [2] * nd, [3] * nd, t.rand(1, 2, nd))
    return (t.randn_like(out), x, [2] * nd, [3] * nd, indices), {}


def _unpool_example(t: Any, nd: int) -> tuple[Any, ...]:
    """max_unpool{nd}d: values and indices of a kernel-2 stride-2 max pool, unpooled to the input size."""
    x = t.randn(1, 2, *([4] * nd))
    out, indices = getattr(t.ops.aten, f"max_pool{nd}d_with_indices")(x, [2] * nd, [2] * nd)
    extra = ([2] * nd, [0] * nd) if nd == 3 else ()
    return (out, indices, [4] * nd, *extra), {}


def _quantized(t: Any, *shape: int) -> Any:
    """A quint8 tensor (the quantized_max_pool kernels take only quantized input)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # NB: torch deprecates quantized tensor creation
        return t.quantize_per_tensor(t.randn(*shape), 0.1, 0, t.quint8)


def _mkldnn_adaptive_backward_example(t: Any) -> tuple[Any, ...]:
    """mkldnn_adaptive_avg_pool2d_backward: mkldnn grad_output of the forward's shape (output 2 x 2)."""
    x = t.randn(1, 2, 4, 4).to_mkldnn()
    out = t.ops.aten.mkldnn_adaptive_avg_pool2d(x, [2, 2])
    return (t.randn(out.shape).to_mkldnn(), x), {}


EXAMPLES: dict[str, Example] = {
    "adaptive_avg_pool1d": lambda t: ((t.randn(2, 3, 8), [3]), {}),
    "adaptive_avg_pool2d": lambda t: ((t.randn(2, 3, 8, 8), [3, 3]), {}),
    "adaptive_avg_pool3d": lambda t: ((t.randn(1, 2, 4, 4, 4), [3, 3, 3]), {}),
    "adaptive_max_pool1d": lambda t: ((t.randn(2, 3, 8), [3]), {}),
    "adaptive_max_pool2d": lambda t: ((t.randn(2, 3, 8, 8), [3, 3]), {}),
    "adaptive_max_pool3d": lambda t: ((t.randn(1, 2, 4, 4, 4), [3, 3, 3]), {}),
    "avg_pool1d": lambda t: ((t.randn(2, 3, 8), [2], [2]), {}),
    "avg_pool2d": lambda t: ((t.randn(2, 3, 8, 8), [2, 2], [2, 2]), {}),
    "avg_pool3d": lambda t: ((t.randn(1, 2, 4, 4, 4), [2, 2, 2], [2, 2, 2]), {}),
    "avg_pool2d_backward": lambda t: _avg_pool_backward_example(t, 2),
    "avg_pool3d_backward": lambda t: _avg_pool_backward_example(t, 3),
    "fractional_max_pool2d": lambda t: ((t.randn(1, 2, 6, 6), [2, 2], [3, 3], t.rand(1, 2, 2)), {}),
    "fractional_max_pool3d": lambda t: ((t.randn(1, 2, 6, 6, 6), [2, 2, 2], [3, 3, 3], t.rand(1, 2, 3)), {}),
    "fractional_max_pool2d_backward": lambda t: _fractional_backward_example(t, 2),
    "fractional_max_pool3d_backward": lambda t: _fractional_backward_example(t, 3),
    "max_pool1d": lambda t: ((t.randn(2, 3, 8), [2], [2]), {}),
    "max_pool1d_with_indices": lambda t: ((t.randn(2, 3, 8), [2], [2], [0], [1], False), {}),
    "max_pool2d": lambda t: ((t.randn(2, 3, 8, 8), [2, 2], [2, 2]), {}),
    "max_pool2d_with_indices": lambda t: ((t.randn(2, 3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False), {}),
    "max_pool3d": lambda t: ((t.randn(1, 2, 4, 4, 4), [2, 2, 2], [2, 2, 2]), {}),
    "max_pool3d_with_indices": lambda t: ((t.randn(1, 2, 4, 4, 4), [2] * 3, [2] * 3, [0] * 3, [1] * 3, False), {}),
    "max_pool2d_with_indices_backward": lambda t: _max_pool_backward_example(t, 2),
    "max_pool3d_with_indices_backward": lambda t: _max_pool_backward_example(t, 3),
    "max_unpool2d": lambda t: _unpool_example(t, 2),
    "max_unpool3d": lambda t: _unpool_example(t, 3),
    "mkldnn_adaptive_avg_pool2d": lambda t: ((t.randn(1, 2, 4, 4).to_mkldnn(), [2, 2]), {}),
    "mkldnn_adaptive_avg_pool2d_backward": _mkldnn_adaptive_backward_example,
    "mkldnn_max_pool2d": lambda t: ((t.randn(1, 2, 4, 4).to_mkldnn(), [2, 2], [2, 2]), {}),
    "mkldnn_max_pool3d": lambda t: ((t.randn(1, 2, 4, 4, 4).to_mkldnn(), [2, 2, 2], [2, 2, 2]), {}),
    "quantized_max_pool1d": lambda t: ((_quantized(t, 2, 3, 8), [2], [2]), {}),
    "quantized_max_pool2d": lambda t: ((_quantized(t, 2, 3, 8, 8), [2, 2], [2, 2]), {}),
    "quantized_max_pool3d": lambda t: ((_quantized(t, 1, 2, 4, 4, 4), [2, 2, 2], [2, 2, 2]), {}),
}
