"""Draw a ChartSpec (roofline.report.chart) with matplotlib: a Figure, and PNG/SVG/PDF bytes of it.

Headless (the Agg canvas, never pyplot: no GUI, no global figure state) and imported only when a chart is
drawn. Drawing decides looks and layout only (colours, sizes, where labels go); every value comes from the spec.

Labels are placed greedily in display coordinates: roof labels first, then ridge labels, then the points'
labels in order of their time share, each at the first candidate position around its anchor whose box stays
inside the axes and overlaps no box placed before it and no point; a label moved away from its point gets a
leader line.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any

from roofline.render.escape import plain_text
from roofline.report.chart import Arrow, CacheMark, ChartRoof, ChartSpec, Mark, Panel
from roofline.report.points import Point
from roofline.units import format_rate

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = ("png", "svg", "pdf")
BOUND_COLORS = {"compute": "#2a9d3a", "memory": "#e07b00", "launch": "#c2249b"}
OTHER_COLOR = "#7a7a7a"
SOURCE_STYLE = {  # measured roofs drawn beside spec roofs in a distinct style
    "spec": {"color": "#1f3b73", "linestyle": "-"},
    "measured": {"color": "#1b8a8f", "linestyle": (0, (6, 3))},
}
SERIES_MARKERS = ("o", "s", "^", "D", "v", "P", "<", ">")
ABOVE_MARKER = "X"
ARROW_COLOR = "#1a1a1a"  # diagnose --verify: an op before and after its finding's technique
CACHE_COLOR = "#6a3d9a"  # diagnose --counters: an op's L2 and L1 points (FLOPs / measured bytes) and their links
CACHE_MARKERS = {"L2": "s", "L1": "^"}  # a hollow square (L2), a hollow triangle (L1)
DPI = 100
NOTE_WRAP = 200  # characters per footer line at the default width
MAX_NOTE_LINES = 7
LEFT_PX = 130  # tick labels with units ('100 GFLOP/s') and the axis title fit left of the data
LEGEND_PX = 300
MIN_SIZE_PX = (480, 300)
RASTER_MARKS = 5000  # points in a panel beyond which SVG/PDF draw the markers as one bitmap
# A light halo behind every label: where one must cross a roof line, the text stays readable.
HALO = {"boxstyle": "square,pad=0.12", "facecolor": "white", "edgecolor": "none", "alpha": 0.8}


@dataclass(frozen=True)
class Box:
    """An axis-aligned box in display pixels."""

    x0: float
    y0: float
    x1: float
    y1: float

    def overlap(self, other: Box) -> float:
        w = min(self.x1, other.x1) - max(self.x0, other.x0)
        h = min(self.y1, other.y1) - max(self.y0, other.y0)
        return w * h if w > 0 and h > 0 else 0.0

    def inside(self, other: Box) -> bool:
        return self.x0 >= other.x0 and self.y0 >= other.y0 and self.x1 <= other.x1 and self.y1 <= other.y1

    def pad(self, by: float) -> Box:
        return Box(self.x0 - by, self.y0 - by, self.x1 + by, self.y1 + by)


# Candidate spots around a point, nearest first: right, left, the diagonals, above and below (centred, or hanging
# to one side, for points near an edge). Each ring is further out; from the second ring on a leader line is drawn.
_DIRECTIONS: tuple[tuple[float, int], ...] = (
    (1, 0),
    (-1, 0),
    (1, 1),
    (1, -1),
    (-1, 1),
    (-1, -1),
    (0, 1),
    (0, -1),
    (0.5, 1),
    (-0.5, 1),
    (0.5, -1),
    (-0.5, -1),
)
_RINGS = (1.0, 3.0, 5.5, 8.5, 12.0)


def label_box(anchor: tuple[float, float], size: tuple[float, float], direction: tuple[float, int], gap: float) -> Box:
    """The box of a label of ``size`` (w, h) put ``gap`` pixels from ``anchor`` towards ``direction``:
    dx 1 / -1 right / left of it, 0 centred on it, 0.5 / -0.5 above or below it hanging right / left."""
    (x, y), (w, h), (dx, dy) = anchor, size, direction
    if dx >= 1:
        x0 = x + gap
    elif dx <= -1:
        x0 = x - gap - w
    elif dx > 0:
        x0 = x - min(12.0, w / 2)
    elif dx < 0:
        x0 = x + min(12.0, w / 2) - w
    else:
        x0 = x - w / 2
    side = 0.6 if abs(dx) >= 1 else 1.0  # diagonal spots sit a little closer vertically
    if dy > 0:
        y0 = y + gap * side
    elif dy < 0:
        y0 = y - gap * side - h
    else:
        y0 = y - h / 2
    return Box(x0, y0, x0 + w, y0 + h)


def _areas(box: Box, others: Any) -> Any:
    """Overlap area of ``box`` with each row (x0, y0, x1, y1) of the array ``others``."""
    import numpy as np

    if len(others) == 0:
        return np.zeros(0)
    w = np.minimum(box.x1, others[:, 2]) - np.maximum(box.x0, others[:, 0])
    h = np.minimum(box.y1, others[:, 3]) - np.maximum(box.y0, others[:, 1])
    return np.clip(w, 0, None) * np.clip(h, 0, None)


def _crossings(start: tuple[float, float], end: tuple[float, float], boxes: Any, step: float = 3.0) -> int:
    """How many of ``boxes`` the segment from ``start`` to ``end`` passes through (sampled every ``step`` px)."""
    import numpy as np

    if len(boxes) == 0:
        return 0
    n = max(int(math.hypot(end[0] - start[0], end[1] - start[1]) / step), 1)
    t = np.linspace(0.0, 1.0, n + 1)[:, None]
    xs = start[0] + (end[0] - start[0]) * t
    ys = start[1] + (end[1] - start[1]) * t
    hit = (xs > boxes[:, 0]) & (xs < boxes[:, 2]) & (ys > boxes[:, 1]) & (ys < boxes[:, 3])
    # a box the point itself lies in is crossed by any leader: it does not tell the spots apart
    around = (start[0] > boxes[:, 0]) & (start[0] < boxes[:, 2]) & (start[1] > boxes[:, 1]) & (start[1] < boxes[:, 3])
    return int((hit.any(axis=0) & ~around).sum())


def _array(boxes: Any) -> Any:
    """Boxes as an (n, 4) array of (x0, y0, x1, y1); an array is returned as it is."""
    import numpy as np

    if isinstance(boxes, np.ndarray):
        return boxes.reshape(-1, 4)
    return np.array([(b.x0, b.y0, b.x1, b.y1) for b in boxes], dtype=float).reshape(-1, 4)


def place_label(
    anchor: tuple[float, float],
    size: tuple[float, float],
    *,
    area: Box,
    taken: Sequence[Box],
    dots: Sequence[Box] | Any,
    base_gap: float,
    leaders: Sequence[Box] = (),
) -> tuple[Box, bool] | None:
    """Greedy placement: the first candidate box inside ``area`` that overlaps nothing in ``taken`` or ``dots``
    (boxes, or an (n, 4) array of them);
    if none is free, the one with the least overlap with points (covering a leader line of another label, or
    drawing a leader across a label, only as a last resort). Returns (box, needs a leader line), or None when
    every spot overlaps a label already placed: that label is left out rather than drawn over another."""
    taken_array, dots_array, leaders_array = _array(taken), _array(dots), _array(leaders)
    best: tuple[float, Box, bool] | None = None
    for ring_index, ring in enumerate(_RINGS):
        for direction in _DIRECTIONS:
            box = label_box(anchor, size, direction, base_gap * ring)
            if not box.inside(area) or _areas(box, taken_array).any():
                continue
            cost = float(_areas(box, dots_array).sum())
            cost += 1e5 * int(_areas(box, leaders_array).astype(bool).sum())
            leader = ring_index > 0
            if leader:  # a leader line must not cross another label: worse than any overlap with a point
                cost += 1e5 * _crossings(anchor, _nearest_edge(box, anchor), taken_array)
            if cost == 0:
                return box, leader
            cost += ring_index  # prefer nearer spots among overlapping ones
            if best is None or cost < best[0]:
                best = (cost, box, leader)
    return None if best is None else (best[1], best[2])


# ------------------------------------------------------------------------------------------------ figure


def _grid(n: int) -> tuple[int, int]:
    if n <= 1:
        return 1, 1
    if n == 2:
        return 1, 2
    if n <= 4:
        return 2, 2
    return math.ceil(n / 3), 3


def _rate_tick(value: float, _: Any = None) -> str:
    return format_rate(value)


def _intensity_tick(value: float, _: Any = None) -> str:
    if value >= 10_000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _note_lines(notes: Sequence[str], width: int) -> list[str]:
    lines: list[str] = []
    for note in notes:
        lines += textwrap.wrap("• " + note, width=width, subsequent_indent="  ")
    if len(lines) > MAX_NOTE_LINES:
        lines = [*lines[: MAX_NOTE_LINES - 1], f"… {len(lines) - MAX_NOTE_LINES + 1} more line(s) of notes"]
    return lines


_FIGURE_CLASS: list[type] = []


def _figure_class() -> type:
    """A matplotlib Figure that shows itself in Jupyter even when pyplot (and so the inline backend, which
    registers its own display for figures) was never imported."""
    if not _FIGURE_CLASS:
        from matplotlib.figure import Figure

        class RooflineFigure(Figure):
            def _repr_png_(self) -> bytes:
                return figure_bytes(self, "png")

        _FIGURE_CLASS.append(RooflineFigure)
    return _FIGURE_CLASS[0]


def figure(spec: ChartSpec, *, size_px: tuple[int, int] = (1600, 1000)) -> Figure:
    """The chart as a matplotlib Figure (Agg canvas), ``size_px`` pixels at 100 dpi.

    Text is drawn as written: a ``$`` in a module name or a label is no TeX math (mathtext off); control
    characters and lone surrogates are dropped (roofline.render.escape.plain_text)."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False}):
        return _figure(_plain(spec), size_px)


def _plain(value: Any, seen: dict[str, str] | None = None) -> Any:
    """The spec with every string it draws made plain text (keys too, so that lookups by label still match). A
    mark's Point is not drawn (its label is, as the mark's): left as it is, and a mark with nothing to change is
    kept (100,000 marks are not copied). ``seen``: the texts made plain so far (bounds repeat)."""
    seen = {} if seen is None else seen
    if isinstance(value, str):
        text = seen.get(value)
        if text is None:
            text = seen[value] = plain_text(value)
        return text
    if isinstance(value, Point):
        return value
    if type(value) is Mark:
        label = value.label if value.label is None else _plain(value.label, seen)
        bound = _plain(value.bound, seen)
        return value if label == value.label and bound == value.bound else replace(value, label=label, bound=bound)
    if is_dataclass(value) and not isinstance(value, type):
        return replace(value, **{f.name: _plain(getattr(value, f.name), seen) for f in fields(value) if f.init})
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a NamedTuple
        return type(value)(*(_plain(item, seen) for item in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(item, seen) for item in value)
    if isinstance(value, dict):
        return {_plain(key, seen): _plain(item, seen) for key, item in value.items()}
    return value


def _figure(spec: ChartSpec, size_px: tuple[int, int]) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    width, height = size_px
    if width < MIN_SIZE_PX[0] or height < MIN_SIZE_PX[1]:
        raise ValueError(f"a chart needs at least {MIN_SIZE_PX[0]}x{MIN_SIZE_PX[1]} pixels, not {width}x{height}")
    fig = _figure_class()(figsize=(width / DPI, height / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    k = max(min(width / 1600, height / 1000) ** 0.5, 0.7)  # text and margins shrink gently with the size
    font = 10 * k
    note_lines = _note_lines(spec.notes, int(NOTE_WRAP * width / 1600 / k))
    rows, cols = _grid(len(spec.panels))
    foot = (28 + 14 * len(note_lines)) * k / height
    head = (70 + (20 if spec.subtitle else 0)) * k
    left = LEFT_PX * k / width
    right = 1 - LEGEND_PX * k / width  # the legend lives right of the data
    fig.subplots_adjust(
        left=left, right=right, bottom=foot + 55 * k / height, top=1 - head / height, wspace=0.22, hspace=0.3
    )
    fig.suptitle(spec.title, x=left, ha="left", y=1 - 18 * k / height, va="top", fontsize=font * 1.3)
    if spec.subtitle:
        fig.text(left, 1 - 46 * k / height, spec.subtitle, ha="left", va="top", fontsize=font * 0.9, color="#555")
    axes = [fig.add_subplot(rows, cols, i + 1) for i in range(len(spec.panels))]
    for i, (ax, panel) in enumerate(zip(axes, spec.panels, strict=True)):
        _draw_panel(fig, ax, panel, spec, font, first_column=i % cols == 0)
    _legend(fig, spec, font, right, head)
    if note_lines:
        fig.text(0.008, 8 / height, "\n".join(note_lines), ha="left", va="bottom", fontsize=font * 0.78, color="#333")
    return fig


def _setup_axes(ax: Axes, panel: Panel, spec: ChartSpec, font: float, first_column: bool) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*spec.x_range)
    ax.set_ylim(*spec.y_range)
    ax.xaxis.set_major_locator(LogLocator(base=10, numticks=30))
    ax.yaxis.set_major_locator(LogLocator(base=10, numticks=30))
    ax.xaxis.set_major_formatter(FuncFormatter(_intensity_tick))
    ax.yaxis.set_major_formatter(FuncFormatter(_rate_tick))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(labelsize=font * 0.9)
    ax.grid(True, which="major", color="#e4e4e4", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.set_xlabel("Arithmetic intensity (FLOP/byte)", fontsize=font)
    if first_column:  # panels share their ranges: one axis title per row
        ax.set_ylabel("Throughput (FLOP/s)", fontsize=font)
    ax.set_title(panel.title, fontsize=font * 1.05, loc="left")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _draw_panel(fig: Figure, ax: Axes, panel: Panel, spec: ChartSpec, font: float, first_column: bool) -> None:
    _setup_axes(ax, panel, spec, font, first_column)
    if panel.band is not None:
        from matplotlib.patches import Rectangle

        (x0, x1), y0 = panel.band.x_range, spec.y_range[0]
        ax.add_patch(
            Rectangle((x0, y0), x1 - x0, panel.band.top - y0, facecolor=BOUND_COLORS["launch"], alpha=0.07, linewidth=0)
        )
        ax.plot([x0, x1], [panel.band.top] * 2, color=BOUND_COLORS["launch"], linewidth=0.9, linestyle=(0, (2, 2)))
    for roof in panel.roofs:
        style = SOURCE_STYLE[roof.source]
        ax.plot(
            [roof.start[0], roof.end[0]],
            [roof.start[1], roof.end[1]],
            color=style["color"],
            linestyle=style["linestyle"],
            linewidth=2.0 if roof.primary else 1.3,
            alpha=1.0 if roof.primary else 0.75,
            zorder=2,
            solid_capstyle="butt",
        )
    for ridge in panel.ridges:
        ax.plot([ridge.intensity], [ridge.throughput], marker="D", markersize=5, color="#1f1f1f", zorder=3)
    _draw_arrows(ax, panel.arrows, font)
    _draw_cache_marks(ax, panel.cache_marks)
    _draw_marks(ax, panel.marks, font)
    _place_labels(fig, ax, panel, font)


def _draw_arrows(ax: Axes, arrows: Sequence[Arrow], font: float) -> None:
    """--verify: an arrow from each op's measured point to its point with the technique (a hollow marker at its
    head), under the marks: solid to the verified run's per-op time, dashed to an estimate."""
    if not arrows:
        return
    for arrow in arrows:
        ax.annotate(
            "",
            xy=(arrow.x, arrow.y_after),
            xytext=(arrow.x, arrow.y),
            arrowprops={
                "arrowstyle": "-|>",
                "color": ARROW_COLOR,
                "linewidth": 1.1,
                "linestyle": "-" if arrow.measured else "--",
                "shrinkA": 3,
                "shrinkB": 4,
            },
            zorder=3.5,
        )
    ax.scatter(
        [a.x for a in arrows],
        [a.y_after for a in arrows],
        s=26 * (font / 10) ** 2,
        facecolors="none",
        edgecolors=ARROW_COLOR,
        linewidths=1.0,
        zorder=3.6,
    )


def _size(share: float | None, font: float = 10.0) -> float:
    """Marker area (points^2) grows with the point's share of the time (and with the text size)."""
    return (22 + 650 * (share or 0.0)) * (font / 10) ** 2


def _draw_cache_marks(ax: Axes, marks: Sequence[CacheMark]) -> None:
    """diagnose --counters: each op's L2 point (a hollow square), L1 point (a hollow triangle) and a dotted link
    to its DRAM point, under the marks; one artist for the links, one per level for the points."""
    if not marks:
        return
    from matplotlib.collections import LineCollection

    links = [[(m.x_dram, m.y), (m.x, m.y)] for m in marks if m.x_dram > 0]
    if links:
        ax.add_collection(LineCollection(links, colors=CACHE_COLOR, linewidths=0.8, linestyles=":", zorder=3))
    for level, marker in CACHE_MARKERS.items():
        group = [m for m in marks if m.level == level]
        if group:
            ax.scatter(
                [m.x for m in group],
                [m.y for m in group],
                s=28,
                marker=marker,
                facecolors="none",
                edgecolors=CACHE_COLOR,
                linewidths=1.1,
                zorder=3.5,
            )


def _draw_marks(ax: Axes, marks: Sequence[Mark], font: float) -> None:
    """One scatter per (series, bound, above roof): one artist per group, never one per point. Beyond
    RASTER_MARKS points the markers are drawn as one embedded bitmap in SVG and PDF (the text and lines stay
    vector): a vector path per marker made an SVG of 100,000 points tens of MB."""
    import numpy as np

    rasterized = len(marks) > RASTER_MARKS
    groups: dict[tuple[int, str, bool], list[Mark]] = {}
    for mark in sorted(marks, key=lambda m: -(m.share or 0.0)):
        groups.setdefault((mark.series, mark.bound, mark.above_roof), []).append(mark)
    for (series, bound, above), group in groups.items():
        color = BOUND_COLORS.get(bound, OTHER_COLOR)
        ax.scatter(  # NB: arrays, not lists: matplotlib masks a list item by item (1 s for 100,000 points)
            np.array([m.x for m in group], dtype=float),
            np.array([m.y for m in group], dtype=float),
            s=np.array([_size(m.share, font) * (1.4 if above else 1.0) for m in group], dtype=float),
            c=color,
            marker=ABOVE_MARKER if above else SERIES_MARKERS[series % len(SERIES_MARKERS)],
            edgecolors="#b00020" if above else "white",
            linewidths=1.2 if above else 0.6,
            alpha=0.9,
            zorder=4,
            rasterized=rasterized,
        )


def _text_size(fig: Figure, text: str, font: float, renderer: Any) -> tuple[float, float]:
    artist = fig.text(0, 0, text, fontsize=font)
    extent = artist.get_window_extent(renderer=renderer)
    artist.remove()
    return extent.width, extent.height


@dataclass
class _Obstacles:
    area: Box  # labels stay inside the axes
    taken: list[Box]  # labels placed so far: never overlap them
    dots: Any  # the points, an (n, 4) array of boxes (x0, y0, x1, y1): avoid hiding them
    lines: list[Box]  # samples along the roof lines: avoid writing over them where possible
    leaders: list[Box] = field(default_factory=list)  # samples along the leader lines drawn so far

    def choose(self, candidates: Sequence[Sequence[Box]]) -> int:
        """Index of the first candidate (each a few boxes) that is inside and overlaps nothing; else the first
        that spares labels and points; else labels only; else 0."""
        inside = [i for i, boxes in enumerate(candidates) if all(b.inside(self.area) for b in boxes)]
        taken, dots, lines = _array(self.taken), self.dots, _array(self.lines)
        for layers in ((taken, dots, lines), (taken, dots), (taken,)):
            for i in inside:
                if not any(_areas(b, layer).any() for b in candidates[i] for layer in layers):
                    return i
        return inside[0] if inside else 0


def _put(fig: Figure, ax: Axes, text: str, box: Box, font: float, color: str, **kwargs: Any) -> None:
    ax.annotate(
        text,
        xy=_frac(fig, box.x0, box.y0),
        xycoords="figure fraction",
        fontsize=font,
        color=color,
        ha="left",
        va="bottom",
        annotation_clip=False,
        bbox=HALO,
        **kwargs,
    )


def _place_labels(fig: Figure, ax: Axes, panel: Panel, font: float) -> None:
    import numpy as np

    renderer = fig.canvas.get_renderer()
    bbox = ax.get_window_extent(renderer=renderer)
    to_display = ax.transData.transform
    small = font * 0.82
    xy = to_display(np.array([[m.x, m.y] for m in panel.marks])) if panel.marks else np.zeros((0, 2))
    radii = np.array([math.sqrt(_size(m.share, font)) * 0.7 for m in panel.marks], dtype=float)
    room = _Obstacles(
        area=Box(bbox.x0 + 2, bbox.y0 + 2, bbox.x1 - 2, bbox.y1 - 2),
        taken=[],
        dots=np.column_stack([xy[:, 0] - radii, xy[:, 1] - radii, xy[:, 0] + radii, xy[:, 1] + radii]),
        lines=_line_boxes(ax, panel),
    )
    for roof in panel.roofs:
        if roof.label:
            _roof_label(fig, ax, roof, small, renderer, room)
    for ridge in panel.ridges:
        anchor = tuple(to_display((ridge.intensity, ridge.throughput)))
        size = _text_size(fig, ridge.label, small, renderer)
        candidates = [
            [label_box(anchor, size, d, 8 * ring)]  # type: ignore[arg-type]
            for ring in (1.0, 2.0, 3.5)
            for d in ((1, -1), (-1, 1), (1, 1), (-1, -1), (0, -1))
        ]
        box = candidates[room.choose(candidates)][0]
        _put(fig, ax, ridge.label, box, small, "#1f1f1f")
        room.taken.append(box)
    if panel.band is not None:
        (x0, top), (x1, _) = (
            to_display((panel.band.x_range[0], panel.band.top)),
            to_display((panel.band.x_range[1], panel.band.top)),
        )
        w, h = _text_size(fig, panel.band.label, small, renderer)
        bottom = room.area.y0 + 4
        candidates = [[Box(x, top - 4 - h, x + w, top - 4)] for x in (x0 + 4, x1 - 4 - w)]  # inside, under the top
        candidates += [[Box(x, bottom, x + w, bottom + h)] for x in (x0 + 4, x1 - 4 - w)]  # inside, at the bottom
        candidates += [[Box(x, top + 3, x + w, top + 3 + h)] for x in (x0 + 4, x1 - 4 - w)]  # above the top
        box = candidates[room.choose(candidates)][0]
        _put(fig, ax, panel.band.label, box, small, BOUND_COLORS["launch"])
        room.taken.append(box)
    labelled = sorted((i for i, m in enumerate(panel.marks) if m.label), key=lambda i: -(panel.marks[i].share or 0.0))
    padded = room.dots + np.array([-14.0, -14.0, 14.0, 14.0])  # a label hugging another point would seem to name it
    lines = _array(room.lines)
    for i in labelled:
        mark = panel.marks[i]
        anchor = (float(xy[i][0]), float(xy[i][1]))
        size = _text_size(fig, mark.label or "", small, renderer)
        base_gap = float(radii[i]) + 4
        # only the points a candidate spot can reach matter: a window around the anchor, so that labelling the
        # top N of n points costs N vectorised passes over the points, not N x n boxes
        reach = base_gap * _RINGS[-1] + size[0] + size[1]
        near = (
            (padded[:, 2] > anchor[0] - reach)
            & (padded[:, 0] < anchor[0] + reach)
            & (padded[:, 3] > anchor[1] - reach)
            & (padded[:, 1] < anchor[1] + reach)
        )
        near[i] = False
        others = np.concatenate([padded[near], lines])
        placed = place_label(
            anchor, size, area=room.area, taken=room.taken, dots=others, base_gap=base_gap, leaders=room.leaders
        )
        if placed is None:  # no free spot: better no label than one over another
            continue
        box, leader = placed
        room.taken.append(box.pad(1))
        _put(fig, ax, mark.label or "", box, small, "#111", zorder=6)
        if leader:
            end = _nearest_edge(box, anchor)
            ax.annotate(
                "",
                xy=_frac(fig, *anchor),
                xycoords="figure fraction",
                xytext=_frac(fig, *end),
                textcoords="figure fraction",
                arrowprops={
                    "arrowstyle": "-",
                    "color": "#777",
                    "linewidth": 0.7,
                    "shrinkA": 0,
                    "shrinkB": float(radii[i]),
                },
                zorder=5,
            )
            room.leaders += _segment_boxes(anchor, end)  # later labels keep off this leader line


def _line_boxes(ax: Axes, panel: Panel, step: float = 8.0) -> list[Box]:
    """Small boxes along every roof line: a label over a roof hides it, so lines are (soft) obstacles."""
    boxes = []
    for roof in panel.roofs:
        (x0, y0), (x1, y1) = ax.transData.transform(roof.start), ax.transData.transform(roof.end)
        n = max(int(math.hypot(x1 - x0, y1 - y0) / step), 1)
        for k in range(n + 1):
            x, y = x0 + (x1 - x0) * k / n, y0 + (y1 - y0) * k / n
            boxes.append(Box(x - 1.5, y - 1.5, x + 1.5, y + 1.5))
    return boxes


def _segment_boxes(start: tuple[float, float], end: tuple[float, float], step: float = 6.0) -> list[Box]:
    n = max(int(math.hypot(end[0] - start[0], end[1] - start[1]) / step), 1)
    points = [(start[0] + (end[0] - start[0]) * k / n, start[1] + (end[1] - start[1]) * k / n) for k in range(n + 1)]
    return [Box(x - 1.5, y - 1.5, x + 1.5, y + 1.5) for x, y in points]


def _frac(fig: Figure, x: float, y: float) -> tuple[float, float]:
    """Display pixels (at the figure's own dpi) as a figure fraction, which holds at any output dpi."""
    return x / fig.bbox.width, y / fig.bbox.height


def _nearest_edge(box: Box, point: tuple[float, float]) -> tuple[float, float]:
    x = min(max(point[0], box.x0), box.x1)
    y = min(max(point[1], box.y0), box.y1)
    return x, y


def _roof_label(fig: Figure, ax: Axes, roof: ChartRoof, font: float, renderer: Any, room: _Obstacles) -> None:
    """Compute roofs: along the line, right end first, above or below it; memory roofs: along the slope,
    rotated with it, lower part first. The label's own line is no obstacle to it."""
    color = SOURCE_STYLE[roof.source]["color"]
    start = ax.transData.transform(roof.start)
    end = ax.transData.transform(roof.end)
    start = (max(start[0], room.area.x0), start[1])
    w, h = _text_size(fig, roof.label, font, renderer)
    own = set(id(b) for b in _line_boxes_of(room, ax, roof))
    lines = room.lines
    room.lines = [b for b in lines if id(b) not in own]
    try:
        if roof.kind == "compute":
            candidates = []
            for gap in (3, 3 + h):  # just above or below the line, then one line further out
                x1 = end[0] - 6
                while x1 - w >= min(start[0] - w, end[0] - 6 - w):  # from the right end leftwards, 24 px a step
                    candidates += [
                        [Box(x1 - w, end[1] + gap, x1, end[1] + gap + h)],
                        [Box(x1 - w, end[1] - gap - h, x1, end[1] - gap)],
                    ]
                    x1 -= 24
            box = candidates[room.choose(candidates)][0]
            _put(fig, ax, roof.label, box, font, color)
            room.taken.append(box)
            return
        angle = math.atan2(end[1] - start[1], end[0] - start[0])
        along, across = (math.cos(angle), math.sin(angle)), (-math.sin(angle), math.cos(angle))
        options = []
        for fraction in (0.04, 0.14, 0.24, 0.34, 0.44, 0.54, 0.64, 0.74):
            x = start[0] + fraction * (end[0] - start[0])
            y = start[1] + fraction * (end[1] - start[1])
            for side in (1, -1):  # above the line, then below
                offset = side * (h * 0.5 + 3)
                origin = (x + across[0] * offset, y + across[1] * offset)
                steps = max(math.ceil(w / h), 1)
                chain = []
                for k in range(steps):  # the rotated text as a chain of squares along its baseline
                    cx = origin[0] + along[0] * (k + 0.5) * w / steps
                    cy = origin[1] + along[1] * (k + 0.5) * w / steps
                    chain.append(Box(cx - h / 2, cy - h / 2, cx + h / 2, cy + h / 2))
                options.append((chain, origin))
        chain, origin = options[room.choose([c for c, _ in options])]
        ax.annotate(
            roof.label,
            xy=_frac(fig, *origin),
            xycoords="figure fraction",
            fontsize=font,
            color=color,
            rotation=math.degrees(angle),
            rotation_mode="anchor",
            ha="left",
            va="center",
            bbox=HALO,
        )
        room.taken += chain
    finally:
        room.lines = lines


def _line_boxes_of(room: _Obstacles, ax: Axes, roof: ChartRoof) -> list[Box]:
    """The samples of ``roof``'s own line among room.lines (they lie on its segment)."""
    (x0, y0), (x1, y1) = ax.transData.transform(roof.start), ax.transData.transform(roof.end)
    length = math.hypot(x1 - x0, y1 - y0) or 1.0
    own = []
    for b in room.lines:
        cx, cy = (b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2
        t = ((cx - x0) * (x1 - x0) + (cy - y0) * (y1 - y0)) / length**2
        distance = abs((cx - x0) * (y1 - y0) - (cy - y0) * (x1 - x0)) / length
        if -0.01 <= t <= 1.01 and distance < 0.5:
            own.append(b)
    return own


def _legend(fig: Figure, spec: ChartSpec, font: float, right: float, head: float) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    marks = [m for p in spec.panels for m in p.marks]
    roofs = [r for p in spec.panels for r in p.roofs]
    handles: list[Any] = []
    bounds = [b for b in ("compute", "memory", "launch") if any(m.bound == b for m in marks)]
    if any(m.bound not in BOUND_COLORS for m in marks):
        bounds.append("other")
    for bound in bounds:
        handles.append(
            Line2D(
                [],
                [],
                linestyle="",
                marker="o",
                markersize=8,
                markerfacecolor=BOUND_COLORS.get(bound, OTHER_COLOR),
                markeredgecolor="white",
                label=f"{bound}-bound" if bound != "other" else "bound unknown",
            )
        )
    if any(m.above_roof for m in marks):
        handles.append(
            Line2D(
                [],
                [],
                linestyle="",
                marker=ABOVE_MARKER,
                markersize=9,
                markerfacecolor=OTHER_COLOR,
                markeredgecolor="#b00020",
                label="above its roof (see notes)",
            )
        )
    if len(spec.series) > 1:
        for i, name in enumerate(spec.series):
            handles.append(
                Line2D(
                    [],
                    [],
                    linestyle="",
                    marker=SERIES_MARKERS[i % len(SERIES_MARKERS)],
                    markersize=8,
                    markerfacecolor="#bbbbbb",
                    markeredgecolor="#333",
                    label=name,
                )
            )
    for source, text in (("spec", "spec roof (sheet)"), ("measured", "measured roof (calibrate)")):
        if any(r.source == source for r in roofs):
            style = SOURCE_STYLE[source]
            handles.append(
                Line2D([], [], color=style["color"], linestyle=style["linestyle"], linewidth=2.0, label=text)
            )
    arrows = [a for p in spec.panels for a in p.arrows]
    for measured, label in (
        (True, "--verify: op time in the\nverified run (per-op profile)"),
        (False, "--verify: op time ÷ its finding's\nmeasured gain (estimate, see notes)"),
    ):
        if any(a.measured == measured for a in arrows):
            handles.append(
                Line2D(
                    [],
                    [],
                    color=ARROW_COLOR,
                    linewidth=1.1,
                    linestyle="-" if measured else "--",
                    marker="o",
                    markerfacecolor="none",
                    label=label,
                )
            )
    levels = {m.level for p in spec.panels for m in p.cache_marks}
    for level, marker in CACHE_MARKERS.items():
        if level in levels:
            handles.append(
                Line2D(
                    [],
                    [],
                    color=CACHE_COLOR,
                    linewidth=0.8,
                    linestyle=":",
                    marker=marker,
                    markerfacecolor="none",
                    markeredgecolor=CACHE_COLOR,
                    label=f"{level} point: FLOPs ÷ measured {level} bytes\n(dotted to the op's DRAM point:\n"
                    "FLOPs ÷ counted bytes)",
                )
            )
    if any(p.ridges for p in spec.panels):
        handles.append(Line2D([], [], linestyle="", marker="D", markersize=5, color="#1f1f1f", label="ridge point"))
    if any(p.band for p in spec.panels):
        handles.append(Patch(facecolor=BOUND_COLORS["launch"], alpha=0.15, label="launch band (see its label)"))
    if marks:
        handles.append(
            Line2D([], [], linestyle="", marker="o", markersize=4, color="#999", label="marker area ∝ share of time")
        )
    fig.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(right + 0.012, 1 - head / fig.bbox.height),
        fontsize=font * 0.9,
        frameon=False,
        borderaxespad=0.0,
    )


# ------------------------------------------------------------------------------------------------ output


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    """PNG, SVG or PDF bytes of the figure (SVG text as paths: it looks the same everywhere, fonts or not)."""
    import io

    if fmt not in FORMATS:
        raise ValueError(f"unknown chart format {fmt!r}")
    buffer = io.BytesIO()
    metadata = {"Date": None} if fmt in ("svg", "pdf") else {}  # reproducible output
    if fmt == "svg":
        import matplotlib

        with matplotlib.rc_context({"svg.hashsalt": "roofline", "svg.fonttype": "path"}):
            fig.savefig(buffer, format="svg", metadata=metadata)
    else:
        fig.savefig(buffer, format=fmt, dpi=DPI, metadata=metadata or None)
    return buffer.getvalue()


__all__ = ["FORMATS", "Box", "figure", "figure_bytes", "label_box", "place_label"]
