"""The cost of a collective (all-reduce, all-gather, reduce-scatter, all-to-all, broadcast, send/recv) from its
shapes only, and its place on the communication roof.

A collective moves bytes between ranks instead of doing math, so it has no FLOPs and no intensity: its roof is the
interconnect's. The definitions are nccl-tests' (doc/PERFORMANCE.md of NVIDIA/nccl-tests):

- the message size S (bytes) of one call; the algorithm bandwidth algbw = S / t;
- the bus bandwidth busbw = algbw x factor, the factor making busbw comparable with the link's bandwidth whatever
  the algorithm: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; broadcast, reduce, send and
  recv 1 (n ranks in the group);
- the communication roof of a call: max(latency, S x factor / bus bandwidth), the roofline's max() of the
  compute roof turned to messages: a call takes at least the shortest call measured (latency) and at least its bus
  bytes at the best bus bandwidth measured (``roofline calibrate --collectives`` measures both; the spec sheet's
  link bandwidth is the fallback, and the ceiling a measured roof must stay under).

S per op (the message, as nccl-tests counts it): all-reduce, broadcast, reduce, send, recv: the tensor's bytes;
all-gather: the gathered output (n x the input); reduce-scatter: the input (n x the output); all-to-all: the input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: the collective kinds we recognise, in the order a table lists them
KINDS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "send",
    "recv",
    "barrier",
)

#: a dispatcher op (the counting pass's and the profiler's spelling) -> its kind. c10d: torch.distributed's
#: in-place ops (what dist.all_reduce and DDP's reducer dispatch); _c10d_functional: the functional collectives
#: (DTensor, FSDP2, torch.compile).
OPS = {
    "c10d::allreduce_": "all_reduce",
    "c10d::allreduce_coalesced_": "all_reduce",
    "c10d::allgather_": "all_gather",
    "c10d::_allgather_base_": "all_gather",
    "c10d::allgather_coalesced_": "all_gather",
    "c10d::allgather_into_tensor_coalesced_": "all_gather",
    "c10d::reduce_scatter_": "reduce_scatter",
    "c10d::_reduce_scatter_base_": "reduce_scatter",
    "c10d::reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "c10d::alltoall_": "all_to_all",
    "c10d::alltoall_base_": "all_to_all",
    "c10d::broadcast_": "broadcast",
    "c10d::reduce_": "reduce",
    "c10d::gather_": "gather",
    "c10d::scatter_": "scatter",
    "c10d::send": "send",
    "c10d::recv_": "recv",
    "c10d::recv_any_source_": "recv",
    "c10d::barrier": "barrier",
    "_c10d_functional::all_reduce": "all_reduce",
    "_c10d_functional::all_reduce_": "all_reduce",
    "_c10d_functional::all_reduce_coalesced": "all_reduce",
    "_c10d_functional::all_gather_into_tensor": "all_gather",
    "_c10d_functional::all_gather_into_tensor_out": "all_gather",
    "_c10d_functional::all_gather_into_tensor_coalesced": "all_gather",
    "_c10d_functional::reduce_scatter_tensor": "reduce_scatter",
    "_c10d_functional::reduce_scatter_tensor_coalesced": "reduce_scatter",
    "_c10d_functional::all_to_all_single": "all_to_all",
    "_c10d_functional::broadcast": "broadcast",
    "_c10d_functional::broadcast_": "broadcast",
}

#: ops of a collective's bookkeeping that move no message (waiting for one): neither compute nor a collective
WAITS = frozenset({"_c10d_functional::wait_tensor", "c10d::wait", "c10d_functional::wait_tensor"})

#: how the backends name a collective's work in the profiler: gloo's and NCCL's record_function names
#: ('gloo:all_reduce', 'nccl:all_gather') and NCCL's kernels ('ncclDevKernel_AllReduce_Sum_f32_RING_LL',
#: 'ncclKernel_AllGather_RING_LL_Sum_int8_t'); send/recv and all-to-all share NCCL's SendRecv kernel.
_WORK_NAMES = {
    "all_reduce": "all_reduce",
    "allreduce": "all_reduce",
    "all_gather": "all_gather",
    "allgather": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "_allgather_base": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "all_to_all": "all_to_all",
    "alltoall": "all_to_all",
    "all_to_allv": "all_to_all",
    "alltoall_base": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "send": "send",
    "recv": "recv",
    "barrier": "barrier",
}
_KERNEL_NAMES = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "SendRecv": "sendrecv",
    "Send": "sendrecv",
    "Recv": "sendrecv",
}

#: kinds that share one NCCL kernel name: a kernel of class 'sendrecv' may be any of these
SENDRECV = frozenset({"all_to_all", "send", "recv", "gather", "scatter"})


def kind_of(op: str) -> str | None:
    """The collective kind of a dispatcher op ('c10d::allreduce_' -> 'all_reduce'); None: not a collective."""
    return OPS.get(op)


def is_communication_op(name: str) -> bool:
    """A profiler or dispatcher op that belongs to communication (a collective, its wait, the profiler's
    record_param_comms): never counted as compute."""
    return (
        name in OPS
        or name in WAITS
        or name.startswith(("c10d::", "_c10d_functional::", "c10d_functional::"))
        or name == "record_param_comms"
    )


def work_kind(name: str) -> str | None:
    """The kind of a backend's work event: 'gloo:all_reduce' / 'nccl:all_gather' (record_function names) ->
    'all_reduce' / 'all_gather'; an NCCL kernel ('ncclDevKernel_AllReduce_Sum_f32_RING_LL') -> its kind, or
    'sendrecv' for the kernel all-to-all, send and recv share, 'nccl' for an NCCL kernel named otherwise
    ('ncclDevKernel_Generic'). None: not a collective's work."""
    for prefix in ("gloo:", "nccl:", "ucc:", "mpi:"):
        if name.startswith(prefix):
            return _WORK_NAMES.get(name[len(prefix) :].split("(")[0].strip())
    for prefix in ("ncclDevKernel_", "ncclKernel_"):
        if name.startswith(prefix):
            word = name[len(prefix) :].split("_")[0].split("(")[0]
            return _KERNEL_NAMES.get(word, "nccl")  # NB: a kernel NCCL does not name by its collective (Generic)
    return None


def work_class(kind: str) -> str:
    """The class a counted kind is matched to work events by: 'sendrecv' for the kinds NCCL runs as SendRecv."""
    return "sendrecv" if kind in SENDRECV else kind


def bus_factor(kind: str, ranks: int) -> float:
    """nccl-tests' busbw / algbw for ``kind`` on ``ranks`` ranks: all-reduce 2(n-1)/n; all-gather,
    reduce-scatter, all-to-all, gather, scatter (n-1)/n; broadcast, reduce, send, recv 1; a barrier 0 (no bytes).

    NB: a group of one rank moves nothing: factor 0 for the collectives whose factor has (n-1)."""
    if ranks < 1:
        raise ValueError(f"ranks {ranks}: at least 1")
    n = ranks
    if kind == "all_reduce":
        return 2 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return (n - 1) / n
    if kind in ("broadcast", "reduce", "send", "recv"):
        return 1.0
    if kind == "barrier":
        return 0.0
    raise ValueError(f"unknown collective kind {kind!r}")


def numel(shape: Sequence[int]) -> int:
    return math.prod(int(s) for s in shape)


def message_bytes(
    op: str,
    input_shapes: Sequence[Sequence[int]],
    output_shapes: Sequence[Sequence[int]],
    itemsize: int,
    ranks: int,
) -> int:
    """S, the message of one call in nccl-tests' sense, from the op's tensor shapes (as the counting pass records
    them: tensor arguments in schema order, lists flattened) and the element size.

    NB: the in-place c10d ops take their outputs as arguments: for all-gather and reduce-scatter the flattened
    inputs hold the n outputs (inputs) beside the one input (output), so S = (n / (n + 1)) of all of them; the
    functional ops return their output, which gives S directly."""
    kind = kind_of(op)
    if kind is None:
        raise ValueError(f"{op}: not a collective")
    every = sum(numel(s) for s in input_shapes)
    if kind == "barrier":
        return 0
    functional = op.startswith("_c10d_functional::")
    if kind == "all_gather":
        if functional:
            return sum(numel(s) for s in output_shapes) * itemsize
        if op == "c10d::_allgather_base_":  # (output, input)
            return numel(input_shapes[0]) * itemsize
        return every * ranks // (ranks + 1) * itemsize  # NB: n outputs + 1 input per tensor, flattened
    if kind == "reduce_scatter":
        if functional:
            return numel(input_shapes[0]) * itemsize
        if op == "c10d::_reduce_scatter_base_":  # (output, input)
            return numel(input_shapes[1]) * itemsize
        return every * ranks // (ranks + 1) * itemsize  # NB: 1 output + n inputs per tensor, flattened
    if kind == "all_to_all":
        if functional or op == "c10d::alltoall_base_":  # (output, input) / (input, ...)
            return numel(input_shapes[-1 if not functional else 0]) * itemsize
        return every // 2 * itemsize  # NB: the outputs list and the inputs list, of equal sizes
    if kind == "gather":  # (outputs on the root only, input): n x the input
        return numel(input_shapes[-1]) * ranks * itemsize
    if kind == "scatter":  # (output, inputs on the root only): n x the output
        return numel(input_shapes[0]) * ranks * itemsize
    return every * itemsize  # all-reduce, broadcast, reduce, send, recv: the tensor(s), in place


@dataclass(frozen=True)
class CommRoof:
    """The communication roof: a call of bus bytes B takes at least max(``latency_s``, B / ``bus_bytes_per_s``).

    The roofline's max(), as for compute and memory: the latency is the floor of a small message (the shortest call
    measured), the bus bandwidth the slope of a large one (the best measured). A sum (latency + B / bandwidth) would
    be a tighter curve only if the bandwidth were fitted above every measured point's, which a roof measured on
    this machine must not be (see :func:`fit_roof`).

    ``source``: 'measured' (roofline calibrate --collectives), 'spec' (the sheet's link bandwidth, no latency)."""

    bus_bytes_per_s: float
    latency_s: float
    source: str
    note: str = ""

    def time_s(self, kind: str, size: int, ranks: int) -> float:
        """The roof time of one call of ``kind`` moving ``size`` bytes (S) on ``ranks`` ranks."""
        return roof_time(kind, size, ranks, self.latency_s, self.bus_bytes_per_s)

    def bus_bandwidth(self, bus_bytes: float) -> float:
        """The bus bandwidth the roof allows a call of ``bus_bytes`` (S x factor): bus_bytes / max(latency, bus_bytes
        / busbw) = min(bus_bytes / latency, busbw), the ceiling curve a chart draws."""
        if bus_bytes <= 0:
            return 0.0
        return bus_bytes / max(self.latency_s, bus_bytes / self.bus_bytes_per_s)

    @property
    def knee_bus_bytes(self) -> float:
        """The bus bytes where the two parts of the roof meet (latency x bus bandwidth): below, a call's time is its
        latency; above, its bytes."""
        return self.latency_s * self.bus_bytes_per_s


def roof_time(kind: str, size: int, ranks: int, latency_s: float, bus_bytes_per_s: float) -> float:
    """max(latency, S x factor / busbw): the time the communication roof allows one call."""
    if bus_bytes_per_s <= 0:
        raise ValueError("bus bandwidth must be positive")
    return max(latency_s, size * bus_factor(kind, ranks) / bus_bytes_per_s)


def algbw(size: int, time_s: float) -> float | None:
    """Algorithm bandwidth S / t (None without a time)."""
    return size / time_s if time_s > 0 else None


def busbw(kind: str, size: int, time_s: float, ranks: int) -> float | None:
    """Bus bandwidth: S / t x factor (None without a time)."""
    rate = algbw(size, time_s)
    return None if rate is None else rate * bus_factor(kind, ranks)


def fit_roof(points: Sequence[tuple[int, float]], kind: str, ranks: int) -> tuple[float, float]:
    """(latency s, bus bandwidth B/s) of the communication roof under measured (S, t) points of one kind.

    The bus bandwidth is the best measured (max over points of S x factor / t: a large message's), the latency the
    shortest call measured (a small message's). So the roof max(latency, S x factor / bandwidth) never promises
    more than was measured, every point is on or above it, and points on such a roof (a flat part, then a slope)
    give it back exactly.

    NB: a sum latency + bytes / bandwidth cannot meet all three: with every point on or above it and the bandwidth
    at most the best measured, its latency is 0 (the point of the best bandwidth allows no more), and a latency
    fitted from the small messages forces a bandwidth above any measured (the fit before this one reached 4.8e9
    GB/s on two H100s)."""
    factor = bus_factor(kind, ranks)
    measured = [(size * factor, t) for size, t in points if t > 0 and size > 0]
    if not measured or factor <= 0:
        raise ValueError("no point with bytes and a time to fit a communication roof to")
    latency = min(t for _, t in measured)
    bandwidth = max(x / t for x, t in measured)
    return latency, bandwidth


def check_under_link(bus_bytes_per_s: float, link_bytes_per_s: float | None, source: str = "") -> None:
    """ValueError when a fitted bus bandwidth is above the interconnect's peak per direction (the spec sheet's):
    a measurement that no link can carry (a timing that missed the wait of a rank, a cache hit, a wrong size)."""
    if link_bytes_per_s and bus_bytes_per_s > link_bytes_per_s:
        where = f" ({source})" if source else ""
        raise ValueError(
            f"the fitted bus bandwidth {bus_bytes_per_s / 1e9:.4g} GB/s is above the link's peak "
            f"{link_bytes_per_s / 1e9:.4g} GB/s per direction{where}: no interconnect carries that; the sweep's "
            "timing is wrong"
        )


__all__ = [
    "KINDS",
    "OPS",
    "CommRoof",
    "algbw",
    "bus_factor",
    "busbw",
    "check_under_link",
    "fit_roof",
    "is_communication_op",
    "kind_of",
    "message_bytes",
    "roof_time",
    "work_class",
    "work_kind",
]
