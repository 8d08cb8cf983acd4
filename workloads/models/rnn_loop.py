"""An Elman RNN written as a Python loop over the time axis: the same small ops, step after step.

Bottleneck: the sequential recurrence. Each step issues the same few small ops (two matmuls, an add, a tanh) on
one time slice; the steps run one after the other, each op too small to use the device and paying its own launch
(GPU) or dispatch (CPU) overhead.
Expected top finding: ``sequential-loop`` (associativity: a parallel scan or chunked recurrence; at least one GEMM
for all steps' input projections, and a fused cell such as nn.RNN / cuDNN).

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default, 64 steps: about a second on a laptop CPU) or ``large`` (512 steps,
hidden 1024), or ``roofline diagnose rnn_loop.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): about a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
BATCH, STEPS, INPUT, HIDDEN = {"small": (16, 64, 64, 128), "large": (64, 512, 512, 1024)}[SIZE]
EXPECTED_FINDING = "sequential-loop"


class Model(nn.Module):
    def __init__(self, input_size: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.w_ih = nn.Linear(input_size, hidden)
        self.w_hh = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [batch, steps, input]
        h = x.new_zeros(x.shape[0], self.hidden)
        outputs = []
        for t in range(x.shape[1]):
            h = torch.tanh(self.w_ih(x[:, t]) + self.w_hh(h))
            outputs.append(h)
        return torch.stack(outputs, dim=1)


def get_init_inputs():
    return (INPUT, HIDDEN)


def get_inputs():
    return (torch.randn(BATCH, STEPS, INPUT),)
