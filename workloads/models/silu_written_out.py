"""SiLU written out as x * torch.sigmoid(x): two element-wise ops where one would do.

Bottleneck: memory. The sigmoid writes a full-size tensor that the multiply reads back together with x: three
tensor round trips where F.silu reads x once and writes once. Two ops are too few for a chain rule; the dataflow
(the multiply reads the sigmoid's input and its output) names the pattern.
Expected finding: ``fused-op`` (locality: F.silu), with the bytes unfused vs fused as the bound on the gain.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, 2^21 elements: well under a second on a laptop CPU) or ``large``
(2^28 elements), or ``roofline diagnose silu_written_out.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): well under a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
NUMEL = {"small": 2**21, "large": 2**28}[SIZE]
EXPECTED_FINDING = "fused-op"


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


class ModelFixed(nn.Module):
    """The fix the finding names (benchmarks/diagnose_fixes_gpu.py times it beside Model): the fused op."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(x)


def get_init_inputs():
    return ()


def get_inputs():
    return (torch.randn(NUMEL),)
