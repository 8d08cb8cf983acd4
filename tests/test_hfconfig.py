"""Hugging Face config.json -> the LLM cost model (roofline.costs.hfconfig; `analyze decode|prefill --config`):
committed small configs (a Llama-like GQA, a Mixtral-like MoE, GPT-2 with tied embeddings), the MoE cost, and
bad configs as one Error line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.costs.llm import (
    DecodeParams,
    PrefillParams,
    decode,
    experts_touched,
    load_config,
    load_hf_config,
    parameter_count,
)
from roofline.errors import WorkloadError

CONFIGS = Path(__file__).parent / "hf_configs"


def test_llama_like_gqa_matches_the_shipped_llama_3_8b():
    config = load_hf_config(CONFIGS / "llama-gqa.json")
    assert (config.layers, config.hidden, config.heads, config.n_kv_heads) == (32, 4096, 32, 8)
    assert (config.ffn, config.ffn_type, config.norm, config.tied_embeddings) == (14336, "gated", "rmsnorm", False)
    assert config.vocab == 128256 and config.max_context == 8192 and config.experts == 0
    assert parameter_count(config) == parameter_count(load_config("llama-3-8b"))


def test_gpt2_with_tied_embeddings_matches_the_shipped_gpt2():
    config = load_hf_config(CONFIGS / "gpt2-tied.json")
    assert config.tied_embeddings and config.bias and config.learned_positions  # tie_word_embeddings absent: true
    assert (config.ffn, config.ffn_type, config.norm) == (4 * 768, "mlp", "layernorm")
    assert parameter_count(config) == parameter_count(load_config("gpt2")) == 124_439_808


def test_mixtral_like_moe_counts_experts_and_top_k():
    config = load_hf_config(CONFIGS / "mixtral-moe.json")
    assert (config.experts, config.experts_per_token, config.ffn) == (8, 2, 14336)
    assert parameter_count(config) == 46_702_792_704  # Mixtral 8x7B's published total
    path = str(CONFIGS / "mixtral-moe.json")
    one = decode(DecodeParams(model=path, batch=1))
    dense = load_hf_config(CONFIGS / "llama-gqa.json")
    expert_weights = 3 * 4096 * 14336 * 2  # one expert's gate, up, down at fp16
    # batch 1: each layer reads its top-2 experts, never all 8
    weights = one.byte_terms["weights"]
    assert 2 * 32 * expert_weights < weights < 3 * 32 * expert_weights + 2e9
    many = decode(DecodeParams(model=path, batch=256))  # 256 tokens x top-2 reach every expert
    assert many.byte_terms["weights"] - weights == pytest.approx(6 * 32 * expert_weights, rel=1e-6)
    active = parameter_count(config) - 32 * 6 * expert_weights // 2  # the 2 of 8 experts a token uses
    assert one.flops == pytest.approx(2 * active, rel=0.02)  # 2 FLOPs per active parameter (plus attention)
    assert dense.experts == 0
    assert experts_touched(1, 8, 2) == pytest.approx(2) and experts_touched(10_000, 8, 2) == pytest.approx(8)
    prefill = PrefillParams(model=path, seq=128)
    assert prefill.config is not None and prefill.config.experts == 8


def test_a_multimodal_config_reads_its_text_config(tmp_path):
    text = json.loads((CONFIGS / "llama-gqa.json").read_text())
    file = tmp_path / "config.json"
    file.write_text(json.dumps({"model_type": "llava", "text_config": text, "vision_config": {"hidden_size": 1024}}))
    assert load_hf_config(file).hidden == 4096


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "is a JSON object, this is a list"),
        ('{"hidden_size": 64', "not valid JSON"),
        ('{"hidden_size": 64}', "no layers (num_hidden_layers or n_layer"),
        ('{"hidden_size": "64", "num_hidden_layers": 2}', "hidden_size is '64': expected a whole number"),
        (
            '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "vocab_size": 10,'
            ' "num_local_experts": 4, "num_experts_per_tok": 6}',
            "experts_per_token (6) must be 1..experts (4)",
        ),
        (
            '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 3,'
            ' "vocab_size": 10}',
            "kv_heads (3) must divide heads (8)",
        ),
    ],
)
def test_bad_configs_are_one_line(tmp_path, content, message):
    file = tmp_path / "config.json"
    file.write_text(content)
    with pytest.raises(WorkloadError) as info:
        load_hf_config(file)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_cli_decode_and_prefill_read_a_config(cli):
    result = cli("analyze", "decode", "--config", str(CONFIGS / "mixtral-moe.json"), "--device", "h100", "--json")
    assert result.code == 0, result.err
    (row,) = result.json()["rows"]
    assert row["params"]["model"].endswith("mixtral-moe.json") and row["label"].startswith("mixtral-moe")
    result = cli("analyze", "prefill", "--config", str(CONFIGS / "gpt2-tied.json"), "--seq", "128", "--device", "h100")
    assert result.code == 0, result.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--config", "missing.json"), "missing.json: no such Hugging Face config file"),
        (("--config", "pyproject.toml"), "a Hugging Face config.json (a .json file)"),
        (("--config", str(CONFIGS / "gpt2-tied.json"), "--model", "gpt2"), "give --model or --config, not both"),
    ],
)
def test_cli_bad_config_is_one_error_line_exit_2(cli, args, message):
    result = cli("analyze", "decode", *args, "--device", "h100")
    assert result.code == 2
    assert message in result.error_line()
