"""`roofline analyze tile`: does one thread block's tile fit on an SM, how many blocks share it, how many waves."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer

from roofline.cli.common import json_option, print_json, print_text, spec_option

EXAMPLE = (
    "One thread block's tile on one SM: shared memory, registers, fits or not, blocks per SM, occupancy, waves.\n\n"
    "Bytes of shared memory and registers of the tile, whether it fits on one SM of the device, blocks per SM "
    "(and which limit binds: shared memory, registers, threads, max blocks), occupancy, and, given the problem's "
    "size, its waves and the last wave's fill. No GPU needed: the SM's limits come from the device's spec sheet. "
    "A tile whose shared memory exceeds what one block may use is bad input (one Error line, exit 2); one "
    "that does not fit by registers or threads is reported as not fitting, with each reason (exit 0).\n\n"
    "\b\n"
    "FlashAttention's tile (Q, K, V blocks of 128x128 fp16: 98,304 B):\n"
    "  roofline analyze tile --kind attention --tile 128x128 --head-dim 128 \\\n"
    "      --batch 1 --heads 64 --seq 8192 -d h100-sxm\n"
    "A 3-stage 128x256x64 bf16 GEMM tile on 8 warps, for an 8192x8192 output:\n"
    "  roofline analyze tile --tile 128x256x64 --stages 3 --dtype bf16 --warps 8 -m 8192 -n 8192 -d h100-sxm"
)


def parse_tile(text: str) -> tuple[int, ...]:
    """``128x256x64`` (gemm) or ``128x128`` (attention): positive whole sizes."""
    from roofline.errors import UsageError
    from roofline.units import parse_size

    parts = re.split(r"\s*[x,]\s*", text.strip(), flags=re.IGNORECASE)
    if not all(parts):
        raise UsageError(f"--tile: {text!r}: write BLOCK_MxBLOCK_NxBLOCK_K (gemm) or BrxBc (attention)")
    return tuple(int(parse_size(part, "--tile")) for part in parts)


def _size(text: str | None, option: str) -> int | None:
    """One positive whole size (``8192``, ``8Ki``, ``2^13``), or None when not given."""
    from roofline.units import parse_size

    return None if text is None else int(parse_size(text, option))


def tile(
    tile: str = typer.Option(..., "--tile", "-t", help="BLOCK_MxBLOCK_NxBLOCK_K (gemm) or BrxBc (attention)."),
    kind: str = typer.Option("gemm", "--kind", help="gemm or attention (FlashAttention-style forward)."),
    head_dim: str | None = typer.Option(None, "--head-dim", help="Head dimension (--kind attention)."),
    stages: int = typer.Option(1, "--stages", help="Pipeline stages: operand (gemm) or K/V (attention) buffers."),
    dtype: str = typer.Option("fp16", "--dtype", help="Operand dtype in shared memory."),
    acc_dtype: str = typer.Option("fp32", "--acc-dtype", help="Accumulator dtype (registers)."),
    warps: int = typer.Option(4, "--warps", help="Warps per thread block."),
    other_regs: int = typer.Option(
        32, "--other-regs", help="Registers per thread beyond the accumulators (addresses, indices, fragments)."
    ),
    m: str | None = typer.Option(None, "-m", help="Problem rows (gemm): with -n, prints the waves."),
    n: str | None = typer.Option(None, "-n", help="Problem columns (gemm)."),
    seq: str | None = typer.Option(None, "--seq", "-s", help="Query length (attention): prints the waves."),
    heads: str = typer.Option("1", "--heads", help="Heads (attention)."),
    batch: str = typer.Option("1", "--batch", "-b", help="Batch (independent problems)."),
    device: str | None = typer.Option(
        None, "--device", "-d", help="Spec-sheet name (default: $ROOFLINE_DEVICE, [tool.roofline] device, or this GPU)."
    ),
    spec: list[Path] | None = spec_option(),
    as_json: bool = json_option(),
) -> None:
    from roofline.costs.tile import TileSpec, place_tile
    from roofline.errors import UsageError

    sizes = {
        option: _size(text, option)
        for option, text in (
            ("--head-dim", head_dim),
            ("-m", m),
            ("-n", n),
            ("--seq", seq),
            ("--heads", heads),
            ("--batch", batch),
        )
    }
    shape = TileSpec(
        kind=kind.strip().lower(),  # type: ignore[arg-type]
        block=parse_tile(tile),
        head_dim=sizes["--head-dim"],
        stages=stages,
        dtype=dtype,
        acc_dtype=acc_dtype,
        warps=warps,
        other_regs=other_regs,
    )
    problem = _problem(shape.kind, sizes)
    placed_on = _device(device, spec)
    result = place_tile(shape, placed_on, problem)
    if result.smem_bytes > result.smem_limit_per_block_bytes:
        # NB: no launch could hold it: bad input (exit 2), not a result; registers and threads stay a result
        raise UsageError(
            f"--tile {tile}: {result.smem_bytes:,} B of shared memory, more than the "
            f"{result.smem_limit_per_block_bytes:,} B one block may use on {placed_on.name}: use smaller tiles "
            "or fewer --stages"
        )
    if as_json:
        from roofline.costs.tile import assumptions

        print_json({**result.to_dict(), "assumptions": [*assumptions(shape), *result.notes]})
        return
    from roofline.render.tile import TileRenderer

    print_text(TileRenderer(placed_on).render(result))


tile.__doc__ = EXAMPLE


def _problem(kind: str, sizes: dict[str, int | None]) -> Any:
    """The problem whose waves are printed (roofline.costs.tile.Problem), or None; options of the other kind are
    errors."""
    from roofline.costs.tile import Problem
    from roofline.errors import UsageError

    m_, n_, seq_, heads_, batch_ = (sizes[o] for o in ("-m", "-n", "--seq", "--heads", "--batch"))
    assert heads_ is not None and batch_ is not None
    if kind == "gemm":
        if seq_ is not None or heads_ != 1:
            raise UsageError("--seq and --heads apply to --kind attention: a gemm problem is -m and -n")
        if (m_ is None) != (n_ is None):
            raise UsageError("give both -m and -n for the waves of a gemm problem (or neither)")
        return None if m_ is None else Problem(m=m_, n=n_, batch=batch_)
    if m_ is not None or n_ is not None:
        raise UsageError("-m and -n apply to --kind gemm: an attention problem is --seq, --heads, --batch")
    return None if seq_ is None else Problem(m=seq_, batch=batch_, heads=heads_)


def _device(device: str | None, spec: list[Path] | None) -> Any:
    """The one GPU (a spec sheet's per-SM facts) the tile is placed on."""
    from roofline.errors import UsageError
    from roofline.roofs import default_device_names, sheet_devices

    names = [device] if device else default_device_names()
    if len(names) != 1 or "," in names[0]:
        raise UsageError("--device: analyze tile takes one device")
    if names[0].strip().lower() == "cpu":
        raise UsageError("--device cpu: analyze tile needs a GPU spec sheet's per-SM facts")
    (placed_on,) = sheet_devices(names, spec_files=spec or [], roofs="spec")
    return placed_on
