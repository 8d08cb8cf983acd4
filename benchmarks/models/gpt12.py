"""A 12-layer GPT-style stack for the diagnose wall-time check: hidden 768, 12 heads, seq 1024, batch 8.

`roofline diagnose benchmarks/models/gpt12.py --device cuda --dtype bf16` must finish in at most 30 s (warm-up
included). Pre-norm blocks: LayerNorm, fused QKV Linear, SDPA (causal), output Linear, LayerNorm, MLP (4x, GELU).
"""

import torch
from torch import nn
from torch.nn import functional as F

LAYERS, HIDDEN, HEADS, SEQ, BATCH = 12, 768, 12, 1024, 8


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(HIDDEN, HEADS) for _ in range(LAYERS))
        self.ln = nn.LayerNorm(HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.ln(x)


def get_init_inputs():
    return ()


def get_inputs():
    return (torch.randn(BATCH, SEQ, HIDDEN),)
