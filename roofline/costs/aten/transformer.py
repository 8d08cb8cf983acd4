"""The fused transformer fast paths that nn.MultiheadAttention and nn.TransformerEncoderLayer take in eval mode
with no grad (``_native_multi_head_attention``, ``_transformer_encoder_layer_fwd``), and the nested-tensor
packing nn.TransformerEncoder does around them for a padding mask (``_nested_tensor_from_mask``,
``to_padded_tensor``).

One op runs the whole block; we count what it computes: the QKV in-projection GEMMs, Q K^T and P V over the
scored pairs with the softmax (the counts of roofline.costs.aten.attention), the out-projection, and for the
encoder layer the residual adds, the two layer norms and the FFN (two GEMMs and the activation). Bytes are
compulsory: the input, the weights and the mask read once, the output (and the attention weights when
returned) written once; the Q, K, V and score intermediates are not counted."""

from __future__ import annotations

from typing import Any

from roofline.costs.aten.call import Call, OpCost, dtype_name, tensor_bytes
from roofline.costs.aten.matmul import tf32_enabled
from roofline.costs.aten.registry import Example, register
from roofline.costs.attention import SOFTMAX_FLOPS_PER_ELEMENT
from roofline.costs.elementwise import FLOPS_PER_ELEMENT as ELEMENTWISE
from roofline.costs.norms import FLOPS_PER_ELEMENT as NORMS

_LAYER_NORM = NORMS["layernorm"][0]  # 7: with weight and bias


def _nbytes(t: Any) -> int:
    """Bytes of ``t`` read or written once; a nested (jagged) tensor at its numel (it has no single shape)."""
    if getattr(t, "is_nested", False):
        return int(t.numel()) * t.element_size()
    return tensor_bytes(t)


def _unique_bytes(tensors: list[Any]) -> int:
    """Each distinct tensor once (the same tensor passed as query, key and value is read once)."""
    seen: set[int] = set()
    total = 0
    for t in tensors:
        if t is None or id(t) in seen:
            continue
        seen.add(id(t))
        total += _nbytes(t)
    return total


def _lengths(t: Any) -> tuple[int, list[int]]:
    """(batch entries, sequence length of each): a nested tensor's own lengths, else (prod(leading dims), [L]*B)
    for a (..., L, E) tensor."""
    if getattr(t, "is_nested", False):
        sizes = t._nested_tensor_size()  # NB: the per-sequence shapes (metadata), (B, 2)
        lengths = [int(row[0]) for row in sizes.tolist()]
        return len(lengths), lengths
    batch = 1
    for d in t.shape[:-2]:
        batch *= int(d)
    return batch, [int(t.shape[-2])] * batch


def _dtype(call: Call, t: Any) -> tuple[str, str]:
    dtype = dtype_name(t.dtype)
    if dtype == "fp32" and call.device_type == "cuda":
        if tf32_enabled("matmul"):
            return "tf32", "fp32 operands, TF32 math (torch.backends.cuda.matmul TF32 on at record time)"
        return "fp32", "fp32 matmul with TF32 off: the fp32 (non-tensor-core) roof applies"
    return dtype, ""


def attention_block_flops(lengths_q: list[int], lengths_kv: list[int], embed: int, heads: int, masked: bool) -> int:
    """FLOPs of one multi-head attention block: in-projection, Q K^T, softmax, P V, out-projection.

    NB: in-projection 2*E*E per query token (Q) and 2*2*E*E per key/value token (K, V): 2*T*E*3E for
    self-attention; Q K^T and P V 2*pairs*D each over heads*sum(Lq*Lkv) pairs with D = E/heads (= 4*E per
    (query, key) pair); the softmax 5 per score (roofline.costs.attention), +1 with a mask; out-projection
    2*E*E per query token. The biases and the 1/sqrt(D) scaling are epilogue work, not counted (as addmm)."""
    tokens_q, tokens_kv = sum(lengths_q), sum(lengths_kv)
    pairs = sum(lq * lk for lq, lk in zip(lengths_q, lengths_kv, strict=False))
    in_proj = 2 * embed * embed * (tokens_q + 2 * tokens_kv)
    scores = 4 * pairs * embed
    softmax = (SOFTMAX_FLOPS_PER_ELEMENT + masked) * heads * pairs
    out_proj = 2 * tokens_q * embed * embed
    return in_proj + scores + softmax + out_proj


@register("transformer", "_native_multi_head_attention")
def _native_mha(call: Call) -> OpCost:
    # NB: need_weights: the (B, heads, L, S) weights (or their head average, +1 per score) are written too.
    q, k, v = call.tensor("query"), call.tensor("key"), call.tensor("value")
    embed, heads = int(call.args["embed_dim"]), int(call.args["num_head"])
    _, lengths_q = _lengths(q)
    _, lengths_kv = _lengths(k)
    mask = call.tensor("mask")
    flops = attention_block_flops(lengths_q, lengths_kv, embed, heads, mask is not None)
    need_weights = bool(call.args.get("need_weights", True))
    if need_weights and call.args.get("average_attn_weights", True):
        flops += heads * sum(lq * lk for lq, lk in zip(lengths_q, lengths_kv, strict=False))
    weights = [call.tensor(n) for n in ("qkv_weight", "qkv_bias", "proj_weight", "proj_bias")]
    total = _unique_bytes([q, k, v, mask, *weights]) + _unique_bytes([t for t in call.outputs if t.numel()])
    dtype, dtype_note = _dtype(call, q)
    notes = ["fused MHA: in-projection, Q K^T, softmax, P V, out-projection",
             "input, weights and mask read once, output (and attention weights) written once", dtype_note]  # fmt: skip
    return OpCost(int(flops), total, dtype, "tensor", "; ".join(n for n in notes if n))


@register("transformer", "_transformer_encoder_layer_fwd")
def _encoder_layer(call: Call) -> OpCost:
    # NB: self-attention (attention_block_flops) + two residual adds (1 per element of the T x E activations
    # each) + two layer norms (7 per element: roofline.costs.norms, weight and bias) + the FFN: 2*T*E*F twice
    # and the activation per T x F element (ReLU 1, or GELU's erf form 5). A nested (padded-away) input counts
    # its real tokens only.
    src = call.tensor("src")
    embed, heads = int(call.args["embed_dim"]), int(call.args["num_heads"])
    ffn = int(call.tensor("ffn_weight_1").shape[0])
    _, lengths = _lengths(src)
    tokens = sum(lengths)
    mask = call.tensor("mask")
    attention = attention_block_flops(lengths, lengths, embed, heads, mask is not None)
    act = ELEMENTWISE["gelu"] if call.args.get("use_gelu") else ELEMENTWISE["relu"]
    flops = attention + 2 * tokens * embed + 2 * _LAYER_NORM * tokens * embed + 4 * tokens * embed * ffn
    flops += act * tokens * ffn
    names = ("qkv_weight", "qkv_bias", "proj_weight", "proj_bias", "norm_weight_1", "norm_bias_1", "norm_weight_2",
             "norm_bias_2", "ffn_weight_1", "ffn_bias_1", "ffn_weight_2", "ffn_bias_2")  # fmt: skip
    total = _unique_bytes([src, mask, *(call.tensor(n) for n in names)]) + _unique_bytes(call.outputs)
    dtype, dtype_note = _dtype(call, src)
    notes = [f"fused encoder layer: attention, 2 residual adds, 2 layer norms, FFN ({'GELU' if act > 1 else 'ReLU'})",
             "input, weights and mask read once, output written once", dtype_note]  # fmt: skip
    return OpCost(int(flops), total, dtype, "tensor", "; ".join(n for n in notes if n))


@register("transformer", "_nested_tensor_from_mask")
def _nested_from_mask(call: Call) -> OpCost:
    # NB: packs the unmasked rows of a padded (B, L, E) tensor: the mask read once, the kept rows read and
    # written once (the output's size); the padding is not read. 0 FLOPs.
    out = call.out0
    total = _nbytes(call.tensor("mask")) + 2 * _nbytes(out)
    return OpCost(0, total, dtype_name(out.dtype), "vector", "pack: the kept rows read and written once, the mask read")


@register("transformer", "_nested_tensor_from_mask_left_aligned")
def _nested_mask_check(call: Call) -> OpCost:
    # NB: checks that each mask row is left-aligned: the mask read once, one compare per element, nothing written.
    mask = call.tensor("mask")
    return OpCost(int(mask.numel()), _nbytes(mask), "", "vector", "mask check: read once, one compare per element")


@register("transformer", "to_padded_tensor")
def _to_padded(call: Call) -> OpCost:
    # NB: unpacks a nested tensor into a padded one: the nested values read once, the padded output written once
    # (padding included). 0 FLOPs.
    src, out = call.tensor("self"), call.out0
    return OpCost(0, _nbytes(src) + _nbytes(out), dtype_name(out.dtype), "vector",
                  "unpack: nested values read once, padded output written once")  # fmt: skip


def _padded_and_mask(t: Any) -> tuple[Any, Any]:
    """A padded (batch 2, L 3, E 4) tensor and its left-aligned keep mask (True: a real token)."""
    return t.randn(2, 3, 4), t.tensor([[True, True, False], [True, True, True]])


#: Representative calls for tests/test_formula_examples.py (registry.Example): the ops it cannot build from the schema.
EXAMPLES: dict[str, Example] = {
    "_nested_tensor_from_mask": lambda t: (_padded_and_mask(t), {}),
    "_nested_tensor_from_mask_left_aligned": lambda t: (_padded_and_mask(t), {}),
    "to_padded_tensor": lambda t: ((t.ops.aten._nested_tensor_from_mask(*_padded_and_mask(t)), 0.0), {}),
}
