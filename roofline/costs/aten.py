"""The analytic cost of one aten op call: FLOPs, compulsory bytes, the dtype and math unit its roof is chosen by.

A registry in the spirit of ``torch.utils.flop_counter``: a dict from aten ops ('aten::mm', keyed by the name that
``OpRecord.op`` and the profiler use, so that importing this module does not import torch) to shape-only formulas.
Each formula gets the call (the op, its arguments bound to their schema names, its outputs) and returns an
:class:`OpCost`. Every assumption is an ``NB:`` comment here and a line in docs/op-costs.md.

Conventions (as roofline/costs): 2 FLOPs per multiply-add; a transcendental counts 1 FLOP; compulsory bytes =
each tensor input read once + each output written once, where

- a view or alias (view, permute, transpose, expand, slice, select, split, detach, ...) moves 0 bytes and does
  0 FLOPs (math 'none');
- a broadcast input (a stride-0 dim) counts its unique elements once;
- the same tensor passed twice (``x * x``) is read once;
- an in-place op (``add_``) reads and writes the tensor it mutates; an op that overwrites without reading
  (``fill_``, ``zero_``, ``copy_``'s destination, ``uniform_``) only writes it; an ``out=`` tensor is written,
  not read;
- a gather (embedding, index_select, gather, advanced indexing) reads the rows it touches (indices x row size,
  repeats counted), not the whole table; a scatter writes (and, when it accumulates, reads) the rows it touches;
- a reduction reads its input and writes its small output.

An op with no formula gets ``flops=None, bytes=None`` and the note :data:`NO_FORMULA`: it is listed as uncounted
(:func:`uncovered`), never counted as zero. Matmul-family FLOPs reuse ``torch.utils.flop_counter.flop_registry``
where it has a formula (mm, addmm, bmm, baddbmm, _scaled_mm, the convolutions); attention is ours (causal
masking, GQA), as are element-wise ops, norms, softmax, reductions, copies and index ops.
"""

from __future__ import annotations

import itertools
import math as _math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from roofline.costs.attention import SOFTMAX_FLOPS_PER_ELEMENT, score_pairs
from roofline.costs.elementwise import FLOPS_PER_ELEMENT as ELEMENTWISE
from roofline.costs.norms import FLOPS_PER_ELEMENT as NORMS

if TYPE_CHECKING:
    from roofline.report.records import OpRecord

Math = Literal["tensor", "vector", "none"]

#: The note of an op we have no formula for (its flops and bytes are None).
NO_FORMULA = "no cost formula"


class OpCost(NamedTuple):
    """The cost of one op call: what an :class:`~roofline.report.records.OpRecord` carries besides shapes."""

    flops: int | None  # None: no formula
    bytes: int | None  # compulsory bytes; None: no formula
    dtype: str  # the dtype its compute roof is chosen by ('tf32' for fp32 matmuls with TF32 on, '' unnamed)
    math: Math  # 'tensor' (matmul units), 'vector' (element-wise units), 'none' (no data moved, no math)
    note: str = ""


# ------------------------------------------------------------------------------------------------ dtypes

_DTYPE_NAMES = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int8": "int8"}


def dtype_name(dtype: Any) -> str:
    """Canonical roofline dtype name (roofline.dtypes) of a torch dtype, or '' for one we do not name
    (int64 indices, bool masks, complex)."""
    name = str(dtype).removeprefix("torch.")
    if name in _DTYPE_NAMES:
        return _DTYPE_NAMES[name]
    if name.startswith("float8"):
        return "fp8"  # NB: e4m3 / e5m2 (and the fnuz variants) share the fp8 roof
    if name.startswith("float4"):
        return "fp4"
    return ""


# ---------------------------------------------------------------------------------------- tensor helpers


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def unique_numel(t: Any) -> int:
    """Elements a kernel must touch to read ``t`` once: a broadcast (stride-0) dim counts once.

    NB: this is the numel of the un-expanded view (sizes with the stride-0 dims dropped). Other overlapping
    strides (a hand-made as_strided) are not detected: their elements count as many times as they appear."""
    numel = t.numel()
    if numel == 0:
        return 0
    try:
        strides = t.stride()
    except (RuntimeError, NotImplementedError):  # sparse / nested layouts have no strides
        return numel
    n = 1
    for size, stride in zip(t.shape, strides, strict=False):
        if stride != 0:
            n *= size
    return n


def tensor_bytes(t: Any) -> int:
    """Bytes to read or write ``t`` once (broadcast dims once), at its element size."""
    return unique_numel(t) * t.element_size()


def is_strided(t: Any, math: Math = "vector") -> bool:
    """Whether an op reads ``t`` with a strided (uncoalesced) pattern: not contiguous in torch's sense, ignoring
    broadcast (stride-0) and size-1 dims, so ``x + bias.expand(...)`` is not flagged (a broadcast is read once).

    NB: for a matmul-family operand (math='tensor') a transpose of the last two dims is not flagged (BLAS reads
    it natively through its transpose flag: the weight of nn.Linear arrives as ``weight.t()``), nor is a
    channels-last conv input; only an operand with no unit stride in its last two dims is. An op that moves no
    data (math='none', views) reads nothing and is never flagged."""
    if math == "none":
        return False
    try:
        if t.is_contiguous():
            return False
        strides = list(t.stride())
    except (RuntimeError, NotImplementedError):
        return False
    dims = [(size, stride) for size, stride in zip(t.shape, strides, strict=False) if size != 1 and stride != 0]
    expected = 1
    dense = True
    for size, stride in reversed(dims):
        if stride != expected:
            dense = False
            break
        expected *= size
    if dense:
        return False
    if math == "tensor":
        if t.dim() >= 2 and (strides[-1] == 1 or strides[-2] == 1 or t.shape[-1] == 1 or t.shape[-2] == 1):
            return False
        if t.dim() == 4:
            import torch

            if t.is_contiguous(memory_format=torch.channels_last):
                return False
    return True


def _key(t: Any) -> tuple[Any, ...]:
    """Identity of the memory a tensor reads: the same tensor passed twice is read once."""
    if t.device.type == "meta":
        return ("id", id(t))
    try:
        ptr = t.data_ptr()
    except (RuntimeError, NotImplementedError):
        return ("id", id(t))
    return (ptr, tuple(t.shape), tuple(t.stride()), t.dtype)


def _flat_tensors(value: Any) -> Iterator[Any]:
    if _is_tensor(value):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _flat_tensors(item)


def _prod(values: Iterable[int]) -> int:
    return _math.prod(int(v) for v in values)


# ------------------------------------------------------------------------------------------------- calls


class Call:
    """One op call as the formulas see it: the op, its arguments bound to schema names, its outputs."""

    def __init__(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        self.func = func
        schema = func._schema
        self.name: str = schema.name  # 'aten::mm'
        self.base = self.name.split("::", 1)[-1]
        self.overload: str = getattr(func, "_overloadname", "default")
        self.raw_args = args
        self.raw_kwargs = kwargs
        self.out = out
        self.schema_args = list(schema.arguments)
        self.args: dict[str, Any] = {}
        for i, arg in enumerate(self.schema_args):
            if i < len(args) and not arg.kwarg_only:
                self.args[arg.name] = args[i]
            elif arg.name in kwargs:
                self.args[arg.name] = kwargs[arg.name]
            else:
                self.args[arg.name] = arg.default_value if arg.has_default_value() else None
        self.outputs: list[Any] = list(_flat_tensors(out))

    def get(self, name: str, default: Any = None) -> Any:
        value = self.args.get(name)
        return default if value is None else value

    def tensor(self, *names: str) -> Any:
        """The first of ``names`` bound to a tensor, or None."""
        for name in names:
            value = self.args.get(name)
            if _is_tensor(value):
                return value
        return None

    def tensor_args(self) -> Iterator[tuple[Any, Any]]:
        """(schema argument, tensor) for every tensor argument, lists flattened, in argument order."""
        for arg in self.schema_args:
            for t in _flat_tensors(self.args.get(arg.name)):
                yield arg, t

    def inputs(self) -> list[Any]:
        """Tensor inputs in argument order (out= tensors included, as the profiler shows them)."""
        return [t for _, t in self.tensor_args()]

    @property
    def out0(self) -> Any:
        return self.outputs[0] if self.outputs else None

    @property
    def device_type(self) -> str:
        for t in [*self.inputs(), *self.outputs]:
            return t.device.type
        return "cpu"


def _written_args(call: Call) -> list[Any]:
    return [t for arg, t in call.tensor_args() if arg.alias_info is not None and arg.alias_info.is_write]


def read_bytes(call: Call, skip: Iterable[str] = ()) -> int:
    """Each tensor argument read once (broadcast dims once, repeats once); out= tensors and ``skip`` not read."""
    skip = set(skip)
    seen: set[tuple[Any, ...]] = set()
    total = 0
    for arg, t in call.tensor_args():
        if arg.is_out or arg.name in skip:
            continue
        key = _key(t)
        if key not in seen:
            seen.add(key)
            total += tensor_bytes(t)
    return total


def write_bytes(call: Call) -> int:
    """Each output written once, and each mutated argument that is not returned (the running stats of a
    batch norm)."""
    seen: set[tuple[Any, ...]] = set()
    total = 0
    for t in [*call.outputs, *_written_args(call)]:
        key = _key(t)
        if key not in seen:
            seen.add(key)
            total += tensor_bytes(t)
    return total


def io_bytes(call: Call, skip: Iterable[str] = ()) -> int:
    """Compulsory bytes of the generic rule: inputs read once, outputs (and mutated arguments) written once."""
    return read_bytes(call, skip) + write_bytes(call)


def compute_dtype(call: Call) -> str:
    """The dtype a roof is chosen by: the first floating tensor input, else the first floating output, else the
    first tensor at all ('' when torch's dtype has no roofline name)."""
    candidates = [t for _, t in call.tensor_args()] + call.outputs
    for t in candidates:
        if t.is_floating_point():
            return dtype_name(t.dtype)
    return dtype_name(candidates[0].dtype) if candidates else ""


# --------------------------------------------------------------------------------------------- registry

Formula = Callable[[Call], OpCost]

#: aten op ('aten::mm') -> formula. Overloads (add.Tensor, add.Scalar, add.out) share their op's formula.
OP_COSTS: dict[str, Formula] = {}
#: aten op -> the family it belongs to, for docs/op-costs.md and :func:`covered_ops`.
FAMILY: dict[str, str] = {}


def register(family: str, *names: str) -> Callable[[Formula], Formula]:
    """Register ``formula`` for the aten ops ``names`` (bare names, 'mm', or qualified, 'aten::mm')."""

    def wrap(formula: Formula) -> Formula:
        for name in names:
            key = name if "::" in name else f"aten::{name}"
            if key in OP_COSTS:
                raise RuntimeError(f"duplicate cost formula for {key}")
            OP_COSTS[key] = formula
            FAMILY[key] = family
        return formula

    return wrap


def covered_ops() -> dict[str, list[str]]:
    """Family -> the aten ops with a formula in it, sorted (what docs/op-costs.md tabulates)."""
    out: dict[str, list[str]] = {}
    for name, family in FAMILY.items():
        out.setdefault(family, []).append(name)
    return {family: sorted(names) for family, names in out.items()}


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


@register("view", *VIEWS)
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
# units. A dtype conversion (_to_copy) reads at the source dtype and writes at the target dtype. A copy of a
# transposed tensor is where the record's non_contiguous flag matters.
COPIES = (
    "_to_copy", "clone", "cat", "stack", "hstack", "vstack", "concat", "concatenate", "repeat", "flip", "roll",
    "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
    "replication_pad2d", "replication_pad3d", "_copy_from", "_copy_from_and_resize", "lift_fresh_copy",
    "narrow_copy", "slice_backward", "select_backward", "tril", "triu", "_local_scalar_dense", "view_copy",
    "permute_copy", "transpose_copy", "t_copy", "expand_copy", "slice_copy", "select_copy", "unsqueeze_copy",
    "squeeze_copy", "alias_copy", "detach_copy", "split_copy", "unbind_copy",
    "as_strided_copy", "diagonal_copy", "unfold_copy", "unfold_backward", "slice_scatter", "select_scatter",
    "diagonal_scatter", "as_strided_scatter", "masked_select", "im2col", "col2im", "pixel_shuffle",
    "pixel_unshuffle", "channel_shuffle", "_pad_enum", "to_dense", "resolve_conj", "resolve_neg",
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


# ------------------------------------------------------------------------------------------ element-wise

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
                         "where", "_prelu_kernel", "softplus", "glu"})  # fmt: skip


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


@register("elementwise", "gelu", "gelu_")
def _gelu(call: Call) -> OpCost:
    # NB: erf form (torch's default) 5 FLOPs, tanh approximation 9 (roofline.costs.elementwise).
    tanh = call.args.get("approximate") == "tanh"
    per = ELEMENTWISE["gelu_tanh"] if tanh else ELEMENTWISE["gelu"]
    return _elementwise_cost(call, per, "tanh approximation" if tanh else "erf form")


@register("elementwise", "gelu_backward")
def _gelu_backward(call: Call) -> OpCost:
    tanh = call.args.get("approximate") == "tanh"
    per = _GELU_TANH_BACKWARD if tanh else _GELU_BACKWARD
    return _elementwise_cost(call, per, "tanh form" if tanh else "erf form: cdf 4, pdf 4, x*pdf, +, *dy")


@register("elementwise", "pow", "pow_", "float_power")
def _pow(call: Call) -> OpCost:
    # NB: x**2 counts as a square (1, roofline.costs.elementwise 'square'), x**0.5 as a sqrt (1), x**1 and
    # x**0 as 1; any other tensor**scalar or tensor**tensor as exp(y*log(x)) (3); scalar**tensor as
    # exp(y*log(c)) with log(c) free (2).
    exponent = call.args.get("exponent")
    if _is_tensor(call.args.get("self")) and not _is_tensor(exponent):
        per = ELEMENTWISE["square"] if exponent in (2, 2.0, 0.5, 1, 1.0, 0, 0.0, -1, -1.0) else 3
    elif not _is_tensor(call.args.get("self")):
        per = 2
    else:
        per = 3
    return _elementwise_cost(call, per, f"pow with exponent {exponent if not _is_tensor(exponent) else 'tensor'}")


@register("elementwise", "clamp", "clamp_", "clip", "clip_")
def _clamp(call: Call) -> OpCost:
    # NB: one compare/select per bound given.
    bounds = sum(call.args.get(name) is not None for name in ("min", "max"))
    return _elementwise_cost(call, max(bounds, 1), f"{bounds} bound(s): one compare/select each")


# ------------------------------------------------------------------------------------------- reductions

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


for _name in REDUCTIONS:
    register("reduction", _name)(_reduction_formula(_name))


# ------------------------------------------------------------------------------------- gathers, scatters


def _index_bytes(call: Call, names: Iterable[str]) -> int:
    total = 0
    seen: set[tuple[Any, ...]] = set()
    for name in names:
        for t in _flat_tensors(call.args.get(name)):
            key = _key(t)
            if key not in seen:
                seen.add(key)
                total += tensor_bytes(t)
    return total


GATHERS: dict[str, tuple[str, tuple[str, ...]]] = {
    # op: (the table argument, the index arguments)
    "embedding": ("weight", ("indices",)),
    "index_select": ("self", ("index",)),
    "gather": ("self", ("index",)),
    "index": ("self", ("indices",)),
    "_unsafe_index": ("self", ("indices",)),
    "take": ("self", ("index",)),
    "take_along_dim": ("self", ("indices",)),
}


def _gather_formula(table: str, indices: tuple[str, ...]) -> Formula:
    def formula(call: Call) -> OpCost:
        # NB: rows touched, not the table: the output has one element per (index, row element), so the table
        # bytes read are the output's numel at the table's element size (a repeated index counts again). The
        # indices are read once and the output written once. 0 FLOPs.
        src = call.tensor(table)
        out = call.out0
        touched = int(out.numel()) * src.element_size()
        total = touched + _index_bytes(call, indices) + write_bytes(call)
        return OpCost(0, total, compute_dtype(call), "vector",
                      f"{call.base}: rows touched ({out.numel()} elements of {src.dtype}), not the whole table; "
                      "indices read once, output written once")  # fmt: skip

    return formula


for _name, (_table, _indices) in GATHERS.items():
    register("gather", _name)(_gather_formula(_table, _indices))


def _indexed_numel(src: Any, indices: list[Any]) -> int:
    """Elements of ``src[indices]`` (advanced indexing) without building it."""
    import torch

    dims = list(src.shape)
    consumed = 0
    kept = 1
    int_shapes: list[tuple[int, ...]] = []
    count = 1
    for idx in indices:
        if idx is None:
            kept *= dims[consumed]
            consumed += 1
        elif idx.dtype in (torch.bool, torch.uint8):
            count *= int(idx.count_nonzero())  # NB: a mask touches its True elements (a device sync)
            consumed += idx.dim()
        else:
            int_shapes.append(tuple(idx.shape))
            consumed += 1
    if int_shapes:
        count *= _prod(torch.broadcast_shapes(*int_shapes))
    return count * kept * _prod(dims[consumed:])


@register("scatter", "index_put_", "_index_put_impl_", "index_put")
def _index_put(call: Call) -> OpCost:
    # NB: in place: the touched elements are written (read too when accumulating), values and indices read once.
    # Out of place: self is read and the output written in full, plus values and indices. accumulate: 1 add per
    # touched element.
    src = call.tensor("self")
    indices = [t if _is_tensor(t) else None for t in call.args.get("indices") or []]
    touched = _indexed_numel(src, indices)
    accumulate = bool(call.args.get("accumulate"))
    flops = touched if accumulate else 0
    values = call.tensor("values")
    values_bytes = tensor_bytes(values) if values is not None else 0
    idx_bytes = _index_bytes(call, ("indices",))
    if call.base.endswith("_"):
        total = values_bytes + idx_bytes + (2 if accumulate else 1) * touched * src.element_size()
        note = f"{call.base}: {touched} touched elements written{' and read (accumulate)' if accumulate else ''}"
    else:
        total = io_bytes(call)
        note = f"{call.base}: self copied, {touched} elements replaced"
    return OpCost(flops, total, compute_dtype(call), "vector", note)


@register("scatter", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_",
          "index_add", "index_add_", "index_fill", "index_fill_", "index_copy", "index_copy_",
          "masked_scatter", "masked_scatter_")  # fmt: skip
def _scatter(call: Call) -> OpCost:
    # NB: rows touched: scatter/scatter_add touch one element per index element (src is read only there);
    # index_add/index_copy touch the whole source; index_fill touches index count x row size. In place: the
    # touched elements of self are written (and read when the op accumulates); out of place: self is read
    # and the output written in full. An accumulating op does 1 FLOP per touched element (2 with alpha).
    src = call.tensor("self")
    index = call.tensor("index", "mask")
    source = call.tensor("src", "source")
    base = call.base.rstrip("_")
    if base == "index_fill":
        dim = int(call.args.get("dim") or 0)
        row = src.numel() // src.shape[dim] if src.dim() else 1
        touched = int(index.numel()) * row
    elif base in ("index_add", "index_copy", "masked_scatter"):
        touched = int(source.numel()) if source is not None else 0
        if base == "masked_scatter":
            touched = int(index.count_nonzero()) if index is not None else touched
    else:
        touched = int(index.numel())
    accumulate = base in ("scatter_add", "scatter_reduce", "index_add") or call.args.get("reduce") is not None
    alpha = call.args.get("alpha", 1)
    flops = touched * (2 if alpha not in (1, None) else 1) if accumulate else 0
    if call.base.endswith("_"):
        source_bytes = 0
        if source is not None:
            source_bytes = touched * source.element_size() if base.startswith("scatter") else tensor_bytes(source)
        index_bytes = tensor_bytes(index) if index is not None else 0
        total = source_bytes + index_bytes + (2 if accumulate else 1) * touched * src.element_size()
        note = f"{call.base}: {touched} touched elements written{' and read (accumulate)' if accumulate else ''}"
    else:
        source_bytes = 0
        if source is not None:
            source_bytes = touched * source.element_size() if base.startswith("scatter") else tensor_bytes(source)
        total = read_bytes(call, skip=("src", "source")) + source_bytes + write_bytes(call)
        note = f"{call.base}: self copied, {touched} elements updated"
    return OpCost(flops, total, compute_dtype(call), "vector", note)


@register("scatter", "embedding_dense_backward", "embedding_backward")
def _embedding_backward(call: Call) -> OpCost:
    # NB: the gradient table (num_weights x dim) is written in full (zero-fill + accumulate of the touched rows,
    # one pass); grad_output and indices read once; one add per grad_output element.
    grad = call.tensor("grad_output", "grad")
    flops = int(grad.numel()) if grad is not None else 0
    return OpCost(flops, io_bytes(call), compute_dtype(call), "vector",
                  "embedding backward: full gradient table written once, one add per grad_output element")  # fmt: skip


@register("gather", "nll_loss_forward", "nll_loss2d_forward")
def _nll_loss(call: Call) -> OpCost:
    # NB: reads one element of self per target (rows touched, not the N x C scores), the targets, one weight
    # per target when weighted; writes the loss and total weight. 1 FLOP per target (negate-and-sum), 2 when
    # weighted.
    src = call.tensor("self")
    target = call.tensor("target")
    weight = call.tensor("weight")
    n = int(target.numel())
    total = n * src.element_size() + tensor_bytes(target) + write_bytes(call)
    if weight is not None:
        total += n * weight.element_size()
    flops = n * (2 if weight is not None else 1)
    return OpCost(flops, total, compute_dtype(call), "vector",
                  f"{call.base}: {n} targets touched, not the whole score matrix")  # fmt: skip


@register("scatter", "nll_loss_backward", "nll_loss2d_backward")
def _nll_loss_backward(call: Call) -> OpCost:
    # NB: grad_input (self's shape) is written in full (zero-fill + one value per target, one pass); self is
    # passed for its shape only (not read); targets, grad_output, total_weight and the touched weights read.
    target = call.tensor("target")
    weight = call.tensor("weight")
    n = int(target.numel())
    total = read_bytes(call, skip=("self", "weight")) + write_bytes(call)
    if weight is not None:
        total += n * weight.element_size()
    return OpCost(n * (2 if weight is not None else 1), total, compute_dtype(call), "vector",
                  f"{call.base}: gradient written in full, {n} targets touched")  # fmt: skip


# ------------------------------------------------------------------------------------------------ norms


def _norm_cost(call: Call, per_element: int, elements: int, note: str) -> OpCost:
    return OpCost(per_element * elements, io_bytes(call), compute_dtype(call), "vector",
                  f"{call.base}: {per_element} FLOPs per element ({note}); x read once, y and row statistics "
                  "written once, weights read once")  # fmt: skip


_LN_WITH, _LN_WITHOUT = NORMS["layernorm"]
_RMS_WITH, _RMS_WITHOUT = NORMS["rmsnorm"]
_SOFTMAX = NORMS["softmax"][0]


@register("norm", "native_layer_norm", "layer_norm", "native_group_norm", "group_norm")
def _layer_norm(call: Call) -> OpCost:
    # NB: roofline.costs.norms 'layernorm': 5 FLOPs per element (mean 1, centre 1, square + sum 2, scale 1),
    # +1 for a weight, +1 for a bias (7 with both). The per-row rsqrt is not counted. Group norm is counted
    # the same way per element.
    x = call.tensor("input")
    weight, bias = call.tensor("weight"), call.tensor("bias")
    per = _LN_WITHOUT + (weight is not None) + (bias is not None)
    assert _LN_WITHOUT + 2 == _LN_WITH
    return _norm_cost(call, per, int(x.numel()), "mean, centre, square+sum, scale, affine per weight vector")


def _ln_backward_per_element(has_weight: bool, mask: list[bool]) -> int:
    # NB: xhat = (x - mean)*rstd 2; grad_input = rstd*(g - mean(g) - xhat*mean(g*xhat)) 7, with g = dy*w 1 more
    # when there is a weight; grad_weight = sum(dy*xhat) 2; grad_bias = sum(dy) 1.
    per = 2
    if mask[0]:
        per += 7 + (1 if has_weight else 0)
    if len(mask) > 1 and mask[1] and has_weight:
        per += 2
    if len(mask) > 2 and mask[2]:
        per += 1
    return per


@register("norm", "native_layer_norm_backward", "native_group_norm_backward")
def _layer_norm_backward(call: Call) -> OpCost:
    x = call.tensor("input")
    mask = list(call.args.get("output_mask") or [True, True, True])
    per = _ln_backward_per_element(call.tensor("weight") is not None, mask)
    return _norm_cost(call, per, int(x.numel()), "xhat 2, grad_input 7 (+1 with a weight), grad_weight 2, grad_bias 1")


@register("norm", "_fused_rms_norm", "rms_norm")
def _rms_norm(call: Call) -> OpCost:
    # NB: roofline.costs.norms 'rmsnorm': 3 FLOPs per element (square 1, sum 1, scale 1), +1 for a weight.
    x = call.tensor("input")
    per = _RMS_WITH if call.tensor("weight") is not None else _RMS_WITHOUT
    return _norm_cost(call, per, int(x.numel()), "square, sum, scale, *weight")


@register("norm", "_fused_rms_norm_backward")
def _rms_norm_backward(call: Call) -> OpCost:
    # NB: xhat = x*rstd 1; grad_input = rstd*(g - xhat*mean(g*xhat)) 5, with g = dy*w 1 more when there is a
    # weight; grad_weight = sum(dy*xhat) 2.
    x = call.tensor("input")
    has_weight = call.tensor("weight") is not None
    mask = list(call.args.get("output_mask") or [True, True])
    per = 1 + ((5 + has_weight) if mask[0] else 0) + (2 if len(mask) > 1 and mask[1] and has_weight else 0)
    return _norm_cost(call, per, int(x.numel()), "xhat 1, grad_input 5 (+1 with a weight), grad_weight 2")


def _bn_training(call: Call) -> bool:
    if call.base in ("_batch_norm_with_update", "_native_batch_norm_legit_functional"):
        return True
    if call.base in ("_batch_norm_no_update", "_native_batch_norm_legit_no_training"):
        return False
    return bool(call.args.get("training", call.args.get("train", True)))


@register("norm", "native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
          "_native_batch_norm_legit_functional", "_batch_norm_with_update", "_batch_norm_no_update",
          "cudnn_batch_norm", "miopen_batch_norm", "batch_norm")  # fmt: skip
def _batch_norm(call: Call) -> OpCost:
    # NB: training: the batch statistics are computed as in layer norm (5 per element, +1 per weight vector);
    # the running-stat update is per channel (not counted). Eval: y = x*scale + shift with the per-channel
    # scale and shift folded from weight, bias and the running stats: 2 per element.
    x = call.tensor("input")
    if _bn_training(call):
        per = _LN_WITHOUT + (call.tensor("weight") is not None) + (call.tensor("bias") is not None)
        note = "training: mean, centre, square+sum, scale, affine"
    else:
        per = 2
        note = "eval: x*scale + shift with per-channel constants folded"
    return _norm_cost(call, per, int(x.numel()), note)


@register("norm", "native_batch_norm_backward", "batch_norm_backward", "cudnn_batch_norm_backward",
          "miopen_batch_norm_backward")  # fmt: skip
def _batch_norm_backward(call: Call) -> OpCost:
    # NB: training: as layer norm's backward; eval (train=False): grad_input = dy*scale 1, grad_weight =
    # sum(dy*xhat) 2 + xhat 2, grad_bias 1.
    x = call.tensor("input")
    mask = list(call.args.get("output_mask") or [True, True, True])
    has_weight = call.tensor("weight") is not None
    train = bool(call.args.get("train", call.args.get("update", True)))
    if train:
        per = _ln_backward_per_element(has_weight, mask)
    else:
        per = (1 if mask[0] else 0) + (4 if len(mask) > 1 and mask[1] else 0) + (1 if len(mask) > 2 and mask[2] else 0)
    return _norm_cost(call, per, int(x.numel()), "training as layer norm's backward" if train else "eval")


@register("norm", "_softmax", "softmax", "_safe_softmax", "_log_softmax", "log_softmax")
def _softmax(call: Call) -> OpCost:
    # NB: roofline.costs.norms 'softmax': max 1, subtract 1, exp 1, sum 1, divide 1 = 5 per element. Log-softmax:
    # max, subtract, exp, sum, subtract the log-sum = 5 (the log is per row).
    x = call.tensor("self", "input")
    return _norm_cost(call, _SOFTMAX, int(x.numel()), "max, subtract, exp, sum, divide")


@register("norm", "_softmax_backward_data", "_log_softmax_backward_data")
def _softmax_backward(call: Call) -> OpCost:
    # NB: softmax: dx = y*(dy - sum(dy*y)): mul 1, sum 1, sub 1, mul 1 = 4. Log-softmax: dx = dy - exp(y)*sum(dy):
    # sum 1, exp 1, mul 1, sub 1 = 4.
    grad = call.tensor("grad_output")
    return _norm_cost(call, 4, int(grad.numel()), "4 per element")


# ----------------------------------------------------------------------------------------------- matmuls


def tf32_enabled(kind: Literal["matmul", "conv"] = "matmul") -> bool:
    """Whether torch runs fp32 matmuls (kind='matmul', cuBLAS) or convolutions (kind='conv', cuDNN) on CUDA in
    TF32, read now: the new API (``torch.backends.cuda.matmul.fp32_precision``,
    ``torch.backends.cudnn.conv.fp32_precision``, torch >= 2.9) first, then the legacy ``allow_tf32`` flags."""
    import torch

    backends = torch.backends
    try:
        node = backends.cuda.matmul if kind == "matmul" else backends.cudnn.conv
        precision = getattr(node, "fp32_precision", "none")
        if precision in ("none", None):
            precision = getattr(backends, "fp32_precision", "none")
        if precision == "tf32":
            return True
        if precision == "ieee":
            return False
    except (AttributeError, RuntimeError):
        pass
    try:
        flag = backends.cuda.matmul.allow_tf32 if kind == "matmul" else backends.cudnn.allow_tf32
        return bool(flag)
    except (AttributeError, RuntimeError):
        return False


def _matmul_dtype(call: Call, kind: Literal["matmul", "conv"]) -> tuple[str, str]:
    """(roof dtype, note) of a matmul-family op: the input dtype; an fp32 op on CUDA with TF32 enabled at record
    time is 'tf32' (fp32 operands, TF32 tensor-core math)."""
    tensors = call.inputs()
    main = next((t for t in tensors if t.dim() >= 2), tensors[0] if tensors else None)
    dtype = dtype_name(main.dtype) if main is not None else ""
    if dtype == "fp32" and call.device_type == "cuda":
        if tf32_enabled(kind):
            setting = "cuda.matmul" if kind == "matmul" else "cudnn.conv"
            return "tf32", f"fp32 operands, TF32 math (torch.backends.{setting} TF32 on at record time)"
        return "fp32", "fp32 matmul with TF32 off: the fp32 (non-tensor-core) roof applies"
    return dtype, ""


def _matmul_cost(call: Call, flops: int, note: str, kind: Literal["matmul", "conv"] = "matmul") -> OpCost:
    dtype, dtype_note = _matmul_dtype(call, kind)
    notes = [note, "inputs read once, output written once", dtype_note]
    return OpCost(int(flops), io_bytes(call), dtype, "tensor", "; ".join(n for n in notes if n))


def _torch_flops(call: Call) -> int:
    """FLOPs from torch.utils.flop_counter's registered formula for this op."""
    from torch.utils.flop_counter import flop_registry

    formula = flop_registry[call.func._overloadpacket]
    return int(formula(*call.raw_args, **call.raw_kwargs, out_val=call.out))


@register("matmul", "mm", "bmm", "addmm", "baddbmm", "_scaled_mm")
def _torch_matmul(call: Call) -> OpCost:
    # NB: torch.utils.flop_counter: 2*m*n*k per matrix (per batch entry). A bias / beta*C add and alpha scaling
    # are epilogue work and not counted (as torch); the bias is read (a 1-D bias of n elements counts n).
    return _matmul_cost(call, _torch_flops(call), "2*m*n*k (torch.utils.flop_counter); bias epilogue not counted")


@register("conv", "convolution", "_convolution", "cudnn_convolution", "_slow_conv2d_forward",
          "convolution_overrideable", "convolution_backward")  # fmt: skip
def _torch_conv(call: Call) -> OpCost:
    # NB: torch.utils.flop_counter: 2 * output elements * Cin/groups * prod(kernel) (transposed: per input
    # element); the bias is not counted. Backward: grad_input as a transposed conv and grad_weight as a conv,
    # each where output_mask asks for it.
    return _matmul_cost(call, _torch_flops(call), "2 per multiply-add over the implicit GEMM "
                        "(torch.utils.flop_counter); bias not counted", kind="conv")  # fmt: skip


@register("matmul", "_int_mm")
def _int_mm(call: Call) -> OpCost:
    a, b = call.tensor("self"), call.tensor("mat2")
    m, k = a.shape
    n = b.shape[1]
    return _matmul_cost(call, 2 * m * n * k, "int8 2*m*n*k")


@register("matmul", "addbmm", "addbmm_")
def _addbmm(call: Call) -> OpCost:
    b1, b2 = call.tensor("batch1"), call.tensor("batch2")
    batch, m, k = b1.shape
    n = b2.shape[2]
    return _matmul_cost(call, 2 * batch * m * n * k, "2*b*m*n*k, summed over the batch into one m x n (sum free)")


@register("matmul", "_addmm_activation")
def _addmm_activation(call: Call) -> OpCost:
    # NB: addmm (2*m*n*k) plus the fused activation epilogue per output element: tanh-form GELU (9, the cuBLASLt
    # epilogue) or ReLU (1).
    a, b = call.tensor("mat1"), call.tensor("mat2")
    m, k = a.shape
    n = b.shape[1]
    per = ELEMENTWISE["gelu_tanh"] if call.args.get("use_gelu") else ELEMENTWISE["relu"]
    return _matmul_cost(call, 2 * m * n * k + per * m * n, "2*m*n*k + the activation epilogue")


@register("matmul", "mv", "addmv", "addmv_")
def _mv(call: Call) -> OpCost:
    mat = call.tensor("mat")
    m, n = mat.shape
    return _matmul_cost(call, 2 * m * n, "GEMV 2*m*n")


@register("matmul", "dot", "vdot", "inner")
def _dot(call: Call) -> OpCost:
    x = call.tensor("self")
    return _matmul_cost(call, 2 * int(x.numel()), "2*n")


@register("matmul", "linear")
def _linear(call: Call) -> OpCost:
    # NB: aten.linear normally decomposes into t + addmm/mm before the dispatch mode sees it; if it appears, it
    # is 2 * rows * out_features * in_features.
    x, w = call.tensor("input"), call.tensor("weight")
    out_features, in_features = (w.shape[0], w.shape[1]) if w.dim() == 2 else (1, w.shape[0])
    rows = x.numel() // in_features
    return _matmul_cost(call, 2 * rows * out_features * in_features, "2 * rows * out * in")


@register("matmul", "_grouped_mm", "_scaled_grouped_mm")
def _grouped_mm(call: Call) -> OpCost:
    # NB: a grouped GEMM (MoE): the groups partition one dimension, so the total is one GEMM over it:
    # 2d x 3d: 2 * M_total * K * N; 3d x 2d: 2 * M * K * N_total; 2d x 2d: 2 * M * N * K_total; 3d x 3d:
    # 2 * G * M * K * N.
    a, b = call.tensor("self"), call.tensor("mat2")
    if a.dim() == 2 and b.dim() == 3:
        flops = 2 * a.shape[0] * a.shape[1] * b.shape[2]
    elif a.dim() == 3 and b.dim() == 2:
        flops = 2 * a.shape[1] * a.shape[2] * b.shape[1]
    elif a.dim() == 2 and b.dim() == 2:
        flops = 2 * a.shape[0] * b.shape[1] * a.shape[1]
    else:
        flops = 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    return _matmul_cost(call, flops, "grouped GEMM: one GEMM over the partitioned dimension")


# --------------------------------------------------------------------------------------------- attention


def causal_pairs(seq_q: int, seq_kv: int, align: Literal["top_left", "bottom_right"] = "top_left") -> int:
    """(query, key) pairs a causal attention scores per head, exactly.

    top_left (torch's ``is_causal``, ``tril(ones(L, S))``): query i (0-based) sees keys 0..i, so
    sum over i of min(i + 1, seq_kv). bottom_right (flash-attn's convention, roofline.costs.attention's
    score_pairs): queries aligned to the end of the keys. Both are seq*(seq+1)/2 when seq_q == seq_kv."""
    if align == "bottom_right":
        # query i sees seq_kv - seq_q + i + 1 keys, clipped to [0, seq_kv]: the first seq_q - seq_kv queries of a
        # longer query block see none
        return score_pairs(seq_q, seq_kv, True) if seq_q <= seq_kv else seq_kv * (seq_kv + 1) // 2
    full = min(seq_q, seq_kv)
    return full * (full + 1) // 2 + max(0, seq_q - seq_kv) * seq_kv


# op -> (layout, causal alignment, backward). 'bhsd': (batch, heads, seq, dim), SDPA's; 'bshd': (batch, seq,
# heads, dim), the flash / mem-efficient kernels' own entry points.
ATTENTION: dict[str, tuple[str, str, bool]] = {
    "scaled_dot_product_attention": ("bhsd", "top_left", False),
    "_scaled_dot_product_flash_attention": ("bhsd", "top_left", False),
    "_scaled_dot_product_efficient_attention": ("bhsd", "top_left", False),
    "_scaled_dot_product_cudnn_attention": ("bhsd", "top_left", False),
    "_scaled_dot_product_flash_attention_for_cpu": ("bhsd", "top_left", False),
    "_scaled_dot_product_fused_attention_overrideable": ("bhsd", "top_left", False),
    "_scaled_dot_product_flash_attention_backward": ("bhsd", "top_left", True),
    "_scaled_dot_product_efficient_attention_backward": ("bhsd", "top_left", True),
    "_scaled_dot_product_cudnn_attention_backward": ("bhsd", "top_left", True),
    "_scaled_dot_product_flash_attention_for_cpu_backward": ("bhsd", "top_left", True),
    "_scaled_dot_product_fused_attention_overrideable_backward": ("bhsd", "top_left", True),
    "_flash_attention_forward": ("bshd", "bottom_right", False),
    "_flash_attention_backward": ("bshd", "bottom_right", True),
    "_efficient_attention_forward": ("bshd", "mask_type", False),
    "_efficient_attention_backward": ("bshd", "mask_type", True),
}

#: FLOPs per score of the backward's element-wise work: recompute P = exp(S - lse) 2, dS = P*(dP - D) 2.
SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT = 4


def _lengths(offsets: Any) -> list[int]:
    values = [int(v) for v in offsets.tolist()]
    return [b - a for a, b in itertools.pairwise(values)]


def _attention_formula(layout: str, align: str, backward: bool) -> Formula:
    def formula(call: Call) -> OpCost:
        # NB: fused attention (FlashAttention-style): Q, K, V (and a mask/bias, its broadcast dims once) read once,
        # O and the logsumexp written once; the S x S scores never reach memory. FLOPs: Q K^T 2*pairs*E and P V
        # 2*pairs*Ev, plus 5 softmax FLOPs per score (roofline.costs.attention), +1 per score when a mask or
        # bias is added. pairs = batch * query heads * scored (query, key) pairs: causal counts only the
        # unmasked pairs (exact). GQA/MQA: K and V have fewer heads and are read at their own size; FLOPs are
        # per query head. Backward: recompute Q K^T, dV, dP, dQ, dK = 2*pairs*(3E + 2Ev) plus 4 per score
        # (recompute P, dS); D = rowsum(dO * O) is per row and not counted. Dropout is not counted.
        q, k, v = call.tensor("query"), call.tensor("key"), call.tensor("value")
        if layout == "bhsd":
            heads_q, heads_kv = q.shape[-3], k.shape[-3]
            seq_q, seq_kv = q.shape[-2], k.shape[-2]
        else:
            heads_q, heads_kv = q.shape[-2], k.shape[-2]
            seq_q, seq_kv = q.shape[-3], k.shape[-3]
        e, ev = q.shape[-1], v.shape[-1]
        causal = bool(call.args.get("is_causal"))
        alignment = align
        if align == "mask_type":
            mask_type = int(call.args.get("custom_mask_type") or 0)
            causal = mask_type in (1, 2)
            alignment = "top_left" if mask_type == 1 else "bottom_right"

        def pairs_of(lq: int, lk: int) -> int:
            return causal_pairs(lq, lk, alignment) if causal else lq * lk  # type: ignore[arg-type]

        cum_q = call.tensor("cum_seq_q", "cu_seqlens_q")
        cum_k = call.tensor("cum_seq_k", "cu_seqlens_k")
        if cum_q is not None and cum_k is not None and cum_q.numel() > 1:
            # NB: variable-length (packed) batch: pairs summed over the sequences given by the offsets.
            per_head = sum(pairs_of(lq, lk) for lq, lk in zip(_lengths(cum_q), _lengths(cum_k), strict=False))
        else:
            batch = _prod(q.shape[:-3])
            per_head = batch * pairs_of(seq_q, seq_kv)
        pairs = heads_q * per_head
        masked = call.tensor("attn_mask", "attn_bias", "bias") is not None
        if backward:
            flops = 2 * pairs * (3 * e + 2 * ev) + SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT * pairs
        else:
            flops = 2 * pairs * (e + ev) + (SOFTMAX_FLOPS_PER_ELEMENT + masked) * pairs
        notes = ["fused: Q, K, V read once, O and logsumexp written once, no S x S in memory"]
        if causal:
            notes.append(f"causal ({alignment.replace('_', '-')} aligned): only unmasked pairs counted")
        if heads_kv != heads_q:
            notes.append(f"GQA: {heads_q} query heads share {heads_kv} KV heads (K, V read once)")
        notes.append("softmax FLOPs included (5 per score, vector units)" if not backward
                     else "backward: 5 matmuls over the pairs + 4 per score")  # fmt: skip
        dtype = dtype_name(q.dtype)
        return OpCost(int(flops), io_bytes(call), dtype, "tensor", "; ".join(notes))

    return formula


for _name, (_layout, _align, _backward) in ATTENTION.items():
    register("attention", _name)(_attention_formula(_layout, _align, _backward))


# ---------------------------------------------------------------------------------------------- entry


def _is_view_op(func: Any) -> bool:
    if getattr(func, "is_view", False):
        return True
    try:
        returns = func._schema.returns
    except AttributeError:
        return False
    return bool(returns) and all(r.alias_info is not None and not r.alias_info.is_write for r in returns)


def op_cost(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None, out: Any) -> OpCost:
    """The cost of one aten op call ``out = func(*args, **kwargs)``, from its shapes (and dtypes).

    ``func`` is an OpOverload (what a TorchDispatchMode receives). An op with no formula returns flops None,
    bytes None and the note :data:`NO_FORMULA`. A formula that fails on an unusual call (a layout it does not
    know) is reported the same way, with the reason in the note."""
    kwargs = kwargs or {}
    try:
        call = Call(func, tuple(args), kwargs, out)
    except AttributeError:  # not an aten OpOverload (a higher-order op)
        return OpCost(None, None, "", "vector", NO_FORMULA)
    formula = OP_COSTS.get(call.name)
    if formula is None:
        if _is_view_op(func):
            return _view(call)
        return OpCost(None, None, compute_dtype(call), "vector", NO_FORMULA)
    try:
        return formula(call)
    except Exception as exc:  # NB: a formula's failure must not stop the user's model; it is reported
        return OpCost(None, None, compute_dtype(call), "vector",
                      f"{NO_FORMULA}: the formula for {call.name} failed ({type(exc).__name__}: {exc})")  # fmt: skip


def uncovered(records: Iterable[OpRecord]) -> list[OpRecord]:
    """The records with no cost (flops or bytes None), in order: what a report lists as uncounted."""
    return [r for r in records if not r.counted]


def uncovered_summary(records: Iterable[OpRecord]) -> dict[str, int]:
    """Uncounted op name -> how many calls, most frequent first."""
    counts: dict[str, int] = {}
    for r in uncovered(records):
        counts[r.op] = counts.get(r.op, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


__all__ = [
    "NO_FORMULA",
    "OP_COSTS",
    "Call",
    "OpCost",
    "causal_pairs",
    "compute_dtype",
    "covered_ops",
    "dtype_name",
    "io_bytes",
    "is_strided",
    "op_cost",
    "register",
    "tensor_bytes",
    "tf32_enabled",
    "uncovered",
    "uncovered_summary",
    "unique_numel",
]
