"""The torch side of the report's ``memory`` block (roofline.report.memory defines it): the model's parameters per
module and the peak the allocator saw while the timing pass ran. torch is imported inside the functions."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from roofline.report.memory import CPU_PEAK_NOTE, MemoryFacts, ModuleParams, activation_bytes
from roofline.report.records import OpRecord


def _bytes(t: Any) -> int:
    return int(t.numel()) * int(t.element_size())


def _unwrapped(model: Any) -> Any:
    """The module a torch.compile'd one wraps (its paths without '_orig_mod.')."""
    return getattr(model, "_orig_mod", model)


def module_parameters(model: Any) -> MemoryFacts:
    """Parameters per module (own and subtree), the totals (each shared tensor once) and the buffers' bytes; a
    callable that is no nn.Module: empty facts with a note."""
    import torch

    model = _unwrapped(model)
    if model is None:
        return MemoryFacts(notes=["parameters: no model given (roofline.profile(model=...)): none counted"])
    if not isinstance(model, torch.nn.Module):
        return MemoryFacts(notes=["parameters: the model is a plain callable (no nn.Module): none counted"])
    rows: list[ModuleParams] = []
    for path, module in model.named_modules(remove_duplicate=True):
        own = list(module.parameters(recurse=False))
        subtree = {id(p): p for p in module.parameters()}  # NB: parameters() already yields a shared one once
        if not subtree:
            continue
        rows.append(
            ModuleParams(
                module=path,
                type=type(module).__name__,
                parameters=sum(int(p.numel()) for p in own),
                bytes=sum(_bytes(p) for p in own),
                total_parameters=sum(int(p.numel()) for p in subtree.values()),
                total_bytes=sum(_bytes(p) for p in subtree.values()),
            )
        )
    params = list(model.parameters())
    buffers = sum(_bytes(b) for b in model.buffers())
    parameter_bytes = sum(_bytes(p) for p in params)
    return MemoryFacts(
        parameters=sum(int(p.numel()) for p in params),
        parameter_bytes=parameter_bytes,
        buffer_bytes=buffers,
        weight_bytes=parameter_bytes + buffers,
        modules=rows,
    )


@dataclass
class Peak:
    """The peak allocated over a block (:func:`peak_memory`): bytes and where read, or None and why not."""

    bytes: int | None = None
    source: str = ""
    notes: list[str] = field(default_factory=list)


@contextmanager
def peak_memory(torch_device: str) -> Iterator[Peak]:
    """CUDA: the caching allocator's peak over the block (``reset_peak_memory_stats`` before it,
    ``max_memory_allocated`` after it); the CPU: None with a note (torch keeps no CPU allocator statistics)."""
    peak = Peak()
    cuda = torch_device.startswith("cuda")
    if cuda:
        import torch

        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.synchronize(torch_device)
            torch.cuda.reset_peak_memory_stats(torch_device)
    yield peak
    if cuda:
        import torch

        torch.cuda.synchronize(torch_device)
        peak.bytes, peak.source = int(torch.cuda.max_memory_allocated(torch_device)), "torch.cuda.max_memory_allocated"
    else:
        peak.notes.append(CPU_PEAK_NOTE)


def memory_facts(model: Any, records: Sequence[OpRecord], mode: str, peak: Peak | None) -> MemoryFacts:
    """The report's ``memory`` block: parameters per module, weights, activations (from the counting pass's
    records), the timing pass's peak."""
    facts = module_parameters(model)
    activations, basis = activation_bytes(records, mode)
    notes = list(facts.notes)
    if activations is None:
        notes.append("activations: the counted ops carry no dataflow: not estimated")
    peak = peak or Peak(notes=["peak allocated: not measured"])
    return facts.model_copy(
        update={
            "activation_bytes": activations,
            "activations": basis,
            "peak_allocated_bytes": peak.bytes,
            "peak_source": peak.source,
            "notes": [*notes, *peak.notes],
        }
    )


__all__ = ["Peak", "memory_facts", "module_parameters", "peak_memory"]
