"""GPT-2's lm_head alone: [8192 x 768] @ [768 x 50257] (with ROOFLINE_PAD=1 the vocabulary padded to 50304).

    roofline diagnose benchmarks/models/lm_head.py --device cuda --dtype bf16 --counters
    ROOFLINE_PAD=1 roofline diagnose benchmarks/models/lm_head.py --device cuda --dtype bf16 --counters

The unaligned rows (50257 x 2 B) and the padded ones side by side: docs/performance.md ("A matmul's shape").
"""

import os

import torch

N = 50304 if os.environ.get("ROOFLINE_PAD") == "1" else 50257


class Model(torch.nn.Module):
    def forward(self, x, w):
        return x @ w


def get_inputs():
    return (torch.randn(8192, 768), torch.randn(768, N))
