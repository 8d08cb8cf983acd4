"""Console rendering of analytic rows: one table (devices side by side when several) and the findings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box

from roofline.device import Device
from roofline.render.base import Renderer, device_header, to_text
from roofline.render.escape import console_text as escape
from roofline.report.rows import Row, Serving
from roofline.units import format_bytes, format_count, format_intensity, format_rate, format_time

BOUND_STYLE = {"compute": "bold green", "memory": "bold yellow", "launch": "bold magenta"}


def _bound(text: str) -> str:
    return f"[{BOUND_STYLE.get(text, '')}]{text}[/]"


def split_labels(rows: Sequence[Row]) -> tuple[str, dict[int, str]]:
    """Common part of the rows' labels (shown once) and each row's varying part (shown in its cell).

    Linear in the rows: which parameters vary within a kind, and which tokens every row shares, are found once
    (a row's parameter is shown when some row of its kind has another value for it)."""
    by_kind: dict[str, list[Row]] = {}
    for row in rows:
        by_kind.setdefault(row.kind, []).append(row)
    varies: set[tuple[str, str]] = set()
    for kind, kin in by_kind.items():
        for key in dict.fromkeys(k for row in kin for k in row.params):
            first = kin[0].params.get(key)
            if any(row.params.get(key) != first for row in kin):
                varies.add((kind, key))

    def tokens(row: Row) -> list[str]:
        items = row.label.split()
        named = {item.split("=", 1)[0] for item in items} | set(items)
        extra = [
            f"{k}={v}"
            for k, v in row.params.items()
            if k not in named
            and str(v) not in named
            and isinstance(v, (str, int, float))
            and not isinstance(v, bool)
            and (row.kind, k) in varies
        ]
        return [row.kind, *items, *extra]

    per_row = [tokens(row) for row in rows]
    shared = set(per_row[0]).intersection(*per_row[1:]) if per_row else set()
    common = [t for t in per_row[0] if t in shared] if per_row else []
    labels = {i: " ".join(t for t in toks if t not in shared) or toks[0] for i, toks in enumerate(per_row)}
    return " ".join(common), labels


def _header(devices: Sequence[Device], rows: Sequence[Row]) -> list[str]:
    lines: list[str] = []
    for device in devices:
        lines += device_header(device, [(r.roof, r.peak_flops_per_s, r.ridge) for r in rows if r.device == device.name])
    return lines


class AnalysisRenderer(Renderer):
    """Rows from `roofline analyze`: full metrics for one device, a comparison for several."""

    def __init__(self, devices: Sequence[Device], *, title: str = "", color: bool | None = None) -> None:
        self.devices = list(devices)
        self.title = title
        self.color = color

    def render(self, rows: Sequence[Row]) -> str:
        if len(rows) == 1:
            return to_text(*self._card(rows[0]), *self._findings(rows, single=True), color=self.color)
        return to_text(
            *_header(self.devices, rows),
            self._table(rows),
            *self._serving(rows),
            *self._findings(rows, single=False),
            color=self.color,
        )

    def _serving(self, rows: Sequence[Row]) -> list[str]:
        """One line per decode/prefill row: tokens/s, ms/token, and the batches where compute and memory bind."""
        served = [row for row in rows if row.serving is not None]
        if not served:
            return []
        _, labels = split_labels(rows)
        index = {id(row): i for i, row in enumerate(rows)}
        lines = ["\n[bold]Serving[/] (per GPU; tokens/s = tokens per step / min time)"]
        for row in served:
            sv = row.serving
            assert sv is not None
            where = f" on {row.device}" if len(self.devices) > 1 else ""
            lines.append(
                f"• {escape(labels[index[id(row)]])}{where}: {_rate(sv.tokens_per_s)} tokens/s, "
                f"{sv.time_per_token_s * 1e3:.4g} ms/token; with CUDA graphs {_rate(sv.graph_tokens_per_s)} tokens/s; "
                f"compute binds at batch {_batch(sv.compute_batch, sv.compute_batch_limit)}, "
                f"memory runs out above batch {_memory_batch(sv.memory_batch)}"
            )
        return lines

    def _card(self, row: Row) -> list[str]:
        """One workload on one device: every quantity on its own line."""
        device = self.devices[0]
        source = {"spec": "spec sheet", "measured": "measured (calibration)"}.get(row.roof_source, row.roof_source)
        terms = ", ".join(f"{name} {format_bytes(value)}" for name, value in row.byte_terms.items())
        fields = [
            ("FLOPs", format_count(row.flops)),
            ("bytes", format_bytes(row.bytes) + (f" ({terms})" if terms and len(row.byte_terms) > 1 else "")),
            ("intensity", f"{format_intensity(row.intensity)} FLOP/B"),
            (
                "ridge",
                f"{format_intensity(row.ridge)} FLOP/B ({row.roof} {format_rate(row.peak_flops_per_s)} / "
                f"DRAM {format_rate(row.bandwidth_bytes_per_s, 'B/s')})",
            ),
            ("bound", _bound(row.bound)),
            ("attainable", format_rate(row.attainable_flops_per_s)),
            (
                "min time",
                f"{format_time(row.time_s)} (compute {format_time(row.compute_time_s)}, memory "
                f"{format_time(row.memory_time_s)}, launch {format_time(row.launch_time_s)} for "
                f"{row.kernels} kernel{'s' if row.kernels != 1 else ''})",
            ),
            ("fits", " + ".join(row.top.properties) if row.top else "-"),
        ]
        if row.serving is not None:
            fields += serving_fields(row.serving, row.kind)
        lines = [
            f"[bold]{escape(row.kind + ' ' + row.label)}[/] on {escape(device.display_name)} ({device.name}), "
            f"roofs from {source}"
        ]
        lines += [f"  {name:<11} {value}" for name, value in fields]
        return lines

    def _table(self, rows: Sequence[Row]) -> Any:
        from rich.table import Table

        common, labels = split_labels(rows)
        title = " · ".join(part for part in (self.title, common) if part)
        table = Table(title=escape(title) or None, title_justify="left", header_style="bold", box=box.SIMPLE_HEAD)
        table.add_column("workload", overflow="fold")
        table.add_column("FLOPs", justify="right", no_wrap=True)
        table.add_column("bytes", justify="right", no_wrap=True)
        table.add_column("intensity\nFLOP/B", justify="right", no_wrap=True)
        names = [d.name for d in self.devices]
        shapes: dict[str, dict[str, Row]] = {}
        for index, row in enumerate(rows):
            shapes.setdefault(labels[index], {})[row.device] = row
        if len(names) == 1:
            for column in ("bound", "attainable", "min time"):  # numbers never wrap: the label does
                table.add_column(column, justify="left" if column == "bound" else "right", no_wrap=True)
            table.add_column("fits (property)", min_width=12, overflow="fold")
        else:
            for name in names:
                table.add_column(f"{name}\nmin time · bound", justify="right", no_wrap=True)
        for label, by_device in shapes.items():
            first = next(iter(by_device.values()))
            cells = [
                escape(label),
                format_count(first.flops),
                format_bytes(first.bytes),
                format_intensity(first.intensity),
            ]
            if len(names) == 1:
                top = first.top
                cells += [
                    _bound(first.bound),
                    format_rate(first.attainable_flops_per_s),
                    format_time(first.time_s),
                    " + ".join(top.properties) if top else "",
                ]
            else:
                for name in names:
                    r = by_device.get(name)
                    cells.append(f"{format_time(r.time_s)} · {_bound(r.bound)}" if r else "n/a")
            table.add_row(*cells)
        return table

    def _findings(self, rows: Sequence[Row], *, single: bool) -> list[str]:
        lines: list[str] = []
        seen: set[tuple[str, str]] = set()
        for row in rows:
            if not row.findings:
                continue
            chosen = row.findings if single else row.findings[:1]
            for finding in chosen:
                key = (finding.rule, row.device if single else "")
                if key in seen:
                    continue
                seen.add(key)
                context = [] if single else [f"{row.kind} {row.label}"]
                if len(self.devices) > 1:
                    context.append(row.device)
                where = f" [dim]({escape(', '.join(context))})[/]" if context else ""
                if not lines:
                    lines.append("\n[bold]Findings[/] (bottleneck → property: technique; roofline bound on the gain)")
                lines.append(f"• [bold]{finding.bottleneck}[/]{where} → {escape(finding.summary())}")
                lines.append(f"  [dim]evidence: {escape(finding.evidence)}[/]")
        if single and rows and rows[0].notes:
            lines.append("\n[dim]Assumptions: " + escape("; ".join(rows[0].notes)) + "[/]")
        return lines


def _batch(batch: int | None, limit: int) -> str:
    return str(batch) if batch is not None else f"none up to {limit:,}"


def _memory_batch(batch: int | None) -> str:
    if batch is None:
        return "- (no memory budget)"
    return str(batch) if batch > 0 else "0 (one request does not fit)"


def serving_fields(sv: Serving, kind: str) -> list[tuple[str, str]]:
    """The serving lines of a decode/prefill card: tokens/s, launches and CUDA graphs, communication, memory."""
    per = "token" if kind == "decode" else "prompt token"
    plural = "s" if sv.tokens_per_step != 1 else ""
    fields = [
        (
            "tokens/s",
            f"{_rate(sv.tokens_per_s)} ({sv.time_per_token_s * 1e3:.4g} ms/{per}; "
            f"{sv.tokens_per_step} token{plural} per step of {format_time(sv.time_per_token_s * sv.tokens_per_step)}); "
            "at the roofline alone "
            f"{_rate(sv.roofline_tokens_per_s)}; weights alone ({format_time(sv.weights_time_s)} to read them once) "
            f"{_rate(sv.weights_tokens_per_s)}",
        ),
        (
            "launches",
            f"{sv.launches} x {format_time(sv.launch_floor_s)} = {format_time(sv.launch_time_s)} per step; CUDA graphs "
            f"(one graph launch) save {format_time(sv.graph_saving_s)}: {format_time(sv.graph_time_s)} per step, "
            f"{_rate(sv.graph_tokens_per_s)} tokens/s",
        ),
    ]
    if sv.tp > 1:
        if sv.comm_modelled:
            comm = (
                f"{sv.all_reduces} all-reduces of {format_bytes(sv.all_reduce_bytes)}: {format_bytes(sv.link_bytes)} "
                f"sent per GPU over {sv.link}: {format_time(sv.comm_time_s)} per step"
            )
        else:
            comm = (
                f"{sv.all_reduces} all-reduces of {format_bytes(sv.all_reduce_bytes)}: communication time not "
                "modelled (the sheet gives no peer link bandwidth)"
            )
        fields.append((f"tp {sv.tp}", comm))
    if sv.memory_batch is not None:
        kv = format_bytes(sv.kv_cache_per_request_bytes) if sv.kv_cache_per_request_bytes else "none modelled"
        fields.append(
            (
                "memory",
                f"{format_bytes(sv.memory_budget_bytes)} ({sv.memory_budget_source}) = weights "
                f"{format_bytes(sv.weight_memory_bytes)} + batch x (KV cache {kv} + activations "
                f"{format_bytes(sv.activation_per_request_bytes)} per request)",
            )
        )
    fields.append(
        (
            "batch",
            f"compute binds at {_batch(sv.compute_batch, sv.compute_batch_limit)}; memory runs out above "
            f"{_memory_batch(sv.memory_batch)}",
        )
    )
    return fields


def _rate(tokens_per_s: float) -> str:
    """191.3, 1,320, 48,470: tokens/s with 4 significant digits, thousands written out."""
    return f"{tokens_per_s:,.0f}" if tokens_per_s >= 1000 else f"{tokens_per_s:.4g}"
