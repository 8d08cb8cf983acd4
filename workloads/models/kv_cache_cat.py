"""A decode loop that grows its KV cache with torch.cat: every generated token copies the whole cache.

Bottleneck: redundancy. Each step appends one token's keys and values with ``torch.cat([cache, k], dim=2)``, which
reads the whole cache and writes it again (with the new slice) to a fresh tensor; attention then reads it once
more. A preallocated (static) or paged cache writes only the new slice, so the copies disappear.
Expected finding: ``kv-cache-cat`` (redundancy: a preallocated static or paged KV cache), with the bytes of the
new slices alone as the bound on the gain (attention on a one-token query also shows as ``naive-attention``).

Sizes: ``ROOFLINE_MODEL_SIZE=small`` (default: 8 heads of 64, a 1024-token cache, 8 steps: well under a second on a
laptop CPU) or ``large`` (32 heads of 128, a 4096-token cache, 32 steps), or
``roofline diagnose kv_cache_cat.py -- --size large``.
"""

import math
import os
import sys

import torch
from torch import nn

# small (default): well under a second on a laptop CPU; large: GPU-sized. Env ROOFLINE_MODEL_SIZE or `-- --size large`.
SIZE = os.environ.get("ROOFLINE_MODEL_SIZE", "small")
if "--size" in sys.argv[:-1]:
    SIZE = sys.argv[sys.argv.index("--size") + 1]
HEADS, HEAD_DIM, CACHE, STEPS = {"small": (8, 64, 1024, 8), "large": (32, 128, 4096, 32)}[SIZE]
EXPECTED_FINDING = "kv-cache-cat"


class Model(nn.Module):
    def __init__(self, heads: int, head_dim: int, steps: int) -> None:
        super().__init__()
        self.heads, self.head_dim, self.steps = heads, head_dim, steps
        hidden = heads * head_dim
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)
        # the model exposes its static cache: `roofline diagnose --verify` switches it on to measure the fix
        self.static_kv_cache = False

    def forward(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
        # x: [batch, hidden] (one token); caches: [batch, heads, tokens, head_dim]
        if self.static_kv_cache:
            return self.forward_static(x, k_cache, v_cache)
        batch = x.shape[0]
        for _ in range(self.steps):
            q, k, v = self.qkv(x).view(batch, 3, self.heads, 1, self.head_dim).unbind(1)
            k_cache = torch.cat([k_cache, k], dim=2)  # copies the whole cache to append one token
            v_cache = torch.cat([v_cache, v], dim=2)
            scores = q @ k_cache.transpose(-1, -2) / math.sqrt(self.head_dim)
            attn = torch.softmax(scores, dim=-1) @ v_cache
            x = x + self.out(attn.reshape(batch, -1))
        return x

    def forward_static(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
        """The fix the finding names: a preallocated static cache with room for the steps, filled with the given
        cache once (the prefill), then written in place one slice per step; attention reads the filled part."""
        batch, _, tokens, _ = k_cache.shape
        if getattr(self, "_static", None) is None or self._static[0].shape[2] != tokens + self.steps:
            shape = (batch, self.heads, tokens + self.steps, self.head_dim)
            self._static = tuple(c.new_empty(shape) for c in (k_cache, v_cache))
            self._static[0][:, :, :tokens].copy_(k_cache)
            self._static[1][:, :, :tokens].copy_(v_cache)
        k_all, v_all = self._static
        for step in range(self.steps):
            q, k, v = self.qkv(x).view(batch, 3, self.heads, 1, self.head_dim).unbind(1)
            pos = tokens + step
            k_all[:, :, pos : pos + 1].copy_(k)  # only the new slice is written
            v_all[:, :, pos : pos + 1].copy_(v)
            scores = q @ k_all[:, :, : pos + 1].transpose(-1, -2) / math.sqrt(self.head_dim)
            attn = torch.softmax(scores, dim=-1) @ v_all[:, :, : pos + 1]
            x = x + self.out(attn.reshape(batch, -1))
        return x


class ModelFixed(Model):
    """The fix the finding names (benchmarks/diagnose_fixes_gpu.py times it beside Model): a preallocated static
    cache with room for the steps, written in place one slice per step."""

    def __init__(self, heads: int, head_dim: int, steps: int) -> None:
        super().__init__(heads, head_dim, steps)
        self.static_kv_cache = True


def get_init_inputs():
    return (HEADS, HEAD_DIM, STEPS)


def get_inputs():
    cache = (1, HEADS, CACHE, HEAD_DIM)
    return (torch.randn(1, HEADS * HEAD_DIM), torch.randn(cache), torch.randn(cache))
