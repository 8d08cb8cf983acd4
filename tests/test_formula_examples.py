"""Every registered cost formula runs on a representative call: a formula that raises fails here, never turns
into a silent 'no cost formula' in a user's report (issue 26: ``aten::mv`` read addmv's argument and was uncounted).

The calls: a family module's ``EXAMPLES`` table (op -> ``builder(torch)`` returning ``(args, kwargs)`` or, for a
kernel with no CPU implementation, ``(args, kwargs, out)``; docs/op-costs.md, "Examples for the formula test") or,
for an op with none, a call generated from the op's schema with small tensors. An op with neither fails the test:
add an example to its family's ``EXAMPLES``. The registry is read at test time, so formulas added by any family
module are covered."""

from __future__ import annotations

import importlib
import itertools
import pkgutil
from collections.abc import Iterator
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import roofline.costs.aten as aten_costs  # noqa: E402
from roofline.costs.aten import OP_COSTS, Call  # noqa: E402

SHAPES = [(4, 4), (2, 4, 4), (2, 2, 4, 4), (4,)]
INDEX_ARGS = {"index", "indices", "target", "offsets", "indexes"}


def examples() -> dict[str, Any]:
    """Every family module's EXAMPLES, keyed by the qualified op name ('aten::mv')."""
    table: dict[str, Any] = {}
    for info in pkgutil.iter_modules(aten_costs.__path__):
        module = importlib.import_module(f"{aten_costs.__name__}.{info.name}")
        for name, builder in getattr(module, "EXAMPLES", {}).items():
            table[name if "::" in name else f"aten::{name}"] = builder
    return table


def _value(arg: Any, shape: tuple[int, ...], device: str) -> Any:
    """A value for a schema argument without a default; ``...``: leave it out (a default or None)."""
    kind = str(arg.type)
    optional = kind.startswith("Optional[")
    base = kind[len("Optional[") : -1] if optional else kind
    if base == "Tensor":
        if arg.name in INDEX_ARGS:
            return torch.zeros(shape, dtype=torch.long, device=device)
        if arg.name == "mask":
            return torch.zeros(shape, dtype=torch.bool, device=device)
        return torch.randn(shape, device=device)
    if base in ("List[Tensor]", "List[Optional[Tensor]]"):
        return [torch.randn(shape, device=device), torch.randn(shape, device=device)]
    if base == "List[int]":
        return list(range(len(shape))) if arg.name in ("dims", "dim") else list(shape)
    simple = {"number": 1.0, "int": 1, "float": 1.0, "bool": False}
    if base in simple:
        return simple[base]
    return ... if optional else None


def _generated(packet: Any) -> Iterator[tuple[Any, tuple[Any, ...], dict[str, Any]]]:
    """Calls of each overload (out= overloads skipped) from its schema: small tensors of a few ranks, CPU then
    meta (for kernels with no CPU implementation)."""
    for overload_name in packet.overloads():
        overload = getattr(packet, overload_name)
        schema_args = overload._schema.arguments
        if any(a.is_out for a in schema_args):
            continue
        for device, shape in itertools.product(("cpu", "meta"), SHAPES):
            args: list[Any] = []
            kwargs: dict[str, Any] = {}
            for a in schema_args:
                if a.has_default_value():
                    continue
                value = _value(a, shape, device)
                if value is None:
                    break
                value = None if value is ... else value
                if a.kwarg_only:
                    kwargs[a.name] = value
                else:
                    args.append(value)
            else:
                yield overload, tuple(args), kwargs


def _run(packet: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any] | None:
    """(overload, output) of the first overload of ``packet`` that accepts the call, or None."""
    for overload_name in packet.overloads():
        overload = getattr(packet, overload_name)
        if any(a.is_out for a in overload._schema.arguments):
            continue
        try:
            return overload, overload(*args, **kwargs)
        except Exception:  # NB: the wrong overload for these arguments, or no kernel here: try the next
            continue
    return None


def representative_call(name: str, table: dict[str, Any]) -> Call | None:
    """The call the formula of ``name`` is exercised on: its example, else the first generated call that runs."""
    namespace, base = name.split("::", 1)
    packet = getattr(getattr(torch.ops, namespace), base, None)
    if packet is None:
        return None
    builder = table.get(name)
    if builder is not None:
        built = builder(torch)
        args, kwargs = tuple(built[0]), dict(built[1])
        if len(built) == 3:  # a kernel with no CPU implementation: its output given by the example
            overloads = [getattr(packet, o) for o in packet.overloads()]  # NB: the functional one, not .out
            overload = next((o for o in overloads if not any(a.is_out for a in o._schema.arguments)), overloads[0])
            return Call(overload, args, kwargs, built[2])
        ran = _run(packet, args, kwargs)
        assert ran is not None, f"the EXAMPLES call of {name} does not run on the CPU"
        return Call(ran[0], args, kwargs, ran[1])
    for overload, args, kwargs in _generated(packet):
        try:
            out = overload(*args, **kwargs)
        except Exception:  # NB: a generated call the op rejects: try the next shape
            continue
        return Call(overload, args, kwargs, out)
    return None


TABLE = examples()


@pytest.mark.parametrize("name", sorted(OP_COSTS))
def test_formula_runs_on_a_representative_call(name: str) -> None:
    call = representative_call(name, TABLE)
    assert call is not None, f"{name}: no call could be built from its schema; add one to its family's EXAMPLES"
    cost = OP_COSTS[name](call)  # NB: called directly: op_cost would turn an exception into 'no cost formula'
    assert cost.flops is not None and cost.flops >= 0, (name, cost)
    assert cost.bytes is not None and cost.bytes >= 0, (name, cost)


def test_every_example_names_a_registered_op() -> None:
    assert sorted(set(TABLE) - set(OP_COSTS)) == []


def test_mv_is_counted() -> None:
    # aten::mv(self, vec): m x n matrix times an n-vector: 2*m*n FLOPs; bytes (m*n + n + m) fp32 elements
    m, n = 3, 5
    mat, vec = torch.randn(m, n), torch.randn(n)
    cost = aten_costs.op_cost(torch.ops.aten.mv.default, (mat, vec), {}, torch.mv(mat, vec))
    assert (cost.flops, cost.bytes) == (2 * m * n, 4 * (m * n + n + m))
    # addmv(self=bias m, mat, vec): the same 2*m*n; reads bias m + mat m*n + vec n, writes m
    bias = torch.randn(m)
    cost = aten_costs.op_cost(torch.ops.aten.addmv.default, (bias, mat, vec), {}, torch.addmv(bias, mat, vec))
    assert (cost.flops, cost.bytes) == (2 * m * n, 4 * (m + m * n + n + m))


def test_slow_conv2d_forward_own_formula() -> None:
    # torch's flop formula for _slow_conv2d_forward does not run; ours: input (2, 3, 6, 6), weight (4, 3, 3, 3),
    # padding 1 -> output (2, 4, 6, 6) = 288 elements, 2 * 288 * (3*3*3) = 15552 FLOPs; bytes fp32:
    # (input 216 + weight 108 + output 288) * 4 = 2448
    x, w = torch.randn(2, 3, 6, 6), torch.randn(4, 3, 3, 3)
    args = (x, w, [3, 3], None, [1, 1], [1, 1])
    out = torch.ops.aten._slow_conv2d_forward.default(*args)
    cost = aten_costs.op_cost(torch.ops.aten._slow_conv2d_forward.default, args, {}, out)
    assert (cost.flops, cost.bytes) == (15552, 2448)


def test_sdpa_without_batch_and_head_dims() -> None:
    # SDPA on (seq 4, dim 8) tensors: 4*4 = 16 pairs, Q K^T + P V 2*16*(8+8) = 512 + softmax 5*16 = 80 -> 592;
    # bytes fp32: q, k, v, out 4 * 32 elements * 4 = 512
    q, k, v = (torch.randn(4, 8) for _ in range(3))
    op = torch.ops.aten.scaled_dot_product_attention.default
    cost = aten_costs.op_cost(op, (q, k, v), {}, op(q, k, v))
    assert (cost.flops, cost.bytes) == (592, 512)
