"""The open cost registry (roofline.register_cost, roofline.costs entry points, torch's flop registry) and the
higher-order ops of the counting pass (flex_attention, cond, while_loop, an opaque one, the Triton wrapper)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import register_flop_formula  # noqa: E402

import roofline  # noqa: E402
from roofline.costs.aten import NO_FORMULA, op_cost  # noqa: E402
from roofline.costs.aten import custom as registry  # noqa: E402
from roofline.diagnose import count as counting  # noqa: E402
from roofline.diagnose.count import count_ops  # noqa: E402

FP32 = 4


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no registered cost and with the plugins marked loaded (none installed here)."""
    monkeypatch.setattr(registry, "REGISTERED", {})
    monkeypatch.setattr(registry, "PLUGIN_ERRORS", [])
    monkeypatch.setattr(registry, "_PLUGINS_LOADED", [True])


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def records(fn, *args, mode="inference"):
    return count_ops(Fn(fn), args, {}, mode=mode)


# ---------------------------------------------------------------------------------------------- custom ops


@torch.library.custom_op("roofline_test::scale_mm", mutates_args=())
def scale_mm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x @ w) * 2


@scale_mm.register_fake
def _(x, w):
    return x.new_empty(x.shape[0], w.shape[1])


@torch.library.custom_op("roofline_test::torch_flops", mutates_args=())
def torch_flops_op(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x @ w


@register_flop_formula(torch.ops.roofline_test.torch_flops)
def _torch_flops_formula(x_shape, w_shape, *args, out_shape=None, **kwargs):
    return 2 * x_shape[0] * x_shape[1] * w_shape[1]


def test_custom_op_without_cost_is_uncounted():
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    (r,) = [r for r in records(scale_mm, x, w) if r.op == "roofline_test::scale_mm"]
    assert (r.flops, r.bytes) == (None, None) and r.note == NO_FORMULA


def test_custom_op_with_torch_flop_formula():
    # torch's formula: 2*3*4*5 = 120 FLOPs; bytes by the compulsory rule: (x 12 + w 20 + out 15) * 4 = 188
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    (r,) = [r for r in records(torch_flops_op, x, w) if r.op == "roofline_test::torch_flops"]
    assert (r.flops, r.bytes, r.math) == (120, 188, "tensor")
    assert "torch.utils.flop_counter" in r.note and "assumed" in r.note


def test_register_cost_functions_and_default_bytes():
    # flops from the arguments: 2*m*k*n + m*n (the scale) = 2*3*4*5 + 15 = 135; bytes unregistered: the
    # compulsory rule, (12 + 20 + 15) * 4 = 188, said in the note
    roofline.register_cost(
        scale_mm, flops=lambda x, w: 2 * x.shape[0] * x.shape[1] * w.shape[1] + x.shape[0] * w.shape[1]
    )
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    (r,) = [r for r in records(scale_mm, x, w) if r.op == "roofline_test::scale_mm"]
    assert (r.flops, r.bytes, r.math, r.dtype) == (135, 188, "tensor", "fp32")
    assert "read once" in r.note


def test_register_cost_numbers_out_val_and_names():
    # numbers, a function of out_val, the op named as a string: all the same key
    roofline.register_cost(
        "roofline_test::scale_mm.default", flops=7, bytes=lambda x, w, out_val: out_val.numel(), math="vector"
    )
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    cost = op_cost(torch.ops.roofline_test.scale_mm.default, (x, w), {}, scale_mm(x, w))
    assert (cost.flops, cost.bytes, cost.math) == (7, 15, "vector")
    assert registry.cost_key(torch.ops.roofline_test.scale_mm) == "roofline_test::scale_mm"
    assert registry.cost_key(torch.ops.roofline_test.scale_mm.default) == "roofline_test::scale_mm"
    assert registry.cost_key(scale_mm) == "roofline_test::scale_mm"
    assert registry.cost_key("add_kernel") == "triton::add_kernel"
    assert registry.cost_key(SimpleNamespace(fn=SimpleNamespace(fn=add_kernel))) == "triton::add_kernel"


def test_register_cost_replaces_a_builtin_formula():
    roofline.register_cost(torch.ops.aten.mm, flops=1, bytes=2)
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    cost = op_cost(torch.ops.aten.mm.default, (a, b), {}, a @ b)
    assert (cost.flops, cost.bytes) == (1, 2)


def test_a_failing_registered_cost_is_uncounted_not_fatal():
    roofline.register_cost(scale_mm, flops=lambda x, w: 1 // 0)
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    (r,) = [r for r in records(scale_mm, x, w) if r.op == "roofline_test::scale_mm"]
    assert r.flops is None and "ZeroDivisionError" in r.note


def test_register_cost_rejects_bad_arguments():
    with pytest.raises(ValueError, match="flops"):
        roofline.register_cost(scale_mm, flops=None)
    with pytest.raises(ValueError, match="math"):
        roofline.register_cost(scale_mm, flops=1, math="simd")


# ------------------------------------------------------------------------------------------------ plugins


def _plugins_module():
    roofline.register_cost("plugin_ns::op", flops=3)


def test_plugins_load_once_and_a_broken_one_is_one_line(monkeypatch):
    monkeypatch.setattr(registry, "_PLUGINS_LOADED", [])

    def broken():
        raise ImportError("no module named kernels_lib")

    found = [
        SimpleNamespace(name="good", value="lib:costs", load=lambda: _plugins_module),
        SimpleNamespace(name="bad", value="broken:costs", load=broken),
    ]
    calls = []

    def entry_points():
        calls.append(1)
        return found

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        errors = registry.load_plugins(entry_points)
    assert registry.REGISTERED["plugin_ns::op"].flops == 3
    assert errors == ["cost plugin 'bad' (broken:costs) failed to load: ImportError: no module named kernels_lib"]
    assert len(caught) == 1 and "\n" not in str(caught[0].message)
    registry.load_plugins(entry_points)
    assert calls == [1]  # loaded once


# -------------------------------------------------------------------------------------------- higher-order


def test_flex_attention_counted_over_its_block_mask():
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    # causal mask over 256 x 256 in 128 x 128 tiles: 3 of 4 tiles computed (density 0.75); batch 1, heads 2,
    # head dim 16: pairs = 1*2*256*256*0.75 = 98304; FLOPs = 2*pairs*(16+16) + 5*pairs = 6291456 + 491520
    mask = fa.create_block_mask(lambda b, h, q, k: q >= k, 1, 1, 256, 256, device="cpu")
    q = torch.randn(1, 2, 256, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = [r for r in records(lambda x: fa.flex_attention(x, x, x, block_mask=mask), q) if "flex" in r.op]
    assert [r.op for r in found] == ["higher_order::flex_attention"]
    assert found[0].flops == 6782976 and found[0].math == "tensor"
    assert "3 of 4 tiles" in found[0].note
    assert fa._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG is False  # restored after counting


def test_flex_attention_without_a_mask_counts_every_pair():
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    # no block mask: flex builds a full one (density 1); batch 1, heads 1, 128 x 128, dim 8:
    # pairs 16384, FLOPs 2*16384*16 + 5*16384 = 606208
    q = torch.randn(1, 1, 128, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = [r for r in records(lambda x: fa.flex_attention(x, x, x), q) if "flex" in r.op]
    assert [r.flops for r in found] == [606208]


def test_cond_and_while_loop_count_their_inner_ops():
    # cond (true branch: x @ x, 4x4: 2*4*4*4 = 128 FLOPs); while_loop: three mm of 4x4
    x = torch.ones(4, 4)
    ops = [
        (r.op, r.flops) for r in records(lambda x: torch.cond(x.sum() > 0, lambda y: y @ y, lambda y: y.cos(), (x,)), x)
    ]
    assert ("aten::mm", 128) in ops and all(not op.startswith("higher_order::") for op, _ in ops)
    from torch._higher_order_ops.while_loop import while_loop

    def loop(x):
        return while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y @ y), (torch.tensor(0), x))

    assert [op for op, _ in ((r.op, r.flops) for r in records(loop, x)) if op == "aten::mm"] == ["aten::mm"] * 3


def test_an_opaque_higher_order_op_is_one_uncounted_record():
    from torch._C import DispatchKey
    from torch._ops import HigherOrderOperator

    class Opaque(HigherOrderOperator):
        def __init__(self):
            super().__init__("roofline_test_opaque")

        def __call__(self, x):
            return super().__call__(x)

    opaque = Opaque()
    opaque.py_impl(DispatchKey.CompositeExplicitAutograd)(lambda x: x * 2)
    for key in (DispatchKey.AutogradCPU, DispatchKey.Autograd):
        opaque.fallthrough(key)
    found = records(lambda x: opaque(x) + 1, torch.randn(3))
    assert [r.op for r in found] == ["higher_order::roofline_test_opaque", "aten::add"]
    assert found[0].flops is None and "not visible" in found[0].note


def add_kernel(x, y, out, n):  # stands for a Triton kernel (a JITFunction's .fn has its name)
    pass


def test_triton_kernel_wrapper_costed_by_kernel_name():
    # a kernel launched through torch (wrap_triton / triton_op) named 'add_kernel': 1 FLOP per element of x (8);
    # bytes unregistered: x, y, out read once (3 * 8 * 4 = 96), no returned output
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

    idx = kernel_side_table.add_kernel(add_kernel)
    x = torch.ones(8)
    kwargs = {"kernel_idx": idx, "kwargs": {"x": x, "y": torch.ones(8), "out": torch.empty(8), "n": 8}}
    name = "triton_kernel_wrapper_mutation"
    assert registry.hop_record_name(name, kwargs) == "triton::add_kernel"
    assert counting._hop_cost(name, (), kwargs, None).flops is None  # nothing registered: uncounted
    roofline.register_cost("add_kernel", flops=lambda x, y, out, n: n, math="vector")
    cost = counting._hop_cost(name, (), kwargs, None)
    assert (cost.flops, cost.bytes, cost.math) == (8, 3 * 8 * FP32, "vector")


# ---------------------------------------------------------------------------------------------- end to end


@pytest.fixture
def fake_cpu(monkeypatch):
    from test_diagnose_cli import FAKE_CPU

    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))


class FlexModel(torch.nn.Module):
    def __init__(self, mask):
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)
        self.mask = mask

    def forward(self, x):
        q = self.proj(x)
        fa = pytest.importorskip("torch.nn.attention.flex_attention")
        return fa.flex_attention(q, q, q, block_mask=self.mask)


def test_flex_attention_diagnoses_cleanly_and_is_timed(fake_cpu):
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    mask = fa.create_block_mask(lambda b, h, q, k: q >= k, 1, 1, 256, 256, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = roofline.diagnose(FlexModel(mask), (torch.randn(1, 2, 256, 16),), warmup=1, iters=1).result
    (flex,) = [p for p in result.placed.points if p.op == "higher_order::flex_attention"]
    assert flex.flops == 6782976 and flex.time_s > 0  # the profile's marker matched: its time is its own
    assert not any("not found in the profile" in n for n in result.notes)


class CustomModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(64, 64))

    def forward(self, x):
        return torch_flops_op(x, self.w)


def test_custom_op_with_torch_flop_formula_diagnoses_cleanly(fake_cpu):
    # torch's formula: 2*32*64*64 = 262144 FLOPs
    result = roofline.diagnose(CustomModel(), (torch.randn(32, 64),), warmup=1, iters=1).result
    (op,) = [p for p in result.placed.points if p.op == "roofline_test::torch_flops"]
    assert op.flops == 262144 and op.time_s > 0
    assert result.placed.uncounted == []


@pytest.mark.parametrize("op", [42, None, "", "  "])
def test_register_cost_refuses_what_is_no_op(op):
    import roofline

    with pytest.raises(ValueError, match="register_cost: "):
        roofline.register_cost(op, flops=1)
