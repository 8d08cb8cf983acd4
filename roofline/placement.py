"""Placing a cost on a device's roofline: per-kernel iron law, summed over the kernels.

Each kernel group takes count x (max(compute, memory) + launch floor); a kernel's compute time is its
main-unit time plus its vector-unit time (NB: the iron law's O/R terms add; assuming the tensor and vector
units overlap would let FLOPs / time exceed the kernel's own roof). The aggregate bound is the term
(compute / memory / launch) holding the most time. Only the DRAM level is used here: analytic costs
count compulsory DRAM bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline import ironlaw as model
from roofline.costs.base import Cost
from roofline.device import Device


@dataclass(frozen=True)
class Placement:
    device: str
    flops: int
    bytes: int
    kernels: int
    intensity: float
    roof_label: str  # the compute roof of the dominant kernel, e.g. 'fp16 tensor'
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    ridge: float  # FLOP/byte for the dominant roof against DRAM
    compute_s: float
    memory_s: float
    launch_s: float
    time_s: float  # iron-law minimum time, launches included
    bound: model.Bound
    attainable_flops_per_s: float  # FLOPs / time without launches: the roofline's attainable rate
    roof_source: str


def place(cost: Cost, device: Device) -> Placement:
    bw = device.dram_bandwidth
    floor = device.launch_floor_s
    share = {"compute": 0.0, "memory": 0.0, "launch": 0.0}
    compute_s = memory_s = launch_s = total = work = 0.0
    for k in cost.kernels:
        roof = device.roof(k.dtype, k.math, tf32=k.tf32)
        c = model.compute_time(k.flops, roof.flops_per_s)
        if k.vector_flops:
            c += model.compute_time(k.vector_flops, device.roof("fp32", "vector").flops_per_s)
        m = model.memory_time(k.bytes, bw)
        t = max(c, m) + floor
        share[model.bound(c, m, floor)] += k.count * t
        compute_s += k.count * c
        memory_s += k.count * m
        launch_s += k.count * floor
        work += k.count * max(c, m)
        total += k.count * t
    main = max(cost.kernels, key=lambda k: k.count * k.total_flops)
    main_roof = device.roof(main.dtype, main.math, tf32=main.tf32)
    bound = max(share, key=lambda key: share[key])
    return Placement(
        device=device.name,
        flops=cost.flops,
        bytes=cost.bytes,
        kernels=cost.kernel_count,
        intensity=cost.intensity,
        roof_label=main_roof.label,
        peak_flops_per_s=main_roof.flops_per_s,
        bandwidth_bytes_per_s=bw,
        ridge=model.ridge_point(main_roof.flops_per_s, bw),
        compute_s=compute_s,
        memory_s=memory_s,
        launch_s=launch_s,
        time_s=total,
        bound=bound,  # type: ignore[arg-type]
        attainable_flops_per_s=cost.flops / work if work else float("inf"),
        roof_source=device.source_of(main_roof),
    )
