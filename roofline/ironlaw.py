"""The iron law of the roofline: the one definition of every number a report row stores.

Every report row (analytic, bench, diagnose op, diagnose aggregate) stores five values computed here, once, when
it is made; every reader (console, JSON, CSV, Parquet, HTML, Markdown, chart, gate) reads the stored value:

- **intensity** = FLOPs / bytes (compulsory DRAM bytes), FLOP/byte.
- **roofline time**: one kernel takes max(FLOPs / its compute roof, bytes / DRAM bandwidth) -- its compute time
  includes the vector-unit time of its vector FLOPs (the softmax of fused attention: NB the O/R terms of the iron
  law add, they do not overlap). A row of several kernels takes the sum over its kernels. The launch floor is
  kept apart: the minimum time (:func:`min_time`) is the roofline time plus one launch floor per kernel.
- **attainable** = FLOPs / roofline time: the rate the row's FLOPs would run at with every kernel on its own roof.
  For one kernel it is min(roof, intensity x bandwidth) (:func:`attainable`, the roofline's curve). NB: for a
  row of several kernels it is *not* that curve at the row's summed intensity: a memory-bound kernel next to a
  compute-bound one (naive attention, a decode step) would get a roof it cannot reach.
- **efficiency** = roofline time / time = achieved / attainable (1.0: on the roof; above 1: the counts, the time
  or the roofs are wrong). The time is the measured one (bench: the median per call; diagnose: the device time
  per iteration); for an analytic row, the predicted minimum time (so efficiency is the share of the predicted
  time that is not launch floors).
- **bound**: analytic: per kernel 'launch' when its launch floor exceeds its roofline time, else the larger of
  compute and memory; a row's bound is the one holding most of its minimum time. Measured: 'launch' when the
  measured time is within LAUNCH_FACTOR of the launch floor (summed over the row's kernels), else the analytic
  bound.

A group of rows (diagnose: the ops of a call site, an op type, a module; a chart point summing op calls; the
gate's totals) follows the same law on its sums (:func:`group`): attainable = summed FLOPs / summed roofline
time, efficiency = summed roofline time / summed measured time, bound = the bound holding most of the measured
time (most members when none was timed).

Only the DRAM level is used here for memory: the costs count compulsory DRAM bytes. A kernel's ``link_bytes`` (a
collective: what one GPU sends to its peers) take link bytes / the device's peer-link bandwidth per direction; that
communication time is part of the kernel's roofline time (max of compute, memory and communication) and counts as
data movement ('memory') in the bound. A device without a peer link on its sheet leaves it out (``comm_modelled``
False; the reader says the communication time is not modelled).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from roofline.costs.base import Cost
    from roofline.device import Device

Bound = Literal["compute", "memory", "launch"]

#: a measured time within this factor of the launch floor (summed over the kernels) reads as launch-bound
LAUNCH_FACTOR = 2.0


# ------------------------------------------------------------------------------------------- one kernel


def intensity(flops: float, nbytes: float) -> float:
    """Arithmetic intensity in FLOP/byte (infinite for zero bytes)."""
    return flops / nbytes if nbytes else float("inf")


def ridge_point(peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """Intensity (FLOP/byte) at which the memory slope meets the compute roof."""
    return peak_flops_per_s / bandwidth_bytes_per_s


def attainable(intensity_flop_per_byte: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float) -> float:
    """The roofline's curve: min(peak, intensity x bandwidth) FLOP/s, one kernel's attainable rate on those roofs."""
    return min(peak_flops_per_s, intensity_flop_per_byte * bandwidth_bytes_per_s)


def compute_time(flops: float, peak_flops_per_s: float) -> float:
    return flops / peak_flops_per_s


def memory_time(nbytes: float, bandwidth_bytes_per_s: float) -> float:
    return nbytes / bandwidth_bytes_per_s


def roofline_time(compute_s: float, memory_s: float) -> float:
    """One kernel's roofline time: compute and memory overlap, the longer one is the time (no launch floor)."""
    return max(compute_s, memory_s)


def min_time(
    flops: float, nbytes: float, peak_flops_per_s: float, bandwidth_bytes_per_s: float, launch_s: float = 0.0
) -> float:
    """Iron-law minimum time of one kernel: max(FLOPs/peak, bytes/bandwidth) + launch floor."""
    return roofline_time(compute_time(flops, peak_flops_per_s), memory_time(nbytes, bandwidth_bytes_per_s)) + launch_s


def bound(compute_s: float, memory_s: float, launch_s: float = 0.0) -> Bound:
    """Which term limits: launch when the floor exceeds the work, else the larger of compute and memory."""
    if launch_s > max(compute_s, memory_s):
        return "launch"
    return "compute" if compute_s >= memory_s else "memory"


# ------------------------------------------------------------------------------------------- a row


def attainable_rate(flops: float, roof_time_s: float) -> float | None:
    """Attainable FLOP/s = FLOPs / roofline time (None without a roofline time: no work)."""
    return flops / roof_time_s if roof_time_s > 0 else None


def efficiency(roof_time_s: float, time_s: float) -> float:
    """Roofline time / time = achieved / attainable (nan for a zero time)."""
    return roof_time_s / time_s if time_s else float("nan")


def row_efficiency(roof_time_s: float, time_s: float) -> float | None:
    """:func:`efficiency` of a row: None when it was not timed (time 0) or does no work (no roofline time)."""
    return efficiency(roof_time_s, time_s) if time_s > 0 and roof_time_s > 0 else None


def measured_bound(analytic: str, time_s: float, launch_floor_s: float, *, overhead_only: bool = False) -> str:
    """The bound of a measured row: 'launch' when its time is within LAUNCH_FACTOR of its launch floor (or, with
    ``overhead_only``, when it was timed at all: its time is all launch overhead, a view's host dispatch), else
    ``analytic``."""
    if launch_floor_s > 0 and 0 < time_s <= LAUNCH_FACTOR * launch_floor_s:
        return "launch"
    if overhead_only and time_s > 0:
        return "launch"
    return analytic


# ------------------------------------------------------------------------------------------- a cost


@dataclass(frozen=True)
class Placement:
    """A cost on a device's roofline: summed iron-law times of its kernels and what they imply."""

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
    roof_time_s: float  # summed roofline time of the kernels (no launch floors)
    time_s: float  # iron-law minimum time, launches included
    bound: Bound
    attainable_flops_per_s: float  # FLOPs / roofline time
    efficiency: float  # roofline time / minimum time: the share of the prediction that is not launch floors
    roof_source: str
    comm_s: float = 0.0  # summed link time of the collectives (link bytes / peer-link bandwidth per direction)
    comm_modelled: bool = True  # False: the cost sends link bytes but the device has no peer link on its sheet


def gain(time_s: float | None, best_time_s: float | None) -> float | None:
    """How many times faster a technique can make ``time_s`` at most: time now / best time (None without a bound)."""
    if time_s is None or best_time_s is None or best_time_s <= 0:
        return None
    return time_s / best_time_s


def saving(time_s: float | None, best_time_s: float | None) -> float:
    """Seconds a technique can save at most: time now - best time (0 without a bound)."""
    if time_s is None or best_time_s is None:
        return 0.0
    return max(time_s - best_time_s, 0.0)


def place_cost(cost: Cost, device: Device) -> Placement:
    """Place ``cost`` on ``device``: each kernel group takes count x (roofline time + launch floor); a kernel's
    compute time is its main-unit time plus its vector-unit time (see the module docstring)."""
    bw = device.dram_bandwidth
    floor = device.launch_floor_s
    share: dict[Bound, float] = {"compute": 0.0, "memory": 0.0, "launch": 0.0}
    compute_s = memory_s = launch_s = total = work = comm_s = 0.0
    link = device.peer_link()
    for k in cost.kernels:
        roof = device.roof(k.dtype, k.math, tf32=k.tf32)
        c = compute_time(k.flops, roof.flops_per_s)
        if k.vector_flops:
            c += compute_time(k.vector_flops, device.roof("fp32", "vector").flops_per_s)
        m = memory_time(k.bytes, bw)
        x = memory_time(k.link_bytes, link.bytes_per_s) if k.link_bytes and link is not None else 0.0
        r = roofline_time(c, max(m, x))
        share[bound(c, max(m, x), floor)] += k.count * (r + floor)
        compute_s += k.count * c
        memory_s += k.count * m
        comm_s += k.count * x
        launch_s += k.count * floor
        work += k.count * r
        total += k.count * (r + floor)
    main = max(cost.kernels, key=lambda k: k.count * k.total_flops)
    main_roof = device.roof(main.dtype, main.math, tf32=main.tf32)
    rate = attainable_rate(cost.flops, work)
    return Placement(
        device=device.name,
        flops=cost.flops,
        bytes=cost.bytes,
        kernels=cost.kernel_count,
        intensity=intensity(cost.flops, cost.bytes),
        roof_label=main_roof.label,
        peak_flops_per_s=main_roof.flops_per_s,
        bandwidth_bytes_per_s=bw,
        ridge=ridge_point(main_roof.flops_per_s, bw),
        compute_s=compute_s,
        memory_s=memory_s,
        launch_s=launch_s,
        roof_time_s=work,
        time_s=total,
        bound=max(share, key=lambda key: share[key]),
        attainable_flops_per_s=float("inf") if rate is None else rate,
        efficiency=efficiency(work, total),
        roof_source=device.source_of(main_roof),
        comm_s=comm_s,
        comm_modelled=link is not None or not cost.link_bytes,
    )


# ------------------------------------------------------------------------------------------- a group


@dataclass(frozen=True)
class Member:
    """What a group sums of one member: its counts (None: uncounted), times and bound."""

    flops: float | None
    bytes: float | None
    roof_time_s: float
    time_s: float
    bound: str


@dataclass(frozen=True)
class Group:
    flops: float | None  # None when a member is uncounted
    bytes: float | None
    roof_time_s: float
    time_s: float
    intensity: float | None  # None without bytes
    attainable_flops_per_s: float | None
    efficiency: float | None
    bound: str  # '' for an empty group


def group(members: Iterable[Member]) -> Group:
    """The iron law of a group, on its sums (see the module docstring)."""
    members = list(members)
    flops: float | None = 0
    nbytes: float | None = 0
    roof = time = 0.0
    for m in members:
        flops = None if flops is None or m.flops is None else flops + m.flops
        nbytes = None if nbytes is None or m.bytes is None else nbytes + m.bytes
        roof += m.roof_time_s
        time += m.time_s
    held: dict[str, float] = {}
    for m in members:
        held[m.bound] = held.get(m.bound, 0.0) + (m.time_s if time > 0 else 1.0)
    return Group(
        flops=flops,
        bytes=nbytes,
        roof_time_s=roof,
        time_s=time,
        intensity=intensity(flops, nbytes) if flops is not None and nbytes else None,
        attainable_flops_per_s=attainable_rate(flops, roof) if flops is not None else None,
        efficiency=row_efficiency(roof, time),
        bound=max(held, key=lambda b: held[b]) if held else "",
    )


__all__ = [
    "LAUNCH_FACTOR",
    "Bound",
    "Group",
    "Member",
    "Placement",
    "attainable",
    "attainable_rate",
    "bound",
    "compute_time",
    "efficiency",
    "group",
    "intensity",
    "measured_bound",
    "memory_time",
    "min_time",
    "place_cost",
    "ridge_point",
    "roofline_time",
    "row_efficiency",
]
