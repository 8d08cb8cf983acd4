"""One step of a decoder-only transformer LLM: decode (one new token per sequence) or prefill (a prompt).

Two forms share one parameter class:
  napkin: ``params`` (P) and ``d_model``, the source text's
          I_decode(B) = 2PB / (P b_param + B d_model b_elem);
  config: ``model`` (a shipped name such as 'llama-3-8b', or a path to a model YAML): every kernel of every
          layer, built from the gemm, attention, elementwise and norm formulas.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from roofline.costs.attention import AttentionParams, attention
from roofline.costs.base import Cost, Kernel, Params, combine, register, scale
from roofline.costs.elementwise import ElementwiseParams, elementwise
from roofline.costs.gemm import GemmParams, gemm
from roofline.costs.norms import NormParams, norm
from roofline.dtypes import nbytes
from roofline.errors import WorkloadError
from roofline.resources import data_dir
from roofline.units import MAX_SIZE
from roofline.yamlio import load_yaml, validate

Size = Annotated[int, Field(gt=0, le=MAX_SIZE)]
Count = Annotated[int, Field(ge=0)]


class ModelConfig(BaseModel):
    """The shape of a decoder-only transformer, as in workloads/llm/*.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    name: str
    source: str  # where the numbers come from (the model's config.json)
    layers: Size
    hidden: Size
    heads: Size
    kv_heads: Size | None = None  # None: = heads (MHA)
    head_dim: Size | None = None  # None: = hidden / heads
    ffn: Size  # FFN inner width (intermediate_size)
    ffn_type: Literal["gated", "mlp"]  # gated: SwiGLU (gate, up, down); mlp: up, gelu, down
    vocab: Size
    norm: Literal["rmsnorm", "layernorm"]
    tied_embeddings: bool
    max_context: Size
    bias: bool = False  # biases on every linear layer (GPT-2)
    learned_positions: bool = False  # a learned max_context x hidden position table (GPT-2)
    experts: Count = 0  # mixture of experts: routed experts per layer, each an FFN of width ffn (0: dense FFN)
    experts_per_token: Count = 0  # experts each token is routed to (top-k)

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        if self.experts and not 1 <= self.experts_per_token <= self.experts:
            raise ValueError(f"experts_per_token ({self.experts_per_token}) must be 1..experts ({self.experts})")
        if not self.experts and self.experts_per_token:
            raise ValueError("experts_per_token without experts: give experts (routed experts per layer)")
        if self.heads % self.n_kv_heads:
            raise ValueError(f"kv_heads ({self.n_kv_heads}) must divide heads ({self.heads})")
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) is not a multiple of heads ({self.heads}): give head_dim")
        return self

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def dim_head(self) -> int:
        return self.head_dim if self.head_dim is not None else self.hidden // self.heads


def models_dir() -> Path:
    return data_dir("workloads") / "llm"


def available_models() -> list[str]:
    """Names of the shipped model configs."""
    return sorted(path.stem for path in models_dir().glob("*.yaml"))


def load_hf_config(path: str | Path) -> ModelConfig:
    """The ModelConfig of the Hugging Face ``config.json`` at ``path`` (its fields read by roofline.costs.hfconfig)."""
    from roofline.costs.hfconfig import hf_config_fields

    fields = hf_config_fields(path)
    return validate(ModelConfig, fields, str(Path(path).expanduser()), WorkloadError, doc="docs/cost-models.md")


def load_config(model: str) -> ModelConfig:
    """The config of a shipped model ``model`` (e.g. 'llama-3-8b'), of the YAML file at path ``model``, or of a
    Hugging Face ``config.json`` (a path ending in .json: roofline.costs.hfconfig)."""
    if model.endswith(".json"):
        return load_hf_config(model)
    if model.endswith((".yaml", ".yml")) or "/" in model or "\\" in model:
        path = Path(model).expanduser()
        if not path.is_file():
            raise WorkloadError(f"{model}: no such model config file")
    else:
        path = models_dir() / f"{model.strip().lower()}.yaml"
        if not path.is_file():
            raise WorkloadError(
                f"unknown model {model!r}: use one of {', '.join(available_models())} "
                "or the path of a model YAML (see docs/cost-models.md)"
            )
    return validate(ModelConfig, load_yaml(path, WorkloadError), str(path), WorkloadError, doc="docs/cost-models.md")


def parameter_count(config: ModelConfig) -> int:
    """Exact parameter count of ``config``: embeddings, attention, FFN, norms, biases, LM head."""
    c = config
    hd, kv = c.dim_head, c.n_kv_heads
    norm_params = c.hidden * (2 if c.norm == "layernorm" else 1)  # layernorm: weight + bias
    qkv = c.hidden * (c.heads + 2 * kv) * hd
    out = c.heads * hd * c.hidden
    ffn = (3 if c.ffn_type == "gated" else 2) * c.hidden * c.ffn
    if c.experts:
        ffn = ffn * c.experts + c.hidden * c.experts  # every expert's FFN, and the router
    layer = qkv + out + ffn + 2 * norm_params
    if c.bias:
        layer += (c.heads + 2 * kv) * hd + c.hidden  # qkv and o biases
        layer += (2 * c.ffn if c.ffn_type == "gated" else c.ffn) + c.hidden  # ffn biases
    total = c.layers * layer + norm_params + c.vocab * c.hidden  # final norm, token embedding
    if c.learned_positions:
        total += c.max_context * c.hidden
    if not c.tied_embeddings:
        total += c.vocab * c.hidden  # separate LM head
    return total


class LlmParams(Params):
    """Parameters of one LLM step: ``model`` (config form) or ``params`` + ``d_model`` (napkin form)."""

    sizes = ("batch", "context", "params", "d_model")

    model: str | None = None
    params: Size | None = None
    d_model: Size | None = None
    batch: Size = 1
    context: Count = 0  # tokens already in the KV cache of each sequence
    act_dtype: str = "fp16"
    weight_dtype: str | None = None  # None: = act_dtype
    kv_dtype: str | None = None  # None: = act_dtype
    attention: Literal["fused", "naive"] = "fused"
    # napkin form only: the shape of the KV cache and of the layers (KV cache, --tp, launches per layer)
    layers: Size | None = None
    heads: Size | None = None
    kv_heads: Size | None = None  # None: = heads
    # tensor parallelism: weights and heads split tp ways, two all-reduces per layer over the peer link
    tp: Size = 1
    kernels_per_layer: Size | None = None  # launches per layer (None: config form, as counted; napkin, 12)
    launch_floor_us: Annotated[float, Field(gt=0, le=1e6)] | None = None  # None: the device's
    memory: Size | None = None  # bytes per GPU for weights + KV cache + activations (None: the device's capacity)

    _config: ModelConfig | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for name in ("weight_dtype", "kv_dtype"):
                if data.get(name) is None:
                    data[name] = data.get("act_dtype", "fp16")
        return data

    @model_validator(mode="after")
    def _form(self) -> LlmParams:
        napkin = self.params is not None or self.d_model is not None
        if self.model is not None and napkin:
            raise ValueError("give either model (a config) or params and d_model (napkin form), not both")
        shape = {"layers": self.layers, "heads": self.heads, "kv_heads": self.kv_heads}
        if self.model is None:
            if self.params is None or self.d_model is None:
                raise ValueError("give model (a name or a YAML path), or both params and d_model")
            if self.kv_heads is not None and self.heads is None:
                raise ValueError("kv_heads needs heads (the query heads) in the napkin form")
            if self.heads is not None and self.d_model % self.heads:
                raise ValueError(f"heads ({self.heads}) must divide d_model ({self.d_model}): head_dim = d_model/heads")
            if self.heads is not None and self.heads % self.n_kv_heads:
                raise ValueError(f"kv_heads ({self.n_kv_heads}) must divide heads ({self.heads})")
            if self.context and not self.models_kv_cache:
                raise ValueError(
                    "the napkin form models the KV cache only with layers and heads (and kv_heads for GQA): "
                    "give them, or give model"
                )
            if self.tp > 1 and self.layers is None:
                raise ValueError(f"tp={self.tp} in the napkin form needs layers (two all-reduces per layer)")
            if self.kernels_per_layer is not None and self.layers is None:
                raise ValueError("kernels_per_layer in the napkin form needs layers")
        else:
            given = [name for name, value in shape.items() if value is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: napkin-form options; a model config has its own")
            self._config = load_config(self.model)  # WorkloadError names the problem and the choices
        heads, kv_heads = self.query_heads, self.n_kv_heads
        if self.tp > 1 and heads is not None and (heads % self.tp or kv_heads % self.tp):
            raise ValueError(f"tp={self.tp} must divide the heads ({heads}) and the KV heads ({kv_heads})")
        if self._config is not None and self.kernels_per_layer is not None:
            counted = layer_kernel_count(self, self._config)
            if self.kernels_per_layer < counted:
                raise ValueError(
                    f"kernels_per_layer={self.kernels_per_layer} is below the {counted} kernels a "
                    f"{self._config.name} layer counts: fusing kernels also removes activation bytes, which this "
                    "form does not model"
                )
        return self

    @property
    def query_heads(self) -> int | None:
        return self._config.heads if self._config is not None else self.heads

    @property
    def n_kv_heads(self) -> int:
        if self._config is not None:
            return self._config.n_kv_heads
        return self.kv_heads if self.kv_heads is not None else (self.heads or 0)

    @property
    def models_kv_cache(self) -> bool:
        """The config form always; the napkin form when it has the layers and the heads."""
        return self._config is not None or (self.layers is not None and self.heads is not None)

    @property
    def config(self) -> ModelConfig | None:
        return self._config

    @property
    def new_tokens(self) -> int:
        """Tokens each sequence processes in this step."""
        return 1

    def label(self) -> str:
        head = f"params={self.params:.4g} d_model={self.d_model}" if self._config is None else self._config.name
        text = f"{head} batch={self.batch}"
        if isinstance(self, PrefillParams):
            text += f" seq={self.seq}"
        if self.context or self._config is not None:
            text += f" context={self.context}"
        if self.tp > 1:
            text += f" tp={self.tp}"
        return text


class DecodeParams(LlmParams):
    """Decode: one new token per sequence, attending to ``context`` cached tokens plus itself."""


class PrefillParams(LlmParams):
    """Prefill: ``seq`` prompt tokens per sequence (after ``context`` cached ones, usually 0)."""

    sizes = ("batch", "seq", "context", "params", "d_model")

    seq: Size

    @property
    def new_tokens(self) -> int:
        return self.seq


# ---------------------------------------------------------------------------------------------------
# Napkin form


def _split(value: int, tp: int) -> int:
    """One GPU's share of ``value`` split ``tp`` ways (rounded up)."""
    return -(-value // tp)


def _all_reduces(kind: str, layers: int, tokens: int, width: int, p: LlmParams) -> Cost:
    # NB: tensor parallelism (Megatron): two all-reduces per layer (after the attention output projection and after
    # the FFN down projection), each of the tokens x width activations at act_dtype. A ring all-reduce sends
    # 2(tp-1)/tp of the message from each GPU over its peer link (link_bytes); it reads and writes the message in
    # DRAM once (counted as activations). Each all-reduce is one launch. Not overlapped with compute.
    message = nbytes(tokens * width, p.act_dtype)
    sent = _split(2 * (p.tp - 1) * message, p.tp)
    kernel = Kernel("all_reduce", 0, 2 * message, p.act_dtype, "vector", count=2 * layers, link_bytes=sent)
    notes = (
        f"tp={p.tp}: 2 all-reduces per layer of {message} B each; a ring sends 2(tp-1)/tp of it per GPU over the peer "
        "link, not overlapped with compute",
    )
    return Cost(kind, (kernel,), notes, {"activations": 2 * message * 2 * layers})


def _launches(kind: str, count: int) -> Cost:
    # NB: launches the cost does not count as work (kernels_per_layer above what the formula counts): each takes one
    # launch floor and no FLOPs or bytes.
    if count <= 0:
        return Cost(kind, ())
    return Cost(kind, (Kernel("uncounted_launch", 0, 0, "fp32", "vector", count=count),))


def napkin_kv_per_token(p: LlmParams) -> int:
    """KV-cache bytes per token per GPU of the napkin form: 2 (K, V) x layers x kv_heads/tp x head_dim x b_kv."""
    assert p.layers is not None and p.heads is not None and p.d_model is not None
    return 2 * p.layers * nbytes(p.n_kv_heads // p.tp * (p.d_model // p.heads), p.kv_dtype)


def _napkin(kind: str, p: LlmParams) -> Cost:
    # NB: napkin form (the source text's I_decode): every parameter is one multiply-add per token
    # (FLOPs = 2 P tokens), all weights are read once per step (P b_param) and one d_model-wide
    # activation vector per token moves (tokens d_model b_elem). With layers and heads it also reads the KV cache
    # (context + new tokens per sequence) and does attention's 4 x head_dim FLOPs per query head per score pair;
    # with tp, each GPU holds P/tp parameters and heads/tp heads, and the activations are replicated.
    assert p.params is not None and p.d_model is not None
    tokens = p.batch * p.new_tokens
    weights = _split(nbytes(p.params, p.weight_dtype), p.tp)
    acts = nbytes(tokens * p.d_model, p.act_dtype)
    flops = _split(2 * p.params * tokens, p.tp)
    terms = {"weights": weights, "activations": acts}
    notes = [
        "napkin form: FLOPs = 2*params*tokens; bytes = params*b_param + tokens*d_model*b_elem",
    ]
    if p.models_kv_cache:
        assert p.layers is not None and p.heads is not None
        seq_kv = p.context + p.new_tokens
        kv = p.batch * seq_kv * napkin_kv_per_token(p)
        q = p.new_tokens
        pairs = q * (seq_kv - q) + q * (q + 1) // 2  # causal; decode: every key
        flops += 4 * p.batch * p.layers * (p.heads // p.tp) * (p.d_model // p.heads) * pairs
        terms["kv_cache"] = kv
        notes.append(
            f"napkin form: KV cache of {p.layers} layers x {p.n_kv_heads} KV heads x head_dim {p.d_model // p.heads} "
            f"at {p.kv_dtype}, context + new tokens read once; attention 4*head_dim FLOPs per head per pair; "
            "per-layer activations not modelled"
        )
    else:
        notes.append("napkin form: attention, KV cache and per-layer activations not modelled")
    if p.attention != "fused":
        notes.append("napkin form: attention implementation ignored")
    if p.weight_dtype != p.act_dtype:
        notes.append(f"weight-only {p.weight_dtype}: weights dequantised on the fly, math at {p.act_dtype}")
    kernel = Kernel(f"{kind}_step", flops, sum(terms.values()), p.act_dtype, "tensor")
    parts = [Cost(kind, (kernel,), tuple(notes), terms)]
    if p.layers is not None:
        per_layer = p.kernels_per_layer or DEFAULT_KERNELS_PER_LAYER
        parts.append(_launches(kind, p.layers * per_layer - 1))
        notes.append(f"napkin form: {p.layers} layers x {per_layer} kernel launches per step (the work in one)")
        if p.tp > 1:
            parts.append(_all_reduces(kind, p.layers, tokens, p.d_model, p))
    return combine(kind, parts, tuple(notes))


#: kernels per layer the napkin form charges a launch floor for when it knows the layers (a gated layer's count)
DEFAULT_KERNELS_PER_LAYER = 12


# ---------------------------------------------------------------------------------------------------
# Config form: helpers that return one component's Cost with the LLM's byte terms
# (weights, other_weights, kv_cache, activations, attention_scores).


def _retag(part: Cost, name: str | None, terms: dict[str, str]) -> Cost:
    """``part`` with its kernel renamed (single-kernel parts) and its byte terms mapped onto LLM terms."""
    kernels = part.kernels
    if name is not None:
        kernels = tuple(dataclasses.replace(k, name=name) for k in kernels)
    mapped: dict[str, int] = {}
    for key, value in part.byte_terms.items():
        mapped[terms[key]] = mapped.get(terms[key], 0) + value
    return Cost(part.kind, kernels, part.notes, {k: v for k, v in mapped.items() if v})


def _linear(name: str, m: int, n: int, k: int, p: LlmParams, cfg: ModelConfig) -> Cost:
    # NB: y[m,n] = x[m,k] @ W[k,n]: the gemm formula at act_dtype, with the weight read at weight_dtype
    # (int8/int4 weight-only quantization: dequantised on the fly, math at act_dtype on the tensor roof;
    # quantization scales not counted). A bias adds one FLOP per output and n elements read (act_dtype).
    base = gemm(GemmParams(m=m, n=n, k=k, dtype=p.act_dtype))
    flops = base.flops
    w = nbytes(k * n, p.weight_dtype)
    acts = base.byte_terms["A"] + base.byte_terms["C"]
    bias = nbytes(n, p.act_dtype) if cfg.bias else 0
    if cfg.bias:
        flops += m * n
    kernel = dataclasses.replace(base.kernels[0], name=name, flops=flops, bytes=acts + w + bias)
    terms = {"weights": w, "activations": acts}
    if bias:
        terms["other_weights"] = bias
    return Cost(base.kind, (kernel,), base.notes, terms)


def _norm(name: str, rows: int, p: LlmParams, cfg: ModelConfig) -> Cost:
    part = norm(NormParams(op=cfg.norm, rows=rows, cols=cfg.hidden, dtype=p.act_dtype, affine=True))
    return _retag(part, name, {"input": "activations", "output": "activations", "weights": "other_weights"})


def _elementwise(name: str, op: str, numel: int, p: LlmParams) -> Cost:
    part = elementwise(ElementwiseParams(op=op, numel=numel, dtype=p.act_dtype))
    return _retag(part, name, {"inputs": "activations", "outputs": "activations"})


def _attention(p: LlmParams, cfg: ModelConfig) -> Cost:
    seq_q = p.new_tokens
    part = attention(
        AttentionParams(
            batch=p.batch,
            heads=cfg.heads // p.tp,
            kv_heads=cfg.n_kv_heads // p.tp,
            seq_q=seq_q,
            seq_kv=p.context + seq_q,
            head_dim=cfg.dim_head,
            dtype=p.act_dtype,
            kv_dtype=p.kv_dtype,
            causal=seq_q > 1,
            impl=p.attention,
        )
    )
    terms = {
        "q": "activations",
        "o": "activations",
        "k": "kv_cache",
        "v": "kv_cache",
        "scores": "attention_scores",
        "probs": "attention_scores",
    }
    return _retag(part, None, terms)


def _kv_write(tokens: int, p: LlmParams, cfg: ModelConfig) -> Cost:
    # NB: the new tokens' K and V (written by the QKV GEMM at act_dtype) are copied into the cache at
    # kv_dtype (read once, written once; a quantizing copy's few FLOPs are not counted). Rotary position
    # embedding is assumed fused into this copy / the attention kernel: no kernel, no bytes counted.
    numel = 2 * tokens * (cfg.n_kv_heads // p.tp) * cfg.dim_head
    read = nbytes(numel, p.act_dtype)
    write = nbytes(numel, p.kv_dtype)
    kernel = Kernel("kv_cache_write", 0, read + write, p.act_dtype, "vector")
    notes = ("new K/V copied into the KV cache at kv_dtype; rotary embedding assumed fused (not counted)",)
    return Cost("kv_cache_write", (kernel,), notes, {"activations": read, "kv_cache": write})


def _embedding(tokens: int, p: LlmParams, cfg: ModelConfig) -> Cost:
    # NB: a gather counts the rows touched, not the table: one hidden-wide row per token (repeated token
    # ids counted each time), read at act_dtype (embedding tables are kept unquantized), written once.
    # Learned positions (GPT-2): one position row per token read too, and added (1 FLOP per element).
    numel = tokens * cfg.hidden
    rows = nbytes(numel, p.act_dtype) * (2 if cfg.learned_positions else 1)
    out = nbytes(numel, p.act_dtype)
    flops = numel if cfg.learned_positions else 0
    kernel = Kernel("embedding", flops, rows + out, p.act_dtype, "vector")
    notes = ("embedding gather: one row per token read (rows touched, not the table)",)
    return Cost("embedding", (kernel,), notes, {"other_weights": rows, "activations": out})


def _layer(p: LlmParams, cfg: ModelConfig) -> Cost:
    # NB: tensor parallelism (Megatron): QKV, gate/up (up) and the LM head split by columns (N/tp), the output and
    # down projections by rows (K/tp), attention by heads (heads/tp, kv_heads/tp); norms, residual adds and the
    # embedding gather run in full on every GPU. tp=1: the whole model.
    tokens = p.batch * p.new_tokens
    hd, kv, tp = cfg.dim_head, cfg.n_kv_heads, p.tp
    ffn = _split(cfg.ffn, tp)
    parts = [
        _norm("attn_norm", tokens, p, cfg),
        _linear("qkv_proj", tokens, (cfg.heads + 2 * kv) // tp * hd, cfg.hidden, p, cfg),
        _kv_write(tokens, p, cfg),
        _attention(p, cfg),
        _linear("o_proj", tokens, cfg.hidden, cfg.heads // tp * hd, p, cfg),
        _elementwise("residual_add", "add", tokens * cfg.hidden, p),
        _norm("ffn_norm", tokens, p, cfg),
    ]
    if cfg.experts:
        return combine("layer", [*parts, *_moe_ffn(tokens, p, cfg)])
    if cfg.ffn_type == "gated":
        # NB: SwiGLU: gate and up as one GEMM (N = 2 ffn), silu on the gate half (a view), times up.
        parts += [
            _linear("gate_up_proj", tokens, 2 * ffn, cfg.hidden, p, cfg),
            _elementwise("silu", "silu", tokens * ffn, p),
            _elementwise("mul", "mul", tokens * ffn, p),
        ]
    else:
        # NB: plain MLP: up, GELU (erf form; GPT-2's tanh form is 9 FLOPs per element, not 5), down.
        parts += [
            _linear("up_proj", tokens, ffn, cfg.hidden, p, cfg),
            _elementwise("gelu", "gelu", tokens * ffn, p),
        ]
    parts += [
        _linear("down_proj", tokens, cfg.hidden, ffn, p, cfg),
        _elementwise("residual_add", "add", tokens * cfg.hidden, p),
    ]
    return combine("layer", parts)


def layer_kernel_count(p: LlmParams, cfg: ModelConfig) -> int:
    """Kernels one layer of the config form counts (12 gated, 11 mlp; naive attention 2 more)."""
    return _layer(p, cfg).kernel_count


def experts_touched(tokens: int, experts: int, per_token: int) -> float:
    """Expected number of distinct experts that ``tokens`` tokens, each routed to ``per_token`` of ``experts``,
    reach: E (1 - (1 - k/E)^tokens)."""
    return experts * (1 - (1 - per_token / experts) ** tokens)


def _moe_ffn(tokens: int, p: LlmParams, cfg: ModelConfig) -> list[Cost]:
    # NB: mixture of experts (Mixtral-style): a router GEMM (hidden -> experts), then each token's FFN in each of
    # its top-k experts (FLOPs of tokens*k token-FFNs). Weights: each expert reached is read once per step; with
    # uniform routing tokens reach E(1 - (1 - k/E)^tokens) distinct experts in expectation (rounded up): decode
    # at batch 1 reads k experts, a large prefill all of them. Routing softmax/top-k, the scatter/gather of tokens
    # to experts and the weighted sum of the k outputs are not counted; shared experts are not modelled.
    rows = tokens * cfg.experts_per_token
    touched = math.ceil(experts_touched(tokens, cfg.experts, cfg.experts_per_token) - 1e-9)
    gated = cfg.ffn_type == "gated"
    up = _linear("router", tokens, cfg.experts, cfg.hidden, p, cfg)
    parts = [up]
    if gated:
        parts += [
            _experts_linear("experts_gate_up", rows, 2 * cfg.ffn, cfg.hidden, touched, p, cfg),
            _elementwise("silu", "silu", rows * cfg.ffn, p),
            _elementwise("mul", "mul", rows * cfg.ffn, p),
        ]
    else:
        parts += [
            _experts_linear("experts_up", rows, cfg.ffn, cfg.hidden, touched, p, cfg),
            _elementwise("gelu", "gelu", rows * cfg.ffn, p),
        ]
    return [
        *parts,
        _experts_linear("experts_down", rows, cfg.hidden, cfg.ffn, touched, p, cfg),
        _elementwise("residual_add", "add", tokens * cfg.hidden, p),
    ]


def _experts_linear(name: str, rows: int, n: int, k: int, touched: int, p: LlmParams, cfg: ModelConfig) -> Cost:
    """``rows`` routed token rows through ``touched`` experts' [k, n] weights: one expert's weight read each."""
    part = _linear(name, rows, n, k, p, cfg)
    weights = nbytes(k * n, p.weight_dtype) * touched
    kernel = part.kernels[0]
    kernel = dataclasses.replace(kernel, bytes=kernel.bytes - part.byte_terms["weights"] + weights)
    return Cost(part.kind, (kernel,), part.notes, {**part.byte_terms, "weights": weights})


def _config_step(kind: str, p: LlmParams, cfg: ModelConfig) -> Cost:
    tokens = p.batch * p.new_tokens
    parts = [
        _embedding(tokens, p, cfg),
        scale(_layer(p, cfg), cfg.layers),
        _norm("final_norm", tokens, p, cfg),
        # NB: LM head over every token processed: decode batch rows; prefill all batch*seq rows (as a
        # plain forward does; serving engines that keep only each prompt's last logits do 1/seq of it).
        # Tied embeddings: the same matrix, still read in full once. Sampling is not counted.
        _linear("lm_head", tokens, _split(cfg.vocab, p.tp), cfg.hidden, p, cfg),
    ]
    counted = layer_kernel_count(p, cfg)
    if p.kernels_per_layer is not None:
        parts.append(_launches(kind, (p.kernels_per_layer - counted) * cfg.layers))
    if p.tp > 1:
        parts.append(_all_reduces(kind, cfg.layers, tokens, cfg.hidden, p))
    notes = [
        f"{cfg.name}: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads ({cfg.n_kv_heads} KV), "
        f"ffn {cfg.ffn} {cfg.ffn_type}, vocab {cfg.vocab} (source: {cfg.source})",
        *(
            [
                f"mixture of experts: {cfg.experts} experts, top-{cfg.experts_per_token}; "
                f"{math.ceil(experts_touched(tokens, cfg.experts, cfg.experts_per_token) - 1e-9)} read per layer "
                "(expected distinct experts under uniform routing)"
            ]
            if cfg.experts
            else []
        ),
        f"weights at {p.weight_dtype}, activations at {p.act_dtype}, KV cache at {p.kv_dtype}",
        "each weight matrix read once per step, whatever the batch (it stays resident across tokens)",
        "LM head computed for every token processed (prefill: all batch*seq rows)",
        "norm weights, biases and embedding rows kept at act_dtype (other_weights)",
    ]
    if p.tp > 1:
        notes.append(
            f"tp={p.tp}: matrices and heads split {p.tp} ways (LM head by vocab, logits gather not counted); "
            "norms, residual adds and the embedding gather in full on each GPU; figures per GPU"
        )
    if p.kernels_per_layer is not None and p.kernels_per_layer > counted:
        notes.append(
            f"{p.kernels_per_layer} launches per layer: {counted} counted kernels plus "
            f"{p.kernels_per_layer - counted} launches without counted work"
        )
    if p.weight_dtype != p.act_dtype:
        notes.append(f"weight-only {p.weight_dtype}: dequantised on the fly, GEMM math at {p.act_dtype}")
    if p.context + p.new_tokens > cfg.max_context:
        notes.append(
            f"context + new tokens = {p.context + p.new_tokens} exceeds {cfg.name}'s max_context {cfg.max_context}"
        )
    return combine(kind, parts, tuple(notes))


def _step(kind: str, p: LlmParams) -> Cost:
    cfg = p.config
    return _napkin(kind, p) if cfg is None else _config_step(kind, p, cfg)


@register("decode", DecodeParams, "one LLM decode step: one new token per sequence (napkin or model config)")
def decode(p: DecodeParams) -> Cost:
    return _step("decode", p)


@register("prefill", PrefillParams, "one LLM prefill step over seq prompt tokens per sequence")
def prefill(p: PrefillParams) -> Cost:
    return _step("prefill", p)


# ---------------------------------------------------------------------------------------------------
# Memory per GPU: what a batch must fit (weights, KV cache per request, activations per request)


def weight_memory(p: LlmParams) -> int:
    """Bytes of weights one GPU stores. Napkin: params x b_param / tp. Config: the weight matrices (and the LM head
    unless tied) at weight_dtype and the embedding table at act_dtype, split tp ways; norm weights, biases and
    learned positions at act_dtype on every GPU."""
    # NB: the table is stored whole (a gather reads only the rows it touches, but the table lives in memory).
    cfg = p.config
    if cfg is None:
        assert p.params is not None
        return _split(nbytes(p.params, p.weight_dtype), p.tp)
    hd, kv = cfg.dim_head, cfg.n_kv_heads
    per_layer = cfg.hidden * (cfg.heads + 2 * kv) * hd + cfg.heads * hd * cfg.hidden
    per_layer += (3 if cfg.ffn_type == "gated" else 2) * cfg.hidden * cfg.ffn
    matrices = cfg.layers * per_layer + (0 if cfg.tied_embeddings else cfg.vocab * cfg.hidden)
    split = _split(nbytes(matrices, p.weight_dtype), p.tp) + _split(nbytes(cfg.vocab * cfg.hidden, p.act_dtype), p.tp)
    replicated = parameter_count(cfg) - matrices - cfg.vocab * cfg.hidden  # norms, biases, positions
    return split + nbytes(replicated, p.act_dtype)


def kv_cache_per_request(p: LlmParams) -> int:
    """KV-cache bytes one sequence holds on one GPU after the step: context + new tokens (0 when not modelled)."""
    if not p.models_kv_cache:
        return 0
    tokens = p.context + p.new_tokens
    cfg = p.config
    if cfg is None:
        return tokens * napkin_kv_per_token(p)
    return tokens * 2 * cfg.layers * nbytes(cfg.n_kv_heads // p.tp * cfg.dim_head, p.kv_dtype)


def activation_per_request(p: LlmParams) -> int:
    """Live activation bytes of one sequence's new tokens on one GPU. Napkin: d_model per token (what the napkin
    counts). Config: the residual stream plus the widest intermediate (gated: the gate/up output and the silu
    output; mlp: the up and gelu outputs; the QKV output; the logits), per token at act_dtype."""
    # NB: an eager step frees each intermediate after its consumer; the allocator's caching and fragmentation, the
    # attention kernel's workspace and the sampling buffers are not counted.
    cfg = p.config
    if cfg is None:
        assert p.d_model is not None
        return nbytes(p.new_tokens * p.d_model, p.act_dtype)
    ffn = _split(cfg.ffn, p.tp)
    widest = max(
        3 * ffn if cfg.ffn_type == "gated" else 2 * ffn,
        (cfg.heads + 2 * cfg.n_kv_heads) // p.tp * cfg.dim_head,
        _split(cfg.vocab, p.tp),
    )
    return nbytes(p.new_tokens * (cfg.hidden + widest), p.act_dtype)
