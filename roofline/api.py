"""Functions for notebooks and scripts: load a report, get its points as a DataFrame, get the chart as a Figure.

    from roofline import load_report, points_frame, roofline_figure

    report = load_report("roofline-report.json")
    frame = points_frame(report)                      # one row per report row, every field
    fig = roofline_figure(report, devices=["b200"])  # a matplotlib Figure; fig.savefig("chart.png")

matplotlib and pandas are imported by the functions that need them, not by ``import roofline``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.report.chart import DEFAULT_TOP, ChartSpec, KnownDevice, NamedReport, check_top, report_chart
from roofline.report.points import Point, report_points
from roofline.report.schema import Report, read_report

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

ReportLike = Report | str | Path


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
    from roofline.render.chart import figure

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


__all__ = ["chart_spec", "known_devices", "load_report", "points", "points_frame", "roofline_figure"]
