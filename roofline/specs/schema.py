"""The spec-sheet schema: one YAML file per SKU, dense peaks only, units in every field name.

Unknown keys are rejected so that a typo ("bandwith_gb_per_s") fails loudly instead of silently
dropping a roof. Integer formats (int8, int4) are in tera-operations/s (TOPS) under the same key.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Positive = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class VectorPeaks(_Strict):
    """Non-tensor (CUDA-core / SIMD) dense peaks in TFLOP/s."""

    fp64: Positive | None = None
    fp32: Positive
    fp16: Positive | None = None
    bf16: Positive | None = None


class TensorPeaks(_Strict):
    """Tensor-core / matrix-core dense peaks in TFLOP/s (TOPS for int8/int4). Never the 2:4-sparse figure."""

    fp64: Positive | None = None
    fp32: Positive | None = None  # matrix fp32 (AMD); NVIDIA has none: fp32 matmul uses CUDA cores or TF32
    tf32: Positive | None = None
    fp16: Positive | None = None
    bf16: Positive | None = None
    fp8: Positive | None = None
    int8: Positive | None = None
    int4: Positive | None = None
    fp4: Positive | None = None


class ComputePeaks(_Strict):
    vector: VectorPeaks
    tensor: TensorPeaks = TensorPeaks()


class DramLevel(_Strict):
    type: str = Field(description="HBM3, HBM2e, GDDR6X, ...")
    capacity_gb: Positive
    bandwidth_gb_per_s: Positive


class CacheLevel(_Strict):
    capacity_mib: Positive
    bandwidth_gb_per_s: Positive | None = None
    scope: str | None = Field(None, description="e.g. 'per XCD' when the capacity is not chip-wide")


class SharedMemory(_Strict):
    per_sm_kib: Positive
    per_block_kib: Positive | None = None
    bandwidth_gb_per_s: Positive | None = None


class Memory(_Strict):
    dram: DramLevel
    l2: CacheLevel | None = None
    llc: CacheLevel | None = Field(None, description="a last-level cache beyond L2 (AMD Infinity Cache)")
    smem: SharedMemory | None = None


class Interconnect(_Strict):
    nvlink_gb_per_s: Positive | None = None
    infinity_fabric_gb_per_s: Positive | None = None
    pcie_gb_per_s: Positive | None = None


class SpecSheet(_Strict):
    schema_version: Literal[1] = 1
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$", description="canonical id, e.g. h100-sxm")
    display_name: str
    vendor: Literal["nvidia", "amd", "intel", "other"]
    architecture: str
    form_factor: str | None = None
    compute_capability: str | None = None
    aliases: list[str] = Field(default_factory=list, description="names the device reports, e.g. via NVML")
    compute_units: PositiveInt
    compute_unit_name: Literal["SM", "CU", "core"] = "SM"
    boost_clock_mhz: Positive | None = None
    tensor_clock_mhz: Positive | None = None
    compute_dense_tflops: ComputePeaks
    memory: Memory
    interconnect: Interconnect | None = None
    tdp_w: Positive | None = None
    launch_floor_us: Positive = Field(description="default per-kernel launch floor; calibrate measures it")
    unconfirmed: list[str] = Field(default_factory=list, description="fields whose values are not confirmed")
    notes: list[str] = Field(default_factory=list)
    sources: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> SpecSheet:
        if any(not source.strip() for source in self.sources):
            raise ValueError("sources: every source must be a non-empty string")
        return self
