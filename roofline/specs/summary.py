"""Plain-data views of spec sheets (for JSON and tables). A sheet's roofs in base units and their ridge points:
roofline.roofs (sheet_roofs, sheet_detail)."""

from __future__ import annotations

from typing import Any

from roofline.specs.schema import SpecSheet


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
