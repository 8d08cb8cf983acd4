"""Pairwise distances: cdist (``_cdist_forward``, ``_euclidean_dist``, ``_cdist_backward``) and pdist
(``_pdist_forward``, ``_pdist_backward``). Direct kernels cost per (pair, dim); the Euclidean matmul path as the
matmul plus its norms."""

from __future__ import annotations

import math
from typing import Any

from roofline.costs.aten.call import Call, OpCost, compute_dtype, io_bytes
from roofline.costs.aten.matmul import matmul_cost
from roofline.costs.aten.registry import register


def direct_flops(p: float) -> tuple[int, int]:
    """(FLOPs per pair and dim, FLOPs per pair) of the direct distance kernel for the p-norm.

    NB: per dim: subtract, then p=2 square + add (3), p=1 abs + add (3), p=inf abs + max (3), p=0 compare
    (!= 0) + add (3), other p abs + pow (3, exp(p log x)) + add (6). Per pair: the root, sqrt for p=2 (1),
    pow(1/p) for other p (3), nothing for p in (0, 1, inf)."""
    if p == 2:
        return 3, 1
    if p in (0, 1) or math.isinf(p):
        return 3, 0
    return 6, 3


def backward_flops(p: float) -> tuple[int, int]:
    """(FLOPs per pair and dim, FLOPs per pair) of the direct kernels' backward (gradient for one side).

    NB: per dim the difference recomputed, then: p=2 multiply by grad/dist and add (3; per pair the grad/dist
    divide 1); p=1 sign, multiply by grad, add (4); p=inf a compare with the max, sign, multiply,
    add (5); other p diff·|diff|^(p-2) (abs 1, pow 3, multiply 1) times grad/dist^(p-1) (1), add (8; per pair
    the pow 3 and a divide 1). p=0 has a zero gradient (0)."""
    if p == 0:
        return 0, 0
    if p == 2:
        return 3, 1
    if p == 1:
        return 4, 0
    if math.isinf(p):
        return 5, 0
    return 8, 4


def euclidean_mm_flops(n1: int, n2: int, pairs: int, m: int) -> int:
    """FLOPs of torch's ``_euclidean_dist`` (the matmul path of cdist p=2) for x1, x2 of ``n1``, ``n2`` elements,
    ``pairs`` distances and ``m`` dims: squared norms of both sides (square + add per element), x1 * -2 (1 per
    element), the (r1 x (m+2)) @ ((m+2) x r2) matmul of the padded operands (2 per multiply-add, per pair),
    clamp_min and sqrt per pair."""
    return 2 * (n1 + n2) + n1 + 2 * pairs * (m + 2) + 2 * pairs


def _uses_mm(p: float, mode: int, r1: int, r2: int) -> bool:
    # NB: as torch's cdist_impl: p == 2 with compute_mode 1 (use_mm_for_euclid_dist), or mode 0/None
    # (use_mm_for_euclid_dist_if_necessary) when either side has more than 25 rows; mode 2 never.
    return p == 2 and (mode == 1 or (mode == 0 and (r1 > 25 or r2 > 25)))


def _geometry(call: Call, result: Any) -> tuple[int, int, int, int]:
    """(pairs, r1, r2, m) of a cdist call: ``result`` is the (batch..., r1, r2) distances or their gradient
    (the batch dims broadcast, so the pairs are counted on it, not on x1)."""
    x1, x2 = call.tensor("x1"), call.tensor("x2")
    r1, m, r2 = int(x1.shape[-2]), int(x1.shape[-1]), int(x2.shape[-2])
    return int(result.numel()), r1, r2, m


@register("distance", "_euclidean_dist")
def _euclidean_dist(call: Call) -> OpCost:
    # NB: euclidean_mm_flops (norms + padded matmul + clamp + sqrt); math tensor (the matmul dominates); x1 and
    # x2 read once, the distances written once (the padded operands are intermediates, not counted).
    pairs, _, _, m = _geometry(call, call.out0)
    n1, n2 = int(call.tensor("x1").numel()), int(call.tensor("x2").numel())
    return matmul_cost(call, euclidean_mm_flops(n1, n2, pairs, m), "cdist p=2 matmul path: norms + "
                       "x1 @ x2^T padded to m+2 + sqrt per pair")  # fmt: skip


@register("distance", "_cdist_forward")
def _cdist_forward(call: Call) -> OpCost:
    # NB: the matmul path (torch's rule, _uses_mm) costs as _euclidean_dist; the direct kernel costs
    # direct_flops per (pair, dim) and per pair over the batch x r1 x r2 pairs, math vector. x1 and x2 read
    # once, the distances written once.
    pairs, r1, r2, m = _geometry(call, call.out0)
    p = float(call.get("p", 2.0))
    mode = int(call.get("compute_mode", 0))
    if _uses_mm(p, mode, r1, r2):
        return _euclidean_dist(call)
    per_dim, per_pair = direct_flops(p)
    return OpCost(pairs * (per_dim * m + per_pair), io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base} p={p:g}: {per_dim} FLOPs per pair and dim + {per_pair} per pair (direct)")  # fmt: skip


@register("distance", "_cdist_backward")
def _cdist_backward(call: Call) -> OpCost:
    # NB: the gradient of x1 over all batch x r1 x r2 pairs (grad's elements): backward_flops per (pair, dim)
    # and per pair; grad, x1, x2 and the saved distances read once, grad_x1 written once.
    pairs, _, _, m = _geometry(call, call.tensor("grad"))
    p = float(call.get("p", 2.0))
    per_dim, per_pair = backward_flops(p)
    return OpCost(pairs * (per_dim * m + per_pair), io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base} p={p:g}: {per_dim} FLOPs per pair and dim + {per_pair} per pair")  # fmt: skip


def _pairs(call: Call) -> tuple[int, int]:
    x = call.tensor("self")
    n, m = int(x.shape[0]), int(x.shape[1])
    return n * (n - 1) // 2, m


@register("distance", "_pdist_forward")
def _pdist_forward(call: Call) -> OpCost:
    # NB: n(n-1)/2 pairs of rows, direct_flops per (pair, dim) and per pair (pdist has no matmul path); self
    # read once, the condensed distances written once.
    pairs, m = _pairs(call)
    p = float(call.get("p", 2.0))
    per_dim, per_pair = direct_flops(p)
    return OpCost(pairs * (per_dim * m + per_pair), io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base} p={p:g}: {pairs} pairs, {per_dim} per pair and dim + {per_pair} per pair")  # fmt: skip


@register("distance", "_pdist_backward")
def _pdist_backward(call: Call) -> OpCost:
    # NB: backward_flops per (pair, dim) and per pair, + 1 per (pair, dim): each pair's gradient goes to both of
    # its rows (one more add); grad, self and the saved distances read once, grad_self written once.
    pairs, m = _pairs(call)
    p = float(call.get("p", 2.0))
    per_dim, per_pair = backward_flops(p)
    if per_dim:
        per_dim += 1
    return OpCost(pairs * (per_dim * m + per_pair), io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base} p={p:g}: {per_dim} FLOPs per pair and dim + {per_pair} per pair")  # fmt: skip
