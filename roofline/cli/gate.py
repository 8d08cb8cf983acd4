"""`roofline gate INPUT --baseline FILE`: fail CI when kernels regress against a baseline (docs/ci.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from roofline.cli.common import json_option, print_text, spec_option
from roofline.cli.timeout import check_timeout, time_limit, timeout_option
from roofline.cli.verbosity import info
from roofline.units import parse_time

FORMATS = ("table", "markdown", "json")
DEFAULT_GATE_ITERS = 20  # NB: = roofline.gate.run.DEFAULT_ITERS (not imported: --help stays light)


def _reject(kind: str, given: dict[str, Any]) -> None:
    """Options that do not apply to this kind of INPUT are errors, not silently ignored."""
    from roofline.errors import UsageError

    extra = [name for name, value in given.items() if value not in (None, False, [], ())]
    if extra:
        what = {"report": "a report (nothing is measured)", "suite": "a bench suite", "model": "a model file"}[kind]
        raise UsageError(f"{', '.join(extra)}: not an option for {what}")


def _prepare_outputs(
    target: str,
    kind: str,
    baseline: Path | None,
    spec: list[Path] | None,
    output: Path | None,
    junit: Path | None,
    markdown_file: Path | None,
    force: bool,
) -> list[Path | None]:
    """Before anything is measured: check -o, --junit and --markdown (roofline.report.outputs.prepare) against
    what the gate reads (the report, suite or model, the baseline, --spec sheets); their absolute paths."""
    from roofline.gate.config import find
    from roofline.report.outputs import Kind, prepare

    read: Path | str = target
    if kind == "suite":
        from roofline.costs.suite import suite_path

        read = suite_path(target)
    what = {"report": "the report", "suite": "the suite file", "model": "the model file"}[kind]
    inputs = [
        (what, read),
        ("the baseline", baseline or find().baseline_path()),
        *(("a --spec sheet", path) for path in spec or []),
    ]
    outputs: list[tuple[str, Path | None, Kind]] = [
        ("-o", output, "report"),
        ("--junit", junit, "junit"),
        ("--markdown", markdown_file, "markdown"),
    ]
    return prepare(outputs, inputs=inputs, force=force)


TARGET_ARGUMENT = typer.Argument(
    ...,
    help="What to gate: a bench or diagnose report (REPORT.json), or a bench suite (SUITE.yaml, or a shipped "
    "suite's name) or model file (MODEL.py) to measure now.",
    metavar="REPORT.json|SUITE.yaml|MODEL.py",
)
SCRIPT_ARGS_ARGUMENT = typer.Argument(
    None, help="MODEL.py: arguments for the script after `--` (its sys.argv[1:]).", metavar="[-- ARGS]"
)
BASELINE_OPTION = typer.Option(
    None,
    "--baseline",
    "-b",
    help="The baseline (`roofline baseline save`); default: `baseline` in pyproject's tool.roofline.gate table.",
)
FAIL_ON_OPTION = typer.Option(
    None,
    "--fail-on",
    help="A rule METRIC:LIMIT, repeatable: time:+10%, efficiency:-5%, flops:0, bytes:+0, kernels:+1, time:+50us, "
    "METRIC:off. Replaces the defaults (flops:0 bytes:0 kernels:0 efficiency:-5%) of the metrics it names.",
    metavar="RULE",
)
CONFIDENCE_OPTION = typer.Option(
    None, "--confidence", help="Confidence of the shift's interval (default 0.99).", show_default=False
)
NO_STATS_OPTION = typer.Option(
    False,
    "--no-stats",
    help="Compare single numbers (medians) against the limits instead of testing the samples.",
)
FMT_OPTION = typer.Option("table", "--format", help="table, markdown (for a CI step summary) or json.")
JUNIT_OPTION = typer.Option(None, "--junit", help="Also write JUnit XML: a test case per point.", metavar="FILE")
MARKDOWN_FILE_OPTION = typer.Option(None, "--markdown", help="Also write the markdown summary to FILE.", metavar="FILE")
UPDATE_BASELINE_OPTION = typer.Option(
    False, "--update-baseline", help="After a pass, replace the baseline with this report's points."
)
FORCE_OPTION = typer.Option(
    False,
    "--force",
    help="Replace an existing -o, --junit or --markdown file even when it is not one roofline writes (never a "
    "file the gate reads); with --update-baseline: replace the baseline whatever the verdict.",
)
OUTPUT_OPTION = typer.Option(
    None, "--output", "-o", help="SUITE/MODEL: also write the measured report here.", metavar="FILE"
)
DEVICE_OPTION = typer.Option(
    None,
    "--device",
    "-d",
    help="SUITE/MODEL: cuda (cuda:N) or cpu (default: cuda when torch sees a GPU).",
    metavar="cuda|cpu",
)
SHEET_OPTION = typer.Option(None, "--sheet", help="SUITE/MODEL: GPU spec sheet for the roofs.")
WARM_OPTION = typer.Option(
    None, "--warm/--cold", help="SUITE: cache warm or flushed before each sample (as bench).", show_default=False
)
MAX_TIME_OPTION = typer.Option(
    None,
    "--max-time",
    help="SUITE: time budget per row (500ms, 2s; bare: seconds; bench's default 1 s).",
    metavar="TIME",
    show_default=False,
)
ENTRY_OPTION = typer.Option(None, "--entry", help="MODEL: function returning (model, inputs).")
DTYPE_OPTION = typer.Option(None, "--dtype", help="MODEL: cast to fp32, bf16 or fp16.")
MODE_OPTION = typer.Option(None, "--mode", help="MODEL: inference (default) or training.")
WARMUP_OPTION = typer.Option(None, "--warmup", help="MODEL: untimed iterations (default 3).", show_default=False)
ITERS_OPTION = typer.Option(
    None,
    "--iters",
    help=f"MODEL: profiled iterations = samples per op (default {DEFAULT_GATE_ITERS}).",
    show_default=False,
)
ROOFS_OPTION = typer.Option(None, "--roofs", help="MODEL: auto, spec or measured (as diagnose).")
CONFIRM_OPTION = typer.Option(
    1,
    "--confirm",
    min=0,
    help="SUITE/MODEL: when points do not pass, measure again up to N times and judge those points on the "
    "new measurement (a transient must strike the same point every time to fail). 0: judge the first.",
)


def gate(
    target: str = TARGET_ARGUMENT,
    script_args: list[str] | None = SCRIPT_ARGS_ARGUMENT,
    baseline: Path | None = BASELINE_OPTION,
    fail_on: list[str] | None = FAIL_ON_OPTION,
    confidence: float | None = CONFIDENCE_OPTION,
    no_stats: bool = NO_STATS_OPTION,
    fmt: str = FMT_OPTION,
    as_json: bool = json_option(),
    junit: Path | None = JUNIT_OPTION,
    markdown_file: Path | None = MARKDOWN_FILE_OPTION,
    update_baseline: bool = UPDATE_BASELINE_OPTION,
    force: bool = FORCE_OPTION,
    output: Path | None = OUTPUT_OPTION,
    device: str | None = DEVICE_OPTION,
    sheet: str | None = SHEET_OPTION,
    spec: list[Path] | None = spec_option(),
    warm: bool | None = WARM_OPTION,
    max_time: str | None = MAX_TIME_OPTION,
    entry: str | None = ENTRY_OPTION,
    dtype: str | None = DTYPE_OPTION,
    mode: str | None = MODE_OPTION,
    warmup: int | None = WARMUP_OPTION,
    iters: int | None = ITERS_OPTION,
    roofs: str | None = ROOFS_OPTION,
    confirm: int = CONFIRM_OPTION,
    timeout: str | None = timeout_option("SUITE/MODEL: nothing measured, never a pass, exit 4"),
) -> None:
    """Compare a report with a baseline: exit 0 pass, 1 regression, 3 inconclusive (too noisy), 2 bad input,
    4 nothing measured (the model or suite failed, timed out or measured no row: never a pass).

    Counts (FLOPs, bytes, kernels) must match; efficiency and time are tested on the timing samples (a
    Hodges–Lehmann shift with its Mann–Whitney confidence interval), so noise alone does not fail: a regression
    is a change whose whole interval lies beyond the limit. Points match by key (bench: kind, label, dtype, op;
    diagnose: module, op, input shapes, occurrence). A baseline from another machine is a warning. Settings also
    come from the tool.roofline.gate table of pyproject.toml. See docs/ci.md.
    """
    from roofline.cli.process import collector_paused
    from roofline.gate import run as gate_run

    started = time.perf_counter()
    fmt = _format(fmt, as_json)
    kind = gate_run.kind_of(target)
    max_time_s = None if max_time is None else parse_time(max_time, "--max-time", "s")
    timeout_s = check_timeout(timeout)
    _check_kind(kind, output=output, device=device, sheet=sheet, spec=spec, confirm=confirm, timeout=timeout,
                warm=warm, max_time=max_time, entry=entry, dtype=dtype, mode=mode, warmup=warmup, iters=iters,
                roofs=roofs, script_args=script_args)  # fmt: skip
    written = _prepare_outputs(target, kind, baseline, spec, output, junit, markdown_file, force)
    options = gate_run.MeasureOptions(
        device=device, sheet=sheet, spec_files=spec or [], warm=warm, max_time_s=max_time_s, entry=entry, dtype=dtype,
        mode=mode, warmup=warmup, iters=iters, roofs=roofs, argv=script_args or [],
    )  # fmt: skip
    # NB: gate_run.run turns a TimedOut while measuring into NotMeasured (exit 4); a report read (not measured):
    # the collector paused (roofline.cli.process.collector_paused)
    with time_limit(timeout_s), collector_paused(kind == "report"):
        gated = _gate_run(target, kind, baseline, fail_on, confidence, no_stats, options, confirm, output)
    result = gated.result
    with collector_paused():  # NB: 100,000 points' results: each collection while rendering walked them (1 s)
        _show(result, fmt)
        _write(result, written, markdown_file, junit, started)
    if gated.unwritten is not None:
        raise gated.unwritten
    if update_baseline:
        if gate_run.update_baseline(gated, force=force):
            info(f"Baseline {gated.baseline_path} updated ({result.verdict}).")
        else:
            info(f"Baseline {gated.baseline_path} not updated: the gate did not pass (--force updates it anyway).")
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _format(fmt: str, as_json: bool) -> str:
    """--format (table, markdown, json), json with --json."""
    from roofline.errors import UsageError

    fmt = "json" if as_json else fmt.lower()
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    return fmt


def _check_kind(kind: str, *, confirm: int, warm: bool | None, max_time: float | None, **given: Any) -> None:
    """Options that do not apply to this kind of INPUT are errors (``given``: the others, by parameter name)."""
    bench_only = {"--warm/--cold": warm, "--max-time": max_time}
    model_only = {
        "--entry": given["entry"],
        "--dtype": given["dtype"],
        "--mode": given["mode"],
        "--warmup": given["warmup"],
        "--iters": given["iters"],
        "--roofs": given["roofs"],
        "script arguments": given["script_args"],
    }
    measuring = {
        "--output": given["output"],
        "--device": given["device"],
        "--sheet": given["sheet"],
        "--spec": given["spec"],
        "--confirm": confirm if confirm != 1 else None,
        "--timeout": given["timeout"],
    }
    if kind == "report":
        _reject(kind, {**measuring, **bench_only, **model_only})
    elif kind == "suite":
        _reject(kind, model_only)
    else:
        _reject(kind, bench_only)


def _gate_run(
    target: str,
    kind: Any,
    baseline: Path | None,
    fail_on: list[str] | None,
    confidence: float | None,
    no_stats: bool,
    options: Any,
    confirm: int,
    output: Path | None,
) -> Any:
    """The gate: the report read, or the suite or model measured (its progress shown), judged on the baseline."""
    from roofline.cli.output import bench_progress, command_line, diagnose_status
    from roofline.gate import run as gate_run

    return gate_run.run(
        target,
        kind=kind,
        baseline=baseline,
        fail_on=fail_on or [],
        confidence=confidence,
        stats=not no_stats,
        options=options,
        confirm=confirm,
        output=output,
        command=command_line(),
        progress=lambda measured: bench_progress() if measured == "suite" else diagnose_status(),
        notify=info,
    )


def _show(result: Any, fmt: str) -> None:
    from roofline.render import gate as render

    if fmt == "json":
        print_text(result.to_json())
    elif fmt == "markdown":
        print_text(render.markdown(result))
    else:
        print_text(render.GateRenderer().render(result))


def _write(
    result: Any, written: list[Path | None], markdown_file: Path | None, junit: Path | None, started: float
) -> None:
    """--markdown and --junit, after the verdict: a file that cannot be written (disk full) is one line, exit 2, and
    no baseline update."""
    from roofline.render import gate as render
    from roofline.report.outputs import write

    if markdown_file is not None and written[2] is not None:
        write(written[2], render.markdown(result), option="--markdown", shown=markdown_file)
    if junit is not None and written[1] is not None:
        duration = time.perf_counter() - started
        write(written[1], render.junit(result, duration_s=duration), option="--junit", shown=junit)
