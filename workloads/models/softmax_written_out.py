"""A softmax written out (max, subtract, exp, sum, divide) over the last dimension.

Bottleneck: memory. Five ops, two of them reductions with broadcasts back over the rows: each op reads and writes
full-size tensors (the max and the sum read the input again), where torch.softmax reads the input once and writes
the result once (an online softmax keeps the running max and sum in registers).
Expected finding: ``fused-op`` (locality: torch.softmax), with the bytes unfused vs fused as the bound on the gain.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, 512 x 2048: well under a second on a laptop CPU) or ``large``
(16384 x 8192), or ``roofline diagnose softmax_written_out.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): well under a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
ROWS, COLS = {"small": (512, 2048), "large": (16384, 8192)}[SIZE]
EXPECTED_FINDING = "fused-op"


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shifted = x - x.amax(dim=-1, keepdim=True)
        e = torch.exp(shifted)
        return e / e.sum(dim=-1, keepdim=True)


class ModelFixed(nn.Module):
    """The fix the finding names (benchmarks/diagnose_fixes_gpu.py times it beside Model): the fused op."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_init_inputs():
    return ()


def get_inputs():
    return (torch.randn(ROWS, COLS),)
