"""Op cost rules of the linalg family (issue 26): the torch.linalg factorizations and solvers by their textbook
counts, _trilinear (nn.Bilinear), conv_tbc, addmm_, and the small ops the census found uncovered (logit,
_conj_physical, fftfreq, rrelu_with_noise_). Exact FLOPs and bytes of real aten calls on known shapes (CPU); each
expected value is written as its derivation (the rule is the NB of its formula in roofline/costs/aten/)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
aten = torch.ops.aten

from roofline.costs.aten import op_cost  # noqa: E402
from roofline.costs.aten.linalg import matrix_exp_matmuls, trilinear_flops  # noqa: E402
from roofline.costs.aten.matmul import conv_tbc_rows  # noqa: E402
from roofline.diagnose.count import count_ops, uncovered_summary  # noqa: E402

FP32 = 4
INT32 = 4


def cost(op, *args, **kwargs):
    return op_cost(op, args, kwargs, op(*args, **kwargs))


def spd(n: int, batch: tuple[int, ...] = ()) -> object:
    a = torch.randn(*batch, n, n)
    return a @ a.mT + n * torch.eye(n)


def test_cholesky_n3_over_3_batch_and_complex() -> None:
    # n = 6: 6^3/3 = 72; bytes A 36 + L 36 fp32 + info 1 int32 = 144 + 144 + 4
    c = cost(aten.linalg_cholesky_ex.default, spd(6))
    assert (c.flops, c.bytes, c.dtype, c.math) == (72, 292, "fp32", "tensor")
    # batch (2,) of 3 x 3: 2 * 27/3 = 18; bytes A 18 + L 18 fp32 + info 2 int32 = 72 + 72 + 8
    c = cost(aten.linalg_cholesky_ex.default, spd(3, (2,)))
    assert (c.flops, c.bytes) == (18, 152)
    # complex64 6 x 6: 4 x 72 = 288 at the real dtype fp32; bytes A 36 + L 36 complex64 (8 B) + info 4
    a = spd(6).to(torch.complex64)
    c = cost(aten.linalg_cholesky_ex.default, a)
    assert (c.flops, c.bytes, c.dtype) == (288, 36 * 8 * 2 + 4, "fp32")


def test_lu_factor_det_slogdet() -> None:
    # square 6: 2*6^3/3 = 144; bytes A 144 + LU 144 + pivots 6 int32 24 + info 4 = 316
    c = cost(aten.linalg_lu_factor_ex.default, spd(6))
    assert (c.flops, c.bytes, c.math) == (144, 316, "tensor")
    # 6 x 3 (k = 3): 2*6*3*3 - (6+3)*9 + 2*27/3 = 108 - 81 + 18 = 45 (= mn^2 - n^3/3 = 54 - 9); bytes A 72 + LU
    # 72 + pivots 3*4 + info 4 = 160
    c = cost(aten.linalg_lu_factor_ex.default, torch.randn(6, 3))
    assert (c.flops, c.bytes) == (45, 160)
    # det: LU 144; bytes A 144 + det 4 + LU 144 + pivots 24 = 316
    c = cost(aten._linalg_det.default, spd(6))
    assert (c.flops, c.bytes) == (144, 316)
    # slogdet: LU 144; bytes A 144 + sign 4 + logabsdet 4 + LU 144 + pivots 24 = 320
    c = cost(aten._linalg_slogdet.default, spd(6))
    assert (c.flops, c.bytes) == (144, 320)


def test_triangular_and_lu_solves() -> None:
    a, b = spd(6).triu(), torch.randn(6, 2)
    # trsm: n^2 per right-hand side: 36 * 2 = 72; bytes A 144 + B 48 + X 48 = 240
    c = cost(aten.linalg_solve_triangular.default, a, b, upper=True)
    assert (c.flops, c.bytes, c.math) == (72, 240, "tensor")
    # left=False solves X A = B with B 2 x 6: 2 right-hand sides (the rows), 72 again
    c = cost(aten.linalg_solve_triangular.default, a, b.T.contiguous(), upper=True, left=False)
    assert c.flops == 72
    lu, piv = torch.linalg.lu_factor(spd(6))
    # getrs: 2n^2 per right-hand side: 2 * 36 * 2 = 144; bytes LU 144 + pivots 24 + B 48 + X 48 = 264
    c = cost(aten.linalg_lu_solve.default, lu, piv, b)
    assert (c.flops, c.bytes) == (144, 264)


def test_solve_and_inverse() -> None:
    # solve: LU 144 + getrs 2*36*2 = 144 -> 288; bytes A 144 + B 48 + X 48 + LU 144 + pivots 24 + info 4 = 412
    c = cost(aten._linalg_solve_ex.default, spd(6), torch.randn(6, 2))
    assert (c.flops, c.bytes) == (288, 412)
    # a vector right-hand side is one: 144 + 2*36 = 216
    c = cost(aten._linalg_solve_ex.default, spd(6), torch.randn(6))
    assert c.flops == 216
    # inverse as torch runs it (solve A X = I): LU 144 + 2*36*6 = 432 -> 576 = 8*6^3/3; bytes A 144 + inverse 144
    # + info 4 = 292
    c = cost(aten.linalg_inv_ex.default, spd(6))
    assert (c.flops, c.bytes) == (576, 292)


def test_qr_modes() -> None:
    a = torch.randn(6, 3)
    # geqrf 6 x 3: 2*6*9 - 2*27/3 = 108 - 18 = 90; reduced Q (orgqr m=6, n=k=3): 4*6*3*3 - 2*9*9 + 4*27/3 =
    # 216 - 162 + 36 = 90 -> 180; bytes A 72 + Q 72 + R 36 = 180
    c = cost(aten.linalg_qr.default, a)
    assert (c.flops, c.bytes, c.math) == (180, 180, "tensor")
    # complete Q (6 x 6 from 3 reflectors): 4*6*6*3 - 2*12*9 + 36 = 432 - 216 + 36 = 252 -> 90 + 252 = 342
    assert cost(aten.linalg_qr.default, a, "complete").flops == 342
    # mode 'r': geqrf only, 90
    assert cost(aten.linalg_qr.default, a, "r").flops == 90


def test_eigh_and_svd() -> None:
    # eigh with vectors 9*6^3 = 1944; bytes A 144 + eigenvalues 24 + eigenvectors 144 = 312; math vector
    c = cost(aten._linalg_eigh.default, spd(6))
    assert (c.flops, c.bytes, c.math) == (1944, 312, "vector")
    # values only 4*6^3/3 = 288
    assert cost(aten._linalg_eigh.default, spd(6), "L", False).flops == 288
    a = torch.randn(6, 3)
    # full U, V (m=6, n=3): 4*36*3 + 8*6*9 + 9*27 = 432 + 432 + 243 = 1107; bytes A 72 + U 144 + S 12 + Vh 36 = 264
    c = cost(aten._linalg_svd.default, a, True)
    assert (c.flops, c.bytes) == (1107, 264)
    # reduced U1, V: 14*6*9 + 8*27 = 756 + 216 = 972; values only: 4*6*9 - 4*27/3 = 216 - 36 = 180
    assert cost(aten._linalg_svd.default, a, False).flops == 972
    assert cost(aten._linalg_svd.default, a, False, False).flops == 180
    # a wide 3 x 6 matrix counts as its transpose
    assert cost(aten._linalg_svd.default, a.T.contiguous(), False).flops == 972


def test_pinv_and_lstsq() -> None:
    a = torch.randn(6, 3)
    # reduced SVD 972 + V scaled n*k = 9 + (3 x 3)(3 x 6) product 2*3*3*6 = 108 -> 1089; bytes A 72 + pinv 72
    c = cost(aten.linalg_pinv.atol_rtol_tensor, a)
    assert (c.flops, c.bytes) == (1089, 144)
    # hermitian 6 x 6: eigh 1944 + scaling 36 + product 2*216 = 432 -> 2412
    assert cost(aten.linalg_pinv.atol_rtol_tensor, spd(6), hermitian=True).flops == 2412
    b = torch.randn(6, 2)
    # gelsy (CPU default), k = 3, r = 2: QR 90 + ormqr 4*2*6*3 - 2*2*9 = 144 - 36 = 108 + trsm 2*9 = 18 -> 216;
    # bytes A 72 + B 48 + solution 3 x 2 24 + residuals (empty for gelsy) 0 + rank int64 8 + singular values
    # (empty) 0 = 152
    c = cost(aten.linalg_lstsq.default, a, b)
    assert (c.flops, c.bytes, c.math) == (216, 152, "tensor")
    # gelsd: reduced SVD 972 + U^T B 2*2*6*3 = 72 + scaling 2*3 = 6 + V times it 2*2*3*3 = 36 -> 1086
    c = cost(aten.linalg_lstsq.default, a, b, driver="gelsd")
    assert (c.flops, c.math) == (1086, "vector")


def test_matrix_exp_degrees_and_squarings() -> None:
    # fp32 thresholds: 0 -> T1 (0 matmuls); 0.01 in (5.98e-4, 5.12e-2] -> T4 (2); 8 >= 1.46 -> T18 (5) with
    # s = ceil(log2(8 / 3.010)) = ceil(1.41) = 2 squarings -> 7
    assert matrix_exp_matmuls([0.0], double=False) == 0
    assert matrix_exp_matmuls([0.01], double=False) == 2
    assert matrix_exp_matmuls([8.0], double=False) == 7
    # fp64: 8 >= 0.2996 -> T18 with s = ceil(log2(8 / 1.0909)) = ceil(2.87) = 3 -> 8
    assert matrix_exp_matmuls([8.0], double=True) == 8
    # a batch [0.01 I, 8 I] of 4 x 4 (1-norms 0.01 and 8): (2 + 7) matmuls of 2*4^3 = 128 -> 1152; bytes A 2*16
    # fp32 + the result 2*16 = 128 + 128
    a = torch.stack([0.01 * torch.eye(4), 8 * torch.eye(4)])
    c = cost(aten.linalg_matrix_exp.default, a)
    assert (c.flops, c.bytes, c.dtype, c.math) == (1152, 256, "fp32", "tensor")
    # meta: no values: degree 18, no squaring per matrix: 2 * 5 * 128 = 1280
    m = a.to("meta")
    assert op_cost(aten.linalg_matrix_exp.default, (m,), {}, torch.empty_like(m)).flops == 1280


def test_cross_and_check_errors() -> None:
    # 5 x 3 outputs, 3 FLOPs each = 45; bytes two inputs 60 + output 60 = 180
    c = cost(aten.linalg_cross.default, torch.randn(5, 3), torch.randn(5, 3))
    assert (c.flops, c.bytes, c.math) == (45, 180, "vector")
    c = cost(aten._linalg_check_errors.default, torch.zeros((), dtype=torch.int32), "linalg.inv", is_matrix=True)
    assert (c.flops, c.bytes, c.math) == (0, 0, "none")


def test_trilinear_bilinear_forward_and_backward_shape() -> None:
    n, i1, i2, o = 5, 3, 4, 2
    x1, x2, w = torch.randn(n, i1), torch.randn(n, i2), torch.randn(o, i1, i2)
    # bilinear: _trilinear(x1, w, x2, [1,3], [0], [1,2], [2,3]) unrolled over O: per slice the bmm x1 (N x I1)
    # by W_k (I1 x I2) 2*5*3*4 = 120, the bmm with x2 over I2 2*5*4 = 40, the add into the output 5 -> 2 * 165 =
    # 330 (bmm 320); bytes x1 15 + w 24 + x2 20 + out 10 = 69 fp32 = 276
    c = cost(aten._trilinear.default, x1, w, x2, [1, 3], [0], [1, 2], [2, 3])
    assert (c.flops, c.bytes, c.math) == (330, 276, "tensor")
    # the gradient of x1 (torch's _trilinear_backward): _trilinear(g, w, x2, [2,3], [0], [1,2], [1,3]): per slice
    # of O the product g_k * W_k with nothing to sum (a multiply, N*I1*I2 = 60), the bmm with x2 over I2
    # 2*5*3*4 = 120, the add 5*3 = 15 -> 2 * 195 = 390
    g = torch.randn(n, o)
    c = cost(aten._trilinear.default, g, w, x2, [2, 3], [0], [1, 2], [1, 3])
    assert c.flops == 390
    assert trilinear_flops([[n, o], [o, i1, i2], [n, i2]], [[2, 3], [0], [1, 2]], [1, 3], 1) == (240, 150)


def test_bilinear_training_is_covered() -> None:
    model = nn.Bilinear(3, 4, 2)
    recs = count_ops(model, (torch.randn(5, 3), torch.randn(5, 4)), {}, mode="training")
    assert uncovered_summary(recs) == {}
    # the forward and the weight's gradient (the inputs need none)
    assert sum(r.op == "aten::_trilinear" for r in recs) == 2


def test_conv_tbc_and_addmm_inplace() -> None:
    # T=6, K=3, pad=1: output 6 steps; taps cover 5, 6, 5 steps = 16 rows of B=2: 2 * 16 * 2 * 3 * 4 = 768;
    # bytes input 36 + weight 36 + bias 4 + output 48 fp32 = 124 * 4 = 496
    x, w, bias = torch.randn(6, 2, 3), torch.randn(3, 3, 4), torch.randn(4)
    c = cost(aten.conv_tbc.default, x, w, bias, 1)
    assert (c.flops, c.bytes, c.math) == (768, 496, "tensor")
    assert conv_tbc_rows(6, 3, 0) == 4 * 3  # no padding: 4 output steps, each tap covers all 4
    # addmm_: 2*3*4*5 = 120; bytes self read 12 + written 12, mat1 15, mat2 20 -> 59 * 4 = 236
    c = cost(aten.addmm_.default, torch.randn(3, 4), torch.randn(3, 5), torch.randn(5, 4))
    assert (c.flops, c.bytes, c.math) == (120, 236, "tensor")


def test_small_elementwise_and_creation_ops() -> None:
    x = torch.rand(4, 4)
    # logit: 1-x, div, log = 3 per element (48); with eps +2 compares = 5 (80); bytes 64 + 64
    assert (cost(aten.logit.default, x).flops, cost(aten.logit.default, x).bytes) == (48, 128)
    assert cost(aten.logit.default, x, 1e-6).flops == 80
    assert cost(aten.logit_.default, x.clone()).flops == 48
    # logit_backward: dy/(x(1-x)) 3 per element; bytes dy 64 + x 64 + dx 64
    c = cost(aten.logit_backward.default, torch.randn(4, 4), x)
    assert (c.flops, c.bytes) == (48, 192)
    # _conj_physical of complex64 4 x 4: one sign flip per element (16); bytes 16 * 8 read + written = 256
    z = torch.randn(4, 4, dtype=torch.complex64)
    assert (cost(aten._conj_physical.default, z).flops, cost(aten._conj_physical.default, z).bytes) == (16, 256)
    # fftfreq(8): 8 values, 1 multiply each, written 32 bytes; rfftfreq(8): 8//2 + 1 = 5 values
    assert (cost(aten.fft_fftfreq.default, 8).flops, cost(aten.fft_fftfreq.default, 8).bytes) == (8, 32)
    assert (cost(aten.fft_rfftfreq.default, 8).flops, cost(aten.fft_rfftfreq.default, 8).bytes) == (5, 20)
    # rrelu_with_noise_ (training): 2 per element (32); self read + written 128, the noise written 64 = 192;
    # eval: the noise untouched, 128
    c = cost(aten.rrelu_with_noise_.default, torch.randn(4, 4), torch.zeros(4, 4), training=True)
    assert (c.flops, c.bytes) == (32, 192)
    c = cost(aten.rrelu_with_noise_.default, torch.randn(4, 4), torch.zeros(4, 4), training=False)
    assert (c.flops, c.bytes) == (32, 128)


def test_baddbmm_inplace() -> None:
    # 2*b*m*n*k = 2*2*3*4*5 = 240; bytes self read 24 + written 24, batch1 30, batch2 40 -> 118 * 4 = 472
    c = cost(aten.baddbmm_.default, torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4))
    assert (c.flops, c.bytes, c.math) == (240, 472, "tensor")
