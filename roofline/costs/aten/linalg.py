"""Dense linear algebra (``torch.linalg``): the factorizations and solvers LAPACK (CPU) and cuSOLVER / MAGMA
(CUDA) run, by the textbook FLOP counts (Golub & Van Loan, *Matrix Computations*; LAPACK Working Note 41, leading
terms), and ``_trilinear`` (nn.Bilinear) by the two sum-products torch runs.

Conventions: 2 FLOPs per multiply-add (a count of "n^3/3" is n^3/6 multiply-adds); batch dims multiply; a
complex matrix counts 4x the real count (a complex multiply-add is 4 real multiplies and 4 real adds) at the real
component's dtype. Bytes: each input read once, each output (factors, pivots, info) written once; the passes a
blocked factorization makes over its panels are not compulsory traffic."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from roofline.costs.aten.call import Call, Math, OpCost, dtype_name, io_bytes, prod
from roofline.costs.aten.matmul import matmul_cost
from roofline.costs.aten.registry import Example, describe, register

_REAL = {"complex32": "fp16", "complex64": "fp32", "complex128": "fp64"}


def _dtype(t: Any) -> str:
    name = str(t.dtype).removeprefix("torch.")
    return _REAL.get(name) or dtype_name(t.dtype)


def _batch(t: Any, dims: int = 2) -> int:
    """The number of matrices in ``t`` (its leading dims; a vector right-hand side has ``dims=1``)."""
    return prod(t.shape[: t.dim() - dims])


def lu_flops(m: int, n: int) -> Fraction:
    """LU with partial pivoting (getrf) of an m x n matrix, k = min(m, n): 2mnk - (m+n)k^2 + 2k^3/3.

    NB: LAWN 41's leading terms: 2n^3/3 for a square matrix, mn^2 - n^3/3 for m >= n; the pivot search and row
    swaps are not FLOPs."""
    k = min(m, n)
    return Fraction(2 * m * n * k - (m + n) * k * k) + Fraction(2 * k**3, 3)


def qr_flops(m: int, n: int) -> Fraction:
    """Householder QR (geqrf) of an m x n matrix: 2mn^2 - 2n^3/3 for m >= n (2nm^2 - 2m^3/3 otherwise), i.e.
    twice :func:`lu_flops`."""
    return 2 * lu_flops(m, n)


def orgqr_flops(m: int, n: int, k: int) -> Fraction:
    """Forming the m x n Q of k Householder reflectors (orgqr / householder_product): 4mnk - 2(m+n)k^2 + 4k^3/3
    (LAWN 41); 2mn^2 - 2n^3/3 for the reduced Q (n = k)."""
    return Fraction(4 * m * n * k - 2 * (m + n) * k * k) + Fraction(4 * k**3, 3)


def svd_flops(m: int, n: int, compute_uv: bool, full_matrices: bool) -> Fraction:
    """Golub-Reinsch SVD of an m x n matrix (G&VL table 8.6.1, for m >= n; transposed otherwise): values only
    4mn^2 - 4n^3/3; with U (m x m), V: 4m^2n + 8mn^2 + 9n^3; with the thin U1 (m x n), V: 14mn^2 + 8n^3.

    NB: the count is the textbook one whatever the driver (gesdd's divide and conquer on the CPU, cuSOLVER's
    gesvdj Jacobi on CUDA do a comparable amount of work, not the same)."""
    m, n = max(m, n), min(m, n)
    if not compute_uv:
        return Fraction(4 * m * n * n) - Fraction(4 * n**3, 3)
    if full_matrices:
        return Fraction(4 * m * m * n + 8 * m * n * n + 9 * n**3)
    return Fraction(14 * m * n * n + 8 * n**3)


def eigh_flops(n: int, vectors: bool) -> Fraction:
    """The symmetric (Hermitian) eigendecomposition (G&VL section 8.3): eigenvalues only 4n^3/3 (the tridiagonal
    reduction; the tridiagonal QR is O(n^2)), with eigenvectors 9n^3."""
    return Fraction(9 * n**3) if vectors else Fraction(4 * n**3, 3)


def _cost(call: Call, flops: Fraction | int, t: Any, math_: Math, note: str) -> OpCost:
    scale = 4 if t.is_complex() else 1
    total = round(flops * scale)
    if scale != 1:
        note += "; complex: 4x the real count"
    return OpCost(int(total), io_bytes(call), _dtype(t), math_, f"{note}; inputs read once, outputs written once")


_BLAS3 = "blocked BLAS-3 (LAPACK / cuSOLVER)"


@register("linalg", "linalg_cholesky_ex")
def _cholesky(call: Call) -> OpCost:
    # NB: Cholesky (potrf) n^3/3 per matrix (G&VL 4.2); LAPACK / cuSOLVER run it blocked (syrk, gemm, trsm on the
    # panels): math tensor. L and info written.
    a = call.tensor("self")
    n = int(a.shape[-1])
    return _cost(call, _batch(a) * Fraction(n**3, 3), a, "tensor", f"Cholesky n^3/3 (n={n}), {_BLAS3}")


@register("linalg", "linalg_lu_factor_ex")
def _lu_factor(call: Call) -> OpCost:
    # NB: LU with partial pivoting (getrf): lu_flops, 2n^3/3 for a square matrix; blocked BLAS-3 (math tensor).
    # LU, pivots (int32) and info written.
    a = call.tensor("A")
    m, n = int(a.shape[-2]), int(a.shape[-1])
    return _cost(call, _batch(a) * lu_flops(m, n), a, "tensor", f"LU 2mnk - (m+n)k^2 + 2k^3/3 ({m}x{n}), {_BLAS3}")


@register("linalg", "_linalg_det", "_linalg_slogdet")
def _det(call: Call) -> OpCost:
    # NB: det and slogdet factor A by LU (2n^3/3) and take the product (det) or the sum of the logs (slogdet) of
    # U's diagonal: n more operations, lower order, not counted. The result, LU and pivots written.
    a = call.tensor("A")
    n = int(a.shape[-1])
    return _cost(call, _batch(a) * lu_flops(n, n), a, "tensor", f"{call.base}: LU 2n^3/3 (n={n}), {_BLAS3}")


@register("linalg", "linalg_solve_triangular")
def _solve_triangular(call: Call) -> OpCost:
    # NB: a triangular solve (trsm) costs n^2 per right-hand side (G&VL 3.1: n^2/2 multiply-adds); the right-hand
    # sides are the output's numel / n (left=False solves X A = B: the rows of X). Blocked BLAS-3 trsm (math
    # tensor); unitriangular saves the n divides (lower order).
    a, out = call.tensor("self"), call.out0
    n = int(a.shape[-1])
    return _cost(call, n * int(out.numel()), a, "tensor", f"triangular solve n^2 per right-hand side (n={n})")


@register("linalg", "linalg_lu_solve")
def _lu_solve(call: Call) -> OpCost:
    # NB: getrs: two triangular solves (L, then U), 2n^2 per right-hand side (the output's numel / n); the row
    # swaps are not FLOPs. Blocked BLAS-3 trsm (math tensor). LU, pivots and B read, X written.
    lu, out = call.tensor("LU"), call.out0
    n = int(lu.shape[-1])
    return _cost(call, 2 * n * int(out.numel()), lu, "tensor", f"LU solve 2n^2 per right-hand side (n={n})")


@register("linalg", "_linalg_solve_ex")
def _solve(call: Call) -> OpCost:
    # NB: torch's linalg.solve: LU of A (2n^3/3 per matrix of the returned LU, batch broadcast included) then
    # getrs, 2n^2 per right-hand side (the result's numel / n; a vector B is one). Math tensor. result, LU,
    # pivots, info written.
    a, result = call.tensor("A"), call.out0
    lu = call.outputs[1] if len(call.outputs) > 1 else a
    n = int(a.shape[-1])
    flops = _batch(lu) * lu_flops(n, n) + 2 * n * int(result.numel())
    return _cost(call, flops, a, "tensor", f"solve: LU 2n^3/3 + 2n^2 per right-hand side (n={n}), {_BLAS3}")


@register("linalg", "linalg_inv_ex")
def _inv(call: Call) -> OpCost:
    # NB: torch inverts by solving A X = I (linalg_inv_ex_out fills the identity and calls linalg_solve_ex): LU
    # 2n^3/3 + getrs on n right-hand sides 2n^3 = 8n^3/3 per matrix. (LAPACK's getri, which uses the zeros of
    # I, is the textbook 2n^3; torch does not run it.) Math tensor. The inverse and info written.
    a = call.tensor("A")
    n = int(a.shape[-1])
    flops = _batch(a) * (lu_flops(n, n) + 2 * n**3)
    return _cost(call, flops, a, "tensor", f"inverse by LU + solve with I: 8n^3/3 (n={n}), {_BLAS3}")


@register("linalg", "linalg_qr")
def _qr(call: Call) -> OpCost:
    # NB: Householder QR (geqrf, qr_flops: 2mn^2 - 2n^3/3 for m >= n) then Q formed from the k = min(m, n)
    # reflectors (orgqr): mode 'reduced' the m x k Q, 'complete' the m x m Q, 'r' none. Blocked BLAS-3 (math
    # tensor). Q and R written.
    a = call.tensor("A")
    m, n = int(a.shape[-2]), int(a.shape[-1])
    k = min(m, n)
    mode = call.get("mode", "reduced")
    flops = qr_flops(m, n)
    if mode != "r":
        flops += orgqr_flops(m, m if mode == "complete" else k, k)
    return _cost(call, _batch(a) * flops, a, "tensor", f"QR {m}x{n} (geqrf + orgqr, mode {mode}), {_BLAS3}")


_REDUCTION = "vector: half the bi/tridiagonal reduction is BLAS-2, the iterations scalar"


@register("linalg", "_linalg_eigh")
def _eigh(call: Call) -> OpCost:
    # NB: eigh_flops: 9n^3 with eigenvectors (compute_v), 4n^3/3 eigenvalues only. Math vector: half the
    # tridiagonal reduction's FLOPs are BLAS-2 (symv) and the tridiagonal iterations are scalar. Eigenvalues
    # (and eigenvectors) written.
    a = call.tensor("A")
    n = int(a.shape[-1])
    vectors = bool(call.get("compute_v", True))
    note = f"symmetric eigen {'9n^3 with vectors' if vectors else '4n^3/3 values only'} (n={n}); {_REDUCTION}"
    return _cost(call, _batch(a) * eigh_flops(n, vectors), a, "vector", note)


@register("linalg", "_linalg_svd")
def _svd(call: Call) -> OpCost:
    # NB: svd_flops (Golub-Reinsch): values only 4mn^2 - 4n^3/3, U and V 4m^2n + 8mn^2 + 9n^3 (full_matrices),
    # U1 and V 14mn^2 + 8n^3 (reduced), m >= n. Math vector (the bidiagonal reduction is half BLAS-2). U, S, Vh
    # written.
    a = call.tensor("A")
    m, n = int(a.shape[-2]), int(a.shape[-1])
    uv, full = bool(call.get("compute_uv", True)), bool(call.get("full_matrices", False))
    kind = ("full" if full else "reduced") if uv else "values only"
    flops = _batch(a) * svd_flops(m, n, uv, full)
    return _cost(call, flops, a, "vector", f"Golub-Reinsch SVD {m}x{n} ({kind}); {_REDUCTION}")


@register("linalg", "linalg_pinv")
def _pinv(call: Call) -> OpCost:
    # NB: torch's pinv: the reduced SVD A = U S Vh (svd_flops with U1, V), then V diag(1/s) (1 per element of the
    # n x k V) and the n x k by k x m product 2nkm; hermitian=True: eigh with vectors (9n^3), the scaling n^2
    # and the n x n product 2n^3. The tolerance compare on the k singular values is lower order. Math vector
    # (the decomposition dominates). A read, the n x m pseudo-inverse written.
    a = call.tensor("self")
    m, n = int(a.shape[-2]), int(a.shape[-1])
    k = min(m, n)
    if call.get("hermitian", False):
        flops = eigh_flops(n, True) + n * n + 2 * n**3
        note = f"pinv (hermitian): eigh 9n^3 + scaling + 2n^3 product (n={n})"
    else:
        flops = svd_flops(m, n, True, False) + n * k + 2 * n * k * m
        note = f"pinv: reduced SVD {m}x{n} + scaling + 2nkm product"
    return _cost(call, _batch(a) * flops, a, "vector", f"{note}; {_REDUCTION}")


def _lstsq_default(call: Call) -> str:
    # torch's default driver: 'gelsy' on the CPU, 'gels' on CUDA
    return "gels" if call.device_type == "cuda" else "gelsy"


@register("linalg", "linalg_lstsq")
def _lstsq(call: Call) -> OpCost:
    # NB: for A m x n (k = min(m, n)) and r right-hand sides: the QR drivers (gels; gelsy, QR with column
    # pivoting counted as QR, full rank) factor A (qr_flops), apply Q^T to B (ormqr, 4r max(m,n) k - 2r k^2,
    # LAWN 41) and solve the triangle (r k^2): math tensor. The SVD drivers (gelsd, gelss): the reduced SVD
    # (14mn^2 + 8n^3), U^T B (2rmk), the k x r scaling and V times it (2rkn): math vector. Every broadcast batch
    # entry (the solution's batch) is factored. A and B read; solution, residuals, rank, singular values written.
    a, b, solution = call.tensor("self"), call.tensor("b"), call.out0
    m, n = int(a.shape[-2]), int(a.shape[-1])
    k = min(m, n)
    vector_rhs = b.dim() == a.dim() - 1
    r = 1 if vector_rhs else int(b.shape[-1])
    batch = _batch(solution, 1 if vector_rhs else 2)
    driver = call.get("driver") or _lstsq_default(call)
    if driver in ("gelsd", "gelss"):
        flops = svd_flops(m, n, True, False) + 2 * r * m * k + r * k + 2 * r * k * n
        math_: Math = "vector"
    else:
        flops = qr_flops(m, n) + 4 * r * max(m, n) * k - 2 * r * k * k + r * k * k
        math_ = "tensor"
    return _cost(call, batch * flops, a, math_, f"lstsq ({driver}) {m}x{n}, {r} right-hand side(s)")


#: torch's Taylor degrees (Bader, Blanes, Casas 2019) and their norm bounds, by dtype (LinearAlgebra.cpp mexp)
_THETAS = {
    "float": (1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02, 5.800524627688768e-01,
              1.461661507209034e00, 3.010066362817634e00),
    "double": (2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04, 4.991228871115323e-02,
               2.996158913811580e-01, 1.090863719290036e00),
}  # fmt: skip
#: matmuls of each of torch's Taylor approximations T1, T2, T4, T8, T12, T18
MEXP_MATMULS = (0, 1, 2, 3, 4, 5)


def matrix_exp_matmuls(norms: list[float], double: bool) -> int:
    """n x n matmuls torch's matrix_exp runs for matrices of these 1-norms: each matrix's Taylor degree by its
    norm (T1 0, T2 1, T4 2, T8 3, T12 4 matmuls), and for a norm >= theta_12 the degree-18 approximation (5) of
    A / 2^s followed by s squarings, s = max(0, ceil(log2(norm / theta_18)))."""
    thetas = _THETAS["double" if double else "float"]
    total = 0
    for norm in norms:
        for i in range(5):
            low = -1.0 if i == 0 else thetas[i - 1]
            if low < norm <= thetas[i]:
                total += MEXP_MATMULS[i]
        if norm >= thetas[4]:
            total += MEXP_MATMULS[5] + max(0, math.ceil(math.log2(norm / thetas[5])))
    return total


@register("linalg", "linalg_matrix_exp")
def _matrix_exp(call: Call) -> OpCost:
    # NB: torch's scaling and squaring (Bader, Blanes, Casas 2019): matrix_exp_matmuls n x n matmuls (2n^3 each)
    # per matrix, chosen by its 1-norm (read from the values, as torch does); the linear combinations between
    # them (O(n^2)) are not counted. A meta tensor has no values: degree 18 with no squaring is assumed (a lower
    # bound for large norms). n = 1 is exp (1 per element). Math tensor (the matmuls; torch disables TF32 here,
    # so the dtype is the input's). A read, the result written.
    a = call.tensor("self")
    n = int(a.shape[-1])
    if n <= 1:
        return _cost(call, int(a.numel()), a, "vector", "matrix_exp of 1x1 matrices: exp per element")
    batch = _batch(a)
    if a.device.type == "meta":
        matmuls, how = batch * MEXP_MATMULS[5], "degree 18, no squaring assumed (meta: no values)"
    else:
        norms = a.detach().abs().sum(-2).amax(-1).reshape(-1).tolist()
        double = str(a.dtype) in ("torch.float64", "torch.complex128")
        matmuls, how = matrix_exp_matmuls([float(v) for v in norms], double), "degrees chosen by the 1-norms"
    return _cost(call, matmuls * 2 * n**3, a, "tensor", f"matrix_exp: {matmuls} matmuls of 2n^3 (n={n}; {how})")


@register("linalg", "linalg_cross")
def _cross(call: Call) -> OpCost:
    # NB: each of the 3 components is a*b - c*d: 2 multiplies and a subtract, 3 FLOPs per output element; math
    # vector. Inputs read once (broadcast dims once), the output written once.
    out = call.out0
    return OpCost(3 * int(out.numel()), io_bytes(call), _dtype(out), "vector", "cross: 3 FLOPs per output element")


@register("allocation", "_linalg_check_errors")
def _check_errors(call: Call) -> OpCost:
    # NB: an assertion on the info codes of a factorization (raised on the host): no kernel, no FLOPs, no bytes,
    # like _assert_async.
    return OpCost(0, 0, "", "none", "_linalg_check_errors: a host-side check of the info codes")


# ------------------------------------------------------------------------------------------- _trilinear


def _pair(a: list[int], b: list[int], summed: list[int]) -> tuple[int, int, list[int]]:
    """(bmm FLOPs, other FLOPs, result sizes) of torch's sumproduct_pair(a, b, summed, keepdim=True): no summed
    dims: a broadcast multiply (1 per element); else a dim summed that only one side has is summed first (1 add
    per element of that side), then one bmm over the union of the dims (2 per multiply-add)."""
    a, b = list(a), list(b)
    if not summed:
        out = [max(x, y) for x, y in zip(a, b, strict=True)]
        return 0, prod(out), out
    other = 0
    for d in summed:
        if a[d] != 1 and b[d] == 1:
            other += prod(a)
            a[d] = 1
        elif b[d] != 1 and a[d] == 1:
            other += prod(b)
            b[d] = 1
    full = [max(x, y) for x, y in zip(a, b, strict=True)]
    out = [1 if d in summed else size for d, size in enumerate(full)]
    return 2 * prod(full), other, out


def trilinear_flops(
    shapes: list[list[int]], expands: list[list[int]], sumdim: list[int], unroll: int
) -> tuple[int, int]:
    """(bmm FLOPs, other FLOPs) of torch's ``_trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim,
    unroll_dim)`` (ATen Linear.cpp): for each index k of the unrolled dim, sumproduct_pair(i1, i2) over the summed
    dims i3 lacks, then sumproduct_pair(that, i3) over the summed dims i3 has, then the add into the output
    (1 per element)."""
    total = len(shapes[0]) + len(expands[0])
    sizes: list[list[int]] = []
    for shape, expand in zip(shapes, expands, strict=True):
        dims = iter(shape)
        sizes.append([1 if i in expand else int(next(dims)) for i in range(total)])
    unroll_size = 1
    for i in range(len(sizes)):
        if unroll not in expands[i]:
            unroll_size = sizes[i][unroll]
    if any(prod(s) == 0 for s in sizes):
        return 0, 0
    for s in sizes:
        s[unroll] = 1  # one slice per iteration
    sum12 = [i for i in sumdim if i in expands[2] and i != unroll]
    sum23 = [i for i in sumdim if i not in expands[2] and i != unroll]
    mm1, other1, buf = _pair(sizes[0], sizes[1], sum12)
    mm2, other2, buf = _pair(buf, sizes[2], sum23)
    return unroll_size * (mm1 + mm2), unroll_size * (other1 + other2 + prod(buf))


@register("linalg", "_trilinear")
def _trilinear(call: Call) -> OpCost:
    # NB: the contraction torch runs (Linear.cpp _trilinear, unrolled over unroll_dim): two sum-products per
    # slice, each a bmm at 2 FLOPs per multiply-add (a sum-product with nothing to sum is a multiply, 1 per
    # element), plus the add of each slice's result into the output (1 per element). nn.Bilinear (x1 N x I1,
    # W O x I1 x I2, x2 N x I2): O x (2 N I1 I2 + 2 N I2 + N). Math tensor (the bmms); inputs read once, the
    # output written once.
    shapes = [list(call.tensor(name).shape) for name in ("i1", "i2", "i3")]
    expands = [[int(d) for d in call.get(name, [])] for name in ("expand1", "expand2", "expand3")]
    sumdim = [int(d) for d in call.get("sumdim", [])]
    mm, other = trilinear_flops(shapes, expands, sumdim, int(call.get("unroll_dim", 1)))
    return matmul_cost(call, mm + other, f"_trilinear: two sum-products per unrolled slice ({mm} bmm FLOPs)")


describe("linalg", ("linalg_cholesky_ex",), "n³/3", "Cholesky (potrf), blocked BLAS-3: math `tensor`")
describe("linalg", ("linalg_lu_factor_ex",), "2mnk − (m+n)k² + 2k³/3 (2n³/3 square)", "LU, partial pivoting (getrf)")
describe("linalg", ("_linalg_det", "_linalg_slogdet"), "2n³/3", "LU; the diagonal product / log-sum not counted")
describe("linalg", ("linalg_solve_triangular",), "n² per right-hand side", "trsm")
describe("linalg", ("linalg_lu_solve",), "2n² per right-hand side", "two triangular solves (getrs)")
describe("linalg", ("_linalg_solve_ex",), "2n³/3 + 2n² per right-hand side", "LU, then getrs")
describe("linalg", ("linalg_inv_ex",), "8n³/3", "torch solves A X = I: LU 2n³/3 + 2n² on n right-hand sides")
describe("linalg", ("linalg_qr",), "2mn² − 2n³/3 + forming Q (orgqr)", "Householder QR; mode 'r' forms no Q")
describe("linalg", ("_linalg_eigh",), "4n³/3 values only, 9n³ with vectors", "G&VL symmetric QR; math `vector`")
describe("linalg", ("_linalg_svd",), "4mn² − 4n³/3; U1,V 14mn² + 8n³; U,V 4m²n + 8mn² + 9n³",
         "Golub-Reinsch (m ≥ n); math `vector`")  # fmt: skip
describe("linalg", ("linalg_pinv",), "reduced SVD + nk + 2nkm (hermitian: 9n³ + n² + 2n³)", "V·diag(1/s)·Uᴴ")
describe("linalg", ("linalg_lstsq",), "QR + 4r·max(m,n)·k − 2rk² + rk² (gels, gelsy); SVD-based for gelsd, gelss",
         "r right-hand sides")  # fmt: skip
describe("linalg", ("linalg_matrix_exp",), "2n³ per matmul: T1-T18 0-5 matmuls + s squarings",
         "torch's degree by the 1-norm (values read)")  # fmt: skip
describe("linalg", ("linalg_cross",), "3 per output element", "a·b − c·d per component; math `vector`")
describe("linalg", ("_trilinear",), "per unrolled slice: 2 per multiply-add of both sum-products + 1 per add",
         "nn.Bilinear: O·(2N·I1·I2 + 2N·I2 + N)")  # fmt: skip


#: Representative calls for tests/test_formula_examples.py (registry.Example): the ops it cannot build from the schema.
EXAMPLES: dict[str, Example] = {
    "linalg_lu_solve": lambda t: ((*t.linalg.lu_factor(t.randn(4, 4) + 4 * t.eye(4)), t.randn(4, 2)), {}),
    "_linalg_solve_ex": lambda t: ((t.randn(4, 4) + 4 * t.eye(4), t.randn(4, 2)), {}),
    "linalg_solve_triangular": lambda t: ((t.randn(4, 4).triu() + 4 * t.eye(4), t.randn(4, 2)), {"upper": True}),
    "linalg_lstsq": lambda t: ((t.randn(6, 4), t.randn(6, 2)), {}),
    "linalg_cross": lambda t: ((t.randn(5, 3), t.randn(5, 3)), {}),
    "linalg_cholesky_ex": lambda t: ((t.randn(4, 4) @ t.randn(4, 4).T + 4 * t.eye(4),), {}),
    "_linalg_check_errors": lambda t: ((t.zeros((), dtype=t.int32), "linalg.inv"), {"is_matrix": True}),
    "_trilinear": lambda t: ((t.randn(3, 4), t.randn(2, 4, 5), t.randn(3, 5), [1, 3], [0], [1, 2], [2, 3]), {}),
}
