"""The communication ceilings: all-reduce (and all-gather) bus bandwidth over message sizes across the ranks of a
process group (``roofline calibrate --collectives``), and the cached document that holds them.

The sweep needs an initialised process group (torchrun, or ``roofline calibrate --collectives --nproc N``). It
follows nccl-tests' method: at each size a warm-up (5 calls), a barrier, N calls back to back between two CUDA
events, the time of a call the elapsed time / N, the slowest rank's (a collective ends when its last rank does), the
median of 9 such batches; the algorithm and bus bandwidths are nccl-tests' (:mod:`roofline.costs.collectives`).
N is nccl-tests' ``-n`` default (20), more where 20 calls take under 2 ms (so that a batch is not one passing
hiccup of the host or the link). On a GPU the same calls are also replayed from a CUDA graph (nccl-tests' ``-G``),
which takes the host's launch of each call out of the time: what the link and NCCL can do; the two methods' batches
alternate, so that a slow moment falls on both. A point keeps the shorter of the two (both are stored); above a few
MiB they agree,
below it the graph's is shorter by the host's launch time per call. The roof of a kind is fitted under its points
(``fit_roof``): the best bus bandwidth measured and the shortest call; a roof above the spec sheet's link peak per
direction (``link``) is an error (CalibrationError), not a ceiling.

The document is versioned JSON beside the calibrations (``ROOFLINE_CACHE_DIR``), one per (device, backend, world
size); reading is tolerant (unknown keys ignored), a foreign schema or version is a CalibrationError. torch is
imported inside the measuring functions only.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roofline.costs.collectives import CommRoof, bus_factor, check_under_link, fit_roof
from roofline.errors import CalibrationError
from roofline.fileio import atomic_write_text
from roofline.measure.calibration import cache_dir
from roofline.samples import median
from roofline.version import __version__
from roofline.yamlio import dumps_json, parse_json

SCHEMA = "roofline.collectives"
VERSION = 1
FILE_PREFIX = "collectives-"

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
#: message sizes of the sweep: GPUs 8 KiB .. 1 GiB, the CPU (gloo) 4 KiB .. 4 MiB; x4 apart
GPU_SIZES = (*(8 * KIB * 4**i for i in range(9)), GIB)
CPU_SIZES = tuple(4 * KIB * 4**i for i in range(6))
KINDS = ("all_reduce", "all_gather")
#: a timed batch lasts at least this long (more calls than nccl-tests' 20 where those are shorter); at most this many
MIN_BATCH_S, MAX_CALLS = 2e-3, 1000


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True, populate_by_name=True)


class CollectivePoint(_Model):
    kind: str
    bytes: int  # S, the message (nccl-tests)
    time_s: float  # one call, the slowest rank's: the shorter of the two methods
    algbw_bytes_per_s: float
    busbw_bytes_per_s: float
    iters: int = 0
    eager_time_s: float | None = None  # calls launched one by one from the host (nccl-tests' default)
    graph_time_s: float | None = None  # the same calls replayed from a CUDA graph (nccl-tests -G); None: not run


class LinkPeak(_Model):
    """The interconnect's peak per direction and per GPU, from the spec sheet: the ceiling a roof stays under."""

    bytes_per_s: float
    source: str


class KindRoof(_Model):
    kind: str
    latency_s: float
    bus_bytes_per_s: float


class CollectivesCalibration(_Model):
    schema_: str = Field(SCHEMA, alias="schema")
    version: int = VERSION
    created_utc: datetime
    tool_version: str = __version__
    device: str  # 'NVIDIA H200' or 'cpu'
    device_kind: str  # 'cuda' | 'cpu'
    backend: str  # 'nccl' | 'gloo'
    world_size: int
    points: list[CollectivePoint] = Field(default_factory=list)
    roofs: list[KindRoof] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    quick: bool = False  # small sizes for tests: not a ceiling
    link: LinkPeak | None = None  # the sheet's link peak per direction (GPUs with a sheet that has one)

    def roof(self, kind: str = "all_reduce") -> CommRoof | None:
        """The communication roof of ``kind`` (all-reduce's for kinds not measured)."""
        found = next((r for r in self.roofs if r.kind == kind), None) or next(
            (r for r in self.roofs if r.kind == "all_reduce"), None
        )
        if found is None:
            return None
        return CommRoof(
            found.bus_bytes_per_s,
            found.latency_s,
            "measured",
            f"roofline calibrate --collectives ({self.backend}, {self.world_size} ranks, "
            f"{self.created_utc:%Y-%m-%d}, {found.kind})",
        )

    def to_json(self) -> str:
        return dumps_json(self.model_dump(mode="json", by_alias=True), indent=2) + "\n"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "device"


def cache_path(device: str, backend: str, world_size: int, directory: Path | None = None) -> Path:
    return (directory or cache_dir()) / f"{FILE_PREFIX}{_slug(device)}-{backend}-n{world_size}.json"


def save(cal: CollectivesCalibration, directory: Path | None = None) -> Path:
    path = cache_path(cal.device, cal.backend, cal.world_size, directory)
    atomic_write_text(path, cal.to_json())
    return path


def parse(text: str, source: str = "collectives calibration") -> CollectivesCalibration:
    data = parse_json(text, source, CalibrationError, "not JSON", "run `roofline calibrate` again")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise CalibrationError(f"{source}: not a roofline collectives calibration")
    if data.get("version") != VERSION:
        raise CalibrationError(f"{source}: version {data.get('version')!r}, this roofline reads version {VERSION}")
    try:
        return CollectivesCalibration.model_validate(data)
    except RecursionError:
        raise CalibrationError(f"{source}: invalid: nested too deeply") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise CalibrationError(f"{source}: invalid: {where}: {first.get('msg')}") from None


def find(device: str, backend: str, world_size: int, directory: Path | None = None) -> CollectivesCalibration | None:
    """The cached sweep for this device, backend and world size; None when there is none. CalibrationError when
    the file is corrupt."""
    path = cache_path(device, backend, world_size, directory)
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"{path}: cannot read ({exc})", path) from None
    return parse(text, str(path))


def from_points(
    points: Sequence[CollectivePoint],
    *,
    device: str,
    device_kind: str,
    backend: str,
    world_size: int,
    link: LinkPeak | None = None,
    **kw: Any,
) -> CollectivesCalibration:
    """The document of a sweep: its points and each kind's roof fitted under them. CalibrationError when a fitted
    roof is above ``link`` (the sheet's peak per direction): that sweep measured something no link carries."""
    roofs = []
    for kind in dict.fromkeys(p.kind for p in points):
        measured = [(p.bytes, p.time_s) for p in points if p.kind == kind]
        try:
            latency, bandwidth = fit_roof(measured, kind, world_size)
        except ValueError:
            continue
        try:
            check_under_link(
                bandwidth, None if link is None else link.bytes_per_s, None if link is None else link.source
            )
        except ValueError as exc:
            raise CalibrationError(f"{kind}: {exc}") from None
        roofs.append(KindRoof(kind=kind, latency_s=latency, bus_bytes_per_s=bandwidth))
    return CollectivesCalibration(
        created_utc=datetime.now(timezone.utc),
        device=device,
        device_kind=device_kind,
        backend=backend,
        world_size=world_size,
        points=list(points),
        roofs=roofs,
        link=link,
        **kw,
    )


def point(
    kind: str, size: int, time_s: float, ranks: int, iters: int = 0, *, graph_time_s: float | None = None
) -> CollectivePoint:
    """A measured size: ``time_s`` the calls launched from the host, ``graph_time_s`` the same from a CUDA graph;
    the point's time is the shorter."""
    best = min(time_s, graph_time_s) if graph_time_s else time_s
    alg = size / best
    return CollectivePoint(
        kind=kind,
        bytes=size,
        time_s=best,
        algbw_bytes_per_s=alg,
        busbw_bytes_per_s=alg * bus_factor(kind, ranks),
        iters=iters,
        eager_time_s=time_s,
        graph_time_s=graph_time_s,
    )


# ------------------------------------------------------------------------------------------------ torch


def sweep(
    *,
    device: str,
    sizes: Sequence[int] | None = None,
    kinds: Sequence[str] = KINDS,
    warmup: int = 5,
    iters: int = 20,
    repeats: int = 9,
    graphs: bool | None = None,
    min_batch_s: float = MIN_BATCH_S,
    group: Any = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[list[CollectivePoint], list[str]]:
    """Time each kind at each message size on the initialised process group, as nccl-tests does: ``warmup`` calls,
    a barrier, then ``iters`` back-to-back calls timed, more where they take under ``min_batch_s`` (CUDA events on a
    GPU, the host clock on the CPU); a call's time is the slowest rank's (an all-reduce MAX of the ranks' times),
    the median of ``repeats`` such batches.
    ``graphs`` (default: on a GPU): the same calls also replayed from a CUDA graph. Every rank returns the same
    points, and notes."""
    import torch
    import torch.distributed as dist

    cuda = device.startswith("cuda")
    if graphs is None:  # NB: ROOFLINE_COLLECTIVE_GRAPHS=0 turns the replay off (a torch or driver that cannot)
        graphs = os.environ.get("ROOFLINE_COLLECTIVE_GRAPHS", "1") != "0"
    use_graphs = graphs and cuda
    notes: list[str] = []
    n = dist.get_world_size(group)
    sizes = list(sizes or (GPU_SIZES if cuda else CPU_SIZES))
    points: list[CollectivePoint] = []
    steps = [(k, s) for k in kinds for s in sizes]
    for index, (kind, size) in enumerate(steps):
        if progress is not None:
            progress(f"{kind} {size} B", index, len(steps))
        numel = max(size // 4 // n * n, n)  # fp32, a multiple of the ranks
        if kind == "all_gather":
            part = torch.ones(numel // n, device=device)
            out = torch.empty(numel, device=device)

            def call(part: Any = part, out: Any = out) -> None:
                dist.all_gather_into_tensor(out, part, group=group)
        else:
            buffer = torch.ones(numel, device=device)

            def call(buffer: Any = buffer) -> None:
                dist.all_reduce(buffer, group=group)

        for _ in range(warmup):
            call()
        probe = _slowest(_timed(call, iters, device, dist, group), device, dist, group) / iters
        count = min(max(iters, math.ceil(min_batch_s / max(probe, 1e-9))), MAX_CALLS)  # every rank: the same
        replay = None
        if use_graphs:
            replay, why = _captured(call, count, device, dist, group)
            if why:
                notes.append(f"CUDA graphs: {why}; the sweep times calls launched from the host only")
                use_graphs = False
        eager_batches: list[float] = []
        graph_batches: list[float] = []
        for _ in range(repeats):  # NB: alternated, so that a slow moment of the host or the link falls on both
            eager_batches.append(_slowest(_timed(call, count, device, dist, group), device, dist, group))
            if replay is not None:
                graph_batches.append(_slowest(_timed(replay, 1, device, dist, group), device, dist, group))
        del replay
        eager = median(eager_batches)
        graph = median(graph_batches) if graph_batches else None
        points.append(
            point(kind, numel * 4, eager / count, n, count, graph_time_s=None if graph is None else graph / count)
        )
    if progress is not None:
        progress("done", len(steps), len(steps))
    return points, notes


def _slowest(seconds: float, device: str, dist: Any, group: Any) -> float:
    import torch

    slowest = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    return float(slowest.item())


def _captured(
    call: Callable[[], None], iters: int, device: str, dist: Any, group: Any
) -> tuple[Callable[[], None] | None, str]:
    """``iters`` calls captured in one CUDA graph and replayed once to warm up: the graph's replay, or (None, why)
    when a rank could not capture them (every rank then skips the replay)."""
    import torch

    graph = torch.cuda.CUDAGraph()
    why = ""
    stream = torch.cuda.Stream(device=device)
    try:
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            call()  # NB: a call on the capture stream before the capture, as torch's graph docs ask
        torch.cuda.current_stream(device).wait_stream(stream)
        torch.cuda.synchronize(device)
        with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
            for _ in range(iters):
                call()
    except Exception as exc:  # NB: a torch or NCCL build that cannot capture collectives
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
    captured = torch.tensor([0.0 if why else 1.0], dtype=torch.float64, device=device)
    dist.all_reduce(captured, op=dist.ReduceOp.MIN, group=group)
    if captured.item() < 1.0:
        return None, why or "another rank could not capture the calls"
    graph.replay()
    return graph.replay, ""


def _timed(call: Callable[[], None], iters: int, device: str, dist: Any, group: Any) -> float:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
        dist.barrier(group=group)
        torch.cuda.synchronize()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(iters):
            call()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) * 1e-3
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        call()
    return time.perf_counter() - start


__all__ = [
    "CPU_SIZES",
    "GPU_SIZES",
    "CollectivePoint",
    "CollectivesCalibration",
    "LinkPeak",
    "cache_path",
    "find",
    "from_points",
    "parse",
    "point",
    "save",
    "sweep",
]
