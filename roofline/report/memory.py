"""Parameters and memory of a diagnosed model (the report's ``memory`` block), and what the renderers show of it.

Stored once in a diagnose report (``report.memory``, :class:`MemoryFacts`); every renderer reads it through
:func:`memory_view`, which also reads the memory an analytic LLM decode/prefill report stores on its rows
(``serving.weight_memory_bytes``, ``serving.kv_cache_per_request_bytes``: roofline.costs.llm's numbers, never
computed again here).

Definitions (docs/diagnose.md, "Parameters and memory"):

- parameters: per module, the parameters it holds itself (``recurse=False``) and those of its subtree; the model's
  total counts a parameter shared by two modules once. Bytes: numel x the element size of the tensor's dtype.
- weight bytes: the parameters' bytes plus the buffers' (BatchNorm's running statistics...): the model's state.
- activation bytes, NB: from the counting pass's dataflow (roofline.report.records.OpRecord.input_producers),
  each tensor counted once (by its storage). Training: the tensors the forward pass produced that the backward
  pass reads (what autograd keeps for backward), the model's inputs, parameters and buffers excluded, and
  ``*_like`` ops' reads (the shape only) and outputs (the backward pass's seed of ones) not counted.
  Inference: the largest live set: a tensor the iteration produced is live from the op that writes it through the
  last op that reads it; the largest sum over the ops.
  The model's outputs (read by no op) and its inputs are not in it, nor the allocator's rounding or caching.
- KV cache: where the workload models one (analyze decode/prefill), and `diagnose --hf ... --mode decode`: the bytes of
  the prompt's cache tensors (roofline.diagnose.hf.cache_bytes); a diagnosed model file's is None.
- peak allocated: CUDA's ``torch.cuda.max_memory_allocated`` over the timing pass (warm-up, timed and profiled
  iterations), after ``reset_peak_memory_stats``: everything allocated through torch's caching allocator,
  weights and inputs included. The CPU: torch keeps no allocator statistics for CPU tensors: None, with a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import prod
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from roofline.dtypes import BITS, nbytes
from roofline.report.records import OpRecord
from roofline.units import format_bytes, format_count

#: modules the renderers list (by their subtree's parameters, largest first); the report keeps every one
TOP_MODULES = 10
TRAINING_BASIS = "saved for backward"
INFERENCE_BASIS = "largest live set"
CPU_PEAK_NOTE = "peak allocated: torch keeps allocator statistics for CUDA only (none on the CPU)"


class ModuleParams(BaseModel):
    """One module's parameters: its own (``parameters``, ``bytes``) and its subtree's (``total_*``)."""

    model_config = ConfigDict(extra="allow")

    module: str  # the module's path ('' = the model itself)
    type: str
    parameters: int
    bytes: int
    total_parameters: int
    total_bytes: int


class MemoryFacts(BaseModel):
    """The report's ``memory`` block (None where unknown, each with a note saying why)."""

    model_config = ConfigDict(extra="allow")

    parameters: int | None = None  # the model's, each shared parameter once
    parameter_bytes: int | None = None
    buffer_bytes: int | None = None
    weight_bytes: int | None = None  # parameters + buffers
    modules: list[ModuleParams] = []  # every module with parameters in its subtree, in the model's order
    activation_bytes: int | None = None
    activations: str = ""  # TRAINING_BASIS | INFERENCE_BASIS ('' when unknown)
    kv_cache_bytes: int | None = None
    peak_allocated_bytes: int | None = None
    peak_source: str = ""  # 'torch.cuda.max_memory_allocated' where measured
    notes: list[str] = []


def _tensor_bytes(shape: Sequence[int], dtype: str) -> int | None:
    return nbytes(prod(shape), dtype) if dtype in BITS else None


def _reads(records: Sequence[OpRecord]) -> list[tuple[OpRecord, Any, int, int]]:
    """(reader, storage key, producer index, bytes) of every tensor input an op of the iteration produced, those
    made from a shape alone (``*_like``: the backward pass's seed of ones) left out."""
    made = {r.index for r in records if r.op.endswith("_like")}
    reads = []
    for r in records:
        if r.op.endswith("_like"):  # NB: zeros_like/ones_like read the shape, not the data
            continue
        for i, producer in enumerate(r.input_producers):
            if producer is None or producer in made or (i < len(r.input_params) and r.input_params[i]):
                continue
            size = _tensor_bytes(r.input_shapes[i], r.input_dtypes[i] if i < len(r.input_dtypes) else "")
            if size is None:
                continue
            key = r.input_ids[i] if i < len(r.input_ids) and r.input_ids[i] is not None else (producer, i, r.index)
            reads.append((r, key, producer, size))
    return reads


def activation_bytes(records: Sequence[OpRecord], mode: str) -> tuple[int | None, str]:
    """(bytes, basis) of the activations (module docstring); (None, '') where the records carry no dataflow."""
    if not any(r.input_producers for r in records):
        return None, ""
    phase = {r.index: r.phase for r in records}
    reads = _reads(records)
    if mode == "training":
        saved: dict[Any, int] = {}
        for reader, key, producer, size in reads:
            if reader.phase == "backward" and phase.get(producer) == "forward":
                saved[key] = max(saved.get(key, 0), size)
        return sum(saved.values()), TRAINING_BASIS
    live: dict[Any, list[int]] = {}  # key -> [first, last, bytes]
    for reader, key, producer, size in reads:
        span = live.setdefault(key, [producer, reader.index, size])
        span[0], span[1], span[2] = min(span[0], producer), max(span[1], reader.index), max(span[2], size)
    deltas: dict[int, int] = {}
    for first, last, size in live.values():
        deltas[first] = deltas.get(first, 0) + size
        deltas[last + 1] = deltas.get(last + 1, 0) - size
    peak = running = 0
    for index in sorted(deltas):
        running += deltas[index]
        peak = max(peak, running)
    return peak, INFERENCE_BASIS


# ------------------------------------------------------------------------------------------------ the view


@dataclass(frozen=True)
class MemoryView:
    """What the renderers show: (name, value) lines, the top modules and the LLM rows' memory (analytic)."""

    items: tuple[tuple[str, str], ...]
    modules: tuple[ModuleParams, ...]  # the TOP_MODULES largest subtrees
    more_modules: int  # modules with parameters not listed
    notes: tuple[str, ...] = ()


MODULE_HEADERS = ("module", "type", "parameters", "own", "bytes")


def _params(value: int) -> str:
    """15 -> '15', 124439808 -> '124.4 M' (decimal prefixes)."""
    return format_count(value, "").strip()


def module_cells(m: ModuleParams) -> list[str]:
    return [m.module or "(model)", m.type, _params(m.total_parameters), _params(m.parameters),
            format_bytes(m.total_bytes)]  # fmt: skip


def _amount(value: int | None) -> str:
    return "-" if value is None else format_bytes(value)


def _facts_items(facts: MemoryFacts) -> list[tuple[str, str]]:
    items: list[tuple[str, str]] = []
    if facts.parameters is not None:
        items.append(("parameters", f"{_params(facts.parameters)} ({_amount(facts.parameter_bytes)})"))
        buffers = f" (buffers {_amount(facts.buffer_bytes)})" if facts.buffer_bytes else ""
        items.append(("weights", f"{_amount(facts.weight_bytes)}{buffers}"))
    basis = f" ({facts.activations})" if facts.activations else ""
    items.append(("activations", f"{_amount(facts.activation_bytes)}{basis}"))
    if facts.kv_cache_bytes is not None:
        items.append(("KV cache", _amount(facts.kv_cache_bytes)))
    source = f" ({facts.peak_source})" if facts.peak_source else ""
    peak = "not measured" if facts.peak_allocated_bytes is None else format_bytes(facts.peak_allocated_bytes)
    items.append(("peak allocated", f"{peak}{source}"))
    return items


def _serving_items(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Analytic decode/prefill rows: per row, the weights and the KV cache per GPU, as the cost model stored."""
    items = []
    for row in rows:
        serving = row.get("serving")
        if not isinstance(serving, Mapping) or not serving.get("weight_memory_bytes"):
            continue
        kv = serving.get("kv_cache_per_request_bytes") or 0
        batch = (row.get("params") or {}).get("batch") if isinstance(row.get("params"), Mapping) else None
        total = f", x batch {batch} = {format_bytes(kv * batch)}" if kv and isinstance(batch, int) else ""
        kv_text = f"KV cache {format_bytes(kv)} per request{total}" if kv else "KV cache not modelled"
        activations = serving.get("activation_per_request_bytes") or 0
        items.append(
            (
                f"memory per GPU: {row.get('label', '')}",
                f"weights {format_bytes(serving['weight_memory_bytes'])}; {kv_text}; activations "
                f"{format_bytes(activations)} per request",
            )
        )
    return items


def memory_view(report: Any, rows: int = TOP_MODULES) -> MemoryView | None:
    """The memory a report stores, as the renderers show it; None where it stores none (or a corrupt block)."""
    stored = (getattr(report, "model_extra", None) or {}).get("memory")
    if isinstance(stored, Mapping):
        try:
            facts = MemoryFacts.model_validate(stored)
        except ValidationError:
            return None
        ranked = sorted(facts.modules, key=lambda m: -m.total_parameters)
        return MemoryView(tuple(_facts_items(facts)), tuple(ranked[:rows]), max(len(ranked) - rows, 0),
                          tuple(facts.notes))  # fmt: skip
    served = _serving_items(getattr(report, "rows", ())[: max(rows, 1)] if report.source == "analytic" else ())
    return MemoryView(tuple(served), (), 0) if served else None


__all__ = [
    "CPU_PEAK_NOTE",
    "INFERENCE_BASIS",
    "MODULE_HEADERS",
    "TOP_MODULES",
    "TRAINING_BASIS",
    "MemoryFacts",
    "MemoryView",
    "ModuleParams",
    "activation_bytes",
    "memory_view",
    "module_cells",
]
