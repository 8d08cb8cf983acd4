"""`roofline diagnose --hf`: a Hugging Face causal LM built from its config with random weights (roofline.diagnose.hf),
diagnosed on the CPU: tiny configs (2 layers, hidden 64) of two families, the three steps (prefill, decode with the
prompt in the KV cache, training on the LM loss), the counts of every linear layer derived by hand, the report's
facts, and an architecture transformers cannot build as one Error line. Needs transformers (the dev extra has it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from diagnose_devices import CPU as FAKE_CPU

from roofline.diagnose.pipeline import DiagnoseOptions, diagnose_hf

transformers = pytest.importorskip("transformers")  # NB: a guard only: CI installs the dev extra, which has it

ROOT = Path(__file__).resolve().parents[1]
LLAMA = str(ROOT / "tests" / "hf_configs" / "tiny-llama")  # hidden 64, 4 heads of 16, 2 KV heads, ffn 128, vocab 256
GPT2 = str(ROOT / "tests" / "hf_configs" / "tiny-gpt2")  # n_embd 64, 4 heads, 2 layers, vocab 256, 256 positions
FAST = DiagnoseOptions(device="cpu", warmup=0, iters=1)


@pytest.fixture(autouse=True)
def fake_roofs(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))


def _mm_flops(records, phase: str = "forward") -> int:
    """The FLOPs of the matmuls the model's nn.Linear layers ran (the rotary embedding's own small matmul, in
    transformers 4.x, left out)."""
    matmuls = ("aten::mm", "aten::addmm", "aten::bmm")
    return sum(r.flops for r in records if r.op in matmuls and r.module_type == "Linear" and r.phase == phase)


def _linear_flops(tokens: int, layers: int = 2, hidden: int = 64, kv: int = 32, ffn: int = 128, vocab: int = 256):
    """2 FLOPs per multiply-add of every linear layer of the tiny Llama over ``tokens`` rows: q, k, v, o, gate, up,
    down per layer, and the LM head."""
    per_layer = 2 * tokens * hidden * (hidden + kv + kv + hidden) + 3 * 2 * tokens * hidden * ffn
    return layers * per_layer + 2 * tokens * hidden * vocab


def _attention(records):
    return [r for r in records if "scaled_dot_product" in r.op and r.phase == "forward"]


def test_prefill_counts_every_linear_layer_and_keeps_transformers_module_paths():
    result = diagnose_hf(LLAMA, batch=2, seq=8, step="prefill", options=FAST)
    assert _mm_flops(result.records) == _linear_flops(tokens=2 * 8)  # logits for every position
    modules = {r.module for r in result.records}
    assert {"model.layers.1.mlp.down_proj", "model.layers.0.self_attn.q_proj", "lm_head"} <= modules
    (first, _) = _attention(result.records)  # one per layer
    assert first.input_shapes[0] == (2, 4, 8, 16) and first.input_shapes[1][2] == 8  # causal over the 8 tokens
    assert (result.convention, str(result.path)) == ("hf", LLAMA)
    assert result.options["mode"] == "inference" and result.options["dtype"] == "fp32"  # no torch_dtype: fp32
    hf = result.options["hf"]
    assert {k: hf[k] for k in ("id", "step", "batch", "seq", "model_type", "class", "cache")} == {
        "id": LLAMA,
        "step": "prefill",
        "batch": 2,
        "seq": 8,
        "model_type": "llama",
        "class": "LlamaForCausalLM",
        "cache": "",
    }
    assert hf["config"] == str(Path(LLAMA) / "config.json") and hf["transformers"] == transformers.__version__


def test_decode_runs_one_token_after_seq_cached_ones_and_every_step_is_the_same():
    from roofline.diagnose.hf import HfModel, load_hf, read_config

    result = diagnose_hf(LLAMA, batch=2, seq=8, step="decode", options=FAST)
    assert _mm_flops(result.records) == _linear_flops(tokens=2)  # one new token per sequence
    for attention in _attention(result.records):
        assert attention.input_shapes[0][2] == 1 and attention.input_shapes[1][2] == 8 + 1  # the cache and the token
    assert result.options["hf"]["cache"] and result.options["hf"]["step"] == "decode"
    # the prompt's KV cache: 2 layers x (key, value) x batch 2 x 2 KV heads x 8 tokens x head dim 16 x 4 bytes
    assert result.memory.kv_cache_bytes == 2 * 2 * 2 * 2 * 8 * 16 * 4 == 8192
    assert "kv_cache_bytes" not in result.options["hf"]  # stored once: the report's memory block
    import torch

    loaded = load_hf(HfModel(LLAMA, 2, 8, "decode"), read_config(LLAMA), device="cpu", dtype="fp32")
    with torch.no_grad():
        outputs = [loaded.model(*loaded.inputs) for _ in range(3)]
    cache = loaded.model.cache
    if isinstance(cache, tuple):  # transformers 4.40's legacy cache: the model makes a new one each step
        assert cache[0][0].shape[-2] == 8
    else:  # a Cache object, grown in place: cut back to the prompt before each step, then one token appended
        assert cache.get_seq_length() == 9
    assert outputs[0].shape == (2, 1, 256)
    assert all(torch.equal(outputs[0], later) for later in outputs[1:])


def test_training_runs_forward_and_backward_of_the_lm_loss():
    import roofline

    diagnosis = roofline.diagnose_hf(LLAMA, batch=2, seq=8, mode="training", device="cpu", warmup=0, iters=1)
    result = diagnosis.result  # the notebook API's Diagnosis of the same pipeline
    assert result.options["mode"] == "training"
    phases = {r.phase for r in result.records}
    assert phases == {"forward", "backward"}
    assert any("nll_loss" in r.op for r in result.records)  # the causal LM loss on the shifted labels
    assert _mm_flops(result.records) == _linear_flops(tokens=2 * 8)
    backward = _mm_flops(result.records, "backward")
    # every linear layer's input and weight gradients (the embedding's is a gather, not a GEMM); the loss reads
    # all 8 positions' logits (the last one's label is padding, ignored, but its row is computed)
    assert backward == 2 * _linear_flops(tokens=2 * 8)


def test_cli_json_report_of_a_gpt2_decode(cli, tmp_path):
    out = tmp_path / "r.json"
    args = ("diagnose", "--hf", GPT2, "--mode", "decode", "--batch", "2", "--seq", "8", "--device", "cpu")
    result = cli(*args, "--iters", "1", "--warmup", "0", "--json", "-o", str(out))
    assert result.code == 0, result.err
    report = result.json()
    assert json.loads(out.read_text())["diagnose"]["hf"] == report["diagnose"]["hf"]
    about = report["diagnose"]
    assert (about["model"], about["convention"], about["mode"]) == (GPT2, "hf", "inference")
    assert (about["hf"]["step"], about["hf"]["class"], about["hf"]["model_type"]) == (
        "decode",
        "GPT2LMHeadModel",
        "gpt2",
    )
    assert any(row["module"].startswith("transformer.h.1.attn") for row in report["rows"])  # GPT-2's own paths
    from roofline.render.diagnose import DiagnoseRenderer
    from roofline.report.schema import read_report

    header = DiagnoseRenderer(top=3, color=False).render(read_report(out)).splitlines()[0]
    assert header.startswith(f"{GPT2} (hf) · decode · batch 2 · seq 8 in the KV cache · random weights · fp32")


def test_an_architecture_transformers_cannot_build_is_one_line(cli, tmp_path):
    (tmp_path / "t5").mkdir()
    (tmp_path / "t5" / "config.json").write_text(
        json.dumps({"model_type": "t5", "d_model": 64, "num_layers": 2, "num_heads": 4, "vocab_size": 100})
    )
    (tmp_path / "custom.json").write_text(json.dumps({"model_type": "not-in-transformers", "auto_map": {"x": "y"}}))
    for ref, what in (
        (tmp_path / "t5", "model_type 't5' as a causal LM"),
        (tmp_path / "custom.json", "model_type 'not-in"),
    ):
        result = cli("diagnose", "--hf", str(ref), "--device", "cpu", "-o", str(tmp_path / "r.json"))
        assert result.code == 2, result.err
        line = result.error_line()
        assert f"cannot build {what}" in line and "give a decoder-only model transformers ships" in line
    assert not (tmp_path / "r.json").exists()
