"""A report as one self-contained HTML file: summary, the chart (inline SVG), findings, the points table.

It opens offline and anywhere: no scripts, no external URLs, fonts or stylesheets (the chart's text is drawn as
paths, the style sheet is inline).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from roofline.render.base import Renderer
from roofline.render.escape import xml_escape, xml_text
from roofline.render.report_markdown import (
    VERIFIED_HEADERS,
    VERIFIED_INTRO,
    finding_text,
    finding_where,
    point_cells,
    point_headers,
    roof_source,
    roof_text,
    seconds,
    summary_items,
    verified_cells,
)
from roofline.report.memory import MODULE_HEADERS, MemoryView, module_cells
from roofline.report.points import FindingView, ReportDocument
from roofline.report.verified import VerifiedView

DEFAULT_ROWS = 500

STYLE = """
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       margin: 0; color: #1d1d1f; background: #fafafa; }
main { max-width: 1400px; margin: 0 auto; padding: 24px 32px 48px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #e5e5e5; padding-bottom: 4px; }
.meta { color: #666; margin: 0 0 12px; font-size: 13px; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f2f2f2;
       padding: 1px 4px; border-radius: 3px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dt { font-weight: 600; }
dd { margin: 0; }
figure { margin: 16px 0; }
figure svg { width: 100%; height: auto; display: block; }
ul.notes { color: #444; font-size: 13px; }
ol.findings li { margin-bottom: 8px; }
.evidence { color: #555; font-size: 13px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 4px 8px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
th { background: #f6f6f6; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.bound-compute { color: #2a9d3a; font-weight: 600; }
.bound-memory { color: #c06a00; font-weight: 600; }
.bound-launch { color: #c2249b; font-weight: 600; }
.bound-host { color: #c2249b; font-weight: 600; }
.bound-parallelism { color: #0a7d8c; font-weight: 600; }
.bound-latency { color: #3556b0; font-weight: 600; }
.bound-layout { color: #b00020; font-weight: 600; }
.flag { color: #b00020; }
footer { color: #888; font-size: 12px; margin-top: 32px; }
"""


def inline_svg(svg: str) -> str:
    """matplotlib's SVG document as an element to inline in HTML: no XML prolog, DOCTYPE, metadata or namespace
    URLs (HTML parses inline SVG without them), scaled to the page width."""
    svg = re.sub(r"<\?xml[^>]*\?>\s*", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>\s*", "", svg)
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.DOTALL)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    svg = re.sub(r'(<svg\b[^>]*?)\s+width="[^"]*"\s+height="[^"]*"', r"\1", svg, count=1)
    return xml_text(svg.strip())  # labels reach its comments as they are


def _e(text: Any) -> str:
    return xml_escape(text)


#: a notebook cell's output: the page's classes only, scoped to the report's element (the notebook keeps its own)
FRAGMENT_STYLE = "".join(
    f".roofline-report {line}\n"
    for line in STYLE.splitlines()
    if line.startswith((".bound-", ".flag", ".evidence", "td."))
)


class HtmlReportRenderer(Renderer):
    """A ReportDocument (roofline.report.points.report_document) and the chart's SVG as one HTML page.

    ``fragment``: an element to put in a page that has its own (a notebook cell's output: no document, head or
    page style); ``chart_uri``: the chart as an image's data URI (a PNG, base64) in place of inline SVG."""

    def __init__(
        self,
        *,
        chart_svg: str = "",
        rows: int = DEFAULT_ROWS,
        findings: int = 20,
        fragment: bool = False,
        chart_uri: str = "",
    ) -> None:
        self.chart_svg = chart_svg
        self.rows = rows
        self.findings = findings
        self.fragment = fragment
        self.chart_uri = chart_uri

    def render(self, doc: ReportDocument) -> str:
        title = f"roofline {doc.source} report: {doc.name}"
        if self.fragment:
            body = self._body(doc, title)
            return "\n".join(['<div class="roofline-report">', f"<style>{FRAGMENT_STYLE}</style>", *body, "</div>"])
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(title)}</title>",
            f"<style>{STYLE}</style>",
            "</head>",
            "<body>",
            "<main>",
            *self._body(doc, title),
            f"<footer>Written by roofline {_e(doc.tool_version)}: one file, no scripts or external resources. "
            "The CSV of every point: <code>roofline report REPORT.json -o points.csv</code>.</footer>",
            "</main>",
            "</body>",
            "</html>",
        ]
        return "\n".join(parts) + "\n"

    def _body(self, doc: ReportDocument, title: str) -> list[str]:
        parts = [f"<h1>{_e(title)}</h1>"]
        if doc.command:
            parts.append(
                f'<p class="meta"><code>{_e(doc.command)}</code> · {_e(doc.created_utc)} · roofline '
                f"{_e(doc.tool_version)}</p>"
            )
        for device in doc.devices:
            parts.append(
                f"<p><strong>{_e(device.display_name)}</strong> ({_e(device.name)}), {_e(roof_source(device))}: "
                f"{_e(roof_text(device))}</p>"
            )
        parts.append("<h2>Summary</h2>")
        parts.append("<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in summary_items(doc)) + "</dl>")
        parts += self._memory(doc.memory)
        if self.chart_svg or self.chart_uri:
            parts.append('<h2>Roofline</h2><figure class="chart">')
            if self.chart_uri:
                parts.append(f'<img alt="the roofline chart" style="max-width: 100%" src="{_e(self.chart_uri)}">')
            else:
                parts.append(inline_svg(self.chart_svg))
            parts.append("</figure>")
        if doc.notes:
            parts.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in doc.notes) + "</ul>")
        parts += self._findings(doc.findings)
        if doc.verified is not None:
            parts += self._verified(doc.verified)
        parts += self._uncounted(doc.uncounted)
        parts += self._points(doc)
        return parts

    @staticmethod
    def _memory(memory: MemoryView | None) -> list[str]:
        """Parameters and memory: the stored lines, the modules with the most parameters, the notes."""
        if memory is None:
            return []
        parts = ["<h2>Parameters and memory</h2>"]
        parts.append("<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in memory.items) + "</dl>")
        if memory.modules:
            parts.append('<table class="modules"><thead><tr>')
            parts.append("".join(f"<th>{_e(h)}</th>" for h in MODULE_HEADERS) + "</tr></thead><tbody>")
            for m in memory.modules:
                cells = module_cells(m)
                parts.append(
                    "<tr>"
                    + "".join(
                        f'<td class="num">{_e(c)}</td>' if i >= 2 else f"<td>{_e(c)}</td>" for i, c in enumerate(cells)
                    )
                    + "</tr>"
                )
            parts.append("</tbody></table>")
            if memory.more_modules:
                parts.append(f"<p>{memory.more_modules} more modules with parameters in the report.</p>")
        if memory.notes:
            parts.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in memory.notes) + "</ul>")
        return parts

    def _findings(self, findings: Sequence[FindingView]) -> list[str]:
        parts = ["<h2>Findings</h2>"]
        if not findings:
            return [
                *parts,
                "<p>No finding: no rule fired (in a diagnose report, no group of identical ops takes 5% of the "
                "iteration).</p>",
            ]
        parts.append("<p>Bottleneck → property: technique; the roofline's bound on the gain. Largest saving first.</p>")
        parts.append('<ol class="findings">')
        for f in findings[: self.findings]:
            where = finding_where(f)
            where_html = f" ({_e(where)})" if where else ""
            parts.append(
                f'<li><span class="bound-{_e(f.bottleneck)}">{_e(f.bottleneck)}</span>{where_html} → '
                f'{_e(finding_text(f))}<br><span class="evidence">evidence: {_e(f.evidence)}</span></li>'
            )
        parts.append("</ol>")
        if len(findings) > self.findings:
            parts.append(f"<p>{len(findings) - self.findings} more in the report.</p>")
        return parts

    def _verified(self, verified: Sequence[VerifiedView]) -> list[str]:
        """diagnose --verify: per finding, the technique, the roofline's bound beside the measured gain."""
        parts = ["<h2>Verified</h2>"]
        if not verified:
            return [*parts, "<p>No findings to verify.</p>"]
        intro = _e(VERIFIED_INTRO).replace("`diagnose --verify`", "<code>diagnose --verify</code>")
        parts += [f"<p>{intro}</p>", '<table class="verified">']
        parts.append("<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in VERIFIED_HEADERS) + "</tr></thead><tbody>")
        for v in verified:
            cells = []
            for i, text in enumerate(verified_cells(v)):
                if i in (2, 3, 5):
                    cells.append(f'<td class="num">{_e(text)}</td>')
                elif i == 4 and v.outputs_match is False:
                    cells.append(f'<td class="flag">{_e(text)}</td>')
                elif i == 0 and v.together:
                    cells.append(f"<td><strong>{_e(text)}</strong></td>")
                else:
                    cells.append(f"<td>{_e(text)}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody></table>")
        return parts

    def _uncounted(self, uncounted: Sequence[Mapping[str, Any]]) -> list[str]:
        if not uncounted:
            return []
        items = "".join(
            f"<li>{_e(str(u.get('op', '')).removeprefix('aten::'))} x{_e(u.get('count', 0))} "
            f"({_e(seconds(u.get('time_s')))}){_e(': ' + str(u['note'])) if u.get('note') else ''}</li>"
            for u in uncounted
        )
        return [
            "<h2>Uncounted ops</h2>",
            "<p>No cost formula: their time is known, their FLOPs and bytes are not.</p>",
            f"<ul>{items}</ul>",
        ]

    def _points(self, doc: ReportDocument) -> list[str]:
        several = len(doc.devices) > 1
        shown = list(doc.points[: self.rows])
        headers = point_headers(doc, several)
        numeric = set(range(len(headers) - 7, len(headers) - 1))
        bound_column = 2 if several else 1
        parts = [f"<h2>Points by time ({len(shown)} of {len(doc.points)})</h2>", '<table class="points">']
        parts.append("<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in headers) + "</tr></thead><tbody>")
        for p in shown:
            cells = []
            for i, text in enumerate(point_cells(p, several)):
                if i == bound_column:
                    cells.append(f'<td class="bound-{_e(text)}">{_e(text)}</td>')
                elif i in numeric:
                    cells.append(f'<td class="num">{_e(text)}</td>')
                elif i == len(headers) - 1 and text:
                    cells.append(f'<td class="flag">{_e(text)}</td>')
                else:
                    cells.append(f"<td>{_e(text)}</td>")
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody></table>")
        if len(doc.points) > len(shown):
            parts.append(f"<p>{len(doc.points) - len(shown)} more in the report (<code>--format csv</code>).</p>")
        return parts


__all__ = ["HtmlReportRenderer", "inline_svg"]
