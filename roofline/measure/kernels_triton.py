"""Triton streaming kernels for the DRAM ceilings: read-only, copy and write-only (fp32, CUDA device).

Importing this module imports triton (``ceilings_gpu`` imports it lazily and falls back to torch's kernels when
it cannot). Each kernel is one program per block of ``BLOCK`` elements: wide blocks give vectorised 128-bit loads
and stores and, with many programs resident per SM, enough bytes in flight to cover the DRAM latency. The read
kernel sums its block and writes one value per program (so nothing is optimised away and the partial sums can be
checked); the write kernel stores a value passed in (random, nonzero).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import triton
import triton.language as tl


@triton.jit
def _read_kernel(src, partial, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(src + offsets, mask=offsets < n, other=0.0)
    tl.store(partial + pid, tl.sum(values, axis=0))


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)


@triton.jit
def _write_kernel(dst, n, value, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offsets, tl.full([BLOCK], 0.0, tl.float32) + value, mask=offsets < n)


@dataclass(frozen=True)
class Config:
    """One launch configuration: elements per program and warps per program."""

    block: int
    warps: int

    def label(self, what: str) -> str:
        return f"triton-{what} block={self.block} warps={self.warps}"


# NB: two configurations each, the best kept (the DRAM ceilings are the best of them and of torch's kernels). A
# sweep on a lent H200 (1 GiB fp32, do_bench): block reductions of 4096-16384 elements with 8-16 warps read
# fastest, within 0.5% of each other; a persistent grid-stride reduction (2-8 programs per SM) was up to 2% slower
# and an evict-first load hint 4% slower; copies and writes were fastest at 1024-2048 elements per program.
# On the H100 (2026-11-24, benchmarks/ceilings_gpu.py) the reference sweep's best were read 4096/16, copy 2048/16,
# write 1024/16: those are tried too.
READ_CONFIGS = (Config(8192, 16), Config(4096, 16), Config(4096, 8))
COPY_CONFIGS = (Config(1024, 8), Config(2048, 16), Config(4096, 16))
WRITE_CONFIGS = (Config(1024, 8), Config(1024, 16), Config(2048, 16))


def read(torch: Any, src: Any, config: Config) -> tuple[Callable[[], object], Any]:
    """A call that reads all of ``src`` (fp32, contiguous) and the partial-sum buffer it writes (one per program)."""
    n = src.numel()
    grid = (triton.cdiv(n, config.block),)
    partial = torch.empty(grid[0], device=src.device, dtype=torch.float32)

    def fn() -> None:
        _read_kernel[grid](src, partial, n, BLOCK=config.block, num_warps=config.warps)

    return fn, partial


def copy(src: Any, dst: Any, config: Config) -> Callable[[], object]:
    """A call that copies ``src`` into ``dst`` (fp32, contiguous, same size)."""
    n = src.numel()
    grid = (triton.cdiv(n, config.block),)

    def fn() -> None:
        _copy_kernel[grid](src, dst, n, BLOCK=config.block, num_warps=config.warps)

    return fn


def write(dst: Any, value: float, config: Config) -> Callable[[], object]:
    """A call that writes ``value`` into every element of ``dst`` (fp32, contiguous)."""
    n = dst.numel()
    grid = (triton.cdiv(n, config.block),)

    def fn() -> None:
        _write_kernel[grid](dst, n, value, BLOCK=config.block, num_warps=config.warps)

    return fn
