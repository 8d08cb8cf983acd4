"""The counting pass: module paths, phases, uncounted ops, and hooks/mode removed on every exit (CPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from roofline.costs.aten import NO_FORMULA  # noqa: E402
from roofline.diagnose.count import count_ops, uncovered, uncovered_summary  # noqa: E402
from roofline.errors import UserCodeError  # noqa: E402


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Boom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        x = self.fc(x)
        raise ValueError("user bug")


def _hook_count(model: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def _active_mode():
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    return _get_current_dispatch_mode()


def test_mlp_module_paths_and_types():
    records = count_ops(MLP(), (torch.randn(3, 8),), {})
    counted = [r for r in records if r.math != "none"]
    assert [(r.module, r.module_type, r.op) for r in counted] == [
        ("fc1", "Linear", "aten::addmm"),
        ("act", "GELU", "aten::gelu"),
        ("fc2", "Linear", "aten::addmm"),
    ]
    assert [r.index for r in records] == list(range(len(records)))
    assert {r.phase for r in records} == {"forward"}
    fc1, act, fc2 = counted
    assert fc1.flops == 2 * 3 * 32 * 8
    assert act.flops == 5 * 3 * 32
    assert fc2.flops == 2 * 3 * 4 * 32
    assert fc1.input_dtypes == ("fp32", "fp32", "fp32")
    assert fc2.output_shapes == ((3, 4),)
    assert not uncovered(records)


def test_nested_paths_use_named_modules():
    model = nn.Sequential(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), nn.Linear(4, 2))
    records = count_ops(model, (torch.randn(2, 4),), {})
    counted = [(r.module, r.module_type) for r in records if r.math != "none"]
    assert counted == [("0.0", "Linear"), ("0.1", "ReLU"), ("1", "Linear")]


def test_training_records_backward_ops():
    model = MLP()
    records = count_ops(model, (torch.randn(3, 8),), {}, mode="training")
    forward = [r for r in records if r.phase == "forward"]
    backward = [r for r in records if r.phase == "backward"]
    assert forward and backward
    # every forward op comes before every backward op
    assert max(r.index for r in forward) < min(r.index for r in backward)
    # the backward GEMMs (grad input, grad weight) are attributed to the Linear that created them
    mms = [(r.module, r.module_type) for r in backward if r.op == "aten::mm"]
    assert mms.count(("fc2", "Linear")) == 2 and mms.count(("fc1", "Linear")) >= 1
    gelu_bw = [r for r in backward if r.op == "aten::gelu_backward"]
    assert [(r.module, r.flops) for r in gelu_bw] == [("act", 11 * 3 * 32)]
    # the loss run_once sums is the model's own forward work (module ''), not backward
    assert any(r.op == "aten::sum" and r.module == "" and r.phase == "forward" for r in records)
    assert model.fc1.weight.grad is not None


def test_backward_of_functional_ops_belongs_to_the_enclosing_module():
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.up = nn.Linear(4, 8)
            self.down = nn.Linear(8, 4)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(x)))  # gelu and + are the block's own ops

    model = nn.Sequential(Block(), nn.Linear(4, 2))
    records = count_ops(model, (torch.randn(3, 4, requires_grad=True),), {}, mode="training")
    (gelu_fw,) = [r for r in records if r.op == "aten::gelu"]
    (gelu_bw,) = [r for r in records if r.op == "aten::gelu_backward"]
    assert (gelu_fw.module, gelu_fw.module_type) == ("0", "Block")
    assert (gelu_bw.module, gelu_bw.module_type, gelu_bw.phase) == ("0", "Block", "backward")
    backward_mms = {r.module for r in records if r.op == "aten::mm" and r.phase == "backward"}
    assert backward_mms == {"0.up", "0.down", "1"}


def test_uncovered_op_is_listed_with_none():
    class Eig(nn.Module):  # a general (non-symmetric) eigendecomposition: no cost formula
        def forward(self, x):
            return torch.linalg.eig(x).eigenvalues * 2

    records = count_ops(Eig(), (torch.eye(4),), {})
    missing = uncovered(records)
    assert len(missing) == 1 and missing[0].op == "aten::linalg_eig"
    assert missing[0].flops is None and missing[0].bytes is None and missing[0].note == NO_FORMULA
    assert uncovered_summary(records) == {"aten::linalg_eig": 1}
    assert [r.op for r in records if r.counted] == ["aten::mul"]


def test_custom_op_without_formula_is_uncovered():
    library = getattr(torch, "library", None)
    if library is None or not hasattr(library, "custom_op"):
        pytest.skip("torch without torch.library.custom_op")

    @library.custom_op("roofline_test::mystery", mutates_args=())
    def mystery(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    class Mystery(nn.Module):
        def forward(self, x):
            return mystery(x)

    records = count_ops(Mystery(), (torch.randn(3),), {})
    assert [r.op for r in uncovered(records)] == ["roofline_test::mystery"]


def test_hooks_and_mode_removed_after_success():
    model = MLP()
    before = _hook_count(model)
    count_ops(model, (torch.randn(2, 8),), {}, mode="training")
    assert _hook_count(model) == before == 0
    assert _active_mode() is None


def test_hooks_and_mode_removed_when_the_model_raises():
    model = Boom()
    calls = []
    model.fc.register_forward_hook(lambda *args: calls.append(1))  # the user's own hook stays
    with pytest.raises(UserCodeError, match="user bug"):
        count_ops(model, (torch.randn(2, 4),), {})
    assert calls == [1]
    assert len(model.fc._forward_hooks) == 1 and not model.fc._forward_pre_hooks
    assert not model._forward_hooks and not model._forward_pre_hooks
    assert _active_mode() is None
    # a later count starts clean
    model.fc._forward_hooks.clear()
    records = count_ops(model.fc, (torch.randn(2, 4),), {})
    assert [r.module for r in records] == ["", ""]


def test_kwargs_and_non_contiguous_inputs():
    class Transposed(nn.Module):
        def forward(self, x, *, scale):
            return x.t().contiguous() * scale

    records = count_ops(Transposed(), (torch.randn(4, 6),), {"scale": 2.0})
    clone = next(r for r in records if r.op == "aten::clone")
    assert clone.non_contiguous and clone.input_shapes == ((6, 4),)
    mul = next(r for r in records if r.op == "aten::mul")
    assert not mul.non_contiguous


def test_input_ids_tell_one_tensor_read_twice_from_two_tensors():
    import torch

    from roofline.diagnose.count import count_ops

    class M(torch.nn.Module):
        def forward(self, x, y):
            return (x * x + y) * x

    mul, add, mul2 = count_ops(M(), (torch.randn(8), torch.randn(8)), {})
    assert mul.input_ids[0] == mul.input_ids[1]  # x * x: one storage
    assert add.input_ids[1] not in mul.input_ids  # y: another, of the same shape
    assert mul2.input_ids[1] == mul.input_ids[0]  # x again
    assert add.input_ids[0] != mul.input_ids[0]  # the product: a fresh tensor
