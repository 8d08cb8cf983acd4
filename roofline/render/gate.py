"""Rendering of `roofline gate`: a rich table for the console, markdown for a CI step summary, JUnit XML.

Nothing here computes a verdict: every number and reason comes from the GateResult (roofline.gate.compare).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from xml.etree import ElementTree as ET

from rich import box

from roofline.gate.compare import SEVERITY, Check, GateResult, PointResult, amount, change_text, interval_text
from roofline.render.base import Renderer, shown_rows, to_text
from roofline.render.escape import console_text as escape
from roofline.render.escape import markdown_text as _md
from roofline.render.escape import xml_text
from roofline.report.machine import summary
from roofline.units import format_time

VERDICT_STYLE = {
    "regression": "bold red",
    "inconclusive": "bold yellow",
    "improvement": "green",
    "pass": "",
    "new": "cyan",
    "vanished": "cyan",
}
HEADLINE = {"pass": "PASS", "regression": "REGRESSION", "inconclusive": "INCONCLUSIVE"}
METHOD_NOTE = "samples: Hodges–Lehmann shift, Mann–Whitney"


# ------------------------------------------------------------------------------------------ shared text


def _timed(point: PointResult) -> Check | None:
    """The time-like check that speaks for the point: its worst one (efficiency first on a tie)."""
    timed = [c for c in point.checks if c.metric in ("efficiency", "time")]
    return max(timed, key=lambda c: SEVERITY[c.verdict], default=None)


def _efficiency(point: PointResult) -> str:
    before = point.baseline.efficiency if point.baseline else None
    after = point.current.efficiency if point.current else None
    return _pair(before, after, lambda v: amount("efficiency", v))


def _time(point: PointResult) -> str:
    before = point.baseline.time_s if point.baseline else None
    after = point.current.time_s if point.current else None
    return _pair(before, after, format_time)


def _pair(before: float | None, after: float | None, fmt: Any) -> str:
    left = fmt(before) if before is not None and before > 0 else "-"
    right = fmt(after) if after is not None and after > 0 else "-"
    return "-" if left == right == "-" else f"{left} → {right}"


def _samples(point: PointResult) -> str:
    before = len(point.baseline.samples_s) if point.baseline else 0
    after = len(point.current.samples_s) if point.current else 0
    return f"{before}/{after}"


def _reasons(point: PointResult) -> list[str]:
    return [c.reason for c in point.checks if c.reason and c.verdict in ("regression", "inconclusive", "improvement")]


def _counts(result: GateResult) -> str:
    parts = [f"{result.count(v)} {v}" for v in ("regression", "inconclusive", "improvement", "pass") if result.count(v)]
    text = f"{len(result.points)} points compared" + (f": {', '.join(parts)}" if parts else "")
    return text + f" · {len(result.new)} new, {len(result.vanished)} vanished"


def _baseline_line(result: GateResult) -> str:
    parts = [f"baseline of {result.identity.describe()}"]
    if result.baseline_created_utc:
        parts.append(f"saved {result.baseline_created_utc}")
    if result.baseline_commit:
        parts.append(f"commit {result.baseline_commit[:12]}")
    return " · ".join(parts)


def _level(result: GateResult) -> str:
    return f"{100 * result.confidence:g}% CI"


def _rules_line(result: GateResult) -> str:
    method = f"{METHOD_NOTE} {_level(result)}" if result.stats else "single numbers (--no-stats)"
    return f"rules: {' '.join(result.rules)} · {method}"


def _table_points(result: GateResult) -> tuple[list[PointResult], str]:
    """The points a table shows (every one up to MAX_TABLE_ROWS, else the worst verdicts first, in report order)
    and a line saying how many it leaves out ('' when none)."""
    points = result.points
    shown, hidden = shown_rows(len(points), lambda i: SEVERITY[points[i].verdict])
    note = f"… {hidden:,} more points not shown (the least severe verdicts): --format json lists every one"
    return [points[i] for i in shown], note if hidden else ""


def _total_name(check: Check) -> str:
    return f"total {check.metric}"


def _total_values(check: Check) -> tuple[str, str]:
    fmt = (lambda v: amount(check.metric, v)) if check.metric != "time" else format_time
    return (
        fmt(check.baseline) if check.baseline is not None else "-",
        fmt(check.current) if check.current is not None else "-",
    )


# ------------------------------------------------------------------------------------------ console


def _styled(text: str, verdict: str) -> str:
    style = VERDICT_STYLE.get(verdict, "")
    return f"[{style}]{escape(text)}[/]" if style else escape(text)


class GateRenderer(Renderer):
    """The console view: headline, machine warning, one row per compared point, totals, new and vanished."""

    def __init__(self, color: bool | None = None) -> None:
        self.color = color

    def render(self, result: GateResult) -> str:
        from rich.table import Table

        headline = f"roofline gate: {HEADLINE[result.verdict]}"
        parts: list[Any] = [
            f"{_styled(headline, result.verdict)} (exit {result.exit_code})",
            f"  {escape(_counts(result))}",
            f"  {escape(_baseline_line(result))}",
            f"  {escape(_rules_line(result))}",
            f"  machine: {escape(summary(result.current_machine))}",
        ]
        for warning in result.warnings:
            parts.append(f"[bold yellow]Warning:[/] {escape(warning)}")
        if result.machine_differences:
            parts.append(f"  baseline machine: {escape(summary(result.baseline_machine))}")
            parts.append(f"  this machine:     {escape(summary(result.current_machine))}")
        if result.points:
            table = Table(header_style="bold", box=box.SIMPLE_HEAD)
            table.add_column("point", overflow="fold", min_width=24)
            table.add_column("efficiency", justify="right", no_wrap=True)
            table.add_column("time", justify="right", no_wrap=True)
            table.add_column("change", justify="right", no_wrap=True)
            table.add_column(_level(result), justify="right", no_wrap=True)
            table.add_column("n", justify="right", no_wrap=True)
            table.add_column("verdict", no_wrap=True)
            points, more = _table_points(result)
            for point in points:
                check = _timed(point)
                verdict = point.verdict
                table.add_row(
                    escape(point.label),
                    _efficiency(point),
                    _time(point),
                    change_text(check) if check else "",
                    interval_text(check) if check else "",
                    _samples(point),
                    _styled(verdict, verdict),
                )
            parts.append(table)
            if more:
                parts.append(f"  {escape(more)}")
        if result.totals:
            parts.append(self._totals(result))
        parts += self._lists(result)
        return to_text(*parts, color=self.color)

    def _totals(self, result: GateResult) -> Any:
        from rich.table import Table

        title = "totals" + (" (matched rows)" if result.source == "bench" else " (every op; time per iteration)")
        table = Table(title=title, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
        for header in ("metric", "baseline", "current", "change", _level(result), "verdict"):
            table.add_column(header, justify="left" if header in ("metric", "verdict") else "right", no_wrap=True)
        for check in result.totals:
            before, after = _total_values(check)
            table.add_row(
                _total_name(check),
                before,
                after,
                change_text(check),
                interval_text(check),
                _styled(check.verdict, check.verdict),
            )
        return table

    def _lists(self, result: GateResult) -> list[str]:
        lines: list[str] = []
        why = [(p.label, reason) for p in result.points for reason in _reasons(p)]
        why += [(_total_name(c), c.reason) for c in result.totals if c.reason and c.verdict != "pass"]
        if why:
            lines.append("[bold]Reasons[/]")
            lines += [f"  {escape(label)}: {escape(reason)}" for label, reason in why]
        if result.new:
            lines.append(f"[bold]New[/] (not in the baseline, not compared): {len(result.new)}")
            lines += [f"  + {escape(p.label)}" for p in result.new]
        if result.vanished:
            lines.append(f"[bold]Vanished[/] (in the baseline, not in this report): {len(result.vanished)}")
            lines += [f"  - {escape(p.label)}" for p in result.vanished]
        return lines


# ------------------------------------------------------------------------------------------ markdown


def markdown(result: GateResult) -> str:
    """GitHub-flavoured markdown for a CI step summary (``>> $GITHUB_STEP_SUMMARY``)."""
    lines = [
        f"### roofline gate: {HEADLINE[result.verdict]} (exit {result.exit_code})",
        "",
        f"{_md(_counts(result))}  ",
        f"{_md(_baseline_line(result))}  ",
        f"{_md(_rules_line(result))}  ",
        f"machine: {_md(summary(result.current_machine))}",
    ]
    if result.warnings:
        lines.append("")
        for warning in result.warnings:
            lines.append(f"> **Warning:** {_md(warning)}")
        if result.machine_differences:
            lines.append(">")
            lines.append(f"> baseline machine: {_md(summary(result.baseline_machine))}  ")
            lines.append(f"> this machine: {_md(summary(result.current_machine))}")
    if result.points:
        lines += [
            "",
            f"| point | efficiency | time | change | {_level(result)} | n | verdict |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        points, more = _table_points(result)
        for point in points:
            check = _timed(point)
            verdict = point.verdict if point.verdict in ("pass", "improvement") else f"**{point.verdict}**"
            cells = [
                _md(point.label),
                _efficiency(point),
                _time(point),
                change_text(check) if check else "",
                interval_text(check) if check else "",
                _samples(point),
                verdict,
            ]
            lines.append("| " + " | ".join(cells) + " |")
        if more:
            lines += ["", _md(more)]
    if result.totals:
        lines += ["", "| total | baseline | current | change | verdict |", "|---|---:|---:|---:|---|"]
        for check in result.totals:
            before, after = _total_values(check)
            change = change_text(check) + (f" ({interval_text(check)})" if interval_text(check) else "")
            lines.append(f"| {_md(check.metric)} | {before} | {after} | {change} | {check.verdict} |")
    why = [(p.label, reason) for p in result.points for reason in _reasons(p)]
    why += [(_total_name(c), c.reason) for c in result.totals if c.reason and c.verdict != "pass"]
    if why:
        lines += ["", "**Reasons**", ""]
        lines += [f"- {_md(label)}: {_md(reason)}" for label, reason in why]
    if result.new:
        lines += ["", f"**New** (not in the baseline, not compared): {len(result.new)}", ""]
        lines += [f"- {_md(p.label)}" for p in result.new]
    if result.vanished:
        lines += ["", f"**Vanished** (in the baseline, not in this report): {len(result.vanished)}", ""]
        lines += [f"- {_md(p.label)}" for p in result.vanished]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ JUnit


def junit(result: GateResult, *, duration_s: float = 0.0, timestamp: datetime | None = None) -> str:
    """JUnit XML: one test case per compared point, per total, per new and per vanished point.

    regression -> <failure type="regression">, inconclusive -> <error type="inconclusive">, vanished ->
    <skipped>; the message is the first reason, the text every reason."""
    moment = (timestamp or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    classname = f"roofline.gate.{result.source}"
    cases: list[ET.Element] = []
    counts = {"failures": 0, "errors": 0, "skipped": 0}

    def case(name: str, cls: str, verdict: str, reasons: list[str]) -> ET.Element:
        name, cls, reasons = xml_text(name), xml_text(cls), [xml_text(reason) for reason in reasons]
        element = ET.Element("testcase", {"classname": cls, "name": name, "time": "0"})
        if verdict == "regression":
            child = ET.SubElement(element, "failure", {"type": "regression", "message": reasons[0] if reasons else ""})
            child.text = "\n".join(reasons)
            counts["failures"] += 1
        elif verdict == "inconclusive":
            child = ET.SubElement(element, "error", {"type": "inconclusive", "message": reasons[0] if reasons else ""})
            child.text = "\n".join(reasons)
            counts["errors"] += 1
        elif verdict == "vanished":
            ET.SubElement(element, "skipped", {"message": "vanished: in the baseline, not in this report"})
            counts["skipped"] += 1
        elif verdict == "new":
            ET.SubElement(element, "system-out").text = "new: not in the baseline, not compared"
        elif reasons:
            ET.SubElement(element, "system-out").text = "\n".join(reasons)
        return element

    for point in result.points:
        cases.append(case(point.label, classname, point.verdict, [c.reason for c in point.checks if c.reason]))
    for check in result.totals:
        cases.append(
            case(_total_name(check), "roofline.gate.totals", check.verdict, [check.reason] if check.reason else [])
        )
    for point in result.new:
        cases.append(case(point.label, classname, "new", []))
    for point in result.vanished:
        cases.append(case(point.label, classname, "vanished", []))
    attributes = {"tests": str(len(cases)), **{k: str(v) for k, v in counts.items()}, "time": f"{duration_s:.3f}"}
    root = ET.Element("testsuites", {"name": "roofline gate", **attributes})
    suite = ET.SubElement(
        root,
        "testsuite",
        {"name": xml_text(f"roofline gate: {result.identity.describe()}"), **attributes, "timestamp": moment},
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("verdict", result.verdict),
        ("exit_code", str(result.exit_code)),
        ("rules", " ".join(result.rules)),
        ("confidence", f"{result.confidence:g}"),
        ("baseline_commit", result.baseline_commit or ""),
        ("machine", summary(result.current_machine)),
        *(("warning", w) for w in result.warnings),
    ):
        ET.SubElement(properties, "property", {"name": name, "value": xml_text(value)})
    suite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ------------------------------------------------------------------------------------------ baseline show


def baseline_text(baseline: Any, color: bool | None = None) -> str:
    """`roofline baseline show`: identity, machine, provenance, then one row per point."""
    from rich.table import Table

    header = [
        f"[bold]baseline of {escape(baseline.identity.describe())}[/] · {len(baseline.points)} points",
        f"  saved {escape(baseline.created_utc)} · roofline {escape(baseline.tool_version)} · commit "
        f"{escape(baseline.commit or 'none')}",
        f"  machine: {escape(summary(baseline.machine))}",
    ]
    for ref in baseline.reports:
        header.append(f"  run: {escape(ref.command or ref.path or '?')} ({escape(ref.created_utc)})")
    table = Table(header_style="bold", box=box.SIMPLE_HEAD)
    table.add_column("point", overflow="fold", min_width=24)
    for name in ("efficiency", "time", "runs", "drift", "n", "FLOPs", "bytes", "kernels"):
        table.add_column(name, justify="right", no_wrap=True)
    shown, hidden = shown_rows(len(baseline.points))
    for point in (baseline.points[i] for i in shown):
        medians = point.run_medians_s
        drift = max(abs(m / point.time_s - 1) for m in medians) if len(medians) > 1 and point.time_s else None
        table.add_row(
            escape(point.label),
            amount("efficiency", point.efficiency) if point.efficiency else "-",
            format_time(point.time_s) if point.time_s else "-",
            str(len(medians)),
            f"±{100 * drift:.1f}%" if drift is not None else "-",
            str(len(point.samples_s)),
            amount("flops", point.flops) if point.flops is not None else "-",
            amount("bytes", point.bytes) if point.bytes is not None else "-",
            str(point.kernels) if point.kernels is not None else "-",
        )
    more = [f"… {hidden:,} more points not shown: the baseline file lists every one"] if hidden else []
    return to_text(*header, table, *more, color=color)
