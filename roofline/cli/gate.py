"""`roofline gate INPUT --baseline FILE`: fail CI when kernels regress against a baseline (docs/ci.md)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import typer

from roofline.cli.common import json_option, print_text, spec_option

FORMATS = ("table", "markdown", "json")
DEFAULT_GATE_ITERS = 20  # diagnose's default is 10: the gate's interval narrows with more samples per op


def _kind(target: str) -> str:
    """'report' | 'suite' | 'model' for the INPUT argument."""
    lowered = target.lower()
    if lowered.endswith(".json"):
        return "report"
    if lowered.endswith(".py"):
        return "model"
    if lowered.endswith((".yaml", ".yml")):
        return "suite"
    from roofline.cli.bench import _shipped_suites

    if target in _shipped_suites():
        return "suite"
    from roofline.errors import UsageError

    raise UsageError(
        f"{target!r}: give a report (REPORT.json), a bench suite (SUITE.yaml or a shipped suite's name) "
        "or a model file (MODEL.py)"
    )


def _reject(kind: str, given: dict[str, Any]) -> None:
    """Options that do not apply to this kind of INPUT are errors, not silently ignored."""
    from roofline.errors import UsageError

    extra = [name for name, value in given.items() if value not in (None, False, [], ())]
    if extra:
        what = {"report": "a report (nothing is measured)", "suite": "a bench suite", "model": "a model file"}[kind]
        raise UsageError(f"{', '.join(extra)}: not an option for {what}")


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
    force: bool = typer.Option(False, "--force", help="With --update-baseline: replace it whatever the verdict."),
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
) -> None:
    """Compare a report with a baseline: exit 0 pass, 1 regression, 3 inconclusive (too noisy), 2 bad input.

    Counts (FLOPs, bytes, kernels) must match; efficiency and time are tested on the timing samples (a
    Hodges–Lehmann shift with its Mann–Whitney confidence interval), so noise alone does not fail: a regression
    is a change whose whole interval lies beyond the limit. Points match by key (bench: kind, label, dtype, op;
    diagnose: module, op, input shapes, occurrence). A baseline from another machine is a warning. Settings also
    come from the tool.roofline.gate table of pyproject.toml. See docs/ci.md.
    """
    from roofline.errors import UsageError
    from roofline.gate import check
    from roofline.gate.config import find
    from roofline.gate.thresholds import build_rules
    from roofline.report import baseline as baselines

    started = time.perf_counter()
    fmt = "json" if as_json else fmt.lower()
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
    if force and not update_baseline:
        raise UsageError("--force goes with --update-baseline")
    kind = _kind(target)
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
    }
    if kind == "report":
        _reject(kind, {**measuring, **bench_only, **model_only})
    elif kind == "suite":
        _reject(kind, model_only)
    else:
        _reject(kind, bench_only)

    # Everything that can be wrong with the input is checked before a measurement that can take minutes.
    config = find()
    rules = build_rules(
        (config.source, config.fail_on),
        ("--fail-on", fail_on or []),
        confidence=confidence if confidence is not None else config.confidence,
        stats=config.stats and not no_stats,
    )
    baseline_path = baseline or config.baseline_path()
    if baseline_path is None:
        raise UsageError(
            "no baseline: give --baseline FILE (save one with `roofline baseline save REPORT.json -o FILE`), "
            "or set baseline in [tool.roofline.gate] of pyproject.toml"
        )
    saved = baselines.load(baseline_path)

    report_path: Path | None = None
    if kind == "report":
        from roofline.report.schema import read_report

        report_path = Path(target)
        report = read_report(report_path)
        result = check(report, saved, rules)
    else:
        passed = {
            "device": device,
            "sheet": sheet,
            "spec": spec,
            "warm": warm,
            "max_time": max_time,
            **{name.lstrip("-"): value for name, value in model_only.items() if name.startswith("--")},
            "script_args": script_args,
        }
        report = _measure(kind, target, passed)
        result = check(report, saved, rules)
        for attempt in range(confirm):
            doubtful = {p.key for p in result.points if p.verdict in ("regression", "inconclusive")}
            if not doubtful:
                break
            from roofline.gate.measure import confirm as confirmed

            typer.echo(
                f"Measuring again to confirm ({attempt + 1}/{confirm}): {len(doubtful)} point(s) did not pass", err=True
            )
            report, replaced = confirmed(report, _measure(kind, target, passed), doubtful)
            result = check(report, saved, rules)
            result.warnings.append(
                f"re-measured to confirm ({attempt + 1}/{confirm}), judged on the new measurement: "
                + ", ".join(replaced)
            )
        if output is not None:
            from roofline.report.schema import write_report

            write_report(report, output)
            report_path = output
            typer.echo(f"Report written to {output}", err=True)

    from roofline.render import gate as render

    if fmt == "json":
        print_text(result.to_json())
    elif fmt == "markdown":
        print_text(render.markdown(result))
    else:
        print_text(render.GateRenderer().render(result))
    if markdown_file is not None:
        from roofline.fileio import atomic_write_text

        atomic_write_text(markdown_file, render.markdown(result))
    if junit is not None:
        from roofline.fileio import atomic_write_text

        atomic_write_text(junit, render.junit(result, duration_s=time.perf_counter() - started))
    if update_baseline:
        if result.verdict == "pass" or force:
            baselines.save(baselines.from_report(report, path=report_path), baseline_path)
            typer.echo(f"Baseline {baseline_path} updated ({result.verdict}).", err=True)
        else:
            typer.echo(
                f"Baseline {baseline_path} not updated: the gate did not pass (--force updates it anyway).", err=True
            )
    if result.exit_code:
        raise typer.Exit(result.exit_code)


def _measure(kind: str, target: str, args: dict[str, Any]) -> Any:
    """Run the suite or the model with the pass-through options, with bench's / diagnose's progress display."""
    command = " ".join(["roofline", *sys.argv[1:]])
    if kind == "suite":
        from roofline.cli.bench import _progress
        from roofline.gate.measure import measure_suite

        with _progress() as progress:
            return measure_suite(
                target,
                device=args["device"],
                sheet=args["sheet"],
                spec_files=args["spec"] or [],
                warm=args["warm"],
                max_time_s=args["max_time"],
                progress=progress,
                command=command,
            )
    from roofline.cli.diagnose import _status
    from roofline.gate.measure import measure_model

    options = {
        "entry": args["entry"],
        "device": args["device"],
        "dtype": args["dtype"],
        "mode": args["mode"] or "inference",
        "warmup": 3 if args["warmup"] is None else args["warmup"],
        "iters": DEFAULT_GATE_ITERS if args["iters"] is None else args["iters"],
        "sheet": args["sheet"],
        "spec_files": args["spec"] or [],
        "roofs": args["roofs"] or "auto",
        "argv": args["script_args"] or [],
    }
    with _status() as progress:
        return measure_model(Path(target), command=command, progress=progress, **options)
