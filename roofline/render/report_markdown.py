"""A report as GitHub-flavoured Markdown: summary, the points by time, findings, notes.

Fit for a pull-request comment or a CI step summary (``>> $GITHUB_STEP_SUMMARY``): tables, no HTML, no images.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from roofline.render.base import Renderer
from roofline.render.escape import markdown_code
from roofline.render.escape import markdown_text as _cell
from roofline.report.memory import MODULE_HEADERS, MemoryView, module_cells
from roofline.report.points import FindingView, Point, ReportDocument
from roofline.report.verified import VerifiedView, bound_text, match_text, measured_text
from roofline.units import format_bytes, format_count, format_intensity, format_rate, format_time

DEFAULT_ROWS = 25
TIME_WORD = {"analytic": "predicted time", "bench": "median time", "diagnose": "time per iteration"}


def percent(value: float | None) -> str:
    if value is None:
        return "-"
    if value == 0:
        return "0%"
    return f"{100 * value:.1f}%" if abs(value) < 0.1 else f"{100 * value:.0f}%"


def rate(value: float | None, unit: str = "FLOP/s") -> str:
    return "-" if value is None else format_rate(value, unit)


def seconds(value: float | None) -> str:
    return "-" if value is None else format_time(value)


def intensity(value: float | None) -> str:
    return "-" if value is None else format_intensity(value)


def roof_text(device: Any) -> str:
    """'bf16 tensor 740.1 TFLOP/s · fp32 vector ... · DRAM 2.972 TB/s · launch floor 3.49 us'."""
    parts = [f"{name} {format_rate(value)}" for name, value in sorted(device.compute_flops_per_s.items())]
    parts.append(f"DRAM {format_rate(device.dram_bandwidth_bytes_per_s, 'B/s')}")
    parts.append(f"launch floor {format_time(device.launch_floor_s)}")
    return " · ".join(parts)


def roof_source(device: Any) -> str:
    return "measured roofs (roofline calibrate)" if device.roof_source == "measured" else "roofs from spec sheet"


def summary_items(doc: ReportDocument) -> list[tuple[str, str]]:
    """(name, value) lines of the summary, as text."""
    s = doc.summary
    items: list[tuple[str, str]] = []
    t = doc.totals
    if doc.source == "diagnose" and t:
        kind = "device" if t.get("device_kind") == "cuda" else "CPU"
        items.append(
            ("wall time", f"{seconds(t.get('wall_s'))} per iteration (op {kind} time {seconds(t.get('op_time_s'))})")
        )
        flops, nbytes = t.get("flops"), t.get("bytes")
        if isinstance(flops, (int, float)) and isinstance(nbytes, (int, float)):
            items.append(
                (
                    "work",
                    f"{format_count(flops)}, {format_bytes(nbytes)} compulsory; roofline time "
                    f"{seconds(t.get('roof_time_s'))}",
                )
            )
        if t.get("mfu") is not None:
            items.append(
                (
                    "achieved",
                    f"{rate(t.get('achieved_flops_per_s'))} = MFU {percent(t.get('mfu'))} of {t.get('mfu_roof', '')}; "
                    f"{rate(t.get('achieved_bytes_per_s'), 'B/s')} = MBU {percent(t.get('mbu'))} of DRAM",
                )
            )
        if t.get("device_kind") == "cuda":
            items.append(
                ("GPU", f"{t.get('kernel_count', 0):,} kernels per iteration, idle {percent(t.get('gpu_idle_share'))}")
            )
    else:
        what = "predicted minimum times" if doc.source == "analytic" else "median times per call"
        items.append(("total time", f"{seconds(s.total_time_s)} (sum of the {what})"))
    bounds = ", ".join(f"{n} {b}" for b, n in sorted(s.by_bound.items(), key=lambda item: -item[1]))
    items.append(("points", f"{s.points} ({s.plotted} on the chart{': ' + bounds if bounds else ''})"))
    if s.skipped:
        skipped = ", ".join(f"{n} {flag}" for flag, n in s.skipped.items())
        items.append(("not plotted", f"{skipped} ({seconds(s.skipped_time_s)})"))
    if s.above_roof:
        items.append(("above roof", f"{s.above_roof} point(s): see the notes"))
    return items


def finding_text(f: FindingView) -> str:
    text = f"{' + '.join(f.properties)}: {f.technique}" if f.properties else f.technique
    gain = f.gain
    if gain is not None:
        text += f"; at most {gain:.3g}x ({seconds(f.time_s)} -> {seconds(f.best_time_s)})"
    return text


def finding_where(f: FindingView) -> str:
    share = f", {percent(f.share)} of the time" if f.share is not None else ""
    return f"{f.where}{share}" if f.where else share.lstrip(", ")


def point_cells(p: Point, several_devices: bool) -> list[str]:
    cells = [p.label]
    if several_devices:
        cells.append(p.device)
    flags = ", ".join(f for f in p.flags if f != "predicted")
    return [
        *cells,
        p.limiter or p.bound or "-",  # diagnose: the evidence class where the report has one
        intensity(p.intensity),
        rate(p.throughput),
        rate(p.attainable),
        percent(p.efficiency),
        seconds(p.time_s),
        percent(p.share),
        flags,
    ]


def point_headers(doc: ReportDocument, several_devices: bool) -> list[str]:
    achieved = "predicted" if doc.source == "analytic" else "achieved"
    time = TIME_WORD.get(doc.source, "time")
    return [
        "point",
        *(["device"] if several_devices else []),
        "bound",
        "intensity (FLOP/B)",
        f"{achieved} (FLOP/s)",
        "attainable (FLOP/s)",
        "eff.",
        time,
        "share",
        "flags",
    ]


VERIFIED_HEADERS = ["finding", "technique", "bound", "measured gain", "outputs match", "compile", "note"]
VERIFIED_INTRO = (
    "Each finding's technique applied to a fresh copy of the model, its outputs checked against eager and the "
    "whole model timed against eager (`diagnose --verify`): the roofline's bound beside the measured gain. "
    "Techniques that need a code change are not verified; the note says why."
)


def verified_cells(v: VerifiedView) -> list[str]:
    """One verified entry as text cells (VERIFIED_HEADERS): the stored values, never recomputed."""
    where = f" ({v.where})" if v.where else ""
    return [
        f"{v.label}{where}",
        v.technique or "-",
        bound_text(v.bound_gain),
        measured_text(v),
        match_text(v.outputs_match),
        seconds(v.compile_s),
        v.note,
    ]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |"]
    lines.append("|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


class MarkdownReportRenderer(Renderer):
    """A ReportDocument (roofline.report.points.report_document) as Markdown."""

    def __init__(self, *, rows: int = DEFAULT_ROWS, findings: int = 10) -> None:
        self.rows = rows
        self.findings = findings

    def render(self, doc: ReportDocument) -> str:
        lines = [f"## roofline {_cell(doc.source)} report: {_cell(doc.name)}", ""]
        if doc.command:
            lines += [
                f"{markdown_code(doc.command)} · {_cell(doc.created_utc)} · roofline {_cell(doc.tool_version)}",
                "",
            ]
        for device in doc.devices:
            lines.append(
                f"**{_cell(device.display_name)}** ({_cell(device.name)}), {roof_source(device)}: "
                f"{_cell(roof_text(device))}"
            )
            lines.append("")
        lines += ["### Summary", ""]
        lines += [f"- **{name}**: {_cell(value)}" for name, value in summary_items(doc)]
        lines.append("")
        lines += self._memory(doc.memory)
        several = len(doc.devices) > 1
        shown = [p for p in doc.points][: self.rows]
        if shown:
            headers = point_headers(doc, several)
            right = set(range(len(headers) - 7, len(headers) - 1))
            lines += [f"### Points by time ({len(shown)} of {len(doc.points)})", ""]
            lines += _table(headers, [point_cells(p, several) for p in shown], right)
            if len(doc.points) > len(shown):
                lines.append("")
                lines.append(f"{len(doc.points) - len(shown)} more in the report (`roofline report --format csv`).")
            lines.append("")
        lines += self._findings(doc.findings)
        if doc.verified is not None:
            lines += self._verified(doc.verified)
        lines += self._uncounted(doc.uncounted)
        if doc.notes:
            lines += ["### Notes", ""]
            lines += [f"- {_cell(note)}" for note in doc.notes]
            lines.append("")
        return "\n".join(lines).rstrip("\n") + "\n"

    @staticmethod
    def _memory(memory: MemoryView | None) -> list[str]:
        """Parameters and memory: the stored lines, the modules with the most parameters, the notes."""
        if memory is None:
            return []
        lines = ["### Parameters and memory", ""]
        lines += [f"- **{_cell(name)}**: {_cell(value)}" for name, value in memory.items]
        lines.append("")
        if memory.modules:
            lines += _table(MODULE_HEADERS, [module_cells(m) for m in memory.modules], {2, 3, 4})
            if memory.more_modules:
                lines += ["", f"{memory.more_modules} more modules with parameters in the report."]
            lines.append("")
        if memory.notes:
            lines += [*(f"- {_cell(n)}" for n in memory.notes), ""]
        return lines

    def _findings(self, findings: Sequence[FindingView]) -> list[str]:
        lines = ["### Findings", ""]
        if not findings:
            return [
                *lines,
                "No finding: no rule fired (in a diagnose report, no group of identical ops takes 5% of the "
                "iteration).",
                "",
            ]
        lines.append("Bottleneck → property: technique; the roofline's bound on the gain. Largest saving first.")
        lines.append("")
        for number, f in enumerate(findings[: self.findings], 1):
            where = finding_where(f)
            where = f" ({_cell(where)})" if where else ""
            lines.append(f"{number}. **{_cell(f.bottleneck)}**{where} → {_cell(finding_text(f))}  ")
            lines.append(f"   evidence: {_cell(f.evidence)}")
        if len(findings) > self.findings:
            lines.append(f"\n{len(findings) - self.findings} more in the report.")
        lines.append("")
        return lines

    def _verified(self, verified: Sequence[VerifiedView]) -> list[str]:
        """diagnose --verify: per finding, the technique, the roofline's bound beside the measured gain."""
        lines = ["### Verified", ""]
        if not verified:
            return [*lines, "No findings to verify.", ""]
        lines += [VERIFIED_INTRO, ""]
        right = {2, 3, 5}
        lines += _table(VERIFIED_HEADERS, [verified_cells(v) for v in verified], right)
        lines.append("")
        return lines

    def _uncounted(self, uncounted: Sequence[Mapping[str, Any]]) -> list[str]:
        if not uncounted:
            return []
        lines = ["### Uncounted ops", "", "No cost formula: their time is known, their FLOPs and bytes are not.", ""]
        for u in uncounted:
            note = f": {_cell(u.get('note'))}" if u.get("note") else ""
            op = str(u.get("op", "")).removeprefix("aten::")
            lines.append(f"- {_cell(op)} x{_cell(u.get('count', 0))} ({seconds(u.get('time_s'))}){note}")
        lines.append("")
        return lines


__all__ = ["MarkdownReportRenderer"]
