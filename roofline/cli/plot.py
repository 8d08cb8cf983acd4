"""`roofline plot REPORT.json ... -o chart.png`, and `--plot FILE` for analyze, bench and diagnose."""

from __future__ import annotations

import contextvars
import sys
from pathlib import Path
from typing import Any

import typer

from roofline.cli.common import spec_option, split_list
from roofline.errors import UsageError

CHART_FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
BINARY_FORMATS = ("png", "pdf", "parquet")
DEFAULT_SIZE = "1600x1000"


# ------------------------------------------------------------------------------------------------ output


def _either(items: list[str]) -> str:
    return ", ".join(items[:-1]) + f" or {items[-1]}" if len(items) > 1 else items[0]


def output_format(
    output: Path | None, fmt: str | None, formats: dict[str, str], default: str, *, option: str = "-o"
) -> str:
    """--format when given (checked), else the format the output's extension names, else ``default``."""
    names = list(dict.fromkeys(formats.values()))
    if fmt is not None:
        if fmt.lower() not in names:
            raise UsageError(f"--format {fmt!r}: use {_either(names)}")
        return fmt.lower()
    if output is None:
        return default
    suffix = output.suffix.lower()
    if suffix in formats:
        return formats[suffix]
    exts = _either(list(formats))
    hint = " (or give --format)" if option == "-o" else ""
    if not suffix:
        raise UsageError(f"{option} {output}: no extension to tell the format: end it in {exts}{hint}")
    raise UsageError(f"{option} {output}: unknown output extension {suffix!r}: use {exts}{hint}")


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def write_output(content: str | bytes, output: Path | None, fmt: str) -> None:
    """To -o (atomically), else to stdout; binary output to a terminal is refused (it would garble it)."""
    from roofline.fileio import atomic_write_bytes

    if output is None:
        if isinstance(content, bytes):
            if stdout_is_terminal():
                raise UsageError(
                    f"not writing {fmt} (binary) to a terminal: give -o FILE.{fmt}, or redirect stdout to a file"
                )
            sys.stdout.flush()
            sys.stdout.buffer.write(content)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(content)
        return
    try:
        atomic_write_bytes(output, content if isinstance(content, bytes) else content.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"-o {output}: cannot write it: {exc.strerror or exc}") from None


def print_notes(notes: Any) -> None:
    for note in notes:
        typer.echo(f"note: {note}", err=True)


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


def chart_content(spec: Any, fmt: str, size: tuple[int, int] = (1600, 1000)) -> str | bytes:
    """The drawn chart: SVG as text, PNG and PDF as bytes."""
    from roofline.render.chart import figure, figure_bytes

    data = figure_bytes(figure(spec, size_px=size), fmt)
    return data.decode("utf-8") if fmt == "svg" else data


# ------------------------------------------------------------------------------------------------ --plot


_REQUESTED: contextvars.ContextVar[Path | None] = contextvars.ContextVar("roofline_plot", default=None)


def _remember(ctx: typer.Context, value: Path | None) -> Path | None:
    """Checks --plot FILE before the command runs (a bench must not fail at its end on a typo), and keeps it
    for :func:`write_requested_plot` until the command ends."""
    if value is not None:
        output_format(value, None, CHART_FORMATS, "png", option="--plot")
    _REQUESTED.set(value)
    ctx.call_on_close(lambda: _REQUESTED.set(None))
    return value


def plot_option() -> Any:
    """--plot FILE for a command that writes a report; the command calls write_requested_plot(report) once the
    report is built (the option's value reaches it through the command's context, not its signature)."""
    return typer.Option(
        None,
        "--plot",
        metavar="FILE",
        help="Also write the roofline chart of the report here (.png, .svg or .pdf; see `roofline plot`).",
        callback=_remember,
        expose_value=False,
    )


def write_requested_plot(report: Any, name: str) -> None:
    """Write the chart of ``report`` where --plot asked for it (nothing when it did not)."""
    path = _REQUESTED.get()
    if path is None:
        return
    from roofline.api import known_devices
    from roofline.report.chart import NamedReport, build_chart

    known = known_devices([d.name for d in report.devices])
    spec = build_chart([NamedReport(name, report)], known=known)
    fmt = output_format(path, None, CHART_FORMATS, "png")
    write_output(chart_content(spec, fmt), path, fmt)
    print_notes(spec.notes)
    typer.echo(f"Chart written to {path}", err=True)


# ------------------------------------------------------------------------------------------------ command


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
    calibration: Path | None = typer.Option(
        None,
        "--calibration",
        help="A `roofline calibrate` JSON whose measured roofs to draw (default: the newest cached one per device).",
        metavar="FILE",
    ),
    size: str = typer.Option(DEFAULT_SIZE, "--size", help="Width x height in pixels (png at 100 dpi)."),
    spec: list[Path] | None = spec_option(),
) -> None:
    """Draw the roofline chart of one or more reports (PNG, SVG or PDF).

    Log-log axes: arithmetic intensity (FLOP/byte) against throughput (FLOP/s). The DRAM roof and one compute
    roof per precision the points use, measured roofs beside spec ones with their ratio, L2 where known, ridge
    points, and the launch band. Points are coloured by bound and sized by their share of the time; the top N
    are labelled. Points above their roof are flagged; untimed and uncounted ones are skipped; the notes say so
    (on stderr and in the figure). See docs/plot.md.

    Examples:

      roofline plot roofline-report.json -o chart.png

      roofline plot bench.json -o chart.svg --device a100-sxm-80gb --device b200

      roofline plot before.json after.json -o compare.pdf --top 5
    """
    from roofline.api import chart_spec

    chosen = output_format(output, fmt, CHART_FORMATS, "png")
    pixels = parse_size(size)
    devices = [name for item in device or [] for name in split_list(item, "--device")]
    if output is None and chosen in BINARY_FORMATS and stdout_is_terminal():
        write_output(b"", None, chosen)  # refuses, before any work
    chart = chart_spec(
        reports, devices=devices, top=top, per_call=per_call, calibration=calibration, spec_files=spec or []
    )
    write_output(chart_content(chart, chosen, pixels), output, chosen)
    print_notes(chart.notes)
    if output is not None:
        typer.echo(f"Chart written to {output}", err=True)
