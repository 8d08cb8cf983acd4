"""Functions for notebooks and scripts: diagnose a model in memory or a region of a loop, load a report, get its
points as a DataFrame, get the chart as a Figure.

    import roofline

    result = roofline.diagnose(model, (x,), mode="training")   # the pipeline of `roofline diagnose MODEL.py`
    result = roofline.diagnose_hf("gpt2", seq=128, mode="decode")  # `roofline diagnose --hf gpt2`
    result.findings[0].evidence; result.frame(); result.figure(); result.save("report.json")

    with roofline.profile(steps=3) as run:                    # a region of your own training loop
        for batch in loader:
            train_step(batch)
            run.step()
            if run.done:
                break
    run.findings; run.frame()

    report = roofline.load_report("roofline-report.json")
    frame = roofline.points_frame(report)                      # one row per report row, every field
    fig = roofline.roofline_figure(report, devices=["b200"])  # a matplotlib Figure; fig.savefig("chart.png")

torch, matplotlib and pandas are imported by the functions that need them, not by ``import roofline``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.render.notebook import register as _register_display
from roofline.report.chart import DEFAULT_TOP, ChartSpec, KnownDevice, NamedReport, check_top, report_chart
from roofline.report.points import Point, report_points
from roofline.report.schema import Report, read_report

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from roofline.diagnose.pipeline import Boundaries, DiagnoseResult
    from roofline.findings.model import ModelFinding

ReportLike = Report | str | Path
_register_display()  # a Report shows as HTML in a notebook (Report._repr_html_)


def register_cost(
    op: Any,
    *,
    flops: Any,
    bytes: Any = None,
    math: str = "tensor",
    dtype: str | None = None,
    note: str = "",
) -> None:
    """Give roofline the cost of a custom op or a Triton kernel (roofline.costs.aten.custom.register_cost):
    ``flops`` and ``bytes`` as numbers or functions of the call's arguments; ``bytes`` None: each tensor argument
    read once and each output written once. docs/op-costs.md, "Costs of your own ops"."""
    from roofline.costs.aten.custom import register_cost as register

    register(op, flops=flops, bytes=bytes, math=math, dtype=dtype, note=note)  # type: ignore[arg-type]


def load_report(path: str | Path) -> Report:
    """Read a report JSON written by analyze, bench or diagnose (ReportError when missing or corrupt)."""
    return read_report(Path(path))


def _named(item: ReportLike, position: int) -> NamedReport:
    if isinstance(item, Report):
        return NamedReport(f"report {position + 1}" if position else "report", item)
    path = Path(item)
    return NamedReport(path.stem, read_report(path))


def _named_all(reports: Iterable[ReportLike] | ReportLike) -> list[NamedReport]:
    items = [reports] if isinstance(reports, (Report, str, Path)) else list(reports)
    return [_named(item, i) for i, item in enumerate(items)]


def points(report: ReportLike, *, per_call: bool = False) -> list[Point]:
    """The plain points of a report (roofline.report.points.Point), as the chart places them."""
    named = _named(report, 0)
    return report_points(named.report, named.name, per_call=per_call)


def points_frame(report: ReportLike) -> pd.DataFrame:
    """One row per report row: the point's columns (``point.*``) then every field of the row, flattened."""
    from roofline.report.export import points_frame as frame

    named = _named(report, 0)
    return frame(named.report, named.name)


def known_devices(
    names: Iterable[str], *, calibration: str | Path | None = None, spec_files: Sequence[Path] = ()
) -> dict[str, KnownDevice]:
    """Spec sheet and measured ceilings per device name (keyed by the sheet's canonical name when found).

    Measured ceilings: ``calibration`` (a `roofline calibrate` JSON) for the device it measured, else the
    newest cached calibration of that sheet (roofline.roofs.known_devices)."""
    from roofline import roofs

    return roofs.known_devices(names, calibration=calibration, spec_files=spec_files)


def canonical_device(name: str, spec_files: Sequence[Path] = ()) -> str:
    """The spec-sheet name of ``name`` (an alias or the name a GPU reports); UnknownDeviceError if none."""
    from roofline.specs.loader import load_registry

    return load_registry(spec_files).get(name).name


def chart_spec(
    reports: Iterable[ReportLike] | ReportLike,
    *,
    devices: Sequence[str] = (),
    top: int = DEFAULT_TOP,
    per_call: bool = False,
    calibration: str | Path | None = None,
    spec_files: Sequence[Path] = (),
    verified: bool = False,
) -> ChartSpec:
    """What the chart shows (roofs, points, labels, notes) as plain values, without drawing it. ``verified``:
    the arrows of a diagnose --verify report (roofline.report.chart.Arrow)."""
    check_top(top)
    named = _named_all(reports)
    targets = [canonical_device(d, spec_files) for d in devices]
    return report_chart(
        named,
        lambda names: known_devices(names, calibration=calibration, spec_files=spec_files),
        devices=targets,
        top=top,
        per_call=per_call,
        verified=verified,
    )


def roofline_figure(
    reports: Iterable[ReportLike] | ReportLike,
    *,
    devices: Sequence[str] = (),
    top: int = DEFAULT_TOP,
    per_call: bool = False,
    calibration: str | Path | None = None,
    size_px: tuple[int, int] = (1600, 1000),
    spec_files: Sequence[Path] = (),
    verified: bool = False,
) -> Figure:
    """The roofline chart of one report or several (overlaid) as a matplotlib Figure.

    ``devices``: other devices to re-draw the points on, one panel each. In Jupyter the Figure shows when it is
    the cell's value; ``fig.savefig("chart.png")`` writes it."""
    from roofline.render.figure import figure

    spec = chart_spec(
        reports,
        devices=devices,
        top=top,
        per_call=per_call,
        calibration=calibration,
        spec_files=spec_files,
        verified=verified,
    )
    return figure(spec, size_px=size_px)


# ------------------------------------------------------------------------------------------------ diagnosing


class Diagnosis:
    """What :func:`diagnose` and :func:`profile` give: the diagnosis of a model or of a loop's region.

    ``findings`` (ranked: bottleneck, evidence, technique, bound on the gain), ``report()`` (the versioned Report,
    as `roofline diagnose -o` writes it; ``report().save(path)``), ``frame()`` (pandas: one row per op),
    ``figure()`` (matplotlib: the roofline chart), ``save(path)``; ``result`` holds every stage's plain values
    (records, timing, placed points, notes)."""

    def __init__(self, result: DiagnoseResult | None = None) -> None:
        self._result = result
        self._report: Report | None = None

    @property
    def result(self) -> DiagnoseResult:
        if self._result is None:
            from roofline.errors import UsageError

            raise UsageError("no diagnosis yet: the profiled region has not finished (use its result after `with`)")
        return self._result

    @property
    def findings(self) -> list[ModelFinding]:
        """The findings, most time saved first (roofline.findings.model.ModelFinding)."""
        return list(self.result.findings)

    @property
    def notes(self) -> list[str]:
        return list(self.result.notes)

    def report(self, command: str = "") -> Report:
        """The versioned report (roofline.report.schema.Report): the same JSON `roofline diagnose` writes."""
        if self._report is None or command:
            report = self.result.report(command or "roofline.diagnose (in-process)")
            if command:
                return report
            self._report = report
        return self._report

    def frame(self) -> pd.DataFrame:
        """One row per op: the chart's columns (``point.*``) then every field of the op's row."""
        return points_frame(self.report())

    def figure(self, **options: Any) -> Figure:
        """The roofline chart as a matplotlib Figure (options: roofline_figure's: devices, top, per_call...)."""
        return roofline_figure(self.report(), **options)

    def save(self, path: str | Path) -> Path:
        """Write the report's JSON at ``path`` (atomically); read it back with load_report or `roofline plot`."""
        return self.report().save(path)

    def _repr_html_(self) -> str | None:
        """Jupyter: the report's page as a cell's output (roofline.render.notebook: the findings, memory, the
        chart when matplotlib is there, the top points)."""
        if self._result is None:
            return None
        from roofline.render.notebook import report_html

        return report_html(self.report(), self._name())

    def _repr_markdown_(self) -> str | None:
        if self._result is None:
            return None
        from roofline.render.notebook import report_markdown

        return report_markdown(self.report(), self._name())

    def _name(self) -> str:
        """What the page calls the model: its file's name, or the in-process model's name as given."""
        result = self.result
        return str(result.path) if result.convention == "in-process" else result.path.name

    def __repr__(self) -> str:
        if self._result is None:
            return f"<{type(self).__name__}: not finished>"
        summary = self._result.placed.summary
        top = self._result.findings[0].rule if self._result.findings else "none"
        return (
            f"<{type(self).__name__} {self._result.path}: {summary.ops} ops on {self._result.device.name}, "
            f"{len(self._result.findings)} findings; top: {top}>"
        )


def _device_of(model: Any, inputs: Any, kwargs: dict[str, Any] | None) -> str | None:
    """Where the model's parameters (else its first tensor input) already are, as a torch device string."""
    import torch

    params = model.parameters() if isinstance(model, torch.nn.Module) else iter(())
    for tensor in params:
        return str(tensor.device)
    stack = [inputs, kwargs or {}]
    while stack:
        value = stack.pop(0)
        if isinstance(value, torch.Tensor):
            return str(value.device)
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return None


def diagnose(
    model: Any,
    inputs: Any = (),
    kwargs: dict[str, Any] | None = None,
    *,
    device: str | None = None,
    dtype: str | None = None,
    mode: str = "inference",
    warmup: int | None = None,
    iters: int | None = None,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    roofs: str = "auto",
    verify: bool = False,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    boundaries: Boundaries | None = None,
) -> Diagnosis:
    """Diagnose ``model`` (an nn.Module or any callable) on ``inputs`` as `roofline diagnose MODEL.py` does: count
    every aten op of one call (``mode='training'``: forward + backward of the summed outputs), time ``iters``
    profiled calls after ``warmup`` (None, the default: sized from a time budget, as the CLI's auto), place the
    ops on the device's roofline and diagnose.

    ``inputs``: a tuple of positional arguments, a dict of keyword arguments or one tensor; ``kwargs``: more
    keyword arguments. ``device``: 'cpu' | 'cuda' | 'cuda:N' (default: where the model's parameters, else its
    first input, already are); ``dtype`` fp32|bf16|fp16; ``sheet``, ``spec_files``, ``roofs`` (auto|spec|
    measured) and ``verify`` as the CLI's options. NB: a ``device`` or ``dtype`` moves and casts your module in
    place (nn.Module.to); its train/eval mode is put back afterwards (and, after ``mode='training'``, its gradients
    are None, as the timing pass leaves them). ``boundaries``: where the diagnosis touches the machine
    (tests inject a timer: roofline.diagnose.pipeline.Boundaries). Errors: the CLI's (roofline.errors), raised."""
    from roofline.diagnose.pipeline import DiagnoseOptions, diagnose_model

    where = device if device is not None else _device_of(model, inputs, kwargs)
    was_training = getattr(model, "training", None)
    try:
        options = DiagnoseOptions(
            device=where,
            dtype=dtype,
            mode=mode,
            warmup=warmup,
            iters=iters,
            sheet=sheet,
            spec_files=tuple(spec_files),
            roofs=roofs,
            verify=verify,
        )
        result = diagnose_model(model, inputs, kwargs, options, name=name, boundaries=boundaries, progress=progress)
    finally:
        if isinstance(was_training, bool) and callable(getattr(model, "train", None)):
            model.train(was_training)
        if mode == "training" and callable(getattr(model, "zero_grad", None)):
            model.zero_grad(set_to_none=True)  # the gradients the diagnosis computed are not the caller's
    return Diagnosis(result)


def diagnose_hf(
    ref: str,
    *,
    batch: int = 1,
    seq: int = 128,
    mode: str = "prefill",
    device: str | None = None,
    dtype: str | None = None,
    warmup: int | None = None,
    iters: int | None = None,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    roofs: str = "auto",
    verify: bool = False,
    progress: Callable[[str], None] | None = None,
    boundaries: Boundaries | None = None,
) -> Diagnosis:
    """Diagnose a Hugging Face causal LM as `roofline diagnose --hf REF` does: ``ref`` a hub id (the hub's local
    cache or a config roofline ships; never downloaded), a directory holding config.json or the config.json; the
    model built from its config with random weights (transformers, the ``hf`` extra), ``batch`` x ``seq`` random
    token ids; ``mode`` prefill, decode (one token after ``seq`` cached ones) or training (forward and backward of
    the LM loss). ``device`` default: CUDA when torch sees a GPU, else the CPU; ``dtype`` default: the config's
    torch_dtype (fp32 when it names none); the other options as :func:`diagnose`'s. Errors: the CLI's."""
    from roofline.diagnose.pipeline import DiagnoseOptions
    from roofline.diagnose.pipeline import diagnose_hf as run

    options = DiagnoseOptions(device=device, dtype=dtype, warmup=warmup, iters=iters, sheet=sheet,
                              spec_files=tuple(spec_files), roofs=roofs, verify=verify)  # fmt: skip
    result = run(ref, batch=batch, seq=seq, step=mode, options=options, boundaries=boundaries, progress=progress)
    return Diagnosis(result)


class ProfiledRun(Diagnosis):
    """``with roofline.profile(steps=3) as run:`` -- call ``run.step()`` at the end of every step of the loop;
    after the block, ``run`` is the Diagnosis of those steps (``run.findings``, ``run.frame()``...).

    The steps, in order (``run.phase`` says which runs now; ``run.done`` once all have run; ``run.steps_needed``):
    ``warmup`` untouched, 1 counted (every aten op under a dispatch mode: shapes, FLOPs, bytes), ``steps`` timed
    end to end uninstrumented, 1 profiler warm-up, ``steps`` under torch.profiler. Counting is done on the
    loop's own count step (nothing is re-run, no trace is read): it describes the profiled steps when every step
    runs the same ops, as a training loop over same-shaped batches does. An exception inside the block goes on up
    as it is (nothing is diagnosed); a block that ends before every phase ran raises WorkloadError."""

    def __init__(
        self,
        *,
        steps: int = 3,
        warmup: int = 1,
        model: Any = None,
        device: str | None = None,
        sheet: str | None = None,
        spec_files: Sequence[Path] = (),
        roofs: str = "auto",
        name: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__()
        from roofline import roofs as roof_resolver
        from roofline.diagnose.region import Region

        roof_resolver.check_roofs(roofs)
        extra: dict[str, Any] = {} if clock is None else {"clock": clock}
        self._region = Region(steps=steps, warmup=warmup, model=model, device=device, **extra)
        self._options: dict[str, Any] = {"sheet": sheet, "spec_files": spec_files, "roofs": roofs, "name": name}

    @property
    def phase(self) -> str:
        """'warm-up' | 'count' | 'plain' | 'profile' | 'done': what the step running now is for."""
        return self._region.phase

    @property
    def done(self) -> bool:
        return self._region.done

    @property
    def steps_needed(self) -> int:
        return self._region.plan.needed

    def step(self) -> None:
        """End this step of the loop and begin the next."""
        self._region.step()

    def __enter__(self) -> ProfiledRun:
        self._region.__enter__()
        return self

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> bool:
        self._region.__exit__(kind, exc, tb)
        if exc is None:
            from roofline.diagnose.region import diagnose_region

            self._result = diagnose_region(self._region, **self._options)
            self._report = None
        return False


def profile(
    steps: int = 3,
    *,
    warmup: int = 1,
    model: Any = None,
    device: str | None = None,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    roofs: str = "auto",
    name: str | None = None,
) -> ProfiledRun:
    """A profiled region of your own loop: ``with roofline.profile(steps=3) as run:``, ``run.step()`` at the end
    of each step (see :class:`ProfiledRun` for the phases and what counting means here). ``model``: the
    nn.Module the loop runs, for module paths in the findings (optional). ``device``: default, the device of the
    counted ops' tensors. ``sheet``, ``spec_files``, ``roofs``: as `roofline diagnose`."""
    return ProfiledRun(
        steps=steps,
        warmup=warmup,
        model=model,
        device=device,
        sheet=sheet,
        spec_files=spec_files,
        roofs=roofs,
        name=name,
    )


__all__ = [
    "Diagnosis",
    "ProfiledRun",
    "chart_spec",
    "diagnose",
    "diagnose_hf",
    "known_devices",
    "load_report",
    "points",
    "points_frame",
    "profile",
    "register_cost",
    "roofline_figure",
]
