"""The GPT-2-small-like stack of the distributed benchmark (12 layers, hidden 768, 12 heads), shared by
gpt2_ddp.py and gpt2_fsdp.py. Pre-norm blocks (gpt12.py's Block): LayerNorm, fused QKV Linear, SDPA (causal),
output Linear, LayerNorm, MLP (4x, GELU). bf16 on a GPU, fp32 on the CPU; ROOFLINE_MODEL_SIZE=tiny: 2 layers of
64 (CPU checks)."""

import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt12 import Block  # the same pre-norm block as the 12-layer GPT of the diagnose checks

TINY = os.environ.get("ROOFLINE_MODEL_SIZE") == "tiny"
LAYERS, HIDDEN, HEADS, SEQ, BATCH = (2, 64, 4, 32, 2) if TINY else (12, 768, 12, 1024, 8)


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
