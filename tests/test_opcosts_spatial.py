"""Op cost rules of the spatial families (issue 26): pooling, upsampling, grid sampling, embedding_bag,
cdist/pdist and FFTs, forward and backward, exact FLOPs and bytes of real aten calls on known shapes (CPU).

Each expected value is written as its derivation (the rule is the NB of its formula in roofline/costs/aten/ and
its row in docs/op-costs.md)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
aten = torch.ops.aten

from roofline.costs.aten import op_cost  # noqa: E402
from roofline.costs.aten.pooling import adaptive_taps, window_taps  # noqa: E402
from roofline.costs.aten.sampling import aa_taps  # noqa: E402
from roofline.diagnose.count import count_ops, uncovered_summary  # noqa: E402

FP32 = 4
C64 = 8  # complex64: two fp32
INT64 = 8

# Ops the harness adds around the op under test (the parameter that makes inputs require grad, the loss).
HARNESS = {"aten::mul", "aten::sum", "aten::ones_like", "aten::expand", "aten::detach", "aten::add", "aten::rand_like"}


class Fn(nn.Module):
    """``fn`` on the inputs; in training the float inputs are scaled by a parameter (so they require grad) and the
    output by a random tensor (so grad_output is a full contiguous tensor, not the loss's stride-0 ones)."""

    def __init__(self, fn, train: bool = False):
        super().__init__()
        self.fn = fn
        self.train_ = train
        self.p = nn.Parameter(torch.ones(()))

    def forward(self, *args):
        if not self.train_:
            return self.fn(*args)
        out = self.fn(*[a * self.p if a.is_floating_point() else a for a in args])
        return out * torch.rand_like(out)


def records(fn, *args, train: bool = False):
    return count_ops(Fn(fn, train), args, {}, mode="training" if train else "inference")


def one(fn, *args, op, train: bool = False):
    """The single record of aten op ``op`` in ``fn(*args)``."""
    found = [r for r in records(fn, *args, train=train) if r.op == op]
    assert len(found) == 1, [r.op for r in records(fn, *args, train=train)]
    return found[0]


def pair(fn, *args, op, backward=None):
    """(forward record, backward record) of ``op`` and its backward (``op + '_backward'`` unless given) in
    training."""
    recs = records(fn, *args, train=True)
    fwd = [r for r in recs if r.op == op]
    bwd = [r for r in recs if r.op == (backward or f"{op}_backward")]
    assert len(fwd) == 1 and len(bwd) == 1, [r.op for r in recs]
    assert (fwd[0].phase, bwd[0].phase) == ("forward", "backward")
    return fwd[0], bwd[0]


# ------------------------------------------------------------------------------------------- window taps


def _brute_taps(length, out, kernel, stride, padding, dilation):
    return sum(1 for o in range(out) for k in range(kernel) if 0 <= o * stride - padding + k * dilation < length)


GEOMETRIES = [(1, 1, 0, 1), (2, 2, 0, 1), (3, 1, 1, 1), (3, 2, 1, 1), (3, 1, 2, 2), (4, 3, 2, 2)]


@pytest.mark.parametrize("length", [1, 4, 7, 9])
@pytest.mark.parametrize(("kernel", "stride", "padding", "dilation"), GEOMETRIES)
def test_window_taps_brute_force(length, kernel, stride, padding, dilation):
    for ceil_mode in (False, True):
        span = length + 2 * padding - dilation * (kernel - 1) - 1
        if span < 0:
            continue
        out = (-(-span // stride) if ceil_mode else span // stride) + 1
        assert window_taps(length, out, kernel, stride, padding, dilation) == _brute_taps(
            length, out, kernel, stride, padding, dilation
        )


def test_window_taps_hand_and_torch():
    # L=7, k=3, s=2, p=1 -> 4 outputs: windows {-1,0,1} {1,2,3} {3,4,5} {5,6,7}: 2 + 3 + 3 + 2 in bounds
    assert window_taps(7, 4, 3, 2, 1, 1) == 10
    # dilation 2, k=3, p=2, s=1, L=7 -> 7 outputs: taps o-2, o, o+2: 2, 2, 3, 3, 3, 2, 2
    assert window_taps(7, 7, 3, 1, 2, 2) == 17
    # ceil_mode: L=5, k=2, s=2 -> 3 windows [0,1] [2,3] [4,(5)]: 2 + 2 + 1
    assert window_taps(5, 3, 2, 2, 0, 1) == 5
    # torch agrees: avg_pool of ones with divisor 1 sums the in-bounds taps of each window
    ones = torch.ones(1, 1, 7, 7)
    summed = F.avg_pool2d(ones, 3, 2, 1, divisor_override=1).sum()
    assert int(summed) == window_taps(7, 4, 3, 2, 1, 1) ** 2 == 100


def test_adaptive_taps():
    # L=5 -> 3: windows [0,2) [1,4) [3,5): 2 + 3 + 2 (they overlap)
    assert adaptive_taps(5, 3) == 7
    # L=7 -> 3: [0,3) [2,5) [4,7): 3 + 3 + 3
    assert adaptive_taps(7, 3) == 9
    assert adaptive_taps(8, 4) == 8  # an exact division: every element once
    # L=3 -> 5 (upsampling): [0,1) [0,2) [1,2) [1,3) [2,3): windows straddle a boundary every other output
    assert adaptive_taps(3, 5) == 1 + 2 + 1 + 2 + 1
    # torch agrees: adaptive max pooling of an increasing ramp returns each window's last index, of a decreasing
    # one its first
    for length in range(1, 10):
        ramp = torch.arange(length, dtype=torch.float32).view(1, 1, length)
        for out in range(1, 10):
            _, last = F.adaptive_max_pool1d(ramp, out, return_indices=True)
            _, first = F.adaptive_max_pool1d(-ramp, out, return_indices=True)
            assert adaptive_taps(length, out) == int((last - first + 1).sum())


# ----------------------------------------------------------------------------------------------- pooling


def test_max_pool2d_forward_and_backward():
    x = torch.randn(2, 3, 8, 8)
    fwd, bwd = pair(lambda t: F.max_pool2d(t, 2), x, op="aten::max_pool2d_with_indices")
    out = 2 * 3 * 4 * 4  # 96 outputs of 2x2 windows
    assert fwd.flops == out * 4  # 1 compare per window element
    assert fwd.bytes == 2 * 3 * 8 * 8 * FP32 + out * FP32 + out * INT64  # x read, y and indices written
    assert (fwd.dtype, fwd.math) == ("fp32", "vector")
    assert bwd.flops == out  # 1 add per grad_output element through the indices
    assert bwd.bytes == out * FP32 + out * INT64 + 2 * 3 * 8 * 8 * FP32  # grad_out, indices read; grad_in written


def test_max_pool_padding_dilation_ceil():
    # 2-d, k=3, s=2, p=1 on 7x7: 10 taps per dim (test_window_taps_hand_and_torch), 2 channels
    r = one(lambda t: F.max_pool2d(t, 3, 2, 1), torch.randn(1, 2, 7, 7), op="aten::max_pool2d_with_indices")
    assert r.output_shapes[0] == (1, 2, 4, 4)
    assert r.flops == 2 * 10 * 10
    # 1-d (runs as the 2-d op with height 1): k=3, dilation 2, padding 1, stride 1 on 7 -> 5 outputs, taps
    # o-1, o+1, o+3 in bounds: 2, 3, 3, 3, 2
    r = one(lambda t: F.max_pool1d(t, 3, 1, 1, dilation=2), torch.randn(1, 1, 7), op="aten::max_pool2d_with_indices")
    assert r.flops == 13
    assert r.bytes == 7 * FP32 + 5 * FP32 + 5 * INT64
    # ceil_mode: L=5, k=2, s=2 -> 3 windows, 5 taps per dim
    r = one(lambda t: F.max_pool2d(t, 2, ceil_mode=True), torch.randn(1, 1, 5, 5), op="aten::max_pool2d_with_indices")
    assert r.flops == 5 * 5
    # 3-d, k=2 on 4x4x4: 8 outputs x 8 taps per channel
    fwd, bwd = pair(lambda t: F.max_pool3d(t, 2), torch.randn(1, 2, 4, 4, 4), op="aten::max_pool3d_with_indices")
    assert fwd.flops == 2 * 8 * 8
    assert fwd.bytes == 2 * 64 * FP32 + 16 * FP32 + 16 * INT64
    assert bwd.flops == 16


def test_avg_pool2d_count_include_pad_and_backward():
    # k=3, s=1, p=1 on 4x4: taps per dim 2 + 3 + 3 + 2 = 10, so 100 adds + 16 divides
    x = torch.randn(1, 1, 4, 4)
    fwd, bwd = pair(lambda t: F.avg_pool2d(t, 3, 1, 1), x, op="aten::avg_pool2d")
    assert fwd.flops == 100 + 16
    assert fwd.bytes == (16 + 16) * FP32
    assert bwd.flops == 100 + 16  # the transpose: a divide per grad_output element, an add per tap
    assert bwd.bytes == 16 * FP32 + 16 * FP32  # grad_output read, grad_input written; self not read
    # count_include_pad changes the divisor, not the work
    r = one(lambda t: F.avg_pool2d(t, 3, 1, 1, count_include_pad=False), x, op="aten::avg_pool2d")
    assert r.flops == 116


def test_avg_pool1d_and_3d():
    r = one(lambda t: F.avg_pool1d(t, 2), torch.randn(2, 3, 8), op="aten::avg_pool2d")
    assert r.flops == 2 * 3 * 4 * 2 + 2 * 3 * 4  # 24 outputs x 2 taps + 24 divides
    assert r.bytes == (48 + 24) * FP32
    r = one(lambda t: F.avg_pool3d(t, 2), torch.randn(1, 2, 4, 4, 4), op="aten::avg_pool3d")
    assert r.flops == 16 * 8 + 16  # 16 outputs x 8 taps + 16 divides
    assert r.bytes == (128 + 16) * FP32


def test_adaptive_avg_pool():
    # (5, 7) -> (3, 3): taps 7 along h, 9 along w (test_adaptive_taps): 63 per channel, 3 channels, + 27 divides
    x = torch.randn(1, 3, 5, 7)
    fwd, bwd = pair(lambda t: F.adaptive_avg_pool2d(t, 3), x, op="aten::_adaptive_avg_pool2d")
    assert fwd.flops == 3 * 7 * 9 + 27
    assert fwd.bytes == (3 * 35 + 27) * FP32
    assert bwd.flops == 3 * 7 * 9 + 27
    assert bwd.bytes == 27 * FP32 + 3 * 35 * FP32  # grad_output read, grad_input written
    # 3-d: 4 -> 2 along each dim: 4 taps per dim, 64 + 8 divides
    r = one(lambda t: F.adaptive_avg_pool3d(t, 2), torch.randn(1, 1, 4, 4, 4), op="aten::_adaptive_avg_pool3d")
    assert r.flops == 64 + 8
    # 1-d (the 2-d op with height 1): 5 -> 3, 7 taps
    r = one(lambda t: F.adaptive_avg_pool1d(t, 3), torch.randn(1, 1, 5), op="aten::_adaptive_avg_pool2d")
    assert r.flops == 7 + 3


def test_adaptive_max_pool():
    # (5, 5) -> (3, 3): 7 x 7 taps per channel, 2 channels; 18 outputs and 18 int64 indices written
    x = torch.randn(1, 2, 5, 5)
    fwd, bwd = pair(lambda t: F.adaptive_max_pool2d(t, 3), x, op="aten::adaptive_max_pool2d")
    assert fwd.flops == 2 * 7 * 7
    assert fwd.bytes == 50 * FP32 + 18 * FP32 + 18 * INT64
    assert bwd.flops == 18
    assert bwd.bytes == 18 * FP32 + 18 * INT64 + 50 * FP32
    r = one(lambda t: F.adaptive_max_pool3d(t, 2), torch.randn(1, 1, 4, 4, 4), op="aten::adaptive_max_pool3d")
    assert r.flops == 64


def test_fractional_max_pool():
    # 18 outputs (2 channels x 3 x 3) of full 2x2 windows; random_samples (1, 2, 2) fp32 read
    x = torch.randn(1, 2, 8, 8)
    fwd, bwd = pair(lambda t: F.fractional_max_pool2d(t, 2, output_size=3), x, op="aten::fractional_max_pool2d")
    assert fwd.flops == 18 * 4
    assert fwd.bytes == 128 * FP32 + 4 * FP32 + 18 * FP32 + 18 * INT64
    assert bwd.flops == 18
    assert bwd.bytes == 18 * FP32 + 18 * INT64 + 128 * FP32
    r = one(lambda t: F.fractional_max_pool3d(t, 2, output_size=2), torch.randn(1, 1, 4, 4, 4),
            op="aten::fractional_max_pool3d")  # fmt: skip
    assert r.flops == 8 * 8


def test_max_unpool2d():
    def unpool(t):
        y, idx = F.max_pool2d(t, 2, return_indices=True)
        return F.max_unpool2d(y, idx, 2)

    r = one(unpool, torch.randn(1, 1, 4, 4), op="aten::max_unpool2d")
    assert r.flops == 0  # a scatter
    assert r.bytes == 4 * FP32 + 4 * INT64 + 16 * FP32  # values and indices read, the output written in full


def test_lp_pool_decomposes_into_counted_ops():
    recs = records(lambda t: F.lp_pool2d(t, 2, 2), torch.randn(1, 1, 4, 4), train=True)
    assert uncovered_summary(recs) == {}
    assert "aten::avg_pool2d" in {r.op for r in recs}


# -------------------------------------------------------------------------------------------- upsampling


@pytest.mark.parametrize(("mode", "shape", "size", "op", "fwd_per", "bwd_per"), [
    ("nearest", (1, 2, 3, 4), (6, 8), "aten::upsample_nearest2d", 0, 1),
    ("nearest-exact", (1, 2, 3, 4), (6, 8), "aten::_upsample_nearest_exact2d", 0, 1),
    ("nearest", (1, 2, 5), (10,), "aten::upsample_nearest1d", 0, 1),
    ("nearest", (1, 1, 2, 2, 2), (4, 4, 4), "aten::upsample_nearest3d", 0, 1),
    ("linear", (1, 2, 5), (10,), "aten::upsample_linear1d", 3, 4),  # 1 lerp of 3; 2 taps x 2
    ("bilinear", (1, 2, 3, 4), (6, 8), "aten::upsample_bilinear2d", 9, 8),  # 3 lerps; 4 taps x 2
    ("bicubic", (1, 1, 3, 3), (6, 6), "aten::upsample_bicubic2d", 35, 32),  # 5 cubic interps of 7; 16 taps x 2
    ("trilinear", (1, 1, 2, 2, 2), (4, 4, 4), "aten::upsample_trilinear3d", 21, 16),  # 7 lerps; 8 taps x 2
])  # fmt: skip
def test_upsample(mode, shape, size, op, fwd_per, bwd_per):
    x = torch.randn(*shape)
    fwd, bwd = pair(lambda t: F.interpolate(t, size=size, mode=mode), x, op=op)
    n_in, n_out = x.numel(), math.prod(shape[:2]) * math.prod(size)
    assert fwd.flops == fwd_per * n_out
    assert fwd.bytes == (n_in + n_out) * FP32  # input read once, output written once
    assert bwd.flops == bwd_per * n_out  # per grad_output element
    assert bwd.bytes == (n_out + n_in) * FP32  # grad_output read, grad_input written


def test_aa_taps():
    assert aa_taps(8, 4, 2) == 5  # bilinear, downsample x2: support 1 x 2 = 2 -> 2*2 + 1
    assert aa_taps(4, 8, 2) == 3  # upsample: support 1 -> 3
    assert aa_taps(8, 6, 4) == 7  # bicubic, scale 4/3: support 2 x 4/3 = 2.67 -> 3*2 + 1
    assert aa_taps(8, 4, 4) == 8  # bicubic x2: support 4 -> 9 taps, at most the 8 inputs


def test_upsample_antialias():
    # bilinear 8x8 -> 4x4: 5 taps per dim; horizontal pass over 8 x 4, vertical over 4 x 4, 2 FLOPs per tap
    x = torch.randn(1, 1, 8, 8)
    fwd, bwd = pair(lambda t: F.interpolate(t, size=(4, 4), mode="bilinear", antialias=True), x,
                    op="aten::_upsample_bilinear2d_aa")  # fmt: skip
    assert fwd.flops == 2 * 5 * 8 * 4 + 2 * 5 * 4 * 4 == 480
    assert fwd.bytes == (64 + 16) * FP32
    assert bwd.flops == 480  # the transpose: the same taps
    assert bwd.bytes == (16 + 64) * FP32
    # bicubic 8x8 -> 4x6: w 8 -> 6 takes 7 taps, h 8 -> 4 takes 8
    r = one(lambda t: F.interpolate(t, size=(4, 6), mode="bicubic", antialias=True), x,
            op="aten::_upsample_bicubic2d_aa")  # fmt: skip
    assert r.flops == 2 * 7 * 8 * 6 + 2 * 8 * 4 * 6 == 1056
    # only h changes: the horizontal pass is skipped
    r = one(lambda t: F.interpolate(t, size=(4, 8), mode="bilinear", antialias=True), x,
            op="aten::_upsample_bilinear2d_aa")  # fmt: skip
    assert r.flops == 2 * 5 * 4 * 8


def test_area_interpolation_is_adaptive_avg_pool():
    # mode='area' runs adaptive average pooling: 8 -> 4 along each dim, 8 taps per dim, + 16 divides
    r = one(lambda t: F.interpolate(t, size=(4, 4), mode="area"), torch.randn(1, 1, 8, 8),
            op="aten::_adaptive_avg_pool2d")  # fmt: skip
    assert r.flops == 8 * 8 + 16


# ---------------------------------------------------------------------------------------- grid sampling


def test_grid_sample_2d_modes():
    # x (2, 3, 4, 5), grid (2, 5, 6, 2): 60 locations x 3 channels = 180 outputs
    x, grid = torch.randn(2, 3, 4, 5), torch.rand(2, 5, 6, 2) * 2 - 1
    io = (120 + 120 + 180) * FP32  # input, grid read once; output written once
    r = one(lambda t, g: F.grid_sample(t, g, mode="bilinear", align_corners=False), x, grid, op="aten::grid_sampler_2d")
    # per location: 6 per coordinate x 2 + 4 corner weights x 1 multiply = 16; per output 4 taps x 2 = 8
    assert r.flops == 60 * 16 + 180 * 8
    assert r.bytes == io
    r = one(lambda t, g: F.grid_sample(t, g, mode="nearest", align_corners=False), x, grid, op="aten::grid_sampler_2d")
    assert r.flops == 60 * 8  # 4 per coordinate (unnormalize 3, round); a copy per output
    assert r.bytes == io
    r = one(lambda t, g: F.grid_sample(t, g, mode="bicubic", align_corners=False), x, grid, op="aten::grid_sampler_2d")
    assert r.flops == 60 * 29 * 2 + 180 * 16 * 2  # 29 per coordinate; 16 taps x 2 per output


def test_grid_sample_3d():
    # x (1, 2, 3, 4, 5), grid (1, 2, 3, 4, 3): 24 locations x 2 channels
    x, grid = torch.randn(1, 2, 3, 4, 5), torch.rand(1, 2, 3, 4, 3) * 2 - 1
    r = one(lambda t, g: F.grid_sample(t, g, align_corners=False), x, grid, op="aten::grid_sampler_3d")
    # per location 6 x 3 + 8 corner weights x 2 multiplies = 34; per output 8 taps x 2
    assert r.flops == 24 * 34 + 48 * 16
    assert r.bytes == (120 + 72 + 48) * FP32


class _GridSampleGridOnly(nn.Module):
    """grid_sample where only the grid needs a gradient (the input is a constant)."""

    def __init__(self, x):
        super().__init__()
        self.p = nn.Parameter(torch.ones(()))
        self.x = x

    def forward(self, grid):
        out = F.grid_sample(self.x, grid * self.p, align_corners=False)
        return out * torch.rand_like(out)


def test_grid_sample_backward_output_mask():
    x, grid = torch.randn(2, 3, 4, 5), torch.rand(2, 5, 6, 2) * 2 - 1
    _, bwd = pair(lambda t, g: F.grid_sample(t, g, align_corners=False), x, grid, op="aten::grid_sampler_2d")
    # coordinates 60 x 16; grad_input 180 x 4 taps x 2; grad_grid 180 x 4 taps x 2 coordinates x 2
    assert bwd.flops == 60 * 16 + 180 * 8 + 180 * 16
    # grad_output, input, grid read; grad_input and grad_grid written
    assert bwd.bytes == (180 + 120 + 120 + 120 + 120) * FP32
    recs = count_ops(_GridSampleGridOnly(x), (grid,), {}, mode="training")
    (bwd,) = [r for r in recs if r.op == "aten::grid_sampler_2d_backward"]
    # no grad_input; grad_grid is computed and written all the same (torch's kernels always produce it)
    assert bwd.flops == 60 * 16 + 180 * 16
    assert bwd.bytes == (180 + 120 + 120 + 120) * FP32  # grad_output, input, grid read; grad_grid written
    # nearest: grad_grid is zeros (written, not computed), the input is not read
    _, bwd = pair(lambda t, g: F.grid_sample(t, g, mode="nearest", align_corners=False), x, grid,
                    op="aten::grid_sampler_2d")  # fmt: skip
    assert bwd.flops == 60 * 8 + 180  # coordinates, 1 add per grad_output element
    assert bwd.bytes == (180 + 120 + 120 + 120) * FP32  # grad_output, grid read; grad_input, grad_grid written


def test_cudnn_grid_sampler_signature():
    # cuDNN's (CUDA) spelling: bilinear, called through op_cost with its own argument names
    x, grid = torch.randn(1, 2, 3, 3), torch.rand(1, 4, 4, 2) * 2 - 1
    out = F.grid_sample(x, grid, align_corners=True)
    cost = op_cost(aten.cudnn_grid_sampler.default, (x, grid), {}, out)
    assert cost.flops == 16 * 16 + 32 * 8  # 16 locations x 16, 32 outputs x 8
    assert cost.bytes == (18 + 32 + 32) * FP32
    grads = (torch.randn_like(x), torch.randn_like(grid))
    cost = op_cost(aten.cudnn_grid_sampler_backward.default, (x, grid, torch.randn_like(out)), {}, grads)
    assert cost.flops == 16 * 16 + 32 * 8 + 32 * 16
    assert cost.bytes == (18 + 32 + 32 + 18 + 32) * FP32


def test_affine_grid_generator():
    # (2, 5, 6, 2) grid from theta (2, 2, 3): 120 elements, each a row of 3 times (x, y, 1): 6 FLOPs
    r = one(lambda t: F.affine_grid(t, [2, 3, 5, 6], align_corners=False), torch.randn(2, 2, 3),
            op="aten::affine_grid_generator")  # fmt: skip
    assert r.flops == 120 * 6
    assert r.bytes == (12 + 120) * FP32
    r = one(lambda t: F.affine_grid(t, [1, 1, 2, 3, 4], align_corners=False), torch.randn(1, 3, 4),
            op="aten::affine_grid_generator")  # fmt: skip
    assert r.flops == 72 * 8  # (1, 2, 3, 4, 3) grid, rows of 4


# ---------------------------------------------------------------------------------------- embedding_bag


W = torch.randn(10, 4)
IDX = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
OFFSETS = torch.tensor([0, 4])  # 2 bags of 4 indices: 8 x 4 = 32 gathered elements


@pytest.mark.parametrize(("mode", "flops", "outputs"), [
    (0, 32, ((2, 4), (0,), (2,), (2,))),  # sum: 1 add per gathered element
    (1, 32 + 8, ((2, 4), (8,), (2,), (2,))),  # mean: + 1 divide per output element
    (2, 32, ((2, 4), (8,), (2,), (2, 4))),  # max: 1 compare per gathered element
])  # fmt: skip
def test_embedding_bag_forward(mode, flops, outputs):
    out = aten._embedding_bag.default(W, IDX, OFFSETS, False, mode)
    assert tuple(tuple(t.shape) for t in out) == outputs  # torch's bookkeeping outputs, as counted below
    cost = op_cost(aten._embedding_bag.default, (W, IDX, OFFSETS, False, mode), {}, out)
    assert cost.flops == flops
    written = 8 * FP32 + sum(math.prod(s) for s in outputs[1:]) * INT64  # output (fp32) + int64 bookkeeping
    assert cost.bytes == 32 * FP32 + 8 * INT64 + 2 * INT64 + written  # rows touched, not the 40-element table
    assert (cost.dtype, cost.math) == ("fp32", "vector")


def test_embedding_bag_per_sample_weights_and_forward_only():
    psw = torch.rand(8)
    args = (W, IDX, OFFSETS, False, 0, False, psw)
    out = aten._embedding_bag_forward_only.default(*args)
    cost = op_cost(aten._embedding_bag_forward_only.default, args, {}, out)
    assert cost.flops == 2 * 32  # a multiply and an add per gathered element
    assert cost.bytes == 32 * FP32 + 8 * INT64 + 2 * INT64 + 8 * FP32 + 8 * FP32 + (0 + 2 + 2) * INT64


def test_embedding_bag_backward():
    grad = torch.randn(2, 4)
    _, offset2bag, bag_size, max_idx = aten._embedding_bag.default(W, IDX, OFFSETS, False, 1)  # mean
    args = (grad, IDX, OFFSETS, offset2bag, bag_size, max_idx, 10, False, 1, False, None)
    gw = aten._embedding_bag_backward.default(*args)
    cost = op_cost(aten._embedding_bag_backward.default, args, {}, gw)
    assert cost.flops == 2 * 32  # mean: divide by the bag size and add, per gathered element
    # grad, indices, offsets, offset2bag (8), bag_size (2), max_indices (2) read; the 10 x 4 table written
    assert cost.bytes == 8 * FP32 + (8 + 2 + 8 + 2 + 2) * INT64 + 40 * FP32
    # sparse: the gradient's values (one row per index) and its indices written, not the dense table
    args = (grad, IDX, OFFSETS, offset2bag, bag_size, max_idx, 10, False, 1, True, None)
    gw = aten._embedding_bag_backward.default(*args)
    assert gw.layout == torch.sparse_coo
    cost = op_cost(aten._embedding_bag_backward.default, args, {}, gw)
    assert cost.bytes == 8 * FP32 + (8 + 2 + 8 + 2 + 2) * INT64 + 8 * 4 * FP32 + 8 * INT64


def test_embedding_bag_module_training():
    bag = nn.EmbeddingBag(10, 4, mode="sum")
    recs = count_ops(bag, (IDX, OFFSETS), {}, mode="training")
    assert uncovered_summary(recs) == {}
    (bwd,) = [r for r in recs if r.op == "aten::_embedding_bag_backward"]
    assert bwd.flops == 32 and bwd.phase == "backward"
    (psw,) = [
        r
        for r in records(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p), W, IDX, OFFSETS,
                         torch.rand(8), train=True)
        if r.op == "aten::_embedding_bag_per_sample_weights_backward"
    ]  # fmt: skip
    assert psw.flops == 2 * 32  # a dot product of 4 per index
    # weight rows touched (32), grad (2, 4), indices, offsets, offset2bag (empty in sum mode) read; (8,) written
    assert psw.bytes == 32 * FP32 + 8 * FP32 + (8 + 2 + 0) * INT64 + 8 * FP32


# ------------------------------------------------------------------------------------------- distances


@pytest.mark.parametrize(("p", "per_dim", "per_pair"), [
    (2.0, 3, 1),  # sub, square, add; sqrt
    (1.0, 3, 0),  # sub, abs, add
    (0.0, 3, 0),  # sub, compare, add
    (math.inf, 3, 0),  # sub, abs, max
    (3.0, 6, 3),  # sub, abs, pow (3), add; pow(1/p) (3)
])  # fmt: skip
def test_cdist_direct(p, per_dim, per_pair):
    x1, x2 = torch.randn(2, 5, 3), torch.randn(2, 7, 3)
    r = one(lambda a, b: torch.cdist(a, b, p=p), x1, x2, op="aten::_cdist_forward")
    pairs = 2 * 5 * 7
    assert r.flops == pairs * (per_dim * 3 + per_pair)
    assert r.bytes == (30 + 42 + 70) * FP32
    assert r.math == "vector"


def test_cdist_matmul_path():
    # p=2 with use_mm_for_euclid_dist: _euclidean_dist. Per batch: norms 2 x (5 + 7) x 3, x1 * -2 (15),
    # (5 x 5) @ (5 x 7) padded matmul 2 x 5 x 7 x 5, clamp + sqrt per pair 2 x 35
    x1, x2 = torch.randn(2, 5, 3), torch.randn(2, 7, 3)
    expected = 2 * (72 + 15 + 350 + 70)
    r = one(lambda a, b: torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist"), x1, x2, op="aten::_euclidean_dist")
    assert r.flops == expected == 1014
    assert r.bytes == (30 + 42 + 70) * FP32
    assert (r.math, r.dtype) == ("tensor", "fp32")
    # _cdist_forward called with compute_mode 1 takes the same path (as torch's cdist_impl); 2 never does
    out = torch.cdist(x1, x2)
    assert op_cost(aten._cdist_forward.default, (x1, x2, 2.0, 1), {}, out).flops == expected
    assert op_cost(aten._cdist_forward.default, (x1, x2, 2.0, 2), {}, out).flops == 70 * 10
    # mode None with more than 25 rows: the matmul path too
    big1, big2 = torch.randn(1, 26, 2), torch.randn(1, 3, 2)
    out = torch.cdist(big1, big2)
    cost = op_cost(aten._cdist_forward.default, (big1, big2, 2.0, None), {}, out)
    assert cost.flops == 2 * (26 + 3) * 2 + 26 * 2 + 2 * 26 * 3 * 4 + 2 * 26 * 3
    # a broadcast batch: x1 (1, 5, 3) against x2 (4, 7, 3) makes 4 x 5 x 7 pairs
    x1 = torch.randn(1, 5, 3)
    r = one(lambda a, b: torch.cdist(a, b), x1, torch.randn(4, 7, 3), op="aten::_cdist_forward")
    assert r.flops == 4 * 5 * 7 * (3 * 3 + 1)
    assert r.bytes == (15 + 84 + 140) * FP32


def test_cdist_backward():
    x1, x2 = torch.randn(2, 5, 3), torch.randn(2, 7, 3)
    recs = records(lambda a, b: torch.cdist(a, b), x1, x2, train=True)
    first, second = [r for r in recs if r.op == "aten::_cdist_backward"]
    # p=2: per (pair, dim) diff, multiply by grad/dist, add (3); per pair the divide (1); 70 pairs each way
    assert first.flops == second.flops == 70 * (3 * 3 + 1)
    # grad (2, 5, 7), x1, x2, the distances read; grad_x1 written
    assert first.bytes == (70 + 30 + 42 + 70 + 30) * FP32


def test_pdist_forward_and_backward():
    x = torch.randn(6, 3)
    fwd, bwd = pair(F.pdist, x, op="aten::_pdist_forward", backward="aten::_pdist_backward")
    assert fwd.flops == 15 * (3 * 3 + 1)  # 6*5/2 pairs
    assert fwd.bytes == (18 + 15) * FP32
    assert bwd.flops == 15 * (4 * 3 + 1)  # the cdist backward + 1 add per (pair, dim): both rows get it
    assert bwd.bytes == (15 + 18 + 15 + 18) * FP32  # grad, self, pdist read; grad_self written
    r = one(lambda t: F.pdist(t, p=1), x, op="aten::_pdist_forward")
    assert r.flops == 15 * 3 * 3


# ------------------------------------------------------------------------------------------------- FFTs


def test_rfft():
    # 6 real transforms of length 8: 2.5 x 8 x log2(8) each = 2.5 x 48 x 3; (2, 3, 5) complex64 written
    r = one(torch.fft.rfft, torch.randn(2, 3, 8), op="aten::_fft_r2c")
    assert r.flops == 2.5 * 48 * 3 == 360
    assert r.bytes == 48 * FP32 + 30 * C64
    assert (r.dtype, r.math) == ("fp32", "vector")


def test_rfft2_and_its_backward():
    # rfft2 of (2, 3, 8, 8): real transforms along w (2.5 x 384 x 3), then complex ones along h of the
    # (2, 3, 8, 5) half spectrum (5 x 240 x 3)
    x = torch.randn(2, 3, 8, 8)
    recs = records(lambda t: torch.fft.rfft2(t).abs(), x, train=True)
    (fwd,) = [r for r in recs if r.op == "aten::_fft_r2c"]
    assert fwd.flops == 2.5 * 384 * 3 + 5 * 240 * 3 == 6480
    assert fwd.bytes == 384 * FP32 + 240 * C64
    (bwd,) = [r for r in recs if r.op == "aten::_fft_c2c" and r.phase == "backward"]
    # the backward: a complex transform of the zero-padded full spectrum (2, 3, 8, 8) over 64 points
    assert bwd.flops == 5 * 384 * math.log2(64)
    assert bwd.bytes == 2 * 384 * C64
    assert uncovered_summary(recs) == {}


def test_complex_fft_normalization_and_irfft():
    x = torch.randn(2, 8)
    recs = records(lambda t: torch.fft.ifft(torch.complex(t, t)).real, x)
    (c,) = [r for r in recs if r.op == "aten::complex"]
    assert (c.flops, c.bytes) == (0, 16 * FP32 + 16 * C64)  # an interleaving copy; t passed twice is read once
    (r,) = [r for r in recs if r.op == "aten::_fft_c2c"]
    # 2 transforms of 8: 5 x 16 x 3; ifft's 1/n normalization: 2 multiplies per complex output
    assert r.flops == 5 * 16 * 3 + 2 * 16
    assert r.bytes == 2 * 16 * C64
    assert r.dtype == "fp32"  # complex64 computes in fp32
    r = one(lambda t: torch.fft.irfft(torch.complex(t, t)[:, :5]), x, op="aten::_fft_c2r")
    # 2 real transforms of length 8 (2.5 x 16 x 3) + 1/n on the 16 real outputs; (2, 5) complex read
    assert r.flops == 2.5 * 16 * 3 + 16
    assert r.bytes == 10 * C64 + 16 * FP32


def test_fft_non_power_of_two_rounds():
    x = torch.randn(1, 6, dtype=torch.complex64)
    out = torch.fft.fft(x)
    cost = op_cost(aten._fft_c2c.default, (x, [1], 0, True), {}, out)
    assert cost.flops == round(5 * 6 * math.log2(6)) == 78  # the radix-2 count for any N, rounded


# --------------------------------------------------------------------------------- modules, training


@pytest.mark.parametrize("name", ["MaxPool2d", "AvgPool3d", "AdaptiveAvgPool2d", "Upsample", "EmbeddingBag",
                                  "grid_sample", "rfft2", "cdist", "pdist", "LPPool1d", "FractionalMaxPool2d",
                                  "AdaptiveMaxPool1d", "Upsample_aa", "MaxUnpool"])  # fmt: skip
def test_modules_in_training_leave_nothing_uncounted(name):
    def unpool(t):
        y, idx = F.max_pool2d(t, 2, return_indices=True)
        return F.max_unpool2d(y, idx, 2)

    x2, x3 = torch.randn(1, 2, 6, 6), torch.randn(1, 2, 4, 4, 4)
    cases = {
        "MaxPool2d": (nn.MaxPool2d(3, 2, 1), (x2,)),
        "AvgPool3d": (nn.AvgPool3d(2), (x3,)),
        "AdaptiveAvgPool2d": (nn.AdaptiveAvgPool2d(4), (x2,)),
        "Upsample": (nn.Upsample(scale_factor=2, mode="bilinear"), (x2,)),
        "EmbeddingBag": (nn.EmbeddingBag(10, 4, mode="max"), (IDX, OFFSETS)),
        "grid_sample": (Fn(lambda t, g: F.grid_sample(t, g, align_corners=False), True),
                        (x2, torch.rand(1, 3, 3, 2) * 2 - 1)),
        "rfft2": (Fn(lambda t: torch.fft.rfft2(t).abs(), True), (x2,)),
        "cdist": (Fn(torch.cdist, True), (torch.randn(30, 3), torch.randn(4, 3))),
        "pdist": (Fn(F.pdist, True), (torch.randn(5, 3),)),
        "LPPool1d": (nn.LPPool1d(2, 2), (torch.randn(1, 2, 8),)),
        "FractionalMaxPool2d": (nn.FractionalMaxPool2d(2, output_size=3), (x2,)),
        "AdaptiveMaxPool1d": (nn.AdaptiveMaxPool1d(3), (torch.randn(1, 2, 7),)),
        "Upsample_aa": (Fn(lambda t: F.interpolate(t, size=(3, 3), mode="bicubic", antialias=True), True), (x2,)),
        "MaxUnpool": (Fn(unpool, True), (x2,)),
    }  # fmt: skip
    model, inputs = cases[name]
    for param in model.parameters():
        param.requires_grad_(True)
    model = model if list(model.parameters()) else _WithParam(model)
    recs = count_ops(model, inputs, {}, mode="training")
    assert any(r.phase == "backward" for r in recs)
    assert uncovered_summary(recs) == {}


class _WithParam(nn.Module):
    """A parameter-free module with its float input scaled by a parameter, so that training runs a backward."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.p = nn.Parameter(torch.ones(()))

    def forward(self, *args):
        return self.inner(*[a * self.p if a.is_floating_point() else a for a in args])
