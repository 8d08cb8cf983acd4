"""A Device is the set of roofs one analysis uses: compute peaks per (dtype, unit), bandwidth per memory
level, and a launch floor, all in base units (FLOP/s, byte/s, s). roofline.roofs builds it from a spec sheet
(roofs.device_from_sheet) and roofline.measure.calibration from measured ceilings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from roofline.errors import UsageError

Math = Literal["tensor", "vector"]
ROOF_SOURCE_SPEC = "spec"


@dataclass(frozen=True)
class Roof:
    """One compute roof: peak rate and a label saying which unit it is ('bf16 tensor', 'fp32 vector')."""

    flops_per_s: float
    dtype: str
    unit: Math

    @property
    def label(self) -> str:
        return f"{self.dtype} {self.unit}"


@dataclass(frozen=True)
class SmFacts:
    """What one SM (CU) offers the thread blocks resident on it, in base units; None where the sheet lacks it.
    Read by `roofline analyze tile` (roofline.costs.tile)."""

    smem_per_sm_bytes: int | None = None
    smem_per_block_bytes: int | None = None  # the most one block may opt in to
    reserved_smem_per_block_bytes: int | None = None  # the runtime's share per resident block
    registers: int | None = None  # 32-bit registers per SM
    max_threads: int | None = None
    max_blocks: int | None = None
    max_threads_per_block: int | None = None
    warp_size: int | None = None


@dataclass(frozen=True)
class LinkRoof:
    """One GPU's link to its peers: ``bytes_per_s`` it sends at, per direction (a bidirectional figure halved; an
    unstated one taken as it is, so a time computed from it is a lower bound), and the direction the sheet's source
    gives (``bidirectional``, ``unidirectional`` or ``unstated``)."""

    name: str  # 'nvlink', 'infinity_fabric', 'pcie'
    bytes_per_s: float
    direction: str
    sheet_gb_per_s: float  # the figure as the sheet gives it

    def describe(self) -> str:
        """'nvlink 900 GB/s bidirectional (450 GB/s per direction)'."""
        text = f"{self.name.replace('_', ' ')} {self.sheet_gb_per_s:g} GB/s"
        if self.direction == "bidirectional":
            return f"{text} bidirectional ({self.bytes_per_s / 1e9:g} GB/s per direction)"
        if self.direction == "unidirectional":
            return f"{text} per direction"
        return f"{text} (direction not stated by the sheet's source: taken as per direction, a lower bound on time)"


@dataclass(frozen=True)
class Device:
    name: str
    display_name: str
    vendor: str
    compute: dict[tuple[str, str], float]  # (dtype, unit) -> FLOP/s (OP/s for integers)
    bandwidth: dict[str, float]  # memory level -> byte/s ("dram" always present)
    launch_floor_s: float
    roof_source: str = ROOF_SOURCE_SPEC
    capacities: dict[str, float] = field(default_factory=dict)  # level -> bytes
    compute_units: int = 0  # SMs / CUs (0 when unknown, e.g. a CPU)
    # the SM clock the sheet's vector peaks are quoted at (boost), Hz; 0 when unknown. Read by the instruction roof
    # (roofline.costs.instructions): SMs x 4 schedulers x 32 lanes x this clock
    clock_hz: float = 0.0
    # With measured roofs: the compute roofs that were measured; the others keep the sheet's value.
    measured: frozenset[tuple[str, str]] = frozenset()
    unit_name: str = "SM"
    sm: SmFacts = SmFacts()
    # links to peer GPUs, preferred first (NVLink, Infinity Fabric, then PCIe); empty when the sheet gives none
    links: tuple[LinkRoof, ...] = ()

    def peer_link(self) -> LinkRoof | None:
        """The link tensor parallelism uses: the first of :attr:`links` (None when the sheet gives none)."""
        return self.links[0] if self.links else None

    @property
    def dram_bandwidth(self) -> float:
        return self.bandwidth["dram"]

    def source_of(self, roof: Roof) -> str:
        """Where a compute roof comes from: 'spec', 'measured', or 'spec compute, measured bandwidth'."""
        if self.roof_source == ROOF_SOURCE_SPEC:
            return ROOF_SOURCE_SPEC
        if not self.measured or (roof.dtype, roof.unit) in self.measured:
            return self.roof_source
        return "spec compute, measured bandwidth"

    def has_tensor_cores(self) -> bool:
        return any(unit == "tensor" for _, unit in self.compute)

    def roof(self, dtype: str, math: Math, *, tf32: bool = False) -> Roof:
        """The compute roof an op of ``dtype`` runs against.

        Matmul-like ops ('tensor'): fp32 uses the fp32 CUDA-core roof unless TF32 is requested (or the
        device has matrix fp32, as AMD parts do); fp16/bf16/fp8/int8 use the tensor roof.
        Element-wise ops ('vector'): fp64 uses the fp64 roof, everything else the fp32 roof unless the
        sheet has a vector peak for that dtype. NB: packed half2 math could double the fp16 vector rate;
        element-wise ops are memory-bound by orders of magnitude, so this does not move their bound.
        """
        c = self.compute
        if math == "tensor":
            if dtype == "fp32" and tf32:
                if ("tf32", "tensor") in c:
                    return Roof(c[("tf32", "tensor")], "tf32", "tensor")
                raise UsageError(f"{self.name} has no TF32 tensor peak on its sheet: drop --tf32")
            if dtype in ("fp32", "fp64", "tf32"):
                key = "tf32" if dtype == "tf32" else dtype
                if (key, "tensor") in c:
                    return Roof(c[(key, "tensor")], key, "tensor")
                if dtype != "tf32" and (dtype, "vector") in c:
                    return Roof(c[(dtype, "vector")], dtype, "vector")
            elif (dtype, "tensor") in c:
                return Roof(c[(dtype, "tensor")], dtype, "tensor")
            raise UsageError(
                f"{self.name} has no dense {dtype} matrix peak on its sheet: pick another --dtype "
                f"(it has: {', '.join(sorted({d for d, _ in c}))})"
            )
        if dtype == "fp64":
            if ("fp64", "vector") in c:
                return Roof(c[("fp64", "vector")], "fp64", "vector")
            raise UsageError(f"{self.name} has no fp64 peak on its sheet: pick another --dtype")
        if (dtype, "vector") in c:
            return Roof(c[(dtype, "vector")], dtype, "vector")
        return Roof(c[("fp32", "vector")], "fp32", "vector")
