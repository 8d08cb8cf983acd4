"""Exact cost formulas of the sequence-model, loss, sort and view families (roofline/costs/aten/rnn.py,
transformer.py, losses.py, sorting.py and movement.py's unsafe and in-place views): FLOPs and bytes for small
known shapes against values derived by hand in the comments. CUDA-only ops (cuDNN RNN, the fused CUDA cells,
cuDNN CTC) are costed on meta tensors or hand-built outputs."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from roofline.costs import aten as opcosts  # noqa: E402
from roofline.costs.aten import op_cost  # noqa: E402
from roofline.costs.aten.rnn import CELL_BACKWARD_FLOPS, GATE_FLOPS, RNN_BACKWARD_FLOPS  # noqa: E402
from roofline.costs.aten.sorting import log2_ceil  # noqa: E402
from roofline.diagnose.count import count_ops, uncovered  # noqa: E402

FP32 = 4
INT64 = 8
aten = torch.ops.aten


class Fn(nn.Module):
    """A model that calls ``fn``; a module captured in ``fn``'s closure is not a submodule, so no hooks reach it
    (the transformer fast paths refuse modules with hooks)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def records(fn, *args, mode="inference"):
    return count_ops(Fn(fn), args, {}, mode=mode)


def only(recs, op):
    found = [r for r in recs if r.op == op]
    assert len(found) == 1, [r.op for r in recs]
    return found[0]


def meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, device="meta", dtype=dtype)


# ------------------------------------------------------------------------------------------ constants


def test_gate_math_constants():
    # LSTM: igates + hgates 4, 3 sigmoids 3*4, tanh 1, c' = f*c + i*g 3, h' = o*tanh(c') 2
    assert GATE_FLOPS["lstm"] == 4 + 12 + 1 + 3 + 2 == 22
    # GRU: r, z: add + sigmoid 2*5; n = tanh(in + r*hn) 3; h' = n + z*(h - n) 3
    assert GATE_FLOPS["gru"] == 10 + 3 + 3 == 16
    assert GATE_FLOPS["rnn_tanh"] == GATE_FLOPS["rnn_relu"] == 2
    assert CELL_BACKWARD_FLOPS == {"lstm": 23, "gru": 16}
    assert RNN_BACKWARD_FLOPS == {"lstm": 24, "gru": 18, "rnn_tanh": 4, "rnn_relu": 2}
    assert [log2_ceil(n) for n in (1, 2, 3, 4, 5, 24, 1024)] == [0, 1, 2, 2, 3, 5, 10]


# ------------------------------------------------------------------------------------- RNNs: oneDNN (CPU)

T, B, IN, H = 5, 3, 4, 6


def test_mkldnn_lstm_layers_forward_and_backward():
    lstm = nn.LSTM(IN, H, num_layers=2, bidirectional=True)
    x = torch.randn(T, B, IN, requires_grad=True)
    recs = count_ops(lstm, (x,), {}, mode="training")
    fwd = [r for r in recs if r.op == "aten::mkldnn_rnn_layer"]
    bwd = [r for r in recs if r.op == "aten::mkldnn_rnn_layer_backward"]
    assert len(fwd) == len(bwd) == 4  # 2 layers x 2 directions, one call each
    rows, gates = T * B, 4 * H
    # layer 0: 2*rows*(W_ih 24x4 + W_hh 24x6) + rows*H*(22 + 2 bias vectors x 4 gates)
    layer0 = 2 * rows * (gates * IN + gates * H) + rows * H * (22 + 8)
    assert layer0 == 7200 + 2700
    layer1 = 2 * rows * (gates * 2 * H + gates * H) + rows * H * 30  # its input is both directions: 2H = 12
    assert [r.flops for r in fwd] == [layer0, layer0, layer1, layer1]
    # bytes of layer 0: x, W_ih, W_hh, b_ih, b_hh, hx, cx read; output, hy, cy and the uint8 workspace written
    workspace = math.prod(fwd[0].output_shapes[3])
    read = T * B * IN + gates * IN + gates * H + 2 * gates + 2 * B * H
    written = T * B * H + 2 * B * H
    assert fwd[0].bytes == (read + written) * FP32 + workspace
    assert (fwd[0].math, fwd[0].dtype) == ("tensor", "fp32")
    # backward: data and weight GEMMs (2x the forward's) + rows*H*(24 + 8 bias-gradient adds)
    assert sorted(r.flops for r in bwd) == sorted(
        [2 * 7200 + rows * H * (24 + 8)] * 2 + [2 * (2 * rows * (gates * 2 * H + gates * H)) + rows * H * 32] * 2
    )
    assert not uncovered(recs)


def test_mkldnn_batch_first_rows():
    lstm = nn.LSTM(IN, H, batch_first=True, bias=False)
    r = only(count_ops(lstm, (torch.randn(B, T, IN),), {}), "aten::mkldnn_rnn_layer")
    # rows = B x T whatever the layout; no biases: the zero biases oneDNN is handed are read, not added
    assert r.flops == 2 * (B * T) * (4 * H * IN + 4 * H * H) + B * T * H * 22


# ---------------------------------------------------------------------------------- RNNs: cuDNN on meta


def _cudnn_weights(mode_gates, layers, dirs, hidden, inp, biases=True, proj=0):
    weights = []
    for layer in range(layers):
        for _ in range(dirs):
            size_in = inp if layer == 0 else (proj or hidden) * dirs
            weights += [meta(mode_gates * hidden, size_in), meta(mode_gates * hidden, proj or hidden)]
            if biases:
                weights += [meta(mode_gates * hidden), meta(mode_gates * hidden)]
            if proj:
                weights.append(meta(proj, hidden))
    return weights


def test_cudnn_lstm_two_layers_bidirectional():
    weights = _cudnn_weights(4, 2, 2, H, IN)
    buf = meta(sum(w.numel() for w in weights))
    x, hx, cx = meta(T, B, IN), meta(4, B, H), meta(4, B, H)
    args = (x, weights, 4, buf, hx, cx, 2, H, 0, 2, False, 0.0, True, True, [], None)
    out = aten._cudnn_rnn.default(*args)
    cost = op_cost(aten._cudnn_rnn.default, args, {}, out)
    rows = T * B
    # per direction: layer 0 W_ih 24x4 + W_hh 24x6 = 240, layer 1 W_ih 24x12 + W_hh 24x6 = 432 elements
    gemm = 2 * rows * (2 * 240 + 2 * 432)
    assert gemm == 40320
    assert cost.flops == gemm + 4 * rows * H * (22 + 8)  # 4 layer-directions of gate math with biases
    # read: x 60, hx 72, cx 72, weights 2*(96+144+48) + 2*(288+144+48) = 1536 (the flat buffer they view is not
    # read again); written: output (5, 3, 12) 180, hy 72, cy 72, the (empty) reserve; weight_buf is the input's
    assert cost.bytes == (60 + 72 + 72 + 1536 + 180 + 72 + 72) * FP32
    assert (cost.math, cost.dtype) == ("tensor", "fp32")

    # no meta kernel for the backward: its outputs (grad_input, grad_hx, grad_cx, grad_weights) built by hand
    grads = (meta(T, B, IN), meta(4, B, H), meta(4, B, H), [meta(*w.shape) for w in weights])
    bargs = (x, weights, 4, buf, hx, cx, out[0], out[0], out[1], out[2], 2, H, 0, 2, False, 0.0, True, True, [],
             None, out[3], [True, True, True, True])  # fmt: skip
    back = op_cost(aten._cudnn_rnn_backward.default, bargs, {}, grads)
    units = 4 * rows * H
    # data pass: GEMMs + 24 per unit; weight pass: GEMMs + 2 bias vectors x 4 gates per unit
    assert back.flops == (gemm + units * 24) + (gemm + units * 8)
    only_data = op_cost(aten._cudnn_rnn_backward.default, (*bargs[:-1], [True, True, True, False]), {}, grads)
    assert only_data.flops == gemm + units * 24
    # read: x, weights, hx, cx, output, grad_output, grad_hy, grad_cy (out[0..2] again: read once), reserve;
    # written: grad_input 60, grad_hx 72, grad_cx 72, grad_weights 1536
    assert back.bytes == (60 + 1536 + 72 + 72 + 180 + 72 + 72 + 60 + 72 + 72 + 1536) * FP32


def test_cudnn_gru_no_bias_and_lstm_projection():
    weights = _cudnn_weights(3, 1, 1, H, IN, biases=False)
    x, hx = meta(T, B, IN), meta(1, B, H)
    args = (x, weights, 2, None, hx, None, 3, H, 0, 1, False, 0.0, False, False, [], None)
    out = aten._cudnn_rnn.default(*args)
    cost = op_cost(aten._cudnn_rnn.default, args, {}, out)
    assert cost.flops == 2 * T * B * (18 * IN + 18 * H) + T * B * H * 16  # GRU: 3 gates, no bias adds
    # projection P = 3: W_ih 24x4, W_hh 24x3 (the recurrence runs on P), W_hr 3x6, gate math on H units
    p = 3
    weights = _cudnn_weights(4, 1, 1, H, IN, proj=p)
    x, hx, cx = meta(T, B, IN), meta(1, B, p), meta(1, B, H)
    args = (x, weights, 5, None, hx, cx, 2, H, p, 1, False, 0.0, False, False, [], None)
    cost = op_cost(aten._cudnn_rnn.default, args, {}, aten._cudnn_rnn.default(*args))
    assert cost.flops == 2 * T * B * (24 * IN + 24 * p + p * H) + T * B * H * 30


def test_cudnn_rnn_tf32(monkeypatch):
    weights = _cudnn_weights(1, 1, 1, H, IN)
    x, hx = meta(T, B, IN), meta(1, B, H)
    args = (x, weights, 4, None, hx, None, 1, H, 0, 1, False, 0.0, False, False, [], None)
    out = aten._cudnn_rnn.default(*args)
    monkeypatch.setattr(opcosts.Call, "device_type", property(lambda self: "cuda"))
    monkeypatch.setattr(opcosts.rnn, "rnn_tf32_enabled", lambda: True)
    on = op_cost(aten._cudnn_rnn.default, args, {}, out)
    monkeypatch.setattr(opcosts.rnn, "rnn_tf32_enabled", lambda: False)
    off = op_cost(aten._cudnn_rnn.default, args, {}, out)
    assert (on.dtype, off.dtype) == ("tf32", "fp32") and "TF32 off" in off.note
    # Elman tanh: 2*rows*(6x4 + 6x6) + rows*H*(2 + 2 bias adds)
    assert on.flops == off.flops == 2 * T * B * (6 * IN + 6 * H) + T * B * H * 4
    assert isinstance(opcosts.rnn.rnn_tf32_enabled(), bool)


# --------------------------------------------------------------------------------- fused CUDA cells


def test_fused_lstm_cell_and_backward():
    ig, hg, cx, bi, bh = meta(B, 4 * H), meta(B, 4 * H), meta(B, H), meta(4 * H), meta(4 * H)
    out = aten._thnn_fused_lstm_cell.default(ig, hg, cx, bi, bh)
    cost = op_cost(aten._thnn_fused_lstm_cell.default, (ig, hg, cx, bi, bh), {}, out)
    assert cost.flops == B * H * (22 + 8)  # two bias vectors: 4 adds each
    # read: two (3, 24) gate blocks, cx, two biases; written: hy, cy, the (3, 24) workspace
    assert cost.bytes == (72 + 72 + 18 + 24 + 24 + 18 + 18 + 72) * FP32
    assert cost.math == "vector"
    no_bias = op_cost(aten._thnn_fused_lstm_cell.default, (ig, hg, cx), {}, (meta(B, H), meta(B, H), meta(B, 4 * H)))
    assert no_bias.flops == B * H * 22
    ghy, gcy = meta(B, H), meta(B, H)
    bargs = (ghy, gcy, cx, out[1], out[2], True)
    back = op_cost(aten._thnn_fused_lstm_cell_backward_impl.default, bargs,
                   {}, aten._thnn_fused_lstm_cell_backward_impl.default(*bargs))  # fmt: skip
    assert back.flops == B * H * (23 + 4)  # the bias gradient sums 4 gates per unit over the batch


def test_fused_gru_cell_hand_built_outputs():
    # no meta kernel: the outputs are built by hand (hy, and the (B, 5H) workspace)
    ig, hg, hx = meta(B, 3 * H), meta(B, 3 * H), meta(B, H)
    out = (meta(B, H), meta(B, 5 * H))
    cost = op_cost(aten._thnn_fused_gru_cell.default, (ig, hg, hx, meta(3 * H), meta(3 * H)), {}, out)
    assert cost.flops == B * H * (16 + 6)
    assert cost.bytes == (54 + 54 + 18 + 18 + 18 + 18 + 90) * FP32
    grads = (meta(B, 3 * H), meta(B, 3 * H), meta(B, H), meta(3 * H), meta(3 * H))
    back = op_cost(aten._thnn_fused_gru_cell_backward.default, (meta(B, H), out[1], True), {}, grads)
    assert back.flops == B * H * (16 + 6)  # cell backward 16, two bias gradients 3 + 3
    back = op_cost(aten._thnn_fused_gru_cell_backward.default, (meta(B, H), out[1], False), {}, grads)
    assert back.flops == B * H * 16


# ------------------------------------------------------------------------------ transformer fast paths


def test_native_multi_head_attention():
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    q = torch.randn(2, 5, 8)
    r = only(records(lambda t: mha(t, t, t)[0], q), "aten::_native_multi_head_attention")
    tokens, e, pairs = 2 * 5, 8, 2 * 5 * 5  # pairs per head
    in_proj = 2 * e * e * 3 * tokens  # Q, K, V projections
    scores = 2 * (2 * pairs * 4) * 2  # Q K^T and P V: 2 heads x 2*pairs*D, D = 4
    softmax = 5 * 2 * pairs
    out_proj = 2 * tokens * e * e
    average = 2 * pairs  # need_weights with average_attn_weights: a sum over heads per score
    assert r.flops == in_proj + scores + softmax + out_proj + average == 3840 + 1600 + 500 + 1280 + 100
    # read: x once (query = key = value) 80, qkv weight 192, bias 24, out weight 64, bias 8; written: the
    # output 80 and the head-averaged weights (2, 5, 5) 50
    assert r.bytes == (80 + 192 + 24 + 64 + 8 + 80 + 50) * FP32
    assert (r.math, r.dtype) == ("tensor", "fp32")
    r = only(records(lambda t: mha(t, t, t, need_weights=False)[0], q), "aten::_native_multi_head_attention")
    assert r.flops == 3840 + 1600 + 500 + 1280  # no head average
    assert r.bytes == (80 + 288 + 80) * FP32  # no weights written
    mask = torch.zeros(5, 5, dtype=torch.bool)
    r = only(records(lambda t: mha(t, t, t, attn_mask=mask)[0], q), "aten::_native_multi_head_attention")
    assert r.flops == 3840 + 1600 + (5 + 1) * 2 * pairs + 1280 + average  # +1 per score for the mask


@pytest.mark.parametrize(("activation", "norm_first", "act_flops"), [("relu", False, 1), ("gelu", True, 5)])
def test_transformer_encoder_layer_fast_path(activation, norm_first, act_flops):
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=activation, norm_first=norm_first,
                                       batch_first=True).eval()  # fmt: skip
    recs = records(lambda t: layer(t), torch.randn(2, 5, 8))
    r = only(recs, "aten::_transformer_encoder_layer_fwd")
    assert len(recs) == 1
    tokens, e, f = 10, 8, 16
    attention = 3840 + 1600 + 500 + 1280  # as the MHA above, no weights returned
    residuals, norms = 2 * tokens * e, 2 * 7 * tokens * e
    ffn = 2 * (2 * tokens * e * f) + act_flops * tokens * f
    assert r.flops == attention + residuals + norms + ffn
    weights = 192 + 24 + 64 + 8 + 4 * 8 + 128 + 16 + 128 + 8
    assert r.bytes == (80 + weights + 80) * FP32


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_transformer_encoder_padding_mask_nested():
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2,
                                    enable_nested_tensor=True).eval()  # fmt: skip
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[1, 3:] = True  # the second sequence has 3 real tokens
    recs = records(lambda t: encoder(t, src_key_padding_mask=mask), torch.randn(2, 5, 8))
    assert not uncovered(recs)
    layers = [r for r in recs if r.op == "aten::_transformer_encoder_layer_fwd"]
    tokens, pairs = 5 + 3, 25 + 9  # the nested input's real tokens and (query, key) pairs per head
    attention = 2 * 8 * 8 * 3 * tokens + 4 * pairs * 8 + 5 * 2 * pairs + 2 * tokens * 8 * 8
    rest = 2 * tokens * 8 + 2 * 7 * tokens * 8 + 4 * tokens * 8 * 16 + tokens * 16
    assert [r.flops for r in layers] == [attention + rest] * 2 == [10772] * 2
    assert layers[0].bytes == (tokens * 8 + 600 + tokens * 8) * FP32
    pack = only(recs, "aten::_nested_tensor_from_mask")
    assert (pack.flops, pack.bytes) == (0, 2 * 5 + 2 * tokens * 8 * FP32)  # a (2, 5) bool mask, kept rows in and out
    unpack = only(recs, "aten::to_padded_tensor")
    assert (unpack.flops, unpack.bytes) == (0, tokens * 8 * FP32 + 2 * 5 * 8 * FP32)
    check = only(recs, "aten::_nested_tensor_from_mask_left_aligned")
    assert (check.flops, check.bytes) == (10, 10)


# ---------------------------------------------------------------------------------------------- losses

N, C = 4, 5
X = torch.randn(N, C)
Y = torch.randn(N, C)


def test_smooth_l1_and_huber_forward_backward():
    x = X.clone().requires_grad_()
    recs = records(lambda t: F.smooth_l1_loss(t, Y), x, mode="training")
    fwd = only(recs, "aten::smooth_l1_loss")
    assert fwd.flops == N * C * (8 + 1)  # 8 per element + the mean's add
    assert fwd.bytes == (20 + 20 + 1) * FP32  # x, y read, the scalar written
    bwd = only(recs, "aten::smooth_l1_loss_backward")
    assert bwd.flops == N * C * (6 + 1)  # 6 per element + the mean's 1/n scale
    assert bwd.bytes == (1 + 20 + 20 + 20) * FP32  # the 0-d grad_output, x, y read; grad_input written
    none = only(records(lambda t: F.huber_loss(t, Y, reduction="none", delta=0.5), X), "aten::huber_loss")
    assert none.flops == N * C * 8 and none.bytes == 3 * 20 * FP32
    summed = only(
        records(lambda t: F.huber_loss(t, Y, reduction="sum"), x, mode="training"), "aten::huber_loss_backward"
    )
    assert summed.flops == N * C * 6  # no 1/n with reduction='sum'


def test_xlogy_and_in_place():
    r = only(records(lambda t: torch.xlogy(t, Y.abs()), X), "aten::xlogy")
    assert r.flops == N * C * 4 and r.bytes == 3 * 20 * FP32
    r = only(records(lambda t: t.clone().xlogy_(Y.abs()), X), "aten::xlogy_")
    assert r.flops == N * C * 4 and r.bytes == (20 + 20 + 20) * FP32  # self read and written, other read
    r = only(records(lambda t: torch.xlogy(2.0, t.abs()), X), "aten::xlogy")
    assert r.flops == N * C * 4 and r.bytes == 2 * 20 * FP32


def test_binary_cross_entropy_family():
    p = torch.rand(N, C).clamp(0.05, 0.95).requires_grad_()
    target = torch.randint(0, 2, (N, C)).float()
    recs = records(lambda t: F.binary_cross_entropy(t, target), p, mode="training")
    assert only(recs, "aten::binary_cross_entropy").flops == N * C * (10 + 1)
    assert only(recs, "aten::binary_cross_entropy_backward").flops == N * C * (6 + 1)
    weight = torch.rand(C)  # broadcast over the rows: read once at C elements
    r = only(records(lambda t: F.binary_cross_entropy(t, target, weight=weight), p), "aten::binary_cross_entropy")
    assert r.flops == N * C * (10 + 1 + 1) and r.bytes == (20 + 20 + C + 1) * FP32
    r = only(
        records(lambda t: F.binary_cross_entropy_with_logits(t, target), X), "aten::binary_cross_entropy_with_logits"
    )
    assert r.flops == N * C * (7 + 1)  # 1-y, *x, log_sigmoid 4, sub; the mean's add
    r = only(
        records(lambda t: F.binary_cross_entropy_with_logits(t, target, weight=Y, pos_weight=weight), X),
        "aten::binary_cross_entropy_with_logits",
    )
    assert r.flops == N * C * (7 + 3 + 1 + 1)  # + pos_weight 3, + weight 1
    assert r.bytes == (20 + 20 + 20 + C + 1) * FP32


def test_soft_margin_and_multi_margin():
    sign = torch.randint(0, 2, (N, C)).float() * 2 - 1
    recs = records(lambda t: F.soft_margin_loss(t, sign), X.clone().requires_grad_(), mode="training")
    assert only(recs, "aten::soft_margin_loss").flops == N * C * (5 + 1)
    assert only(recs, "aten::soft_margin_loss_backward").flops == N * C * (7 + 1)
    labels = torch.randint(0, C, (N,))
    recs = records(lambda t: F.multi_margin_loss(t, labels), X.clone().requires_grad_(), mode="training")
    fwd = only(recs, "aten::multi_margin_loss")
    assert fwd.flops == N * C * 4
    assert fwd.bytes == (N * C + 1) * FP32 + N * INT64  # x, the scalar loss; int64 labels
    assert only(recs, "aten::multi_margin_loss_backward").flops == N * C * 5
    r = only(records(lambda t: F.multi_margin_loss(t, labels, p=2, weight=torch.ones(C)), X), "aten::multi_margin_loss")
    assert r.flops == N * C * (4 + 1 + 1)


def test_multilabel_margin_counts_targets():
    target = torch.tensor([[3, 0, -1, 1, 2]] * N)  # two targets per row (the list ends at -1)
    recs = records(lambda t: F.multilabel_margin_loss(t, target), X.clone().requires_grad_(), mode="training")
    pairs = N * 2 * C  # (target, class) pairs
    fwd = only(recs, "aten::multilabel_margin_loss_forward")
    assert fwd.flops == 4 * pairs
    assert fwd.bytes == (20 * FP32 + 20 * INT64) + (1 * FP32 + 20 * FP32)  # x, target; loss, is_target (float)
    assert only(recs, "aten::multilabel_margin_loss_backward").flops == 3 * pairs + N * C


def test_ctc_loss_lattice():
    log_probs = torch.randn(6, 2, 5).log_softmax(-1).requires_grad_()
    targets = torch.tensor([[1, 2], [3, 3]])
    recs = records(lambda t: F.ctc_loss(t, targets, [6, 5], [2, 2]), log_probs, mode="training")
    cells = 6 * (2 * 2 + 1) + 5 * (2 * 2 + 1)  # sum of T_b x (2 L_b + 1)
    fwd = only(recs, "aten::_ctc_loss")
    assert fwd.flops == 13 * cells == 715
    assert fwd.bytes == (60 * FP32 + 4 * INT64) + (2 * FP32 + math.prod(fwd.output_shapes[1]) * FP32)
    bwd = only(recs, "aten::_ctc_loss_backward")
    assert bwd.flops == (13 + 6) * cells + 6 * 60
    lengths = torch.tensor([6, 5]), torch.tensor([2, 2])
    r = only(records(lambda t: F.ctc_loss(t, targets, *lengths), log_probs.detach()), "aten::_ctc_loss")
    assert r.flops == 715  # lengths as tensors: read for the lattice


def test_flatten_weight_and_queries():
    weights = _cudnn_weights(4, 1, 1, H, IN)
    total = sum(w.numel() for w in weights)
    args = (weights, 4, IN, 2, H, 0, 1, False, False)
    cost = op_cost(aten._cudnn_rnn_flatten_weight.default, args, {}, meta(total))
    assert (cost.flops, cost.bytes) == (0, 2 * total * FP32)  # read once, the flat buffer written once
    assert op_cost(aten._use_cudnn_rnn_flatten_weight.default, (), {}, True)[:2] == (0, 0)
    check = op_cost(aten._use_cudnn_ctc_loss.default, (meta(6, 2, 5), meta(4), [6, 5], [2, 2], 0), {}, False)
    assert (check.flops, check.bytes, check.math) == (0, 0, "none")


def test_value_dependent_counts_on_meta_use_their_bounds():
    # a rebuilt trace has meta tensors (no values): the multilabel targets at C per sample, the CTC lattice at
    # T x (2 x the longest target + 1) per sequence, from log_alpha's shape
    x, target = meta(N, C), meta(N, C, dtype=torch.int64)
    out = (meta(()), meta(N, C))
    cost = op_cost(aten.multilabel_margin_loss_forward.default, (x, target, 1), {}, out)
    assert cost.flops == 4 * N * C * C
    log_probs, targets = meta(6, 2, 5), meta(2, 2, dtype=torch.int64)
    lengths = meta(2, dtype=torch.int64), meta(2, dtype=torch.int64)
    out = (meta(2), meta(2, 6, 5))  # log_alpha (batch, T, 2 * 2 + 1)
    cost = op_cost(aten._ctc_loss.Tensor, (log_probs, targets, *lengths), {}, out)
    assert cost.flops == 13 * 2 * 6 * 5


def test_cudnn_ctc_loss_hand_built():
    log_probs = meta(6, 2, 5)
    targets = torch.tensor([1, 2, 3, 3], dtype=torch.int32)
    out = (meta(2), meta(6, 2, 5))
    cost = op_cost(aten._cudnn_ctc_loss.default, (log_probs, targets, [6, 5], [2, 2], 0, True, False), {}, out)
    assert cost.flops == (13 + 13 + 6) * 55 + 6 * 60  # alpha, beta, combine per cell; the gradient per element


def test_decomposed_losses_are_counted():
    sign = torch.randint(0, 2, (N,)).float() * 2 - 1
    cases = [
        lambda t: F.l1_loss(t, Y),
        lambda t: F.kl_div(t.log_softmax(-1), Y.softmax(-1), reduction="batchmean"),
        lambda t: F.cross_entropy(t, torch.randint(0, C, (N,)), label_smoothing=0.1),
        lambda t: F.margin_ranking_loss(t[:, 0], t[:, 1], sign),
        lambda t: F.hinge_embedding_loss(t, Y.sign()),
        lambda t: F.triplet_margin_loss(t, Y, Y.flip(0)),
        lambda t: F.cosine_embedding_loss(t, Y, sign),
        lambda t: F.poisson_nll_loss(t, Y.abs(), log_input=False, full=True),
        lambda t: F.gaussian_nll_loss(t, Y, torch.ones(N, C)),
        lambda t: F.multilabel_soft_margin_loss(t, (Y > 0).float()),
        lambda t: F.nll_loss(t.log_softmax(-1), torch.randint(0, C, (N,))),
    ]
    for fn in cases:
        for mode in ("inference", "training"):
            assert not uncovered(records(fn, X.abs().clone().requires_grad_(), mode=mode))


# ------------------------------------------------------------------------------------------------ sort


XS = torch.randn(4, 6)


def test_sort_topk_select():
    r = only(records(lambda t: t.sort(-1)[0], XS), "aten::sort")
    assert r.flops == 4 * 6 * 3  # 4 slices of 6: n*ceil(log2 6) = 18 each
    assert r.bytes == 24 * FP32 + 24 * FP32 + 24 * INT64  # x read; values and int64 indices written
    r = only(records(lambda t: torch.sort(t, dim=0, descending=True, stable=True)[0], XS), "aten::sort")
    assert r.flops == 6 * 4 * 2
    assert only(records(lambda t: t.argsort(-1), XS), "aten::sort").flops == 72  # argsort is a sort
    r = only(records(lambda t: t.topk(3, -1)[0], XS), "aten::topk")
    assert r.flops == 4 * 6 * 2  # n*ceil(log2 3)
    assert r.bytes == 24 * FP32 + 12 * FP32 + 12 * INT64
    assert only(records(lambda t: t.topk(1, -1)[0], XS), "aten::topk").flops == 4 * 6  # a max scan
    assert only(records(lambda t: t.kthvalue(2, -1)[0], XS), "aten::kthvalue").flops == 24
    r = only(records(lambda t: t.median(), XS), "aten::median")
    assert r.flops == 24 and r.bytes == (24 + 1) * FP32
    assert only(records(lambda t: t.nanmedian(0)[0], XS), "aten::nanmedian").flops == 24
    assert only(records(lambda t: t.mode(-1)[0], XS), "aten::mode").flops == 72


def test_unique_family():
    xi = torch.tensor([[3, 1, 1, 2, 2, 2], [0, 0, 5, 5, 1, 1], [3, 1, 1, 2, 2, 2], [4, 4, 4, 4, 4, 4]])

    def out_bytes(r):
        return sum(math.prod(s) for s in r.output_shapes) * INT64

    r = only(
        records(lambda t: t + torch.unique(xi, return_inverse=True, return_counts=True)[0].sum(), XS), "aten::_unique2"
    )
    assert r.flops == 24 * (5 + 1)  # sort 24*ceil(log2 24) and a neighbour pass
    assert r.bytes == 24 * INT64 + out_bytes(r)
    r = only(records(lambda t: t + torch.unique_consecutive(xi).sum(), XS), "aten::unique_consecutive")
    assert r.flops == 24
    r = only(records(lambda t: t + torch.unique(xi, dim=0).sum(), XS), "aten::unique_dim")
    assert r.flops == 4 * (2 + 1) * 6  # 4 rows sorted and scanned, each compare a row of 6


def test_search_and_counts():
    edges = torch.arange(10.0)
    r = only(records(lambda t: t + torch.searchsorted(edges, t), XS), "aten::searchsorted")
    assert r.flops == 24 * 4  # ceil(log2(10 + 1)) compares per query
    assert r.bytes == 10 * FP32 + 24 * FP32 + 24 * INT64
    assert only(records(lambda t: t + torch.bucketize(t, edges), XS), "aten::bucketize").flops == 96
    assert only(records(lambda t: t + torch.searchsorted(edges, 3.0), XS), "aten::searchsorted").flops == 4
    xi = torch.randint(0, 4, (4, 6))
    # 2 test elements < 10 * 24**0.145 = 15.9: brute force, 24 x 2 compares
    assert only(records(lambda t: t + torch.isin(xi, torch.tensor([1, 2])), XS), "aten::isin").flops == 48
    many = torch.arange(40)  # 40 >= 15: sort-based, (24 + 40)*(ceil(log2 64) + 1)
    assert only(records(lambda t: t + torch.isin(xi, many), XS), "aten::isin").flops == 64 * 7
    r = only(records(lambda t: t.cummax(-1)[0], XS), "aten::cummax")
    assert r.flops == 24 and r.bytes == 24 * FP32 + 24 * FP32 + 24 * INT64
    assert only(records(lambda t: t + torch.nonzero(xi).sum(), XS), "aten::nonzero").flops == 24
    assert only(records(lambda t: t + torch.histc(t, 4).sum(), XS), "aten::histc").flops == 24 * 8  # range found
    assert only(records(lambda t: t + torch.histc(t, 4, -3, 3).sum(), XS), "aten::histc").flops == 24 * 6
    assert only(records(lambda t: t + torch.bincount(xi.flatten()).sum(), XS), "aten::bincount").flops == 24


# ----------------------------------------------------------------------------------------------- views


def test_unsafe_and_in_place_views_are_free():
    for fn, op in [
        (lambda t: aten.unsafe_split.Tensor(t, 2, 1)[0], "aten::unsafe_split"),
        (lambda t: aten.unsafe_split_with_sizes.default(t, [2, 4], 1)[1], "aten::unsafe_split_with_sizes"),
        (lambda t: t.clone().transpose_(0, 1), "aten::transpose_"),
        (lambda t: t.clone().t_(), "aten::t_"),
        (lambda t: t.clone().unsqueeze_(0), "aten::unsqueeze_"),
        (lambda t: t.clone().squeeze_(), "aten::squeeze_"),
        (lambda t: t.clone().as_strided_((6, 4), (1, 6)), "aten::as_strided_"),
    ]:
        r = only(records(fn, XS), op)
        assert (r.flops, r.bytes, r.math) == (0, 0, "none"), op
    r = only(records(lambda t: aten.split_with_sizes_copy.default(t, [2, 4], 1)[0], XS), "aten::split_with_sizes_copy")
    assert (r.flops, r.bytes) == (0, 2 * 24 * FP32)  # a copy: read once, the pieces written once


# ------------------------------------------------------------------------------------ nothing uncounted


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
@pytest.mark.parametrize(
    "module",
    [
        nn.LSTM(4, 6, num_layers=2, bidirectional=True),
        nn.LSTM(4, 6, batch_first=True, proj_size=3),
        nn.GRU(4, 6, num_layers=2, bidirectional=True, batch_first=True),
        nn.RNN(4, 6, nonlinearity="relu", bidirectional=True),
        nn.RNN(4, 6, num_layers=2),
    ],
)
def test_recurrent_modules_fully_counted(module):
    for mode in ("inference", "training"):
        recs = count_ops(module, (torch.randn(5, 3, 4, requires_grad=mode == "training"),), {}, mode=mode)
        assert not uncovered(recs), [r.op for r in uncovered(recs)]


def test_cells_fully_counted():
    for cell in (nn.LSTMCell(4, 6), nn.GRUCell(4, 6), nn.RNNCell(4, 6)):
        for mode in ("inference", "training"):
            recs = count_ops(cell, (torch.randn(3, 4, requires_grad=True),), {}, mode=mode)
            assert not uncovered(recs), [r.op for r in uncovered(recs)]


@pytest.mark.parametrize(
    ("pad", "op"), [(nn.ReflectionPad1d(1), "reflection_pad1d"), (nn.ReplicationPad2d(1), "replication_pad2d")]
)
def test_pad_backward(pad, op):
    x = torch.randn(1, 2, 3, 3)[..., 0, :] if op.endswith("1d") else torch.randn(1, 2, 3, 3)
    scale = torch.randn(pad(x).shape)  # a dense gradient reaches the pad (the summed loss's alone is a broadcast)
    recs = records(lambda t: pad(t) * scale, x.requires_grad_(), mode="training")
    r = only(recs, f"aten::{op}_backward")
    padded = math.prod(only(recs, f"aten::{op}").output_shapes[0])  # (1, 2, 5) or (1, 2, 5, 5)
    assert r.flops == padded  # one add per grad_output element
    assert r.bytes == (padded + x.numel()) * FP32  # grad_output read, grad_input written; self not read
