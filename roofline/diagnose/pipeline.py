"""`roofline diagnose` as one function: load -> count -> time -> place -> diagnose -> report value. No printing.

:func:`run` is the one diagnosis, written as the plain calls it makes; :func:`diagnose` gives it a model file (the
CLI, the gate), :func:`diagnose_hf` a Hugging Face model built from its config (`diagnose --hf`),
:func:`diagnose_model` a model in memory (``roofline.diagnose(model, inputs)``); :func:`conclude` (place and
diagnose) also ends a profiled region of a loop (roofline.diagnose.region). What a run is asked for is one value,
:class:`DiagnoseOptions`.

Where the diagnosis touches the machine it goes through :class:`Boundaries`, the one thing tests replace: the
device's facts (:class:`DeviceFacts`: torch's import, which device, CUDA's start, the roofs), the timer
(:class:`Profiler`: the counting and timing passes, and the profiled run's trace through its ``profile`` hook) and
the clock diagnose's own seconds are read on. The device and its roofs are resolved by roofline.roofs, as for
`roofline bench`: a GPU's spec sheet (its cached calibration replaces the measured roofs, --roofs auto), the CPU's
measured roofs (roofline calibrate).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any, Protocol

from roofline import roofs as roof_resolver
from roofline.costs.aten.custom import plugin_errors
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

#: what --verify and --counters run where the timing pass was sized automatically (its former fixed counts)
DEFAULT_WARMUP, DEFAULT_ITERS = 3, 10


# ------------------------------------------------------------------------------------------------ the options


@dataclass(frozen=True)
class DiagnoseOptions:
    """What one diagnosis is asked for: the CLI's options (`roofline diagnose --help`), one value."""

    entry: str | None = None  # --entry: a function of the file returning (model, inputs)
    argv: tuple[str, ...] = ()  # the script's arguments after --
    device: str | None = None  # cpu | cuda | cuda:N (None: cuda when torch sees a GPU)
    dtype: str | None = None  # fp32 | bf16 | fp16 (None: as written)
    mode: str = "inference"  # inference | training
    warmup: int | None = None  # None: auto (sized from a time budget)
    iters: int | None = None  # None: auto
    sheet: str | None = None  # --sheet: the GPU's spec sheet
    spec_files: tuple[Path, ...] = ()  # --spec: extra sheets
    roofs: str = "auto"  # auto | spec | measured
    verify: bool = False  # --verify: each finding's technique applied and measured
    verify_all: bool = False  # --verify-all: and every mechanical technique over the whole model (with verify)
    counters: bool = False  # --counters: one iteration under Nsight Compute
    keep_trace: bool = False  # --export-trace: the profiled run's trace kept in Timing.trace

    def __post_init__(self) -> None:
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "spec_files", tuple(Path(p) for p in self.spec_files))

    def check(self) -> None:
        """UsageError (one line) for an option no run can take."""
        roof_resolver.check_roofs(self.roofs)
        if self.iters is not None and self.iters < 1:
            raise UsageError(f"--iters {self.iters}: at least 1")
        if self.warmup is not None and self.warmup < 0:
            raise UsageError(f"--warmup {self.warmup}: at least 0")
        if self.mode not in ("inference", "training"):
            raise UsageError(f"--mode {self.mode!r}: use inference or training")


# ------------------------------------------------------------------------------------------------ the boundaries


class DeviceFacts:
    """The device a run uses and its roofs, read from this machine (tests subclass it with fixed facts)."""

    def import_torch(self) -> None:
        """torch imported (timed as its own stage); without torch, nothing: the loader says which extra to
        install."""
        with contextlib.suppress(ImportError):
            import torch  # noqa: F401

    def resolve(self, device: str | None) -> str:
        """--device -> 'cpu' | 'cuda' | 'cuda:N'."""
        return roof_resolver.torch_device(device)  # looked up per call (tests patch roofline.roofs)

    def cuda_init(self, torch_device: str) -> None:
        """CUDA initialised on ``torch_device`` and its context created (timed as part of the fixed floor);
        nothing on the CPU or where torch sees no GPU (what fails here fails again, explained, when the model
        moves there)."""
        if not torch_device.startswith("cuda"):
            return
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.init()
                torch.cuda.synchronize(torch.device(torch_device))
        except Exception:
            pass

    def roofs(self, torch_device: str, options: DiagnoseOptions) -> tuple[Device, list[str]]:
        """The roofs of ``torch_device`` as --sheet, --spec and --roofs ask, and notes saying where from."""
        return roof_resolver.device_roofs(
            torch_device, sheet=options.sheet, spec_files=list(options.spec_files), roofs=options.roofs
        )

    def trace_roofs(self, kind: str, gpu_names: Sequence[str], options: DiagnoseOptions) -> tuple[Device, list[str]]:
        """The roofs of a trace's device: a GPU trace's spec sheet (by the GPU names it records, or --sheet), as
        --roofs asks; a CPU trace: this machine's CPU (measured), as a live CPU run."""
        if kind == "cpu":
            return self.roofs("cpu", options)
        spec = roof_resolver.gpu_sheet(list(gpu_names), options.sheet, list(options.spec_files))
        assert spec is not None
        return roof_resolver.with_roofs(roof_resolver.device_from_sheet(spec), options.roofs)


class Timer(Protocol):
    """What counts and times a model's ops (:class:`Profiler`; a test's double, a rank's wrapper)."""

    def count(self, model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], *, mode: str) -> list[OpRecord]: ...

    def time(
        self, model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], records: Sequence[OpRecord], **options: Any
    ) -> Timing: ...


@dataclass(frozen=True)
class Profiler:
    """The timer: the counting pass (every aten op's shapes, FLOPs and bytes) and the timing pass (torch.profiler).
    ``profile``: how the profiled iterations are recorded (roofline.diagnose.profile.ProfileFn; None: the trace
    of torch.profiler, roofline.diagnose.profile.torch_profile)."""

    profile: Callable[..., Any] | None = None

    def count(self, model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], *, mode: str) -> list[OpRecord]:
        from roofline.diagnose.count import count_ops

        return count_ops(model, inputs, kwargs, mode=mode)

    def first_call(self, model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], *, mode: str) -> None:
        """One plain call of the model on a GPU before the counting pass: its lazy initialisation (cuBLAS and
        cuDNN handles, the kernels loaded on first use: 0.2-0.4 s of the first GEMM on an H100) is the model's
        first iteration, not the counting pass's. Training: forward and backward, then the gradients set to None
        (the counting pass must not see them accumulated)."""
        import torch

        from roofline.diagnose.execute import run_once
        from roofline.diagnose.loader import uncompiled

        with uncompiled(model) as original:
            run_once(original, tuple(inputs), dict(kwargs or {}), mode)  # type: ignore[arg-type]
            if mode == "training":
                original.zero_grad(set_to_none=True)
        torch.cuda.synchronize()

    def time(
        self, model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], records: Sequence[OpRecord], **options: Any
    ) -> Timing:
        """``options``: device, mode, warmup, iters and roofline.diagnose.profile.time_model's others."""
        from roofline.diagnose.profile import time_model

        hook = {"profile": self.profile} if self.profile is not None else {}
        return time_model(model, inputs, kwargs, records, **hook, **options)


@dataclass(frozen=True)
class Boundaries:
    """Where a diagnosis touches the machine; tests replace these and nothing else."""

    device: DeviceFacts = field(default_factory=DeviceFacts)
    timer: Timer = field(default_factory=Profiler)
    clock: Callable[[], float] = perf_counter  # diagnose's own seconds (DiagnoseResult.stages) are read on it


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
    memory: Any = None  # roofline.report.memory.MemoryFacts: parameters, weights, activations, peak (None: unknown)

    def combined_dict(self) -> dict[str, Any] | None:
        """What the findings allow together, each op's saving counted once (roofline.findings.combine)."""
        return _combined_dict(self.findings, self.placed.summary.iteration_s)

    def report(self, command: str = "") -> Report:
        """The versioned report: rows = op points; summary, aggregates, findings, uncounted and run facts."""
        from roofline.specs.detect import describe_machine

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
                **({} if self.memory is None else {"memory": self.memory.model_dump(mode="json")}),
            }
        )


def diagnose_trace(
    path: str | Path,
    options: DiagnoseOptions | None = None,
    *,
    boundaries: Boundaries | None = None,
    progress: Progress | None = None,
) -> DiagnoseResult:
    """`roofline diagnose --trace TRACE`: a torch.profiler (Kineto) trace recorded with record_shapes, diagnosed
    as a live run is: its ops rebuilt from their shapes and costed (roofline.diagnose.trace), timed by the
    trace's own kernels (GPU) or op times (CPU) through the same join, placed and diagnosed by the same code.
    One step is diagnosed: the median of the trace's ProfilerStep#N steps. ``options``: its sheet, spec_files and
    roofs are read. WorkloadError (one line, exit 2) for a file that is not such a trace."""
    from roofline.diagnose.join import join, parse_events
    from roofline.diagnose.trace import load_trace, read_trace

    options = options or DiagnoseOptions()
    facts = (boundaries or Boundaries()).device
    tell = progress or (lambda stage: None)
    roof_resolver.check_roofs(options.roofs)
    path = Path(path)
    tell(f"reading {path.name}")
    raw = read_trace(path)
    tell("rebuilding every op's cost from its recorded shapes")
    run = load_trace(raw, f"--trace {path}")
    tell(f"reading the roofs of the trace's {'GPU' if run.device == 'cuda' else 'CPU'}")
    dev, notes = facts.trace_roofs(run.device, run.gpu_names, options)
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
    placed, findings = conclude(run.records, timing, dev)
    notes += [n for n in [*timing.notes, *placed.notes] if n not in notes]
    backward = any(r.phase == "backward" for r in run.records)
    facts_shown = {
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
        options=facts_shown,
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


@contextlib.contextmanager
def _model_pass(where: str) -> Iterator[None]:
    """A pass that runs the user's model: inside the user-code boundary, out of memory said as such (``where``:
    what the pass was doing, for the error's line)."""
    try:
        with user_code(errors=False):
            yield
    except RooflineError:
        raise
    except Exception as exc:
        error = _out_of_memory(exc, where)
        if error is None:
            raise
        raise error from None


def conclude(
    records: Sequence[OpRecord], timing: Timing, dev: Device, rules: Sequence[Producer] = RULES
) -> tuple[Placed, list[ModelFinding]]:
    """The counted ops and their timing placed on ``dev``'s roofline, and the findings (every group of ops that
    costs time gets a verdict): what every diagnosis ends with (a model file, a model in-process, a profiled
    region of a loop). ``rules``: the model stage's producers; the coverage stage runs after them."""
    placed = place(records, timing, dev)
    return placed, findings_of(placed, timing, dev, rules)


def findings_of(placed: Placed, timing: Timing, dev: Device, rules: Sequence[Producer] = RULES) -> list[ModelFinding]:
    """The model and coverage findings of ops already placed (:func:`conclude`'s second half)."""
    ctx = ModelContext.of(placed.points, dev, timing, placed=placed)
    chosen = [*rules, *producers(("coverage",))]
    findings = produce_all(FindingContext(model=ctx), ("model", "coverage"), chosen)
    return [f for f in findings if isinstance(f, ModelFinding)]


def with_counters(
    placed: Placed, counters: Any, *, l2_bandwidth: float | None = None, l1_bandwidth: float | None = None
) -> Placed:
    """``placed`` with the classes the counters overrule, the L2 roof for L2-resident ops and the L1 for ops whose
    L1 traffic dominates (roofline.findings.counters.relabel; ``l2_bandwidth``, ``l1_bandwidth`` the device's L2
    and L1/shared memory, byte/s, None: unknown) and its aggregates again; the same object when they change none."""
    from roofline.findings.counters import relabel
    from roofline.report.aggregate import aggregate_points

    points = relabel(placed.points, counters, l2_bandwidth=l2_bandwidth, l1_bandwidth=l1_bandwidth)
    if all(a is b for a, b in zip(points, placed.points, strict=True)):
        return placed
    aggregates = aggregate_points(points, placed.summary.op_time_s)
    return placed.model_copy(update={"points": points, "aggregates": aggregates})


#: (resolved torch device) -> the model on it, ready to run; called inside the user-code boundary
Loader = Callable[[str], Any]


def model_file(path: str | Path, options: DiagnoseOptions) -> Loader:
    """The loader of a model file: run as a script with ``options``' entry, dtype, argv and mode."""

    def load(torch_device: str) -> Any:
        from roofline.diagnose.loader import load_model

        return load_model(
            path,
            entry=options.entry,
            device=torch_device,
            dtype=options.dtype,
            argv=list(options.argv),
            mode=options.mode,
        )

    return load


def diagnose(
    path: str | Path,
    options: DiagnoseOptions | None = None,
    *,
    boundaries: Boundaries | None = None,
    progress: Progress | None = None,
) -> DiagnoseResult:
    """Load the model file, count its ops, time them, place them on the device's roofline and diagnose.

    Errors (each one line at the CLI): UsageError (options), WorkloadError (missing file, no convention, no ops),
    DeviceError (no GPU, out of memory), UserCodeError (the model raised, exited or closed a standard stream: the
    user's traceback, exit 1). Every stage that runs the user's code runs inside the user-code boundary
    (roofline.diagnose.execute.user_code). errors.TimedOut (--timeout) goes on up naming the stage that ran."""
    options = options or DiagnoseOptions()
    return run(model_file(path, options), Path(path), options, boundaries=boundaries, progress=progress)


def diagnose_hf(
    ref: str,
    *,
    batch: int = 1,
    seq: int = 128,
    step: str = "prefill",
    options: DiagnoseOptions | None = None,
    boundaries: Boundaries | None = None,
    progress: Progress | None = None,
) -> DiagnoseResult:
    """:func:`diagnose` on a Hugging Face causal LM built from its config with random weights (roofline.diagnose.hf):
    ``ref`` a hub id (the hub's local cache or the configs roofline ships; never downloaded), a directory holding
    config.json or the config.json; ``batch`` x ``seq`` random token ids; ``step`` prefill, decode (one token after
    ``seq`` cached ones) or training (forward and backward of the LM loss). ``options``: as for a model file; its
    dtype defaults to the config's (torch_dtype; fp32 when it names none); its mode is the step's; entry, argv and
    counters are not read. The report's ``diagnose.hf`` holds what was built (id, config file, step, sizes,
    transformers' version). Errors as :func:`diagnose`, and WorkloadError for a reference found nowhere or an
    architecture transformers cannot build."""
    from dataclasses import replace

    from roofline.diagnose.hf import HfModel, read_config

    spec = HfModel(str(ref), batch, seq, step)
    spec.check()
    options = options or DiagnoseOptions()
    if options.counters:
        raise UsageError(
            "--counters with --hf: not yet (Nsight Compute reruns a model file in a child process): write the model "
            "to a file (AutoModelForCausalLM.from_config in a get_inputs() model file) for --counters"
        )
    config = read_config(spec.ref)
    dtype = _hf_dtype(options.dtype, config.dtype)
    chosen = replace(options, entry=None, argv=(), dtype=dtype, mode=spec.mode)
    facts: dict[str, Any] = {}

    def load(torch_device: str) -> Any:
        from roofline.diagnose.hf import load_hf

        return load_hf(spec, config, device=torch_device, dtype=dtype, facts=facts)

    result = run(load, Path(config.ref.name), chosen, boundaries=boundaries, progress=progress)
    kv_bytes = facts.pop("kv_cache_bytes", None)
    if kv_bytes is not None and result.memory is not None:  # decode: the prompt's cache, measured from its tensors
        result.memory = result.memory.model_copy(update={"kv_cache_bytes": kv_bytes})
    result.options["hf"] = facts
    return result


def _hf_dtype(given: str | None, default: str) -> str:
    """--dtype with --hf (fp32|bf16|fp16), else the config's."""
    if given is None:
        return default
    from roofline.dtypes import canonical

    name = canonical(given)
    if name not in ("fp32", "bf16", "fp16"):
        raise UsageError(f"--dtype {given!r}: use one of fp32, bf16, fp16")
    return name


def diagnose_model(
    model: Any,
    inputs: Any = (),
    kwargs: dict[str, Any] | None = None,
    options: DiagnoseOptions | None = None,
    *,
    name: str | None = None,
    boundaries: Boundaries | None = None,
    progress: Progress | None = None,
) -> DiagnoseResult:
    """:func:`diagnose` on a model already in memory (the in-process API, ``roofline.diagnose(model, inputs)``):
    ``model`` (an nn.Module or any callable) run as ``model(*inputs, **kwargs)``; ``inputs`` a tuple/list of
    positional arguments, a dict of keyword arguments or one value, as a model file's get_inputs(). The same
    stages as a model file from there on. NB: moving and casting an nn.Module (``device``, ``dtype``) and
    train()/eval() act on the caller's module, as nn.Module.to() does. ``name``: what the report calls it
    (default: the model's class or function name). A model in memory has no file: ``options``' entry, argv,
    counters and keep_trace are not read."""
    if not callable(model):
        raise UsageError(f"the model is a {type(model).__name__}, not an nn.Module or callable")
    options = options or DiagnoseOptions()
    label = name or getattr(model, "__name__", None) or type(model).__name__

    def load(torch_device: str) -> Any:
        from roofline.diagnose.loader import prepare

        return prepare(
            model,
            inputs,
            kwargs=kwargs,
            device=torch_device,
            dtype=options.dtype,
            mode=options.mode,
            convention="in-process",
            path=Path(label),
        )

    in_memory = DiagnoseOptions(
        device=options.device,
        dtype=options.dtype,
        mode=options.mode,
        warmup=options.warmup,
        iters=options.iters,
        sheet=options.sheet,
        spec_files=options.spec_files,
        roofs=options.roofs,
        verify=options.verify,
    )
    return run(load, Path(label), in_memory, boundaries=boundaries, progress=progress)


class _Stopwatch:
    """diagnose's own seconds, stage by stage (DiagnoseResult.stages), read on ``clock``; ``running``: the stage
    that runs now (a --timeout names it); ``tell``: the progress display."""

    def __init__(self, clock: Callable[[], float], progress: Progress | None) -> None:
        self.clock = clock
        self.tell: Progress = progress or (lambda stage: None)
        self.seconds: dict[str, float] = {}
        self.running = "importing torch"
        self.mark = clock()

    def start(self, what: str, shown: str = "", done: str = "") -> None:
        """The stage ``what`` starts (``shown`` on the display, default ``what``); ``done``: the name under which
        the seconds since the last mark are kept."""
        if done:
            self.took(done)
        self.running = what
        self.tell(shown or what)

    def took(self, name: str) -> None:
        now = self.clock()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self.mark
        self.mark = now


def run(
    load: Loader,
    path: Path,
    options: DiagnoseOptions,
    *,
    boundaries: Boundaries | None = None,
    progress: Progress | None = None,
) -> DiagnoseResult:
    """The one diagnosis behind :func:`diagnose` (a model file, the CLI) and :func:`diagnose_model` (in-process):
    check the options, resolve the device, ``load(torch_device)`` the model, then roofs, count, time, place,
    diagnose and (``options.verify``) verify. ``path``: the model file, or the in-process model's name."""
    options.check()
    machine = boundaries or Boundaries()
    watch = _Stopwatch(machine.clock, progress)
    try:
        return _diagnosis(load, path, options, machine, watch)
    except TimedOut as exc:
        exc.stage = exc.stage or watch.running
        raise


def _diagnosis(
    load: Loader, path: Path, options: DiagnoseOptions, machine: Boundaries, watch: _Stopwatch
) -> DiagnoseResult:
    """:func:`run`'s stages in order, each timed on ``watch``."""
    facts = machine.device
    facts.import_torch()
    watch.took("torch_import")
    watch.running = "resolving the device"
    torch_device = facts.resolve(options.device)
    facts.cuda_init(torch_device)
    watch.start(f"loading {path.name}", done="cuda_init")
    with user_code(errors=False):  # the user's file, its get_inputs(), constructor... (NB: our boundary)
        loaded = load(torch_device)
    watch.start(f"reading the roofs of {torch_device}", done="load")
    dev, notes = facts.roofs(torch_device, options)
    notes = list(notes)
    if _first_call_applies(machine.timer, loaded, torch_device, options.mode):
        watch.start("the model's first call", "running the model once (its lazy initialisation)", done="roofs")
        _first_call(machine.timer, loaded, torch_device, options.mode)
        watch.took("first_call")
    else:
        watch.took("roofs")
    watch.start("counting the model's ops", "counting ops (FLOPs and bytes of every aten op)")
    records = _count(machine.timer, loaded, path, torch_device, options.mode)
    watch.took("count")
    timed = _time(machine.timer, loaded, records, dev, torch_device, options, watch)
    timing = timed.timing
    _timing_stages(watch, timing)
    # what later passes (--verify, --counters) run: the counts given, else the timing pass's former defaults
    ran = {"warmup": timing.warmup_calls if options.warmup is None else options.warmup, "iters": timing.iterations}
    later = _later_counts(options)
    watch.start("placing ops on the roofline and diagnosing")
    placed, findings = conclude(records, timing, dev)
    watch.took("place")
    measured, counters_error = None, ""
    if options.counters:
        watch.start("profiling under Nsight Compute", "profiling one iteration under Nsight Compute (ncu)")
        where = Path(getattr(loaded, "path", None) or path)
        measured, counters_error = _with_counters(where, placed, torch_device, later)
        if measured is not None:
            relabeled = with_counters(  # NB: the measured SM throughput decides instruction issue
                placed, measured, l2_bandwidth=dev.bandwidth.get("l2"), l1_bandwidth=dev.bandwidth.get("smem")
            )
            if relabeled is not placed:
                placed, findings = relabeled, findings_of(relabeled, timing, dev)
            counted = FindingContext(
                points=tuple(placed.points), iteration_s=placed.summary.iteration_s, counters=measured
            )
            local = [f for f in produce_all(counted, ("counters",)) if isinstance(f, ModelFinding)]
            findings = rank([*findings, *local])
        watch.took("counters")
    verified, interruption = None, None
    if options.verify:
        watch.start("verifying the findings' techniques", "verifying: applying each finding's technique")
        verified, interruption = _verify(machine.timer, loaded, records, findings, placed, dev, torch_device, later,
                                         compiled=timed.compiled, watch=watch)  # fmt: skip
        if interruption is None:  # NB: what was measured re-ranks: a technique measured slower goes last
            from roofline.diagnose.verify import rerank

            findings, verified = rerank(findings, verified)
        watch.took("verify")
    notes += [n for n in [*timing.notes, *placed.notes, *plugin_errors()] if n not in notes]
    return DiagnoseResult(
        path=Path(getattr(loaded, "path", None) or path),
        convention=getattr(loaded, "convention", ""),
        options=_run_facts(options, torch_device, timed, **ran),
        device=dev,
        records=records,
        timing=timing,
        placed=placed,
        findings=findings,
        notes=notes,
        verified=verified,
        interruption=interruption,
        memory=_memory(loaded, records, options.mode, timed),
        counters=measured,
        counters_error=counters_error,
        stages=watch.seconds,
    )


def _later_counts(options: DiagnoseOptions) -> DiagnoseOptions:
    """``options`` with the counts --verify and --counters run: those given, else the former fixed ones."""
    from dataclasses import replace

    return replace(
        options,
        warmup=DEFAULT_WARMUP if options.warmup is None else options.warmup,
        iters=DEFAULT_ITERS if options.iters is None else options.iters,
    )


def _first_call_applies(timer: Any, loaded: Any, torch_device: str, mode: str) -> bool:
    """A first call before the counting pass: on a GPU, with a timer that has one (tests inject timers without),
    and in training only for an nn.Module (its gradients can be set back to None)."""
    if not torch_device.startswith("cuda") or not callable(getattr(timer, "first_call", None)):
        return False
    return mode != "training" or callable(getattr(loaded.model, "zero_grad", None))


def _first_call(timer: Any, loaded: Any, torch_device: str, mode: str) -> None:
    """:meth:`Profiler.first_call` inside the user-code boundary; out of memory said as such."""
    with _model_pass(f"running the model on {torch_device}"):
        timer.first_call(loaded.model, loaded.inputs, loaded.kwargs, mode=mode)


def _count(timer: Timer, loaded: Any, path: Path, torch_device: str, mode: str) -> list[OpRecord]:
    """The counting pass, inside the user-code boundary; out of memory said as such; no ops: a WorkloadError."""
    with _model_pass(f"counting the model's ops on {torch_device}"):
        records = list(timer.count(loaded.model, loaded.inputs, loaded.kwargs, mode=mode))
    if not records:
        raise WorkloadError(
            f"{path.name}: the model ran no tensor operations: nothing to diagnose (does forward() use torch?)"
        )
    return records


@dataclass
class _Timed:
    """The timing pass's result: the timing, whether the model ran compiled, why compiling failed ('' if not)."""

    timing: Timing
    compiled: bool
    compile_failure: str = ""
    peak: Any = None  # roofline.diagnose.memory.Peak: the allocator's peak over the timing pass


def _time(
    timer: Timer,
    loaded: Any,
    records: list[OpRecord],
    dev: Device,
    torch_device: str,
    options: DiagnoseOptions,
    watch: _Stopwatch,
) -> _Timed:
    """The timing pass (auto counts sized from the counting pass's time); a compiled model that torch.compile
    fails on is timed eagerly, its error in one line."""
    what = "forward" if options.mode == "inference" else "forward and backward"
    compiled = bool(getattr(loaded, "compiled", False))
    warmup, iters = options.warmup, options.iters
    planned = (
        f"{'auto' if warmup is None else warmup} warm-up + {'auto' if iters is None else iters} profiled iterations"
    )
    shown = f"timing the compiled model (compiling, {planned})" if compiled else f"timing ({planned})"
    extra: dict[str, Any] = {}
    if compiled:
        from roofline.diagnose.place import roofline_weight

        extra.update(compiled=True, weigh=roofline_weight(dev))
    if options.keep_trace:  # --export-trace: the profiled run's Chrome trace, in Timing.trace
        extra["keep_trace"] = True
    budget: dict[str, Any] = {}
    if warmup is None or iters is None:  # sized from a first estimate; the counting pass bounds it (--warmup 0)
        from roofline.diagnose.profile import Budget

        budget["budget"] = Budget(upper_s=watch.seconds["count"])
    watch.start(f"timing the model's {what}", shown)
    counts = {"device": torch_device, "mode": options.mode, "warmup": warmup, "iters": iters}
    from roofline.diagnose.memory import peak_memory

    try:
        with user_code(errors=False), peak_memory(torch_device) as peak:
            timing = timer.time(loaded.model, loaded.inputs, loaded.kwargs, records, **counts, **extra, **budget)
        return _Timed(timing, compiled, peak=peak)
    except Exception as exc:
        from roofline.diagnose.dynamo import failure_line, is_compile_failure

        if not compiled or not is_compile_failure(exc):
            raise
        # NB: torch.compile failed on the model: its error in one line, and the model diagnosed eagerly
        failure = f"torch.compile failed ({failure_line(exc)}): the model was diagnosed eagerly"
    watch.tell(f"timing the model eagerly ({failure})")
    from roofline.diagnose.loader import uncompiled

    with user_code(errors=False), uncompiled(loaded.model) as original, peak_memory(torch_device) as peak:
        timing = timer.time(original, loaded.inputs, loaded.kwargs, records, **counts, **budget)
    timing.notes.insert(0, failure)
    return _Timed(timing, False, failure, peak)


def _memory(loaded: Any, records: list[OpRecord], mode: str, timed: _Timed) -> Any:
    """The report's memory block (roofline.diagnose.memory): the loaded model's parameters, the records'
    activations, the timing pass's peak."""
    from roofline.diagnose.memory import memory_facts

    return memory_facts(loaded.model, records, mode, timed.peak)


def _timing_stages(watch: _Stopwatch, timing: Timing) -> None:
    """The timing stage's seconds: its parts where it says them (Timing.stage_s: warm-up, timed, profiled,
    events), else as one 'time' stage."""
    parts = {name: float(value) for name, value in (getattr(timing, "stage_s", None) or {}).items()}
    watch.took("time")
    if parts:
        seconds = watch.seconds
        total = seconds.pop("time")
        seconds.update(parts)
        seconds["events"] = seconds.get("events", 0.0) + max(total - sum(parts.values()), 0.0)


def _with_counters(path: Path, placed: Placed, torch_device: str, options: DiagnoseOptions) -> tuple[Any, str]:
    """--counters: (the counters attached to the ops, '') or (None, why not: one line naming the fix)."""
    from roofline.diagnose.counters import collect
    from roofline.findings.counters import attach
    from roofline.measure.ncu import CountersUnavailable

    if not torch_device.startswith("cuda"):
        return None, "--counters: Nsight Compute counts GPU kernels; this run is on the CPU: no counters"
    try:
        kernels = collect(path, device=torch_device, entry=options.entry, dtype=options.dtype, mode=options.mode,
                          warmup=options.warmup, argv=list(options.argv))  # fmt: skip
    except CountersUnavailable as exc:
        return None, f"--counters: {exc}; the diagnosis is shown without counters"
    return attach(placed.points, kernels, "ncu (diagnose --counters)"), ""


def _verify(
    timer: Timer,
    loaded: Any,
    records: list[OpRecord],
    findings: list[ModelFinding],
    placed: Placed,
    dev: Device,
    torch_device: str,
    options: DiagnoseOptions,
    *,
    compiled: bool,
    watch: _Stopwatch,
) -> tuple[list[Any], KeyboardInterrupt | None]:
    """--verify: each finding's technique applied to the model and measured (roofline.diagnose.verify); what
    stopped it (Ctrl-C, SIGTERM, --timeout) is returned beside what was verified before it."""
    from roofline.diagnose.place import roofline_weight
    from roofline.diagnose.verify import verify

    both = _combined_dict(findings, placed.summary.iteration_s)
    verified: list[Any] = []
    try:
        with user_code(errors=False):
            verify(
                loaded.model,
                loaded.inputs,
                loaded.kwargs,
                findings,
                device=torch_device,
                warmup=options.warmup,
                iters=options.iters,
                combined_gain=(both or {}).get("gain"),
                progress=watch.start,
                compiled=compiled,
                points=placed.points,
                records=records,  # each matched technique profiled per op, as the diagnosis times
                op_timer=timer.time,
                weigh=roofline_weight(dev),
                sink=verified,
                sweep=options.verify_all,
            )
    except KeyboardInterrupt as exc:  # NB: Ctrl-C, SIGTERM, --timeout: the report keeps what was verified
        if isinstance(exc, TimedOut):
            exc.stage = exc.stage or watch.running
        return verified, exc
    return verified, None


def _run_facts(
    options: DiagnoseOptions, torch_device: str, timed: _Timed, *, warmup: int, iters: int
) -> dict[str, Any]:
    """The run's facts the report keeps (its 'diagnose' section): the options as run, the compiler's."""
    timing = timed.timing
    auto = [name for name, given in (("warmup", options.warmup), ("iters", options.iters)) if given is None]
    facts: dict[str, Any] = {
        "entry": options.entry,
        "device": torch_device,
        "dtype": options.dtype,
        "mode": options.mode,
        "warmup": warmup,
        "iters": iters,
        **({"auto": auto} if auto else {}),
        "argv": list(options.argv),
        "compiled": timed.compiled,
    }
    if getattr(timing, "compiled", False):
        facts["compile_s"] = timing.compile_s
        facts["graphs"] = timing.graphs
        facts["graph_breaks"] = [{"reason": reason, "count": count} for reason, count in timing.graph_breaks]
        facts["recompiles"] = list(timing.recompiles)
    if timed.compile_failure:
        facts["compile_failure"] = timed.compile_failure
    return facts


__all__ = [
    "DEFAULT_ITERS",
    "DEFAULT_WARMUP",
    "Boundaries",
    "DeviceFacts",
    "DiagnoseOptions",
    "DiagnoseResult",
    "Loader",
    "Profiler",
    "Timer",
    "conclude",
    "diagnose",
    "diagnose_hf",
    "diagnose_model",
    "diagnose_trace",
    "finding_dict",
    "model_file",
    "run",
]
