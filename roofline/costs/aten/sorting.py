"""Sorting, selection and searching (sort, topk, kthvalue, median, mode, unique, searchsorted, bucketize, isin)
and the value-dependent scans and counts (cummax, cummin, histc, bincount, nonzero): FLOPs are comparisons (a
compare counts 1, as in the element-wise table); math 'vector'. Bytes: the input read once, the values and the
int64 indices (or inverse/counts) written once.

argsort and msort are CompositeImplicitAutograd: they reach a dispatch mode as ``sort``."""

from __future__ import annotations

import math
from typing import Any

from roofline.costs.aten.call import Call, OpCost, compute_dtype, io_bytes, is_tensor
from roofline.costs.aten.registry import Example, register


def log2_ceil(n: int) -> int:
    """ceil(log2 n) for n >= 1 (0 for n <= 1): the depth of a comparison sort or a binary search."""
    return max(0, int(n) - 1).bit_length()


def _slices(x: Any, dim: Any) -> tuple[int, int]:
    """(slices, slice length) of ``x`` along ``dim`` (a 0-d tensor: one slice of one element)."""
    if x.dim() == 0:
        return 1, 1
    n = int(x.shape[int(dim)]) if dim is not None else int(x.numel())
    numel = int(x.numel())
    return (numel // n if n else 0), n


def _cost(call: Call, flops: int, note: str) -> OpCost:
    return OpCost(int(flops), io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: {note}; input read once, values and indices written once")  # fmt: skip


@register("sort", "sort", "mode")
def _sort(call: Call) -> OpCost:
    # NB: a comparison sort of each slice along dim: n * ceil(log2 n) compares per slice of n (stable or not,
    # ascending or not). mode sorts each slice and scans it for the longest run (counted as the sort).
    x = call.tensor("self")
    slices, n = _slices(x, call.args.get("dim", -1))
    return _cost(call, slices * n * log2_ceil(n), f"{slices} slice(s) of {n}: n*ceil(log2 n) compares each")


@register("sort", "topk")
def _topk(call: Call) -> OpCost:
    # NB: a heap selection: n * max(1, ceil(log2 k)) compares per slice of n (k = 1 is one max scan); sorting
    # the k results is O(k log k) and not counted.
    x = call.tensor("self")
    k = int(call.args["k"])
    slices, n = _slices(x, call.args.get("dim", -1))
    per = n * max(1, log2_ceil(k))
    return _cost(call, slices * per, f"{slices} slice(s) of {n}, k={k}: n*max(1, ceil(log2 k)) compares each")


@register("sort", "kthvalue", "median", "nanmedian")
def _select(call: Call) -> OpCost:
    # NB: a selection (quickselect / nth_element): n compares per slice of n (its expected linear work counted
    # at 1 per element). median() and nanmedian() with no dim select over the whole tensor.
    x = call.tensor("self")
    dim = call.args.get("dim") if "dim" in call.args else None
    slices, n = _slices(x, dim)
    return _cost(call, slices * n, f"selection: {slices} slice(s) of {n}, one compare per element")


@register("sort", "_unique2", "_unique", "unique_dim", "unique_consecutive", "unique_dim_consecutive")
def _unique(call: Call) -> OpCost:
    # NB: unique is a sort (n * ceil(log2 n) compares) and a pass comparing neighbours (n); sorted=False (a hash
    # on the CPU) is counted the same. unique_consecutive is the pass only. With dim, the rows (slices along
    # dim) are the items and each comparison compares a whole row.
    x = call.tensor("self")
    dim = call.args.get("dim")
    consecutive = "consecutive" in call.base
    if dim is None or x.dim() == 0:
        items, width = int(x.numel()), 1
    else:
        items = int(x.shape[int(dim)])
        width = int(x.numel()) // items if items else 0
    compares = items * (1 if consecutive else log2_ceil(items) + 1)
    how = "a neighbour pass" if consecutive else "a sort and a neighbour pass"
    return _cost(call, compares * width, f"{items} item(s) of {width} element(s): {how}")


@register("sort", "searchsorted", "bucketize")
def _searchsorted(call: Call) -> OpCost:
    # NB: a binary search per query: ceil(log2(n + 1)) compares for n boundaries (per row of a batched sorted
    # sequence); the boundaries read once (a search touches only log n of them, but the compulsory bytes count
    # the tensor once).
    if call.base == "searchsorted":
        boundaries, queries = call.tensor("sorted_sequence"), call.args.get("self")
    else:
        boundaries, queries = call.tensor("boundaries"), call.args.get("self")
    n = int(boundaries.shape[-1]) if boundaries.dim() else 1
    count = int(queries.numel()) if is_tensor(queries) else 1
    per = log2_ceil(n + 1)
    return _cost(call, count * per, f"{count} quer(ies), binary search over {n}: {per} compares each")


@register("sort", "isin")
def _isin(call: Call) -> OpCost:
    # NB: torch's two algorithms: a brute-force compare of every element with every test element when the test
    # set is small (numel < 10 * n^0.145), else a sort of both (n + m) * ceil(log2(n + m)) and a neighbour pass.
    elements, tests = call.args.get("elements"), call.args.get("test_elements", call.args.get("test_element"))
    n = int(elements.numel()) if is_tensor(elements) else 1
    m = int(tests.numel()) if is_tensor(tests) else 1
    if m < int(10.0 * math.pow(float(n), 0.145)):
        return _cost(call, n * m, f"brute force: {n} x {m} compares")
    total = n + m
    return _cost(call, total * (log2_ceil(total) + 1), f"sort-based: {total} items sorted and scanned")


@register("sort", "cummax", "cummin", "_cummax_helper", "_cummin_helper")
def _cumulative_extreme(call: Call) -> OpCost:
    # NB: a scan: one compare per element; values and int64 indices written in full.
    x = call.tensor("self")
    return _cost(call, int(x.numel()), "scan: one compare per element")


@register("sort", "nonzero", "nonzero_static", "argwhere")
def _nonzero(call: Call) -> OpCost:
    # NB: one compare per element (and a prefix count, not counted); the (nnz, dim) int64 indices written.
    x = call.tensor("self")
    return _cost(call, int(x.numel()), "one compare per element")


@register("sort", "histc")
def _histc(call: Call) -> OpCost:
    # NB: per element: range check 2, bin = (x - min) * bins / (max - min) 3, increment 1 = 6; with min == max
    # (the default 0, 0) the range is found first: +2 (a min and a max compare).
    x = call.tensor("self")
    per = 6 + (2 if call.args.get("min", 0) == call.args.get("max", 0) else 0)
    return _cost(call, per * int(x.numel()), f"{per} per element: range check, bin index, increment")


@register("sort", "bincount")
def _bincount(call: Call) -> OpCost:
    # NB: one increment per element (an add of the weight with weights); the counts written once.
    x = call.tensor("self")
    return _cost(call, int(x.numel()), "one increment per element")


#: Representative calls for tests/test_formula_examples.py (registry.Example): the ops it cannot build from the schema.
EXAMPLES: dict[str, Example] = {
    "bincount": lambda t: ((t.tensor([0, 1, 1, 3, 2, 1]),), {"weights": t.rand(6), "minlength": 5}),  # 1-D, >= 0
}
