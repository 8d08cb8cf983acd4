"""Resampling: interpolation (upsample_nearest*, linear, bilinear, bicubic, trilinear, the antialiased variants)
and grid sampling (grid_sampler_2d/3d, cudnn_grid_sampler, affine_grid_generator), forward and backward.

FLOPs per output element from the interpolation's taps; bytes: the input read once, the output written once
(the grid too for grid sampling). Backward ops read grad_output and write grad_input in full."""

from __future__ import annotations

import math
from typing import Any

from roofline.costs.aten.call import Call, OpCost, compute_dtype, io_bytes, prod, read_bytes, write_bytes
from roofline.costs.aten.registry import Example, register


def _nd(base: str) -> int:
    for nd in (3, 2, 1):
        if f"{nd}d" in base:
            return nd
    return 2


# ------------------------------------------------------------------------------------------- upsampling

#: Forward FLOPs per output element. NB: separable interpolation as the kernels nest it: a linear interpolation
#: of two values is 3 FLOPs (w0*a + w1*b), and n-d linear takes 2^n - 1 of them (1d 3, 2d 9, 3d 21); bicubic is
#: 4 cubic interpolations along w + 1 along h, each 4 multiplies + 3 adds (35). Nearest only copies (0). The
#: per-index source positions and weights are computed once per output row/column and are not counted.
UPSAMPLE_FLOPS = {
    "nearest": 0,
    "linear1d": 3,
    "bilinear2d": 9,
    "trilinear3d": 21,
    "bicubic2d": 35,
}
#: Backward FLOPs per grad_output element. NB: grad_output is scattered to the taps it was read from: 2 per tap
#: (multiply by the tap's weight, add into grad_input): linear 2 x 2^n (1d 4, 2d 8, 3d 16), bicubic 2 x 16;
#: nearest 1 add.
UPSAMPLE_BACKWARD_FLOPS = {
    "nearest": 1,
    "linear1d": 4,
    "bilinear2d": 8,
    "trilinear3d": 16,
    "bicubic2d": 32,
}

UPSAMPLES = ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
             "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
             "upsample_bicubic2d", "upsample_trilinear3d")  # fmt: skip


def _interp(base: str) -> str:
    name = base.removesuffix("_backward").removeprefix("_").removeprefix("upsample_")
    return "nearest" if name.startswith("nearest") else name


@register("upsampling", *UPSAMPLES)
def _upsample(call: Call) -> OpCost:
    # NB: FLOPs per output element as UPSAMPLE_FLOPS; the input read once (also when downsampling: the rows
    # and cache lines it touches), the output written once.
    kind = _interp(call.base)
    per = UPSAMPLE_FLOPS[kind]
    return OpCost(int(call.out0.numel()) * per, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: {per} FLOPs per output element; input read once, output written once")  # fmt: skip


@register("upsampling", *(f"{name}_backward" for name in UPSAMPLES))
def _upsample_backward(call: Call) -> OpCost:
    # NB: FLOPs per grad_output element as UPSAMPLE_BACKWARD_FLOPS; grad_output read once, grad_input written in
    # full once (zero-fill and accumulate in one pass).
    kind = _interp(call.base)
    per = UPSAMPLE_BACKWARD_FLOPS[kind]
    grad = call.tensor("grad_output")
    return OpCost(int(grad.numel()) * per, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: {per} FLOPs per grad_output element; grad_input written once")  # fmt: skip


def aa_taps(length_in: int, length_out: int, interp_size: int) -> int:
    """Taps per output of an antialiased resize along one dim: the filter's support (interp_size / 2 input
    pixels each side, widened by the scale in/out when downsampling), torch's maximum window
    ``ceil(support) * 2 + 1``, at most the input size.

    NB: torch clips each window to the input; the edge windows' clipping is not modelled (every output counts
    the maximum window)."""
    scale = length_in / length_out
    support = interp_size / 2 * scale if scale >= 1.0 else interp_size / 2
    return min(length_in, math.ceil(support) * 2 + 1)


def _aa_flops(big_in: list[int], big_out: list[int], outer: int, interp_size: int) -> int:
    """FLOPs of a separable antialiased resize of the last two dims (h, w) from ``big_in`` to ``big_out``:
    a horizontal pass (w) over outer x h_in x w_out outputs, then a vertical pass (h) over outer x h_out x
    w_out, 2 FLOPs (multiply-add) per tap; a pass whose size does not change is skipped."""
    (h_in, w_in), (h_out, w_out) = big_in, big_out
    flops = 0
    if w_in != w_out:
        flops += 2 * aa_taps(w_in, w_out, interp_size) * outer * h_in * w_out
    if h_in != h_out:
        flops += 2 * aa_taps(h_in, h_out, interp_size) * outer * h_out * w_out
    return flops


@register("upsampling", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa", "_upsample_bilinear2d_aa_backward",
          "_upsample_bicubic2d_aa_backward")  # fmt: skip
def _upsample_aa(call: Call) -> OpCost:
    # NB: separable (horizontal then vertical pass, as torch's kernels): 2 FLOPs per tap (aa_taps: bilinear
    # support 1, bicubic 2, widened by the downsampling scale); the intermediate (h_in x w_out) buffer is not
    # compulsory traffic. Backward is the transpose: the same taps, grad_output read, grad_input written once.
    interp_size = 4 if "bicubic" in call.base else 2
    if call.base.endswith("_backward"):
        small = call.tensor("grad_output")
        input_size = [int(s) for s in call.args["input_size"]]
        src, dst = input_size[-2:], [int(s) for s in small.shape[-2:]]
    else:
        small = call.tensor("self", "input")
        src, dst = [int(s) for s in small.shape[-2:]], [int(s) for s in call.out0.shape[-2:]]
    outer = int(small.numel()) // max(1, prod(small.shape[-2:]))
    flops = _aa_flops(src, dst, outer, interp_size)
    return OpCost(flops, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: separable antialias filter, 2 FLOPs per tap; input, output once")  # fmt: skip


# ----------------------------------------------------------------------------------------- grid sampling

#: grid_sampler's interpolation_mode argument.
GRID_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}


def grid_taps(mode: str, nd: int) -> int:
    """Input values one output element (one channel at one location) reads: bilinear 2^n corners, nearest 1,
    bicubic 4^n (16 in 2-d)."""
    return {"bilinear": 2**nd, "nearest": 1, "bicubic": 4**nd}[mode]


def grid_coord_flops(mode: str, nd: int) -> int:
    """FLOPs per output *location* (shared by its C channels): the coordinate work.

    NB: per coordinate: unnormalize 3 (grid value to pixel: add, multiply, subtract/divide folded); nearest + a
    round (4); bilinear + floor + two distances (6) and (n - 1) multiplies per corner weight; bicubic + floor +
    fraction + 4 cubic-convolution coefficients of 6 FLOPs (29). The padding mode's clamp or reflection is not
    counted."""
    if mode == "nearest":
        return 4 * nd
    if mode == "bilinear":
        return 6 * nd + (2**nd) * (nd - 1)
    return 29 * nd


def _grid_mode(call: Call) -> str:
    if "cudnn" in call.base:
        return "bilinear"  # NB: cuDNN's grid sampler is bilinear, zeros padding, align_corners=True only
    return GRID_MODES.get(int(call.get("interpolation_mode", 0)), "bilinear")


def _grid_shape(call: Call) -> tuple[int, int, int]:
    """(nd, output locations N x spatial, channels C) of a grid sampler call."""
    grid = call.tensor("grid")
    nd = int(grid.shape[-1])
    locations = int(grid.numel()) // nd
    inp = call.tensor("input", "self")
    return nd, locations, int(inp.shape[1])


@register("grid sampling", "grid_sampler_2d", "grid_sampler_3d", "cudnn_grid_sampler", "_grid_sampler_2d_cpu_fallback")
def _grid_sampler(call: Call) -> OpCost:
    # NB: per output element (location x channel) 2 FLOPs per tap (weight multiply + accumulate; nearest only
    # copies: 0), plus the coordinate work once per location (grid_coord_flops). The input is read once (a
    # gather at arbitrary points: compulsory as a whole), the grid read once, the output written once.
    mode = _grid_mode(call)
    nd, locations, channels = _grid_shape(call)
    per_output = 0 if mode == "nearest" else 2 * grid_taps(mode, nd)
    flops = locations * (grid_coord_flops(mode, nd) + channels * per_output)
    return OpCost(flops, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base} ({mode}): {per_output} FLOPs per output element + "
                  f"{grid_coord_flops(mode, nd)} per location; input, grid read once, output written once")  # fmt: skip


@register("grid sampling", "grid_sampler_2d_backward", "grid_sampler_3d_backward", "cudnn_grid_sampler_backward",
          "_grid_sampler_2d_cpu_fallback_backward")  # fmt: skip
def _grid_sampler_backward(call: Call) -> OpCost:
    # NB: the coordinate work once per location (as the forward); grad_input (when output_mask asks for it):
    # 2 FLOPs per tap per grad_output element (weight multiply + scatter-add; nearest 1 add); grad_grid, which
    # torch's kernels (CPU and CUDA) compute and return whatever the mask says: 2n per tap per grad_output
    # element (a multiply-add per coordinate of the weight's derivative times the input value; nearest has no
    # grid gradient: zeros written, 0 FLOPs). Bytes: grad_output and grid read once, the input read once
    # except for nearest (grad_input needs only its shape), the gradients written once.
    mode = _grid_mode(call)
    nd, locations, channels = _grid_shape(call)
    mask = call.args.get("output_mask") or [True, True]
    taps = grid_taps(mode, nd)
    outputs = locations * channels
    flops = locations * grid_coord_flops(mode, nd)
    if mask[0]:
        flops += outputs * (1 if mode == "nearest" else 2 * taps)
    if mode != "nearest":
        flops += outputs * 2 * nd * taps
    skip = ("input", "self") if mode == "nearest" else ()
    return OpCost(flops, read_bytes(call, skip=skip) + write_bytes(call), compute_dtype(call), "vector",
                  f"{call.base} ({mode}): grad_input {'on' if mask[0] else 'off'}, grad_grid computed; "
                  "gradients written once")  # fmt: skip


@register("grid sampling", "affine_grid_generator", "cudnn_affine_grid_generator",
          "cudnn_affine_grid_generator_backward")  # fmt: skip
def _affine_grid(call: Call) -> OpCost:
    # NB: each output coordinate is a row of theta (n + 1 values) times the homogeneous base point (x, y[, z], 1):
    # 2(n + 1) FLOPs per grid element (the batched matmul torch runs; its backward, grad_theta = grad^T @ base,
    # the same per grad element). theta (or grad) read once, the output written once; the base grid torch
    # builds is an intermediate, not counted.
    if call.base.endswith("_backward"):
        grad = call.tensor("grad")
        nd, elements = int(grad.shape[-1]), int(grad.numel())
    else:
        out = call.out0
        nd, elements = int(out.shape[-1]), int(out.numel())
    return OpCost(2 * (nd + 1) * elements, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: 2(n+1) FLOPs per grid element; theta read once, grid written once")  # fmt: skip


# ------------------------------------------------------------------------ examples for the formula test


def _grid(t: Any, *shape: int) -> Any:
    """A sampling grid of ``shape`` (N, *spatial, nd) with coordinates in [-1, 1]."""
    return t.rand(*shape) * 2 - 1


def _grid_backward_example(t: Any, nd: int) -> tuple[Any, ...]:
    """grid_sampler_{nd}d_backward: bilinear, zeros padding; grad_output of the forward's shape."""
    x = t.randn(1, 2, *([4] * nd))
    grid = _grid(t, 1, *([3] * nd), nd)
    grad = t.randn(1, 2, *([3] * nd))
    return (grad, x, grid, 0, 0, False, [True, True]), {}


def _cudnn_affine_grid_example(t: Any) -> tuple[Any, ...]:
    """cudnn_affine_grid_generator (CUDA only): theta (N, 2, 3), N C H W = 1 2 4 4; the grid (N, H, W, 2) from
    the CPU affine_grid_generator (align_corners=True, cuDNN's convention)."""
    theta = t.randn(1, 2, 3)
    return (theta, 1, 2, 4, 4), {}, t.ops.aten.affine_grid_generator(theta, [1, 2, 4, 4], True)


def _cudnn_grid_sampler_example(t: Any) -> tuple[Any, ...]:
    """cudnn_grid_sampler (CUDA only): the output from the CPU grid_sampler_2d (bilinear, zeros, align_corners)."""
    x, grid = t.randn(1, 2, 4, 4), _grid(t, 1, 3, 3, 2)
    return (x, grid), {}, t.ops.aten.grid_sampler_2d(x, grid, 0, 0, True)


def _cudnn_grid_sampler_backward_example(t: Any) -> tuple[Any, ...]:
    """cudnn_grid_sampler_backward (CUDA only): (grad_self, grad_grid) from the CPU grid_sampler_2d_backward."""
    x, grid, grad = t.randn(1, 2, 4, 4), _grid(t, 1, 3, 3, 2), t.randn(1, 2, 3, 3)
    out = t.ops.aten.grid_sampler_2d_backward(grad, x, grid, 0, 0, True, [True, True])
    return (x, grid, grad), {}, out


EXAMPLES: dict[str, Example] = {
    "upsample_nearest1d": lambda t: ((t.randn(2, 3, 4), [8]), {}),
    "upsample_nearest2d": lambda t: ((t.randn(1, 2, 4, 4), [8, 8]), {}),
    "upsample_nearest3d": lambda t: ((t.randn(1, 2, 2, 2, 2), [4, 4, 4]), {}),
    "_upsample_nearest_exact1d": lambda t: ((t.randn(2, 3, 4), [8]), {}),
    "_upsample_nearest_exact2d": lambda t: ((t.randn(1, 2, 4, 4), [8, 8]), {}),
    "_upsample_nearest_exact3d": lambda t: ((t.randn(1, 2, 2, 2, 2), [4, 4, 4]), {}),
    "upsample_nearest1d_backward": lambda t: ((t.randn(2, 3, 8), [8], [2, 3, 4]), {}),
    "upsample_nearest2d_backward": lambda t: ((t.randn(1, 2, 8, 8), [8, 8], [1, 2, 4, 4]), {}),
    "upsample_nearest3d_backward": lambda t: ((t.randn(1, 2, 4, 4, 4), [4, 4, 4], [1, 2, 2, 2, 2]), {}),
    "_upsample_nearest_exact1d_backward": lambda t: ((t.randn(2, 3, 8), [8], [2, 3, 4]), {}),
    "_upsample_nearest_exact2d_backward": lambda t: ((t.randn(1, 2, 8, 8), [8, 8], [1, 2, 4, 4]), {}),
    "_upsample_nearest_exact3d_backward": lambda t: ((t.randn(1, 2, 4, 4, 4), [4, 4, 4], [1, 2, 2, 2, 2]), {}),
    "upsample_linear1d_backward": lambda t: ((t.randn(2, 3, 8), [8], [2, 3, 4], False), {}),
    "upsample_bilinear2d_backward": lambda t: ((t.randn(1, 2, 8, 8), [8, 8], [1, 2, 4, 4], False), {}),
    "upsample_bicubic2d_backward": lambda t: ((t.randn(1, 2, 8, 8), [8, 8], [1, 2, 4, 4], False), {}),
    "upsample_trilinear3d_backward": lambda t: ((t.randn(1, 2, 4, 4, 4), [4, 4, 4], [1, 2, 2, 2, 2], False), {}),
    "_upsample_bilinear2d_aa": lambda t: ((t.randn(1, 2, 8, 8), [4, 4], False), {}),
    "_upsample_bicubic2d_aa": lambda t: ((t.randn(1, 2, 8, 8), [4, 4], False), {}),
    "_upsample_bilinear2d_aa_backward": lambda t: ((t.randn(1, 2, 4, 4), [4, 4], [1, 2, 8, 8], False), {}),
    "_upsample_bicubic2d_aa_backward": lambda t: ((t.randn(1, 2, 4, 4), [4, 4], [1, 2, 8, 8], False), {}),
    "grid_sampler_2d": lambda t: ((t.randn(1, 2, 4, 4), _grid(t, 1, 3, 3, 2), 0, 0, False), {}),
    "grid_sampler_3d": lambda t: ((t.randn(1, 2, 4, 4, 4), _grid(t, 1, 3, 3, 3, 3), 0, 0, False), {}),
    "_grid_sampler_2d_cpu_fallback": lambda t: ((t.randn(1, 2, 4, 4), _grid(t, 1, 3, 3, 2), 0, 0, False), {}),
    "grid_sampler_2d_backward": lambda t: _grid_backward_example(t, 2),
    "grid_sampler_3d_backward": lambda t: _grid_backward_example(t, 3),
    # NB: the fallback backward takes grid_sampler_2d_backward's arguments without output_mask
    "_grid_sampler_2d_cpu_fallback_backward": lambda t: (_grid_backward_example(t, 2)[0][:-1], {}),
    "affine_grid_generator": lambda t: ((t.randn(1, 2, 3), [1, 2, 4, 4], False), {}),
    "cudnn_affine_grid_generator": _cudnn_affine_grid_example,
    "cudnn_affine_grid_generator_backward": lambda t: ((t.randn(1, 4, 4, 2), 1, 2, 4, 4), {}, t.randn(1, 2, 3)),
    "cudnn_grid_sampler": _cudnn_grid_sampler_example,
    "cudnn_grid_sampler_backward": _cudnn_grid_sampler_backward_example,
}
