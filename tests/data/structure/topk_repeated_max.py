"""Top-k as a loop of max + scatter(-inf) (issue 27's topk.py; the source text's streaming top-K): k passes over
the input where torch.topk makes one. Expected top finding: ``written-out-topk``.
"""

import torch

EXPECTED_FINDING = "written-out-topk"


class Model(torch.nn.Module):
    def forward(self, x):
        x = x.clone()
        vals = []
        for _ in range(16):
            v, i = x.max(dim=-1, keepdim=True)
            vals.append(v)
            x = x.scatter(-1, i, float("-inf"))
        return torch.cat(vals, dim=-1)


def get_inputs():
    return (torch.randn(256, 8192),)


def get_init_inputs():
    return ()
