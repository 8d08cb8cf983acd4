"""Console rendering of a distributed diagnosis (the report's ``distributed`` section): the ranks' times with
their exposed and overlapped communication, the skew, the collectives on the communication roof, the findings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box

from roofline.render.base import Renderer, to_text
from roofline.render.escape import console_text as escape
from roofline.units import format_bandwidth, format_bytes, format_time


def _time(value: float | None) -> str:
    return "-" if value is None else format_time(value)


def _bw(value: float | None) -> str:
    return "-" if value is None else format_bandwidth(value)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


class DistributedRenderer(Renderer):
    """The ``distributed`` section of a merged report."""

    def __init__(self, *, top: int = 10, color: bool | None = None) -> None:
        self.top = top
        self.color = color

    def render(self, section: dict[str, Any]) -> str:
        roof = section.get("roof")
        roof_text = "none"
        if roof:
            roof_text = (
                f"{format_bandwidth(roof['bus_bytes_per_s'])} bus bandwidth, latency "
                f"{format_time(roof['latency_s'])} ({roof['source']})"
            )
        parts: list[Any] = [
            "",
            f"[bold]Distributed[/]: {section['world_size']} ranks · {escape(str(section['backend']))} · "
            f"communication roof: {escape(roof_text)}",
        ]
        if section.get("roof_note"):
            parts.append(f"  {escape(section['roof_note'])}")
        parts.append(self._ranks(section.get("ranks", [])))
        skew = section.get("skew")
        if skew:
            stragglers = ", ".join(str(r) for r in skew.get("stragglers", [])) or "none"
            parts.append(
                f"  skew: the slowest rank ({skew['slowest_rank']}) takes {format_time(skew['slowest_s'])}, "
                f"{skew['ratio']:.2f}x the median {format_time(skew['median_s'])}; stragglers: {stragglers}"
            )
        if section.get("collectives"):
            parts.append(self._collectives(section["collectives"]))
        parts += [f"  note: {escape(n)}" for n in section.get("notes", [])]
        parts += self._findings(section.get("findings", []))
        return to_text(*parts, color=self.color)

    def _ranks(self, ranks: Sequence[dict[str, Any]]) -> Any:
        from rich.table import Table

        table = Table(
            title="\nRanks (per iteration, measured under the profiler: the collectives' transfer, and the wait for "
            "the last rank apart)",
            title_justify="left",
            header_style="bold",
            box=box.SIMPLE_HEAD,
        )
        names = ("rank", "device", "iteration", "profiled", "transfer", "overlapped", "exposed", "exposed %", "wait",
                 "exposed wait")  # fmt: skip
        for name in names:
            table.add_column(name, justify="left" if name == "device" else "right", no_wrap=True)
        for r in ranks:
            profiled = r.get("profiled_iteration_s") or r.get("iteration_s")
            share = min(r["exposed_s"] / profiled, 1.0) if profiled else None
            table.add_row(
                str(r["rank"]),
                escape(str(r.get("device", ""))),
                _time(r.get("iteration_s")),
                _time(profiled),
                _time(r.get("communication_s")),
                _time(r.get("overlapped_s")),
                _time(r.get("exposed_s")),
                _percent(share),
                _time(r.get("wait_s")),
                _time(r.get("exposed_wait_s")),
            )
        return table

    def _collectives(self, rows: Sequence[dict[str, Any]]) -> Any:
        from rich.table import Table

        table = Table(
            title="\nCollectives (one call each: its transfer, the shortest across the ranks; bus bandwidth as "
            "nccl-tests defines it)",
            title_justify="left",
            header_style="bold",
            box=box.SIMPLE_HEAD,
        )
        names = (
            "rank",
            "collective",
            "phase",
            "calls",
            "bytes",
            "transfer",
            "wait",
            "algbw",
            "busbw",
            "roof",
            "of roof",
        )
        for name in names:
            table.add_column(name, justify="left" if name in ("collective", "phase") else "right", no_wrap=True)
        ordered = sorted(rows, key=lambda r: -(r.get("time_s") or 0.0) * (r.get("calls") or 1))
        for r in ordered[: self.top * 2]:
            table.add_row(
                "-" if r.get("rank") is None else str(r["rank"]),
                escape(str(r["kind"])),
                escape(str(r.get("phase") or "")),
                f"{r['calls']:g}",
                "-" if r.get("bytes") is None else format_bytes(r["bytes"]),
                _time(r.get("time_s")),
                _time(r.get("wait_s")),
                _bw(r.get("algbw_bytes_per_s")),
                _bw(r.get("busbw_bytes_per_s")),
                _time(r.get("roof_time_s")),
                _percent(r.get("efficiency")),
            )
        return table

    @staticmethod
    def _findings(findings: Sequence[dict[str, Any]]) -> list[str]:
        if not findings:
            return ["\n[bold]Communication findings[/]: none (little exposed communication, no straggler)"]
        lines = ["\n[bold]Communication findings[/]"]
        for f in findings:
            where = "" if f.get("rank") is None else f"rank {f['rank']}: "
            gain = f.get("gain")
            bound = f"; at most {gain:.3g}x" if gain else ""
            lines.append(f"  [bold]{escape(f['rule'])}[/] {escape(where)}{escape(f['evidence'])}")
            lines.append(f"    {escape(f['technique'])}{bound}")
        return lines


class CollectivesCalibrationRenderer(Renderer):
    """`roofline calibrate --collectives`: each kind's bus bandwidth over the message sizes, and its roof."""

    def render(self, cal: Any) -> str:
        from rich.table import Table

        parts: list[Any] = [
            f"[bold]Collectives[/] · {escape(cal.device)} · {escape(cal.backend)} · {cal.world_size} ranks · "
            f"{cal.created_utc:%Y-%m-%d %H:%M} UTC"
        ]
        for kind in dict.fromkeys(p.kind for p in cal.points):
            table = Table(title=f"\n{kind}", title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
            for name in ("message", "time", "algbw", "busbw"):
                table.add_column(name, justify="right", no_wrap=True)
            for p in (p for p in cal.points if p.kind == kind):
                table.add_row(
                    format_bytes(p.bytes),
                    format_time(p.time_s),
                    format_bandwidth(p.algbw_bytes_per_s),
                    format_bandwidth(p.busbw_bytes_per_s),
                )
            parts.append(table)
        for roof in cal.roofs:
            parts.append(
                f"  roof {escape(roof.kind)}: bus bandwidth {format_bandwidth(roof.bus_bytes_per_s)}, latency "
                f"{format_time(roof.latency_s)} (time of a call >= max(latency, bus bytes / bus bandwidth))"
            )
        if cal.link is not None:
            parts.append(
                f"  link: {format_bandwidth(cal.link.bytes_per_s)} per direction ({escape(cal.link.source)}); the roof "
                f"is {max(r.bus_bytes_per_s for r in cal.roofs) / cal.link.bytes_per_s:.0%} of it"
                if cal.roofs
                else f"  link: {format_bandwidth(cal.link.bytes_per_s)} per direction ({escape(cal.link.source)})"
            )
        parts += [f"  note: {escape(n)}" for n in cal.notes]
        return to_text(*parts)


__all__ = ["CollectivesCalibrationRenderer", "DistributedRenderer"]
