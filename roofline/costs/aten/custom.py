"""The open registry: costs that users and kernel libraries give for their own ops and Triton kernels.

Three sources, consulted (by :func:`roofline.costs.aten.registry.op_cost` and the counting pass) for an op that
has no formula of ours:

- :func:`register_cost` (``roofline.register_cost``): FLOPs and bytes of an op (a ``torch.library.custom_op``,
  any OpOverload or ``'namespace::name'``) or of a Triton kernel (the kernel or its name), as numbers or as
  functions of the call's arguments;
- plugins: every ``roofline.costs`` entry point of the installed distributions, loaded once (:func:`load_plugins`)
  -- a module that calls register_cost when imported, or a function called with no argument that does;
- torch's own FLOP registry (``torch.utils.flop_counter.register_flop_formula``): FLOPs where it has a formula;
  bytes then by the compulsory rule (each tensor argument read once, each output written once), said in the note.

A registered cost replaces a built-in formula of the same op."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from roofline.costs.aten.call import NO_FORMULA, Math, OpCost, dtype_name, is_tensor, storage_key, tensor_bytes

#: The entry-point group a kernel library declares its costs under (pyproject: [project.entry-points."roofline.costs"]).
ENTRY_POINT_GROUP = "roofline.costs"
#: The record name of a Triton kernel launched through torch (``triton::<kernel name>``).
TRITON = "triton::"
#: The record name of a higher-order op: 'higher_order::flex_attention'.
HIGHER_ORDER = "higher_order::"

Amount = int | float | Callable[..., Any] | None


@dataclass(frozen=True)
class RegisteredCost:
    """A cost given through :func:`register_cost`: numbers, or functions of ``(*args, **kwargs, out_val=out)``."""

    flops: Amount
    bytes: Amount = None  # None: each tensor argument read once + each output written once
    math: Math = "tensor"
    dtype: str | None = None  # None: the first floating tensor argument's
    note: str = ""

    def cost(self, args: tuple[Any, ...], kwargs: Mapping[str, Any], out: Any) -> OpCost:
        """The cost of one call. A function that raises gives an uncounted cost with the reason, never an error."""
        dtype = self.dtype if self.dtype is not None else tensors_dtype([args, kwargs, out])
        try:
            flops = _amount(self.flops, args, kwargs, out)
            if self.bytes is None:
                nbytes = compulsory_bytes([args, kwargs], out)
                assumed = "bytes: each tensor argument read once, each output written once (not registered)"
            else:
                nbytes = _amount(self.bytes, args, kwargs, out)
                assumed = ""
        except Exception as exc:  # NB: a user's formula must not stop the model; it is reported
            return OpCost(None, None, dtype, self.math, f"{NO_FORMULA}: the registered cost failed "
                                                        f"({type(exc).__name__}: {exc})")  # fmt: skip
        notes = [self.note or "registered cost (roofline.register_cost)", assumed]
        return OpCost(flops, nbytes, dtype, self.math, "; ".join(n for n in notes if n))


#: op ('mylib::fused_ln') or Triton kernel ('triton::add_kernel') -> its registered cost
REGISTERED: dict[str, RegisteredCost] = {}
#: one line per plugin that failed to load (reported in the diagnosis's notes)
PLUGIN_ERRORS: list[str] = []
_PLUGINS_LOADED: list[bool] = []


def _amount(value: Amount, args: tuple[Any, ...], kwargs: Mapping[str, Any], out: Any) -> int:
    if callable(value):
        value = value(*args, **kwargs, out_val=out) if _takes_out(value) else value(*args, **kwargs)
    if value is None:
        raise ValueError("the registered function returned None")
    return int(value)


def _takes_out(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "out_val" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def flat_tensors_of(value: Any) -> Iterator[Any]:
    """The tensors in ``value``: itself, or those in (nested) lists, tuples and dict values, in order."""
    if is_tensor(value):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from flat_tensors_of(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from flat_tensors_of(item)


def compulsory_bytes(inputs: Any, out: Any) -> int:
    """Each tensor of ``inputs`` read once (repeats once), each tensor of ``out`` written once."""
    seen: set[tuple[Any, ...]] = set()
    total = 0
    for t in flat_tensors_of(inputs):
        key = storage_key(t)
        if key not in seen:
            seen.add(key)
            total += tensor_bytes(t)
    return total + sum(tensor_bytes(t) for t in flat_tensors_of(out))


def tensors_dtype(values: Any) -> str:
    """The roofline dtype of the first floating tensor in ``values`` ('' when none)."""
    for t in flat_tensors_of(values):
        if t.is_floating_point():
            return dtype_name(t.dtype)
    return ""


def cost_key(op: Any) -> str:
    """The registry key of ``op``: 'namespace::name' for an op (a string with '::', an OpOverload or packet, a
    ``torch.library.custom_op``), 'triton::NAME' for a Triton kernel (a string without '::', a JITFunction or
    an autotuner/heuristics wrapper around one)."""
    if isinstance(op, str):
        if not op.strip():
            raise ValueError("register_cost: op is an empty name: give 'namespace::name', an op or a Triton kernel")
        name = op.split(".", 1)[0] if "::" in op else op
        return name if "::" in name else f"{TRITON}{name}"
    for attr in ("_qualname", "_qualified_op_name"):  # CustomOpDef, OpOverloadPacket
        value = getattr(op, attr, None)
        if isinstance(value, str):
            return value
    schema = getattr(op, "_schema", None)
    if schema is not None:  # OpOverload
        return str(schema.name)
    inner = op
    for _ in range(8):
        inner = getattr(inner, "fn", inner)
    if not isinstance(getattr(inner, "__name__", None), str):  # NB: not a kernel: 42, a tensor, None
        raise ValueError(
            f"register_cost: {type(op).__name__} {op!r} is no op: give 'namespace::name', an OpOverload, a "
            "torch.library.custom_op or a Triton kernel (its function or its name)"
        )
    return f"{TRITON}{kernel_name(op)}"


def kernel_name(kernel: Any) -> str:
    """The name of a Triton kernel (a JITFunction, or an Autotuner/Heuristics wrapping one)."""
    seen = 0
    while hasattr(kernel, "fn") and seen < 8:
        kernel = kernel.fn
        seen += 1
    return str(getattr(kernel, "__name__", kernel))


def hop_record_name(name: str, kwargs: Mapping[str, Any]) -> str:
    """The record name of a higher-order op call: 'triton::<kernel>' for a Triton wrapper, else
    'higher_order::<name>' (the timing pass marks its calls with the same name)."""
    if name.startswith("triton_kernel_wrapper"):
        return f"{TRITON}{triton_kernel_name(kwargs)}"
    return f"{HIGHER_ORDER}{name}"


def triton_kernel(kwargs: Mapping[str, Any]) -> Any:
    """The Triton kernel of a triton_kernel_wrapper call (torch's kernel side table)."""
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

    return kernel_side_table.get_kernel(kwargs["kernel_idx"])


def triton_kernel_name(kwargs: Mapping[str, Any]) -> str:
    """The kernel name of a triton_kernel_wrapper call ('kernel_<index>' when the index is unknown)."""
    try:
        return kernel_name(triton_kernel(kwargs))
    except Exception:  # NB: an unknown kernel index: named by it
        return f"kernel_{kwargs.get('kernel_idx')}"


def register_cost(
    op: Any,
    *,
    flops: Amount,
    bytes: Amount = None,
    math: Math = "tensor",
    dtype: str | None = None,
    note: str = "",
) -> None:
    """Give roofline the cost of ``op``: a custom op (``torch.library.custom_op``, an OpOverload or
    'namespace::name') or a Triton kernel (the kernel or its name).

    ``flops`` and ``bytes``: numbers, or functions called with the op's arguments (``fn(*args, **kwargs)``, and
    ``out_val=`` the output when the function takes it, as torch's register_flop_formula); a Triton kernel's
    function gets the kernel's arguments as keywords. ``bytes`` None: each tensor argument read once and each
    output written once (the note says so). ``math``: 'tensor' (matmul units) or 'vector'; ``dtype``: the roof's
    dtype ('bf16', ...), None for the first floating tensor argument's. Registering an op again replaces its cost."""
    if flops is None:
        raise ValueError("register_cost: flops is required (a number or a function of the call)")
    if math not in ("tensor", "vector", "none"):
        raise ValueError(f"register_cost: math must be 'tensor', 'vector' or 'none', not {math!r}")
    REGISTERED[cost_key(op)] = RegisteredCost(flops, bytes, math, dtype, note)


def registered(name: str) -> RegisteredCost | None:
    """The registered cost of op or kernel ``name`` (plugins loaded first), or None."""
    load_plugins()
    return REGISTERED.get(name)


def load_plugins(entry_points: Callable[[], Any] | None = None) -> list[str]:
    """Load every ``roofline.costs`` entry point once (later calls do nothing) and return the errors: one line
    per plugin that failed, also warned. A plugin is a module (importing it registers its costs) or a function
    called with no argument."""
    if _PLUGINS_LOADED:
        return PLUGIN_ERRORS
    _PLUGINS_LOADED.append(True)
    if entry_points is None:
        from importlib.metadata import entry_points as installed

        def entry_points() -> Any:
            return installed(group=ENTRY_POINT_GROUP)

    try:
        found = list(entry_points())
    except Exception as exc:  # NB: broken distribution metadata must not stop a diagnosis
        found = []
        PLUGIN_ERRORS.append(f"roofline.costs entry points unreadable: {type(exc).__name__}: {exc}")
    for ep in found:
        try:
            loaded = ep.load()
            if callable(loaded) and not inspect.ismodule(loaded):
                loaded()
        except Exception as exc:  # NB: a broken plugin is reported in one line, never fatal
            line = f"cost plugin {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: {exc}"
            PLUGIN_ERRORS.append(line)
            warnings.warn(f"roofline: {line}", RuntimeWarning, stacklevel=2)
    return PLUGIN_ERRORS


def plugin_errors() -> list[str]:
    """The plugins that failed to load, one line each (for the diagnosis's notes)."""
    return list(PLUGIN_ERRORS)


def reset_plugins() -> None:
    """Forget that the plugins were loaded (tests)."""
    _PLUGINS_LOADED.clear()
    PLUGIN_ERRORS.clear()


def torch_registry_flops(key: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], out: Any) -> int | None:
    """FLOPs from torch's flop registry (``register_flop_formula``) for ``key`` (an OpOverloadPacket, a
    HigherOrderOperator or a Triton JITFunction), or None when it has no formula there."""
    from torch.utils.flop_counter import flop_registry

    try:
        formula = flop_registry.get(key)
    except TypeError:  # an unhashable key
        return None
    if formula is None:
        return None
    return int(formula(*args, **kwargs, out_val=out))


def torch_registry_cost(func: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], out: Any) -> OpCost | None:
    """The cost of an op torch's flop registry has a formula for: its FLOPs, bytes by the compulsory rule."""
    packet = getattr(func, "_overloadpacket", None)
    if packet is None:
        return None
    flops = torch_registry_flops(packet, args, kwargs, out)
    if flops is None:
        return None
    note = ("FLOPs from torch.utils.flop_counter's registered formula; bytes: each tensor argument read once, "
            "each output written once (assumed); tensor-unit roof assumed")  # fmt: skip
    return OpCost(flops, compulsory_bytes([args, kwargs], out), tensors_dtype([args, kwargs, out]), "tensor", note)


__all__ = [
    "ENTRY_POINT_GROUP",
    "HIGHER_ORDER",
    "PLUGIN_ERRORS",
    "REGISTERED",
    "TRITON",
    "RegisteredCost",
    "compulsory_bytes",
    "cost_key",
    "flat_tensors_of",
    "hop_record_name",
    "kernel_name",
    "load_plugins",
    "plugin_errors",
    "register_cost",
    "registered",
    "reset_plugins",
    "tensors_dtype",
    "torch_registry_cost",
    "torch_registry_flops",
    "triton_kernel",
    "triton_kernel_name",
]
