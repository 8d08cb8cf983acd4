"""Console rendering of `roofline bench`: what was measured where, one table row per workload, what was skipped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box

from roofline.device import Device
from roofline.dtypes import ops_unit
from roofline.ironlaw import LAUNCH_FACTOR
from roofline.render.analyze import BOUND_STYLE, split_labels
from roofline.render.base import MAX_TABLE_ROWS, Renderer, device_header, shown_rows, to_text
from roofline.render.escape import console_text as escape
from roofline.units import format_intensity, format_rate, format_time


def spread_text(median_s: float, p20_s: float, p80_s: float) -> str:
    """Half the p20-p80 range relative to the median: '±1.2%'."""
    if median_s <= 0:
        return ""
    return f"±{100 * (p80_s - p20_s) / (2 * median_s):.1f}%"


def efficiency_text(efficiency: float) -> str:
    percent = 100 * efficiency
    return f"{percent:.1f}%" if percent < 10 else f"{percent:.0f}%"


class BenchRenderer(Renderer):
    """Rows from `roofline bench` on one device."""

    def __init__(
        self,
        device: Device,
        *,
        timing: str,
        title: str = "",
        notes: Sequence[str] = (),
        skipped: Sequence[Any] = (),
        interrupted: bool = False,
        total: int = 0,
        color: bool | None = None,
        max_rows: int = MAX_TABLE_ROWS,
        verbose: bool = False,
    ) -> None:
        self.device = device
        self.timing = timing
        self.title = title
        self.notes = list(notes)
        self.skipped = list(skipped)
        self.interrupted = interrupted
        self.total = total
        self.color = color
        self.max_rows = max_rows
        self.verbose = verbose  # --verbose: how each row was sampled (drift dropped, second set, re-measured)

    def render(self, rows: Sequence[Any]) -> str:
        parts: list[Any] = self._header(rows)
        if rows:
            parts.append(self._table(rows))
            if len(rows) > self.max_rows:
                parts.append(
                    f"… {len(rows) - self.max_rows:,} more rows not shown: every row is in the report "
                    "(roofline report REPORT.json -o rows.csv)"
                )
        else:
            parts.append("\nNo workload was measured.")
        parts += self._footer(rows)
        return to_text(*parts, color=self.color)

    def _header(self, rows: Sequence[Any]) -> list[Any]:
        roofs = [(r.roof, r.peak_flops_per_s, r.ridge) for r in rows]
        return [*device_header(self.device, roofs), f"  timing: {escape(self.timing)}"]

    def _table(self, rows: Sequence[Any]) -> Any:
        from rich.table import Table

        common, labels = split_labels(rows)
        title = " · ".join(part for part in (self.title, common) if part)
        table = Table(title=escape(title) or None, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
        table.add_column("workload", overflow="fold", min_width=24)
        for header in ("median", "±", "achieved", "bandwidth", "intensity\nFLOP/B", "attainable", "eff."):
            table.add_column(header, justify="right", no_wrap=True)
        table.add_column("bound", no_wrap=True)
        shown, _ = shown_rows(len(rows), limit=self.max_rows)
        for index in shown:
            row = rows[index]
            unit = f"{ops_unit(row.dtype)}/s"
            mark = ("*" if row.throttled_count else "") + ("!" if row.unstable else "")
            style = BOUND_STYLE.get(row.bound, "")
            table.add_row(
                escape(labels[index]),
                format_time(row.median_s) + mark,
                spread_text(row.median_s, row.p20_s, row.p80_s),
                format_rate(row.achieved_flops_per_s, unit),
                format_rate(row.achieved_bytes_per_s, "B/s"),
                format_intensity(row.intensity),
                format_rate(row.attainable_flops_per_s, unit),
                efficiency_text(row.efficiency),
                f"[{style}]{row.bound}[/]" if style else row.bound,
            )
        return table

    def _footer(self, rows: Sequence[Any]) -> list[str]:
        lines: list[str] = []
        if any(r.throttled_count for r in rows):
            lines.append("[dim]* some samples were taken below 75% of the maximum SM clock or while throttled[/]")
        lines.append(
            "[dim]median of the samples; ± = half the p20-p80 range; attainable = FLOPs / roofline time (max of "
            "compute and memory time per kernel, no launch floor); eff. = roofline time / median; bound 'launch' = "
            f"median within {LAUNCH_FACTOR:g}x the launch floor[/]"
        )
        unstable = [r for r in rows if r.unstable]
        if unstable:
            lines.append(
                f"[bold yellow]! {len(unstable)} of {len(rows)} rows unstable[/]: re-measured once and still "
                "inconsistent, so their times may not hold in another run"
            )
            lines += [f"  • {escape(r.kind + ' ' + r.label)}: {escape(r.unstable_reason)}" for r in unstable]
        if self.verbose:
            lines += self._sampling(rows)
        if any(r.efficiency > 1.05 and r.cache == "warm" for r in rows):
            lines.append(
                "[dim]eff. above 100% with a warm cache: the data came from cache, faster than the DRAM roof "
                "(--cold flushes it)[/]"
            )
        if self.skipped:
            lines.append(f"\n[bold]Skipped[/] ({len(self.skipped)})")
            for skip in self.skipped:
                reason = skip.reason
                prefix = f"{skip.kind} {skip.label}: "
                reason = reason.removeprefix(prefix)
                lines.append(f"  • {escape(skip.kind + ' ' + skip.label)}: {escape(reason)}")
        bench_notes = list(dict.fromkeys([*self.notes, *(n for r in rows for n in getattr(r, "bench_notes", []))]))
        if bench_notes:
            lines.append("\n[dim]Notes: " + escape("; ".join(bench_notes)) + "[/]")
        if self.interrupted:
            done = len(rows) + len(self.skipped)
            lines.append(f"\n[bold]Interrupted[/] after {done} of {self.total} workloads: the report holds these rows.")
        return lines

    @staticmethod
    def _sampling(rows: Sequence[Any]) -> list[str]:
        """--verbose: per row, the samples kept, the second set, what the drift rule dropped, why it stopped."""
        lines = ["\n[bold]Sampling[/] (samples kept, stop reason; dropped as drift; the second sample set)"]
        for r in rows:
            text = (
                f"  • {escape(r.kind + ' ' + r.label)}: {r.n} samples, {escape(r.stop_reason)}; "
                f"{r.discarded} dropped as drift"
            )
            if r.confirm_n:
                text += f"; second set {r.confirm_n} samples, median {format_time(r.confirm_median_s or 0.0)}"
            if r.remeasured:
                text += f"; re-measured ({escape(r.remeasure_reason)})"
            lines.append(text)
        return lines
