"""Matmuls (mm, bmm, addmm, baddbmm, _scaled_mm, _int_mm, mv, dot, linear, grouped GEMMs) on the tensor units:
2 FLOPs per multiply-add (torch.utils.flop_counter's formulas where it has one, computed here from the shapes);
the roof's dtype ('tf32' for an fp32 matmul on CUDA with TF32 on)."""

from __future__ import annotations

import math
from typing import Literal

from roofline.costs.aten.call import Call, OpCost, dtype_name, io_bytes
from roofline.costs.aten.registry import Example, register
from roofline.costs.elementwise import FLOPS_PER_ELEMENT as ELEMENTWISE


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


def matmul_cost(call: Call, flops: int, note: str, kind: Literal["matmul", "conv"] = "matmul") -> OpCost:
    dtype, dtype_note = _matmul_dtype(call, kind)
    notes = [note, "inputs read once, output written once", dtype_note]
    return OpCost(int(flops), io_bytes(call), dtype, "tensor", "; ".join(n for n in notes if n))


#: the two matrix operands of each GEMM op, by argument name
GEMM_OPERANDS = {
    "mm": ("self", "mat2"),
    "addmm": ("mat1", "mat2"),
    "bmm": ("self", "mat2"),
    "baddbmm": ("batch1", "batch2"),
    "_scaled_mm": ("self", "mat2"),
}


def gemm_flops(call: Call) -> int:
    """2*m*n*k per matrix, times the batch (bmm, baddbmm): the formula torch.utils.flop_counter registers for these
    ops, from the operands' shapes. NB: computed here, not imported: importing torch.utils.flop_counter took 0.43 s
    in the counting pass of a one-GEMM model on an H100 (torch 2.11)."""
    left, right = (call.tensor(name) for name in GEMM_OPERANDS[call.base])
    *batch, m, k = left.shape
    return 2 * math.prod(int(size) for size in batch) * int(m) * int(right.shape[-1]) * int(k)


@register("matmul", "mm", "bmm", "addmm", "baddbmm", "_scaled_mm")
def _gemm(call: Call) -> OpCost:
    # NB: as torch.utils.flop_counter: 2*m*n*k per matrix (per batch entry). A bias / beta*C add and alpha scaling
    # are epilogue work and not counted (as torch); the bias is read (a 1-D bias of n elements counts n).
    return matmul_cost(
        call, gemm_flops(call), "2*m*n*k (torch.utils.flop_counter's formula); bias epilogue not counted"
    )


@register("matmul", "_int_mm")
def _int_mm(call: Call) -> OpCost:
    a, b = call.tensor("self"), call.tensor("mat2")
    m, k = a.shape
    n = b.shape[1]
    return matmul_cost(call, 2 * m * n * k, "int8 2*m*n*k")


@register("matmul", "addbmm", "addbmm_")
def _addbmm(call: Call) -> OpCost:
    b1, b2 = call.tensor("batch1"), call.tensor("batch2")
    batch, m, k = b1.shape
    n = b2.shape[2]
    return matmul_cost(call, 2 * batch * m * n * k, "2*b*m*n*k, summed over the batch into one m x n (sum free)")


@register("matmul", "_addmm_activation")
def _addmm_activation(call: Call) -> OpCost:
    # NB: addmm (2*m*n*k) plus the fused activation epilogue per output element: tanh-form GELU (9, the cuBLASLt
    # epilogue) or ReLU (1).
    a, b = call.tensor("mat1"), call.tensor("mat2")
    m, k = a.shape
    n = b.shape[1]
    per = ELEMENTWISE["gelu_tanh"] if call.args.get("use_gelu") else ELEMENTWISE["relu"]
    return matmul_cost(call, 2 * m * n * k + per * m * n, "2*m*n*k + the activation epilogue")


@register("matmul", "mv", "addmv", "addmv_")
def _mv(call: Call) -> OpCost:
    # NB: mv's matrix is ``self``; addmv's is ``mat`` (its ``self`` is the added vector)
    mat = call.tensor("mat") if call.base.startswith("addmv") else call.tensor("self")
    m, n = mat.shape
    return matmul_cost(call, 2 * m * n, "GEMV 2*m*n")


@register("matmul", "dot", "vdot", "inner")
def _dot(call: Call) -> OpCost:
    x = call.tensor("self")
    return matmul_cost(call, 2 * int(x.numel()), "2*n")


@register("matmul", "linear")
def _linear(call: Call) -> OpCost:
    # NB: aten.linear normally decomposes into t + addmm/mm before the dispatch mode sees it; if it appears, it
    # is 2 * rows * out_features * in_features.
    x, w = call.tensor("input"), call.tensor("weight")
    out_features, in_features = (w.shape[0], w.shape[1]) if w.dim() == 2 else (1, w.shape[0])
    rows = x.numel() // in_features
    return matmul_cost(call, 2 * rows * out_features * in_features, "2 * rows * out * in")


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
    return matmul_cost(call, flops, "grouped GEMM: one GEMM over the partitioned dimension")


@register("matmul", "addmm_")
def _addmm_inplace(call: Call) -> OpCost:
    # NB: addmm's in-place twin (torch.utils.flop_counter has no formula for it): 2*m*n*k; self (m x n) is read
    # and written (the beta*self epilogue), mat1 and mat2 read once.
    a, b = call.tensor("mat1"), call.tensor("mat2")
    m, k = a.shape
    n = b.shape[1]
    return matmul_cost(call, 2 * m * n * k, "2*m*n*k, in place: self read and written; epilogue not counted")


@register("matmul", "baddbmm_")
def _baddbmm_inplace(call: Call) -> OpCost:
    # NB: baddbmm's in-place twin: 2*b*m*n*k; self (b x m x n) read and written, batch1 and batch2 read once.
    b1, b2 = call.tensor("batch1"), call.tensor("batch2")
    batch, m, k = b1.shape
    n = b2.shape[2]
    return matmul_cost(call, 2 * batch * m * n * k, "2*b*m*n*k, in place: self read and written")


def conv_tbc_rows(length: int, kernel: int, pad: int) -> int:
    """Output time steps each kernel tap of torch's conv_tbc multiplies, summed over the taps: tap k covers the
    output steps whose input step t + k - pad lies in [0, length), as ATen's ConvolutionTBC.cpp slices them."""
    out_len = length + 2 * pad - kernel + 1
    return sum(max(0, min(length + pad - k, out_len) - max(0, pad - k)) for k in range(kernel))


@register("matmul", "conv_tbc")
def _conv_tbc(call: Call) -> OpCost:
    # NB: torch's conv_tbc (input T x B x Cin, weight K x Cin x Cout, pad) copies the bias into the output, then
    # per kernel tap k one addmm_ of the valid (t x B, Cin) input rows by the (Cin, Cout) tap: 2 * B * Cin *
    # Cout per row, rows = conv_tbc_rows (taps in the padding skipped). The bias copy is not counted (as addmm's
    # epilogue). Input, weight, bias read once, output written once.
    x, w = call.tensor("self"), call.tensor("weight")
    length, batch, c_in = (int(v) for v in x.shape)
    kernel, c_out = int(w.shape[0]), int(w.shape[2])
    rows = conv_tbc_rows(length, kernel, int(call.get("pad", 0)))
    return matmul_cost(call, 2 * rows * batch * c_in * c_out, "2 * B * Cin * Cout per (tap, valid output step)")


#: Representative calls for tests/test_formula_examples.py (registry.Example): the ops it cannot build from the schema.
EXAMPLES: dict[str, Example] = {
    "mv": lambda t: ((t.randn(3, 5), t.randn(5)), {}),
    "baddbmm_": lambda t: ((t.randn(2, 3, 4), t.randn(2, 3, 5), t.randn(2, 5, 4)), {}),
    "addmm_": lambda t: ((t.randn(3, 4), t.randn(3, 5), t.randn(5, 4)), {}),
    "conv_tbc": lambda t: ((t.randn(6, 2, 3), t.randn(3, 3, 4), t.randn(4), 1), {}),
    "addmv": lambda t: ((t.randn(3), t.randn(3, 5), t.randn(5)), {}),
    "addmv_": lambda t: ((t.randn(3), t.randn(3, 5), t.randn(5)), {}),
    "addbmm": lambda t: ((t.randn(3, 4), t.randn(2, 3, 5), t.randn(2, 5, 4)), {}),
    "addbmm_": lambda t: ((t.randn(3, 4), t.randn(2, 3, 5), t.randn(2, 5, 4)), {}),
    "_int_mm": lambda t: (
        (t.ones(32, 16, dtype=t.int8), t.ones(16, 8, dtype=t.int8)),
        {},
        t.zeros(32, 8, dtype=t.int32),
    ),
    "_scaled_mm": lambda t: (
        (t.ones(16, 32, dtype=t.float8_e4m3fn), t.ones(16, 32, dtype=t.float8_e4m3fn).t(), t.ones(()), t.ones(())),
        {"out_dtype": t.bfloat16},
        t.zeros(16, 16, dtype=t.bfloat16),
    ),
    "_scaled_grouped_mm": lambda t: (
        (t.ones(32, 16, dtype=t.float8_e4m3fn), t.ones(2, 16, 8, dtype=t.float8_e4m3fn), t.ones(32), t.ones(2, 8)),
        {"offs": t.tensor([16, 32], dtype=t.int32), "out_dtype": t.bfloat16},
        t.zeros(32, 8, dtype=t.bfloat16),
    ),
}
