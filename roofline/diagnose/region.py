"""Diagnosing a region of an existing loop: ``with roofline.profile(steps=3) as run: ... run.step()``.

The region is the user's own loop (a training step with its optimizer, say); roofline cannot re-run it, so every
pass runs on the loop's own steps, one phase after the other, each step ended by ``step()``:

    warm-up (``warmup`` steps, untouched) -> count (1 step under the counting pass's dispatch mode: every aten op
    with its shapes, FLOPs and bytes; roofline.diagnose.count.counting) -> plain (``steps`` steps timed end to
    end, uninstrumented: the wall time per step) -> profile (1 warm-up step of the profiler, then ``steps``
    steps under torch.profiler's schedule, each inside the iteration marker) -> done (later steps run untouched).

NB: counting re-runs nothing and reads no trace: the ops are those the count step executed. That is honest when
every step runs the same ops (a training loop over batches of one shape); a step of another shape or with
different control flow matches only in part, and the join's notes say how much. The count step runs slower (the
dispatch mode): it is not timed. The profiled steps are joined to the counted ops exactly as `roofline diagnose`
joins its iterations (roofline.diagnose.join), then placed and diagnosed by roofline.diagnose.pipeline.conclude.

torch is imported when the region starts.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roofline.errors import UsageError, WorkloadError
from roofline.report.records import OpRecord

REGION_NAME = "profiled region"  # what the report calls the model when none is given


@dataclass
class Plan:
    """How many steps each phase takes."""

    warmup: int = 1
    steps: int = 3

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise UsageError(f"steps={self.steps}: at least 1")
        if self.warmup < 0:
            raise UsageError(f"warmup={self.warmup}: at least 0")

    @property
    def count_step(self) -> int:
        return self.warmup

    @property
    def plain(self) -> range:
        return range(self.warmup + 1, self.warmup + 1 + self.steps)

    @property
    def profiler_warmup(self) -> int:
        return self.warmup + 1 + self.steps

    @property
    def profiled(self) -> range:
        start = self.profiler_warmup + 1
        return range(start, start + self.steps)

    @property
    def needed(self) -> int:
        """Steps the region must run for a diagnosis: warm-up, count, plain, the profiler's warm-up, profiled."""
        return self.profiled.stop

    def phase(self, step: int) -> str:
        if step < self.warmup:
            return "warm-up"
        if step == self.count_step:
            return "count"
        if step in self.plain:
            return "plain"
        if step == self.profiler_warmup or step in self.profiled:
            return "profile"
        return "done"


@dataclass
class Captured:
    """What a region recorded: the counted ops, the profiler's event dicts, the plain steps' seconds."""

    records: list[OpRecord] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # the devices the counted ops' tensors were on
    events: list[dict[str, Any]] = field(default_factory=list)
    plain_s: float = 0.0
    plain_steps: int = 0
    profiled_steps: int = 0


class Region:
    """The phases of a profiled region (see the module docstring), driven by ``step()`` calls.

    ``model``: an nn.Module whose module paths the counted ops get (None: every op in module ''). ``device``:
    'cpu' | 'cuda' | 'cuda:N' (None: the device of the counted ops' tensors). ``clock`` and ``synchronize``
    time the plain steps (tests inject them). ``counted``: (records, devices) of an earlier count of the same op
    stream (roofline.training reuses a window's count while the profiled ops keep their signature): the count step
    then runs untouched and these are its records. Use as a context manager; :attr:`captured` holds what it
    recorded."""

    def __init__(
        self,
        *,
        steps: int = 3,
        warmup: int = 1,
        model: Any = None,
        device: str | None = None,
        clock: Callable[[], float] = time.perf_counter,
        synchronize: Callable[[str], None] | None = None,
        counted: tuple[Sequence[OpRecord], Sequence[str]] | None = None,
    ) -> None:
        self.plan = Plan(warmup=warmup, steps=steps)
        self.counted = counted  # (records, devices) an earlier count of the same step gave: the count step reuses them
        self.model = model
        self.device = device
        self.clock = clock
        self.synchronize = synchronize or _synchronize
        self.captured = Captured()
        self.current = 0  # the step running now
        self._counting: Any = None  # the counting() context while the count step runs
        self._counted: Any = None
        self._profiler: Any = None
        self._marker: Any = None
        self._plain_start = 0.0
        self._open = False

    # ----------------------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> Region:
        if self._open:
            raise UsageError("this profiled region is already running: one `with` per roofline.profile()")
        import torch  # noqa: F401  (without torch: the extra's one line, before the user's loop runs)

        self._open = True
        self._begin(0)
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        self._open = False
        self._abort()  # whatever the step that was running had open (the region may end mid-phase)
        return False

    @property
    def phase(self) -> str:
        return self.plan.phase(self.current)

    @property
    def done(self) -> bool:
        """Every phase has run: the rest of the loop may stop (or go on, untouched)."""
        return self.current >= self.plan.needed

    def step(self) -> None:
        """End the step that runs now and begin the next one (call it at the end of every iteration)."""
        if not self._open:
            raise UsageError("run.step() outside its `with roofline.profile() as run:` block")
        self._end(self.current)
        self.current += 1
        self._begin(self.current)

    # ----------------------------------------------------------------------------------------- phases

    def _begin(self, step: int) -> None:
        phase = self.plan.phase(step)
        if phase == "count" and self.counted is not None:
            self.captured.records, self.captured.devices = list(self.counted[0]), list(self.counted[1])
        elif phase == "count":
            from roofline.diagnose.count import counting

            self._counting = counting(self.model, "training")
            self._counted = self._counting.__enter__()
        elif phase == "plain":
            if step == self.plan.plain.start:
                self.synchronize(self._device())
                self._plain_start = self.clock()
        elif phase == "profile":
            if step == self.plan.profiler_warmup:
                self._profiler = self._start_profiler()
            if step in self.plan.profiled:
                from torch.profiler import record_function

                from roofline.diagnose.profile import MARKER

                self._marker = record_function(MARKER)
                self._marker.__enter__()

    def _end(self, step: int) -> None:
        phase = self.plan.phase(step)
        if phase == "count":
            self._close_counting(None)
        elif phase == "plain":
            if step == self.plan.plain.stop - 1:
                self.synchronize(self._device())
                self.captured.plain_s = self.clock() - self._plain_start
                self.captured.plain_steps = self.plan.steps
        elif phase == "profile":
            if self._marker is not None:
                self._marker.__exit__(None, None, None)
                self._marker = None
            if step in self.plan.profiled:
                self.captured.profiled_steps += 1
            if self._profiler is not None:
                self._profiler.step()
                if step == self.plan.profiled.stop - 1:
                    self._stop_profiler()

    def _close_counting(self, exc: BaseException | None) -> None:
        if self._counting is None:
            return
        context, counted = self._counting, self._counted
        self._counting = self._counted = None
        context.__exit__(None if exc is None else type(exc), exc, None)
        self.captured.records = list(counted.records)
        self.captured.devices = counted.devices()

    def _abort(self) -> None:
        self._close_counting(None)
        if self._marker is not None:
            self._marker.__exit__(None, None, None)
            self._marker = None
        if self._profiler is not None:
            try:
                self._profiler.stop()
            finally:
                self._profiler = None

    # ----------------------------------------------------------------------------------------- torch

    def _device(self) -> str:
        """The torch device the region runs on: the one given, else the counted ops' (a GPU's when any)."""
        if self.device is not None:
            return self.device
        gpus = [d for d in self.captured.devices if d.startswith("cuda")]
        return gpus[0] if gpus else "cpu"

    def _start_profiler(self) -> Any:
        import os

        from torch.profiler import ProfilerActivity, profile, schedule

        os.environ.setdefault("KINETO_LOG_LEVEL", "6")
        cuda = self._device().startswith("cuda")
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        prof = profile(
            activities=activities,
            record_shapes=True,
            schedule=schedule(wait=0, warmup=1, active=self.plan.steps, repeat=1),
            on_trace_ready=self._collect,
        )
        with warnings.catch_warnings():
            # torch (2.11 seen) warns once that events are not accumulated across profiling cycles: we run one
            warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle.*")
            prof.start()
        return prof

    def _collect(self, prof: Any) -> None:
        """torch.profiler's on_trace_ready: the active steps' events as event dicts (roofline.diagnose.join)."""
        from roofline.diagnose.profile import NO_FACTS, events_from_profiler, profiled_events, trace_facts

        # the raw kineto events in one pass (as `roofline diagnose` reads them), not torch's FunctionEvent list and
        # tree (prof.events(): 20 ms of a window's CPU time for a 170-op step); the Chrome trace (launch facts) only
        # where the kernels did not carry them
        events, with_facts = profiled_events(prof)
        note = ""
        if self._device().startswith("cuda") and not with_facts:
            facts, note = trace_facts(prof)
            if facts:
                events = events_from_profiler(prof.events(), facts=facts)
        if note:
            events.append({"kind": "note", "text": f"{note}: {NO_FACTS}"})
        self.captured.events = events

    def _stop_profiler(self) -> None:
        prof, self._profiler = self._profiler, None
        if prof is not None:
            prof.stop()

    # ----------------------------------------------------------------------------------------- the diagnosis

    def check_complete(self) -> None:
        """WorkloadError unless the region ran every phase (and counted some ops)."""
        ran = self.current
        if self.captured.profiled_steps < self.plan.steps or not self.captured.events:
            raise WorkloadError(
                f"the profiled region ended after {ran} step(s) (run.step() calls); roofline.profile("
                f"steps={self.plan.steps}, warmup={self.plan.warmup}) needs {self.plan.needed}: {self.plan.warmup} "
                f"warm-up, 1 counted, {self.plan.steps} timed, 1 profiler warm-up, {self.plan.steps} profiled "
                "(call run.step() at the end of every step, and let the loop run that long)"
            )
        if not self.captured.records:
            raise WorkloadError("the region's counted step ran no tensor operations: nothing to diagnose")


def region_timing(captured: Captured, steps: int, device: str) -> Any:
    """The captured events joined to the counted ops (roofline.diagnose.join), per step: a Timing."""
    from roofline.diagnose.join import join, parse_events

    parsed = parse_events(captured.events)
    cuda = device.startswith("cuda")
    wall_s = captured.plain_s / captured.plain_steps if captured.plain_steps else 0.0
    timing = join(
        captured.records,
        parsed.ops,
        parsed.kernels,
        steps,
        launches=parsed.launches,
        device="cuda" if cuda else "cpu",
        wall_s=wall_s,
    )
    if cuda and timing.gpu_busy_s > 0:
        timing.gpu_idle_s = min(timing.gpu_idle_s, max(wall_s - timing.gpu_busy_s, 0.0))
    timing.notes += [note for note in parsed.notes if note not in timing.notes]
    if parsed.iterations and parsed.iterations != steps:
        timing.notes.append(f"the profile holds {parsed.iterations} steps, {steps} were profiled")
    timing.notes.append(
        "a profiled region: ops counted on one step of the loop (not re-run), timed on "
        f"{steps} later steps; steps that run other ops match only in part"
    )
    return timing


def diagnose_region(
    region: Region,
    *,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    roofs: str = "auto",
    name: str | None = None,
    roofs_of: Callable[..., Any] | None = None,
) -> Any:
    """The diagnosis of a finished region: a roofline.diagnose.pipeline.DiagnoseResult, as a model run gives.
    ``roofs_of(torch_device, sheet=, spec_files=, roofs=)`` -> (Device, notes) (default: roofline.roofs)."""
    from roofline import roofs as roof_resolver
    from roofline.diagnose.memory import Peak, memory_facts
    from roofline.diagnose.pipeline import DiagnoseResult, conclude

    roof_resolver.check_roofs(roofs)
    region.check_complete()
    device = region._device()
    resolve = roofs_of or roof_resolver.device_roofs
    dev, notes = resolve(device, sheet=sheet, spec_files=list(spec_files), roofs=roofs)
    notes = list(notes)
    records = region.captured.records
    timing = region_timing(region.captured, region.plan.steps, device)
    if device == "cpu":
        import torch

        from roofline.diagnose.profile import cpu_cores

        timing.threads, timing.cores = int(torch.get_num_threads()), cpu_cores()
    placed, findings = conclude(records, timing, dev)
    notes += [n for n in [*timing.notes, *placed.notes] if n not in notes]
    mode = "training" if any(r.phase == "backward" for r in records) else "inference"
    options = {
        "entry": None,
        "device": device,
        "dtype": None,
        "mode": mode,
        "warmup": region.plan.warmup,
        "iters": region.plan.steps,
        "argv": [],
        "compiled": False,
    }
    label = name or (type(region.model).__name__ if region.model is not None else REGION_NAME)
    return DiagnoseResult(
        path=Path(label),
        convention="region",
        options=options,
        device=dev,
        records=records,
        timing=timing,
        placed=placed,
        findings=findings,
        notes=notes,
        memory=memory_facts(region.model, records, mode, Peak(notes=["peak allocated: not measured in a loop"])),
    )


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(torch.device(device))


__all__ = ["REGION_NAME", "Captured", "Plan", "Region", "diagnose_region", "region_timing"]
