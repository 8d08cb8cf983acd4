"""torch.diag(a) @ b: a row scaling written as a matrix product with an n x n diagonal matrix.

Bottleneck: the algorithm. The product does 2 n^2 m FLOPs and builds an n x n matrix (n^2 elements, n of them
nonzero) for n m multiplies of work: a broadcasted multiply a[:, None] * b reads a and b once and writes the result.
Expected finding: ``cheaper-algorithm`` (sparsity / structure: the broadcasted multiply), with the roofline time of
the multiply as the bound on the gain.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, n = m = 1024: well under a second on a laptop CPU) or ``large``
(n = m = 8192), or ``roofline diagnose diag_matmul.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): well under a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
N, M = {"small": (1024, 1024), "large": (8192, 8192)}[SIZE]
EXPECTED_FINDING = "cheaper-algorithm"


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.diag(a) @ b


class ModelFixed(nn.Module):
    """The fix the finding names (benchmarks/diagnose_fixes_gpu.py times it beside Model): diag(a) @ b scales the
    rows of b, a broadcast multiply (O(n m) instead of O(n^2 m))."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a[:, None] * b


def get_init_inputs():
    return ()


def get_inputs():
    return (torch.randn(N), torch.randn(N, M))
