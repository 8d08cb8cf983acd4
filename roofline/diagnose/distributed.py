"""`roofline diagnose` inside a torchrun launch: every rank counts and times its ops with the usual pipeline, its
collectives are taken apart and timed from the profiler's trace, and rank 0 merges the ranks into one report.

The hooks are small: the pipeline runs unchanged with its timer wrapped (:func:`rank_boundaries`) and its model
file loaded under :func:`tolerant_init`: counting (the collectives split from the compute ops:
roofline.diagnose.collectives.split_records) and timing (the profile keeps its Chrome trace, read for the
collectives' work and the compute intervals, and the join sees compute only).

The process group: initialised here from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR...)
when the model file did not; while the file loads, its own ``init_process_group`` is skipped when the group
already exists. The ranks' results go to rank 0 through ``gather_object`` on a gloo group (the default group
when it is gloo, a gloo side group beside NCCL).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.costs.collectives import CommRoof
from roofline.diagnose import collectives as coll
from roofline.diagnose.pipeline import (
    DEFAULT_ITERS,
    DEFAULT_WARMUP,
    Boundaries,
    DiagnoseOptions,
    DiagnoseResult,
    Timer,
    finding_dict,
    model_file,
    run,
)
from roofline.errors import CalibrationError, DeviceError, UsageError
from roofline.findings.model import ModelFinding

BACKENDS = ("nccl", "gloo")


@dataclass
class Launch:
    rank: int
    world_size: int
    local_rank: int


def launch_from_env(env: dict[str, str] | None = None) -> Launch | None:
    """This rank's place in a torchrun launch, or None outside one."""
    env = dict(os.environ) if env is None else env
    if "RANK" not in env or "WORLD_SIZE" not in env:
        return None
    try:
        return Launch(int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", env["RANK"])))
    except ValueError:
        raise UsageError("RANK, WORLD_SIZE and LOCAL_RANK must be integers (as torchrun sets them)") from None


def default_backend(device_kind: str) -> str:
    return "nccl" if device_kind == "cuda" else "gloo"


def check_backend(backend: str | None, device_kind: str, dist: Any = None) -> str:
    """The backend to use: --backend (nccl | gloo) or the device's default; UsageError when it is unknown, cannot
    drive this device (NCCL on the CPU) or is not in this torch build."""
    chosen = backend or default_backend(device_kind)
    if chosen not in BACKENDS:
        raise UsageError(f"--backend {chosen!r}: use nccl (GPUs) or gloo (CPU or GPUs)")
    if chosen == "nccl" and device_kind != "cuda":
        raise UsageError("--backend nccl: NCCL runs on GPUs; this run is on the CPU: use --backend gloo")
    if dist is not None:
        available = dist.is_nccl_available() if chosen == "nccl" else dist.is_gloo_available()
        if not available:
            raise UsageError(f"--backend {chosen}: not available in this torch build")
    return chosen


def backend_name(reported: str) -> str:
    """'nccl' or 'gloo' from what torch reports ('nccl', 'cpu:gloo,cuda:nccl'): NCCL where the group has it."""
    for name in BACKENDS:
        if name in reported:
            return name
    return reported


def rank_device(device: str | None, launch: Launch, torch: Any) -> str:
    """cpu, or the GPU of this rank: cuda:LOCAL_RANK (one process per GPU)."""
    kind = (device or ("cuda" if torch.cuda.is_available() else "cpu")).split(":")[0]
    if kind == "cpu":
        return "cpu"
    if not torch.cuda.is_available():
        raise DeviceError("--device cuda: torch sees no GPU")
    count = torch.cuda.device_count()
    if launch.local_rank >= count:
        raise UsageError(
            f"local rank {launch.local_rank}: this machine shows {count} GPU(s) (one process per GPU): "
            "launch at most as many ranks as GPUs"
        )
    torch.cuda.set_device(launch.local_rank)
    return f"cuda:{launch.local_rank}"


@dataclass
class Group:
    backend: str
    world_size: int
    rank: int
    side: Any = None  # the gloo group the results travel on (None: the default group)
    initialised_here: bool = False


def init_group(launch: Launch, device: str, backend: str | None) -> Group:
    """The default process group (initialised from torchrun's environment unless it exists) and a gloo group for
    the results."""
    import torch.distributed as dist

    if not dist.is_available():
        raise UsageError("torch.distributed is not available in this torch build")
    kind = "cuda" if device.startswith("cuda") else "cpu"
    here = False
    chosen = check_backend(backend, kind, dist)
    if not dist.is_initialized():
        options: dict[str, Any] = {}
        if chosen == "nccl":
            import torch

            options["device_id"] = torch.device(device)
        dist.init_process_group(backend=chosen, **options)
        here = True
    used = backend_name(str(dist.get_backend()))
    if backend and backend not in used:
        raise UsageError(f"--backend {backend}: the model file initialised the process group with {used}")
    side = None if used == "gloo" else dist.new_group(backend="gloo")
    return Group(used, dist.get_world_size(), dist.get_rank(), side, here)


@contextlib.contextmanager
def tolerant_init() -> Iterator[None]:
    """While the model file loads: its ``dist.init_process_group(...)`` is skipped when the group exists (we
    initialised it from torchrun's environment), so a file written for torchrun loads unchanged."""
    import torch.distributed as dist

    original = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> None:
        if dist.is_initialized():
            return None
        return original(*args, **kwargs)

    dist.init_process_group = init_process_group  # type: ignore[assignment]
    try:
        yield
    finally:
        dist.init_process_group = original  # type: ignore[assignment]


# ------------------------------------------------------------------------------------------------ the stages


@dataclass
class RankState:
    """What the wrapped stages saw on this rank."""

    world_size: int
    calls: list[coll.CollectiveCall] = field(default_factory=list)
    activity: coll.Activity | None = None
    iterations: int = 0
    barrier: Any = None  # called before the profiled window (the process group's barrier); None: nothing

    def synchronise(self) -> None:
        if self.barrier is not None:
            self.barrier()


class RankTimer:
    """The pipeline's timer (``base``) on one rank: counting splits the collectives from the compute ops, the
    profile keeps its trace, read for the collectives."""

    def __init__(self, base: Timer, state: RankState) -> None:
        self.base, self.state = base, state

    def count(self, model: Any, inputs: Any, kwargs: Any, *, mode: str) -> Any:
        records = self.base.count(model, inputs, kwargs, mode=mode)
        compute, self.state.calls = coll.split_records(records, self.state.world_size)
        return compute

    def time(self, *args: Any, **kwargs: Any) -> Any:
        keep = bool(kwargs.pop("keep_trace", False))
        state = self.state

        def profile(step: Any, iters: int, device: str) -> tuple[list[dict[str, Any]], float]:
            from roofline.diagnose.profile import torch_profile

            # NB: the ranks enter the profiled window together, so its first collective holds no skew from the
            # passes before it (each rank counts, warms up, times and starts its profiler on its own)
            events, seconds = torch_profile(step, iters, device, keep_trace=True, sync=state.synchronise)
            trace = next((e.get("trace") for e in events if e.get("kind") == "trace"), None)
            state.activity = coll.trace_activity(trace) if trace is not None else coll.Activity()
            state.iterations = iters
            events = coll.without_communication(events)
            if not keep:
                events = [e for e in events if e.get("kind") != "trace"]
            return events, seconds

        return self.base.time(*args, profile=profile, **kwargs)


def rank_boundaries(base: Boundaries, state: RankState) -> Boundaries:
    """The pipeline's boundaries with counting and timing wrapped (:class:`RankTimer`)."""
    return dataclasses.replace(base, timer=RankTimer(base.timer, state))


# ------------------------------------------------------------------------------------------------ the roof


def comm_roof(
    device_kind: str, device_name: str, backend: str, world_size: int, sheet_name: str = ""
) -> tuple[CommRoof | None, str]:
    """The communication roof: the cached `roofline calibrate --collectives` sweep of this device, backend and
    world size; else (a GPU) the spec sheet's per-GPU link bandwidth, one direction, without latency; else none.
    Returns (roof, a note saying where it came from)."""
    from roofline.measure import collectives as measured

    try:
        cal = measured.find(device_name, backend, world_size)
    except CalibrationError as exc:
        cal, broken = None, f"ignoring a corrupt collectives calibration ({exc}); "
    else:
        broken = ""
    if cal is not None:
        roof = cal.roof("all_reduce")
        if roof is not None:
            return roof, f"communication roof: {roof.note}"
    hint = f"roofline calibrate --collectives --nproc {world_size}"
    if device_kind == "cuda" and sheet_name:
        from roofline.specs.loader import load_registry

        sheet = load_registry().find(sheet_name)
        links = getattr(sheet, "interconnect", None) if sheet is not None else None
        link = None if links is None else (links.nvlink_bandwidth_per_gpu or links.pcie_bandwidth)
        if link is not None:
            which = "NVLink" if link is links.nvlink_bandwidth_per_gpu else "PCIe"
            note = (
                f"{broken}communication roof: the {sheet_name} sheet's {which} bandwidth per GPU, one direction "
                f"({link.per_direction_gb_per_s:g} GB/s; {link.direction} in its source), no latency: a bound; "
                f"measure it with `{hint}`"
            )
            return CommRoof(link.per_direction_gb_per_s * 1e9, 0.0, "spec", note), note
    return None, f"{broken}no communication roof: measure one with `{hint}`"


# ------------------------------------------------------------------------------------------------ the run


@dataclass
class DistributedResult:
    """One rank's diagnosis, and on rank 0 the merged section and the ranks' rows."""

    result: DiagnoseResult
    group: Group
    summary: dict[str, Any]  # this rank's
    merged: dict[str, Any] | None = None  # rank 0: the report's `distributed` section
    rows: list[dict[str, Any]] = field(default_factory=list)  # rank 0: every rank's op rows, with `rank`

    @property
    def rank(self) -> int:
        return self.group.rank

    def report(self, command: str = "") -> Any:
        """Rank 0: the merged report (every rank's rows, the distributed section); other ranks: their own."""
        report = self.result.report(command)
        if self.merged is None:
            return report
        return report.model_copy(update={"rows": self.rows, "distributed": self.merged})


def rank_summary(result: DiagnoseResult, state: RankState, group: Group, launch: Launch) -> dict[str, Any]:
    """What one rank sends to rank 0: its step, its points (with `rank`), and what its trace showed of its
    collectives (the calls counted, the work and compute intervals), which rank 0 matches across the ranks."""
    activity = state.activity or coll.Activity()
    points = [{**p.model_dump(mode="json"), "rank": group.rank} for p in result.placed.points]
    return {
        "rank": group.rank,
        "local_rank": launch.local_rank,
        "host": socket.gethostname(),
        "device": str(result.options.get("device")),
        "iteration_s": result.timing.wall_s,  # uninstrumented
        # under the profiler, where the communication was measured: the shares are of this one
        "profiled_iteration_s": sum(activity.iteration_us) * 1e-6 / len(activity.iteration_us)
        if activity.iteration_us
        else result.timing.wall_s,
        "iterations": state.iterations or int(result.options.get("iters") or 1),
        "calls": list(state.calls),
        "work": list(activity.work),
        "compute": list(activity.compute),
        "points": points,
    }


#: what a rank's entry in the report keeps of its summary (the raw trace facts stay out)
_RAW = ("points", "calls", "work", "compute", "iterations")


def rank_entries(
    summaries: Sequence[dict[str, Any]], group: Group, roof: CommRoof | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Rank 0: the ranks' summaries with their collectives matched across the ranks (match_ranks: each call's
    transfer and wait), their rows (on the transfer) and their step's communication: transfer, overlapped and
    exposed, and the wait apart. Returns (one entry per rank, with `collectives`; notes)."""
    ordered = sorted(summaries, key=lambda s: s["rank"])
    floor = None if roof is None else coll.roof_floor(roof, group.world_size)
    matched, notes = coll.match_ranks({s["rank"]: s.get("work", []) for s in ordered}, floor)
    early = sum(1 for w in matched.get(ordered[0]["rank"], []) if w.early) if ordered else 0
    if early:
        notes.append(
            f"{early} call(s) took their last rank less than the communication roof allows (its latency, or their "
            "bytes at its bus bandwidth): that rank found part of the message already sent by its peers (NCCL's "
            "buffers); their transfer is counted at the roof's time"
        )
    entries = []
    for s in ordered:
        work = matched.get(s["rank"], [])
        n = int(s.get("iterations") or 1)
        rows, row_notes = coll.collective_rows(
            s.get("calls", []), work, n, group.world_size, backend=group.backend, roof=roof, rank=s["rank"]
        )
        compute = s.get("compute", [])
        over = coll.overlap([w.transfer_interval for w in work], compute, n)
        waited = coll.waits(work, compute, n)
        entry = {k: v for k, v in s.items() if k not in _RAW}
        entry.update(
            communication_s=over.communication_s,  # the transfers
            overlapped_s=over.overlapped_s,
            exposed_s=over.exposed_s,
            wait_s=waited.wait_s,  # for the last rank, apart from the transfers
            exposed_wait_s=waited.exposed_s,
            collectives=rows,
            notes=row_notes,
        )
        entries.append(entry)
    return entries, notes


def _collectives_stage(facts: dict[str, Any]) -> list[ModelFinding]:
    """The findings' collectives stage (roofline.findings.rules.collectives) on ``facts``."""
    from roofline.findings.context import FindingContext
    from roofline.findings.rules import produce_all

    found = produce_all(FindingContext(distributed=facts), ("collectives",))
    return [f for f in found if isinstance(f, ModelFinding)]


def _scale(entry: dict[str, Any]) -> float:
    """The uninstrumented step over the profiled one: the communication was measured under the profiler, its share
    of the profiled iteration is applied to the uninstrumented one."""
    profiled = float(entry.get("profiled_iteration_s") or 0.0)
    return float(entry["iteration_s"]) / profiled if profiled > 0 else 1.0


def rank_findings(entry: dict[str, Any], roof: CommRoof | None) -> list[ModelFinding]:
    """The communication findings of one rank's entry (rank_entries), on its uninstrumented step."""
    step, scale = float(entry["iteration_s"]), _scale(entry)
    return _collectives_stage(
        {
            "step_s": step,
            "exposed_s": min(float(entry["exposed_s"]) * scale, step),
            "communication_s": float(entry["communication_s"]) * scale,
            "rows": entry["collectives"],
            "latency_s": None if roof is None else roof.latency_s,
            "bus_bytes_per_s": None if roof is None else roof.bus_bytes_per_s,
            "rank": entry["rank"],
        }
    )


def run_findings(entries: Sequence[dict[str, Any]], skew: dict[str, Any] | None) -> list[ModelFinding]:
    """The run's findings across the ranks: their waits for each other, and the stragglers."""
    waits = {}
    for entry in entries:
        step, scale = float(entry["iteration_s"]), _scale(entry)
        exposed = min(float(entry.get("exposed_wait_s") or 0.0) * scale, step)
        waits[int(entry["rank"])] = (step, exposed, float(entry.get("wait_s") or 0.0) * scale)
    return _collectives_stage({"waits": waits, "skew": skew})


def merge(summaries: Sequence[dict[str, Any]], group: Group, roof: CommRoof | None, roof_note: str) -> dict[str, Any]:
    """Rank 0: the ranks' summaries -> the report's `distributed` section (world, backend, per-rank times, the
    collectives table on the transfer, each rank's wait, skew, the communication findings)."""
    entries, notes = rank_entries(summaries, group, roof)
    times = {e["rank"]: float(e["iteration_s"]) for e in entries}
    spread = coll.skew(times)
    skew = None if spread is None else dataclasses.asdict(spread) | {"stragglers": list(spread.stragglers)}
    findings = []
    for entry in entries:
        for f in rank_findings(entry, roof):
            findings.append({**finding_dict(f), "rank": entry["rank"]})
    for f in run_findings(entries, skew):
        findings.append({**finding_dict(f), "rank": None})
    findings.sort(key=lambda f: -(f.get("saving_s") or 0.0))
    return {
        "world_size": group.world_size,
        "backend": group.backend,
        "roof": None
        if roof is None
        else {"source": roof.source, "bus_bytes_per_s": roof.bus_bytes_per_s, "latency_s": roof.latency_s},
        "roof_note": roof_note,
        "ranks": [{k: v for k, v in e.items() if k != "collectives"} for e in entries],
        "skew": skew,
        "collectives": [row for e in entries for row in e["collectives"]],
        "findings": findings,
        "notes": notes,
    }


def _barrier(group: Group, device: str) -> Any:
    """The ranks' meeting point before the profiled window: this rank's GPU work done, then a barrier on the gloo
    group the results travel on (no GPU work of its own)."""

    def meet() -> None:
        import torch
        import torch.distributed as dist

        if device.startswith("cuda"):
            torch.cuda.synchronize(torch.device(device))
        dist.barrier(group=group.side)

    return meet


def ranked_with_communication(
    findings: Sequence[ModelFinding], section: dict[str, Any], roof: CommRoof | None, rank: int = 0
) -> list[ModelFinding]:
    """``rank``'s op findings and its communication findings (exposed transfer, wait, small messages, and the
    stragglers of the run) in one list ranked by saving: exposed communication competes with the ops by its share
    of the step."""
    from roofline.findings.base import rank as by_saving

    entry = next((e for e in section.get("ranks", []) if e.get("rank") == rank), None)
    extra: list[ModelFinding] = []
    if entry is not None:
        rows = [r for r in section.get("collectives", []) if r.get("rank") == rank]
        extra += rank_findings({**entry, "collectives": rows}, roof)
    extra += run_findings(section.get("ranks", []), section.get("skew"))
    return by_saving([*findings, *extra])


def diagnose_rank(
    path: str | Path,
    options: DiagnoseOptions,
    *,
    launch: Launch,
    backend: str | None = None,
    boundaries: Boundaries | None = None,
) -> DistributedResult:
    """Diagnose this rank of a torchrun launch (``options``: the pipeline's, as `roofline diagnose` passes them;
    its device: --device) and, on rank 0, merge every rank's result."""
    import torch
    import torch.distributed as dist

    torch_device = rank_device(options.device, launch, torch)
    group = init_group(launch, torch_device, backend)
    state = RankState(group.world_size, barrier=_barrier(group, torch_device))
    # NB: every rank runs the same number of warm-up and profiled iterations: counts sized from each rank's own
    # clock could differ, and ranks that issue different numbers of collectives hang (or pair the wrong calls)
    options = dataclasses.replace(
        options,
        device=torch_device,
        warmup=DEFAULT_WARMUP if options.warmup is None else options.warmup,
        iters=DEFAULT_ITERS if options.iters is None else options.iters,
    )
    file = model_file(path, options)

    def load(device: str) -> Any:
        with tolerant_init():
            return file(device)

    result = run(load, Path(path), options, boundaries=rank_boundaries(boundaries or Boundaries(), state))
    kind = "cuda" if torch_device.startswith("cuda") else "cpu"
    name = torch.cuda.get_device_name(torch.device(torch_device)) if kind == "cuda" else "cpu"
    roof, roof_note = comm_roof(kind, name, group.backend, group.world_size, result.device.name)
    summary = rank_summary(result, state, group, launch)
    gathered: list[Any] | None = [None] * group.world_size if group.rank == 0 else None
    dist.gather_object(summary, gathered, dst=0, group=group.side)
    out = DistributedResult(result, group, summary)
    if group.rank == 0 and gathered is not None:
        out.merged = merge(gathered, group, roof, roof_note)
        out.rows = [p for s in sorted(gathered, key=lambda s: s["rank"]) for p in s["points"]]
        out.result.findings = ranked_with_communication(out.result.findings, out.merged, roof, rank=0)
    dist.barrier(group=group.side)
    if group.initialised_here:
        dist.destroy_process_group()
    return out


__all__ = [
    "BACKENDS",
    "DistributedResult",
    "Group",
    "Launch",
    "RankState",
    "RankTimer",
    "check_backend",
    "comm_roof",
    "diagnose_rank",
    "init_group",
    "launch_from_env",
    "merge",
    "rank_boundaries",
    "rank_entries",
    "rank_findings",
    "rank_summary",
    "ranked_with_communication",
    "run_findings",
    "tolerant_init",
]
