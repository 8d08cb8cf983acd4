"""A deep stack of tiny layers: 64 blocks of Linear(32, 32) + LayerNorm + ReLU on a batch of 8.

Bottleneck: launch (GPU) / per-op dispatch (CPU). Every op does a few thousand FLOPs, far less than the time to
launch a kernel or dispatch an op: the device idles between them and the host's overhead sets the pace.
Expected top finding: ``launch-bound`` (locality + associativity: CUDA graphs / torch.compile(mode='reduce-overhead'),
fusion, larger batches), with the one-launch-per-op roofline vs one graph as the bound on the gain.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, 64 blocks) or ``large`` (256 blocks), or
``roofline diagnose launch_bound_tiny_ops.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): about a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
BLOCKS, WIDTH, BATCH = {"small": (64, 32, 8), "large": (256, 32, 8)}[SIZE]
EXPECTED_FINDING = "launch-bound"


class Model(nn.Module):
    def __init__(self, blocks: int, width: int) -> None:
        super().__init__()
        self.blocks = nn.Sequential(
            *(nn.Sequential(nn.Linear(width, width), nn.LayerNorm(width), nn.ReLU()) for _ in range(blocks))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def get_init_inputs():
    return (BLOCKS, WIDTH)


def get_inputs():
    return (torch.randn(BATCH, WIDTH),)
