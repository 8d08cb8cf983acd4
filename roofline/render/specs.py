"""Console rendering of spec sheets and detection results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from roofline.render.base import Renderer, to_text
from roofline.render.escape import console_text as escape
from roofline.roofs import sheet_roofs
from roofline.specs.schema import SpecSheet
from roofline.specs.summary import sheet_summary


def _num(value: float | None, fmt: str = "{:,.4g}") -> str:
    return "-" if value is None else fmt.format(value)


class SpecListRenderer(Renderer):
    def render(self, reg: Any) -> str:  # SpecRegistry
        summaries = [sheet_summary(reg.sheets[n], reg.origins[n], str(reg.paths[n])) for n in reg.names()]
        show_origin = any(s["origin"] != "built-in" for s in summaries)
        table = Table(header_style="bold", box=box.SIMPLE_HEAD)
        columns = [
            ("name", "left"),
            ("device", "left"),
            ("16-bit tensor\nTFLOP/s", "right"),
            ("fp32\nTFLOP/s", "right"),
            ("DRAM\nGB/s", "right"),
            ("memory\nGB", "right"),
            ("ridge\nFLOP/B", "right"),
        ]
        if show_origin:
            columns.append(("from", "left"))
        for column, justify in columns:
            # only the long display name may wrap: names and numbers stay whole
            table.add_column(column, justify=justify, no_wrap=column != "device")  # type: ignore[arg-type]
        for s in summaries:
            tensor = f"{_num(s['tensor16_tflops'])} {s['tensor16_dtype']}" if s["tensor16_dtype"] else "-"
            cells = [
                s["name"],
                escape(s["display_name"]),
                tensor,
                _num(s["fp32_tflops"]),
                _num(s["dram_gb_per_s"], "{:,.0f}"),
                _num(s["dram_capacity_gb"], "{:,.0f}"),
                _num(s["ridge16_flop_per_byte"], "{:,.0f}"),
            ]
            table.add_row(*cells, *([s["origin"]] if show_origin else []))
        note = "[dim]Dense peaks (no 2:4 sparsity). Ridge = 16-bit tensor peak / DRAM bandwidth.[/]"
        return to_text(table, note)


class SpecShowRenderer(Renderer):
    def __init__(self, origin: str, path: Path) -> None:
        self.origin = origin
        self.path = path

    def render(self, sheet: SpecSheet) -> str:
        items: list[Any] = [
            f"[bold]{escape(sheet.display_name)}[/] ({sheet.name}) · {sheet.vendor} {escape(sheet.architecture)}"
            f" · {sheet.compute_units} {sheet.compute_unit_name}s"
            + (f" · boost {sheet.boost_clock_mhz:g} MHz" if sheet.boost_clock_mhz else "")
            + (f" · TDP {sheet.tdp_w:g} W" if sheet.tdp_w else "")
        ]
        if sheet.aliases:
            items.append("aliases: " + escape(", ".join(sheet.aliases)))
        table = Table(title="Compute roofs (dense)", title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
        for column in ("dtype", "unit", "peak", "ridge vs DRAM"):
            table.add_column(column, justify="left" if column in ("dtype", "unit") else "right")
        for roof in sheet_roofs(sheet):
            unit = "TOP/s" if roof["dtype"].startswith("int") else "TFLOP/s"
            table.add_row(
                roof["dtype"],
                roof["unit"],
                f"{roof['peak_flops_per_s'] / 1e12:,.4g} {unit}",
                f"{roof['ridge_flop_per_byte']:,.1f} FLOP/B",
            )
        items.append(table)
        mem = sheet.memory
        memory = Table(title="Memory", title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
        for column in ("level", "capacity", "bandwidth"):
            memory.add_column(column)
        memory.add_row(
            f"DRAM ({escape(mem.dram.type)})",
            f"{mem.dram.capacity_gb:g} GB",
            f"{mem.dram.bandwidth_gb_per_s:,.0f} GB/s",
        )
        for label, cache in (("L2", mem.l2), ("LLC", mem.llc)):
            if cache is not None:
                scope = f" {escape(cache.scope)}" if cache.scope else ""
                bandwidth = f"{cache.bandwidth_gb_per_s:,.0f} GB/s" if cache.bandwidth_gb_per_s else "-"
                memory.add_row(label, f"{cache.capacity_mib:g} MiB{scope}", bandwidth)
        if mem.smem is not None:
            block = f" ({mem.smem.per_block_kib:g} per block)" if mem.smem.per_block_kib else ""
            memory.add_row("shared memory", f"{mem.smem.per_sm_kib:g} KiB per SM{block}", "-")
        items.append(memory)
        items.append(f"launch floor: {sheet.launch_floor_us:g} us")
        if sheet.interconnect is not None:
            links = [(name, getattr(sheet.interconnect, name)) for name in type(sheet.interconnect).model_fields]
            items.append(
                "interconnect: "
                + escape(
                    ", ".join(
                        f"{name.replace('_bandwidth', '').replace('_', ' ')} {link.gb_per_s:g} GB/s ({link.direction})"
                        for name, link in links
                        if link is not None
                    )
                )
            )
        if sheet.unconfirmed:
            items.append("[yellow]unconfirmed:[/] " + escape(", ".join(sheet.unconfirmed)))
        for note in sheet.notes:
            items.append(f"[dim]note: {escape(note)}[/]")
        for source in sheet.sources:
            items.append(f"[dim]source: {escape(source)}[/]")
        items.append(f"[dim]sheet: {escape(str(self.path))} ({self.origin})[/]")
        return to_text(*items)


class DetectRenderer(Renderer):
    def render(self, result: Any) -> str:  # Detection
        items: list[Any] = []
        if not result.gpus:
            cpu = result.cpu
            items.append("No GPU detected (no NVML device and no CUDA device in torch).")
            items.append(
                f"CPU: {escape(str(cpu.model))} · {cpu.logical_cores} logical cores"
                + (f", {cpu.physical_cores} physical" if cpu.physical_cores else "")
                + (f" · torch dispatches to {cpu.isa}" if cpu.isa else "")
                + (f" · {cpu.simd} (CPU flags)" if not cpu.isa and getattr(cpu, "simd", None) else "")
                + (f" · torch threads {cpu.torch_threads}" if cpu.torch_threads else "")
            )
            items.append(f"[dim]{escape(cpu.note)}[/]")
        for gpu in result.gpus:
            sheet = gpu.sheet or "[yellow]no matching sheet[/]"
            items.append(f"GPU {gpu.index}: [bold]{escape(gpu.name)}[/] → {sheet} [dim](via {gpu.source})[/]")
            facts = [
                f"compute capability {gpu.compute_capability}" if gpu.compute_capability else "",
                f"driver {gpu.driver_version}" if gpu.driver_version else "",
                f"max SM clock {gpu.max_sm_clock_mhz:g} MHz" if gpu.max_sm_clock_mhz else "",
                f"memory clock {gpu.memory_clock_mhz:g} MHz" if gpu.memory_clock_mhz else "",
                f"{gpu.bus_width_bits}-bit bus" if gpu.bus_width_bits else "",
            ]
            if any(facts):
                items.append("  " + " · ".join(f for f in facts if f))
            if gpu.checks:
                table = Table(header_style="bold", box=box.SIMPLE_HEAD)
                for column in ("quantity", "read at run time", "sheet", "ratio"):
                    table.add_column(column, justify="left" if column == "quantity" else "right")
                for check in gpu.checks:
                    ratio = f"{check.ratio:.3f}" if check.ratio is not None else "-"
                    style = "[yellow]" if check.warn else ""
                    table.add_row(
                        check.quantity,
                        f"{_num(check.derived, '{:,.6g}')} {check.unit}",
                        f"{_num(check.sheet, '{:,.6g}')} {check.unit}",
                        f"{style}{ratio}",
                    )
                items.append(table)
        for warning in result.warnings:
            items.append(f"[yellow]warning:[/] {escape(warning)}")
        return to_text(*items)
