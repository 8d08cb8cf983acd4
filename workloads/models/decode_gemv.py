"""One decode step of a small decoder's MLP blocks: every Linear runs at M = 1 (a GEMV).

Bottleneck: memory. At one token per step each weight byte read does 2 FLOPs / (bytes per weight): the intensity
is about 0.5 FLOP/B in fp32 (1 in bf16), far below any ridge, and the weight bytes dominate what moves.
Expected top finding: ``memory-bound-gemv`` (redundancy: batch requests, quantize weights, KV cache, speculative
decoding), with int4 weights as the bound on the gain.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default: 4 blocks of 1024 -> 4096 -> 1024, about a second on a laptop CPU) or
``large`` (8 blocks of 4096 -> 14336 -> 4096, GPU-sized), or ``roofline diagnose decode_gemv.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): about a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
BLOCKS, HIDDEN, FFN = {"small": (4, 1024, 4096), "large": (8, 4096, 14336)}[SIZE]
EXPECTED_FINDING = "memory-bound-gemv"


class Block(nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.silu(self.up(x)))


class Model(nn.Module):
    def __init__(self, blocks: int, hidden: int, ffn: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(hidden, ffn) for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def get_init_inputs():
    return (BLOCKS, HIDDEN, FFN)


def get_inputs():
    return (torch.randn(1, HIDDEN),)  # one token
