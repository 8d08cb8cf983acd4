"""A Hugging Face ``config.json`` -> the fields of the LLM cost model's ModelConfig (`roofline analyze
decode|prefill --config`; roofline.costs.llm.load_hf_config validates them).

Read, by the names the common architectures use (the first one present wins):
  layers          num_hidden_layers, n_layer, num_layers, n_layers
  hidden          hidden_size, n_embd, d_model, dim
  heads           num_attention_heads, n_head, num_heads, n_heads
  kv_heads (GQA)  num_key_value_heads, num_kv_heads, n_kv_heads, multi_query_group_num; multi_query: 1
  head_dim        head_dim (else hidden / heads)
  ffn             intermediate_size, n_inner, ffn_dim, ffn_hidden_size, inner_dim (else 4 x hidden); with experts,
                  moe_intermediate_size first (the width of one expert)
  vocab           vocab_size, padded_vocab_size
  max_context     max_position_embeddings, n_positions, n_ctx, seq_length, max_sequence_length
  tied embeddings tie_word_embeddings (Hugging Face's default when absent: true)
  experts         num_local_experts, num_experts, n_routed_experts, moe_num_experts
  top-k           num_experts_per_tok, moe_top_k, num_experts_per_token, top_k, num_selected_experts
A multimodal config's ``text_config`` is read when the top level has no hidden size. The FFN is gated
(SwiGLU-like: gate, up, down) for the gated families (llama, mistral, mixtral, qwen2, gemma...) or a SiLU
activation, else a plain MLP; the norm is RMSNorm when ``rms_norm_eps`` is given, else LayerNorm; GPT-2-like
families (gpt2, gpt_neo, opt) have biases and learned positions. Anything missing or malformed is one
WorkloadError line naming the file and the key (exit 2 at the CLI). The model's name: its hub id where the file
sits in the hub cache or among the shipped configs (roofline.costs.hfhub), else ``_name_or_path``, else the
model type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roofline.costs.hfhub import hub_id_of
from roofline.errors import WorkloadError
from roofline.yamlio import MAX_YAML_BYTES, parse_json, read_text

KEYS: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model", "dim"),
    "heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num"),
    "head_dim": ("head_dim",),
    "ffn": ("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size", "inner_dim"),
    "vocab": ("vocab_size", "padded_vocab_size"),
    "max_context": ("max_position_embeddings", "n_positions", "n_ctx", "seq_length", "max_sequence_length"),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
    "experts_per_token": (
        "num_experts_per_tok",
        "moe_top_k",
        "num_experts_per_token",
        "top_k",
        "num_selected_experts",
    ),
}
REQUIRED = ("layers", "hidden", "heads", "vocab")
#: families whose FFN is gated (gate * act(up), then down)
GATED = frozenset(
    {
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "gemma",
        "gemma2",
        "gemma3",
        "gemma3_text",
        "phi3",
        "olmo",
        "olmo2",
        "olmoe",
        "deepseek_v2",
        "deepseek_v3",
        "granite",
        "granitemoe",
        "cohere",
        "internlm2",
        "baichuan",
        "yi",
    }
)
#: families with biases on every linear layer and a learned position table
GPT2_LIKE = frozenset({"gpt2", "gpt_neo", "opt", "gpt_bigcode"})
SHARED_EXPERT_KEYS = ("n_shared_experts", "shared_expert_intermediate_size", "num_shared_experts")


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise WorkloadError(f"{path}: no such Hugging Face config file")
    text = read_text(path, WorkloadError, "Hugging Face config.json", MAX_YAML_BYTES)
    data = parse_json(text, path, WorkloadError, "not valid JSON", "give the model's config.json")
    if not isinstance(data, dict):
        raise WorkloadError(f"{path}: a Hugging Face config is a JSON object, this is a {type(data).__name__}")
    text = data.get("text_config")
    if isinstance(text, dict) and not any(key in data for key in KEYS["hidden"]):
        return {**text, "model_type": text.get("model_type", data.get("model_type"))}
    return data


def _first(data: dict[str, Any], field: str, path: Path) -> tuple[str, Any] | None:
    for key in KEYS[field]:
        if key in data and data[key] is not None:
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise WorkloadError(f"{path}: {key} is {value!r}: expected a whole number >= 0")
            return key, value
    return None


def hf_model_config(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """The ModelConfig fields of a parsed Hugging Face config (see the module docstring); WorkloadError when a
    required size is missing or not a whole number."""
    found: dict[str, Any] = {}
    keys: dict[str, str] = {}
    for field in KEYS:
        hit = _first(data, field, path)
        if hit is not None:
            keys[field], found[field] = hit
    missing = [field for field in REQUIRED if field not in found]
    if missing:
        need = "; ".join(f"{field} ({' or '.join(KEYS[field])})" for field in missing)
        raise WorkloadError(f"{path}: not a decoder LLM config Hugging Face writes: no {need}")
    model_type = str(data.get("model_type") or "").lower()
    experts = int(found.get("experts") or 0)
    if experts and data.get("moe_intermediate_size"):
        found["ffn"], keys["ffn"] = data["moe_intermediate_size"], "moe_intermediate_size"
    if "ffn" not in found:
        found["ffn"], keys["ffn"] = 4 * found["hidden"], "4 x hidden (no intermediate size given)"
    if "kv_heads" not in found and data.get("multi_query"):
        found["kv_heads"], keys["kv_heads"] = 1, "multi_query"
    act = str(data.get("hidden_act") or data.get("activation_function") or "").lower()
    gated = model_type in GATED or act in ("silu", "swish", "swiglu")
    gpt2_like = model_type in GPT2_LIKE
    tied = data.get("tie_word_embeddings", True)
    shared = [key for key in SHARED_EXPERT_KEYS if data.get(key)]
    used = ", ".join(f"{keys[field]} {found[field]}" for field in KEYS if field in found)
    source = f"{path} (Hugging Face config.json{f', model_type {model_type}' if model_type else ''}: {used})"
    if shared:
        source += f"; NB: {', '.join(shared)} given: shared experts not modelled"
    if not experts:
        found.pop("experts_per_token", None)  # a dense config may still name a top-k for something else
    fields = {
        "name": str(hub_id_of(path) or data.get("_name_or_path") or model_type or path.stem) or path.stem,
        "source": source,
        **found,
        "ffn_type": "gated" if gated else "mlp",
        "norm": "rmsnorm" if "rms_norm_eps" in data or model_type in GATED else "layernorm",
        "tied_embeddings": bool(tied),
        "max_context": found.get("max_context") or 2048,
        "bias": gpt2_like or bool(data.get("attention_bias") or data.get("mlp_bias")),
        "learned_positions": gpt2_like,
    }
    if "max_context" not in found:
        fields["source"] += "; no max_position_embeddings: max context taken as 2048"
    return fields


def hf_config_fields(path: str | Path) -> dict[str, Any]:
    """The ModelConfig fields of the Hugging Face ``config.json`` at ``path``, unvalidated (read and validated into
    a ModelConfig by roofline.costs.llm.load_hf_config)."""
    file = Path(path).expanduser()
    return hf_model_config(_read(file), file)


__all__ = ["GATED", "GPT2_LIKE", "KEYS", "hf_config_fields", "hf_model_config"]
