"""The machine a report was measured on: described when measuring, read back from a report, compared.

The ``machine`` block of bench and diagnose reports (the fields of :class:`roofline.specs.machine.Machine`:
device kind and name, driver, CUDA, torch, SM count and maximum clock, CPU threads and ISA) is described when
measuring, by roofline.specs.detect.describe_machine. :func:`machine_of` reads it back from any report, older ones
included: a report without the block is described from its ``bench`` / ``diagnose`` / ``devices`` / ``host``
blocks, and the SM clocks sampled during a bench run (``clocks_mhz`` per row) give the clock the run actually saw.
:func:`differences` lists what differs between two machines (what a baseline warns about).
"""

from __future__ import annotations

from typing import Any

from roofline.specs.machine import Machine

#: fields whose difference makes two machines differ, with the word that names them in a warning
COMPARED = {
    "kind": "device kind",
    "name": "device",
    "sheet": "spec sheet",
    "compute_capability": "compute capability",
    "driver": "driver",
    "cuda": "CUDA",
    "torch": "torch",
    "cpu_threads": "CPU threads",
    "isa": "ISA",
    "roof_source": "roofs",
}


class MachineInfo(Machine):
    """A Machine plus what a report adds: the clock seen while measuring, the roofs' source, the host."""

    sm_clock_mhz: float | None = None  # median SM clock over every sample (bench on a GPU, NVML)
    roof_source: str | None = None  # 'spec' | 'measured'
    python: str | None = None
    platform: str | None = None


def _median(values: list[float]) -> float | None:
    from roofline.samples import median

    return median(values) if values else None


def machine_of(report: Any, clocks: bool = True) -> MachineInfo:
    """The machine of a Report (roofline.report.schema.Report): its ``machine`` block, completed from the others.
    ``clocks``: the SM clock from the rows' samples (False: the block alone, as the reader checks it). A ``machine``
    block that is not an object is a ValueError; one whose fields do not validate, pydantic's ValidationError."""
    extra = report.model_extra or {}
    block = extra.get("bench") or extra.get("diagnose") or {}
    block = block if isinstance(block, dict) else {}
    device = report.devices[0] if report.devices else None
    data: dict[str, Any] = {}
    kind = block.get("device_kind") or ("cuda" if str(block.get("device", "")).startswith("cuda") else "cpu")
    data["kind"] = kind if kind in ("cuda", "cpu") else "cpu"
    data["name"] = block.get("gpu") or block.get("cpu") or (device.display_name if device else "") or "unknown"
    if kind == "cuda":
        data["sheet"] = block.get("sheet") or (device.name if device else None)
    for key in ("torch", "compute_capability", "isa"):
        if block.get(key) is not None:
            data[key] = str(block[key])
    if block.get("threads") is not None:
        data["cpu_threads"] = block["threads"]
    recorded = extra.get("machine")
    if isinstance(recorded, dict):
        data.update({key: value for key, value in recorded.items() if value is not None})
    elif recorded is not None:
        raise ValueError(f"not an object (got {recorded!r:.40})")
    if clocks:
        seen = [c for row in report.rows for c in (row.get("clocks_mhz") or []) if isinstance(c, (int, float))]
        data["sm_clock_mhz"] = _median(seen)
    data["roof_source"] = block.get("roof_source") or (device.roof_source if device else None)
    data["python"] = report.host.get("python")
    data["platform"] = report.host.get("platform")
    return MachineInfo.model_validate(data)


def differences(baseline: MachineInfo, current: MachineInfo) -> list[str]:
    """'driver 550.54 -> 560.35' for every compared field known on both sides that differs."""
    found = []
    for key, word in COMPARED.items():
        before, after = getattr(baseline, key), getattr(current, key)
        if before is not None and after is not None and str(before) != str(after):
            found.append(f"{word} {before} -> {after}")
    return found


def summary(machine: MachineInfo) -> str:
    """One line: 'NVIDIA H100 80GB HBM3 (h100-sxm) · driver 550.54 · CUDA 12.4 · torch 2.4.0 · SM 1980 MHz'."""
    parts = [f"{machine.name} ({machine.sheet})" if machine.sheet else machine.name]
    if machine.kind == "cpu" and machine.cpu_threads:
        parts.append(f"{machine.cpu_threads} threads")
    for label, value in (("driver", machine.driver), ("CUDA", machine.cuda), ("torch", machine.torch)):
        if value:
            parts.append(f"{label} {value}")
    if machine.sm_clock_mhz:
        parts.append(f"SM {machine.sm_clock_mhz:.0f} MHz")
    if machine.roof_source:
        parts.append(f"{machine.roof_source} roofs")
    return " · ".join(parts)
