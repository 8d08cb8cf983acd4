"""Causal attention written out (issue 27's attn.py): matmul, a causal mask built in every call (triu +
masked_fill), a softmax written as max, sub, exp, sum, div, matmul. Expected top finding: ``naive-attention``
(F.scaled_dot_product_attention with is_causal=True).
"""

import torch

EXPECTED_FINDING = "naive-attention"


class Model(torch.nn.Module):
    def forward(self, q, k, v):
        s = q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5)
        n = s.shape[-1]
        mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        s = s.masked_fill(mask, float("-inf"))
        m = s.max(dim=-1, keepdim=True).values
        e = torch.exp(s - m)
        p = e / e.sum(dim=-1, keepdim=True)
        return p @ v


def get_inputs():
    return tuple(torch.randn(2, 8, 256, 64) for _ in range(3))


def get_init_inputs():
    return ()
