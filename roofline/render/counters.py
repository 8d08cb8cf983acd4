"""Console rendering of Nsight Compute counters on a diagnosis (roofline.findings.counters.Counters): measured
against compulsory bytes per op, the counters' bound beside ours, and the locality findings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box

from roofline.render.base import Renderer, to_text
from roofline.render.escape import console_text as escape
from roofline.units import format_bytes, format_time


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _agree(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "[bold red]no[/]")


class CountersRenderer(Renderer):
    """A Counters value (and the locality findings) for the console: the ops with the most DRAM traffic first."""

    def __init__(self, *, top: int = 10, color: bool | None = None) -> None:
        self.top = top
        self.color = color

    def render(self, value: Any, findings: Sequence[Any] = ()) -> str:
        from rich.table import Table

        c = value
        agreement = "-" if c.agreement is None else f"{100 * c.agreement:.0f}%"
        parts: list[Any] = [
            f"\n[bold]Nsight Compute counters[/] ({escape(c.source)}): {c.matched_launches} of {c.launches} kernel "
            f"launches matched to {len(c.ops)} ops; bounds agree on {agreement} of the ops with both"
        ]
        ops = sorted(c.ops, key=lambda o: -o.dram_bytes)[: self.top]
        if ops:
            table = Table(
                title=f"Measured DRAM bytes per op (top {len(ops)} by traffic, per iteration)",
                title_justify="left",
                header_style="bold",
                box=box.SIMPLE_HEAD,
            )
            for name, justify in (
                ("op", "left"),
                ("module", "left"),
                ("measured", "right"),
                ("compulsory", "right"),
                ("ratio", "right"),
                ("L2", "right"),
                ("L1", "right"),
                ("SM", "right"),
                ("mem", "right"),
                ("occ.", "right"),
                ("tensor", "right"),
                ("counters", "left"),
                ("ours", "left"),
                ("agree", "left"),
            ):
                wrap = name in ("op", "module", "ours")
                table.add_column(name, justify=justify, overflow="fold", no_wrap=not wrap)  # type: ignore[arg-type]
            for o in ops:
                ratio = "-" if o.ratio is None else f"{o.ratio:.2f}x" + ("~" if o.approximate else "")
                bound = (o.counters_bound or "-") + (" (low)" if o.low else "")
                table.add_row(
                    escape(o.op.removeprefix("aten::")),
                    escape(o.module or "(model)"),
                    format_bytes(o.dram_bytes),
                    format_bytes(o.compulsory_bytes),
                    ratio,
                    "-" if o.l2_bytes is None else format_bytes(o.l2_bytes),
                    "-" if o.l1_bytes is None else format_bytes(o.l1_bytes),
                    _pct(o.sm_pct),
                    _pct(o.memory_pct),
                    _pct(o.occupancy_pct),
                    _pct(o.tensor_pct),
                    bound,
                    escape(o.roofline_bound + (f" ({o.limiter})" if o.limiter not in ("", o.roofline_bound) else "")),
                    _agree(o.agree),
                )
            parts.append(table)
        if c.unmatched_kernels:
            parts.append(
                f"[dim]{c.launches - c.matched_launches} launches matched no op "
                f"({format_bytes(c.unmatched_dram_bytes)} of DRAM traffic): "
                + escape(", ".join(n[:60] for n in c.unmatched_kernels[:5]))
                + ("[/]" if len(c.unmatched_kernels) <= 5 else f" and {len(c.unmatched_kernels) - 5} more[/]")
            )
        for f in findings:
            gain = ""
            if f.gain is not None:
                gain = f" at most {f.gain:.3g}x ({format_time(f.time_s)} -> {format_time(f.best_time_s or 0)})"
            parts.append(f"[bold]locality[/] {escape(f.where)}: {escape(f.evidence)}; {escape(f.technique)};{gain}")
        if c.notes:
            parts.append("[dim]Notes: " + escape("; ".join(c.notes)) + "[/]")
        return to_text(*parts, color=self.color)


__all__ = ["CountersRenderer"]
