"""`roofline predict REPORT.json --device NAME[,NAME...]`: a measured report's times on other GPUs."""

from __future__ import annotations

from pathlib import Path

import typer

from roofline.cli import output as out
from roofline.cli.common import json_option, print_json, print_text, spec_option, split_list
from roofline.cli.verbosity import info


def target_names(device: list[str] | None) -> list[str]:
    """--device values (repeatable, comma lists) as one list."""
    return [name for item in device or [] for name in split_list(item, "--device")]


def predict(
    report: Path = typer.Argument(..., help="A bench or diagnose report JSON (measured times).", metavar="REPORT.json"),
    device: list[str] | None = typer.Option(
        None, "--device", "-d", help="Target GPU(s) by spec-sheet name; repeatable or a comma list.", metavar="NAME"
    ),
    roofs: str = typer.Option(
        "auto",
        "--roofs",
        help="auto: measured ceilings when both GPUs have them (--calibration, the cache, or the report's stored "
        "measured roofs), else both sheets; spec: the sheets; measured: refuse without them.",
    ),
    calibration: list[Path] | None = typer.Option(
        None,
        "--calibration",
        help="A `roofline calibrate` JSON of the report's GPU or a target (repeatable); default: the cache.",
        metavar="FILE",
    ),
    top: int = typer.Option(20, "--top", help="Op groups in the table, largest measured time first."),
    per_call: bool = typer.Option(False, "--per-call", help="Diagnose reports: one table row per op call."),
    plot: Path | None = typer.Option(
        None, "--plot", help="Also draw measured here against predicted there: .png, .svg or .pdf.", metavar="FILE"
    ),
    as_json: bool = json_option(),
    spec: list[Path] | None = spec_option(),
    force: bool = out.force_option(),
) -> None:
    """Predict a measured report's times on other GPUs, each op scaled by what limits it.

    Per op (diagnose) or row (bench): its bound class and evidence pick the scaling -- compute and memory ops by
    their roof on both GPUs and the clock for the rest of their time, latency and instruction-bound ops by the
    clock, under-filled ops by their waves on each GPU's SMs, launch-bound ops by the launch floors, host time
    unchanged -- on the measured ceilings of both GPUs where calibrations exist, else both spec sheets (the
    table says which). A model's iteration adds the gaps (host time) unchanged; its range sums each op's
    optimistic and pessimistic scaling. The baseline column scales by the spec peaks at the same efficiency
    (what `roofline plot --device` draws). See docs/predict.md.

    Examples:

      roofline predict gpt2.json --device h200-sxm

      roofline predict bench.json --device h200-sxm,a100-sxm-80gb --json

      roofline predict gpt2.json -d h100-sxm --calibration h200-cal.json --calibration h100-cal.json --plot p.png
    """
    from roofline.errors import UsageError
    from roofline.predict import predict_report, predictions_json
    from roofline.report.schema import read_report
    from roofline.roofs import check_targets

    if top < 1:
        raise UsageError(f"--top {top}: at least 1")
    targets = check_targets(target_names(device), spec or [])
    fmt = out.output_format(plot, None, out.CHART_FORMATS, "png", option="--plot") if plot is not None else ""
    inputs = [("the report", report), *(("a --calibration file", c) for c in calibration or [])]
    where = out.prepare_outputs(plot, fmt, inputs=inputs, option="--plot") if plot is not None else None
    loaded = read_report(report)
    predictions = predict_report(
        loaded,
        targets,
        name=report.stem,
        roofs=roofs,
        calibrations=calibration or [],
        spec_files=spec or [],
        per_call=per_call,
    )
    if as_json:
        print_json(predictions_json(predictions))
    else:
        from roofline.render.predict import PredictRenderer

        print_text(PredictRenderer(top=top).render(predictions))
    if plot is not None and where is not None:
        from roofline.render.predict import chart_content

        out.write_output(chart_content(predictions, fmt), where, fmt, shown=plot)
        info(f"Chart written to {plot}")
