"""Recurrent layers (LSTM, GRU, Elman RNN) as their fused kernels reach the dispatch mode: oneDNN's
``mkldnn_rnn_layer`` (the CPU, one layer and direction a call), cuDNN's ``_cudnn_rnn`` and MIOpen's ``miopen_rnn``
(every layer and direction in one call), their backwards, and the fused gate kernels of the CUDA cells
(``_thnn_fused_lstm_cell``, ``_thnn_fused_gru_cell``). ``lstm``, ``gru``, ``rnn_tanh``, ``rnn_relu`` and the
``*_cell`` ops are CompositeImplicitAutograd: they decompose into these (or into mm/addmm and element-wise ops)
before a dispatch mode sees them, so they have no formula of their own.

Per layer and direction, with rows = T x B (the packed total for a PackedSequence) and G gates (LSTM 4, GRU 3,
RNN 1): the input projection GEMM 2 x rows x I x G*H, the recurrent GEMM 2 x rows x H x G*H (x P with a
projection, + the projection GEMM 2 x rows x H x P), i.e. 2 x rows x (the layer's weight elements), plus the
gate element-wise math per hidden unit and row (:data:`GATE_FLOPS`)."""

from __future__ import annotations

from typing import Any

from roofline.costs.aten.call import (
    Call,
    OpCost,
    dtype_name,
    io_bytes,
    read_bytes,
    storage_key,
    tensor_bytes,
    write_bytes,
)
from roofline.costs.aten.registry import Example, register
from roofline.costs.elementwise import FLOPS_PER_ELEMENT as ELEMENTWISE

#: cuDNN / oneDNN / MIOpen RNN mode enum (the ``mode`` argument) -> cell kind.
MODES = {0: "rnn_relu", 1: "rnn_tanh", 2: "lstm", 3: "gru"}
#: gates per cell kind.
GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}

_SIGMOID = ELEMENTWISE["sigmoid"]  # 4
_TANH = ELEMENTWISE["tanh"]  # 1

#: Forward gate math, FLOPs per hidden unit per row, biases not included (each bias vector adds G: one add per
#: gate). NB: LSTM: igates + hgates 4, three sigmoids 3*4, tanh(g) 1, c' = f*c + i*g 3, h' = o*tanh(c') 2 = 22.
#: GRU: r and z: add + sigmoid 2*(1 + 4), n = tanh(in + r*hn) 3, h' = n + z*(h - n) 3 = 16. Elman: add 1 +
#: tanh 1 (or relu 1) = 2.
GATE_FLOPS = {
    "lstm": 4 + 3 * _SIGMOID + _TANH + 3 + 2,
    "gru": 2 * (1 + _SIGMOID) + 3 + 3,
    "rnn_tanh": 1 + _TANH,
    "rnn_relu": 1 + ELEMENTWISE["relu"],
}

#: Backward gate math of one cell, FLOPs per hidden unit per row. NB: LSTM: tanh(c') 1, do = dh*tanh(c') 1,
#: dc = dc' + dh*o*(1 - tanh^2) 5, di, dg, df, dc_prev 4, three sigmoid' s*(1-s)*d 9, tanh' (1-g^2)*d 3 = 23.
#: GRU: dn = dh*(1-z) 2, dz = dh*(h-n) 2, dh_prev = dh*z 1, tanh' 3, d(hn) = da*r 1, dr = da*hn 1, two sigmoid'
#: 6 = 16.
CELL_BACKWARD_FLOPS = {"lstm": 23, "gru": 16}

#: Backward gate math of a whole RNN, per hidden unit per row: the cell's, plus dh_t = grad_output_t + the
#: recurrent dh (1; GRU 2: its direct dh*z term too). NB: Elman tanh: that add 1 + (1 - h^2)*d 3 = 4; relu:
#: 1 + one select 1 = 2.
RNN_BACKWARD_FLOPS = {"lstm": 23 + 1, "gru": 16 + 2, "rnn_tanh": 1 + 3, "rnn_relu": 1 + 1}


def rnn_tf32_enabled() -> bool:
    """Whether cuDNN runs fp32 RNNs in TF32, read now: ``torch.backends.cudnn.rnn.fp32_precision`` (torch >= 2.9;
    'none' defers to cudnn's and then the global setting), else the legacy ``torch.backends.cudnn.allow_tf32``."""
    import torch

    backends = torch.backends
    for node in (getattr(backends.cudnn, "rnn", None), backends.cudnn, backends):
        precision = getattr(node, "fp32_precision", None) if node is not None else None
        if precision == "tf32":
            return True
        if precision == "ieee":
            return False
    return bool(getattr(backends.cudnn, "allow_tf32", False))


def _rnn_dtype(call: Call, x: Any) -> tuple[str, str]:
    dtype = dtype_name(x.dtype)
    if dtype == "fp32" and call.device_type == "cuda":
        if rnn_tf32_enabled():
            return "tf32", "fp32 operands, TF32 math (torch.backends.cudnn.rnn TF32 on at record time)"
        return "fp32", "fp32 RNN with TF32 off: the fp32 (non-tensor-core) roof applies"
    return dtype, ""


def _rows(x: Any) -> int:
    """(time step, batch entry) positions: T x B, or the packed total sum(batch_sizes) of a PackedSequence."""
    return int(x.numel()) // int(x.shape[-1]) if x.dim() and x.shape[-1] else 0


def _groups(weights: list[Any], stride: int) -> list[list[Any]]:
    return [weights[i : i + stride] for i in range(0, len(weights), stride)]


def _cost(call: Call, flops: int, total_bytes: int, x: Any, note: str) -> OpCost:
    # NB: math 'tensor': the GEMMs dominate; the gate math (vector units) is in the FLOPs, stated in the note.
    dtype, dtype_note = _rnn_dtype(call, x)
    notes = [note, "inputs, weights and states read once, outputs and workspace written once", dtype_note]
    return OpCost(int(flops), int(total_bytes), dtype, "tensor", "; ".join(n for n in notes if n))


def _kind(call: Call) -> str:
    return MODES[int(call.args["mode"])]


# ------------------------------------------------------------------------------------------- oneDNN (CPU)


@register("rnn", "mkldnn_rnn_layer")
def _mkldnn_rnn_layer(call: Call) -> OpCost:
    # NB: one layer, one direction: 2*rows*(I + H)*G*H for the two GEMMs + rows*H*(gate math + G per bias vector
    # when has_biases). oneDNN is passed zero biases when the module has none: they are read (bytes) but not
    # counted as adds.
    kind = _kind(call)
    x = call.tensor("input")
    rows, hidden = _rows(x), int(call.args["hidden_size"])
    gemm = 2 * rows * (call.tensor("weight0").numel() + call.tensor("weight1").numel())
    per_unit = GATE_FLOPS[kind] + (2 * GATES[kind] if call.args.get("has_biases") else 0)
    flops = gemm + rows * hidden * per_unit
    return _cost(call, flops, io_bytes(call), x, f"{kind}: GEMMs {gemm} + gate math {per_unit} per unit and row")


@register("rnn", "mkldnn_rnn_layer_backward")
def _mkldnn_rnn_layer_backward(call: Call) -> OpCost:
    # NB: every gradient at once (no output mask): the data GEMMs (dgates @ W_ih, dgates @ W_hh) and the weight
    # GEMMs (dgates^T x, dgates^T h) are each the forward's 2*rows*(I + H)*G*H; the gate backward math per unit
    # and row (RNN_BACKWARD_FLOPS) and the bias gradients (one add per gate and row for each of b_ih, b_hh).
    kind = _kind(call)
    x = call.tensor("input")
    rows, hidden = _rows(x), int(call.args["hidden_size"])
    gemm = 2 * rows * (call.tensor("weight1").numel() + call.tensor("weight2").numel())
    per_unit = RNN_BACKWARD_FLOPS[kind] + (2 * GATES[kind] if call.args.get("has_biases") else 0)
    flops = 2 * gemm + rows * hidden * per_unit
    return _cost(call, flops, io_bytes(call), x, f"{kind} backward: data + weight GEMMs 2 x {gemm}, "
                 f"gate math {per_unit} per unit and row")  # fmt: skip


# ------------------------------------------------------------------------------------- cuDNN and MIOpen


def _layers(call: Call) -> tuple[str, int, list[list[Any]], bool]:
    kind = _kind(call)
    stride = int(call.args["weight_stride0"])
    weights = list(call.args.get("weight") or [])
    has_biases = stride in (4, 5)  # NB: w_ih, w_hh[, b_ih, b_hh][, w_hr]
    return kind, stride, _groups(weights, stride), has_biases


def _weight_gemm(rows: int, groups: list[list[Any]]) -> int:
    """2 * rows * the GEMM weights of every layer and direction (w_ih, w_hh, and w_hr with a projection)."""
    total = 0
    for group in groups:
        mats = [w for w in group if w.dim() == 2]
        total += sum(int(w.numel()) for w in mats)
    return 2 * rows * total


def _weights_bytes(call: Call) -> int:
    weights = list(call.args.get("weight") or [])
    if weights:
        return sum(tensor_bytes(w) for w in weights)
    buf = call.tensor("weight_buf")
    return tensor_bytes(buf) if buf is not None else 0


def _cudnn_bytes(call: Call) -> int:
    # NB: the weights are read once at their own size (weight_buf, when given, is the flat buffer they view: not
    # read twice); the dropout RNG state is not counted. Written: output, hy, cy, the reserve (training), and
    # the returned weight_buf only when it is a new buffer (cuDNN copies unflattened weights into one).
    total = read_bytes(call, skip=("weight", "weight_buf", "dropout_state")) + _weights_bytes(call)
    buf_in = call.tensor("weight_buf")
    seen: set[tuple[Any, ...]] = set()
    for t in call.outputs:
        if buf_in is not None and (t is buf_in or storage_key(t) == storage_key(buf_in)):
            continue
        key = storage_key(t)
        if key not in seen:
            seen.add(key)
            total += tensor_bytes(t)
    return total


@register("rnn", "_cudnn_rnn", "miopen_rnn")
def _cudnn_rnn(call: Call) -> OpCost:
    # NB: every layer and direction in one call, summed over the weight list (weight_stride0 tensors a layer and
    # direction): 2*rows*(w_ih + w_hh (+ w_hr)) elements + rows*H*(gate math + 2G with biases) per layer and
    # direction. Dropout between layers is not counted.
    kind, _, groups, has_biases = _layers(call)
    x = call.tensor("input")
    rows, hidden = _rows(x), int(call.args["hidden_size"])
    gemm = _weight_gemm(rows, groups)
    per_unit = GATE_FLOPS[kind] + (2 * GATES[kind] if has_biases else 0)
    flops = gemm + len(groups) * rows * hidden * per_unit
    return _cost(call, flops, _cudnn_bytes(call), x, f"{kind}: {len(groups)} layer-direction(s), GEMMs {gemm} + "
                 f"gate math {per_unit} per unit and row")  # fmt: skip


@register("rnn", "_cudnn_rnn_backward", "miopen_rnn_backward")
def _cudnn_rnn_backward(call: Call) -> OpCost:
    # NB: output_mask = (input, hx, cx, weight). The data pass (any of the first three) runs the recurrence
    # backward: the data GEMMs (the forward's GEMM FLOPs) + the gate backward math; the weight pass (the
    # fourth) the weight GEMMs (the forward's GEMM FLOPs again) + the bias gradients (2G per unit and row).
    kind, _, groups, has_biases = _layers(call)
    x = call.tensor("input")
    rows, hidden = _rows(x), int(call.args["hidden_size"])
    mask = list(call.args.get("output_mask") or [True, True, True, True])
    gemm = _weight_gemm(rows, groups)
    units = len(groups) * rows * hidden
    flops = 0
    if any(mask[:3]):
        flops += gemm + units * RNN_BACKWARD_FLOPS[kind]
    if len(mask) > 3 and mask[3]:
        flops += gemm + (units * 2 * GATES[kind] if has_biases else 0)
    total = read_bytes(call, skip=("weight", "weight_buf", "dropout_state")) + _weights_bytes(call)
    total += write_bytes(call)  # the gradients, written once
    passes = f"data pass {'on' if any(mask[:3]) else 'off'}, weight pass {'on' if len(mask) > 3 and mask[3] else 'off'}"
    return _cost(call, flops, total, x, f"{kind} backward ({len(groups)} layer-direction(s)): {passes}")


# -------------------------------------------------------------------------------- CUDA fused cell kernels


def _cell_cost(call: Call, flops: int, per_unit: int, units: int, what: str) -> OpCost:
    return OpCost(int(flops), io_bytes(call), dtype_name(call.inputs()[0].dtype) if call.inputs() else "", "vector",
                  f"{call.base}: {what}, {per_unit} FLOPs per hidden unit ({units} units); the gate GEMMs are "
                  "separate mm/addmm ops")  # fmt: skip


@register("rnn", "_thnn_fused_lstm_cell")
def _fused_lstm_cell(call: Call) -> OpCost:
    # NB: the element-wise half of an LSTM cell on CUDA (the GEMMs run before it as mm/addmm): GATE_FLOPS['lstm']
    # per unit of cx + 4 per bias vector given; writes hy, cy and the workspace (the activated gates).
    units = int(call.tensor("cx").numel())
    biases = sum(call.tensor(name) is not None for name in ("input_bias", "hidden_bias"))
    per_unit = GATE_FLOPS["lstm"] + 4 * biases
    return _cell_cost(call, units * per_unit, per_unit, units, "gate math")


@register("rnn", "_thnn_fused_lstm_cell_backward_impl")
def _fused_lstm_cell_backward(call: Call) -> OpCost:
    # NB: CELL_BACKWARD_FLOPS['lstm'] per unit; with has_bias the bias gradient sums the gate gradients over the
    # batch (4 per unit).
    units = int(call.tensor("cx").numel())
    per_unit = CELL_BACKWARD_FLOPS["lstm"] + (4 if call.args.get("has_bias") else 0)
    return _cell_cost(call, units * per_unit, per_unit, units, "gate backward")


@register("rnn", "_thnn_fused_gru_cell")
def _fused_gru_cell(call: Call) -> OpCost:
    # NB: GATE_FLOPS['gru'] per unit of hx + 3 per bias vector given; writes hy and the workspace (5H per row).
    units = int(call.tensor("hx").numel())
    biases = sum(call.tensor(name) is not None for name in ("input_bias", "hidden_bias"))
    per_unit = GATE_FLOPS["gru"] + 3 * biases
    return _cell_cost(call, units * per_unit, per_unit, units, "gate math")


@register("rnn", "_thnn_fused_gru_cell_backward")
def _fused_gru_cell_backward(call: Call) -> OpCost:
    # NB: CELL_BACKWARD_FLOPS['gru'] per unit; with has_bias the two bias gradients sum the input and hidden gate
    # gradients over the batch (3 + 3 per unit).
    units = int(call.tensor("grad_hy").numel())
    per_unit = CELL_BACKWARD_FLOPS["gru"] + (6 if call.args.get("has_bias") else 0)
    return _cell_cost(call, units * per_unit, per_unit, units, "gate backward")


@register("rnn", "_cudnn_rnn_flatten_weight")
def _flatten_weight(call: Call) -> OpCost:
    # NB: copies the weight list into one flat buffer (flatten_parameters): each weight read once, the buffer
    # written once; 0 FLOPs.
    out = call.out0
    return OpCost(0, io_bytes(call), dtype_name(out.dtype) if out is not None else "", "vector",
                  "flatten: the weights read once, the flat buffer written once")  # fmt: skip


@register("rnn", "_use_cudnn_rnn_flatten_weight")
def _rnn_query(call: Call) -> OpCost:
    # NB: a host-side query (returns a bool): no kernel, no bytes.
    return OpCost(0, 0, "", "none", "query: no data moved")


# ------------------------------------------------------------------------------- formula-test examples
# NB: these kernels run only on CUDA (cuDNN, MIOpen, the fused THNN cells): no CPU kernel, so each example gives
# its outputs, built with the shapes the CUDA kernels return (values unused by the formulas).

_T, _B, _I, _H = 3, 2, 4, 5  # time steps, batch, input size, hidden size


def _lstm_weights(t: Any) -> tuple[list[Any], Any]:
    """One-layer unidirectional LSTM weights (w_ih (4H, I), w_hh (4H, H), b_ih, b_hh (4H,)) as views of one flat
    buffer, the layout _cudnn_rnn_flatten_weight returns; weight_stride0 4."""
    shapes = [(4 * _H, _I), (4 * _H, _H), (4 * _H,), (4 * _H,)]
    sizes = [int(t.Size(s).numel()) for s in shapes]
    buf = t.randn(sum(sizes))
    return [part.view(shape) for part, shape in zip(buf.split(sizes), shapes, strict=True)], buf


def _flatten_weight(t: Any) -> tuple[Any, ...]:
    weights, buf = _lstm_weights(t)
    # NB: (weight_arr, weight_stride0, input_size, mode lstm 2, hidden_size, proj_size, num_layers, batch_first,
    # bidirectional) -> the flat buffer
    return ([w.clone() for w in weights], 4, _I, 2, _H, 0, 1, False, False), {}, t.empty_like(buf)


def _rnn_backward(t: Any, miopen: bool) -> tuple[Any, ...]:
    weights, buf = _lstm_weights(t)
    x, hx, cx = t.randn(_T, _B, _I), t.randn(1, _B, _H), t.randn(1, _B, _H)
    output, grad_output = t.randn(_T, _B, _H), t.randn(_T, _B, _H)
    grad_hy, grad_cy = t.randn(1, _B, _H), t.randn(1, _B, _H)
    reserve = t.empty(256, dtype=t.uint8)  # NB: the forward's training workspace (its size is the library's)
    head = (x, weights, 4, buf, hx, cx, output, grad_output, grad_hy, grad_cy, 2, _H)
    # NB: (num_layers, batch_first, dropout, train, bidirectional, batch_sizes, dropout_state, reserve, output_mask)
    tail = (1, False, 0.0, True, False, [], None, reserve, [True, True, True, True])
    args = head + tail if miopen else (*head, 0, *tail)  # NB: cuDNN's takes proj_size after hidden_size
    # NB: outputs (grad input, grad hx, grad cx, the weight gradients shaped as the weights)
    return args, {}, (t.empty_like(x), t.empty_like(hx), t.empty_like(cx), [t.empty_like(w) for w in weights])


def _lstm_cell(t: Any) -> tuple[Any, ...]:
    # NB: (input_gates (B, 4H), hidden_gates (B, 4H), cx, input_bias, hidden_bias) -> (hy, cy, workspace (B, 4H))
    gates = (t.randn(_B, 4 * _H), t.randn(_B, 4 * _H), t.randn(_B, _H), t.randn(4 * _H), t.randn(4 * _H))
    return gates, {}, (t.empty(_B, _H), t.empty(_B, _H), t.empty(_B, 4 * _H))


def _lstm_cell_backward(t: Any) -> tuple[Any, ...]:
    # NB: (grad_hy, grad_cy, cx, cy, workspace (B, 4H), has_bias) -> (grad_gates (B, 4H), grad_cx, grad_bias (4H,))
    args = (t.randn(_B, _H), t.randn(_B, _H), t.randn(_B, _H), t.randn(_B, _H), t.randn(_B, 4 * _H), True)
    return args, {}, (t.empty(_B, 4 * _H), t.empty(_B, _H), t.empty(4 * _H))


def _gru_cell(t: Any) -> tuple[Any, ...]:
    # NB: (input_gates (B, 3H), hidden_gates (B, 3H), hx, input_bias, hidden_bias) -> (hy, workspace (B, 5H))
    gates = (t.randn(_B, 3 * _H), t.randn(_B, 3 * _H), t.randn(_B, _H), t.randn(3 * _H), t.randn(3 * _H))
    return gates, {}, (t.empty(_B, _H), t.empty(_B, 5 * _H))


def _gru_cell_backward(t: Any) -> tuple[Any, ...]:
    # NB: (grad_hy, workspace (B, 5H), has_bias) -> (grad_input_gates, grad_hidden_gates (B, 3H), grad_hx,
    # grad_input_bias, grad_hidden_bias (3H,))
    gates = (t.empty(_B, 3 * _H), t.empty(_B, 3 * _H), t.empty(_B, _H), t.empty(3 * _H), t.empty(3 * _H))
    return (t.randn(_B, _H), t.randn(_B, 5 * _H), True), {}, gates


#: Representative calls for tests/test_formula_examples.py (registry.Example): (args, kwargs, out), no CPU kernel.
EXAMPLES: dict[str, Example] = {
    "_cudnn_rnn_flatten_weight": _flatten_weight,
    "_cudnn_rnn_backward": lambda t: _rnn_backward(t, miopen=False),
    "miopen_rnn_backward": lambda t: _rnn_backward(t, miopen=True),
    "_thnn_fused_lstm_cell": _lstm_cell,
    "_thnn_fused_lstm_cell_backward_impl": _lstm_cell_backward,
    "_thnn_fused_gru_cell": _gru_cell,
    "_thnn_fused_gru_cell_backward": _gru_cell_backward,
}
