"""The roofline model, pure: ridge point, attainable rate, iron-law minimum time, bound and efficiency.

Conventions (architecture.md): a kernel's minimum time is max(FLOPs / compute roof, bytes / bandwidth)
plus a launch floor -- the iron law T = D/BW + O/R + L with the roofline's max() for overlapping compute
and memory. The bound is whichever term is largest: compute, memory, or launch.
"""

from __future__ import annotations

from typing import Literal

Bound = Literal["compute", "memory", "launch"]


def intensity(flops: float, nbytes: float) -> float:
    """Arithmetic intensity in FLOP/byte (infinite for zero bytes)."""
    return flops / nbytes if nbytes else float("inf")


def ridge_point(peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Intensity (FLOP/byte) at which the memory slope meets the compute roof."""
    return peak_flops_per_s / bandwidth_bytes_per_s


def attainable(intensity_flop_per_byte: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Attainable FLOP/s = min(peak, intensity x bandwidth)."""
    return min(peak_flops_per_s, intensity_flop_per_byte * bandwidth_bytes_per_s)


def compute_time(flops: float, peak_flops_per_s: float) -> float:
    return flops / peak_flops_per_s


def memory_time(nbytes: float, bandwidth_bytes_per_s: float) -> float:
    return nbytes / bandwidth_bytes_per_s


def min_time(
    flops: float, nbytes: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float, launch_s: float = 0.0
) -> float:
    """Iron-law minimum time of one kernel: max(FLOPs/peak, bytes/bandwidth) + launch floor."""
    return max(compute_time(flops, peak_flops_per_s), memory_time(nbytes, bandwidth_bytes_per_s)) + launch_s


def bound(compute_s: float, memory_s: float, launch_s: float = 0.0) -> Bound:
    """Which term limits: launch when the floor exceeds the work, else the larger of compute and memory."""
    if launch_s > max(compute_s, memory_s):
        return "launch"
    return "compute" if compute_s >= memory_s else "memory"


def efficiency(achieved: float, attainable_value: float) -> float:
    """Achieved over attainable (0..1 for honest counts; above 1 means the counts or the roofs are wrong)."""
    return achieved / attainable_value if attainable_value else float("nan")
