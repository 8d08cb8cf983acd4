"""`roofline diagnose` as one function: load -> count -> time -> place -> diagnose -> report value. No printing.

:func:`run` is the one diagnosis; :func:`diagnose` gives it a model file (the CLI, the gate), :func:`diagnose_model`
a model in memory (``roofline.diagnose(model, inputs)``); :func:`conclude` (place and diagnose) also ends a
profiled region of a loop (roofline.diagnose.region).

Each stage is injectable (:class:`Stages`), so tests replace the torch-touching ones (timing, the device's roofs)
with fakes. The device and its roofs are resolved by roofline.roofs, as for `roofline bench`: a GPU's spec sheet
(its cached calibration replaces the measured roofs, --roofs auto), the CPU's measured roofs (roofline calibrate).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

from roofline import roofs as roof_resolver
from roofline.device import Device
from roofline.diagnose.execute import user_code
from roofline.diagnose.place import place
from roofline.errors import RooflineError, TimedOut, UsageError, WorkloadError
from roofline.findings.base import rank
from roofline.findings.combine import combined
from roofline.findings.context import FindingContext
from roofline.findings.model import ModelContext, ModelFinding
from roofline.findings.registry import Producer, producers
from roofline.findings.rules import RULES, produce_all
from roofline.report.records import OpRecord, Timing, floor_seconds
from roofline.report.rows import Placed
from roofline.report.schema import Report, new_report

Progress = Callable[[str], None]  # told the stage that starts: 'loading model.py', 'counting ops', ...


def _load(path: Any, **kwargs: Any) -> Any:
    from roofline.diagnose.loader import load_model

    return load_model(path, **kwargs)


def _count(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], *, mode: str = "inference") -> list[OpRecord]:
    from roofline.diagnose.count import count_ops

    return count_ops(model, inputs, kwargs, mode=mode)


def _time(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], records: Sequence[OpRecord], **kw: Any):
    from roofline.diagnose.profile import time_model

    return time_model(model, inputs, kwargs, records, **kw)


def _verify(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], findings: Sequence[Any], **kw: Any):
    from roofline.diagnose.verify import verify

    return verify(model, inputs, kwargs, findings, **kw)


def _counters(path: Any, **kw: Any) -> list[Any]:
    from roofline.diagnose.counters import collect

    return collect(path, **kw)


def _import_torch() -> None:
    """torch imported (timed as its own stage); without torch, nothing: the loader says which extra to install."""
    with contextlib.suppress(ImportError):
        import torch  # noqa: F401


def _cuda_init(torch_device: str) -> None:
    """CUDA initialised on ``torch_device`` and its context created (timed as part of the fixed floor); nothing on
    the CPU or where torch sees no GPU (what fails here fails again, explained, when the model moves there)."""
    if not torch_device.startswith("cuda"):
        return
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.init()
            torch.cuda.synchronize(torch.device(torch_device))
    except Exception:
        pass


def _resolve(device: str | None) -> str:
    return roof_resolver.torch_device(device)  # looked up per call (tests patch roofline.roofs)


def _roofs(torch_device: str, **options: Any) -> tuple[Device, list[str]]:
    return roof_resolver.device_roofs(torch_device, **options)


def _trace_roofs(
    kind: str,
    gpu_names: Sequence[str],
    *,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    roofs: str = "auto",
) -> tuple[Device, list[str]]:
    """The roofs of a trace's device: a GPU trace's spec sheet (by the GPU names it records, or --sheet), as
    --roofs asks; a CPU trace: this machine's CPU (measured), as a live CPU run."""
    if kind == "cpu":
        return roof_resolver.device_roofs("cpu", sheet=sheet, spec_files=spec_files, roofs=roofs)
    spec = roof_resolver.gpu_sheet(list(gpu_names), sheet, spec_files)
    assert spec is not None
    return roof_resolver.with_roofs(roof_resolver.device_from_sheet(spec), roofs)


@dataclass
class Stages:
    """The stages `diagnose` runs; each replaceable (tests inject fakes)."""

    resolve: Callable[[str | None], str] = _resolve  # --device -> 'cpu' | 'cuda' | 'cuda:N'
    load: Callable[..., Any] = _load  # (path, entry=, device=, dtype=, argv=, mode=) -> LoadedModel
    roofs: Callable[..., tuple[Device, list[str]]] = _roofs  # (torch_device, sheet=, spec_files=, roofs=)
    count: Callable[..., list[OpRecord]] = _count  # (model, inputs, kwargs, mode=) -> [OpRecord]
    time: Callable[..., Timing] = _time  # (model, inputs, kwargs, records, device=, mode=, warmup=, iters=)
    rules: Sequence[Producer] = RULES  # the model stage's producers (roofline.findings.rules)
    # (model, inputs, kwargs, findings, device=, warmup=, iters=, combined_gain=, progress=) -> [VerifiedFinding]
    verify: Callable[..., list[Any]] = _verify
    # (path, device=, mode=, warmup=, dtype=, entry=, argv=) -> [KernelCounters] (--counters: one iteration under ncu)
    counters: Callable[..., list[Any]] = _counters
    # (kind, gpu_names, sheet=, spec_files=, roofs=) -> the roofs of a trace's device
    trace_roofs: Callable[..., tuple[Device, list[str]]] = _trace_roofs
    import_torch: Callable[[], None] = _import_torch
    cuda_init: Callable[[str], None] = _cuda_init  # (torch_device): CUDA initialised, its context created
    clock: Callable[[], float] = perf_counter  # the stages' seconds (diagnose.stages) are read on it


@dataclass
class DiagnoseResult:
    """Everything one diagnose run produced, as plain values."""

    path: Path
    convention: str
    options: dict[str, Any]  # entry, device, dtype, mode, warmup, iters, argv
    device: Device
    records: list[OpRecord]
    timing: Timing
    placed: Placed
    findings: list[ModelFinding]
    notes: list[str] = field(default_factory=list)  # roofs, timing, placement
    verified: list[Any] | None = None  # --verify: roofline.diagnose.verify.VerifiedFinding per finding, and "all"
    # what stopped --verify (Ctrl-C, SIGTERM/SIGHUP, --timeout): ``verified`` holds what was measured before it
    interruption: KeyboardInterrupt | None = None
    counters: Any = None  # --counters: roofline.findings.counters.Counters
    counters_error: str = ""  # --counters: why there are none (ncu missing, no permission), naming the fix
    # diagnose's own time: stage -> seconds (roofline.report.records.STAGES), in the order they ran
    stages: dict[str, float] = field(default_factory=dict)

    def combined_dict(self) -> dict[str, Any] | None:
        """What the findings allow together, each op's saving counted once (roofline.findings.combine)."""
        return _combined_dict(self.findings, self.placed.summary.iteration_s)

    def report(self, command: str = "") -> Report:
        """The versioned report: rows = op points; summary, aggregates, findings, uncounted and run facts."""
        from roofline.report.machine import describe as describe_machine

        report = new_report(command, "diagnose", [self.device], list(self.placed.points))
        return report.model_copy(
            update={
                "diagnose": {
                    "model": str(self.path),
                    "convention": self.convention,
                    **self.options,
                    "device_kind": self.placed.summary.device_kind,
                    "roof_source": self.device.roof_source,
                    "notes": self.notes,
                    **({"stages": dict(self.stages), "floor_s": floor_seconds(self.stages)} if self.stages else {}),
                },
                "machine": describe_machine(str(self.options.get("device")), self.device.name),
                "summary": self.placed.summary.model_dump(mode="json"),
                "aggregates": self.placed.aggregates.model_dump(mode="json"),
                "findings": [finding_dict(f) for f in self.findings],
                "combined": self.combined_dict(),
                "uncounted": [u.model_dump(mode="json") for u in self.placed.uncounted],
                **({} if self.verified is None else {"verified": [v.model_dump(mode="json") for v in self.verified]}),
                **({"interrupted": True} if self.interruption is not None else {}),
                **({} if self.counters is None else {"counters": self.counters.model_dump(mode="json")}),
            }
        )


def diagnose_trace(
    path: str | Path,
    *,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    roofs: str = "auto",
    stages: Stages | None = None,
    progress: Progress | None = None,
) -> DiagnoseResult:
    """`roofline diagnose --trace TRACE`: a torch.profiler (Kineto) trace recorded with record_shapes, diagnosed
    as a live run is: its ops rebuilt from their shapes and costed (roofline.diagnose.trace), timed by the
    trace's own kernels (GPU) or op times (CPU) through the same join, placed and diagnosed by the same code.
    One step is diagnosed: the median of the trace's ProfilerStep#N steps. WorkloadError (one line, exit 2) for
    a file that is not such a trace."""
    from roofline.diagnose.join import join, parse_events
    from roofline.diagnose.trace import load_trace, read_trace

    stages = stages or Stages()
    tell = progress or (lambda stage: None)
    roof_resolver.check_roofs(roofs)
    path = Path(path)
    tell(f"reading {path.name}")
    raw = read_trace(path)
    tell("rebuilding every op's cost from its recorded shapes")
    run = load_trace(raw, f"--trace {path}")
    tell(f"reading the roofs of the trace's {'GPU' if run.device == 'cuda' else 'CPU'}")
    dev, notes = stages.trace_roofs(run.device, run.gpu_names, sheet=sheet, spec_files=list(spec_files), roofs=roofs)
    notes = list(notes)
    if run.device == "cpu":
        notes.append("a CPU trace: placed on this machine's CPU roofs (measured here), not the recording machine's")
    if not run.records:
        raise WorkloadError(f"--trace {path}: the step diagnosed holds no aten ops: nothing to diagnose")
    tell("placing ops on the roofline and diagnosing")
    parsed = parse_events(run.events)
    timing = join(
        run.records, parsed.ops, parsed.kernels, 1, launches=parsed.launches, device=run.device, wall_s=run.wall_s
    )
    if run.device == "cuda" and timing.gpu_busy_s > 0:  # as a live run: idle at most what the step leaves
        timing.gpu_idle_s = min(timing.gpu_idle_s, max(run.wall_s - timing.gpu_busy_s, 0.0))
    timing.trace = raw
    timing.notes = [*run.notes, *timing.notes]
    placed, findings = conclude(run.records, timing, dev, stages.rules)
    notes += [n for n in [*timing.notes, *placed.notes] if n not in notes]
    backward = any(r.phase == "backward" for r in run.records)
    options = {
        "trace": str(path),
        "step": run.step,
        "steps": run.steps,
        "device": run.device,
        "mode": "training" if backward else "inference",
        "iters": 1,
        "warmup": 0,
    }
    return DiagnoseResult(
        path=path,
        convention="trace",
        options=options,
        device=dev,
        records=run.records,
        timing=timing,
        placed=placed,
        findings=findings,
        notes=notes,
    )


def _combined_dict(findings: Sequence[ModelFinding], time_s: float) -> dict[str, Any] | None:
    both = combined(findings, time_s)
    return None if both is None else {**both.model_dump(mode="json"), "gain": both.gain}


def finding_dict(finding: ModelFinding) -> dict[str, Any]:
    """A finding as JSON: its fields plus the gain (time_s / best_time_s) and the saving."""
    return {**finding.model_dump(mode="json"), "gain": finding.gain, "saving_s": finding.saving_s}


def _out_of_memory(exc: BaseException, where: str) -> RooflineError | None:
    from roofline.diagnose.profile import out_of_memory_error
    from roofline.errors import is_out_of_memory

    return out_of_memory_error(where) if is_out_of_memory(exc) else None


def conclude(
    records: Sequence[OpRecord], timing: Timing, dev: Device, rules: Sequence[Producer] = RULES
) -> tuple[Placed, list[ModelFinding]]:
    """The counted ops and their timing placed on ``dev``'s roofline, and the findings (every group of ops that
    costs time gets a verdict): what every diagnosis ends with (a model file, a model in-process, a profiled
    region of a loop). ``rules``: the model stage's producers; the coverage stage runs after them."""
    placed = place(records, timing, dev)
    ctx = ModelContext.of(placed.points, dev, timing, placed=placed)
    chosen = [*rules, *producers(("coverage",))]
    findings = produce_all(FindingContext(model=ctx), ("model", "coverage"), chosen)
    return placed, [f for f in findings if isinstance(f, ModelFinding)]


#: (resolved torch device) -> the model on it, ready to run; called inside the user-code boundary
Loader = Callable[[str], Any]


def diagnose(
    path: str | Path,
    *,
    entry: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    mode: str = "inference",
    warmup: int | None = None,
    iters: int | None = None,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    roofs: str = "auto",
    argv: Sequence[str] = (),
    verify: bool = False,
    counters: bool = False,
    keep_trace: bool = False,
    stages: Stages | None = None,
    progress: Progress | None = None,
) -> DiagnoseResult:
    """Load the model file, count its ops, time them, place them on the device's roofline and diagnose.

    Errors (each one line at the CLI): UsageError (options), WorkloadError (missing file, no convention, no ops),
    DeviceError (no GPU, out of memory), UserCodeError (the model raised, exited or closed a standard stream: the
    user's traceback, exit 1). Every stage that runs the user's code runs inside the user-code boundary
    (roofline.diagnose.execute.user_code). errors.TimedOut (--timeout) goes on up naming the stage that ran."""
    stages = stages or Stages()

    def load(torch_device: str) -> Any:
        return stages.load(path, entry=entry, device=torch_device, dtype=dtype, argv=list(argv), mode=mode)

    return run(
        load,
        Path(path),
        entry=entry,
        argv=argv,
        device=device,
        dtype=dtype,
        mode=mode,
        warmup=warmup,
        iters=iters,
        sheet=sheet,
        spec_files=spec_files,
        roofs=roofs,
        verify=verify,
        counters=counters,
        keep_trace=keep_trace,
        stages=stages,
        progress=progress,
    )


def diagnose_model(
    model: Any,
    inputs: Any = (),
    kwargs: dict[str, Any] | None = None,
    *,
    name: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    mode: str = "inference",
    warmup: int | None = None,
    iters: int | None = None,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    roofs: str = "auto",
    verify: bool = False,
    stages: Stages | None = None,
    progress: Progress | None = None,
) -> DiagnoseResult:
    """:func:`diagnose` on a model already in memory (the in-process API, ``roofline.diagnose(model, inputs)``):
    ``model`` (an nn.Module or any callable) run as ``model(*inputs, **kwargs)``; ``inputs`` a tuple/list of
    positional arguments, a dict of keyword arguments or one value, as a model file's get_inputs(). The same
    stages as a model file from there on. NB: moving and casting an nn.Module (``device``, ``dtype``) and
    train()/eval() act on the caller's module, as nn.Module.to() does. ``name``: what the report calls it
    (default: the model's class or function name)."""
    if not callable(model):
        raise UsageError(f"the model is a {type(model).__name__}, not an nn.Module or callable")

    label = name or getattr(model, "__name__", None) or type(model).__name__

    def load(torch_device: str) -> Any:
        from roofline.diagnose.loader import prepare

        return prepare(
            model,
            inputs,
            kwargs=kwargs,
            device=torch_device,
            dtype=dtype,
            mode=mode,
            convention="in-process",
            path=Path(label),
        )

    return run(
        load,
        Path(label),
        device=device,
        dtype=dtype,
        mode=mode,
        warmup=warmup,
        iters=iters,
        sheet=sheet,
        spec_files=spec_files,
        roofs=roofs,
        verify=verify,
        stages=stages,
        progress=progress,
    )


def run(
    load: Loader,
    path: Path,
    *,
    entry: str | None = None,
    argv: Sequence[str] = (),
    device: str | None = None,
    dtype: str | None = None,
    mode: str = "inference",
    warmup: int | None = None,
    iters: int | None = None,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    roofs: str = "auto",
    verify: bool = False,
    counters: bool = False,
    keep_trace: bool = False,
    stages: Stages | None = None,
    progress: Progress | None = None,
) -> DiagnoseResult:
    """The one diagnosis behind :func:`diagnose` (a model file, the CLI) and :func:`diagnose_model` (in-process):
    check the options, resolve the device, ``load(torch_device)`` the model, then roofs, count, time, place,
    diagnose and (``verify``) verify. ``path``: the model file, or the in-process model's name."""
    stages = stages or Stages()
    tell = progress or (lambda stage: None)
    roof_resolver.check_roofs(roofs)
    if iters is not None and iters < 1:
        raise UsageError(f"--iters {iters}: at least 1")
    if warmup is not None and warmup < 0:
        raise UsageError(f"--warmup {warmup}: at least 0")
    if mode not in ("inference", "training"):
        raise UsageError(f"--mode {mode!r}: use inference or training")
    running = ["importing torch"]  # what runs now: a --timeout names it
    clock = stages.clock
    seconds: dict[str, float] = {}  # diagnose's own time, stage by stage (DiagnoseResult.stages)
    mark = [clock()]

    def stage(what: str, shown: str, done: str = "") -> None:
        """The stage ``what`` starts; ``done``: the name under which the seconds since the last mark are kept."""
        if done:
            took(done)
        running[0] = what
        tell(shown)

    def took(name: str) -> None:
        now = clock()
        seconds[name] = seconds.get(name, 0.0) + now - mark[0]
        mark[0] = now

    try:
        stages.import_torch()
        took("torch_import")
        running[0] = "resolving the device"
        torch_device = stages.resolve(device)
        stages.cuda_init(torch_device)
        stage(f"loading {path.name}", f"loading {path.name}", done="cuda_init")
        with user_code(errors=False):  # the user's file, its get_inputs(), constructor... (NB: our boundary)
            loaded = load(torch_device)
        stage(f"reading the roofs of {torch_device}", f"reading the roofs of {torch_device}", done="load")
        dev, notes = stages.roofs(torch_device, sheet=sheet, spec_files=list(spec_files), roofs=roofs)
        notes = list(notes)
        stage("counting the model's ops", "counting ops (FLOPs and bytes of every aten op)", done="roofs")
        try:
            with user_code(errors=False):
                records = list(stages.count(loaded.model, loaded.inputs, loaded.kwargs, mode=mode))
        except RooflineError:
            raise
        except Exception as exc:
            error = _out_of_memory(exc, f"counting the model's ops on {torch_device}")
            if error is None:
                raise
            raise error from None
        if not records:
            raise WorkloadError(
                f"{path.name}: the model ran no tensor operations: nothing to diagnose (does forward() use torch?)"
            )
        took("count")
        what = "forward" if mode == "inference" else "forward and backward"
        compiled = bool(getattr(loaded, "compiled", False))
        auto = [name for name, given in (("warmup", warmup), ("iters", iters)) if given is None]
        planned = (
            f"{'auto' if warmup is None else warmup} warm-up + {'auto' if iters is None else iters} profiled iterations"
        )
        shown = f"timing ({planned})"
        if compiled:
            from roofline.diagnose.place import roofline_weight

            shown = f"timing the compiled model (compiling, {planned})"
            extra: dict[str, Any] = {"compiled": True, "weigh": roofline_weight(dev)}
        else:
            extra = {}
        if keep_trace:  # --export-trace: the profiled run's Chrome trace, in Timing.trace
            extra["keep_trace"] = True
        if auto:  # sized from a first estimate; the counting pass's time bounds it from above (--warmup 0)
            from roofline.diagnose.profile import Budget

            extra["budget"] = Budget(upper_s=seconds["count"])
        stage(f"timing the model's {what}", shown)
        compile_failure = ""
        try:
            with user_code(errors=False):
                timing = stages.time(
                    loaded.model,
                    loaded.inputs,
                    loaded.kwargs,
                    records,
                    device=torch_device,
                    mode=mode,
                    warmup=warmup,
                    iters=iters,
                    **extra,
                )
        except Exception as exc:
            from roofline.diagnose.dynamo import failure_line, is_compile_failure

            if not compiled or not is_compile_failure(exc):
                raise
            # NB: torch.compile failed on the model: its error in one line, and the model diagnosed eagerly
            compile_failure = f"torch.compile failed ({failure_line(exc)}): the model was diagnosed eagerly"
            tell(f"timing the model eagerly ({compile_failure})")
            from roofline.diagnose.loader import uncompiled

            with user_code(errors=False), uncompiled(loaded.model) as original:
                timing = stages.time(
                    original, loaded.inputs, loaded.kwargs, records, device=torch_device, mode=mode,
                    warmup=warmup, iters=iters, **({"budget": extra["budget"]} if "budget" in extra else {}),
                )  # fmt: skip
            timing.notes.insert(0, compile_failure)
            compiled = False
        _timing_stages(seconds, timing, took)
        # what later passes (--verify, --counters) run: the counts given, else the timing pass's former defaults
        warmup_run, iters_run = timing.warmup_calls if warmup is None else warmup, timing.iterations
        warmup = DEFAULT_WARMUP if warmup is None else warmup
        iters = DEFAULT_ITERS if iters is None else iters
        stage("placing ops on the roofline and diagnosing", "placing ops on the roofline and diagnosing")
        placed, findings = conclude(records, timing, dev, stages.rules)
        took("place")
        measured, counters_error = None, ""
        if counters:
            stage("profiling under Nsight Compute", "profiling one iteration under Nsight Compute (ncu)")
            measured, counters_error = _with_counters(
                stages,
                getattr(loaded, "path", None) or path,
                placed,
                torch_device,
                entry=entry,
                dtype=dtype,
                mode=mode,
                warmup=warmup,
                argv=list(argv),
            )
            if measured is not None:
                counted = FindingContext(
                    points=tuple(placed.points), iteration_s=placed.summary.iteration_s, counters=measured
                )
                local = [f for f in produce_all(counted, ("counters",)) if isinstance(f, ModelFinding)]
                findings = rank([*findings, *local])
            took("counters")
        verified = None
        interruption: KeyboardInterrupt | None = None
        if verify:
            from roofline.diagnose.place import roofline_weight

            stage("verifying the findings' techniques", "verifying: applying each finding's technique")
            both = _combined_dict(findings, placed.summary.iteration_s)
            verified = []
            try:
                with user_code(errors=False):
                    stages.verify(
                        loaded.model,
                        loaded.inputs,
                        loaded.kwargs,
                        findings,
                        device=torch_device,
                        warmup=warmup,
                        iters=iters,
                        combined_gain=(both or {}).get("gain"),
                        progress=lambda shown: stage(shown, shown),
                        compiled=compiled,
                        points=placed.points,
                        records=records,  # each matched technique profiled per op, as the diagnosis times
                        op_timer=stages.time,
                        weigh=roofline_weight(dev),
                        sink=verified,
                    )
            except KeyboardInterrupt as exc:  # NB: Ctrl-C, SIGTERM, --timeout: the report keeps what was verified
                if isinstance(exc, TimedOut):
                    exc.stage = exc.stage or running[0]
                interruption = exc
            took("verify")
    except TimedOut as exc:
        exc.stage = exc.stage or running[0]
        raise
    notes += [n for n in [*timing.notes, *placed.notes] if n not in notes]
    options = {
        "entry": entry,
        "device": torch_device,
        "dtype": dtype,
        "mode": mode,
        "warmup": warmup_run,
        "iters": iters_run,
        **({"auto": auto} if auto else {}),
        "argv": list(argv),
        "compiled": compiled,
        **({"compile_s": timing.compile_s} if getattr(timing, "compiled", False) else {}),
        **(
            {
                "graphs": timing.graphs,
                "graph_breaks": [{"reason": reason, "count": count} for reason, count in timing.graph_breaks],
                "recompiles": list(timing.recompiles),
            }
            if getattr(timing, "compiled", False)
            else {}
        ),
        **({"compile_failure": compile_failure} if compile_failure else {}),
    }
    return DiagnoseResult(
        path=Path(getattr(loaded, "path", None) or path),
        convention=getattr(loaded, "convention", ""),
        options=options,
        device=dev,
        records=records,
        timing=timing,
        placed=placed,
        findings=findings,
        notes=notes,
        verified=verified,
        interruption=interruption,
        counters=measured,
        counters_error=counters_error,
        stages=seconds,
    )


#: what --verify and --counters run where the timing pass was sized automatically (its former fixed counts)
DEFAULT_WARMUP, DEFAULT_ITERS = 3, 10


def _timing_stages(seconds: dict[str, float], timing: Timing, took: Callable[[str], None]) -> None:
    """The timing stage's seconds: its parts where it says them (Timing.stage_s: warm-up, timed, profiled,
    events), else as one 'time' stage."""
    parts = {name: float(value) for name, value in (getattr(timing, "stage_s", None) or {}).items()}
    took("time")
    if parts:
        total = seconds.pop("time")
        seconds.update(parts)
        seconds["events"] = seconds.get("events", 0.0) + max(total - sum(parts.values()), 0.0)


def _with_counters(stages: Stages, path: Any, placed: Placed, torch_device: str, **options: Any) -> tuple[Any, str]:
    """(the counters attached to the ops, '') or (None, why not: one line naming the fix)."""
    from roofline.findings.counters import attach
    from roofline.measure.ncu import CountersUnavailable

    if not torch_device.startswith("cuda"):
        return None, "--counters: Nsight Compute counts GPU kernels; this run is on the CPU: no counters"
    try:
        kernels = stages.counters(Path(path), device=torch_device, **options)
    except CountersUnavailable as exc:
        return None, f"--counters: {exc}; the diagnosis is shown without counters"
    return attach(placed.points, kernels, "ncu (diagnose --counters)"), ""


__all__ = [
    "DiagnoseResult",
    "Loader",
    "Stages",
    "conclude",
    "diagnose",
    "diagnose_model",
    "diagnose_trace",
    "finding_dict",
    "run",
]
