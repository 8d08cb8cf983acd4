"""Fused attention (SDPA and the flash / mem-efficient / cuDNN kernels, forward and backward): Q K^T and P V over
the scored (query, key) pairs (causal exact, GQA, packed variable-length batches) plus the softmax, with no S x S
tensor in memory."""

from __future__ import annotations

import itertools
from typing import Any, Literal

from roofline.costs.aten.call import Call, OpCost, dtype_name, io_bytes, prod
from roofline.costs.aten.registry import Example, Formula, register
from roofline.costs.attention import SOFTMAX_FLOPS_PER_ELEMENT, score_pairs


def causal_pairs(seq_q: int, seq_kv: int, align: Literal["top_left", "bottom_right"] = "top_left") -> int:
    """(query, key) pairs a causal attention scores per head, exactly.

    top_left (torch's ``is_causal``, ``tril(ones(L, S))``): query i (0-based) sees keys 0..i, so
    sum over i of min(i + 1, seq_kv). bottom_right (flash-attn's convention, roofline.costs.attention's
    score_pairs): queries aligned to the end of the keys. Both are seq*(seq+1)/2 when seq_q == seq_kv."""
    if align == "bottom_right":
        # query i sees seq_kv - seq_q + i + 1 keys, clipped to [0, seq_kv]: the first seq_q - seq_kv queries of a
        # longer query block see none
        return score_pairs(seq_q, seq_kv, True) if seq_q <= seq_kv else seq_kv * (seq_kv + 1) // 2
    full = min(seq_q, seq_kv)
    return full * (full + 1) // 2 + max(0, seq_q - seq_kv) * seq_kv


# op -> (layout, causal alignment, backward). 'bhsd': (batch, heads, seq, dim), SDPA's; 'bshd': (batch, seq,
# heads, dim), the flash / mem-efficient kernels' own entry points.
ATTENTION: dict[str, tuple[str, str, bool]] = {
    "scaled_dot_product_attention": ("bhsd", "top_left", False),
    "_scaled_dot_product_flash_attention": ("bhsd", "top_left", False),
    "_scaled_dot_product_efficient_attention": ("bhsd", "top_left", False),
    "_scaled_dot_product_cudnn_attention": ("bhsd", "top_left", False),
    "_scaled_dot_product_flash_attention_for_cpu": ("bhsd", "top_left", False),
    "_scaled_dot_product_fused_attention_overrideable": ("bhsd", "top_left", False),
    "_scaled_dot_product_flash_attention_backward": ("bhsd", "top_left", True),
    "_scaled_dot_product_efficient_attention_backward": ("bhsd", "top_left", True),
    "_scaled_dot_product_cudnn_attention_backward": ("bhsd", "top_left", True),
    "_scaled_dot_product_flash_attention_for_cpu_backward": ("bhsd", "top_left", True),
    "_scaled_dot_product_fused_attention_overrideable_backward": ("bhsd", "top_left", True),
    "_flash_attention_forward": ("bshd", "bottom_right", False),
    "_flash_attention_backward": ("bshd", "bottom_right", True),
    "_efficient_attention_forward": ("bshd", "mask_type", False),
    "_efficient_attention_backward": ("bshd", "mask_type", True),
}

#: FLOPs per score of the backward's element-wise work: recompute P = exp(S - lse) 2, dS = P*(dP - D) 2.
SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT = 4


def _lengths(offsets: Any) -> list[int]:
    values = [int(v) for v in offsets.tolist()]
    return [b - a for a, b in itertools.pairwise(values)]


def _padded(shape: Any) -> tuple[int, ...]:
    """A shape with leading 1s up to 3 dims."""
    return (1,) * max(0, 3 - len(shape)) + tuple(int(d) for d in shape)


def _attention_formula(layout: str, align: str, backward: bool) -> Formula:
    def formula(call: Call) -> OpCost:
        # NB: fused attention (FlashAttention-style): Q, K, V (and a mask/bias, its broadcast dims once) read once,
        # O and the logsumexp written once; the S x S scores never reach memory. FLOPs: Q K^T 2*pairs*E and P V
        # 2*pairs*Ev, plus 5 softmax FLOPs per score (roofline.costs.attention), +1 per score when a mask or
        # bias is added. pairs = batch * query heads * scored (query, key) pairs: causal counts only the
        # unmasked pairs (exact). GQA/MQA: K and V have fewer heads and are read at their own size; FLOPs are
        # per query head. Backward: recompute Q K^T, dV, dP, dQ, dK = 2*pairs*(3E + 2Ev) plus 4 per score
        # (recompute P, dS); D = rowsum(dO * O) is per row and not counted. Dropout is not counted.
        q, k, v = call.tensor("query"), call.tensor("key"), call.tensor("value")
        # NB: SDPA takes (seq, dim) and (heads, seq, dim) too: a missing leading dim counts 1
        q_shape, k_shape = _padded(q.shape), _padded(k.shape)
        if layout == "bhsd":
            heads_q, heads_kv = q_shape[-3], k_shape[-3]
            seq_q, seq_kv = q_shape[-2], k_shape[-2]
        else:
            heads_q, heads_kv = q_shape[-2], k_shape[-2]
            seq_q, seq_kv = q_shape[-3], k_shape[-3]
        e, ev = q.shape[-1], v.shape[-1]
        causal = bool(call.args.get("is_causal"))
        alignment = align
        if align == "mask_type":
            mask_type = int(call.args.get("custom_mask_type") or 0)
            causal = mask_type in (1, 2)
            alignment = "top_left" if mask_type == 1 else "bottom_right"

        def pairs_of(lq: int, lk: int) -> int:
            return causal_pairs(lq, lk, alignment) if causal else lq * lk  # type: ignore[arg-type]

        cum_q = call.tensor("cum_seq_q", "cu_seqlens_q")
        cum_k = call.tensor("cum_seq_k", "cu_seqlens_k")
        if cum_q is not None and cum_k is not None and cum_q.numel() > 1:
            # NB: variable-length (packed) batch: pairs summed over the sequences given by the offsets.
            per_head = sum(pairs_of(lq, lk) for lq, lk in zip(_lengths(cum_q), _lengths(cum_k), strict=False))
        else:
            batch = prod(q_shape[:-3])
            per_head = batch * pairs_of(seq_q, seq_kv)
        pairs = heads_q * per_head
        masked = call.tensor("attn_mask", "attn_bias", "bias") is not None
        if backward:
            flops = 2 * pairs * (3 * e + 2 * ev) + SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT * pairs
        else:
            flops = 2 * pairs * (e + ev) + (SOFTMAX_FLOPS_PER_ELEMENT + masked) * pairs
        notes = ["fused: Q, K, V read once, O and logsumexp written once, no S x S in memory"]
        if causal:
            notes.append(f"causal ({alignment.replace('_', '-')} aligned): only unmasked pairs counted")
        if heads_kv != heads_q:
            notes.append(f"GQA: {heads_q} query heads share {heads_kv} KV heads (K, V read once)")
        notes.append("softmax FLOPs included (5 per score, vector units)" if not backward
                     else "backward: 5 matmuls over the pairs + 4 per score")  # fmt: skip
        dtype = dtype_name(q.dtype)
        return OpCost(int(flops), io_bytes(call), dtype, "tensor", "; ".join(notes))

    return formula


for _name, (_layout, _align, _backward) in ATTENTION.items():
    register("attention", _name)(_attention_formula(_layout, _align, _backward))


def block_mask_density(block_mask: Any) -> tuple[float, str]:
    """(fraction of the (query block, key block) tiles a flex_attention block mask computes, a note): partial
    and full blocks over all tiles; (1.0, note) when the mask is absent or unreadable.

    ``block_mask``: the HOP's tuple (BlockMask.as_tuple(): q_len, kv_len, kv_num_blocks, kv_indices,
    full_kv_num_blocks, ...)."""
    try:
        kv_num, kv_indices, full_num = block_mask[2], block_mask[3], block_mask[4]
        tiles = int(kv_num.numel()) * int(kv_indices.shape[-1])
        computed = int(kv_num.sum()) + (int(full_num.sum()) if full_num is not None else 0)
    except (TypeError, IndexError, AttributeError, RuntimeError):
        return 1.0, "no block mask read: every (query, key) pair counted"
    if tiles <= 0:
        return 1.0, "empty block mask: every (query, key) pair counted"
    density = min(1.0, computed / tiles)
    return density, f"block mask: {computed} of {tiles} tiles computed ({100 * density:.0f}%)"


def flex_attention_cost(args: tuple[Any, ...], out: Any, *, backward: bool = False) -> OpCost:
    """The cost of torch's flex_attention higher-order op (forward: query, key, value, score_mod, block_mask,
    ...; backward: query, key, value, out, logsumexp, grad_out, grad_logsumexp, fw_graph, joint_graph,
    block_mask, ...).

    NB: as fused attention (the formula above) over the pairs the block mask computes: pairs = batch * query
    heads * Lq * Lkv * density, density = computed tiles / all tiles (a partial tile counts whole: the kernel
    scores it and masks inside). The score_mod and mask_mod work per score is not counted. Bytes: every tensor
    argument (Q, K, V, the block mask's index tensors; backward: O, logsumexp, dO too) read once, the outputs
    written once."""
    from roofline.costs.aten.custom import compulsory_bytes

    q, k, v = args[0], args[1], args[2]
    q_shape, k_shape = _padded(q.shape), _padded(k.shape)
    batch, heads_q, seq_q, e = prod(q_shape[:-3]), q_shape[-3], q_shape[-2], int(q.shape[-1])
    heads_kv, seq_kv, ev = k_shape[-3], k_shape[-2], int(v.shape[-1])
    density, mask_note = block_mask_density(args[9] if backward else args[4])
    pairs = batch * heads_q * seq_q * seq_kv * density
    if backward:
        flops = 2 * pairs * (3 * e + 2 * ev) + SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT * pairs
        tensors = list(args[:7])
    else:
        flops = 2 * pairs * (e + ev) + SOFTMAX_FLOPS_PER_ELEMENT * pairs
        tensors = [q, k, v]
    masks = args[9] if backward else args[4]
    notes = ["flex attention as fused attention (Q, K, V read once, no S x S in memory)", mask_note,
             "score_mod / mask_mod work not counted"]  # fmt: skip
    if heads_kv != heads_q:
        notes.append(f"GQA: {heads_q} query heads share {heads_kv} KV heads")
    nbytes = compulsory_bytes([tensors, masks if isinstance(masks, tuple) else ()], out)
    return OpCost(round(flops), nbytes, dtype_name(q.dtype), "tensor", "; ".join(notes))


# ------------------------------------------------------------------------------ examples (the formula test)

B, H, S, E = 2, 2, 4, 8  # batch, heads, sequence, head dim of the examples


def _bhsd(t: Any, n: int = 1) -> list[Any]:
    return [t.randn(B, H, S, E) for _ in range(n)]


def _bshd(t: Any, n: int = 1) -> list[Any]:
    return [t.randn(B, S, H, E) for _ in range(n)]


def _seeds(t: Any) -> list[Any]:
    return [t.zeros((), dtype=t.int64), t.zeros((), dtype=t.int64)]


def _lse(t: Any) -> Any:
    return t.zeros(B, H, S)


def _grads(t: Any, n: int = 3) -> tuple[Any, ...]:
    return tuple(t.zeros(B, H, S, E) for _ in range(n))


#: Representative calls for tests/test_formula_examples.py (registry.Example): (batch 2, heads 2, seq 4, dim 8)
#: fp32; the CUDA-only kernels with their outputs given.
EXAMPLES: dict[str, Example] = {
    "scaled_dot_product_attention": lambda t: (_bhsd(t, 3), {"is_causal": True}),
    "_scaled_dot_product_efficient_attention": lambda t: (
        (*_bhsd(t, 3), None, True),
        {},
        (t.zeros(B, H, S, E), _lse(t), *_seeds(t)),
    ),
    "_scaled_dot_product_cudnn_attention": lambda t: ((*_bhsd(t, 3), None, True), {}, (t.zeros(B, H, S, E), _lse(t))),
    "_scaled_dot_product_flash_attention": lambda t: ((*_bhsd(t, 3),), {}, (t.zeros(B, H, S, E), _lse(t))),
    "_scaled_dot_product_fused_attention_overrideable": lambda t: ((*_bhsd(t, 3),), {}, (t.zeros(B, H, S, E), _lse(t))),
    "_scaled_dot_product_flash_attention_for_cpu": lambda t: ((*_bhsd(t, 3),), {"is_causal": True}),
    "_scaled_dot_product_flash_attention_backward": lambda t: (
        (*_bhsd(t, 5), _lse(t), None, None, S, S, 0.0, True, *_seeds(t)),
        {},
        _grads(t),
    ),
    "_scaled_dot_product_efficient_attention_backward": lambda t: (
        (*_bhsd(t, 4), None, t.zeros(B, H, S, E), _lse(t), *_seeds(t), 0.0, [True, True, True, False], True),
        {},
        (*_grads(t), None),
    ),
    "_scaled_dot_product_cudnn_attention_backward": lambda t: (
        (*_bhsd(t, 5), _lse(t), *_seeds(t), None, None, None, S, S, 0.0, True),
        {},
        _grads(t),
    ),
    "_scaled_dot_product_fused_attention_overrideable_backward": lambda t: (
        (
            *_bhsd(t, 4),
            None,
            [True, True, True, False],
            t.zeros(B, H, S, E),
            _lse(t),
            None,
            None,
            S,
            S,
            0.0,
            True,
            *_seeds(t),
        ),
        {},
        (*_grads(t), None),
    ),
    "_scaled_dot_product_flash_attention_for_cpu_backward": lambda t: ((*_bhsd(t, 5), _lse(t), 0.0, True), {}),
    "_flash_attention_forward": lambda t: (
        (*_bshd(t, 3), None, None, S, S, 0.0, True, False),
        {},
        (t.zeros(B, S, H, E), _lse(t)),
    ),
    "_flash_attention_backward": lambda t: (
        (*_bshd(t, 5), _lse(t), None, None, S, S, 0.0, True, *_seeds(t)),
        {},
        tuple(t.zeros(B, S, H, E) for _ in range(3)),
    ),
    "_efficient_attention_forward": lambda t: (
        (*_bshd(t, 3), None, None, None, S, S, 0.0, 1),
        {},
        (t.zeros(B, S, H, E), _lse(t)),
    ),
    "_efficient_attention_backward": lambda t: (
        (*_bshd(t, 4), None, t.zeros(B, S, H, E), None, None, S, S, _lse(t), 0.0, *_seeds(t), 1, False),
        {},
        (*(t.zeros(B, S, H, E) for _ in range(3)), None),
    ),
}
