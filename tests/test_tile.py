"""`roofline analyze tile`: hand-derived shared memory, registers, blocks per SM, occupancy and waves."""

from __future__ import annotations

import dataclasses

import pytest

from roofline.costs.tile import Problem, TileSpec, place_tile, smem_terms
from roofline.errors import UsageError
from roofline.roofs import device_from_sheet
from roofline.specs.loader import load_registry

H100 = ("-d", "h100-sxm")


@pytest.fixture(scope="module")
def h100():
    return device_from_sheet(load_registry([]).get("h100-sxm"))


def tile_json(cli, *args):
    result = cli("analyze", "tile", *args, "--json")
    assert result.code == 0, result.err
    return result.json()


# ----------------------------------------------------------------------------------------- shared memory


def test_flashattention_tile_of_the_text(cli):
    # Seed 004: Q, K and V blocks of 128 x 128 x 2 B "approximately 32.8 KB" each, "approximately 98.3 KB" in
    # all, which "fits comfortably in the H100's 228 KB of shared memory per SM".
    got = tile_json(cli, "--kind", "attention", "--tile", "128x128", "--head-dim", "128", "--dtype", "fp16", *H100)
    assert got["smem"] == {"Q": 32_768, "K": 32_768, "V": 32_768}
    assert round(got["smem"]["Q"] / 1e3, 1) == 32.8
    assert got["smem_bytes"] == 98_304 and round(got["smem_bytes"] / 1e3, 1) == 98.3
    assert got["smem_per_sm_bytes"] == 228 * 1024
    assert got["fits"] is True and got["does_not_fit"] == []
    assert got["limits"]["shared memory"] == 2  # 233,472 // (98,304 + 1,024 reserved)


@pytest.mark.parametrize(
    ("spec", "terms"),
    [
        # 3 stages x (128x64 A + 64x256 B) x 2 B
        (TileSpec("gemm", (128, 256, 64), stages=3, dtype="bf16"), {"A": 49_152, "B": 98_304}),
        # fp8: one byte per element
        (TileSpec("gemm", (128, 128, 128), stages=4, dtype="fp8"), {"A": 65_536, "B": 65_536}),
        # int4: two elements per byte
        (TileSpec("gemm", (64, 64, 64), stages=2, dtype="int4"), {"A": 4_096, "B": 4_096}),
        # attention, 2 stages: Q once, K and V twice
        (
            TileSpec("attention", (64, 128), head_dim=64, stages=2, dtype="bf16"),
            {"Q": 8_192, "K": 32_768, "V": 32_768},
        ),
    ],
)
def test_shared_memory_by_hand(spec, terms):
    assert smem_terms(spec) == terms


# ------------------------------------------------------------------------------- registers, blocks, waves


def test_gemm_blocks_per_sm_and_waves(h100):
    # 128x128x32 fp16, 2 stages, 4 warps: smem 2*(128*32 + 32*128)*2 = 32,768 B (+1,024 reserved): 6 blocks;
    # registers (128*128 fp32 / 128 threads = 128) + 32 = 160 per thread, 20,480 per block: 3 blocks; threads
    # 2048 / 128 = 16; max 32. Registers bind: 3 blocks, 12 of 64 warps.
    spec = TileSpec("gemm", (128, 128, 32), stages=2, dtype="fp16", warps=4)
    r = place_tile(spec, h100, Problem(m=4096, n=4096))
    assert r.smem_bytes == 32_768
    assert (r.acc_registers_per_thread, r.registers_per_thread, r.registers_per_block) == (128, 160, 20_480)
    assert r.limits == {"shared memory": 6, "registers": 3, "threads": 16, "max blocks": 32}
    assert r.blocks_per_sm == 3 and r.binding == ["registers"]
    assert r.occupancy == 12 / 64
    # 32 x 32 = 1,024 tiles over 3 x 132 = 396 slots: 2.59 -> 3 waves, the last (1024 - 792) / 396 full
    w = r.waves
    assert (w.tiles, w.slots, w.waves) == (1024, 396, 3)
    assert w.last_wave_full == pytest.approx(232 / 396)
    assert w.efficiency == pytest.approx(1024 / 1188)


def test_max_blocks_bind(h100):
    # 32x32x32 fp16, 1 warp, no other registers: smem 4,096 (+1,024): 45; registers 32 x 32 = 1,024: 64;
    # threads 64; the max of 32 blocks binds: 32 warps of 64 resident.
    r = place_tile(TileSpec("gemm", (32, 32, 32), warps=1, other_regs=0), h100)
    assert r.limits == {"shared memory": 45, "registers": 64, "threads": 64, "max blocks": 32}
    assert (r.blocks_per_sm, r.binding, r.occupancy) == (32, ["max blocks"], 0.5)
    assert r.waves is None


def test_threads_bind_and_exact_waves(h100):
    # 64x64x16, 8 warps (256 threads), no other registers: threads allow 8 blocks; 8 x 132 = 1,056 slots;
    # m = n = 2,112 -> 33 x 33 = 1,089 tiles: 2 waves, the last 33 / 1,056 full.
    r = place_tile(TileSpec("gemm", (64, 64, 16), warps=8, other_regs=0), h100, Problem(m=2112, n=2112))
    assert r.limits["threads"] == 8 and r.blocks_per_sm == 8 and r.binding == ["threads"]
    assert r.occupancy == 1.0
    assert (r.waves.tiles, r.waves.slots, r.waves.waves) == (1089, 1056, 2)
    assert r.waves.last_wave_full == pytest.approx(33 / 1056)


def test_attention_registers_and_waves(h100):
    # O 128x128 + S 128x128 + m,l 2x128 = 33,024 fp32 over 256 threads: 129 + 32 = 161 per thread, 41,216 per
    # block: 1 block. 8192 / 128 = 64 row tiles x 64 heads = 4,096 tiles over 132 slots: 31.03 -> 32 waves.
    spec = TileSpec("attention", (128, 128), head_dim=128, warps=8)
    r = place_tile(spec, h100, Problem(m=8192, heads=64))
    assert (r.acc_registers_per_thread, r.registers_per_thread) == (129, 161)
    assert r.blocks_per_sm == 1 and r.binding == ["registers"]
    assert (r.waves.tiles, r.waves.waves) == (4096, 32)
    assert r.waves.last_wave_full == pytest.approx(4 / 132)


def test_too_large_a_tile_does_not_fit(h100):
    # the library says why; the CLI refuses it as bad input (test below)
    got = place_tile(TileSpec("gemm", (512, 512, 128)), h100)
    assert got.fits is False and got.blocks_per_sm == 0 and got.occupancy == 0
    assert got.does_not_fit[0] == "shared memory 262,144 B > 232,448 B per block"


def test_a_sheet_without_the_reserve_or_block_limit_says_so(h100):
    sm = dataclasses.replace(h100.sm, reserved_smem_per_block_bytes=None, smem_per_block_bytes=None)
    r = place_tile(TileSpec("gemm", (128, 128, 32)), dataclasses.replace(h100, sm=sm))
    assert r.reserved_smem_bytes == 0 and r.smem_limit_per_block_bytes == 233_472
    assert any("no shared memory reserved" in note for note in r.notes)


# ------------------------------------------------------------------------------------------- the CLI


FLASH = """\
attention tile Br=128 Bc=128 head_dim=128 fp16 (acc fp32), 1 stage, 4 warps on NVIDIA H100 SXM5 80GB (h100-sxm)
  shared mem   98,304 B = 98.3 kB (Q 32,768 B, K 32,768 B, V 32,768 B) + 1,024 B reserved; limit 232,448 B per \
block, 233,472 B per SM
  registers    290 per thread (258 accumulator + 32 other) x 128 threads = 37,120 of 65,536 per SM
  fits         yes
  blocks/SM    1, bound by registers (shared memory 2, registers 1, threads 16, max blocks 32)
  occupancy    6.2% (4 of 64 warps per SM)
  waves        4,096 tiles (batch=1 heads=64 seq=8192) / (1 per SM x 132 SMs = 132 slots) = 31.03 -> 32 waves; \
last wave 3.0% full; efficiency 97.0%

Assumptions: shared memory = Q block (Br x d, loaded once) + stages x (K and V blocks, Bc x d each); the score \
tile S = Q K^T stays in registers; registers hold O (Br x d), S (Br x Bc; P reuses it) and the softmax statistics \
m, l (Br each); fp32 accumulators spread evenly over the block's threads, plus 32 other registers per thread \
(--other-regs); no register allocation granularity; blocks per SM = the least of what shared memory (with the \
runtime's reserve per block), registers, threads and the max blocks per SM allow; occupancy = resident warps / \
max warps per SM; waves = tiles / (blocks per SM x SMs), one block per tile; efficiency = tiles / (waves x \
slots); the per-thread register cap is not on the sheet and not checked: an estimate above it means spills
"""


def test_console_output_of_the_flashattention_tile(cli):
    args = ("--kind", "attention", "--tile", "128x128", "--head-dim", "128", "--heads", "64", "--seq", "8192")
    result = cli("analyze", "tile", *args, *H100)
    assert result.code == 0, result.err
    assert result.out == FLASH


def test_a_tile_beyond_the_shared_memory_of_a_block_is_bad_input(cli):
    result = cli("analyze", "tile", "--tile", "256x256x128", "--stages", "2", "-m", "4096", "-n", "4096", *H100)
    assert result.code == 2
    assert result.err.strip().splitlines()[-1] == (
        "Error: --tile 256x256x128: 262,144 B of shared memory, more than the 232,448 B one block may use on "
        "h100-sxm: use smaller tiles or fewer --stages"
    )


def test_console_output_of_a_tile_that_does_not_fit_by_registers(cli):
    result = cli("analyze", "tile", "--tile", "128x256x32", "--other-regs", "512", "-m", "4096", "-n", "4096", *H100)
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[3] == "  fits         no: registers 98,304 > 65,536 per SM"
    assert lines[4] == "  blocks/SM    0: the tile does not fit"
    assert lines[6] == "  waves        none (m=4096 n=4096): the tile does not fit"


def test_json_carries_the_assumptions(cli):
    got = tile_json(cli, "--tile", "128x256x64", "--stages", "3", "--dtype", "bf16", "--warps", "8", *H100)
    assert got["spec"] == {
        "kind": "gemm",
        "block": [128, 256, 64],
        "head_dim": None,
        "stages": 3,
        "dtype": "bf16",
        "acc_dtype": "fp32",
        "warps": 8,
        "other_regs": 32,
    }
    assert got["smem_bytes"] == 147_456 and got["blocks_per_sm"] == 1
    assert got["binding"] == ["shared memory", "registers"]
    assert got["assumptions"][0].startswith("shared memory = stages x")


# ------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--tile", "0x128x64"), "--tile: '0' must be positive"),
        (("--tile", "128x128"), "a gemm tile has 3 sizes"),
        (("--tile", "128x128x64", "--dtype", "fp7"), "unknown dtype 'fp7'"),
        (("--tile", "128x128x64", "--acc-dtype", "int3"), "unknown dtype 'int3'"),
        (("--kind", "attention", "--tile", "128x128"), "--head-dim is required"),
        (("--kind", "attention", "--tile", "128x128", "--head-dim", "0"), "--head-dim: '0' must be positive"),
        (("--kind", "conv", "--tile", "128x128"), "--kind: 'conv' is not one of gemm, attention"),
        (("--tile", "128x128x64", "--stages", "0"), "--stages: 0 must be positive"),
        (("--tile", "128x128x64", "--warps", "-1"), "--warps: -1 must be positive"),
        (("--tile", "128x128x64", "-m", "4096"), "give both -m and -n"),
        (("--tile", "128x128x64", "-m", "0", "-n", "8"), "-m: '0' must be positive"),
        (("--tile", "128x128x64", "-m", "abc", "-n", "8"), "-m: "),
        (("--tile", "128x128x64", "--seq", "8"), "--seq and --heads apply to --kind attention"),
        (("--tile", "128x", "-d", "h100-sxm"), "--tile: '128x'"),
    ],
)
def test_bad_input_is_one_line(cli, args, fragment):
    result = cli("analyze", "tile", *args, *(() if "-d" in args else H100))
    assert result.code == 2
    assert fragment in result.error_line()


def test_a_device_without_the_facts_is_one_line(cli):
    result = cli("analyze", "tile", "--tile", "128x128x64", "-d", "a100-sxm-80gb")
    assert result.code == 2
    assert result.error_line() == (
        "Error: a100-sxm-80gb: its sheet lacks max threads per SM (sm_limits.max_threads), max blocks per SM "
        "(sm_limits.max_blocks), warp size (sm_limits.warp_size), which analyze tile needs: add them with a "
        "source (docs/spec-sheets.md) or pick another --device"
    )
    amd = cli("analyze", "tile", "--tile", "128x128x64", "-d", "mi300x")
    assert amd.code == 2 and "shared memory per SM" in amd.error_line()
    cpu = cli("analyze", "tile", "--tile", "128x128x64", "-d", "cpu")
    assert cpu.code == 2 and "needs a GPU spec sheet" in cpu.error_line()


def test_tile_spec_rejects_a_bad_shape_in_the_library():
    with pytest.raises(UsageError, match="an attention tile has 2 sizes"):
        TileSpec("attention", (128, 128, 64), head_dim=64)


def test_sheets_carry_the_measured_sm_facts():
    # cuDeviceGetAttribute on an H100 SXM and an H200 (the sheets' sources) read the same per-SM limits.
    registry = load_registry([])
    for name in ("h100-sxm", "h200-sxm"):
        sm = device_from_sheet(registry.get(name)).sm
        assert (sm.smem_per_sm_bytes, sm.smem_per_block_bytes, sm.reserved_smem_per_block_bytes) == (
            233_472,
            232_448,
            1_024,
        )
        assert (sm.registers, sm.max_threads, sm.max_blocks, sm.max_threads_per_block, sm.warp_size) == (
            65_536,
            2_048,
            32,
            1_024,
            32,
        )
