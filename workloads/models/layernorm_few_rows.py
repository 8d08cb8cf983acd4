"""A layer norm over a few very long rows: one thread block per row leaves most of the GPU idle.

Bottleneck: parallelism. PyTorch's layer-norm kernel gives each row one block; 16 rows of 4,194,304 columns make
16 blocks on a GPU of 132 SMs, so neither DRAM nor the SMs get busy (the op runs at a few percent of its memory
roof). Its intensity is below the ridge, yet it is not limited by memory bandwidth.
Expected finding: ``under-filled-gpu`` on a GPU (associativity + locality: split the reduction over more blocks,
a two-pass reduction, or torch.compile, which generates one shaped for these sizes); on a CPU the op is not
under-filled and this model shows whatever the CPU's rows say.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, 16 x 65,536: well under a second on a laptop CPU) or ``large``
(16 x 4,194,304), or ``roofline diagnose layernorm_few_rows.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): well under a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
ROWS, COLS = {"small": (16, 65_536), "large": (16, 4_194_304)}[SIZE]
EXPECTED_FINDING = "under-filled-gpu"  # on a GPU


class Model(nn.Module):
    def __init__(self, cols: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(cols)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_init_inputs():
    return (COLS,)


def get_inputs():
    return (torch.randn(ROWS, COLS),)
