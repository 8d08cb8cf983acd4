"""A small bf16 CNN block (3x3 convolution, depthwise 3x3, 1x1) fed NCHW tensors, the PyTorch default layout.

Bottleneck: layout. On GPUs with tensor cores cuDNN's fast bf16/fp16 convolution kernels work in NHWC, so with
NCHW inputs every convolution launches transpose (format-conversion) kernels before and after the convolution
itself; depthwise convolutions suffer most. oneDNN on the CPU likewise prefers NHWC/blocked layouts.
Expected finding: ``conv-layout`` (locality: channels_last memory format for the model and its input), with the
convolutions' own roofline time as the bound on the gain.

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default: batch 1, 32 channels, 32 x 32: well under a second on a laptop CPU)
or ``large`` (batch 32, 128 channels, 56 x 56), or ``roofline diagnose conv_nchw_bf16.py -- --size large``.
"""

import os
import sys

import torch
from torch import nn

# small (default): well under a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
BATCH, CHANNELS, SIDE = {"small": (1, 32, 32), "large": (32, 128, 56)}[SIZE]
EXPECTED_FINDING = "conv-layout"


class Model(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.depthwise = nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
        self.pointwise = nn.Conv2d(channels, channels, 1, bias=False)
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv(x))
        x = torch.relu(self.depthwise(x))
        return self.pointwise(x)


def get_init_inputs():
    return (CHANNELS,)


def get_inputs():
    return (torch.randn(BATCH, CHANNELS, SIDE, SIDE, dtype=torch.bfloat16),)  # NCHW (contiguous)
