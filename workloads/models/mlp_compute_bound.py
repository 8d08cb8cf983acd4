"""A compute-bound MLP: three large Linear layers (GEMMs) with ReLU between them.

Bottleneck: compute. Each GEMM's intensity (about 2*M*N*K / (2*(M*K + K*N + M*N)) FLOP/B, hundreds of FLOP/B at
these sizes) is far above the ridge, so the matmuls run near their compute roof.
Expected top finding: ``compute-bound`` (sparsity + separability + symmetry: do fewer FLOPs). Run it on a GPU with
``--dtype bf16``: in fp32 the ``fp32-matmul`` finding (TF32 / bf16 autocast) comes first, as it should.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, about a second on a laptop CPU) or ``large`` (GPU-sized), or
``roofline diagnose mlp_compute_bound.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): about a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
BATCH, WIDTH = {"small": (256, 1024), "large": (8192, 8192)}[SIZE]
EXPECTED_FINDING = "compute-bound"


class Model(nn.Module):
    def __init__(self, width: int, layers: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x


def get_init_inputs():
    return (WIDTH,)


def get_inputs():
    return (torch.randn(BATCH, WIDTH),)
