"""`roofline gate INPUT --baseline FILE`: fail CI when kernels regress against a baseline (docs/ci.md)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from roofline.cli.common import json_option, print_text, spec_option
from roofline.cli.timeout import time_limit, timeout_option
from roofline.cli.verbosity import info

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


def gate(
    target: str = typer.Argument(
        ...,
        help="What to gate: a bench or diagnose report (REPORT.json), or a bench suite (SUITE.yaml, or a shipped "
        "suite's name) or model file (MODEL.py) to measure now.",
        metavar="REPORT.json|SUITE.yaml|MODEL.py",
    ),
    script_args: list[str] | None = typer.Argument(
        None, help="MODEL.py: arguments for the script after `--` (its sys.argv[1:]).", metavar="[-- ARGS]"
    ),
    baseline: Path | None = typer.Option(
        None,
        "--baseline",
        "-b",
        help="The baseline (`roofline baseline save`); default: `baseline` in pyproject's tool.roofline.gate table.",
    ),
    fail_on: list[str] | None = typer.Option(
        None,
        "--fail-on",
        help="A rule METRIC:LIMIT, repeatable: time:+10%, efficiency:-5%, flops:0, bytes:+0, kernels:+1, time:+50us, "
        "METRIC:off. Replaces the defaults (flops:0 bytes:0 kernels:0 efficiency:-5%) of the metrics it names.",
        metavar="RULE",
    ),
    confidence: float | None = typer.Option(
        None, "--confidence", help="Confidence of the shift's interval (default 0.99).", show_default=False
    ),
    no_stats: bool = typer.Option(
        False,
        "--no-stats",
        help="Compare single numbers (medians) against the limits instead of testing the samples.",
    ),
    fmt: str = typer.Option("table", "--format", help="table, markdown (for a CI step summary) or json."),
    as_json: bool = json_option(),
    junit: Path | None = typer.Option(
        None, "--junit", help="Also write JUnit XML: a test case per point.", metavar="FILE"
    ),
    markdown_file: Path | None = typer.Option(
        None, "--markdown", help="Also write the markdown summary to FILE.", metavar="FILE"
    ),
    update_baseline: bool = typer.Option(
        False, "--update-baseline", help="After a pass, replace the baseline with this report's points."
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Replace an existing -o, --junit or --markdown file even when it is not one roofline writes (never a "
        "file the gate reads); with --update-baseline: replace the baseline whatever the verdict.",
    ),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="SUITE/MODEL: also write the measured report here.", metavar="FILE"
    ),
    device: str | None = typer.Option(
        None,
        "--device",
        "-d",
        help="SUITE/MODEL: cuda (cuda:N) or cpu (default: cuda when torch sees a GPU).",
        metavar="cuda|cpu",
    ),
    sheet: str | None = typer.Option(None, "--sheet", help="SUITE/MODEL: GPU spec sheet for the roofs."),
    spec: list[Path] | None = spec_option(),
    warm: bool | None = typer.Option(
        None, "--warm/--cold", help="SUITE: cache warm or flushed before each sample (as bench).", show_default=False
    ),
    max_time: float | None = typer.Option(
        None, "--max-time", help="SUITE: time budget per row in seconds (bench's default 1).", show_default=False
    ),
    entry: str | None = typer.Option(None, "--entry", help="MODEL: function returning (model, inputs)."),
    dtype: str | None = typer.Option(None, "--dtype", help="MODEL: cast to fp32, bf16 or fp16."),
    mode: str | None = typer.Option(None, "--mode", help="MODEL: inference (default) or training."),
    warmup: int | None = typer.Option(
        None, "--warmup", help="MODEL: untimed iterations (default 3).", show_default=False
    ),
    iters: int | None = typer.Option(
        None,
        "--iters",
        help=f"MODEL: profiled iterations = samples per op (default {DEFAULT_GATE_ITERS}).",
        show_default=False,
    ),
    roofs: str | None = typer.Option(None, "--roofs", help="MODEL: auto, spec or measured (as diagnose)."),
    confirm: int = typer.Option(
        1,
        "--confirm",
        min=0,
        help="SUITE/MODEL: when points do not pass, measure again up to N times and judge those points on the "
        "new measurement (a transient must strike the same point every time to fail). 0: judge the first.",
    ),
    timeout: float | None = timeout_option("SUITE/MODEL: nothing measured, never a pass, exit 4"),
) -> None:
    """Compare a report with a baseline: exit 0 pass, 1 regression, 3 inconclusive (too noisy), 2 bad input,
    4 nothing measured (the model or suite failed, timed out or measured no row: never a pass).

    Counts (FLOPs, bytes, kernels) must match; efficiency and time are tested on the timing samples (a
    Hodges–Lehmann shift with its Mann–Whitney confidence interval), so noise alone does not fail: a regression
    is a change whose whole interval lies beyond the limit. Points match by key (bench: kind, label, dtype, op;
    diagnose: module, op, input shapes, occurrence). A baseline from another machine is a warning. Settings also
    come from the tool.roofline.gate table of pyproject.toml. See docs/ci.md.
    """
    from roofline.cli.output import bench_progress, command_line, diagnose_status
    from roofline.errors import UsageError
    from roofline.gate import run as gate_run

    started = time.perf_counter()
    fmt = "json" if as_json else fmt.lower()
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    kind = gate_run.kind_of(target)
    bench_only = {"--warm/--cold": warm, "--max-time": max_time}
    model_only = {
        "--entry": entry,
        "--dtype": dtype,
        "--mode": mode,
        "--warmup": warmup,
        "--iters": iters,
        "--roofs": roofs,
        "script arguments": script_args,
    }
    measuring = {
        "--output": output,
        "--device": device,
        "--sheet": sheet,
        "--spec": spec,
        "--confirm": confirm if confirm != 1 else None,
        "--timeout": timeout,
    }
    if kind == "report":
        _reject(kind, {**measuring, **bench_only, **model_only})
    elif kind == "suite":
        _reject(kind, model_only)
    else:
        _reject(kind, bench_only)

    written = _prepare_outputs(target, kind, baseline, spec, output, junit, markdown_file, force)
    with time_limit(timeout):  # NB: gate_run.run turns a TimedOut while measuring into NotMeasured (exit 4)
        gated = gate_run.run(
            target,
            kind=kind,
            baseline=baseline,
            fail_on=fail_on or [],
            confidence=confidence,
            stats=not no_stats,
            options=gate_run.MeasureOptions(
                device=device,
                sheet=sheet,
                spec_files=spec or [],
                warm=warm,
                max_time_s=max_time,
                entry=entry,
                dtype=dtype,
                mode=mode,
                warmup=warmup,
                iters=iters,
                roofs=roofs,
                argv=script_args or [],
            ),
            confirm=confirm,
            output=output,
            command=command_line(),
            progress=lambda measured: bench_progress() if measured == "suite" else diagnose_status(),
            notify=info,
        )
    result = gated.result

    from roofline.render import gate as render

    if fmt == "json":
        print_text(result.to_json())
    elif fmt == "markdown":
        print_text(render.markdown(result))
    else:
        print_text(render.GateRenderer().render(result))
    # after the verdict: a file that cannot be written (disk full) is one line, exit 2, and no baseline update
    from roofline.report.outputs import write

    if markdown_file is not None and written[2] is not None:
        write(written[2], render.markdown(result), option="--markdown", shown=markdown_file)
    if junit is not None and written[1] is not None:
        duration = time.perf_counter() - started
        write(written[1], render.junit(result, duration_s=duration), option="--junit", shown=junit)
    if gated.unwritten is not None:
        raise gated.unwritten
    if update_baseline:
        if gate_run.update_baseline(gated, force=force):
            info(f"Baseline {gated.baseline_path} updated ({result.verdict}).")
        else:
            info(f"Baseline {gated.baseline_path} not updated: the gate did not pass (--force updates it anyway).")
    if result.exit_code:
        raise typer.Exit(result.exit_code)
