"""Scaled dot-product attention: O = softmax(Q K^T / sqrt(d)) V, fused (FlashAttention) or naive."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from roofline.costs.base import Cost, Kernel, Params, register
from roofline.dtypes import nbytes

Size = Annotated[int, Field(gt=0)]

#: FLOPs per score element of the softmax: max, subtract, exp, sum, divide
SOFTMAX_FLOPS_PER_ELEMENT = 5


class AttentionParams(Params):
    sizes = ("batch", "heads", "kv_heads", "seq_q", "seq_kv", "head_dim")

    batch: Size = 1
    heads: Size
    kv_heads: Size | None = None  # None: = heads (MHA); fewer: GQA (1: MQA)
    seq_q: Size
    seq_kv: Size | None = None  # None: = seq_q (self-attention)
    head_dim: Size
    dtype: str = "fp16"
    kv_dtype: str | None = None  # None: = dtype (a quantized KV cache, e.g. fp8, is read at kv_dtype)
    causal: bool = False
    impl: Literal["fused", "naive"] = "fused"

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        # Resolve the 'same as' defaults up front, so that a validated instance holds plain values.
        if isinstance(data, dict):
            data = dict(data)
            if data.get("kv_heads") is None and "heads" in data:
                data["kv_heads"] = data["heads"]
            if data.get("seq_kv") is None and "seq_q" in data:
                data["seq_kv"] = data["seq_q"]
            if data.get("kv_dtype") is None:
                data["kv_dtype"] = data.get("dtype", "fp16")
        return data

    @model_validator(mode="after")
    def _check(self) -> AttentionParams:
        if self.heads % self.n_kv_heads:
            raise ValueError(f"kv_heads ({self.n_kv_heads}) must divide heads ({self.heads})")
        if self.causal and self.seq_q > self.kv_len:
            raise ValueError(
                f"causal attention needs seq_q <= seq_kv (queries aligned to the end of the keys); "
                f"got seq_q={self.seq_q} seq_kv={self.kv_len}"
            )
        return self

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def kv_len(self) -> int:
        return self.seq_kv if self.seq_kv is not None else self.seq_q

    @property
    def kv_storage(self) -> str:
        return self.kv_dtype or self.dtype

    def label(self) -> str:
        text = f"batch={self.batch} heads={self.heads}"
        if self.n_kv_heads != self.heads:
            text += f" kv_heads={self.n_kv_heads}"
        text += f" seq_q={self.seq_q}"
        if self.kv_len != self.seq_q:
            text += f" seq_kv={self.kv_len}"
        text += f" head_dim={self.head_dim}"
        if self.causal:
            text += " causal"
        return f"{text} {self.impl}"


def score_pairs(seq_q: int, seq_kv: int, causal: bool) -> int:
    """(query, key) pairs that attention must score per head.

    Causal: query i (0-based) of seq_q is aligned to the end of seq_kv and sees seq_kv - seq_q + i + 1
    keys, so the pairs are seq_q*(seq_kv - seq_q) + seq_q*(seq_q + 1)/2 (the exact integer).
    """
    if not causal:
        return seq_q * seq_kv
    return seq_q * (seq_kv - seq_q) + seq_q * (seq_q + 1) // 2


@register("attention", AttentionParams, "O = softmax(Q K^T / sqrt(d)) V per head: fused (Flash) or naive")
def attention(p: AttentionParams) -> Cost:
    b, h, hkv, sq, skv, d = p.batch, p.heads, p.n_kv_heads, p.seq_q, p.kv_len, p.head_dim
    q = nbytes(b * h * sq * d, p.dtype)
    o = nbytes(b * h * sq * d, p.dtype)
    notes = [
        "2 FLOPs per multiply-add: Q K^T and P V each 2*batch*heads*pairs*head_dim",
        f"softmax: {SOFTMAX_FLOPS_PER_ELEMENT} FLOPs per score (max, subtract, exp, sum, divide); "
        "the 1/sqrt(d) scale is folded into Q K^T and not counted",
    ]
    if p.impl == "fused":
        # NB: one kernel (FlashAttention / SDPA): Q, K, V read once, O written once; the scores never
        # reach DRAM (online softmax). Tile reloads of K/V across query blocks are not counted. K and V
        # are read once per KV head (GQA/MQA share them across the query heads of a group).
        # NB: causal: only the unmasked pairs are computed (masked tiles are skipped); the few masked
        # elements inside diagonal tiles are not counted.
        pairs = b * h * score_pairs(sq, skv, p.causal)
        k = nbytes(b * hkv * skv * d, p.kv_storage)
        v = nbytes(b * hkv * skv * d, p.kv_storage)
        kernel = Kernel(
            "flash_attention",
            2 * (2 * pairs * d),
            q + k + v + o,
            p.dtype,
            "tensor",
            vector_flops=SOFTMAX_FLOPS_PER_ELEMENT * pairs,
        )
        notes += [
            "fused: Q, K, V read once, O written once; scores stay on chip (tile reloads not counted)",
            "softmax FLOPs run on the fp32 vector units; their time adds to the matmul time",
        ]
        if p.causal:
            notes.append("causal: only unmasked (query, key) pairs counted (masked tiles skipped)")
        return Cost(
            kind="attention",
            kernels=(kernel,),
            notes=tuple(notes),
            byte_terms={"q": q, "k": k, "v": v, "o": o},
        )

    # NB: naive: three kernels as in eager PyTorch: S = Q K^T (bmm, scale folded in as its alpha),
    # P = softmax(S) (the causal mask is applied inside it), O = P V (bmm). S and P are full
    # seq_q x seq_kv matrices per query head in DRAM, each written once and read once, even when causal
    # (the whole matrix is computed and then masked), so FLOPs count all seq_q*seq_kv pairs.
    # NB: GQA/MQA: K and V are read once per query head, as after repeat_interleave/expand (the copy
    # that materialises them is not counted as a kernel).
    pairs = b * h * sq * skv
    k = nbytes(b * h * skv * d, p.kv_storage)
    v = nbytes(b * h * skv * d, p.kv_storage)
    s = nbytes(pairs, p.dtype)
    probs = nbytes(pairs, p.dtype)
    kernels = (
        Kernel("bmm_qk", 2 * pairs * d, q + k + s, p.dtype, "tensor"),
        Kernel("softmax", SOFTMAX_FLOPS_PER_ELEMENT * pairs, s + probs, p.dtype, "vector"),
        Kernel("bmm_pv", 2 * pairs * d, probs + v + o, p.dtype, "tensor"),
    )
    notes += [
        "naive: S = Q K^T and P = softmax(S) materialised in DRAM (full seq_q x seq_kv per head, "
        "each written once and read once)",
    ]
    if p.causal:
        notes.append("naive causal: the full matrix is computed and then masked, so all pairs are counted")
    if hkv != h:
        notes.append("naive GQA/MQA: K and V read once per query head (as after repeat_interleave)")
    return Cost(
        kind="attention",
        kernels=kernels,
        notes=tuple(notes),
        byte_terms={"q": q, "k": k, "v": v, "o": o, "scores": 2 * s, "probs": 2 * probs},
    )
