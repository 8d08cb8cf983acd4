"""A data-parallel MLP: DistributedDataParallel around two Linear layers; its backward all-reduces the gradients.

Run it under several processes, gloo on the CPU, NCCL on GPUs, or inside a torchrun launch:
``roofline diagnose workloads/models/distributed/ddp_mlp.py --nproc 2 --mode training``. Each rank holds the whole
model and a batch of its own; DDP's reducer all-reduces the gradients in buckets while the backward pass goes on
(communication overlapped with compute where a bucket is ready before the backward ends).

Expected: per-rank rows; the collectives table holds the all-reduce of the gradient buckets, whose bytes are the
gradients' bytes (fp32: 4 x the parameter count; one bucket at these sizes).

Sizes: ``ROOFLINE_MODEL_SIZE=tiny`` (default, the tests) or ``large`` (GPU-sized).
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "tiny")
BATCH, WIDTH = {"tiny": (8, 64), "small": (64, 256), "large": (8192, 4096)}.get(SIZE, (8, 64))
EXPECTED_COLLECTIVE = "all_reduce"


class MLP(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


class Model(DistributedDataParallel):
    def __init__(self, width: int) -> None:
        if not dist.is_initialized():  # roofline diagnose initialises it under torchrun; here for a plain run
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        torch.manual_seed(0)  # the same weights on every rank (DDP checks and broadcasts them)
        mlp = MLP(width)
        if torch.cuda.is_available():
            mlp = mlp.to(f"cuda:{torch.cuda.current_device()}")
        super().__init__(mlp, bucket_cap_mb=25)


def get_init_inputs():
    return (WIDTH,)


def get_inputs():
    generator = torch.Generator().manual_seed(1 + (dist.get_rank() if dist.is_initialized() else 0))
    return (torch.randn(BATCH, WIDTH, generator=generator),)
