"""`roofline diagnose --hf REF`: a Hugging Face causal LM built from its config with random weights, and the inputs
of one step of it, ready for the diagnosis a model file gets (roofline.diagnose.pipeline.diagnose_hf).

The config is found on this machine (roofline.costs.hfhub: a directory, a config.json, the hub's local cache or the
configs roofline ships), never downloaded; no weights are read. transformers (the ``hf`` extra) builds the model
(``AutoModelForCausalLM.from_config``, its own random initialisation, no model code from the hub:
trust_remote_code stays off) directly on the device, in the dtype asked for (default: the config's ``torch_dtype``,
fp32 when it names none). Token ids are random in [0, vocab), batch B x sequence S. One step is:

  prefill   the forward over the S prompt tokens (no KV cache kept; logits for every position, as
            `roofline analyze prefill` counts them);
  decode    one new token per sequence after S prompt tokens already in the KV cache: the cache is built by one
            prefill before anything is counted or timed; each step appends its token to the cache transformers
            makes (DynamicCache: what generate() uses by default) and the cache is cut back to S tokens before the
            next step, so every step the diagnosis times is the same one;
  training  forward and backward of the causal LM loss (labels = the input ids), dropout on.

The model is wrapped in one module (:func:`step_module`) whose children are the LM's own, so ops keep the module
paths transformers gives them (``model.layers.0.self_attn.q_proj``). transformers 4.40 to 5.x: what differs between
versions (the ``cache=`` / ``past_key_values=`` argument, the dtype attribute of a config, a legacy tuple cache) is
found by looking at the installed one, never by its version string. torch and transformers are imported lazily.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.costs.hfhub import HfConfigRef, resolve_config
from roofline.errors import DeviceError, ResourceError, UsageError, WorkloadError

STEPS = ("prefill", "decode", "training")
#: a config's torch_dtype (or v5's dtype) -> our dtype name; anything else is built in fp32
CONFIG_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
SEED = 0  # the token ids are the same every run


@dataclass(frozen=True)
class HfModel:
    """What `diagnose --hf` runs: the model reference (hub id, directory or config.json), the batch, the sequence
    (prefill and training: tokens per sequence; decode: tokens already in the KV cache) and the step."""

    ref: str
    batch: int = 1
    seq: int = 128
    step: str = "prefill"

    def check(self) -> None:
        """UsageError (one line) for a step or a size no run can take."""
        if self.step not in STEPS:
            raise UsageError(f"--mode {self.step!r} with --hf: use {', '.join(STEPS)}")
        for name, value in (("--batch", self.batch), ("--seq", self.seq)):
            if value < 1:
                raise UsageError(f"{name} {value}: at least 1")

    @property
    def mode(self) -> str:
        """The pipeline's mode: training for the training step, else inference."""
        return "training" if self.step == "training" else "inference"


@dataclass(frozen=True)
class HfConfig:
    """The config found for a reference, read as JSON (no transformers needed)."""

    ref: HfConfigRef
    data: dict[str, Any]

    @property
    def dtype(self) -> str:
        """The dtype the config names (``torch_dtype``, or 5.x's ``dtype``), as ours; fp32 when it names none of
        fp32, bf16 and fp16."""
        return CONFIG_DTYPES.get(str(self.data.get("torch_dtype") or self.data.get("dtype")), "fp32")


def read_config(ref: str) -> HfConfig:
    """The config ``ref`` names (roofline.costs.hfhub.resolve_config), parsed: WorkloadError for a file that is
    not a JSON object."""
    from roofline.yamlio import MAX_YAML_BYTES, parse_json, read_text

    found = resolve_config(ref)
    text = read_text(found.path, WorkloadError, "Hugging Face config.json", MAX_YAML_BYTES)
    data = parse_json(text, found.path, WorkloadError, "not valid JSON", "give the model's config.json")
    if not isinstance(data, dict):
        raise WorkloadError(f"{found.path}: a Hugging Face config is a JSON object, this is a {type(data).__name__}")
    return HfConfig(found, data)


def check_fits(config: HfConfig, spec: HfModel, dtype: str, available: int | None, where: str) -> None:
    """ResourceError (one line) when the weights alone (and their gradients for training) need more than
    ``available`` bytes on ``where``, and UsageError when the sequence runs past a learned position table; read
    from the config through the LLM cost model (roofline.costs.hfconfig); a config it cannot read is not checked."""
    from roofline.costs.hfconfig import hf_model_config
    from roofline.costs.llm import ModelConfig, parameter_count

    try:
        model = ModelConfig.model_validate(hf_model_config(config.data, config.ref.path))
    except (WorkloadError, ValueError):
        return
    name = config.ref.name
    tokens = spec.seq + (1 if spec.step == "decode" else 0)
    if model.learned_positions and tokens > model.max_context:
        most = model.max_context - (1 if spec.step == "decode" else 0)
        raise UsageError(
            f"--seq {spec.seq}: {name} has a learned table of {model.max_context} positions: at most {most}"
            + (" with --mode decode (the new token takes one)" if spec.step == "decode" else "")
        )
    params = parameter_count(model)
    need = params * BYTES[dtype] * (2 if spec.step == "training" else 1)
    if available is not None and need > available:
        what = "weights and gradients" if spec.step == "training" else "weights"
        raise ResourceError(
            f"{name}: {params:,} parameters, {need / 1e9:.3g} GB of {what} at {dtype}, more than the "
            f"{available / 1e9:.3g} GB free on {where}: a GPU (--device cuda), --dtype bf16, or a smaller config (a "
            "directory holding a config.json with fewer layers)"
        )


def free_memory(torch: Any, device: str) -> tuple[int | None, str]:
    """(bytes free for the model on ``device``, where): the GPU's free memory, the host's on the CPU (None: not
    known)."""
    if device.startswith("cuda"):
        try:
            return int(torch.cuda.mem_get_info(torch.device(device))[0]), device
        except Exception:
            return None, device
    from roofline.resources import host_memory

    memory = host_memory()
    return (None if memory is None else memory.available), f"this machine ({memory.source if memory else 'unknown'})"


# ------------------------------------------------------------------------------------------------ transformers


def _transformers() -> Any:
    """transformers, imported here (a missing one: roofline.extras names the hf extra)."""
    import transformers

    return transformers


@contextlib.contextmanager
def _quiet(transformers: Any) -> Iterator[None]:
    """transformers' own logging at errors only while it builds (its deprecation notes are not ours to show)."""
    logging = getattr(transformers, "logging", None)
    if logging is None or not hasattr(logging, "get_verbosity"):
        yield
        return
    saved = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(saved)


def _cannot_build(config: HfConfig, transformers: Any, exc: BaseException) -> WorkloadError:
    model_type = config.data.get("model_type") or (config.data.get("text_config") or {}).get("model_type")
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].split(". ")[0].rstrip(".")[:200]
    return WorkloadError(
        f"{config.ref.name}: transformers {getattr(transformers, '__version__', '?')} cannot build model_type "
        f"{model_type!r} as a causal LM ({first}): give a decoder-only model transformers ships (a newer transformers "
        "may know it; roofline never runs a model's own code from the hub)"
    )


def build_config(config: HfConfig, transformers: Any, dtype: str) -> Any:
    """The transformers config of ``config`` (AutoConfig.for_model on the JSON: no file or hub look-up), its dtype
    set to ``dtype`` (the attribute the installed transformers reads: ``dtype`` in 5.x, ``torch_dtype`` before).
    WorkloadError when transformers does not know the model type."""
    import torch

    data = dict(config.data)
    model_type = data.pop("model_type", None)
    if not model_type:
        raise WorkloadError(f"{config.ref.path}: no model_type: transformers cannot tell which architecture it is")
    data.pop("auto_map", None)  # NB: remote code is never run: the architecture must be one transformers ships
    try:
        with _quiet(transformers):
            built = transformers.AutoConfig.for_model(model_type, **data)
    except (ValueError, KeyError, TypeError) as exc:
        raise _cannot_build(config, transformers, exc) from None
    wanted = getattr(torch, TORCH_DTYPES[dtype])
    attribute = "dtype" if isinstance(getattr(type(built), "torch_dtype", None), property) else "torch_dtype"
    setattr(built, attribute, wanted)
    return built


@contextlib.contextmanager
def _building(torch: Any, device: str, dtype: Any) -> Iterator[None]:
    """Parameters made on ``device`` in ``dtype`` (torch's default device and dtype, restored afterwards)."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            yield
    finally:
        torch.set_default_dtype(saved)


def build_model(config: HfConfig, transformers: Any, built: Any, device: str, dtype: str) -> Any:
    """``AutoModelForCausalLM.from_config(built)`` on ``device`` in ``dtype``: random weights. WorkloadError when
    transformers has no causal LM for it, DeviceError when it does not fit."""
    import torch

    from roofline.errors import is_out_of_memory

    try:
        with _quiet(transformers), _building(torch, device, getattr(torch, TORCH_DTYPES[dtype])):
            return transformers.AutoModelForCausalLM.from_config(built)
    except (ValueError, KeyError) as exc:
        raise _cannot_build(config, transformers, exc) from None
    except Exception as exc:
        if is_out_of_memory(exc):
            raise DeviceError(
                f"out of memory building {config.ref.name} on {device}: --dtype bf16 (half of fp32's bytes) or a "
                "smaller config (fewer layers)"
            ) from None
        raise


# ------------------------------------------------------------------------------------------------ the step


def cache_argument(lm: Any) -> str:
    """The keyword the LM's forward takes its KV cache by: ``cache`` (transformers 5.x) or ``past_key_values``."""
    parameters = inspect.signature(lm.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def output_cache(out: Any) -> Any:
    """The KV cache a forward returned (``cache`` in 5.x, ``past_key_values`` before; a Cache or a legacy tuple)."""
    for key in ("cache", "past_key_values"):
        value = out.get(key) if hasattr(out, "get") else None
        if value is not None:
            return value
    raise WorkloadError("the model returned no KV cache with use_cache=True: --mode decode needs one")


def cache_bytes(cache: Any) -> int:
    """The bytes of the tensors a KV cache holds, each storage once: a legacy tuple of (key, value) per layer, a
    4.x DynamicCache (``key_cache`` / ``value_cache``) or a 5.x one (``layers`` of ``keys`` / ``values``). NB: read
    from the tensors, not the config: what this transformers allocated for the prompt."""
    import torch

    seen: set[int] = set()

    def walk(value: Any, depth: int) -> int:
        if isinstance(value, torch.Tensor):
            key = value.untyped_storage().data_ptr()
            if key in seen:
                return 0
            seen.add(key)
            return value.untyped_storage().nbytes()
        if depth > 4:
            return 0
        if isinstance(value, (tuple, list)):
            return sum(walk(item, depth + 1) for item in value)
        parts = [getattr(value, name) for name in ("layers", "key_cache", "value_cache", "keys", "values")
                 if isinstance(getattr(value, name, None), (torch.Tensor, tuple, list))]  # fmt: skip
        return sum(walk(part, depth + 1) for part in parts)

    return walk(cache, 0)


def as_cache(transformers: Any, lm: Any, cache: Any) -> Any:
    """The prompt's cache as a DynamicCache where transformers 4.x returned a legacy tuple and the model takes a
    Cache object (``_supports_cache_class``) and DynamicCache can be cut back (``crop``): what later 4.x and 5.x
    give, without 4.x's deprecation path for tuples; else as returned."""
    dynamic = getattr(transformers, "DynamicCache", None)
    if not isinstance(cache, tuple) or not getattr(lm, "_supports_cache_class", False):
        return cache
    if dynamic is None or not hasattr(dynamic, "crop") or not hasattr(dynamic, "from_legacy_cache"):
        return cache
    return dynamic.from_legacy_cache(cache)


def trim(cache: Any, tokens: int) -> None:
    """``cache`` cut back to its first ``tokens`` tokens (Cache.crop of a negative count: the tokens to remove,
    as 4.x and 5.x both read it); a legacy tuple is never grown by the model (it makes a new one): left alone."""
    if isinstance(cache, tuple):
        return
    extra = cache.get_seq_length() - tokens
    if extra > 0:
        cache.crop(-extra)


_STEP_CLASS: Any = None


def step_module(lm: Any, step: str, *, cache: Any = None, prompt: int = 0) -> Any:
    """The module the diagnosis calls as ``module(input_ids)``: one ``step`` of ``lm`` (the module docstring),
    returning a tensor (prefill and decode: the logits; training: the loss). It holds the LM's children as its
    own (module paths as transformers names them) and the LM unregistered."""
    global _STEP_CLASS
    if _STEP_CLASS is None:
        _STEP_CLASS = _define_step_class()
    return _STEP_CLASS(lm, step, cache=cache, prompt=prompt)


def _define_step_class() -> Any:
    import torch

    class HfStep(torch.nn.Module):
        """One step of a Hugging Face causal LM (roofline.diagnose.hf.step_module)."""

        def __init__(self, lm: Any, step: str, *, cache: Any = None, prompt: int = 0) -> None:
            super().__init__()
            for name, child in lm.named_children():
                self.add_module(name, child)
            for name, parameter in lm.named_parameters(recurse=False):
                self.register_parameter(name, parameter)
            for name, buffer in lm.named_buffers(recurse=False):
                self.register_buffer(name, buffer)
            self.__dict__["lm"] = lm  # NB: not a submodule: its children are ours, so paths read as in transformers
            self.step, self.cache, self.prompt = step, cache, prompt
            self.cache_argument = cache_argument(lm)

        def train(self, mode: bool = True) -> HfStep:
            super().train(mode)
            self.lm.training = mode
            return self

        def forward(self, input_ids: Any) -> Any:
            if self.step == "training":
                return self.lm(input_ids=input_ids, labels=input_ids, use_cache=False).loss
            if self.step == "prefill":
                return self.lm(input_ids=input_ids, use_cache=False).logits
            trim(self.cache, self.prompt)
            out = self.lm(input_ids=input_ids, use_cache=True, **{self.cache_argument: self.cache})
            return out.logits

    return HfStep


def token_ids(torch: Any, vocab: int, batch: int, seq: int, device: str) -> Any:
    """Random token ids in [0, vocab), ``batch`` x ``seq``, the same every run."""
    generator = torch.Generator().manual_seed(SEED)
    return torch.randint(0, vocab, (batch, seq), generator=generator).to(device)


def vocab_size(built: Any, lm: Any) -> int:
    """The vocabulary the token ids are drawn from: the input embedding's rows (else the config's)."""
    embedding = lm.get_input_embeddings() if hasattr(lm, "get_input_embeddings") else None
    rows = getattr(embedding, "num_embeddings", None)
    text = getattr(built, "get_text_config", None)
    return int(rows or getattr(text() if callable(text) else built, "vocab_size", 0) or 1)


def load_hf(spec: HfModel, config: HfConfig, *, device: str, dtype: str, facts: dict[str, Any] | None = None) -> Any:
    """The LoadedModel of ``spec``: ``config``'s model built on ``device`` (a resolved torch device) in ``dtype``
    (fp32|bf16|fp16), its inputs (token ids), and for decode the KV cache of the prompt (one prefill, here).
    ``facts``: filled with what was built (the report's ``hf`` block)."""
    import torch

    from roofline.diagnose.loader import prepare

    spec.check()
    check_fits(config, spec, dtype, *free_memory(torch, device))
    transformers = _transformers()
    built = build_config(config, transformers, dtype)
    lm = build_model(config, transformers, built, device, dtype)
    vocab = vocab_size(built, lm)
    ids = token_ids(torch, vocab, spec.batch, spec.seq, device)
    cache = None
    if spec.step == "decode":
        lm.eval()
        with torch.no_grad():
            cache = as_cache(transformers, lm, output_cache(lm(input_ids=ids, use_cache=True)))
        ids = token_ids(torch, vocab, spec.batch, 1, device)
    module = step_module(lm, spec.step, cache=cache, prompt=spec.seq)
    if facts is not None:
        facts.update(
            {
                "id": config.ref.name,
                "config": str(config.ref.path),
                "found_in": config.ref.origin,
                "step": spec.step,
                "batch": spec.batch,
                "seq": spec.seq,
                "model_type": getattr(built, "model_type", ""),
                "class": type(lm).__name__,
                "attention": str(getattr(built, "_attn_implementation", "") or ""),
                "cache": "" if cache is None else type(cache).__name__,
                "kv_cache_bytes": None if cache is None else cache_bytes(cache),
                "transformers": str(getattr(transformers, "__version__", "")),
                "weights": "random (from_config)",
            }
        )
    name = Path(config.ref.name)
    return prepare(module, (ids,), device=device, dtype=dtype, mode=spec.mode, convention="hf", path=name)


__all__ = [
    "STEPS",
    "HfConfig",
    "HfModel",
    "as_cache",
    "build_config",
    "build_model",
    "cache_argument",
    "cache_bytes",
    "check_fits",
    "free_memory",
    "load_hf",
    "output_cache",
    "read_config",
    "step_module",
    "token_ids",
    "trim",
]
