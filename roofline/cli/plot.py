"""`roofline plot REPORT.json ... -o chart.png`: the roofline chart of reports (--plot FILE: roofline.cli.output)."""

from __future__ import annotations

from pathlib import Path

import typer

from roofline.cli import output as out
from roofline.cli.common import spec_option, split_list
from roofline.cli.verbosity import info
from roofline.errors import UsageError

DEFAULT_SIZE = "1600x1000"


def parse_size(text: str) -> tuple[int, int]:
    """'1600x1000' -> (1600, 1000) pixels."""
    parts = text.lower().split("x")
    try:
        width, height = (int(p) for p in parts)
    except ValueError:
        raise UsageError(f"--size {text!r}: write WIDTHxHEIGHT in pixels, e.g. 1600x1000") from None
    if not (480 <= width <= 10000 and 300 <= height <= 10000):
        raise UsageError(f"--size {text!r}: from 480x300 to 10000x10000 pixels")
    return width, height


VERIFIED_OPTION = typer.Option(
    False,
    "--verified",
    help="Diagnose reports written with --verify: an arrow from each op a verified finding covers to its "
    "point with that finding's technique (its time in the verified run; where none is stored, an estimate: the "
    "op's time / the measured whole-model gain, dashed).",
)
CALIBRATION_OPTION = typer.Option(
    None,
    "--calibration",
    help="A `roofline calibrate` JSON whose measured roofs to draw (default: the newest cached one per device).",
    metavar="FILE",
)


def plot(
    reports: list[Path] = typer.Argument(
        ..., help="Report JSON file(s) from analyze, bench or diagnose; several are overlaid.", metavar="REPORT.json"
    ),
    output: Path | None = typer.Option(
        None,
        "--output",
        "-o",
        help="Chart file: .png, .svg or .pdf (default: stdout, which must not be a terminal for png/pdf).",
    ),
    fmt: str | None = typer.Option(None, "--format", "-f", help="png, svg or pdf (default: from -o, else png)."),
    device: list[str] | None = typer.Option(
        None,
        "--device",
        "-d",
        help="Also re-draw the points on this device's roofs (same intensity and efficiency); repeatable or a "
        "comma list.",
    ),
    top: int = typer.Option(10, "--top", help="Label the N points with the largest share of the time."),
    per_call: bool = typer.Option(False, "--per-call", help="Diagnose reports: one point per op call."),
    verified: bool = VERIFIED_OPTION,
    calibration: Path | None = CALIBRATION_OPTION,
    size: str = typer.Option(DEFAULT_SIZE, "--size", help="Width x height in pixels (png at 100 dpi)."),
    spec: list[Path] | None = spec_option(),
    force: bool = out.force_option(),
) -> None:
    """Draw the roofline chart of one or more reports (PNG, SVG or PDF).

    Log-log axes: arithmetic intensity (FLOP/byte) against throughput (FLOP/s). The DRAM roof and one compute
    roof per precision the points use, measured roofs beside spec ones with their ratio, L2 where known, ridge
    points, and the launch band. Points are coloured by bound and sized by their share of the time; the top N
    are labelled. Points above their roof are flagged; untimed and uncounted ones are skipped; the notes say so
    (on stderr and in the figure). --verified draws each op before and after its finding's technique from a
    `diagnose --verify` report. See docs/plot.md.

    Examples:

      roofline plot roofline-report.json -o chart.png

      roofline plot bench.json -o chart.svg --device a100-sxm-80gb --device b200

      roofline plot before.json after.json -o compare.pdf --top 5

      roofline plot verified-report.json --verified -o verified.png
    """
    from roofline.api import chart_spec

    chosen = out.output_format(output, fmt, out.CHART_FORMATS, "png")
    pixels = parse_size(size)
    devices = [name for item in device or [] for name in split_list(item, "--device")]
    out.refuse_binary_to_terminal(output, chosen)
    inputs = [
        *(("a report", path) for path in reports),
        ("the --calibration file", calibration),
        *(("a --spec sheet", path) for path in spec or []),
    ]
    where = out.prepare_outputs(output, chosen, inputs=inputs)
    from roofline.cli.process import frozen_after

    # NB: what the page or chart made (a matplotlib figure's cycles among it) frozen, not collected: the process
    # ends once it is written (roofline.cli.process.frozen_after; a collection of it took 0.7 s of an HTML page)
    with frozen_after():
        chart = chart_spec(
            reports,
            devices=devices,
            top=top,
            per_call=per_call,
            calibration=calibration,
            spec_files=spec or [],
            verified=verified,
        )
        content = out.chart_content(chart, chosen, pixels)
    out.write_output(content, where, chosen, shown=output)
    out.print_notes(chart.notes)
    if output is not None:
        info(f"Chart written to {output}")
