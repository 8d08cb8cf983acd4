"""decode/prefill serving figures: tokens/s, --tp, the memory and compute batches, launches (console and errors)."""

from __future__ import annotations

import pytest

from roofline.costs import cost
from roofline.costs.llm import DecodeParams, activation_per_request, kv_cache_per_request, weight_memory


def _error(result) -> str:
    assert result.code == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.err
    return lines[0]


def test_console_card_prints_tokens_per_second_and_both_batches(cli):
    result = cli(
        "analyze", "decode", "--params", "70e9", "--d-model", "8192", "--layers", "80", "--heads", "64",
        "--kv-heads", "8", "--tp", "8", "--context", "4096", "-d", "h100-sxm",
    )  # fmt: skip
    assert result.code == 0, result.err
    text = " ".join(result.out.split())
    assert "tokens/s" in text and "ms/token" in text
    assert "weights alone (5.22 ms to read them once) 191.4" in text
    assert "memory runs out above 372" in text
    assert "compute binds at none up to" in text
    assert "160 all-reduces of 16.38 kB" in text and "450 GB/s per direction" in text
    assert "CUDA graphs" in text and "Assumptions:" in text


def test_sweep_table_prints_a_serving_line_per_row(cli):
    result = cli("analyze", "decode", "--model", "llama-3-8b", "--batch", "1,64", "-d", "h100-sxm")
    assert result.code == 0, result.err
    text = " ".join(result.out.split())
    assert "Serving" in text and text.count("tokens/s,") == 2 and "compute binds at batch" in text


def test_config_form_tp_splits_weights_and_heads():
    one = cost("decode", model="llama-3-70b")
    eight = cost("decode", model="llama-3-70b", tp=8)
    # every weight matrix and the LM head split 8 ways (all widths divide by 8)
    assert eight.byte_terms["weights"] * 8 == one.byte_terms["weights"]
    assert eight.link_bytes == 160 * (2 * 7 * 8192 * 2 // 8)
    assert any("tp=8" in n for n in eight.notes)


def test_config_form_memory_footprint():
    p = DecodeParams.model_validate({"model": "llama-3-8b", "context": 1000})
    assert weight_memory(p) == 8_030_261_248 * 2  # every parameter at fp16, tp 1
    assert kv_cache_per_request(p) == 1001 * 2 * 32 * 8 * 128 * 2
    assert activation_per_request(p) == (4096 + 128256) * 2  # residual stream + logits (the widest)


def test_no_peer_link_says_the_communication_is_not_modelled(cli):
    result = cli("analyze", "decode", "--model", "llama-3-8b", "--tp", "2", "-d", "l4")
    assert result.code == 0, result.err
    assert "communication time not modelled" in " ".join(result.out.split())


def test_kernels_per_layer_adds_launches_to_the_config_form(cli):
    (row,) = cli("analyze", "decode", "--model", "llama-3-8b", "--kernels-per-layer", "30", "-d", "h100-sxm",
                 "--json").json()["rows"]  # fmt: skip
    assert row["serving"]["launches"] == 32 * 30 + 3


def test_kv_dtype_models_a_kv_cache_in_the_napkin_form():
    fp16 = cost("decode", params=8e9, d_model=4096, layers=32, heads=32, kv_heads=8, context=100)
    int8 = cost("decode", params=8e9, d_model=4096, layers=32, heads=32, kv_heads=8, context=100, kv_dtype="int8")
    assert fp16.byte_terms["kv_cache"] == 101 * 2 * 32 * 8 * 128 * 2
    assert int8.byte_terms["kv_cache"] * 2 == fp16.byte_terms["kv_cache"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "llama-3-70b", "--tp", "3"], "Error: decode: tp=3 must divide the heads (64) and the KV heads"),
        (["--model", "llama-3-8b", "--tp", "x"], "--tp: cannot read 'x' as a size"),  # not ''
        (["--model", "llama-3-8b", "--tp", "4x"], "--tp: cannot read '4x' as a size"),
        (["--model", "llama-3-70b", "--tp", "16"], "tp=16 must divide the heads (64) and the KV heads (8)"),
        (["--model", "llama-3-8b", "--tp", "0"], "--tp: '0' must be positive"),
        (["--model", "llama-3-8b", "--context", "0"], "--context: '0' must be positive"),
        (["--model", "llama-3-8b", "--memory", "10G"], "smaller than the weights one GPU holds"),
        (["--model", "llama-3-8b", "--kernels-per-layer", "8"], "below the 12 kernels"),
        (["--params", "8e9", "--d-model", "4096", "--kv-dtype", "int8"], "needs the KV cache's shape"),
        (["--params", "8e9", "--d-model", "4096", "--tp", "2"], "needs layers"),
        (["--params", "8e9", "--d-model", "4096", "--layers", "32", "--heads", "32", "--tp", "3"], "must divide"),
        (["--model", "llama-3-8b", "--layers", "4"], "--layers is for the napkin form"),
    ],
)
def test_bad_serving_input_is_one_line_exit_2(cli, args, needle):
    assert needle in _error(cli("analyze", "decode", *args, "-d", "h100-sxm"))


def test_prefill_has_tp_and_memory(cli):
    (row,) = cli("analyze", "prefill", "--model", "llama-3-70b", "--seq", "1024", "--tp", "8", "-d", "h100-sxm",
                 "--json").json()["rows"]  # fmt: skip
    sv = row["serving"]
    assert sv["tokens_per_step"] == 1024 and sv["tp"] == 8 and sv["memory_batch"] > 0
