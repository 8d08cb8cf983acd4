"""An unfused GELU (tanh approximation) written out op by op: eight element-wise ops on one large tensor.

Bottleneck: memory. Each op reads its inputs from memory and writes its output back (a round trip per op), while
one fused kernel would read x once and write the result once.
Expected top finding: ``elementwise-chain`` (locality: fuse with torch.compile or use F.gelu(approximate='tanh')),
with the bytes moved unfused vs fused as the bound on the gain.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, 2^21 elements: about a second on a laptop CPU) or ``large`` (2^27
elements), or ``roofline diagnose gelu_chain_unfused.py -- --size large``.
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
NUMEL = {"small": 2**21, "large": 2**27}[SIZE]
EXPECTED_FINDING = "elementwise-chain"


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cube = x * x * x
        inner = x + 0.044715 * cube
        inner = inner * math.sqrt(2.0 / math.pi)
        t = torch.tanh(inner)
        return 0.5 * x * (1.0 + t)


def get_init_inputs():
    return ()


def get_inputs():
    return (torch.randn(NUMEL),)
