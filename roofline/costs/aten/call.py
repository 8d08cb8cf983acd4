"""One aten op call as the cost formulas see it (:class:`Call`), its :class:`OpCost`, and the byte-counting
rules every formula shares: inputs read once (broadcast dims once, repeats once), outputs written once.

Shape-only: the helpers read shapes, strides, dtypes and storage pointers, never tensor values."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any, Literal, NamedTuple

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


_TENSOR: list[type] = []  # torch.Tensor, once a formula ran (torch imported only then)


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch.Tensor (torch imported only when a formula runs)."""
    if not _TENSOR:
        import torch

        _TENSOR.append(torch.Tensor)
    return isinstance(value, _TENSOR[0])


def unique_numel(t: Any) -> int:
    """Elements a kernel must touch to read ``t`` once: a broadcast (stride-0) dim counts once.

    NB: this is the numel of the un-expanded view (sizes with the stride-0 dims dropped). Other overlapping
    strides (a hand-made as_strided) are not detected: their elements count as many times as they appear."""
    numel = t.numel()
    if numel == 0:
        return 0
    if str(getattr(t, "layout", "torch.strided")) == "torch._mkldnn":  # NB: its stride() is (1, 0, ...), not real
        return numel
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


def storage_key(t: Any) -> tuple[Any, ...]:
    """Identity of the memory a tensor reads: the same tensor passed twice is read once."""
    if t.device.type == "meta":
        return ("id", id(t))
    try:
        ptr = t.data_ptr()
    except (RuntimeError, NotImplementedError):
        return ("id", id(t))
    return (ptr, tuple(t.shape), tuple(t.stride()), t.dtype)


def flat_tensors(value: Any) -> Iterator[Any]:
    """The tensors in ``value``: itself, or those in a (nested) list or tuple, in order."""
    if is_tensor(value):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from flat_tensors(item)


def prod(values: Iterable[int]) -> int:
    """The product of ``values`` as Python ints (shape dims may be SymInts or numpy ints)."""
    return math.prod(int(v) for v in values)


# ------------------------------------------------------------------------------------------------- calls


class Call:
    """One op call as the formulas see it: the op, its arguments bound to schema names, its outputs."""

    def __init__(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        self.func = func
        schema = func._schema
        self.name: str = schema.name  # 'aten::mm'
        self.base = self.name.split("::", 1)[-1]
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
        self.outputs: list[Any] = list(flat_tensors(out))
        self._tensor_args: list[tuple[Any, Any]] | None = None

    def get(self, name: str, default: Any = None) -> Any:
        value = self.args.get(name)
        return default if value is None else value

    def tensor(self, *names: str) -> Any:
        """The first of ``names`` bound to a tensor, or None."""
        for name in names:
            value = self.args.get(name)
            if is_tensor(value):
                return value
        return None

    def tensor_args(self) -> Iterator[tuple[Any, Any]]:
        """(schema argument, tensor) for every tensor argument, lists flattened, in argument order (found once
        per call: the formulas ask several times)."""
        if self._tensor_args is None:
            self._tensor_args = [(arg, t) for arg in self.schema_args for t in flat_tensors(self.args.get(arg.name))]
        return iter(self._tensor_args)

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
        key = storage_key(t)
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
        key = storage_key(t)
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
