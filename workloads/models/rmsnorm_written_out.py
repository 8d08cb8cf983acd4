"""An RMSNorm written out op by op (pow, mean, add eps, rsqrt, mul, mul weight) before a Linear, as many
hand-written transformer blocks do.

Bottleneck: memory. Each of the six ops reads its inputs from memory and writes its output back, and the chain
crosses a reduction (the mean over the hidden dimension) and a broadcast (the per-row scale), so a rule that
fuses only same-sized element-wise ops stops there. One fused kernel reads x once and writes the result once.
Expected finding: ``fused-op`` (locality: nn.RMSNorm / F.rms_norm, or torch.compile), with the bytes of the ops
unfused vs fused as the bound on the gain.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, 256 x 4096 rows: well under a second on a laptop CPU) or ``large``
(8192 x 8192), or ``roofline diagnose rmsnorm_written_out.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): well under a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
ROWS, HIDDEN = {"small": (256, 4096), "large": (8192, 8192)}[SIZE]
EXPECTED_FINDING = "fused-op"


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight


class ModelFixed(nn.Module):
    """The fix the finding names (benchmarks/diagnose_fixes_gpu.py times it beside Model): the fused op."""

    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def get_init_inputs():
    return (HIDDEN,)


def get_inputs():
    return (torch.randn(ROWS, HIDDEN),)
