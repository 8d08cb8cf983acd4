"""Plain-data views of spec sheets (for JSON and tables): roofs in base units and ridge points."""

from __future__ import annotations

from typing import Any

from roofline.device import Device
from roofline.ironlaw import ridge_point
from roofline.specs.schema import SpecSheet


def roofs(sheet: SpecSheet) -> list[dict[str, Any]]:
    """Every compute roof with its ridge point against DRAM."""
    device = Device.from_sheet(sheet)
    return [
        {
            "dtype": dtype,
            "unit": unit,
            "peak_flops_per_s": peak,
            "ridge_flop_per_byte": ridge_point(peak, device.dram_bandwidth),
        }
        for (dtype, unit), peak in sorted(device.compute.items(), key=lambda item: (item[0][1], -item[1]))
    ]


def headline_tensor(sheet: SpecSheet) -> tuple[str, float] | None:
    """The 16-bit tensor peak used for headline ridge points (bf16, else fp16), in TFLOP/s."""
    tensor = sheet.compute_dense_tflops.tensor
    for dtype in ("bf16", "fp16"):
        value = getattr(tensor, dtype)
        if value:
            return dtype, value
    return None


def sheet_summary(sheet: SpecSheet, origin: str, path: str) -> dict[str, Any]:
    head = headline_tensor(sheet)
    bandwidth = sheet.memory.dram.bandwidth_gb_per_s
    return {
        "name": sheet.name,
        "display_name": sheet.display_name,
        "vendor": sheet.vendor,
        "architecture": sheet.architecture,
        "tensor16_dtype": head[0] if head else None,
        "tensor16_tflops": head[1] if head else None,
        "fp32_tflops": sheet.compute_dense_tflops.vector.fp32,
        "dram_gb_per_s": bandwidth,
        "dram_capacity_gb": sheet.memory.dram.capacity_gb,
        "ridge16_flop_per_byte": head[1] * 1e12 / (bandwidth * 1e9) if head else None,
        "origin": origin,
        "path": path,
    }


def sheet_detail(sheet: SpecSheet, origin: str, path: str) -> dict[str, Any]:
    return {"sheet": sheet.model_dump(mode="json"), "roofs": roofs(sheet), "origin": origin, "path": path}
