"""One thread block's tile on one SM (`roofline analyze tile`): bytes of shared memory, registers, whether it fits,
blocks per SM and the limit that binds, occupancy, and the waves a problem takes. Shape-only: no GPU needed.

Two kinds of tile:

- ``gemm``: a block computes a BLOCK_M x BLOCK_N tile of C, stepping BLOCK_K through the reduction; each pipeline
  stage holds one A tile (BLOCK_M x BLOCK_K) and one B tile (BLOCK_K x BLOCK_N) in shared memory.
- ``attention`` (a FlashAttention-style forward): a block owns Br query rows; it keeps its Q block (Br x d) in
  shared memory and streams K and V blocks (Bc x d each, one pair per pipeline stage) past it.

The device's per-SM facts (shared memory, registers, threads, blocks, warp size) come from its spec sheet
(:class:`roofline.device.SmFacts`); a sheet that lacks one that this needs is a UsageError naming it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from roofline.device import Device
from roofline.dtypes import BITS, canonical, nbytes
from roofline.errors import UsageError

TileKind = Literal["gemm", "attention"]
KINDS: tuple[str, ...] = ("gemm", "attention")
#: the per-SM facts a tile needs: SmFacts field -> what the error calls it
NEEDED = {
    "smem_per_sm_bytes": "shared memory per SM (memory.smem.per_sm_kib)",
    "registers": "registers per SM (sm_limits.register_file_kib)",
    "max_threads": "max threads per SM (sm_limits.max_threads)",
    "max_blocks": "max blocks per SM (sm_limits.max_blocks)",
    "warp_size": "warp size (sm_limits.warp_size)",
}
#: the names of the limits on blocks per SM, in the order they are shown
LIMITS = ("shared memory", "registers", "threads", "max blocks")


@dataclass(frozen=True)
class TileSpec:
    """A tile: ``block`` is (BLOCK_M, BLOCK_N, BLOCK_K) for gemm, (Br, Bc) for attention (with ``head_dim``)."""

    kind: TileKind
    block: tuple[int, ...]
    head_dim: int | None = None
    stages: int = 1
    dtype: str = "fp16"
    acc_dtype: str = "fp32"
    warps: int = 4
    other_regs: int = 32

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UsageError(f"--kind: {self.kind!r} is not one of {', '.join(KINDS)}")
        want = 3 if self.kind == "gemm" else 2
        shape = "BLOCK_MxBLOCK_NxBLOCK_K" if self.kind == "gemm" else "BrxBc"
        if len(self.block) != want:
            article = "a" if self.kind == "gemm" else "an"
            raise UsageError(f"--tile: {article} {self.kind} tile has {want} sizes ({shape}), got {len(self.block)}")
        if self.head_dim is not None and self.head_dim <= 0:
            raise UsageError(f"--head-dim: {self.head_dim} must be positive")
        if self.kind == "attention" and self.head_dim is None:
            raise UsageError("--head-dim is required with --kind attention")
        if self.kind == "gemm" and self.head_dim is not None:
            raise UsageError("--head-dim applies to --kind attention only")
        if min(self.block) <= 0:
            raise UsageError(f"--tile: {'x'.join(map(str, self.block))}: sizes must be positive")
        for name, value in (("--stages", self.stages), ("--warps", self.warps)):
            if value <= 0:
                raise UsageError(f"{name}: {value} must be positive")
        if self.other_regs < 0:
            raise UsageError(f"--other-regs: {self.other_regs} must be zero or more")
        object.__setattr__(self, "dtype", canonical(self.dtype))
        object.__setattr__(self, "acc_dtype", canonical(self.acc_dtype))

    def label(self) -> str:
        dims = (
            f"BLOCK_M={self.block[0]} BLOCK_N={self.block[1]} BLOCK_K={self.block[2]}"
            if self.kind == "gemm"
            else f"Br={self.block[0]} Bc={self.block[1]} head_dim={self.head_dim}"
        )
        stages = f"{self.stages} stage{'s' if self.stages != 1 else ''}"
        return f"{self.kind} tile {dims} {self.dtype} (acc {self.acc_dtype}), {stages}, {self.warps} warps"


@dataclass(frozen=True)
class Problem:
    """The problem the tiles cover: gemm m x n (x batch); attention seq query rows x heads x batch."""

    m: int | None = None  # gemm rows, or attention query length
    n: int | None = None  # gemm columns (unused by attention)
    batch: int = 1
    heads: int = 1

    def tiles(self, spec: TileSpec) -> int:
        # NB: one block per output tile: no split-K, stream-K or persistent scheduling. Attention: one block per
        # Br query rows of one (batch, head), as FlashAttention's forward parallelises.
        if spec.kind == "gemm":
            assert self.m is not None and self.n is not None
            return math.ceil(self.m / spec.block[0]) * math.ceil(self.n / spec.block[1]) * self.batch
        assert self.m is not None
        return math.ceil(self.m / spec.block[0]) * self.batch * self.heads

    def label(self, spec: TileSpec) -> str:
        if spec.kind == "gemm":
            shape = f"m={self.m} n={self.n}"
            return shape if self.batch == 1 else f"batch={self.batch} {shape}"
        return f"batch={self.batch} heads={self.heads} seq={self.m}"


def smem_terms(spec: TileSpec) -> dict[str, int]:
    """Bytes of shared memory one block holds, by operand."""
    if spec.kind == "gemm":
        bm, bn, bk = spec.block
        # NB: every stage holds one A and one B tile; C stays in registers (an epilogue that stages C through
        # shared memory reuses the operand buffers, as CUTLASS and Triton do, and adds nothing).
        return {"A": nbytes(spec.stages * bm * bk, spec.dtype), "B": nbytes(spec.stages * bk * bn, spec.dtype)}
    br, bc = spec.block
    d = spec.head_dim or 0
    # NB: the Q block is loaded once and stays; K and V blocks are multi-buffered, one pair per stage. The score
    # tile S = Q K^T (Br x Bc) and the output accumulator live in registers, never in shared memory.
    return {
        "Q": nbytes(br * d, spec.dtype),
        "K": nbytes(spec.stages * bc * d, spec.dtype),
        "V": nbytes(spec.stages * bc * d, spec.dtype),
    }


def accumulator_elements(spec: TileSpec) -> dict[str, int]:
    """Elements held in accumulator registers by one block, by name."""
    if spec.kind == "gemm":
        return {"C": spec.block[0] * spec.block[1]}
    br, bc = spec.block
    # NB: the output accumulator O (Br x d), the score tile S (Br x Bc; P reuses its registers) and the softmax
    # statistics m and l (Br each, counted once although threads sharing a row each keep a copy).
    return {"O": br * (spec.head_dim or 0), "S": br * bc, "m,l": 2 * br}


@dataclass(frozen=True)
class Waves:
    tiles: int
    slots: int  # blocks per SM x SMs: tiles in flight at once
    waves: int  # ceil(tiles / slots)
    exact: float  # tiles / slots
    last_wave_full: float  # share of the slots busy in the last wave
    efficiency: float  # tiles / (waves x slots): the share of the waves' slot-time doing tiles


@dataclass(frozen=True)
class TileResult:
    spec: TileSpec
    device: str
    smem: dict[str, int]
    smem_bytes: int
    reserved_smem_bytes: int
    smem_limit_per_block_bytes: int
    smem_per_sm_bytes: int
    threads: int
    acc_registers_per_thread: int
    registers_per_thread: int
    registers_per_block: int
    registers_per_sm: int
    fits: bool
    does_not_fit: list[str]
    limits: dict[str, int]  # LIMITS name -> blocks per SM that resource allows
    blocks_per_sm: int
    binding: list[str]
    occupancy: float  # resident warps / max warps per SM
    warps_per_sm: int
    max_warps_per_sm: int
    sms: int
    problem: str | None = None
    waves: Waves | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spec"]["block"] = list(self.spec.block)
        return data


def _facts(device: Device) -> Any:
    sm = device.sm
    missing = [what for name, what in NEEDED.items() if getattr(sm, name) is None]
    if device.compute_units <= 0:
        missing.insert(0, "the SM count (compute_units)")
    if missing:
        raise UsageError(
            f"{device.name}: its sheet lacks {', '.join(missing)}, which analyze tile needs: "
            "add them with a source (docs/spec-sheets.md) or pick another --device"
        )
    return sm


def place_tile(spec: TileSpec, device: Device, problem: Problem | None = None) -> TileResult:
    """The tile on ``device``: shared memory and registers, fit, blocks per SM, occupancy and (with ``problem``)
    waves. A tile that does not fit is a result (``fits`` False, 0 blocks per SM), not an error."""
    sm = _facts(device)
    notes: list[str] = []
    unit = device.unit_name
    threads = spec.warps * sm.warp_size
    smem = smem_terms(spec)
    smem_bytes = sum(smem.values())
    reserved = sm.reserved_smem_per_block_bytes
    if reserved is None:
        reserved = 0
        notes.append("the sheet gives no shared memory reserved per block: none counted")
    per_block_limit = sm.smem_per_block_bytes
    if per_block_limit is None:
        per_block_limit = sm.smem_per_sm_bytes - reserved
        notes.append(f"the sheet gives no per-block shared-memory limit: the {unit}'s less the reserve is used")
    acc = accumulator_elements(spec)
    # NB: a 32-bit register holds one fp32 (or two fp16) accumulator element; the accumulators are spread evenly
    # over the block's threads; --other-regs per thread stand for addresses, indices, loop counters and operand
    # fragments. No allocation granularity is applied (it is not on the sheet): real counts round up.
    acc_regs = math.ceil(sum(acc.values()) * BITS[spec.acc_dtype] / 32 / threads)
    regs_per_thread = acc_regs + spec.other_regs
    regs_per_block = regs_per_thread * threads

    does_not_fit: list[str] = []
    if smem_bytes > per_block_limit:
        does_not_fit.append(f"shared memory {smem_bytes:,} B > {per_block_limit:,} B per block")
    if regs_per_block > sm.registers:
        does_not_fit.append(f"registers {regs_per_block:,} > {sm.registers:,} per {unit}")
    if threads > sm.max_threads:
        does_not_fit.append(f"threads {threads:,} > {sm.max_threads:,} per {unit}")
    if sm.max_threads_per_block is not None:
        if threads > sm.max_threads_per_block:
            does_not_fit.append(f"threads {threads:,} > {sm.max_threads_per_block:,} per block")
    else:
        notes.append("the sheet gives no max threads per block: not checked")
    limits = {
        "shared memory": sm.smem_per_sm_bytes // (smem_bytes + reserved),
        "registers": sm.registers // regs_per_block,
        "threads": sm.max_threads // threads,
        "max blocks": sm.max_blocks,
    }
    if not does_not_fit and min(limits.values()) == 0:  # NB: only a sheet whose limits disagree gets here
        does_not_fit.append(f"no block fits on one {unit} ({', '.join(n for n in LIMITS if limits[n] == 0)})")
    fits = not does_not_fit
    blocks = min(limits.values()) if fits else 0
    binding = [name for name in LIMITS if limits[name] == blocks] if fits else []
    max_warps = sm.max_threads // sm.warp_size
    warps_per_sm = blocks * spec.warps
    notes.append("the per-thread register cap is not on the sheet and not checked: an estimate above it means spills")

    waves = None
    label = None
    if problem is not None:
        label = problem.label(spec)
        tiles = problem.tiles(spec)
        if fits:
            slots = blocks * device.compute_units
            count = math.ceil(tiles / slots)
            last = (tiles - (count - 1) * slots) / slots
            waves = Waves(tiles, slots, count, tiles / slots, last, tiles / (count * slots))
    return TileResult(
        spec=spec,
        device=device.name,
        smem=smem,
        smem_bytes=smem_bytes,
        reserved_smem_bytes=reserved,
        smem_limit_per_block_bytes=per_block_limit,
        smem_per_sm_bytes=sm.smem_per_sm_bytes,
        threads=threads,
        acc_registers_per_thread=acc_regs,
        registers_per_thread=regs_per_thread,
        registers_per_block=regs_per_block,
        registers_per_sm=sm.registers,
        fits=fits,
        does_not_fit=does_not_fit,
        limits=limits,
        blocks_per_sm=blocks,
        binding=binding,
        occupancy=warps_per_sm / max_warps,
        warps_per_sm=warps_per_sm,
        max_warps_per_sm=max_warps,
        sms=device.compute_units,
        problem=label,
        waves=waves,
        notes=notes,
    )


def assumptions(spec: TileSpec) -> list[str]:
    """The assumptions behind the numbers, as the output prints them."""
    common = [
        f"{spec.acc_dtype} accumulators spread evenly over the block's threads, plus {spec.other_regs} other "
        "registers per thread (--other-regs); no register allocation granularity",
        "blocks per SM = the least of what shared memory (with the runtime's reserve per block), registers, "
        "threads and the max blocks per SM allow; occupancy = resident warps / max warps per SM",
        "waves = tiles / (blocks per SM x SMs), one block per tile; efficiency = tiles / (waves x slots)",
    ]
    if spec.kind == "gemm":
        return [
            "shared memory = stages x (BLOCK_M x BLOCK_K + BLOCK_K x BLOCK_N) operand elements; C stays in "
            "registers (an epilogue reuses the operand buffers)",
            *common,
        ]
    return [
        "shared memory = Q block (Br x d, loaded once) + stages x (K and V blocks, Bc x d each); the score tile "
        "S = Q K^T stays in registers",
        "registers hold O (Br x d), S (Br x Bc; P reuses it) and the softmax statistics m, l (Br each)",
        *common,
    ]
