"""Drawing the chart of collectives (roofline.report.collectives_chart.CollectivesChart) with matplotlib."""

from __future__ import annotations

from typing import Any

from roofline.report.collectives_chart import CollectivesChart, log_range

_COLORS = {
    "all_reduce": "tab:blue",
    "all_gather": "tab:orange",
    "reduce_scatter": "tab:green",
    "all_to_all": "tab:red",
    "broadcast": "tab:purple",
}


def figure(spec: CollectivesChart, size_px: tuple[int, int] = (1200, 800)) -> Any:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size_px[0] / 100, size_px[1] / 100), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bus bytes per call (message x nccl-tests factor)")
    ax.set_ylabel("bus bandwidth (B/s)")
    ax.set_title(spec.title)
    if spec.ceiling:
        ax.plot([x for x, _ in spec.ceiling], [y for _, y in spec.ceiling], color="black", label=spec.ceiling_label)
    for kind in dict.fromkeys(p.kind for p in spec.points):
        mine = [p for p in spec.points if p.kind == kind]
        ax.scatter(
            [p.bus_bytes for p in mine],
            [p.busbw_bytes_per_s for p in mine],
            color=_COLORS.get(kind, "tab:gray"),
            label=kind,
            zorder=3,
        )
    xs = [p.bus_bytes for p in spec.points] + [x for x, _ in spec.ceiling]
    ys = [p.busbw_bytes_per_s for p in spec.points] + [y for _, y in spec.ceiling if y > 0]
    ax.set_xlim(*log_range(xs))
    ax.set_ylim(*log_range(ys))
    ax.grid(True, which="both", alpha=0.3)
    if spec.points or spec.ceiling:
        ax.legend(loc="lower right")
    if spec.notes:
        fig.text(0.01, 0.01, "; ".join(spec.notes), fontsize=8)
    return fig


def chart_bytes(spec: CollectivesChart, fmt: str) -> bytes:
    from roofline.render.figure import figure_bytes

    return figure_bytes(figure(spec), fmt)


__all__ = ["chart_bytes", "figure"]
