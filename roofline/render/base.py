"""A small renderer base: ``render(value) -> str``, so output can be printed, tested or written."""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from abc import ABC, abstractmethod
from typing import Any

_SURROGATES = re.compile("[\ud800-\udfff]")

#: Console tables show at most this many rows (a report of 100,000 rows stays readable, and rich's layout time
#: bounded); a line says how many more there are and where every row is (the report, its CSV or JSON).
MAX_TABLE_ROWS = 100


def shown_rows(count: int, severity: Any = None, limit: int = MAX_TABLE_ROWS) -> tuple[list[int], int]:
    """The indices of the rows a console table shows, in their order, and how many it leaves out.

    All of them up to ``limit``; beyond it the ``limit`` rows of highest ``severity(index)`` (ties: the first),
    else the first ``limit``."""
    if count <= limit:
        return list(range(count)), 0
    if severity is None:
        return list(range(limit)), count - limit
    import heapq

    ranked = heapq.nsmallest(max(limit, 0), range(count), key=lambda i: (-severity(i), i))  # sorted()[:limit]
    return sorted(ranked), count - len(ranked)


class Renderer(ABC):
    @abstractmethod
    def render(self, value: Any) -> str: ...


#: the widest (and tallest) terminal size taken from $COLUMNS / $LINES: a larger value is read as this
MAX_TERMINAL_SIZE = 10_000


def terminal_size_env(name: str) -> int | None:
    """``$COLUMNS`` or ``$LINES`` as a positive integer, at most MAX_TERMINAL_SIZE (COLUMNS=99999999999 would
    have rich pad lines to that width); None when unset, empty or not one ('', 'abc', '0', '-5', '12.5')."""
    value = os.environ.get(name, "").strip()
    if not (value.isascii() and value.isdigit()):
        return None
    digits = value.lstrip("0")
    if not digits:
        return None
    return min(int(digits), MAX_TERMINAL_SIZE) if len(digits) <= 9 else MAX_TERMINAL_SIZE


def clean_terminal_size_env() -> None:
    """Unset COLUMNS and LINES when they hold no positive integer (' 100 ' becomes '100'), so that every
    console (ours, typer's help, rich's progress bars) asks the terminal instead of crashing on '' or printing
    nothing at width 0. Called once, where the CLI starts."""
    for name in ("COLUMNS", "LINES"):
        if name not in os.environ:
            continue
        size = terminal_size_env(name)
        if size is None:
            del os.environ[name]
        else:
            os.environ[name] = str(size)


def _width() -> int:
    columns = terminal_size_env("COLUMNS")
    if columns is not None:
        return columns
    if sys.stdout.isatty():
        return shutil.get_terminal_size((120, 24)).columns
    return 120


def to_text(*renderables: Any, color: bool | None = None) -> str:
    """Render rich objects to a string: colours only on a terminal (or when forced), fixed width in pipes."""
    from rich.console import Console

    if color is None:
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=_width(),
        force_terminal=color,
        no_color=not color,
        color_system="auto" if color else None,
        highlight=False,
        soft_wrap=False,
    )
    for item in renderables:
        console.print(item)
    # a lone surrogate (from a report's JSON "\ud800") cannot be written to stdout: never a crash there
    return _SURROGATES.sub("\ufffd", buffer.getvalue())


def device_header(device: Any, roofs: Any) -> list[str]:
    """Two rich-markup lines naming a device and the roofs its rows were placed on.

    ``roofs``: (label, peak FLOP/s, ridge FLOP/B) triples, e.g. from the rows; shown sorted and once each."""
    from roofline.render.escape import console_text as escape
    from roofline.units import format_intensity, format_rate, format_time

    source = "roofs from spec sheet" if device.roof_source == "spec" else "measured roofs (roofline calibrate)"
    roof_text = [
        f"{label} {format_rate(peak)} (ridge {format_intensity(ridge)} FLOP/B)"
        for label, peak, ridge in sorted(set(roofs))
    ]
    second = " · ".join(
        [
            *roof_text,
            f"DRAM {format_rate(device.dram_bandwidth, 'B/s')}",
            f"launch floor {format_time(device.launch_floor_s)}",
        ]
    )
    return [f"[bold]{escape(device.display_name)}[/] ({escape(device.name)}) · {source}", f"  {escape(second)}"]
