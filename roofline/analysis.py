"""Analytic analysis: workload parameters x devices -> rows (cost, placement, findings). Pure: no I/O."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from roofline.costs.base import get_model
from roofline.device import Device
from roofline.findings.analytic import AnalyticContext, advise
from roofline.findings.base import Finding
from roofline.placement import place


class Row(BaseModel):
    """One workload on one device. Field names carry their units; this is what reports store."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    kind: str
    label: str
    params: dict[str, Any]
    device: str
    dtype: str
    roof: str  # compute roof used, e.g. 'bf16 tensor'
    roof_source: str  # 'spec' (sheet) or 'measured' (calibration)
    flops: int
    bytes: int
    kernels: int
    intensity: float  # FLOP/byte
    ridge: float  # FLOP/byte
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    attainable_flops_per_s: float
    compute_time_s: float
    memory_time_s: float
    launch_time_s: float
    time_s: float
    bound: str  # compute | memory | launch
    byte_terms: dict[str, int] = {}
    notes: list[str] = []
    findings: list[Finding] = []

    @property
    def top(self) -> Finding | None:
        return self.findings[0] if self.findings else None


def analyze_one(kind: str, values: dict[str, Any], device: Device, source: str = "") -> Row:
    model = get_model(kind)
    params = model.parse(values, source)
    cost = model(params)
    placement = place(cost, device)
    findings = advise(AnalyticContext(kind, params, cost, placement, device))
    return Row(
        kind=kind,
        label=params.label(),
        params=params.model_dump(mode="json"),
        device=device.name,
        dtype=cost.dtype,
        roof=placement.roof_label,
        roof_source=placement.roof_source,
        flops=placement.flops,
        bytes=placement.bytes,
        kernels=placement.kernels,
        intensity=placement.intensity,
        ridge=placement.ridge,
        peak_flops_per_s=placement.peak_flops_per_s,
        bandwidth_bytes_per_s=placement.bandwidth_bytes_per_s,
        attainable_flops_per_s=placement.attainable_flops_per_s,
        compute_time_s=placement.compute_s,
        memory_time_s=placement.memory_s,
        launch_time_s=placement.launch_s,
        time_s=placement.time_s,
        bound=placement.bound,
        byte_terms=dict(cost.byte_terms),
        notes=list(cost.notes),
        findings=findings,
    )


def expand(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Cartesian product of every list-valued parameter (a sweep), in the order given."""
    keys = list(values)
    axes = [v if isinstance(v, list) else [v] for v in values.values()]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes)]


def sweep(kind: str, values: dict[str, Any], devices: Sequence[Device]) -> list[Row]:
    """One row per combination of swept values per device (devices vary fastest)."""
    return [analyze_one(kind, point, device) for point in expand(values) for device in devices]


def analyze_items(items: Iterable[tuple[str, dict[str, Any], str]], devices: Sequence[Device]) -> list[Row]:
    """Rows for (kind, values, source) items, e.g. a suite file's workloads."""
    return [analyze_one(kind, values, device, source) for kind, values, source in items for device in devices]
