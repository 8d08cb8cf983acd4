"""Analytic analysis: workload parameters x devices -> rows (cost, placement, findings). Pure: no I/O.

The rows are roofline.report.rows.Row values: every iron-law number comes from roofline.ironlaw.place_cost."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from roofline.costs.base import get_model
from roofline.costs.suite import expand
from roofline.device import Device
from roofline.findings.analytic import AnalyticContext, advise
from roofline.ironlaw import place_cost
from roofline.report.rows import Row


def analyze_one(kind: str, values: dict[str, Any], device: Device, source: str = "") -> Row:
    model = get_model(kind)
    params = model.parse(values, source)
    cost = model(params)
    placement = place_cost(cost, device)
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
        roof_time_s=placement.roof_time_s,
        time_s=placement.time_s,
        efficiency=placement.efficiency,
        bound=placement.bound,
        byte_terms=dict(cost.byte_terms),
        notes=list(cost.notes),
        findings=findings,
    )


def sweep(kind: str, values: dict[str, Any], devices: Sequence[Device]) -> list[Row]:
    """One row per combination of swept values per device (devices vary fastest)."""
    return [analyze_one(kind, point, device) for point in expand(values) for device in devices]


def analyze_items(items: Iterable[tuple[str, dict[str, Any], str]], devices: Sequence[Device]) -> list[Row]:
    """Rows for (kind, values, source) items, e.g. a suite file's workloads."""
    return [analyze_one(kind, values, device, source) for kind, values, source in items for device in devices]
