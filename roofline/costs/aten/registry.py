"""The registry: aten op ('aten::mm') -> its cost formula, and :func:`op_cost`, the one entry point.

The formulas live by op family in the sibling modules (movement, elementwise, reductions, index, norms, matmul,
conv, attention); each registers itself with :func:`register` when ``roofline.costs.aten`` is imported."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from roofline.costs.aten.call import NO_FORMULA, Call, OpCost, compute_dtype
from roofline.costs.aten.custom import registered, torch_registry_cost

Formula = Callable[[Call], OpCost]

#: A representative call of an op for tests/test_formula_examples.py: ``builder(torch)`` returns ``(args, kwargs)``
#: (the test runs the op on the CPU) or ``(args, kwargs, out)`` for a kernel with no CPU implementation. A family
#: module lists the calls of its ops that the test cannot generate from the schema in a dict ``EXAMPLES``
#: (op name -> builder); docs/op-costs.md, "Examples for the formula test".
Example = Callable[[Any], tuple[Any, ...]]

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


#: family -> its rows in docs/op-costs.md's table: (the ops, FLOPs, the assumption), in the order described
#: (:func:`describe`); a family without rows is listed by name, one line.
ROWS: dict[str, list[tuple[tuple[str, ...], str, str]]] = {}


def describe(family: str, names: tuple[str, ...] | list[str], flops: str, assumption: str) -> None:
    """A row of ``family``'s table in docs/op-costs.md (roofline.costs.aten.table): ``names`` (bare or qualified,
    each registered in that family) cost ``flops`` (as words: '1', '2 per bound') because of ``assumption``."""
    keys = tuple(name if "::" in name else f"aten::{name}" for name in names)
    unknown = [key for key in keys if FAMILY.get(key) != family]
    if unknown:
        raise RuntimeError(f"describe({family!r}): not registered in that family: {', '.join(unknown)}")
    ROWS.setdefault(family, []).append((keys, flops, assumption))


def covered_ops() -> dict[str, list[str]]:
    """Family -> the aten ops with a formula in it, sorted (what docs/op-costs.md tabulates)."""
    out: dict[str, list[str]] = {}
    for name, family in FAMILY.items():
        out.setdefault(family, []).append(name)
    return {family: sorted(out[family]) for family in sorted(out)}


#: The op whose formula an op that only aliases its input gets (registered by roofline.costs.aten.movement).
VIEW = "aten::view"


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

    ``func`` is an OpOverload (what a TorchDispatchMode receives). A cost registered for the op
    (:func:`roofline.costs.aten.custom.register_cost`, a plugin) comes first, then our formula, then torch's flop
    registry (FLOPs; bytes by the compulsory rule). An op with none of these returns flops None,
    bytes None and the note :data:`NO_FORMULA`. A formula that fails on an unusual call (a layout it does not
    know) is reported the same way, with the reason in the note."""
    kwargs = kwargs or {}
    try:
        call = Call(func, tuple(args), kwargs, out)
    except AttributeError:  # not an aten OpOverload (a higher-order op)
        return OpCost(None, None, "", "vector", NO_FORMULA)
    given = registered(call.name)
    if given is not None:  # NB: a registered cost (roofline.register_cost, a plugin) replaces our formula
        return given.cost(tuple(args), kwargs, out)
    formula = OP_COSTS.get(call.name)
    if formula is None:
        if _is_view_op(func):
            return OP_COSTS[VIEW](call)  # NB: an unlisted alias op costs what a view costs
        return _torch_registry(call) or OpCost(None, None, compute_dtype(call), "vector", NO_FORMULA)
    try:
        return formula(call)
    except Exception as exc:  # NB: a formula's failure must not stop the user's model; it is reported
        return OpCost(None, None, compute_dtype(call), "vector",
                      f"{NO_FORMULA}: the formula for {call.name} failed ({type(exc).__name__}: {exc})")  # fmt: skip


def _torch_registry(call: Call) -> OpCost | None:
    try:
        return torch_registry_cost(call.func, call.raw_args, call.raw_kwargs, call.out)
    except Exception as exc:  # NB: torch's formula failed on this call: uncounted, with the reason
        reason = f"{NO_FORMULA}: torch's registered flop formula failed ({type(exc).__name__}: {exc})"
        return OpCost(None, None, compute_dtype(call), "vector", reason)
