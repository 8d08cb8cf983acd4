"""GPT-2 small (124M) from Hugging Face transformers, random weights (no download): a real model for
`roofline diagnose --verify` and the compiled-model check. Prefill of batch 8 x 1024 tokens; logits out.

    roofline diagnose benchmarks/models/gpt2_hf.py --device cuda --dtype bf16 --verify

Needs `transformers` (installed on the GPU machines). ROOFLINE_GPT2_BATCH / ROOFLINE_GPT2_SEQ change the shape.
"""

import os

import torch
from transformers import GPT2Config, GPT2LMHeadModel

BATCH = int(os.environ.get("ROOFLINE_GPT2_BATCH", "8"))
SEQ = int(os.environ.get("ROOFLINE_GPT2_SEQ", "1024"))


class Model(torch.nn.Module):
    """The logits of GPT2LMHeadModel (its output object holds the cache too, which we do not need)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.gpt2 = GPT2LMHeadModel(GPT2Config(use_cache=False, attn_implementation="sdpa")).eval()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.gpt2(input_ids=input_ids).logits


def get_inputs():
    generator = torch.Generator().manual_seed(0)
    return (torch.randint(0, 50257, (BATCH, SEQ), generator=generator),)
