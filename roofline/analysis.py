"""Analytic analysis: workload parameters x devices -> rows (cost, placement, findings). Pure: no I/O.

The rows are roofline.report.rows.Row values: every iron-law number comes from roofline.ironlaw.place_cost."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from roofline.costs.base import Cost
from roofline.costs.llm import LlmParams, activation_per_request, kv_cache_per_request, weight_memory
from roofline.costs.models import get_model
from roofline.costs.suite import expand
from roofline.device import Device
from roofline.errors import WorkloadError
from roofline.findings.analytic import AnalyticContext
from roofline.findings.context import FindingContext
from roofline.findings.rules import produce_all
from roofline.ironlaw import Placement, place_cost
from roofline.report.rows import Row, Serving
from roofline.units import format_bytes, format_time

#: the largest batch searched for the batch where compute binds
COMPUTE_BATCH_LIMIT = 2**20


def analyze_one(kind: str, values: dict[str, Any], device: Device, source: str = "") -> Row:
    model = get_model(kind)
    params = model.parse(values, source)
    if isinstance(params, LlmParams) and params.launch_floor_us is not None:
        device = dataclasses.replace(device, launch_floor_s=params.launch_floor_us * 1e-6)
    cost = model(params)
    placement = place_cost(cost, device)
    findings = produce_all(
        FindingContext(analytic=AnalyticContext(kind, params, cost, placement, device)), ("analytic",)
    )
    notes = list(cost.notes)
    serving = None
    if isinstance(params, LlmParams):
        serving = llm_serving(kind, params, cost, placement, device)
        notes += serving_notes(params, serving, device)
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
        notes=notes,
        findings=findings,
        comm_time_s=placement.comm_s,
        serving=serving,
    )


def _compute_binds(kind: str, params: LlmParams, device: Device, batch: int) -> bool:
    model = get_model(kind)
    placement = place_cost(model(model.parse({**params.model_dump(), "batch": batch})), device)
    return placement.compute_s >= placement.memory_s


def compute_batch(kind: str, params: LlmParams, device: Device, limit: int = COMPUTE_BATCH_LIMIT) -> int | None:
    """The smallest batch at which the step's compute time reaches its memory time (None: not up to ``limit``;
    a KV cache read per sequence grows with the batch as the FLOPs do, so a long context may never get there)."""
    if _compute_binds(kind, params, device, 1):
        return 1
    low, high = 1, 2
    while not _compute_binds(kind, params, device, high):  # low: memory-bound; double until compute binds
        if high >= limit:
            return None
        low, high = high, min(2 * high, limit)
    while high - low > 1:
        mid = (low + high) // 2
        if _compute_binds(kind, params, device, mid):
            high = mid
        else:
            low = mid
    return high


def llm_serving(kind: str, params: LlmParams, cost: Cost, placement: Placement, device: Device) -> Serving:
    """The serving figures of one decode or prefill step on ``device`` (see roofline.report.rows.Serving)."""
    tokens = params.batch * params.new_tokens
    floor = device.launch_floor_s
    weights_bytes = cost.byte_terms.get("weights", 0)
    weights_s = weights_bytes / device.dram_bandwidth
    graph_s = placement.roof_time_s + floor
    link = device.peer_link() if params.tp > 1 else None
    reduces = [k for k in cost.kernels if k.link_bytes]
    budget = params.memory if params.memory is not None else device.capacities.get("dram", 0.0)
    weights_mem = weight_memory(params)
    if params.memory is not None and params.memory < weights_mem:
        raise WorkloadError(
            f"--memory {format_bytes(params.memory)} is smaller than the weights one GPU holds "
            f"({format_bytes(weights_mem)}): raise it, use --tp or a smaller --weight-dtype"
        )
    per_request = kv_cache_per_request(params) + activation_per_request(params)
    memory_batch = max(int((budget - weights_mem) // per_request), 0) if budget and per_request else None
    return Serving(
        tokens_per_step=tokens,
        tokens_per_s=tokens / placement.time_s,
        time_per_token_s=placement.time_s / tokens,
        roofline_tokens_per_s=tokens / placement.roof_time_s if placement.roof_time_s else float("inf"),
        weights_time_s=weights_s,
        weights_tokens_per_s=tokens / weights_s if weights_s else float("inf"),
        launches=placement.kernels,
        launch_floor_s=floor,
        launch_time_s=placement.launch_s,
        graph_time_s=graph_s,
        graph_saving_s=max(placement.launch_s - floor, 0.0),
        graph_tokens_per_s=tokens / graph_s,
        tp=params.tp,
        link=link.describe() if link is not None else "",
        all_reduces=sum(k.count for k in reduces),
        all_reduce_bytes=reduces[0].bytes // 2 if reduces else 0,
        link_bytes=cost.link_bytes,
        comm_time_s=placement.comm_s,
        comm_modelled=placement.comm_modelled,
        memory_budget_bytes=float(budget),
        memory_budget_source="--memory" if params.memory is not None else "device capacity",
        weight_memory_bytes=weights_mem,
        kv_cache_per_request_bytes=kv_cache_per_request(params),
        activation_per_request_bytes=activation_per_request(params),
        memory_batch=memory_batch,
        compute_batch=compute_batch(kind, params, device),
        compute_batch_limit=COMPUTE_BATCH_LIMIT,
    )


def serving_notes(params: LlmParams, serving: Serving, device: Device) -> list[str]:
    """The assumptions of the serving figures, shown with the row's notes."""
    notes = [
        f"launch floor {format_time(serving.launch_floor_s)} per launch"
        + (" (--launch-floor)" if params.launch_floor_us is not None else f" ({device.name}'s sheet or calibration)"),
        "CUDA graphs: the step's launches replaced by one graph launch (one launch floor)",
        "memory per GPU: weights as stored + batch x (KV cache at context + new tokens + live activations)",
    ]
    if not params.models_kv_cache:
        notes.append("no KV cache modelled (napkin form without layers and heads): memory batch from activations")
    if params.tp > 1:
        if serving.comm_modelled:
            notes.append(f"all-reduces over {serving.link}")
        else:
            notes.append(f"communication time not modelled: {device.name}'s sheet gives no peer link bandwidth")
    return notes


def sweep(kind: str, values: dict[str, Any], devices: Sequence[Device]) -> list[Row]:
    """One row per combination of swept values per device (devices vary fastest)."""
    return [analyze_one(kind, point, device) for point in expand(values) for device in devices]


def analyze_items(items: Iterable[tuple[str, dict[str, Any], str]], devices: Sequence[Device]) -> list[Row]:
    """Rows for (kind, values, source) items, e.g. a suite file's workloads."""
    return [analyze_one(kind, values, device, source) for kind, values, source in items for device in devices]
