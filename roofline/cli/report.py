"""`roofline report REPORT.json --format html|markdown|csv|parquet|console -o FILE`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from roofline.cli import output as out
from roofline.cli.verbosity import info

REPORT_FORMATS = {
    ".html": "html",
    ".htm": "html",
    ".md": "markdown",
    ".markdown": "markdown",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def report(
    path: Path = typer.Argument(..., help="A report JSON from analyze, bench or diagnose.", metavar="REPORT.json"),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Output file; its extension names the format (default: stdout)."
    ),
    fmt: str | None = typer.Option(
        None,
        "--format",
        "-f",
        help="html, markdown, csv, parquet or console (a diagnose report: the tables `roofline diagnose` printed) "
        "(default: from -o; else console for a diagnose report on a terminal, markdown otherwise).",
    ),
    rows: int | None = typer.Option(
        None, "--rows", help="Points in the html/markdown table, largest time first (default: html 500, markdown 25)."
    ),
    top: int = typer.Option(10, "--top", help="Points labelled on the html chart; console: rows and findings shown."),
    per_call: bool = typer.Option(
        False, "--per-call", help="Diagnose reports: one point per op call in html/markdown."
    ),
    force: bool = out.force_option(),
) -> None:
    """Turn a report into a page or a table: HTML, Markdown, CSV, Parquet, or the console's view.

    html: one self-contained file (summary, the roofline chart as inline SVG, findings, the points) that opens
    offline. markdown: summary, points and findings as GitHub tables, for a PR comment or a CI step summary.
    csv / parquet: every row with all its fields (nested ones flattened as params.m, lists as JSON text) plus the
    point columns (point.intensity, point.throughput_flops_per_s, ...), for your own plots. Parquet needs
    pyarrow. console: a diagnose report as `roofline diagnose` showed it (summary, top ops and modules, findings,
    verified techniques, counters), read from the report. See docs/plot.md.

    Examples:

      roofline report roofline-report.json

      roofline report roofline-report.json -o report.html

      roofline report bench.json --format markdown >> "$GITHUB_STEP_SUMMARY"

      roofline report bench.json -o points.csv
    """
    from roofline.errors import UsageError
    from roofline.report.chart import check_top

    chosen = _format(output, fmt)
    if rows is not None and rows < 1:
        raise UsageError(f"--rows {rows}: at least 1")
    check_top(top)
    out.refuse_binary_to_terminal(output, chosen)
    where = out.prepare_outputs(output, chosen, inputs=[("the report", path)])
    from roofline.cli.process import frozen_after
    from roofline.report.schema import read_report

    # NB: what the page or chart made (a matplotlib figure's cycles among it) frozen, not collected: the process
    # ends once it is written (roofline.cli.process.frozen_after; a collection of it took 0.7 s of an HTML page)
    with frozen_after():
        content, notes = _content(
            read_report(path), path, chosen, fmt, rows=rows, top=top, per_call=per_call, output=output
        )
    out.write_output(content, where, chosen, shown=output)
    if output is not None:
        out.print_notes(notes)
        info(f"Report written to {output}")


CONSOLE = "console"


def _content(
    loaded: Any,
    path: Path,
    chosen: str,
    fmt: str | None,
    *,
    rows: int | None,
    top: int,
    per_call: bool,
    output: Path | None,
) -> tuple[str | bytes, tuple[str, ...]]:
    """What `roofline report` writes of the report read from ``path`` in the ``chosen`` format, and the chart's
    notes (html, markdown)."""
    from roofline.errors import UsageError

    notes: tuple[str, ...] = ()
    if chosen == CONSOLE:
        from roofline.render.diagnose import has_console_view

        if not has_console_view(loaded) and fmt is None:
            chosen = "markdown"  # the terminal's default, for a report without a console view
        elif not has_console_view(loaded):
            what = f"a {loaded.source} report" if loaded.source != "diagnose" else "a diagnose report without a summary"
            raise UsageError(
                f"--format console: {path} is {what}; the console view is a diagnosis's (use markdown, html, csv "
                "or parquet)"
            )
    if chosen == CONSOLE:
        content: str | bytes = _console(loaded, top, color=None if output is None else False)
    elif chosen in ("csv", "parquet"):
        from roofline.report.export import to_csv, to_parquet

        content = (to_csv if chosen == "csv" else to_parquet)(loaded, path.stem)
    else:
        return _page(loaded, path.stem, chosen, rows=rows, top=top, per_call=per_call)
    return content, notes


def _format(output: Path | None, fmt: str | None) -> str:
    """--format (console, or one of REPORT_FORMATS), else -o's extension, else console on a terminal (a diagnose
    report's; the others fall back to markdown), else markdown."""
    if fmt is not None and fmt.lower() == CONSOLE:
        return CONSOLE
    terminal = output is None and out.stdout_is_terminal()
    return out.output_format(output, fmt, REPORT_FORMATS, CONSOLE if terminal else "markdown")


def _console(loaded: Any, top: int, *, color: bool | None) -> str:
    """A diagnose report as `roofline diagnose` printed it (and, for a run on several ranks, the ranks' tables)."""
    from roofline.render.diagnose import DiagnoseRenderer

    text = DiagnoseRenderer(top=top, color=color).render(loaded)
    merged = (loaded.model_extra or {}).get("distributed")
    if isinstance(merged, dict):
        from roofline.render.distributed import DistributedRenderer

        text += DistributedRenderer(top=top, color=color).render(merged)
    return text


def _page(
    loaded: Any, name: str, chosen: str, *, rows: int | None, top: int, per_call: bool
) -> tuple[str, tuple[str, ...]]:
    """html or markdown: the page, and the chart's notes."""
    from roofline.api import known_devices
    from roofline.report.chart import NamedReport, report_chart
    from roofline.report.points import report_document, report_points

    points = report_points(loaded, name, per_call=per_call)  # once, for the chart and the page
    named = [NamedReport(name, loaded, points)]
    # markdown shows the chart's notes, not the chart: no marks made
    spec = report_chart(named, known_devices, top=top, per_call=per_call, marks=chosen == "html")
    doc = report_document(loaded, name, notes=spec.notes, per_call=per_call, points=points)
    if chosen == "html":
        from dataclasses import replace

        from roofline.render.report_html import HtmlReportRenderer

        # the page lists the notes under the chart: not twice
        svg = out.chart_content(replace(spec, notes=()), "svg") if spec.counts.get("plotted") else ""
        return HtmlReportRenderer(chart_svg=str(svg), **({"rows": rows} if rows else {})).render(doc), spec.notes
    from roofline.render.report_markdown import MarkdownReportRenderer

    return MarkdownReportRenderer(**({"rows": rows} if rows else {})).render(doc), spec.notes
