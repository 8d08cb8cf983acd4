"""Naive attention: softmax(Q K^T / sqrt(d)) V as matmul -> softmax -> matmul, materialising the S x S scores.

Bottleneck: memory traffic of the scores. The S x S score and probability matrices (per head) are written to memory
and read back by the scale, the softmax and the second matmul; FlashAttention-style kernels (online softmax +
tiling) never store them. Twin: attention_sdpa.py (same shapes, F.scaled_dot_product_attention).
Expected top finding: ``naive-attention`` (associativity + locality: use F.scaled_dot_product_attention), with
the bytes moved naive vs fused as the bound on the gain.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, about a second on a laptop CPU) or ``large`` (GPU-sized), or
``roofline diagnose attention_naive.py -- --size large``.
"""

import math
import os
import sys

import torch
from torch import nn

# small (default): about a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
BATCH, HEADS, SEQ, HEAD_DIM = {"small": (2, 4, 512, 64), "large": (8, 16, 4096, 128)}[SIZE]
EXPECTED_FINDING = "naive-attention"


class Model(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        probs = torch.softmax(scores, dim=-1)
        return probs @ v


def get_init_inputs():
    return ()


def get_inputs():
    return tuple(torch.randn(BATCH, HEADS, SEQ, HEAD_DIM) for _ in range(3))
