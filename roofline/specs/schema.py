"""The spec-sheet schema: one YAML file per SKU, dense peaks only, units in every field name.

Unknown keys are rejected so that a typo ("bandwith_gb_per_s") fails loudly instead of silently
dropping a roof. Integer formats (int8, int4) are in tera-operations/s (TOPS) under the same key.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator


def _within(low: float, high: float, unit: str, meaning: str = "") -> AfterValidator:
    """A finite number from ``low`` to ``high`` (the sane physical range): a .inf, a .nan, 1e400 or a bandwidth of
    1e-300 is a typo, rejected with the range instead of dividing by it later."""

    def check(value: Any) -> Any:
        if not math.isfinite(value) or not low <= value <= high:
            raise ValueError(f"must be a finite number from {low:g} to {high:g} {unit}{meaning}")
        return value

    return AfterValidator(check)


def _not_bool(value: Any) -> Any:
    """``fp32: true`` is no 1 TFLOP/s."""
    if isinstance(value, bool):
        raise ValueError("must be a number, not true/false")
    return value


_NUMBER = BeforeValidator(_not_bool)


#: peaks in TFLOP/s (TOPS): 1e6 FLOP/s to 1e18 FLOP/s
Peak = Annotated[float, _NUMBER, _within(1e-6, 1e6, "TFLOP/s", " (1 MFLOP/s to 1 EFLOP/s)")]
#: bandwidths in GB/s: 1e6 B/s to 1e18 B/s
Bandwidth = Annotated[float, _NUMBER, _within(1e-3, 1e9, "GB/s", " (1 MB/s to 1 EB/s)")]
Capacity = Annotated[float, _NUMBER, _within(1e-6, 1e9, "(in the unit the key names)")]
Clock = Annotated[float, _NUMBER, _within(1, 1e6, "MHz")]
Watts = Annotated[float, _NUMBER, _within(1e-3, 1e6, "W")]
LaunchFloor = Annotated[float, _NUMBER, _within(1e-3, 1e6, "us", " (1 ns to 1 s)")]
PositiveInt = Annotated[int, _NUMBER, Field(gt=0, le=10**7)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class VectorPeaks(_Strict):
    """Non-tensor (CUDA-core / SIMD) dense peaks in TFLOP/s."""

    fp64: Peak | None = None
    fp32: Peak
    fp16: Peak | None = None
    bf16: Peak | None = None


class TensorPeaks(_Strict):
    """Tensor-core / matrix-core dense peaks in TFLOP/s (TOPS for int8/int4). Never the 2:4-sparse figure."""

    fp64: Peak | None = None
    fp32: Peak | None = None  # matrix fp32 (AMD); NVIDIA has none: fp32 matmul uses CUDA cores or TF32
    tf32: Peak | None = None
    fp16: Peak | None = None
    bf16: Peak | None = None
    fp8: Peak | None = None
    int8: Peak | None = None
    int4: Peak | None = None
    fp4: Peak | None = None


class ComputePeaks(_Strict):
    vector: VectorPeaks
    tensor: TensorPeaks = TensorPeaks()


class DramLevel(_Strict):
    type: str = Field(description="HBM3, HBM2e, GDDR6X, ...")
    capacity_gb: Capacity
    bandwidth_gb_per_s: Bandwidth


class CacheLevel(_Strict):
    capacity_mib: Capacity
    bandwidth_gb_per_s: Bandwidth | None = None
    scope: str | None = Field(None, description="e.g. 'per XCD' when the capacity is not chip-wide")


class SharedMemory(_Strict):
    per_sm_kib: Capacity
    per_block_kib: Capacity | None = None
    bandwidth_gb_per_s: Bandwidth | None = None


class SmLimits(_Strict):
    """Per-SM (per-CU) resources that thread blocks share: what `roofline analyze tile` fits a tile against.
    Registers are 32-bit; the register file is given in KiB as vendors quote it (256 KiB = 65536 registers)."""

    register_file_kib: Capacity | None = None
    max_threads: PositiveInt | None = None
    max_blocks: PositiveInt | None = None
    max_threads_per_block: PositiveInt | None = None
    warp_size: PositiveInt | None = None
    reserved_smem_per_block_kib: Capacity | None = Field(
        None, description="shared memory the runtime reserves per resident block (CUDA: 1 KiB on sm_80 and later)"
    )


class Memory(_Strict):
    dram: DramLevel
    l2: CacheLevel | None = None
    llc: CacheLevel | None = Field(None, description="a last-level cache beyond L2 (AMD Infinity Cache)")
    smem: SharedMemory | None = None


#: how a link's figure counts: both directions summed, one direction, or not said by the source
Direction = Literal["bidirectional", "unidirectional", "unstated"]


class Link(_Strict):
    """One GPU's bandwidth on a link (NVLink, Infinity Fabric, PCIe), with the direction and the source of the figure.

    ``bidirectional``: both directions summed (NVIDIA's NVLink figures: the H100's 900 GB/s is 450 each way);
    ``unidirectional``: each way; ``unstated``: the source does not say. A multi-GPU model needs the rate one GPU
    sends at, :attr:`per_direction_gb_per_s`: half a bidirectional figure, the figure itself otherwise (for an
    unstated one that is the faster reading, so a time computed from it is a lower bound)."""

    gb_per_s: Bandwidth
    direction: Direction
    source: str = Field(min_length=1, description="where the figure (and its direction) comes from")

    @property
    def per_direction_gb_per_s(self) -> float:
        return self.gb_per_s / 2 if self.direction == "bidirectional" else self.gb_per_s


_RENAMED = {
    "nvlink_gb_per_s": "nvlink_bandwidth_per_gpu",
    "infinity_fabric_gb_per_s": "infinity_fabric_bandwidth_per_gpu",
    "pcie_gb_per_s": "pcie_bandwidth",
}


class Interconnect(_Strict):
    """One GPU's links to its peers (per GPU, not the node's aggregate) and to the host."""

    nvlink_bandwidth_per_gpu: Link | None = None
    infinity_fabric_bandwidth_per_gpu: Link | None = None
    pcie_bandwidth: Link | None = None

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for old, new in _RENAMED.items():
                if old in data:
                    raise ValueError(
                        f"{old} was renamed: write {new}: {{gb_per_s: ..., direction: bidirectional|unidirectional|"
                        "unstated, source: ...}"
                    )
        return data


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
    boost_clock_mhz: Clock | None = None
    tensor_clock_mhz: Clock | None = None
    compute_dense_tflops: ComputePeaks
    memory: Memory
    interconnect: Interconnect | None = None
    sm_limits: SmLimits | None = None
    tdp_w: Watts | None = None
    launch_floor_us: LaunchFloor = Field(description="default per-kernel launch floor; calibrate measures it")
    unconfirmed: list[str] = Field(default_factory=list, description="fields whose values are not confirmed")
    notes: list[str] = Field(default_factory=list)
    sources: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> SpecSheet:
        if any(not source.strip() for source in self.sources):
            raise ValueError("sources: every source must be a non-empty string")
        return self
