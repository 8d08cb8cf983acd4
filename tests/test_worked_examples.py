"""The source texts' worked examples, as `roofline analyze` prints them (--json)."""

from __future__ import annotations

import pytest


def rows(cli, *args):
    result = cli("analyze", *args, "--json")
    assert result.code == 0, result.err
    return result.json()["rows"]


def test_gemm_4096_fp16(cli):
    (row,) = rows(cli, "gemm", "-m", "4096", "-n", "4096", "-k", "4096", "--dtype", "fp16", "-d", "h100-sxm")
    assert row["flops"] / 1e9 == pytest.approx(137.4, abs=0.05)  # "approximately 137.4 billion FLOPs"
    assert row["bytes"] / 1e6 == pytest.approx(100.7, abs=0.05)  # "roughly 100.7 MB"
    assert row["intensity"] == pytest.approx(1365.3, abs=0.05)  # "approximately 1365.3 FLOP/byte"
    assert row["bound"] == "compute"


@pytest.mark.parametrize(
    ("device", "ridge"),
    [("v100-sxm2", 139), ("a100-sxm-80gb", 153), ("h100-sxm", 295), ("b200", 281)],
)
def test_generation_table_of_ridge_points(cli, device, ridge):
    # Table 3 of the source: FP16 ridge = peak / HBM bandwidth.
    (row,) = rows(cli, "gemm", "-m", "4096", "-n", "4096", "-k", "4096", "--dtype", "fp16", "-d", device)
    assert row["ridge"] == pytest.approx(ridge, abs=1.0)


def test_h100_fp8_ridge(cli):
    (row,) = rows(cli, "gemm", "-m", "4096", "-n", "4096", "-k", "4096", "--dtype", "fp8", "-d", "h100-sxm")
    assert row["ridge"] == pytest.approx(590.7, abs=0.1)


def test_decode_napkin_math(cli):
    # 8.75B fp16 parameters per GPU on an H100: 17.5 GFLOP, 17.5 GB, I ~ 1, ~5.2 ms per token, ~191 tokens/s.
    (row,) = rows(cli, "decode", "--params", "8.75e9", "--d-model", "4096", "--dtype", "fp16", "-d", "h100-sxm")
    assert row["flops"] == 17_500_000_000
    assert row["bytes"] / 1e9 == pytest.approx(17.5, abs=1e-3)
    assert row["intensity"] == pytest.approx(1.0, abs=1e-3)
    assert row["bound"] == "memory"
    assert row["memory_time_s"] * 1e3 == pytest.approx(5.22, abs=0.01)
    assert 1 / row["time_s"] == pytest.approx(191.4, rel=0.002)  # one 4 us launch floor included


@pytest.mark.parametrize("batch", [1, 8, 64, 256])
def test_decode_intensity_formula(cli, batch):
    # I_decode(B) = 2PB / (P b_param + B d_model b_elem)
    p, d = 8_750_000_000, 4096
    (row,) = rows(cli, "decode", "--params", "8.75e9", "--d-model", str(d), "--batch", str(batch), "-d", "h100-sxm")
    assert row["intensity"] == pytest.approx(2 * p * batch / (p * 2 + batch * d * 2), rel=1e-12)


def test_decode_walks_toward_the_ridge_with_batch(cli):
    got = rows(cli, "decode", "--model", "llama-3-8b", "--batch", "1,8,64,256,512", "-d", "h100-sxm")
    assert got[0]["intensity"] == pytest.approx(1.0, abs=0.01)  # batch-1 fp16 decode ~ 1 FLOP/B
    intensities = [r["intensity"] for r in got]
    assert intensities == sorted(intensities)
    assert [r["bound"] for r in got] == ["memory"] * 4 + ["compute"]


def test_prefill_of_1024_tokens(cli):
    # "2 x 1024 / 2 = 1024 FLOP/byte for FP16 weights" (weights dominate the bytes)
    (row,) = rows(cli, "prefill", "--params", "8.75e9", "--d-model", "4096", "--seq", "1024", "-d", "h100-sxm")
    assert row["intensity"] == pytest.approx(1024, rel=0.001)
    assert row["bound"] == "compute"


def test_gelu_4096_squared(cli):
    # "roughly 5 operations per element ... approximately 1.2 FLOP/byte"
    (row,) = rows(cli, "elementwise", "--op", "gelu", "--numel", "4096x4096", "--dtype", "fp16", "-d", "h100-sxm")
    assert row["intensity"] == pytest.approx(1.2, abs=0.06)
    assert row["bound"] == "memory"


def test_attention_naive_vs_fused_state(cli):
    # S=8192, 64 heads, head dim 128, fp16: 545.3 MB per head naive vs 8.4 MB fused (65x); 34.9 GB vs 536.9 MB.
    naive, fused = rows(
        cli,
        "attention",
        "--seq",
        "8192",
        "--heads",
        "1",
        "--head-dim",
        "128",
        "--impl",
        "naive,fused",
        "-d",
        "h100-sxm",
    )
    assert naive["bytes"] / 1e6 == pytest.approx(545.3, abs=0.05)
    assert fused["bytes"] / 1e6 == pytest.approx(8.4, abs=0.05)
    assert naive["bytes"] / fused["bytes"] == pytest.approx(65, abs=0.1)
    layer_naive, layer_fused = rows(
        cli,
        "attention",
        "--seq",
        "8192",
        "--heads",
        "64",
        "--head-dim",
        "128",
        "--impl",
        "naive,fused",
        "-d",
        "h100-sxm",
    )
    assert layer_naive["bytes"] / 1e9 == pytest.approx(34.9, abs=0.05)
    assert layer_fused["bytes"] / 1e6 == pytest.approx(536.9, abs=0.05)
    assert layer_naive["findings"][0]["rule"] == "naive-attention"


# ------------------------------------------------------------------------------------------------ seed 004, serving

NAPKIN_70B = ("--params", "70e9", "--d-model", "8192", "--layers", "80", "--heads", "64", "--kv-heads", "8")


def test_precision_dividend_fp16(cli):
    # "80 GB - 17.5 GB = 62.5 GB ... KV cache per request 1.34 GB total, ~0.17 GB/GPU ... maximum batch ~372"
    (row,) = rows(cli, "decode", *NAPKIN_70B, "--tp", "8", "--context", "4096", "-d", "h100-sxm")
    sv = row["serving"]
    assert sv["weight_memory_bytes"] == 17_500_000_000  # 70e9 x 2 B / 8
    kv_per_token = 2 * 80 * (8 // 8) * 128 * 2  # K and V, 80 layers, 1 KV head per GPU, head_dim 128, fp16
    assert sv["kv_cache_per_request_bytes"] == 4097 * kv_per_token == 167_813_120  # x 8 GPUs = 1.34 GB
    assert sv["activation_per_request_bytes"] == 8192 * 2
    assert sv["memory_batch"] == (80_000_000_000 - 17_500_000_000) // (167_813_120 + 16_384) == 372


def test_precision_dividend_int4_weights_int8_kv(cli):
    # "Weights: 17.5 GB x (4/16) = 4.4 GB/GPU ... 75.6 GB ... KV per request (INT8) ~0.67 GB total ... batch ~901"
    (row,) = rows(
        cli, "decode", *NAPKIN_70B, "--tp", "8", "--context", "4096", "--weight-dtype", "int4", "--kv-dtype", "int8",
        "-d", "h100-sxm",
    )  # fmt: skip
    sv = row["serving"]
    assert sv["weight_memory_bytes"] == 4_375_000_000
    assert sv["kv_cache_per_request_bytes"] == 4097 * 2 * 80 * 128 == 83_906_560
    assert sv["memory_batch"] == (80_000_000_000 - 4_375_000_000) // (83_906_560 + 16_384) == 901


def test_70b_on_8_gpus(cli):
    # "140 GB of weights ... approximately 17.5 GB per GPU"; "17.5 GB / 3.35 TB/s ~ 5.2 ms per token ... 191.4 tokens/s"
    (row,) = rows(cli, "decode", *NAPKIN_70B, "--tp", "8", "-d", "h100-sxm")
    sv = row["serving"]
    assert row["byte_terms"]["weights"] == 17_500_000_000
    assert sv["weights_time_s"] == pytest.approx(17.5e9 / 3.35e12, rel=1e-12)  # 5.224 ms
    assert sv["weights_tokens_per_s"] == pytest.approx(3.35e12 / 17.5e9, rel=1e-12)  # 191.43
    assert round(sv["weights_tokens_per_s"], 1) == 191.4
    # two all-reduces per layer of 8192 fp16 values; a ring sends 2 x 7/8 of each over 450 GB/s per direction
    assert sv["all_reduces"] == 160 and sv["all_reduce_bytes"] == 16_384
    assert sv["link_bytes"] == 160 * 28_672
    assert sv["comm_time_s"] == pytest.approx(160 * 28_672 / 450e9, rel=1e-12)


def test_cuda_graphs_launch_overhead(cli):
    # "30+ kernels ... 5-10 us per launch ... 150-300 us per layer ... 70-layer model ... 10-20 ms per forward pass"
    got = rows(
        cli, "decode", "--params", "70e9", "--d-model", "8192", "--layers", "70", "--kernels-per-layer", "30",
        "--launch-floor", "5,10", "-d", "h100-sxm",
    )  # fmt: skip
    five, ten = (r["serving"] for r in got)
    assert five["launches"] == ten["launches"] == 70 * 30
    assert five["launch_time_s"] == pytest.approx(70 * 30 * 5e-6)  # 10.5 ms
    assert ten["launch_time_s"] == pytest.approx(70 * 30 * 10e-6)  # 21 ms
    # a graph replays the step with one launch: "reducing launch overhead to approximately 5-10 us total"
    assert five["graph_saving_s"] == pytest.approx(70 * 30 * 5e-6 - 5e-6)
    assert ten["graph_saving_s"] == pytest.approx(70 * 30 * 10e-6 - 10e-6)


def test_launch_floor_takes_units(cli):
    # --launch-floor 5us,0.01ms is --launch-floor 5,10 (bare numbers are in us, its documented unit)
    args = ("decode", "--params", "70e9", "--d-model", "8192", "--layers", "70", "--kernels-per-layer", "30")
    bare = rows(cli, *args, "--launch-floor", "5,10", "-d", "h100-sxm")
    units = rows(cli, *args, "--launch-floor", "5us,0.01ms", "-d", "h100-sxm")
    assert [r["serving"]["launch_time_s"] for r in units] == [r["serving"]["launch_time_s"] for r in bare]
    assert units[0]["serving"]["launch_time_s"] == pytest.approx(70 * 30 * 5e-6, rel=1e-12)


def test_decode_turns_compute_bound_at_batch_296(cli):
    # I_decode(B) reaches the H100's fp16 ridge (989.4 / 3.35 = 295.3) at B = ridge P b / (2P - ridge d b) = 295.4
    (row,) = rows(cli, "decode", "--params", "8.75e9", "--d-model", "4096", "-d", "h100-sxm")
    assert row["serving"]["compute_batch"] == 296
    assert round(row["serving"]["weights_tokens_per_s"], 1) == 191.4
    assert row["serving"]["tokens_per_s"] == pytest.approx(1 / (17_500_008_192 / 3.35e12 + 4e-6))


def test_wave_quantization_gain_1792_vs_1793(cli):
    # "1792/256 x 1792/128 = 98 tiles ... 1793: 8 x 15 = 120 tiles ... an A100 has 108 SMs": 2 waves against 1
    got = rows(cli, "gemm", "-m", "1793", "-n", "1793", "-k", "4096", "-d", "a100-sxm-80gb")
    wave = next(f for f in got[0]["findings"] if f["rule"] == "wave-quantization")
    tile = 2 * 256 * 128 * 4096 * 108 / 312e12  # one whole tile on one SM
    assert wave["time_s"] == pytest.approx(2 * tile + 4e-6)
    assert wave["best_time_s"] == pytest.approx(tile + 4e-6)
    assert (wave["time_s"] - 4e-6) / (wave["best_time_s"] - 4e-6) == pytest.approx(2.0)
