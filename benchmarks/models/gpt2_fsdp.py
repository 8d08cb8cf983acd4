"""A GPT-2-small-like training step under FSDP (benchmarks/models/gpt2_dist.py): each block sharded on its own
(fully_shard, FSDP2; FSDP1's FullyShardedDataParallel where torch has no fully_shard or ROOFLINE_FSDP=1), so the
forward all-gathers each block's parameters and the backward all-gathers them again and reduce-scatters the
gradients.

    roofline diagnose benchmarks/models/gpt2_fsdp.py --nproc 2 --mode training
"""

import os
import sys

import torch
import torch.distributed as dist
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_dist import GPT, device_and_dtype, inputs


def _fully_shard():
    if os.environ.get("ROOFLINE_FSDP") == "1":
        return None
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        return None
    return fully_shard


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        if not dist.is_initialized():
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        device, dtype = device_and_dtype()
        torch.manual_seed(0)
        gpt = GPT().to(device=device, dtype=dtype)
        shard = _fully_shard()
        if shard is not None:
            for block in gpt.blocks:
                shard(block)
            shard(gpt)
            self.inner = gpt
        else:
            from gpt12 import Block
            from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy

            self.inner = FullyShardedDataParallel(
                gpt,
                auto_wrap_policy=ModuleWrapPolicy({Block}),
                sharding_strategy=ShardingStrategy.FULL_SHARD,
                device_id=device if device.type == "cuda" else None,
                use_orig_params=True,
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def get_init_inputs():
    return ()


def get_inputs():
    return inputs(dist.get_rank() if dist.is_initialized() else 0)
