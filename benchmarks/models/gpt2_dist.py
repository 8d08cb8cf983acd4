"""The GPT-2-small-like stack of the distributed benchmark (12 layers, hidden 768, 12 heads), shared by
gpt2_ddp.py and gpt2_fsdp.py. Pre-norm blocks: LayerNorm, fused QKV Linear, SDPA (causal), output Linear,
LayerNorm, MLP (4x, GELU). bf16 on a GPU, fp32 on the CPU; ROOFLINE_MODEL_SIZE=tiny: 2 layers of 64 (CPU checks)."""

import os

import torch
from torch import nn
from torch.nn import functional as F

TINY = os.environ.get("ROOFLINE_MODEL_SIZE") == "tiny"
LAYERS, HIDDEN, HEADS, SEQ, BATCH = (2, 64, 4, 32, 2) if TINY else (12, 768, 12, 1024, 8)


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


class GPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(HIDDEN, HEADS) for _ in range(LAYERS))
        self.ln = nn.LayerNorm(HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.ln(x)


def device_and_dtype() -> tuple[torch.device, torch.dtype]:
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device()), torch.bfloat16
    return torch.device("cpu"), torch.float32


def inputs(rank: int) -> tuple[torch.Tensor]:
    _, dtype = device_and_dtype()
    generator = torch.Generator().manual_seed(1 + rank)
    return (torch.randn(BATCH, SEQ, HIDDEN, generator=generator).to(dtype),)
