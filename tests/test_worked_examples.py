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
