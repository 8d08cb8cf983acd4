"""A GPT-2-small-like training step under DistributedDataParallel (benchmarks/models/gpt2_dist.py): each rank a
batch of 8 x 1024 tokens, the gradients all-reduced in DDP's buckets (25 MB) during the backward pass.

    roofline diagnose benchmarks/models/gpt2_ddp.py --nproc 2 --mode training
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_dist import GPT, device_and_dtype, inputs


class Model(DistributedDataParallel):
    def __init__(self) -> None:
        if not dist.is_initialized():
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        device, dtype = device_and_dtype()
        torch.manual_seed(0)
        gpt = GPT().to(device=device, dtype=dtype)
        super().__init__(gpt, device_ids=[device.index] if device.type == "cuda" else None, bucket_cap_mb=25)


def get_init_inputs():
    return ()


def get_inputs():
    return inputs(dist.get_rank() if dist.is_initialized() else 0)
