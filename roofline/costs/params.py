"""The parameters of every built-in workload, declared once: the key a cost model and a suite YAML name it by, its
command-line option, its kind (how the option's text is read), its default and its help.

From these: the options of `roofline analyze KIND` (:data:`ANALYZE`) and of `roofline bench KIND` (:data:`BENCH`,
the kinds bench runs; roofline.cli.common builds the options and reads their values), bench's items (the kinds it
runs and the values it takes for others: ``sdpa`` is fused attention) and the check that each declaration agrees
with its cost model's parameter class (tests/test_params.py), which validates a suite's entries. Pure data:
importing it imports nothing else (the CLI reads it at start-up).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

#: the default of an option that must be given
REQUIRED: Any = ...

#: how an option's text is read: size (whole sizes: 4096, 4Ki, 2^12, 64x64), word (a name), dtype (a dtype name;
#: bench's default depends on the device), number (a float), time (5us, 1.2ms, or a bare number in the param's
#: ``unit``), bytes (80G), flag (a switch), text (as given), path (a file)
Kind = Literal["size", "word", "dtype", "number", "time", "bytes", "flag", "text", "path"]
SWEEPS: tuple[str, ...] = ("size", "word", "dtype", "number", "time")  # kinds a comma list sweeps


@dataclass(frozen=True)
class Param:
    """One parameter of a workload and its command-line option."""

    key: str  # as the cost model and a suite YAML name it ('seq_q')
    flags: tuple[str, ...]  # the option's names ('--seq', '-s'); a switch pair as '--affine/--no-affine'
    help: str  # a dtype's help ends without a full stop: the command adds its default
    kind: Kind = "size"
    default: Any = None  # as typed on the command line ('1'); REQUIRED: must be given
    sweep_help: bool = True  # the help says that a comma list sweeps (kinds in SWEEPS)
    zero: bool = False  # a size that may be 0
    metavar: str | None = None
    unit: str = "s"  # a time's unit: what a bare number means and what the cost model receives ('us')
    suite: bool = True  # a suite entry names it too (False: the command line's only, as --config)
    bench: Mapping[str, Any] = field(default_factory=dict)  # what differs under `roofline bench`: help, default
    aliases: Mapping[str, str] = field(default_factory=dict)  # bench's other names for a value ('sdpa': 'fused')

    @property
    def option(self) -> str:
        """The name errors give it: its first flag ('--seq')."""
        return self.flags[0].split("/")[0]

    @property
    def sweeps(self) -> bool:
        return self.kind in SWEEPS

    def for_bench(self) -> Param:
        """This parameter as `roofline bench` takes it: a dtype's default is the device's (bf16 on a GPU, fp32 on the
        CPU: None here)."""
        changes = {"default": None} if self.kind == "dtype" else {}
        return dataclasses.replace(self, **{**changes, **self.bench}, bench={})


@dataclass(frozen=True)
class Workload:
    """A workload's parameters in the order its options are listed; ``nesting``: the order a sweep nests their
    lists (outermost first), when it is not that one."""

    kind: str  # the cost model
    params: tuple[Param, ...]
    nesting: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        keys = [p.key for p in self.params]
        if len(set(keys)) != len(keys) or (self.nesting and sorted(self.nesting) != sorted(keys)):
            raise ValueError(f"workload {self.kind}: nesting must name each parameter once")

    @property
    def order(self) -> tuple[str, ...]:
        return self.nesting or tuple(p.key for p in self.params)

    def for_bench(self) -> Workload:
        return dataclasses.replace(self, params=tuple(p.for_bench() for p in self.params))


def _dtype(help: str) -> Param:
    return Param("dtype", ("--dtype",), help, "dtype", "fp16")


def _batch(help: str) -> Param:
    return Param("batch", ("--batch", "-b"), help, default="1")


GEMM = Workload(
    "gemm",
    (
        Param("m", ("-m",), "Rows of A and C.", default=REQUIRED),
        Param("n", ("-n",), "Columns of B and C.", default=REQUIRED),
        Param("k", ("-k",), "Inner (reduction) dimension.", default=REQUIRED),
        dataclasses.replace(
            _batch("Batch of independent GEMMs (bmm)."), bench={"help": "Batch of independent GEMMs (torch.bmm)."}
        ),
        _dtype("Operand dtype: fp64 fp32 fp16 bf16 fp8 int8"),
        Param(
            "out_dtype",
            ("--out-dtype",),
            "Output dtype (default: --dtype).",
            "text",
            bench={"help": "fp8 only: output dtype (default bf16)."},
        ),
        Param("tf32", ("--tf32",), "fp32 matmul on TF32 tensor cores.", "flag", False),
    ),
)

ATTENTION = Workload(
    "attention",
    (
        Param("seq_q", ("--seq", "-s"), "Query length (and key length unless --seq-kv).", default=REQUIRED),
        Param("heads", ("--heads",), "Query heads.", default=REQUIRED),
        Param("head_dim", ("--head-dim",), "Head dimension.", default="128"),
        Param("kv_heads", ("--kv-heads",), "Key/value heads (GQA/MQA; default --heads)."),
        Param("seq_kv", ("--seq-kv",), "Key/value length (default --seq)."),
        _batch("Batch size."),
        _dtype("Q/K/V dtype"),
        Param(
            "causal",
            ("--causal",),
            "Causal mask (about half the FLOPs).",
            "flag",
            False,
            bench={"help": "Causal mask."},
        ),
        Param(
            "impl",
            ("--impl",),
            "fused (FlashAttention/SDPA) or naive (materialises S x S).",
            "word",
            "fused",
            bench={
                "default": "sdpa",
                "help": "naive (baddbmm, softmax, bmm: materialises S x S) and/or sdpa = fused "
                "(scaled_dot_product_attention).",
            },
            aliases={"sdpa": "fused"},
        ),
    ),
    nesting=("seq_q", "seq_kv", "heads", "kv_heads", "head_dim", "batch", "dtype", "causal", "impl"),
)

ELEMENTWISE = Workload(
    "elementwise",
    (
        Param(
            "op",
            ("--op",),
            "relu, gelu, gelu_tanh, silu, add, mul, ... (see docs/cost-models.md).",
            "word",
            REQUIRED,
            bench={"help": "relu, gelu, gelu_tanh, silu, add, mul, copy, ... ."},
        ),
        Param(
            "numel",
            ("--numel", "-N"),
            "Elements, e.g. 16777216 or 4096x4096.",
            default=REQUIRED,
            bench={"help": "Elements, e.g. 16777216, 2^24 or 4096x4096."},
        ),
        _dtype("Element dtype"),
    ),
)

NORM = Workload(
    "norm",
    (
        Param("op", ("--op",), "layernorm, rmsnorm or softmax.", "word", "layernorm"),
        Param("rows", ("--rows",), "Rows (tokens).", default=REQUIRED),
        Param("cols", ("--cols",), "Normalised width (hidden size).", default=REQUIRED),
        _dtype("Element dtype"),
        Param("affine", ("--affine/--no-affine",), "Learned weight (and bias for layernorm).", "flag", True),
    ),
)

CONV2D = Workload(
    "conv2d",
    (
        _batch("Batch size."),
        Param("in_channels", ("--in-channels", "-c"), "Input channels.", default=REQUIRED),
        Param("out_channels", ("--out-channels",), "Output channels.", default=REQUIRED),
        Param("height", ("--height",), "Input height.", default=REQUIRED),
        Param("width", ("--width",), "Input width.", default=REQUIRED),
        Param("kernel_size", ("--kernel-size",), "Square kernel size.", default="3"),
        Param("stride", ("--stride",), "Stride.", default="1"),
        Param("padding", ("--padding",), "Zero padding.", default="0", zero=True),
        Param("groups", ("--groups",), "Groups (depthwise = channels).", default="1"),
        _dtype("Dtype"),
        Param("tf32", ("--tf32",), "fp32 conv on TF32 tensor cores.", "flag", False),
    ),
)

SHIPPED_MODELS = "gpt2, llama-2-7b, llama-3-8b, llama-3-70b, mistral-7b"


def _llm(kind: str, step: Param, batch: Param, step_first: bool) -> Workload:
    """decode and prefill: the model (a config, or the napkin form), the batch and the step's own size (listed
    ``step_first`` or after the batch; a sweep nests the step's inside the dtypes'), the serving setup."""
    napkin = "Napkin form: "
    params = (
        Param("model", ("--model",), f"Model config: a shipped name ({SHIPPED_MODELS}) or a YAML file.", "text"),
        Param(
            "config",
            ("--config",),
            "A Hugging Face model's config, instead of --model: a hub id (ORG/NAME: from the hub's local cache or "
            "the few roofline ships, never downloaded), a directory holding config.json, or a config.json "
            "(layers, hidden size, heads, KV heads, FFN width, vocab, tied embeddings, MoE experts and top-k).",
            "text",
            metavar="ID|DIR|CONFIG.json",
            suite=False,  # NB: the command line's way to give a config.json as the model
        ),
        Param("params", ("--params",), f"{napkin}parameter count, e.g. 8.75e9 (needs --d-model).", sweep_help=False),
        Param("d_model", ("--d-model",), "Hidden width for the napkin form.", sweep_help=False),
        *((step, batch) if step_first else (batch, step)),
        Param("act_dtype", ("--dtype",), "Activation dtype (GEMMs run in it).", "word", "fp16"),
        Param("weight_dtype", ("--weight-dtype",), "Weight dtype: int8/int4 = weight-only quantization.", "word"),
        Param("kv_dtype", ("--kv-dtype",), "KV-cache dtype (default --dtype).", "word"),
        Param("attention", ("--attention",), "fused or naive.", "word", "fused"),
        Param("layers", ("--layers",), f"{napkin}layers (KV cache, --tp all-reduces, launches)."),
        Param("heads", ("--heads",), f"{napkin}query heads (head_dim = d_model / heads)."),
        Param("kv_heads", ("--kv-heads",), f"{napkin}KV heads (GQA; default --heads)."),
        Param(
            "tp", ("--tp",), "Tensor parallelism: weights and heads split N ways, 2 all-reduces per layer.", default="1"
        ),
        Param(
            "kernels_per_layer",
            ("--kernels-per-layer",),
            "Kernel launches per layer (default: as counted, 12 for a gated layer).",
        ),
        Param(
            "launch_floor_us",
            ("--launch-floor",),
            "Launch floor per kernel: 5us, 1.2ms; bare: us (default: the device's).",
            "time",
            metavar="TIME",
            unit="us",
        ),
        Param(
            "memory",
            ("--memory",),
            "Memory budget per GPU, e.g. 80G or 75.6e9 bytes (default: the device's capacity).",
            "bytes",
        ),
    )
    head = ("model", "config", "params", "d_model", "batch", "act_dtype", "weight_dtype", "kv_dtype", "attention")
    tail = ("layers", "heads", "kv_heads", "tp", "kernels_per_layer", "launch_floor_us", "memory")
    return Workload(kind, params, (*head, step.key, *tail))


DECODE = _llm(
    "decode",
    # NB: 0 is refused; leave it out for an empty cache
    Param("context", ("--context",), "Tokens already in the KV cache of each sequence, at least 1 (default: none)."),
    _batch("Concurrent sequences."),
    step_first=False,
)
PREFILL = _llm(
    "prefill",
    Param("seq", ("--seq", "-s"), "Prompt length in tokens.", default=REQUIRED),
    _batch("Prompts processed together."),
    step_first=True,
)

#: `roofline bench decode`: the weight GEMMs of one decoder layer at M = batch, of a model config or one GEMM
DECODE_GEMMS = Workload(
    "decode",
    (
        Param(
            "model",
            ("--model",),
            "Model config whose decoder-layer weight GEMMs run (qkv, o, gate/up, down): a shipped name "
            f"({SHIPPED_MODELS}) or a YAML file.",
            "text",
        ),
        Param("n", ("-n",), "Without --model: one weight GEMM's output width.", suite=False),
        Param("k", ("-k",), "Without --model: one weight GEMM's input width.", suite=False),
        _batch("Concurrent sequences = the GEMMs' M."),
        dataclasses.replace(_dtype("Activation and weight dtype"), key="act_dtype"),
    ),
    nesting=("model", "batch", "n", "k", "act_dtype"),
)

#: `roofline analyze KIND`
ANALYZE: dict[str, Workload] = {w.kind: w for w in (GEMM, ATTENTION, DECODE, PREFILL, ELEMENTWISE, NORM, CONV2D)}
#: `roofline bench KIND`: the kinds bench runs (decode as the weight GEMMs of one decoder layer)
BENCH: dict[str, Workload] = {w.kind: w.for_bench() for w in (GEMM, ATTENTION, ELEMENTWISE, NORM, CONV2D, DECODE_GEMMS)}
BENCH_KINDS: tuple[str, ...] = tuple(BENCH)


def bench_value(kind: str, key: str, value: Any) -> Any:
    """A value as bench runs it: its alias resolved (attention's impl 'sdpa' is 'fused')."""
    if kind not in BENCH or not isinstance(value, str):
        return value
    aliases = {p.key: p.aliases for p in BENCH[kind].params}.get(key, {})
    return aliases.get(value.strip().lower(), value)


__all__ = [
    "ANALYZE",
    "BENCH",
    "BENCH_KINDS",
    "REQUIRED",
    "Param",
    "Workload",
    "bench_value",
]
