"""A tensor-parallel (column-parallel) Linear: each rank holds OUT / world rows of the weight, computes its slice of
the output and all-gathers the slices into the full output.

Run it under several processes, gloo on the CPU, NCCL on GPUs, or inside a torchrun launch:
``roofline diagnose workloads/models/distributed/tp_linear.py --nproc 2``.

Expected: per-rank rows (a GEMM of BATCH x IN x OUT/world each); the collectives table holds one all-gather per
forward whose message is the full output: BATCH x OUT elements (4 bytes each in fp32).

Sizes: ``ROOFLINE_MODEL_SIZE=tiny`` (default, the tests) or ``large`` (GPU-sized).
"""

import os
import warnings

import torch
import torch.distributed as dist
from torch import nn

SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "tiny")
BATCH, IN, OUT = {"tiny": (8, 64, 128), "small": (64, 512, 1024), "large": (8192, 8192, 8192)}.get(SIZE, (8, 64, 128))
EXPECTED_COLLECTIVE = "all_gather"
# torch 2.13 deprecates all_gather_into_tensor for all_gather_single, which older versions lack
warnings.filterwarnings("ignore", message=".*all_gather_into_tensor. is deprecated.*", category=FutureWarning)


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        if not dist.is_initialized():  # roofline diagnose initialises it under torchrun; here for a plain run
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        self.world = dist.get_world_size()
        if out_features % self.world:
            raise ValueError(f"out_features {out_features} is not a multiple of the world size {self.world}")
        self.local = nn.Linear(in_features, out_features // self.world, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        part = self.local(x)  # BATCH x OUT/world
        full = part.new_empty(self.world * part.shape[0], part.shape[1])
        dist.all_gather_into_tensor(full, part.contiguous())  # rank r's slice lands in rows r*BATCH ...
        return full.view(self.world, part.shape[0], part.shape[1]).permute(1, 0, 2).reshape(part.shape[0], -1)


def get_init_inputs():
    return (IN, OUT)


def get_inputs():
    return (torch.randn(BATCH, IN),)
