"""Op cost rules of the counting pass: exact FLOPs and bytes of real aten calls on known shapes (CPU).

Each expected value is written as its derivation, so that a reader can check it against docs/op-costs.md.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from roofline.costs import aten as opcosts  # noqa: E402
from roofline.costs.aten import (  # noqa: E402
    NO_FORMULA,
    causal_pairs,
    covered_ops,
    covered_table,
    op_cost,
    unique_numel,
)
from roofline.diagnose.count import count_ops, uncovered  # noqa: E402

FP32 = 4
BF16 = 2
INT64 = 8

DOCS = Path(__file__).resolve().parent.parent / "docs" / "op-costs.md"


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def ops(fn, *args):
    """The records of running ``fn(*args)`` (inference), views and allocations included."""
    return count_ops(Fn(fn), args, {})


def one(fn, *args, op):
    """The single record of aten op ``op`` in ``fn(*args)``."""
    found = [r for r in ops(fn, *args) if r.op == op]
    assert len(found) == 1, [r.op for r in ops(fn, *args)]
    return found[0]


# --------------------------------------------------------------------------------------------- matmuls


def test_mm():
    m, k, n = 3, 5, 7
    r = one(torch.mm, torch.randn(m, k), torch.randn(k, n), op="aten::mm")
    assert r.flops == 2 * m * n * k == 210
    assert r.bytes == (m * k + k * n + m * n) * FP32
    assert (r.dtype, r.math) == ("fp32", "tensor")
    assert r.input_shapes == ((m, k), (k, n)) and r.output_shapes == ((m, n),)
    assert not r.non_contiguous


def test_addmm_bias_counted_once():
    m, k, n = 4, 6, 5
    a, b = torch.randn(m, k), torch.randn(k, n)
    bias = torch.randn(n)
    r = one(torch.addmm, bias, a, b, op="aten::addmm")
    assert r.flops == 2 * m * n * k  # the bias add is epilogue work, not counted (as torch's flop counter)
    assert r.bytes == (n + m * k + k * n + m * n) * FP32  # bias read once: n elements, not m*n
    # an explicitly broadcast bias (stride 0 over rows) is still n unique elements
    expanded = bias.expand(m, n)
    assert expanded.stride() == (0, 1)
    r = one(torch.addmm, expanded, a, b, op="aten::addmm")
    assert r.bytes == (n + m * k + k * n + m * n) * FP32
    assert not r.non_contiguous  # a broadcast is read once, not strided


def test_bmm():
    batch, m, k, n = 2, 3, 4, 5
    r = one(torch.bmm, torch.randn(batch, m, k), torch.randn(batch, k, n), op="aten::bmm")
    assert r.flops == 2 * batch * m * n * k
    assert r.bytes == batch * (m * k + k * n + m * n) * FP32


def test_baddbmm_and_the_gemms_match_torchs_flop_formulas():
    """The GEMM family's FLOPs (roofline.costs.aten.matmul.gemm_flops, computed from the shapes) against the
    formulas torch.utils.flop_counter registers, on shapes no two dims of which are equal."""
    from torch.utils.flop_counter import flop_registry

    batch, m, k, n = 2, 3, 4, 5
    cases = [
        (torch.mm, (torch.randn(m, k), torch.randn(k, n)), "aten::mm", torch.ops.aten.mm),
        (torch.addmm, (torch.randn(n), torch.randn(m, k), torch.randn(k, n)), "aten::addmm", torch.ops.aten.addmm),
        (torch.bmm, (torch.randn(batch, m, k), torch.randn(batch, k, n)), "aten::bmm", torch.ops.aten.bmm),
        (
            torch.baddbmm,
            (torch.randn(batch, m, n), torch.randn(batch, m, k), torch.randn(batch, k, n)),
            "aten::baddbmm",
            torch.ops.aten.baddbmm,
        ),
    ]
    for fn, args, name, packet in cases:
        r = one(fn, *args, op=name)
        assert r.flops == flop_registry[packet](*args, out_val=fn(*args)), name
    assert one(torch.baddbmm, *cases[3][1], op="aten::baddbmm").flops == 2 * batch * m * n * k == 240


def test_the_forward_convolutions_match_torchs_flop_formula():
    """aten::convolution's FLOPs (roofline.costs.aten.conv.conv_flops, from the shapes) against the formula
    torch.utils.flop_counter registers: 1-, 2- and 3-D, grouped, strided and transposed."""
    from torch.utils.flop_counter import flop_registry

    cases = [
        (nn.Conv1d(3, 8, 5, padding=2), torch.randn(2, 3, 17)),
        (nn.Conv2d(4, 6, 3, stride=2, groups=2), torch.randn(2, 4, 11, 13)),
        (nn.Conv3d(2, 4, (1, 3, 3)), torch.randn(1, 2, 3, 7, 9)),
        (nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2), torch.randn(2, 4, 5, 7)),
    ]
    for conv, x in cases:
        r = one(conv, x, op="aten::convolution")
        transposed = isinstance(conv, nn.ConvTranspose2d)
        args = (x, conv.weight, conv.bias, conv.stride, conv.padding, conv.dilation, transposed,
                conv.output_padding, conv.groups)  # fmt: skip
        assert r.flops == flop_registry[torch.ops.aten.convolution](*args, out_val=conv(x)), conv


def test_the_backward_convolutions_match_torchs_flop_formula():
    """aten::convolution_backward's FLOPs (conv_backward_flops, from the shapes) against torch.utils.flop_counter's
    registered formula: 1-, 2- and 3-D, grouped, strided, dilated and transposed, every output_mask that asks
    for grad_input or grad_weight; and the other forward spellings (_convolution, convolution_overrideable) against
    it too."""
    from torch.utils.flop_counter import flop_registry

    aten = torch.ops.aten
    cases = [  # (input, weight, stride, padding, dilation, transposed, groups)
        (torch.randn(2, 3, 17), torch.randn(8, 3, 5), [1], [2], [1], False, 1),
        (torch.randn(2, 4, 11, 13), torch.randn(6, 2, 3, 3), [2, 2], [0, 0], [1, 1], False, 2),
        (torch.randn(1, 2, 3, 7, 9), torch.randn(4, 2, 1, 3, 3), [1, 1, 1], [0, 1, 1], [1, 1, 2], False, 1),
        (torch.randn(2, 4, 5, 7), torch.randn(4, 3, 3, 3), [2, 2], [1, 0], [1, 1], True, 2),
    ]
    masks = ([True, True, True], [True, False, False], [False, True, False], [True, True, False])
    for x, w, stride, padding, dilation, transposed, groups in cases:
        geometry = (stride, padding, dilation, transposed, [0] * len(stride), groups)
        y = aten.convolution(x, w, None, *geometry)
        for name in ("convolution", "_convolution", "convolution_overrideable"):
            func = getattr(aten, name).default
            args = (x, w, None, *geometry) + ((False, False, True, True) if name == "_convolution" else ())
            assert op_cost(func, args, {}, y).flops == flop_registry[func._overloadpacket](*args, out_val=y), name
        grad = torch.randn_like(y)
        for mask in masks:
            args = (grad, x, w, None, *geometry, mask)
            out = aten.convolution_backward(*args)
            expected = flop_registry[aten.convolution_backward](*args, out_val=out)
            got = op_cost(aten.convolution_backward.default, args, {}, out).flops
            assert got == expected > 0, (x.shape, w.shape, transposed, mask)


def test_conv2d():
    conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
    n, h, w = 2, 10, 12
    r = one(conv, torch.randn(n, 3, h, w), op="aten::convolution")
    assert r.flops == 2 * (n * 8 * h * w) * 3 * 3 * 3  # 2 * output elements * Cin * kh * kw
    assert r.bytes == (n * 3 * h * w + 8 * 3 * 3 * 3 + 8 + n * 8 * h * w) * FP32  # x, weight, bias, y
    assert r.math == "tensor"


def test_grouped_conv2d():
    conv = nn.Conv2d(4, 8, kernel_size=3, groups=2, bias=False)
    r = one(conv, torch.randn(1, 4, 5, 5), op="aten::convolution")
    assert r.flops == 2 * (1 * 8 * 3 * 3) * (4 // 2) * 3 * 3  # Cin/groups per output element
    assert r.bytes == (4 * 5 * 5 + 8 * 2 * 3 * 3 + 8 * 3 * 3) * FP32


def test_linear_module():
    lin = nn.Linear(16, 32)
    b, t = 2, 3
    records = count_ops(lin, (torch.randn(b, t, 16),), {})
    assert [r.op for r in records] == ["aten::view", "aten::t", "aten::addmm", "aten::view"]
    addmm = records[2]
    assert addmm.flops == 2 * (b * t) * 32 * 16
    assert addmm.bytes == (32 + b * t * 16 + 16 * 32 + b * t * 32) * FP32  # bias, x, weight, y
    assert not addmm.non_contiguous  # weight.t() is read through BLAS's transpose flag
    assert all((r.flops, r.bytes, r.math) == (0, 0, "none") for r in records if r.op != "aten::addmm")
    assert {r.module for r in records} == {""} and {r.module_type for r in records} == {"Linear"}


def test_fp32_matmul_dtype_tf32_on_cuda_only(monkeypatch):
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    out = torch.mm(a, b)
    cpu = op_cost(torch.ops.aten.mm.default, (a, b), {}, out)
    assert (cpu.dtype, cpu.math) == ("fp32", "tensor")  # the CPU has no TF32
    monkeypatch.setattr(opcosts.Call, "device_type", property(lambda self: "cuda"))
    monkeypatch.setattr(opcosts.matmul, "tf32_enabled", lambda kind="matmul": True)
    on = op_cost(torch.ops.aten.mm.default, (a, b), {}, out)
    assert on.dtype == "tf32" and "TF32" in on.note
    monkeypatch.setattr(opcosts.matmul, "tf32_enabled", lambda kind="matmul": False)
    off = op_cost(torch.ops.aten.mm.default, (a, b), {}, out)
    assert off.dtype == "fp32" and "TF32 off" in off.note
    assert on.flops == off.flops == cpu.flops == 2 * 2 * 4 * 3


def test_tf32_enabled_reads_torch_settings():
    assert isinstance(opcosts.tf32_enabled("matmul"), bool)
    assert isinstance(opcosts.tf32_enabled("conv"), bool)


def test_matmul_flops_agree_with_torch_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode

    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.Conv1d(1, 2, 3))
    x = torch.randn(5, 1, 8)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(x)
    records = count_ops(model, (x,), {})
    assert sum(r.flops for r in records if r.math == "tensor") == counter.get_total_flops()


# --------------------------------------------------------------------------------------- norms, softmax


def test_layer_norm():
    rows, cols = 6, 10
    ln = nn.LayerNorm(cols)
    r = one(ln, torch.randn(rows, cols), op="aten::native_layer_norm")
    assert r.flops == 7 * rows * cols  # roofline.costs.norms: 5 + weight + bias per element
    # x read, weight and bias read, y written, mean and rstd (one per row, fp32) written
    assert r.bytes == (rows * cols + 2 * cols + rows * cols + 2 * rows) * FP32
    assert r.math == "vector"
    no_affine = one(nn.LayerNorm(cols, elementwise_affine=False), torch.randn(rows, cols), op="aten::native_layer_norm")
    assert no_affine.flops == 5 * rows * cols
    assert no_affine.bytes == (rows * cols + rows * cols + 2 * rows) * FP32


def test_softmax_and_log_softmax():
    x = torch.randn(4, 9)
    r = one(lambda t: t.softmax(-1), x, op="aten::_softmax")
    assert r.flops == 5 * 4 * 9  # max, subtract, exp, sum, divide
    assert r.bytes == 2 * 4 * 9 * FP32
    r = one(lambda t: t.log_softmax(-1), x, op="aten::_log_softmax")
    assert r.flops == 5 * 4 * 9


def test_batch_norm_eval_folds_scale_and_shift():
    bn = nn.BatchNorm2d(3).eval()
    r = one(bn, torch.randn(2, 3, 4, 4), op="aten::native_batch_norm")
    assert r.flops == 2 * 2 * 3 * 4 * 4  # x*scale + shift


# ---------------------------------------------------------------------------------------- element-wise


@pytest.mark.parametrize(("approximate", "per_element"), [("none", 5), ("tanh", 9)])
def test_gelu(approximate, per_element):
    x = torch.randn(3, 7)
    r = one(lambda t: F.gelu(t, approximate=approximate), x, op="aten::gelu")
    assert r.flops == per_element * 3 * 7  # roofline.costs.elementwise: gelu 5, gelu_tanh 9
    assert r.bytes == 2 * 3 * 7 * FP32
    assert (r.math, r.dtype) == ("vector", "fp32")


def test_add_with_broadcasting():
    x, b = torch.randn(4, 8), torch.randn(8)
    r = one(torch.add, x, b, op="aten::add")
    assert r.flops == 4 * 8  # one per output element
    assert r.bytes == (4 * 8 + 8 + 4 * 8) * FP32  # the broadcast row is read once
    r = one(lambda t, u: t + u.expand(4, 8), x, b, op="aten::add")
    assert r.bytes == (4 * 8 + 8 + 4 * 8) * FP32  # an expanded (stride-0) input: its unique elements
    r = one(lambda t: t + t, x, op="aten::add")
    assert r.bytes == (4 * 8 + 4 * 8) * FP32  # the same tensor twice is read once
    r = one(lambda t, u: torch.add(t, u, alpha=2), x, x.clone(), op="aten::add")
    assert r.flops == 2 * 4 * 8  # x + alpha*y: a multiply and an add


def test_in_place_add_reads_and_writes():
    x, y = torch.randn(5, 6), torch.randn(5, 6)
    r = one(lambda a, b: a.add_(b), x, y, op="aten::add_")
    assert r.flops == 5 * 6
    assert r.bytes == (5 * 6 + 5 * 6 + 5 * 6) * FP32  # read x, read y, write x
    r = one(lambda a: a.mul_(2.0), x, op="aten::mul_")
    assert r.bytes == 2 * 5 * 6 * FP32  # read + write of the mutated tensor


def test_overwriting_ops_do_not_read():
    x = torch.randn(5, 6)
    r = one(lambda a: a.zero_(), x, op="aten::zero_")
    assert (r.flops, r.bytes) == (0, 5 * 6 * FP32)
    r = one(lambda a, b: a.copy_(b), torch.empty(5, 6), x, op="aten::copy_")
    assert (r.flops, r.bytes) == (0, 2 * 5 * 6 * FP32)  # source read, destination written


def test_view_chain_moves_nothing():
    x = torch.randn(2, 3, 4)
    records = ops(lambda t: t.view(6, 4).t().unsqueeze(0).permute(2, 0, 1).expand(6, 3, 4)[1:, :, ::2], x)
    assert len(records) >= 6
    for r in records:
        assert (r.flops, r.bytes, r.math) == (0, 0, "none"), r.op
        assert not r.non_contiguous  # a view reads nothing


def test_copy_of_transposed_tensor():
    x = torch.randn(16, 24)
    r = one(lambda t: t.t().contiguous(), x, op="aten::clone")
    assert (r.flops, r.bytes) == (0, 2 * 16 * 24 * FP32)
    assert r.non_contiguous and r.math == "vector"
    r = one(lambda t: t.to(torch.bfloat16), x, op="aten::_to_copy")
    assert (r.flops, r.bytes) == (0, 16 * 24 * FP32 + 16 * 24 * BF16)  # read at fp32, written at bf16
    assert not r.non_contiguous


def test_unique_numel():
    assert unique_numel(torch.randn(3, 1).expand(3, 5)) == 3
    assert unique_numel(torch.randn(())) == 1
    assert unique_numel(torch.randn(0, 4)) == 0
    # an mkldnn tensor reports stride (1, 0, 0, 0): all 2*2*4*4 = 64 elements, not 1
    if torch.backends.mkldnn.is_available():
        assert unique_numel(torch.randn(2, 2, 4, 4).to_mkldnn()) == 64


# --------------------------------------------------------------------------------------- gathers


def test_embedding_counts_rows_touched():
    vocab, dim, b, t = 1000, 16, 2, 3
    emb = nn.Embedding(vocab, dim)
    r = one(emb, torch.randint(0, vocab, (b, t)), op="aten::embedding")
    # rows touched (b*t rows of dim), indices read, output written; not vocab*dim
    assert r.bytes == (b * t * dim) * FP32 + (b * t) * INT64 + (b * t * dim) * FP32
    assert r.flops == 0


def test_index_select():
    x = torch.randn(50, 8)
    idx = torch.tensor([3, 7, 7, 1])
    r = one(lambda t, i: t.index_select(0, i), x, idx, op="aten::index_select")
    assert r.bytes == 4 * 8 * FP32 + 4 * INT64 + 4 * 8 * FP32  # 4 rows (a repeat counts again)
    r = one(lambda t, i: t[i], x, idx, op="aten::index")
    assert r.bytes == 4 * 8 * FP32 + 4 * INT64 + 4 * 8 * FP32


def test_reduction():
    x = torch.randn(6, 10)
    r = one(lambda t: t.sum(-1), x, op="aten::sum")
    assert r.flops == 6 * 10  # one per input element
    assert r.bytes == (6 * 10 + 6) * FP32  # input read, small output written
    r = one(lambda t: t.amax(-1), x, op="aten::amax")
    assert (r.flops, r.bytes) == (6 * 10, (6 * 10 + 6) * FP32)
    r = one(lambda t: t.mean(), x, op="aten::mean")
    assert (r.flops, r.bytes) == (6 * 10, (6 * 10 + 1) * FP32)


# ------------------------------------------------------------------------------------------- attention


def test_causal_pairs():
    assert causal_pairs(4, 4) == 4 + 3 + 2 + 1
    assert causal_pairs(3, 5) == 1 + 2 + 3  # torch's is_causal: top-left aligned
    assert causal_pairs(5, 3) == 1 + 2 + 3 + 3 + 3
    assert causal_pairs(3, 5, "bottom_right") == 3 + 4 + 5  # flash-attn: queries aligned to the end
    assert causal_pairs(5, 3, "bottom_right") == 0 + 0 + 1 + 2 + 3


def test_sdpa_causal():
    b, h, s, d = 2, 3, 8, 4
    q, k, v = (torch.randn(b, h, s, d) for _ in range(3))
    records = ops(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v)
    (r,) = [r for r in records if "attention" in r.op]
    pairs = b * h * (s * (s + 1) // 2)  # 36 per head, about half of s*s
    assert r.flops == 2 * pairs * d + 2 * pairs * d + 5 * pairs  # Q K^T, P V, softmax
    # q, k, v read once, O written, logsumexp (b*h*s, fp32) written; no s x s scores
    assert r.bytes == (3 * b * h * s * d + b * h * s * d + b * h * s) * FP32
    assert (r.math, r.dtype) == ("tensor", "fp32")
    full = [r for r in ops(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), q, k, v) if "attention" in r.op]
    assert full[0].flops == (4 * d + 5) * b * h * s * s


def test_sdpa_gqa():
    try:
        F.scaled_dot_product_attention(
            torch.randn(1, 4, 2, 2), torch.randn(1, 2, 2, 2), torch.randn(1, 2, 2, 2), enable_gqa=True
        )
    except TypeError:
        pytest.skip("torch without enable_gqa")
    b, hq, hkv, s, d = 1, 8, 2, 6, 4
    q = torch.randn(b, hq, s, d)
    k, v = torch.randn(b, hkv, s, d), torch.randn(b, hkv, s, d)
    records = ops(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), q, k, v)
    attention = [r for r in records if "attention" in r.op]
    assert len(attention) == 1, [r.op for r in records]
    r = attention[0]
    pairs = b * hq * (s * (s + 1) // 2)  # every query head scores its pairs
    assert r.flops == 4 * pairs * d + 5 * pairs
    # K and V read once at their own (kv_heads) size
    assert r.bytes == (b * hq * s * d + 2 * b * hkv * s * d + b * hq * s * d + b * hq * s) * FP32
    assert "GQA" in r.note


def test_sdpa_via_op_cost_with_flash_cuda_signature():
    # the CUDA flash op's schema, costed from shapes alone (its outputs built with the shapes the kernel returns)
    b, h, s, d = 1, 2, 5, 8
    q, k, v = (torch.randn(b, h, s, d, dtype=torch.bfloat16) for _ in range(3))
    rng_state = torch.empty(2, dtype=torch.int64)
    out = (torch.empty_like(q), torch.empty(b, h, s), torch.empty(0), torch.empty(0), s, s, rng_state)
    cost = op_cost(torch.ops.aten._scaled_dot_product_flash_attention.default, (q, k, v, 0.0, True), {}, out)
    pairs = b * h * (s * (s + 1) // 2)
    assert cost.flops == 4 * pairs * d + 5 * pairs
    # q, k, v read; O written (bf16), logsumexp written (fp32), the 2-element rng state written
    assert cost.bytes == 3 * (b * h * s * d) * BF16 + (b * h * s * d) * BF16 + (b * h * s) * FP32 + 2 * INT64
    assert cost.dtype == "bf16"
    # the same q passed as k and v is read once
    same = op_cost(torch.ops.aten._scaled_dot_product_flash_attention.default, (q, q, q, 0.0, True), {}, out)
    assert cost.bytes - same.bytes == 2 * (b * h * s * d) * BF16


# -------------------------------------------------------------------------------------------- uncovered


def test_no_formula_is_none_not_zero():
    x = torch.eye(4)  # a general (non-symmetric) eigendecomposition: no cost formula
    out = torch.ops.aten.linalg_eig.default(x)
    cost = op_cost(torch.ops.aten.linalg_eig.default, (x,), {}, out)
    assert (cost.flops, cost.bytes, cost.note) == (None, None, NO_FORMULA)
    records = ops(lambda t: torch.linalg.eig(t).eigenvalues, x)
    missing = uncovered(records)
    assert [r.op for r in missing] == ["aten::linalg_eig"]
    assert missing[0].flops is None and missing[0].bytes is None and not missing[0].counted


def test_docs_table_lists_every_covered_op():
    text = DOCS.read_text()
    documented = set(re.findall(r"`(aten::[A-Za-z0-9_]+)`", text))
    covered = {name for names in covered_ops().values() for name in names}
    assert covered - documented == set()
    assert documented - covered == set()


@pytest.mark.parametrize(
    "module, op, per_element",
    [
        (nn.Softshrink(), "aten::softshrink", 3),  # two compares, an add
        (nn.Hardshrink(), "aten::hardshrink", 2),  # abs, a compare/select
        (nn.CELU(), "aten::celu", 5),  # divide, exp, -1, *alpha, select
        (nn.GLU(), "aten::glu", 5),  # per output element: sigmoid 4, a multiply
    ],
)
def test_more_activations_are_counted_exactly(module, op, per_element):
    x = torch.randn(8, 16)
    r = one(module, x, op=op)
    out = 8 * (8 if op == "aten::glu" else 16)  # glu halves the last dim
    assert r.flops == per_element * out
    assert r.bytes == (8 * 16 + out) * FP32  # x read once, the output written once


def test_activation_backwards_are_counted_exactly():
    from roofline.diagnose.count import count_ops

    x = torch.randn(8, 16, requires_grad=True)
    prelu = {r.op: r for r in count_ops(nn.PReLU(), (x,), {}, mode="training")}
    back = prelu["aten::_prelu_kernel_backward"]
    assert back.flops == 3 * 8 * 16  # select, multiply for dx; a multiply for dw, per element
    shrink = {r.op: r for r in count_ops(nn.Softshrink(), (x,), {}, mode="training")}
    assert shrink["aten::softshrink_backward"].flops == 2 * 8 * 16


def test_docs_table_is_the_generated_one():
    # docs/op-costs.md's covered-ops section is exactly what the registry generates (python -m roofline.costs.aten
    # --write docs/op-costs.md regenerates it)
    from roofline.costs.aten.table import generated_section

    section = generated_section(DOCS.read_text(encoding="utf-8"))
    assert section is not None, "docs/op-costs.md lost the markers of its generated section"
    assert section == covered_table(), "run: python -m roofline.costs.aten --write docs/op-costs.md"


def test_generated_table_lists_every_covered_op_once_per_family():
    text = covered_table()
    for family, names in covered_ops().items():
        for name in names:
            assert f"`{name}`" in text, (family, name)
    # a described row names its FLOPs: relu's row says 1, gelu's its two forms, sum's 1 per input element
    assert "| `aten::relu`, `aten::relu_` | 1 | max(x, 0): one compare/select |" in text
    assert "| `aten::var` | 4 |" in text
    assert "### Matmuls (math `tensor`)" in text


def test_generated_section_replaced_in_place(tmp_path):
    from roofline.costs.aten.__main__ import main
    from roofline.costs.aten.table import BEGIN, END

    path = tmp_path / "op-costs.md"
    path.write_text(f"# head\n\n{BEGIN}\nstale\n{END}\n\ntail\n", encoding="utf-8")
    assert main(["--write", str(path)]) == 0
    text = path.read_text(encoding="utf-8")
    assert text.startswith(f"# head\n\n{BEGIN}\n") and text.endswith(f"{END}\n\ntail\n")
    assert "stale" not in text and covered_table() in text
    path.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(ValueError, match="markers"):
        main(["--write", str(path)])


def test_describe_checks_the_family():
    with pytest.raises(RuntimeError, match="not registered"):
        opcosts.describe("elementwise", ("mm",), "1", "wrong family")
    with pytest.raises(RuntimeError, match="not registered"):
        opcosts.describe("matmul", ("no_such_op",), "1", "unknown op")
