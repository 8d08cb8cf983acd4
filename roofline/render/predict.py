"""`roofline predict`: the console table (op groups measured here, predicted there, factor, basis, baseline) and
the chart (measured here against predicted there, matplotlib imported when drawn)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich import box
from rich.table import Table

from roofline.predict import Prediction
from roofline.render.base import Renderer, to_text
from roofline.render.escape import console_text as escape
from roofline.units import format_time

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _factor(value: float | None) -> str:
    return "-" if value is None else f"x{value:.3g}"


def _range(low: float, high: float) -> str:
    return format_time(low) if low == high else f"{format_time(low)} - {format_time(high)}"


class PredictRenderer(Renderer):
    """One table per target: the ``top`` op groups by measured time, then the whole report's line."""

    def __init__(self, top: int = 20, color: bool | None = None) -> None:
        self.top = top
        self.color = color

    def render(self, predictions: Sequence[Prediction]) -> str:
        return to_text(*(item for p in predictions for item in self._one(p)), color=self.color)

    def _one(self, p: Prediction) -> list[Any]:
        pair, total = p.pair, p.total
        head = (
            f"[bold]{escape(p.report or 'report')}[/]: measured on {escape(pair.here.display_name)}, predicted on "
            f"[bold]{escape(pair.there.display_name)}[/] · {pair.basis} ceilings ({escape(pair.describe())})"
        )
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        table.add_column("op" if p.source == "diagnose" else "row", overflow="fold", max_width=56)
        table.add_column("class")
        table.add_column("measured here", justify="right")
        table.add_column("predicted there", justify="right")
        table.add_column("range", justify="right")
        table.add_column("factor", justify="right")
        table.add_column("baseline", justify="right")
        table.add_column("basis", overflow="fold", max_width=48)
        shown = p.groups[: self.top]
        for g in shown:
            table.add_row(
                escape(g.short_label),
                g.limiter,
                format_time(g.measured_s),
                format_time(g.predicted_s),
                _range(g.low_s, g.high_s),
                _factor(g.factor),
                format_time(g.baseline_s) + ("" if g.projected else " (kept)"),
                escape(g.basis),
            )
        what = "iteration" if p.source == "diagnose" else "all rows"
        table.add_row(
            f"[bold]{what}[/]",
            "",
            f"[bold]{format_time(total.measured_s)}[/]",
            f"[bold]{format_time(total.predicted_s)}[/]",
            _range(total.low_s, total.high_s),
            _factor(total.factor),
            format_time(total.baseline_s),
            "ops + uncounted + gaps (unchanged)" if p.source == "diagnose" else "sum of the rows",
            end_section=True,
        )
        lines: list[Any] = [head, table]
        more = len(p.groups) - len(shown)
        if more > 0:
            lines.append(f"{more} more op group(s) in --json")
        if p.source == "diagnose":
            lines.append(
                f"iteration = ops {format_time(total.ops_s)} + uncounted {format_time(total.uncounted_s)} + gaps "
                f"{format_time(total.gap_s)}; range: each op's low and high summed (see docs/predict.md)"
            )
        lines.append(
            "baseline: the same efficiency against the spec sheets' peaks (what `roofline plot --device` draws); "
            "(kept): it cannot place the op, its time is kept"
        )
        lines += [f"note: {escape(n)}" for n in p.notes]
        lines.append("")
        return lines


# ------------------------------------------------------------------------------------------------ chart

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def figure(predictions: Sequence[Prediction], *, size_px: tuple[int, int] = (1200, 900)) -> Figure:
    """Measured here (x) against predicted there (y) per op group, log-log, one colour per target, the range as
    a vertical bar and the baseline as a hollow mark; the diagonal is 'unchanged'."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"text.parse_math": False}):
        fig = Figure(figsize=(size_px[0] / 100, size_px[1] / 100), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        values: list[float] = []
        for i, p in enumerate(predictions):
            color = COLORS[i % len(COLORS)]
            xs = [g.measured_s for g in p.groups]
            ys = [g.predicted_s for g in p.groups]
            lows = [g.predicted_s - g.low_s for g in p.groups]
            highs = [g.high_s - g.predicted_s for g in p.groups]
            total = p.total
            label = (
                f"{p.pair.there.name} ({p.pair.basis}): {format_time(total.measured_s)} -> "
                f"{format_time(total.predicted_s)} ({_factor(total.factor)}), baseline {format_time(total.baseline_s)}"
            )
            ax.errorbar(xs, ys, yerr=[lows, highs], fmt="o", color=color, ms=4, lw=0.8, label=label)
            ax.scatter(xs, [g.baseline_s for g in p.groups], s=18, facecolors="none", edgecolors=color, lw=0.8)
            values += xs + ys + [g.baseline_s for g in p.groups] + [g.low_s for g in p.groups if g.low_s > 0]
        positive = [v for v in values if v > 0] or [1e-6]
        lo, hi = min(positive) / 2, max(positive) * 2
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, ls="--", label="unchanged")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        here = predictions[0].pair.here.name if predictions else ""
        ax.set_xlabel(f"measured on {here} (s per op group)")
        ax.set_ylabel("predicted there (s); hollow: baseline (spec peaks)")
        name = predictions[0].report if predictions else ""
        ax.set_title(f"{name}: measured here vs predicted there", fontsize=11)
        ax.grid(True, which="major", lw=0.3)
        ax.legend(fontsize=8, loc="upper left")
        fig.tight_layout()
        return fig


def chart_content(predictions: Sequence[Prediction], fmt: str, size_px: tuple[int, int] = (1200, 900)) -> str | bytes:
    """The drawn chart: SVG as text, PNG and PDF as bytes (roofline.render.figure.figure_bytes)."""
    from roofline.render.figure import figure_bytes

    data = figure_bytes(figure(predictions, size_px=size_px), fmt)
    return data.decode("utf-8") if fmt == "svg" else data


__all__ = ["PredictRenderer", "chart_content", "figure"]
