"""`roofline gate`'s run: measure what it gates, re-measure the points that did not pass, update the baseline.

    from roofline.gate.run import MeasureOptions, run, update_baseline
    gated = run("ci/suite.yaml", baseline=Path("ci/baseline.json"), options=MeasureOptions(device="cuda"))
    if gated.result.verdict == "pass":
        update_baseline(gated)

The input is a report (judged as it is), a bench suite or a model file, measured in-process by the same library
calls as `roofline bench SUITE.yaml` (open_target, run_bench, bench_report) and `roofline diagnose MODEL.py` (the
diagnose pipeline and its report), so a report measured here gates exactly like one written by those commands.
torch is imported by those calls, lazily. Settings: the arguments over the [tool.roofline.gate] table of
pyproject.toml (roofline.gate.config), as the CLI reads them. Nothing is printed: progress displays come from
``progress`` and messages go to ``notify``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from roofline.errors import RooflineError
from roofline.fileio import absolute
from roofline.gate.compare import GateResult
from roofline.report.schema import Report

Kind = Literal["report", "suite", "model"]
#: A progress display for one measurement of a suite or a model: a context manager yielding the measuring call's
#: progress callback (bench's ``(done, total, label)``, diagnose's ``(stage)``) or None.
ProgressFactory = Callable[[Kind], AbstractContextManager[Any]]

DEFAULT_ITERS = 20  # diagnose's default is 10: the gate's interval narrows with more samples per op


def kind_of(target: str) -> Kind:
    """'report' | 'suite' | 'model' for what `roofline gate` is given (UsageError when it is none of them)."""
    lowered = target.lower()
    if lowered.endswith(".json"):
        return "report"
    if lowered.endswith(".py"):
        return "model"
    if lowered.endswith((".yaml", ".yml")):
        return "suite"
    from roofline.costs.suite import shipped_suites

    if target in shipped_suites():
        return "suite"
    from roofline.errors import UsageError

    raise UsageError(
        f"{target!r}: give a report (REPORT.json), a bench suite (SUITE.yaml or a shipped suite's name) "
        "or a model file (MODEL.py)"
    )


# ------------------------------------------------------------------------------------------ measuring


@dataclass(frozen=True)
class MeasureOptions:
    """How to measure a suite or a model; None: the measuring command's default."""

    device: str | None = None
    sheet: str | None = None
    spec_files: Sequence[Path] = ()
    # a suite (as `roofline bench`)
    warm: bool | None = None
    max_time_s: float | None = None
    # a model (as `roofline diagnose`, but DEFAULT_ITERS iterations)
    entry: str | None = None
    dtype: str | None = None
    mode: str | None = None
    warmup: int | None = None
    iters: int | None = None
    roofs: str | None = None
    argv: Sequence[str] = ()


def measure_suite(
    file: str,
    *,
    device: str | None = None,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    warm: bool | None = None,
    max_time_s: float | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    command: str = "",
    wrap_build: Callable[[Any], Any] | None = None,
) -> Report:
    """Run every workload of a suite (a YAML file or a shipped suite's name) as `roofline bench` does.

    ``wrap_build(build) -> build`` replaces how ops are built (benchmarks/gate_gpu.py plants a regression)."""
    from roofline.bench.items import expand_suite
    from roofline.bench.run import bench_report, run_bench
    from roofline.bench.target import open_target
    from roofline.costs.suite import load_suite, suite_path

    loaded, entries = load_suite(file)
    items = expand_suite(entries)
    target = open_target(device, sheet=sheet, spec_files=spec_files, warm=warm, max_time_s=max_time_s)
    build = wrap_build(target.build) if wrap_build is not None else target.build
    result = run_bench(items, target.device, target.harness, build, progress=progress)
    if result.interrupted:  # Ctrl-C, SIGTERM/SIGHUP (errors.Terminated) or --timeout (errors.TimedOut)
        raise result.interruption or KeyboardInterrupt()
    if not result.rows:
        error = result.first_error()
        if error is not None:
            raise error
    return bench_report(command, target, result, {"name": loaded.name, "file": str(suite_path(file))})


def measure_model(
    path: Path,
    *,
    command: str = "",
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> Report:
    """Run `roofline diagnose` on a model file (options: entry, device, dtype, mode, warmup, iters, sheet,
    spec_files, roofs, argv) and return its report."""
    from roofline.diagnose.pipeline import DiagnoseOptions, diagnose

    return diagnose(path, DiagnoseOptions(**options), progress=progress).report(command)


def measure(
    kind: Kind,
    target: str | Path,
    options: MeasureOptions,
    *,
    command: str = "",
    progress: ProgressFactory | None = None,
) -> Report:
    """Measure a suite or a model once, inside ``progress(kind)``'s display."""
    display = progress(kind) if progress is not None else nullcontext(None)
    with display as update:
        if kind == "suite":
            return measure_suite(
                str(target),
                device=options.device,
                sheet=options.sheet,
                spec_files=options.spec_files,
                warm=options.warm,
                max_time_s=options.max_time_s,
                progress=update,
                command=command,
            )
        if kind == "model":
            given = {name: getattr(options, name) for name in ("mode", "warmup", "roofs")}
            return measure_model(
                Path(target),
                command=command,
                progress=update,
                entry=options.entry,
                device=options.device,
                dtype=options.dtype,
                iters=DEFAULT_ITERS if options.iters is None else options.iters,
                sheet=options.sheet,
                spec_files=options.spec_files,
                argv=options.argv,
                **{name: value for name, value in given.items() if value is not None},
            )
    raise ValueError(f"a {kind} is not measured")


def merge_remeasured(first: Report, second: Report, keys: set[str]) -> tuple[Report, list[str]]:
    """``first`` with the rows of ``keys`` (the points that did not pass) taken from the re-measurement
    ``second``, and the labels of the rows replaced. A point then fails only when both measurements fail it:
    a transient (another process, a clock dip) has to strike the same point twice to fail CI, a real
    regression does so every time."""
    from roofline.report.baseline import points_of

    again = {p.key: row for p, row in zip(points_of(second), second.rows, strict=True)}
    rows, replaced = [], []
    for point, row in zip(points_of(first), first.rows, strict=True):
        if point.key in keys and point.key in again:
            rows.append(again[point.key])
            replaced.append(point.label)
        else:
            rows.append(row)
    return first.model_copy(update={"rows": rows}), replaced


# ------------------------------------------------------------------------------------------ the run


@dataclass
class GateRun:
    """What a gate run judged: the verdicts, the report judged and where it is, and the baseline's file."""

    result: GateResult
    report: Report
    report_path: Path | None  # the input report, or the measured one's --output; None when not written
    baseline_path: Path
    unwritten: RooflineError | None = None  # --output could not be written (disk full): raise it after the verdict


def run(
    target: str | Path,
    *,
    kind: Kind | None = None,
    baseline: Path | None = None,
    fail_on: Sequence[str] = (),
    confidence: float | None = None,
    stats: bool = True,
    options: MeasureOptions | None = None,
    confirm: int = 1,
    output: Path | None = None,
    command: str = "",
    progress: ProgressFactory | None = None,
    notify: Callable[[str], None] | None = None,
) -> GateRun:
    """Gate ``target`` (a report, a bench suite or a model file: ``kind``, else :func:`kind_of`) against
    ``baseline`` (default: pyproject's), with the ``fail_on`` rules on top of pyproject's and the defaults.

    A suite or a model is measured (``options``); while points do not pass, it is measured again, up to
    ``confirm`` times, and those points are judged on the new measurement. ``output``: write the measured report
    there. Raises UsageError (no baseline), BaselineError, ReportError, ThresholdError, or the measurement's
    errors; everything that can be wrong with the input is checked before a measurement that can take minutes.
    A run that did not measure (the user's code failed: UserCodeError; errors.TimedOut; no row measured, a
    report with no row included) raises NotMeasured (exit 4): never a pass, never inconclusive."""
    from roofline.errors import NotMeasured, TimedOut, UsageError, UserCodeError
    from roofline.gate import check
    from roofline.gate.config import find
    from roofline.gate.thresholds import build_rules
    from roofline.report import baseline as baselines

    tell = notify or (lambda message: None)
    written = absolute(output) if output is not None else None  # the user's code may change directory
    kind = kind or kind_of(str(target))
    config = find()
    rules = build_rules(
        (config.source, config.fail_on),
        ("--fail-on", list(fail_on)),
        confidence=confidence if confidence is not None else config.confidence,
        stats=config.stats and stats,
    )
    baseline_path = baseline or config.baseline_path()
    if baseline_path is None:
        raise UsageError(
            "no baseline: give --baseline FILE (save one with `roofline baseline save REPORT.json -o FILE`), "
            "or set baseline in [tool.roofline.gate] of pyproject.toml"
        )
    saved = baselines.load(baseline_path)

    if kind == "report":
        from roofline.report.schema import read_report

        report = _measured(read_report(Path(target)), f"the report {target}")
        return GateRun(check(report, saved, rules, where=str(target)), report, Path(target), baseline_path)

    options = options or MeasureOptions()
    what = "the model" if kind == "model" else "the suite"
    try:
        report = _measured(measure(kind, target, options, command=command, progress=progress), what)
        result = check(report, saved, rules)
        for attempt in range(confirm):
            doubtful = {p.key for p in result.points if p.verdict in ("regression", "inconclusive")}
            if not doubtful:
                break
            tell(f"Measuring again to confirm ({attempt + 1}/{confirm}): {len(doubtful)} point(s) did not pass")
            again = _measured(measure(kind, target, options, command=command, progress=progress), what)
            report, replaced = merge_remeasured(report, again, doubtful)
            result = check(report, saved, rules)
            result.warnings.append(
                f"re-measured to confirm ({attempt + 1}/{confirm}), judged on the new measurement: "
                + ", ".join(replaced)
            )
    except UserCodeError as exc:  # NB: a run that did not measure is never a pass (nor inconclusive): exit 4
        raise NotMeasured(f"nothing measured: {exc}", exc.traceback_text) from None
    except TimedOut as exc:
        raise NotMeasured(f"nothing measured: {exc} (--timeout)") from None
    if output is not None and written is not None:
        from roofline.report.outputs import write

        try:
            write(written, report.to_json(), shown=output)
        except RooflineError as exc:
            return GateRun(result, report, None, baseline_path, unwritten=exc)
        tell(f"Report written to {output}")
    return GateRun(result, report, output, baseline_path)


def _measured(report: Report, what: str) -> Report:
    """``report`` when it holds a measured row, else NotMeasured (exit 4): no row is never a pass."""
    if not report.rows:
        from roofline.errors import NotMeasured

        skipped = report.model_extra.get("skipped") if report.model_extra else None
        why = f": {skipped[0].get('reason')}" if skipped else ""
        raise NotMeasured(f"nothing measured: {what} gave no measured row{why}")
    return report


def update_baseline(gated: GateRun, *, force: bool = False) -> bool:
    """Replace the baseline with the gated report's points when the gate passed (or ``force``); True if done."""
    if gated.result.verdict != "pass" and not force:
        return False
    from roofline.report import baseline as baselines

    baselines.save(
        baselines.from_report(gated.report, path=gated.report_path), gated.baseline_path, option="--baseline"
    )
    return True
