"""Console rendering of a calibration: each measured ceiling beside its spec value."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table

from roofline.measure.calibration import Calibration, Ceiling
from roofline.render.base import Renderer, to_text
from roofline.render.escape import console_text as escape
from roofline.units import format_bandwidth, format_rate, format_time


def format_value(value: float, unit: str) -> str:
    if unit == "s":
        return format_time(value)
    if unit == "B/s":
        return format_bandwidth(value)
    return format_rate(value, unit)


def _percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.0f}%"


def _header(cal: Calibration) -> str:
    m = cal.machine
    when = cal.created_utc.strftime("%Y-%m-%d %H:%M UTC")
    took = f" in {cal.elapsed_s:.1f} s" if cal.elapsed_s is not None else ""
    if m.kind == "cuda":
        sheet = f"({m.sheet})" if m.sheet else "[yellow](no matching spec sheet)[/]"
        facts = [
            f"driver {m.driver}" if m.driver else "",
            f"CUDA {m.cuda}" if m.cuda else "",
            f"torch {m.torch}" if m.torch else "",
        ]
        head = f"[bold]{escape(m.name)}[/] {sheet}"
    else:
        llc = f"LLC {m.llc_bytes / 2**20:g} MiB" if m.llc_bytes else ""
        facts = [
            f"{m.cpu_threads} torch threads" if m.cpu_threads else "",
            m.isa or "",
            llc,
            f"torch {m.torch}" if m.torch else "",
        ]
        head = f"[bold]CPU: {escape(m.name)}[/]"
    facts.append(f"measured {when}{took}")
    return head + " · " + " · ".join(escape(f) for f in facts if f)


def _phase(ceiling: Ceiling) -> str:
    if ceiling.phase == "burst":
        return "burst from rest"
    if ceiling.phase == "sustained":
        return f"sustained after {ceiling.soak_s:.1f} s of GEMMs" if ceiling.soak_s is not None else "sustained"
    return ""


def _dram_roof(cal: Calibration) -> str:
    """The DRAM roof's ceiling, and its kernel when the calibration names one."""
    name = cal.dram_roof_name
    ceiling = cal.get(name)
    kernel = ceiling.kernel if ceiling is not None else ""
    best = " (the best DRAM ceiling" + (f", {kernel})" if kernel else ")") if cal.dram_roof is not None else ""
    return f"{name}{best}"


def _gemm_phase(cal: Calibration) -> str:
    if any(c.phase == "sustained" for c in cal.ceilings):
        return " (sustained figures; gemm-*-burst are from rest)"
    return ""


class CalibrationRenderer(Renderer):
    def __init__(self, color: bool | None = None) -> None:
        self.color = color

    def render(self, cal: Calibration) -> str:
        items: list[Any] = [_header(cal)]
        measured = [c.measurement for c in cal.ceilings if c.measurement is not None]
        clocks = any(m.clock_mhz_median for m in measured)  # columns without content are left out (a CPU run)
        specs = any(c.spec_value for c in cal.ceilings)
        throttling = clocks or any(m.throttled_count for m in measured)
        table = Table(header_style="bold", box=box.SIMPLE_HEAD)
        columns = [
            ("ceiling", "left"),
            ("measured", "right"),
            *([("vs spec", "right")] if specs else []),
            ("spread\np20-p80", "right"),
            ("samples", "right"),
            *([("throttled", "right")] if throttling else []),
            *([("SM clock\nMHz", "right")] if clocks else []),
            ("what ran (timing)", "left"),
        ]
        for column, justify in columns:
            table.add_column(column, justify=justify, no_wrap=not column.startswith("what"))  # type: ignore[arg-type]
        for ceiling in cal.ceilings:
            m = ceiling.measurement
            vs_spec = "-"
            if ceiling.spec_value:
                vs_spec = f"{_percent(ceiling.ratio)} of {format_value(ceiling.spec_value, ceiling.unit)}"
            cells = [
                ceiling.name,
                format_value(ceiling.value, ceiling.unit),
                *([vs_spec] if specs else []),
                "-" if m is None or m.relative_spread is None else f"{m.relative_spread * 100:.1f}%",
                "-" if m is None else str(m.n),
            ]
            if throttling:
                cells.append("-" if m is None else (f"[yellow]{m.throttled_count}[/]" if m.throttled_count else "0"))
            if clocks:
                cells.append(f"{m.clock_mhz_median:,.0f}" if m is not None and m.clock_mhz_median else "-")
            how = "" if m is None else f" ({m.method}{', L2 flushed' if m.cache == 'cold' else ''})"
            ran = ", ".join(p for p in (ceiling.shape, ceiling.kernel, _phase(ceiling)) if p)
            cells.append(escape(ran + how))
            table.add_row(*cells)
        items.append(table)
        for skipped in cal.skipped:
            items.append(f"[yellow]skipped[/] {skipped.name}: {escape(skipped.reason)}")
        for note in cal.notes:
            items.append(f"[yellow]note:[/] {escape(note)}")
        # NB: a sustained GEMM figure is taken in the throttled state on purpose (after a soak): not a warning
        flagged = [c.measurement for c in cal.ceilings if c.measurement is not None and c.phase != "sustained"]
        throttled = sum(m.throttled_count for m in flagged)
        if throttled:
            reasons = sorted({r for m in flagged for r in m.throttle_reasons})
            why = f" ({', '.join(reasons)})" if reasons else ""
            items.append(
                f"[yellow]warning:[/] {throttled} of {sum(m.n for m in flagged)} samples ran below 75% of the maximum "
                f"SM clock or with a slowdown reason{escape(why)}: the GPU was throttling, so these ceilings are what "
                "it sustains in that state"
            )
        roofs = (
            f"DRAM = {_dram_roof(cal)}, compute = gemm-* per dtype{_gemm_phase(cal)}, launch floor = launch-events"
            if cal.machine.kind == "cuda"
            else "DRAM = cpu-copy, compute = cpu-gemm-*, launch floor = launch-host"
        )
        items.append(
            "[dim]Bandwidth counts bytes read + bytes written; values are medians. Used as roofs from measured "
            f"(calibration): {roofs}.[/]"
        )
        return to_text(*items, color=self.color)
