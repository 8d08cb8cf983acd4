"""A large fp32 matmul (as written: no TF32, no autocast).

Bottleneck: compute, on the fp32 roof. On a GPU with tensor cores the same GEMM in TF32 or bf16 runs on a roof
several times higher (H100 SXM: 67 fp32 vs 495 TF32 vs 989 bf16 TFLOP/s).
Expected top finding on a GPU: ``fp32-matmul`` (redundancy of precision: torch.set_float32_matmul_precision('high')
or bf16 autocast), with the fp32 vs TF32 roofline as the bound on the gain. On a CPU (no TF32):
``compute-bound``.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, 1024^3: about a second on a laptop CPU) or ``large`` (8192^3), or
``roofline diagnose fp32_matmul.py -- --size large``. Do not pass --dtype: it would cast the matmul away from fp32.
"""

import os
import sys

import torch
from torch import nn

# small (default): about a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
N = {"small": 1024, "large": 8192}[SIZE]
EXPECTED_FINDING = "fp32-matmul"  # on a GPU with tensor cores; compute-bound on a CPU


class Model(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, n) / n**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight


def get_init_inputs():
    return (N,)


def get_inputs():
    return (torch.randn(N, N),)
