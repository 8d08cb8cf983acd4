"""Hugging Face models by id, with no network (roofline.costs.hfhub): a reference resolved to its config.json (a
directory, a file, the hub's local cache, the configs roofline ships), `analyze decode|prefill --config ID` on them
with the counts derived by hand, and each bad reference as one Error line, exit 2. No transformers needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from diagnose_devices import CPU as FAKE_CPU

from roofline.costs.hfhub import hub_id_of, resolve_config, shipped_ids
from roofline.costs.llm import DecodeParams, decode, load_config, load_hf_config, parameter_count
from roofline.errors import WorkloadError

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "hf_configs" / "tiny-llama"


@pytest.fixture(autouse=True)
def empty_hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty hub cache of this test's own (the user's ~/.cache is never read)."""
    cache = tmp_path / "hub"
    cache.mkdir()
    for name in ("HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def _snapshot(cache: Path, hub_id: str, revision: str, config: dict, *, main: bool = True) -> Path:
    """A model in the hub cache's layout: models--ORG--NAME/snapshots/REV/config.json (and refs/main)."""
    repo = cache / f"models--{hub_id.replace('/', '--')}"
    (repo / "snapshots" / revision).mkdir(parents=True)
    path = repo / "snapshots" / revision / "config.json"
    path.write_text(json.dumps(config))
    if main:
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / "main").write_text(revision)
    return path


def test_the_shipped_ids_are_the_hub_s_configs_with_the_published_parameter_counts():
    assert shipped_ids() == ["meta-llama/Meta-Llama-3-8B", "mistralai/Mistral-7B-v0.1", "openai-community/gpt2"]
    counts = {
        "openai-community/gpt2": ("gpt2", 124_439_808),
        "meta-llama/Meta-Llama-3-8B": ("llama-3-8b", 8_030_261_248),
        "mistralai/Mistral-7B-v0.1": ("mistral-7b", 7_241_732_096),
    }
    for hub_id, (shipped_yaml, count) in counts.items():
        found = resolve_config(hub_id)
        assert found.name == hub_id and found.origin == "shipped with roofline"
        config = load_hf_config(found.path)
        assert config.name == hub_id  # named by its id, not its model_type
        assert parameter_count(config) == parameter_count(load_config(shipped_yaml)) == count


def test_ids_match_without_regard_to_case_and_gpt2_is_the_hub_s_old_name():
    assert resolve_config("META-LLAMA/meta-llama-3-8b").name == "meta-llama/Meta-Llama-3-8B"
    assert resolve_config("gpt2").name == "openai-community/gpt2"


def test_a_directory_and_a_file_are_read_where_they_are():
    found = resolve_config(str(TINY))
    assert (found.path, found.name, found.origin) == (TINY / "config.json", str(TINY), "a local directory")
    found = resolve_config(str(TINY / "config.json"))
    assert (found.path, found.origin) == (TINY / "config.json", "a local file")


def test_the_hub_cache_is_read_before_the_shipped_configs(empty_hub_cache):
    text = json.loads((TINY / "config.json").read_text())
    old = _snapshot(empty_hub_cache, "meta-llama/Meta-Llama-3-8B", "abc123", {**text, "num_hidden_layers": 3})
    found = resolve_config("meta-llama/Meta-Llama-3-8B")
    assert found.path == old and found.origin.startswith("the Hugging Face cache")
    assert hub_id_of(found.path) == "meta-llama/Meta-Llama-3-8B"
    config = load_hf_config(found.path)
    assert (config.name, config.layers) == ("meta-llama/Meta-Llama-3-8B", 3)
    # refs/main names the revision; without it, the newest snapshot holding a config.json
    newer = _snapshot(empty_hub_cache, "someone/tiny", "r2", text, main=False)
    assert resolve_config("someone/tiny").path == newer


def test_hf_home_and_xdg_cache_home_locate_the_hub_cache(tmp_path, monkeypatch):
    from roofline.costs.hfhub import hub_cache

    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub_cache() == tmp_path / "home" / "hub"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("no-such-org/no-such-model", "no config for this Hugging Face id here (not a local directory, not in the hub"),
        ("tests", "tests: a directory without config.json: give the directory of a Hugging Face model"),
        ("missing.json", "missing.json: no such Hugging Face config file"),
        ("pyproject.toml", "a Hugging Face config.json (a .json file), a model directory or a hub id"),
        ("a/b/c", "a/b/c: no such directory or file, and not a Hugging Face model id (ORG/NAME)"),
    ],
)
def test_a_bad_reference_is_one_line_naming_the_fix(ref, message, monkeypatch):
    monkeypatch.chdir(ROOT)
    with pytest.raises(WorkloadError) as info:
        resolve_config(ref)
    text = str(info.value)
    assert message in text and "\n" not in text
    if ref.startswith("no-such"):
        assert "roofline never downloads: fetch its config.json once (`hf download no-such-org/no-such-model" in text
        assert "openai-community/gpt2" in text  # the shipped ids are listed


def test_analyze_decode_counts_a_shipped_config_exactly():
    """Mistral-7B-v0.1 (shipped), decode, batch 2, 3 tokens in the KV cache, fp16: every term derived by hand."""
    h, heads, kv, d, ffn, vocab, layers, b = 4096, 32, 8, 128, 14336, 32000, 32, 2  # b: bytes per fp16 element
    t, skv = 2, 3 + 1  # tokens this step (batch 2 x 1 new), keys each new token attends to
    qkv_n = (heads + 2 * kv) * d
    gemm_flops = 2 * t * h * (qkv_n + h + 2 * ffn) + 2 * t * ffn * h  # qkv, o, gate+up, down
    pairs = 2 * heads * skv  # batch x heads x (1 query x 4 keys)
    attention_flops = 2 * (2 * pairs * d) + 5 * pairs  # QK^T and PV, softmax's 5 per score
    other_flops = 2 * 4 * t * h + 2 * t * h + 5 * t * ffn + t * ffn  # 2 rmsnorms, 2 residual adds, silu, mul
    flops = layers * (gemm_flops + attention_flops + other_flops) + 4 * t * h + 2 * t * vocab * h  # + final norm, head
    weights = (layers * (qkv_n + h + 2 * ffn + ffn) * h + vocab * h) * b
    kv_cache = layers * (2 * 2 * kv * skv * d + 2 * t * kv * d) * b  # K and V read, the new K and V written
    per_layer_acts = (
        2 * t * h  # attn norm in, out
        + t * h
        + t * qkv_n  # qkv in, out
        + 2 * t * kv * d  # the new K, V read by the cache write
        + 2 * t * heads * d  # attention's Q in, O out
        + 2 * t * h  # o_proj in, out
        + 2 * 3 * t * h  # 2 residual adds: 2 in, 1 out
        + 2 * t * h  # ffn norm in, out
        + t * h
        + 2 * t * ffn  # gate_up in, out
        + 2 * t * ffn
        + 3 * t * ffn  # silu in, out; mul 2 in, 1 out
        + t * ffn
        + t * h  # down in, out
    ) * b
    activations = layers * per_layer_acts + (t * h + 2 * t * h + t * h + t * vocab) * b  # embedding out, norm, head
    other_weights = (layers * 2 * h + t * h + h) * b  # norm weights, embedding rows, final norm weight
    cost = decode(DecodeParams(model=str(resolve_config("mistralai/Mistral-7B-v0.1").path), batch=2, context=3))
    assert cost.byte_terms == {
        "weights": weights,
        "kv_cache": kv_cache,
        "activations": activations,
        "other_weights": other_weights,
    }
    assert (cost.flops, cost.bytes) == (flops, weights + kv_cache + activations + other_weights)
    assert (cost.flops, cost.bytes) == (28_453_969_920, 14_247_482_368)


def test_cli_analyze_reads_an_id_a_directory_and_a_cached_id(cli, empty_hub_cache):
    result = cli("analyze", "decode", "--config", "gpt2", "--batch", "1", "--device", "h100-sxm", "--json")
    assert result.code == 0, result.err
    (row,) = result.json()["rows"]
    assert row["label"] == "openai-community/gpt2 batch=1 context=0"
    assert row["params"]["model"].endswith("openai-community/gpt2/config.json")
    result = cli("analyze", "prefill", "--config", str(TINY), "--seq", "16", "--device", "h100-sxm", "--json")
    assert result.code == 0, result.err
    assert result.json()["rows"][0]["label"] == "llama batch=1 seq=16 context=0"  # a directory: its model_type
    _snapshot(empty_hub_cache, "someone/tiny", "r1", json.loads((TINY / "config.json").read_text()))
    result = cli("analyze", "decode", "--config", "someone/tiny", "--device", "h100-sxm", "--json")
    assert result.code == 0, result.err
    assert result.json()["rows"][0]["label"] == "someone/tiny batch=1 context=0"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("analyze", "decode", "--config", "no-such-org/model", "--device", "h100"), "no config for this Hugging Face"),
        (("diagnose", "--hf", "no-such-org/model", "--device", "cpu"), "no config for this Hugging Face id here"),
        (("diagnose", "--hf", "tests", "--device", "cpu"), "tests: a directory without config.json"),
        (("diagnose", "--hf", "gpt2", "workloads/models/fp32_matmul.py"), "--hf and the model file"),
        (("diagnose", "--hf", "gpt2", "--trace", "t.json"), "--hf and --trace: give one of them"),
        (("diagnose", "workloads/models/fp32_matmul.py", "--batch", "2"), "--batch: only with --hf ID"),
        (("diagnose", "workloads/models/fp32_matmul.py", "--mode", "decode"), "--mode decode: only with --hf ID"),
        (("diagnose", "--hf", "gpt2", "--mode", "inferense"), "--mode 'inferense' with --hf: use prefill, decode"),
        (("diagnose", "--hf", "gpt2", "--seq", "0"), "--seq 0: at least 1"),
        (("diagnose", "--hf", "gpt2", "--entry", "build"), "--entry: for a model file; --hf builds the model"),
        (("diagnose", "--hf", "gpt2", "--nproc", "2"), "--hf runs one process: --nproc, --backend and torchrun"),
        (("diagnose", "--hf", "gpt2", "--counters", "--device", "cpu"), "--counters with --hf: not yet"),
        (("diagnose", "--hf", "gpt2", "--dtype", "int8", "--device", "cpu"), "--dtype 'int8': use one of fp32"),
        (
            ("diagnose", "--hf", "gpt2", "--seq", "1024", "--mode", "decode", "--device", "cpu"),
            "--seq 1024: openai-community/gpt2 has a learned table of 1024 positions: at most 1023 with --mode decode",
        ),
    ],
)
def test_cli_bad_hf_input_is_one_error_line_exit_2(cli, monkeypatch, tmp_path, args, message):
    monkeypatch.chdir(ROOT)
    result = cli(*args, "-o", str(tmp_path / "r.json")) if args[0] == "diagnose" else cli(*args)
    assert result.code == 2, result.err
    assert message in result.error_line()
    assert not (tmp_path / "r.json").exists()


def test_cli_a_model_too_big_for_this_machine_is_refused_before_it_is_built(cli, monkeypatch, tmp_path):
    from roofline.resources import HostMemory

    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))  # never calibrate
    monkeypatch.setattr("roofline.resources.host_memory", lambda: HostMemory(9 * 10**8, 10**9, "MemAvailable"))
    result = cli("diagnose", "--hf", "gpt2", "--device", "cpu", "--mode", "training", "-o", str(tmp_path / "r.json"))
    assert result.code == 2, result.err
    assert result.error_line() == (
        "Error: openai-community/gpt2: 124,439,808 parameters, 0.996 GB of weights and gradients at fp32, more than "
        "the 0.9 GB free on this machine (MemAvailable): a GPU (--device cuda), --dtype bf16, or a smaller config (a "
        "directory holding a config.json with fewer layers)"
    )
