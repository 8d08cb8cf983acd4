"""Element-wise ops: a table of FLOPs per output element (unary, binary, activations and their backwards, losses)
and the ops whose count depends on their arguments (add's alpha, gelu's approximation, pow's exponent, clamp's
bounds). Inputs read once, outputs written once; an in-place twin reads and writes self."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from roofline.costs.aten.call import Call, OpCost, compute_dtype, io_bytes, is_tensor, tensor_bytes
from roofline.costs.aten.movement import OVERWRITES
from roofline.costs.aten.registry import Example, Formula, describe, register
from roofline.costs.elementwise import FLOPS_PER_ELEMENT as ELEMENTWISE

# FLOPs per output element, and the assumption. Where roofline.costs.elementwise has the op, its number is used
# (a transcendental counts 1, as there).
_GELU_BACKWARD = 11  # NB: erf form: dy*(cdf + x*pdf): cdf 4 (x/sqrt2, erf, +1, *0.5), pdf 4 (x^2, *-0.5, exp,
# *1/sqrt(2pi)), x*pdf 1, + 1, *dy 1
_GELU_TANH_BACKWARD = 18  # NB: tanh form: inner 5 (x^2, x^3, *k1, +x, *k0), tanh 1, 0.5*(1+t) 2, 1-t^2 2,
# k0*(1+3*k1*x^2) 3, 0.5*x*sech2*dinner 3, + 1, *dy 1

ELEMENTWISE_OPS: dict[str, tuple[int, str]] = {
    "relu": (ELEMENTWISE["relu"], "max(x, 0): one compare/select"),
    "silu": (ELEMENTWISE["silu"], "x*sigmoid(x): neg, exp, +1, div, *x"),
    "sigmoid": (ELEMENTWISE["sigmoid"], "1/(1+exp(-x)): neg, exp, +1, div"),
    "tanh": (ELEMENTWISE["tanh"], "one transcendental"),
    "exp": (ELEMENTWISE["exp"], "one transcendental"),
    "exp2": (1, "one transcendental"),
    "expm1": (1, "one transcendental"),
    "log": (ELEMENTWISE["log"], "one transcendental"),
    "log2": (1, "one transcendental"),
    "log10": (1, "one transcendental"),
    "log1p": (1, "one transcendental"),
    "sqrt": (ELEMENTWISE["sqrt"], "one transcendental"),
    "rsqrt": (ELEMENTWISE["rsqrt"], "one transcendental"),
    "reciprocal": (1, "one divide"),
    "sin": (1, "one transcendental"),
    "cos": (1, "one transcendental"),
    "tan": (1, "one transcendental"),
    "erf": (1, "one transcendental"),
    "erfc": (1, "one transcendental"),
    "erfinv": (1, "one transcendental"),
    "neg": (ELEMENTWISE["neg"], "one sign flip"),
    "abs": (ELEMENTWISE["abs"], "one sign clear"),
    "sign": (1, "one compare"),
    "sgn": (1, "one compare"),
    "floor": (1, "one rounding"),
    "ceil": (1, "one rounding"),
    "round": (1, "one rounding"),
    "trunc": (1, "one rounding"),
    "frac": (1, "x - trunc(x) counted as one"),
    "mul": (ELEMENTWISE["mul"], "x*y (a scalar y is free)"),
    "div": (ELEMENTWISE["div"], "x/y (a divide counts 1; rounding_mode not counted)"),
    "remainder": (1, "one modulo"),
    "fmod": (1, "one modulo"),
    "maximum": (ELEMENTWISE["maximum"], "max(x, y)"),
    "minimum": (ELEMENTWISE["maximum"], "min(x, y), as maximum"),
    "fmax": (1, "max(x, y)"),
    "fmin": (1, "min(x, y)"),
    "atan2": (1, "one transcendental"),
    "copysign": (1, "one sign copy"),
    "eq": (1, "one compare"),
    "ne": (1, "one compare"),
    "lt": (1, "one compare"),
    "le": (1, "one compare"),
    "gt": (1, "one compare"),
    "ge": (1, "one compare"),
    "isnan": (1, "one compare"),
    "isinf": (1, "one compare"),
    "isfinite": (1, "one compare"),
    "logical_not": (1, "one logical op"),
    "logical_and": (1, "one logical op"),
    "logical_or": (1, "one logical op"),
    "logical_xor": (1, "one logical op"),
    "bitwise_not": (1, "one bitwise op"),
    "bitwise_and": (1, "one bitwise op"),
    "bitwise_or": (1, "one bitwise op"),
    "bitwise_xor": (1, "one bitwise op"),
    "where": (1, "one select"),
    "masked_fill": (1, "one select"),
    "clamp_min": (1, "one compare/select"),
    "clamp_max": (1, "one compare/select"),
    "threshold": (1, "one compare/select"),
    "threshold_backward": (1, "dy where x > threshold: one compare/select"),
    "hardtanh": (2, "clamp to [min, max]: two compares"),
    "hardtanh_backward": (2, "dy where min < x < max: two compares"),
    "leaky_relu": (2, "compare, scale by the slope"),
    "leaky_relu_backward": (2, "compare, scale by the slope"),
    "_prelu_kernel": (2, "compare, scale by the weight"),
    "elu": (4, "compare, exp, -1, *alpha"),
    "elu_backward": (3, "compare, exp/recompute from y, *dy"),
    "softplus": (3, "log(1 + exp(x)): exp, +1, log (beta scaling not counted)"),
    "softplus_backward": (5, "dy*sigmoid(beta*x): sigmoid 4, *dy 1"),
    "mish": (5, "x*tanh(softplus(x)): softplus 3, tanh 1, *x 1"),
    "hardswish": (5, "x*min(max(x+3, 0), 6)/6: add, max, min, mul, div"),
    "hardswish_backward": (4, "two compares, a linear piece, *dy"),
    "hardsigmoid": (4, "min(max(x+3, 0), 6)/6: add, max, min, div"),
    "hardsigmoid_backward": (3, "two compares, *dy/6"),
    "log_sigmoid_forward": (4, "-softplus(-x): neg, exp, +1, log"),
    "log_sigmoid_backward": (4, "dy*(1 - sigmoid(x)) from the saved buffer: 4"),
    "glu": (5, "a*sigmoid(b) per output element: sigmoid 4, mul 1"),
    "silu_backward": (9, "dy*s*(1 + x*(1-s)): sigmoid 4, 1-s, x*, +1, s*, *dy"),
    "sigmoid_backward": (3, "dy*y*(1-y): 1-y, *y, *dy"),
    "tanh_backward": (3, "dy*(1-y^2): y^2, 1-, *dy"),
    "native_dropout_backward": (ELEMENTWISE["dropout"], "dy*mask*scale: two multiplies"),
    "native_dropout": (ELEMENTWISE["dropout"], "compare a random number with p, scale by 1/(1-p); random "
                       "generation not counted; the bool keep-mask is written (1 byte per element)"),
    "bernoulli": (1, "compare a random number with p; random generation not counted"),
    "bernoulli_": (1, "compare a random number with p; random generation not counted; written, not read"),
    "lerp": (3, "x + w*(y - x): sub, mul, add"),
    "addcmul": (3, "x + v*a*b: two multiplies, one add"),
    "addcdiv": (3, "x + v*a/b: multiply, divide, add"),
    "mse_loss": (3, "(x - y)^2: sub, square, sum (the mean's divide is per output)"),
    "mse_loss_backward": (3, "2*(x - y)*dy/n: sub, two multiplies"),
    "nan_to_num": (2, "a compare and a select"),
    "softshrink": (3, "x - lambda, x + lambda or 0: two compares and an add"),
    "softshrink_backward": (2, "dy where |x| > lambda: abs and a compare/select"),
    "hardshrink": (2, "x where |x| > lambda: abs and a compare/select"),
    "hardshrink_backward": (2, "dy where |x| > lambda: abs and a compare/select"),
    "celu": (5, "max(0, x) + min(0, alpha*(exp(x/alpha) - 1)): divide, exp, -1, *alpha, compare/select"),
    "rrelu_with_noise": (2, "compare, scale by the (random) slope; random generation not counted"),
    "rrelu_with_noise_backward": (2, "compare, scale by the saved noise"),
    "_prelu_kernel_backward": (3, "dx = dy*(x > 0 ? 1 : w): select, multiply; dw = dy*x where x <= 0: multiply"),
    "glu_backward": (9, "da = dy*sigmoid(b) (sigmoid 4, *1), db = dy*a*s*(1 - s) (4 more)"),
}  # fmt: skip


def _numel_out(call: Call) -> int:
    out = call.out0
    if out is not None:
        return int(out.numel())
    return max((int(t.numel()) for t in call.inputs()), default=0)


def _elementwise_cost(call: Call, per_element: int, note: str) -> OpCost:
    skip = ("self",) if call.base in OVERWRITES else ()
    flops = per_element * _numel_out(call)
    return OpCost(flops, io_bytes(call, skip=skip), compute_dtype(call), "vector",
                  f"{call.base}: {per_element} FLOP(s) per element ({note})")  # fmt: skip


def _table_formula(name: str) -> Formula:
    per_element, note = ELEMENTWISE_OPS[name]

    def formula(call: Call) -> OpCost:
        return _elementwise_cost(call, per_element, note)

    return formula


# Element-wise ops that have no in-place twin in aten.
_NO_INPLACE = frozenset({"native_dropout", "maximum", "minimum", "fmax", "fmin", "isnan", "isinf", "isfinite",
                         "where", "_prelu_kernel", "softplus", "glu", "softshrink", "hardshrink",
                         "rrelu_with_noise"})  # fmt: skip


def _with_inplace(names: Iterable[str]) -> list[str]:
    """Each name and its in-place twin ('relu', 'relu_'): an in-place op reads and writes self (io_bytes)."""
    names = list(names)
    out: list[str] = []
    for name in names:
        out.append(name)
        twin = f"{name}_"
        if not name.endswith(("_", "_backward", "_forward", "_loss")) and name not in _NO_INPLACE and twin not in names:
            out.append(twin)
    return out


for _name in _with_inplace(ELEMENTWISE_OPS):
    register("elementwise", _name)(_table_formula(_name if _name in ELEMENTWISE_OPS else _name[:-1]))
_TWINS = set(_with_inplace(ELEMENTWISE_OPS))


def _alpha(call: Call) -> Any:
    return call.args.get("alpha", 1)


@register("elementwise", "add", "add_", "sub", "sub_", "rsub", "subtract", "subtract_")
def _add(call: Call) -> OpCost:
    # NB: x + alpha*y: 1 FLOP per element (roofline.costs.elementwise 'add'); an alpha other than 1 adds a
    # multiply (2).
    alpha = _alpha(call)
    per = ELEMENTWISE["add"] if alpha in (1, None) else 2
    sign = "+" if call.base.startswith("add") else "-"
    return _elementwise_cost(call, per, f"x {sign} y" if per == 1 else f"x {sign} alpha*y")


describe("elementwise", ("add", "add_", "sub", "sub_", "rsub", "subtract", "subtract_"), "1 (2 with alpha ≠ 1)",
         "x ± y; an alpha other than 1 adds a multiply")  # fmt: skip


@register("elementwise", "gelu", "gelu_")
def _gelu(call: Call) -> OpCost:
    # NB: erf form (torch's default) 5 FLOPs, tanh approximation 9 (roofline.costs.elementwise).
    tanh = call.args.get("approximate") == "tanh"
    per = ELEMENTWISE["gelu_tanh"] if tanh else ELEMENTWISE["gelu"]
    return _elementwise_cost(call, per, "tanh approximation" if tanh else "erf form")


describe(
    "elementwise", ("gelu", "gelu_"), "5 erf form, 9 tanh form", "as `roofline.costs.elementwise` gelu / gelu_tanh"
)


@register("elementwise", "gelu_backward")
def _gelu_backward(call: Call) -> OpCost:
    tanh = call.args.get("approximate") == "tanh"
    per = _GELU_TANH_BACKWARD if tanh else _GELU_BACKWARD
    return _elementwise_cost(call, per, "tanh form" if tanh else "erf form: cdf 4, pdf 4, x*pdf, +, *dy")


describe("elementwise", ("gelu_backward",), "11 erf form, 18 tanh form",
         "erf: dy·(cdf + x·pdf): cdf 4, pdf 4, x·pdf, +, ·dy")  # fmt: skip


@register("elementwise", "pow", "pow_", "float_power")
def _pow(call: Call) -> OpCost:
    # NB: x**2 counts as a square (1, roofline.costs.elementwise 'square'), x**0.5 as a sqrt (1), x**1 and
    # x**0 as 1; any other tensor**scalar or tensor**tensor as exp(y*log(x)) (3); scalar**tensor as
    # exp(y*log(c)) with log(c) free (2).
    exponent = call.args.get("exponent")
    if is_tensor(call.args.get("self")) and not is_tensor(exponent):
        per = ELEMENTWISE["square"] if exponent in (2, 2.0, 0.5, 1, 1.0, 0, 0.0, -1, -1.0) else 3
    elif not is_tensor(call.args.get("self")):
        per = 2
    else:
        per = 3
    return _elementwise_cost(call, per, f"pow with exponent {exponent if not is_tensor(exponent) else 'tensor'}")


describe("elementwise", ("pow", "pow_", "float_power"),
         "1 for exponent 2, 0.5, 1, 0 or -1; 3 otherwise; 2 for a scalar base with a tensor exponent",
         "a square or sqrt counts 1; exp(y·log x) 3")  # fmt: skip


@register("elementwise", "clamp", "clamp_", "clip", "clip_")
def _clamp(call: Call) -> OpCost:
    # NB: one compare/select per bound given.
    bounds = sum(call.args.get(name) is not None for name in ("min", "max"))
    return _elementwise_cost(call, max(bounds, 1), f"{bounds} bound(s): one compare/select each")


#: Representative calls for tests/test_formula_examples.py (registry.Example): the ops it cannot build from the schema.
EXAMPLES: dict[str, Example] = {
    name: (lambda t: ((t.randn(4, 4), -0.5, 0.5), {})) for name in ("clamp", "clamp_", "clip", "clip_")
}

describe("elementwise", ("clamp", "clamp_", "clip", "clip_"), "1 per bound given", "one compare/select per bound")
for _name, (_per, _note) in ELEMENTWISE_OPS.items():
    # a row per table entry, with its in-place twin where it has one (bernoulli_ is an entry of its own)
    _twin = f"{_name}_"
    _row = [_name, _twin] if _twin in _TWINS and _twin not in ELEMENTWISE_OPS else [_name]
    describe("elementwise", _row, str(_per), _note.replace("*", "·"))


@register("elementwise", "logit", "logit_")
def _logit(call: Call) -> OpCost:
    # NB: log(x / (1 - x)): 1 - x, divide, log (3); with eps, x is first clamped to [eps, 1 - eps] (2 compares).
    eps = call.args.get("eps") is not None
    return _elementwise_cost(call, 5 if eps else 3, "clamp 2, 1-x, div, log" if eps else "1-x, div, log")


@register("elementwise", "logit_backward")
def _logit_backward(call: Call) -> OpCost:
    # NB: dy / (x * (1 - x)): 1 - x, multiply, divide (3); with eps, 0 outside [eps, 1 - eps] (2 compares).
    eps = call.args.get("eps") is not None
    return _elementwise_cost(call, 5 if eps else 3, "dy/(x(1-x)) + range check" if eps else "dy/(x(1-x))")


@register("elementwise", "_conj_physical", "conj_physical_")
def _conj_physical(call: Call) -> OpCost:
    # NB: the conjugate written out: one sign flip (the imaginary part) per complex element; a real tensor is a
    # copy (0). Read once, written once (in place: read and written).
    x = call.tensor("self")
    per = 1 if x.is_complex() else 0
    return _elementwise_cost(call, per, "negate the imaginary part" if per else "a real tensor: a copy")


@register("elementwise", "rrelu_with_noise_")
def _rrelu_with_noise_inplace(call: Call) -> OpCost:
    # NB: rrelu_with_noise in place: 2 per element (compare, scale by the slope; random generation not counted);
    # self read and written; in training the noise (the slopes) is written, not read; in eval it is untouched.
    x, noise = call.tensor("self"), call.tensor("noise")
    nbytes = 2 * tensor_bytes(x) + (tensor_bytes(noise) if call.args.get("training") else 0)
    return OpCost(2 * int(x.numel()), nbytes, compute_dtype(call), "vector",
                  "rrelu_with_noise_: 2 FLOP(s) per element (compare, scale by the slope)")  # fmt: skip


describe("elementwise", ("logit", "logit_"), "3 (5 with eps)", "1-x, div, log; eps clamps first (2 compares)")
describe("elementwise", ("logit_backward",), "3 (5 with eps)", "dy/(x(1-x)); eps: a range check (2 compares)")
describe("elementwise", ("_conj_physical", "conj_physical_"), "1 complex, 0 real", "negate the imaginary part")
describe("elementwise", ("rrelu_with_noise_",), "2", "compare, scale by the (random) slope; noise written in training")
EXAMPLES["_conj_physical"] = lambda t: ((t.randn(4, 4, dtype=t.complex64),), {})
EXAMPLES["conj_physical_"] = lambda t: ((t.randn(4, 4, dtype=t.complex64),), {})
EXAMPLES["rrelu_with_noise_"] = lambda t: ((t.randn(4, 4), t.zeros(4, 4)), {"training": True})
