"""`roofline report REPORT.json --format html|markdown|csv|parquet -o FILE`."""

from __future__ import annotations

from pathlib import Path

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
        None, "--format", "-f", help="html, markdown, csv or parquet (default: from -o, else markdown)."
    ),
    rows: int | None = typer.Option(
        None, "--rows", help="Points in the html/markdown table, largest time first (default: html 500, markdown 25)."
    ),
    top: int = typer.Option(10, "--top", help="Points labelled on the html chart."),
    per_call: bool = typer.Option(
        False, "--per-call", help="Diagnose reports: one point per op call in html/markdown."
    ),
    force: bool = out.force_option(),
) -> None:
    """Turn a report into a page or a table: HTML, Markdown, CSV or Parquet.

    html: one self-contained file (summary, the roofline chart as inline SVG, findings, the points) that opens
    offline. markdown: summary, points and findings as GitHub tables, for a PR comment or a CI step summary.
    csv / parquet: every row with all its fields (nested ones flattened as params.m, lists as JSON text) plus the
    point columns (point.intensity, point.throughput_flops_per_s, ...), for your own plots. Parquet needs
    pyarrow. See docs/plot.md.

    Examples:

      roofline report roofline-report.json -o report.html

      roofline report bench.json --format markdown >> "$GITHUB_STEP_SUMMARY"

      roofline report bench.json -o points.csv
    """
    from roofline.errors import UsageError
    from roofline.report.chart import check_top

    chosen = out.output_format(output, fmt, REPORT_FORMATS, "markdown")
    if rows is not None and rows < 1:
        raise UsageError(f"--rows {rows}: at least 1")
    check_top(top)
    out.refuse_binary_to_terminal(output, chosen)
    where = out.prepare_outputs(output, chosen, inputs=[("the report", path)])
    from roofline.report.schema import read_report

    loaded = read_report(path)
    name = path.stem
    notes: tuple[str, ...] = ()
    if chosen == "csv":
        from roofline.report.export import to_csv

        content: str | bytes = to_csv(loaded, name)
    elif chosen == "parquet":
        from roofline.report.export import to_parquet

        content = to_parquet(loaded, name)
    else:
        from roofline.api import known_devices
        from roofline.report.chart import NamedReport, report_chart
        from roofline.report.points import report_document

        spec = report_chart([NamedReport(name, loaded)], known_devices, top=top, per_call=per_call)
        notes = spec.notes
        doc = report_document(loaded, name, notes=notes, per_call=per_call)
        if chosen == "html":
            from dataclasses import replace

            from roofline.render.report_html import HtmlReportRenderer

            # the page lists the notes under the chart: not twice
            svg = out.chart_content(replace(spec, notes=()), "svg") if spec.counts.get("plotted") else ""
            content = HtmlReportRenderer(chart_svg=str(svg), **({"rows": rows} if rows else {})).render(doc)
        else:
            from roofline.render.report_markdown import MarkdownReportRenderer

            content = MarkdownReportRenderer(**({"rows": rows} if rows else {})).render(doc)
    out.write_output(content, where, chosen, shown=output)
    if output is not None:
        out.print_notes(notes)
        info(f"Report written to {output}")
