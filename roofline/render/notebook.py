"""A report in a notebook: the HTML and Markdown a Jupyter cell shows for a Report or a Diagnosis.

The same document (roofline.report.points.report_document) and the same renderers as `roofline report -o
page.html|page.md`, bounded for a notebook: the top ``rows`` points and ``findings`` findings, with a line saying
how many more the report holds (a 100,000-row report shows as fast as its document is built, never 100,000 table
rows). The chart is inline as a PNG data URI when matplotlib can be imported (imported here, when a cell is
shown); without it, no chart and no error. User text (module names, labels) is escaped by the renderers.
"""

from __future__ import annotations

import base64
from typing import Any

ROWS = 25
FINDINGS = 10
CHART_PX = (960, 600)


def _chart_uri(spec: Any) -> str:
    """The chart as a PNG data URI; '' without matplotlib or when drawing it fails (the page shows without it)."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        return ""
    from dataclasses import replace

    from roofline.render.figure import figure, figure_bytes

    try:
        fig = figure(replace(spec, notes=()), size_px=CHART_PX)  # the page lists the notes under the chart
        png = figure_bytes(fig, "png")
    except ImportError:
        return ""
    return "data:image/png;base64," + base64.b64encode(bytes(png)).decode("ascii")


def report_html(report: Any, name: str = "report", *, rows: int = ROWS, findings: int = FINDINGS,
                chart: bool = True) -> str:  # fmt: skip
    """The report as an HTML element for a notebook cell: summary, memory, chart, findings, the top points."""
    from roofline.render.report_html import HtmlReportRenderer
    from roofline.report.chart import NamedReport, report_chart
    from roofline.report.points import report_document
    from roofline.roofs import known_devices

    spec = report_chart([NamedReport(name, report)], known_devices)
    doc = report_document(report, name, notes=spec.notes)
    uri = _chart_uri(spec) if chart and spec.counts.get("plotted") else ""
    return HtmlReportRenderer(rows=rows, findings=findings, fragment=True, chart_uri=uri).render(doc)


def report_markdown(report: Any, name: str = "report", *, rows: int = ROWS, findings: int = FINDINGS) -> str:
    """The report as Markdown (no chart: Markdown has no inline image the renderers write)."""
    from roofline.render.report_markdown import MarkdownReportRenderer
    from roofline.report.points import report_document

    return MarkdownReportRenderer(rows=rows, findings=findings).render(report_document(report, name))


def register() -> None:
    """Report._repr_html_ and _repr_markdown_ answer through these (roofline.report.schema.DISPLAY)."""
    from roofline.report.schema import DISPLAY

    DISPLAY.setdefault("html", report_html)
    DISPLAY.setdefault("markdown", report_markdown)


__all__ = ["FINDINGS", "ROWS", "register", "report_html", "report_markdown"]
