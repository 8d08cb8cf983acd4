"""Reductions and scans: FLOPs per input element; the input read once, the (small) output written once."""

from __future__ import annotations

from roofline.costs.aten.call import Call, OpCost, compute_dtype, io_bytes
from roofline.costs.aten.registry import Formula, describe, register

# FLOPs per input element. NB: the per-output work (a mean's divide, a norm's root) is O(outputs) and not
# counted; a broadcast input counts its logical elements for FLOPs but its unique elements for bytes.
REDUCTIONS: dict[str, tuple[int, str]] = {
    "sum": (1, "one add per element"),
    "nansum": (1, "one add per element"),
    "mean": (1, "one add per element; the divide is per output"),
    "nanmean": (1, "one add per element; the divide is per output"),
    "prod": (1, "one multiply per element"),
    "amax": (1, "one compare per element"),
    "amin": (1, "one compare per element"),
    "max": (1, "one compare per element"),
    "min": (1, "one compare per element"),
    "aminmax": (2, "two compares per element"),
    "argmax": (1, "one compare per element"),
    "argmin": (1, "one compare per element"),
    "any": (1, "one logical op per element"),
    "all": (1, "one logical op per element"),
    "count_nonzero": (1, "one compare per element"),
    "cumsum": (1, "one add per element (a scan writes a full-size output)"),
    "cumprod": (1, "one multiply per element (a scan writes a full-size output)"),
    "logcumsumexp": (3, "max-shift, exp, add per element"),
    "var": (4, "mean 1, centre 1, square 1, sum 1 per element"),
    "std": (4, "mean 1, centre 1, square 1, sum 1 per element; the root is per output"),
    "var_mean": (4, "mean 1, centre 1, square 1, sum 1 per element"),
    "std_mean": (4, "mean 1, centre 1, square 1, sum 1 per element"),
    "linalg_vector_norm": (2, "abs(x)^p 1, sum 1 per element; the root is per output"),
    "norm": (2, "abs(x)^p 1, sum 1 per element; the root is per output"),
    "logsumexp": (4, "max 1, subtract 1, exp 1, sum 1 per element; the log is per output"),
}


def _reduction_formula(name: str) -> Formula:
    per_element, note = REDUCTIONS[name]

    def formula(call: Call) -> OpCost:
        src = call.tensor("self", "input", "x")
        numel = int(src.numel()) if src is not None else 0
        return OpCost(per_element * numel, io_bytes(call), compute_dtype(call), "vector",
                      f"{call.base}: {per_element} FLOP(s) per input element ({note}); input read once, "
                      "the small output written once")  # fmt: skip

    return formula


for _name, (_per, _note) in REDUCTIONS.items():
    register("reduction", _name)(_reduction_formula(_name))
    describe("reduction", (_name,), str(_per), _note)
