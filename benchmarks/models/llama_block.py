"""A Llama-style decoder stack for `roofline predict` validation: prefill (a prompt) or decode (one token per
sequence against a KV cache).

Pre-norm blocks: RMSNorm, Q/K/V projections with grouped-query attention (SDPA over repeated K/V heads), rotary
position embeddings, output projection, RMSNorm, SwiGLU MLP. Sizes: 4 layers, hidden 2048, 16 heads, 4 K/V heads,
FFN 5632 (a TinyLlama-shaped layer). Prefill: batch 4 x 1024 tokens. Decode: batch 8, one new token each over a
1024-token cache (the cache is an input: no cat, the step reads it once).

    roofline diagnose benchmarks/models/llama_block.py --dtype bf16 -- --phase prefill
    roofline diagnose benchmarks/models/llama_block.py --dtype bf16 -- --phase decode
"""

import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

PHASE = os.environ.get("ROOFLINE_LLAMA_PHASE", "prefill")
if "--phase" in sys.argv[:-1]:
    PHASE = sys.argv[sys.argv.index("--phase") + 1]
if PHASE not in ("prefill", "decode"):
    raise SystemExit(f"--phase {PHASE!r}: prefill or decode")
LAYERS, HIDDEN, HEADS, KV_HEADS, FFN = 4, 2048, 16, 4, 5632
HEAD_DIM = HIDDEN // HEADS
PREFILL_BATCH, PREFILL_SEQ = 4, 1024
DECODE_BATCH, CONTEXT = 8, 1024


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(HIDDEN)
        self.q = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.v = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.o = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.norm2 = nn.RMSNorm(HIDDEN)
        self.gate = nn.Linear(HIDDEN, FFN, bias=False)
        self.up = nn.Linear(HIDDEN, FFN, bias=False)
        self.down = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x, cos, sin, cache_k=None, cache_v=None):
        b, s, _ = x.shape
        h = self.norm1(x)
        q = rotate(self.q(h).view(b, s, HEADS, HEAD_DIM).transpose(1, 2), cos, sin)
        k = rotate(self.k(h).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2), cos, sin)
        v = self.v(h).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        if cache_k is not None:  # decode: attend over the cache (the new token's K/V written into its last slot)
            cache_k[:, :, -1:] = k
            cache_v[:, :, -1:] = v
            k, v = cache_k, cache_v
        groups = HEADS // KV_HEADS
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=cache_k is None)
        x = x + self.o(y.transpose(1, 2).reshape(b, s, HIDDEN))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.RMSNorm(HIDDEN)

    def forward(self, x, cos, sin, *caches):
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, caches[2 * i], caches[2 * i + 1]) if caches else block(x, cos, sin)
        return self.norm(x)


def _rope(positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (10000 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    angles = positions.float()[:, None] * inv[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos()[None, None], emb.sin()[None, None]


def get_init_inputs():
    return ()


def get_inputs():
    if PHASE == "prefill":
        cos, sin = _rope(torch.arange(PREFILL_SEQ))
        return (torch.randn(PREFILL_BATCH, PREFILL_SEQ, HIDDEN), cos, sin)
    cos, sin = _rope(torch.tensor([CONTEXT - 1]))
    caches = [torch.randn(DECODE_BATCH, KV_HEADS, CONTEXT, HEAD_DIM) for _ in range(2 * LAYERS)]
    return (torch.randn(DECODE_BATCH, 1, HIDDEN), cos, sin, *caches)
