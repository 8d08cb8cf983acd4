"""Fused attention: the twin of attention_naive.py (same shapes) through F.scaled_dot_product_attention.

The fused kernel (FlashAttention / memory-efficient on a GPU, a flash-style kernel on the CPU) computes the softmax
online over tiles of K and V: the S x S scores never reach memory, so the bytes moved are Q, K, V and the output.
Expected: never a ``naive-attention`` finding. At the large size on a GPU with ``--dtype bf16`` the fused kernel is
compute-bound at about 70% of the bf16 roof (68% on an H100, 70% on an H200), right at the compute-bound rule's
threshold: ``compute-bound`` shows on some GPUs and not on others. Compare its report with attention_naive.py's
(49x the bytes, about 7x the time on an H200).

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, about a second on a laptop CPU) or ``large`` (GPU-sized), or
``roofline diagnose attention_sdpa.py -- --size large``.
"""

import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

# small (default): about a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
BATCH, HEADS, SEQ, HEAD_DIM = {"small": (2, 4, 512, 64), "large": (8, 16, 4096, 128)}[SIZE]
EXPECTED_FINDING = None  # never naive-attention; compute-bound where the kernel reaches 70% of the roof


class Model(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


def get_init_inputs():
    return ()


def get_inputs():
    return tuple(torch.randn(BATCH, HEADS, SEQ, HEAD_DIM) for _ in range(3))
