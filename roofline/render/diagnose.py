"""Console rendering of a diagnose report (`roofline diagnose`, `roofline report REPORT.json --format console`):
device and roofs, summary, top ops and modules, findings, verified techniques, counters. It reads the report, the
one document every output is made from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from rich import box

from roofline.errors import ReportError
from roofline.findings.counters import Counters
from roofline.findings.model import ModelFinding
from roofline.findings.rules.coverage import UNCOUNTED_SHARE
from roofline.ironlaw import LAUNCH_FACTOR, intensity
from roofline.render.analyze import BOUND_STYLE
from roofline.render.base import Renderer, device_header, to_text
from roofline.render.escape import console_text as escape
from roofline.report.memory import MODULE_HEADERS, MemoryView, memory_view, module_cells
from roofline.report.rows import Aggregates, IterationSummary, UncountedOp, sources_text
from roofline.report.verified import VerifiedView, format_gain, measured_text, report_verified
from roofline.units import format_bytes, format_count, format_intensity, format_rate, format_time

# the evidence bound classes (roofline.findings.bounds) beside the iron law's
LIMITER_STYLE = {
    **BOUND_STYLE,
    "host": "bold magenta",
    "parallelism": "bold cyan",
    "latency": "bold blue",
    "layout": "bold red",
}


def _bound(text: str) -> str:
    style = LIMITER_STYLE.get(text, "")
    return f"[{style}]{text}[/]" if style else text


def _percent(value: float | None) -> str:
    if value is None:
        return "-"
    percent = 100 * value
    if percent == 0:
        return "0%"
    return f"{percent:.1f}%" if percent < 10 else f"{percent:.0f}%"


def _rate(value: float | None) -> str:
    """A rate without its unit (the column header has it): '13.62 G'."""
    return "-" if value is None else format_rate(value, "").strip()


def _intensity(value: float | None) -> str:
    return "-" if value is None else format_intensity(value)


def _shapes(shapes: Sequence[Sequence[int]], limit: int = 3) -> str:
    parts = ["x".join(str(d) for d in s) if s else "()" for s in shapes[:limit]]
    return ", ".join(parts) + (", ..." if len(shapes) > limit else "")


def _op(name: str) -> str:
    return name.removeprefix("aten::")


@dataclass(frozen=True)
class _Device:
    """What the header shows of the report's device (roofline.report.schema.DeviceInfo)."""

    name: str
    display_name: str
    roof_source: str
    dram_bandwidth: float
    launch_floor_s: float


@dataclass(frozen=True)
class DiagnoseView:
    """A diagnose report (roofline.report.schema.Report, source 'diagnose') as the console view reads it: its
    sections typed. Nothing here is computed again: every value is the report's."""

    about: dict[str, Any]  # the report's 'diagnose' section: model, convention, the options as run, notes
    device: _Device
    roofs: list[tuple[str, float, float]]  # (label, peak FLOP/s, ridge FLOP/B) of the rows
    summary: IterationSummary
    aggregates: Aggregates
    findings: list[ModelFinding]
    combined: dict[str, Any] | None
    verified: tuple[VerifiedView, ...] | None
    uncounted: list[UncountedOp]
    counters: Counters | None

    @classmethod
    def of(cls, report: Any) -> DiagnoseView:
        info = report.devices[0]
        device = _Device(
            info.name, info.display_name, info.roof_source, info.dram_bandwidth_bytes_per_s, info.launch_floor_s
        )
        roofs = [
            (row["roof"], row["peak_flops_per_s"], row.get("ridge") or 0.0)
            for row in report.rows
            if row.get("roof") and row.get("peak_flops_per_s") is not None
        ]
        extra = report.model_extra or {}
        counters = extra.get("counters")
        try:
            return cls(
                about=dict(extra.get("diagnose") or {}),
                device=device,
                roofs=roofs,
                summary=IterationSummary.model_validate(extra.get("summary")),
                aggregates=Aggregates.model_validate(extra.get("aggregates") or {}),
                findings=[_finding(f) for f in extra.get("findings") or ()],
                combined=extra.get("combined"),
                verified=report_verified(report),
                uncounted=[UncountedOp.model_validate(u) for u in extra.get("uncounted") or ()],
                counters=None if counters is None else Counters.model_validate(counters),
            )
        except ValidationError as exc:
            from roofline.yamlio import describe_validation_error

            raise ReportError(f"not a complete diagnose report: {describe_validation_error(exc)}") from None


def has_console_view(report: Any) -> bool:
    """Whether ``report`` is a diagnose report with the sections the console view shows (its summary)."""
    extra = report.model_extra or {}
    return report.source == "diagnose" and bool(report.devices) and isinstance(extra.get("summary"), dict)


def _finding(stored: dict[str, Any]) -> ModelFinding:
    """A stored finding (its fields, and the gain and saving the report adds) as the finding it was."""
    return ModelFinding.model_validate({k: v for k, v in stored.items() if k in ModelFinding.model_fields})


class DiagnoseRenderer(Renderer):
    """A diagnose report (roofline.report.schema.Report) for the console: the live run's view and `roofline
    report REPORT.json`'s are one, read from the document."""

    def __init__(self, *, top: int = 10, color: bool | None = None) -> None:
        self.top = top
        self.color = color

    def render(self, report: Any) -> str:
        d = DiagnoseView.of(report)
        parts: list[Any] = [*self._header(d), *self._summary(d.summary)]
        parts += self._memory(memory_view(report, self.top))
        if d.aggregates.ops:
            parts.append(self._ops_table(d.aggregates.ops[: self.top], d.summary))
        if d.aggregates.modules:
            parts.append(self._modules_table(d.aggregates.modules[: self.top]))
        parts += self._findings(d.findings, d.summary)
        parts += self._combined(d.combined)
        if d.verified is not None:
            parts += self._verified(d.verified)
        parts += self._footer(d)
        text = to_text(*parts, color=self.color)
        if d.counters is not None:  # --counters: Nsight Compute's measured bytes, and the locality findings
            from roofline.findings.rules.counters import RULE
            from roofline.render.counters import CountersRenderer

            local = [f for f in d.findings if f.rule == RULE]
            text += CountersRenderer(top=self.top, color=self.color).render(d.counters, local)
        return text

    # ---------------------------------------------------------------------------------------- parts

    def _header(self, d: DiagnoseView) -> list[str]:
        o = d.about
        convention = f" ({o['convention']})" if o.get("convention") else ""
        dtype = o.get("dtype") or "dtype as written"
        args = f" · args: {' '.join(o['argv'])}" if o.get("argv") else ""
        run = (
            f"{o.get('mode', 'inference')} · {dtype} · {o.get('iters')} profiled iterations after "
            f"{o.get('warmup')} warm-up{args}"
        )
        hf = o.get("hf")
        if isinstance(hf, dict) and hf.get("step"):  # diagnose --hf: a Hugging Face model built from its config
            cached = " in the KV cache" if hf["step"] == "decode" else ""
            size = f"batch {hf.get('batch')} · seq {hf.get('seq')}{cached}"
            run = f"{hf['step']} · {size} · random weights · {dtype} · {o.get('iters')} profiled iterations after "
            run += f"{o.get('warmup')} warm-up"
        if o.get("trace"):  # roofline diagnose --trace: one step of a recorded trace
            step = f"step {o['step']}, the median of {o.get('steps')}" if o.get("step") else "the whole trace"
            run = f"a torch.profiler trace · {o.get('mode', 'inference')} · {step}"
        return [
            f"[bold]{escape(str(o.get('model', '')))}[/]{escape(convention)} · {escape(run)}",
            *device_header(d.device, d.roofs),
        ]

    def _summary(self, s: IterationSummary) -> list[str]:
        kind = "device" if s.device_kind == "cuda" else "CPU"
        if s.wall_s > 0 and s.op_time_s <= s.wall_s:
            ops = f"op {kind} time {format_time(s.op_time_s)}, {_percent(s.op_time_s / s.wall_s)} of it"
        else:  # per-op CPU times are taken under the profiler, the wall time without it
            ops = f"op {kind} time {format_time(s.op_time_s)} under the profiler"
        fields = [
            ("wall time", f"{format_time(s.wall_s)} per iteration ({ops})"),
            (
                "work",
                f"{format_count(s.flops)}, {format_bytes(s.bytes)} compulsory "
                f"(intensity {_intensity(intensity(s.flops, s.bytes) if s.bytes else None)} FLOP/B); roofline time "
                f"{format_time(s.roof_time_s)}",
            ),
            (
                "achieved",
                f"{format_rate(s.achieved_flops_per_s)} = MFU {_percent(s.mfu)} of {s.mfu_roof} "
                f"{format_rate(s.peak_flops_per_s)}; {format_rate(s.achieved_bytes_per_s, 'B/s')} = MBU "
                f"{_percent(s.mbu)} of DRAM",
            ),
        ]
        if s.device_kind == "cuda":
            fields.append(
                (
                    "GPU",
                    f"{s.kernel_count:,} kernels per iteration, busy {format_time(s.gpu_busy_s)}, idle "
                    f"{_percent(s.gpu_idle_share)} of the span",
                )
            )
        elif s.op_time_s <= s.wall_s:
            fields.append(("host", f"{_percent(s.host_overhead_share)} of the wall time outside the ops"))
        uncounted = ""
        if s.uncounted_ops:
            uncounted = f"; {s.uncounted_ops} uncounted ({format_time(s.uncounted_time_s)}, not in the totals)"
        fields.append(("ops", f"{s.ops:,} counted ({s.work_ops:,} doing work, {s.timed_ops:,} timed){uncounted}"))
        lines = ["", "[bold]Summary[/]"]
        lines += [f"  {name:<10} {escape(value)}" for name, value in fields]
        return lines

    @staticmethod
    def _memory(memory: MemoryView | None) -> list[Any]:
        """Parameters and memory (the report's memory block): its lines, then the modules with most parameters."""
        if memory is None:
            return []
        from rich.table import Table

        text = "; ".join(f"{name} {value}" for name, value in memory.items)
        lines: list[Any] = [f"  {'memory':<10} {escape(text)}"]
        lines += [f"  [dim]{escape(note)}[/]" for note in memory.notes]
        if len(memory.modules) < 2:  # the model alone: the line says it
            return lines
        more = f"; {memory.more_modules} more in the report" if memory.more_modules else ""
        table = Table(
            title=f"\nModules by parameters (own: the module's itself{more})",
            title_justify="left",
            header_style="bold",
            box=box.SIMPLE_HEAD,
        )
        for i, header in enumerate(MODULE_HEADERS):
            table.add_column(header, justify="right" if i >= 2 else "left", overflow="fold")
        for m in memory.modules:
            table.add_row(*(escape(c) for c in module_cells(m)))
        return [*lines, table]

    def _columns(self, table: Any) -> None:
        for header in ("time", "share", "intensity\nFLOP/B", "achieved\nFLOP/s", "attainable\nFLOP/s", "eff."):
            table.add_column(header, justify="right", no_wrap=True)
        table.add_column("bound", no_wrap=True)

    def _cells(self, a: Any) -> list[str]:
        return [
            format_time(a.time_s),
            _percent(a.time_share),
            _intensity(a.intensity),
            _rate(a.achieved_flops_per_s),
            _rate(a.attainable_flops_per_s),
            _percent(a.efficiency),
            _bound(a.limiter or a.bound),
        ]

    def _ops_table(self, rows: Sequence[Any], summary: Any) -> Any:
        from rich.table import Table

        table = Table(
            title=f"\nTop ops by time (of {format_time(summary.op_time_s)} op time)",
            title_justify="left",
            header_style="bold",
            box=box.SIMPLE_HEAD,
        )
        table.add_column("op [input shapes]", overflow="fold", min_width=16)
        table.add_column("module", overflow="fold", min_width=8)
        table.add_column("calls", justify="right", no_wrap=True)
        self._columns(table)
        for a in rows:
            backward = " (backward)" if "(backward)" in a.key else ""
            at = sources_text(a.sources, limit=1)
            table.add_row(
                escape(f"{_op(a.op)} [{_shapes(a.input_shapes)}]{backward}"),
                escape((a.module or "(model)") + (f" at {at}" if at else "")),
                str(a.count),
                *self._cells(a),
            )
        return table

    def _modules_table(self, rows: Sequence[Any]) -> Any:
        from rich.table import Table

        table = Table(
            title="\nTop modules by time (the ops each module issued itself)",
            title_justify="left",
            header_style="bold",
            box=box.SIMPLE_HEAD,
        )
        table.add_column("module", overflow="fold", min_width=12)
        table.add_column("type", overflow="fold")
        table.add_column("ops", justify="right", no_wrap=True)
        self._columns(table)
        for a in rows:
            table.add_row(escape(a.key), escape(a.module_type), str(a.count), *self._cells(a))
        return table

    def _findings(self, findings: Sequence[ModelFinding], summary: Any = None) -> list[str]:
        if not findings:
            iteration = summary.iteration_s if summary is not None else 0.0
            uncounted = summary.uncounted_time_s / iteration if iteration > 0 else 0.0
            if uncounted >= UNCOUNTED_SHARE:  # NB: not spread thin: the time is where no cost formula reaches
                return [
                    f"\n[bold]Findings[/]: no rule fired, but {_percent(uncounted)} of the time is in ops with no "
                    "cost (each under 5%; listed below): register their costs (roofline.register_cost, "
                    "docs/op-costs.md) for the roofline to judge them"
                ]
            return [
                "\n[bold]Findings[/]: no group of identical ops takes 5% of the iteration and no rule fired: the "
                "time is spread thin (the tables above show the largest)"
            ]
        lines = [
            "\n[bold]Findings[/] (bottleneck → property: technique; roofline bound on the gain), largest saving first"
        ]
        for number, f in enumerate(findings[: self.top], 1):
            where = f" [dim]({escape(f.where)}, {_percent(f.share)} of the time)[/]" if f.where else ""
            lines.append(f"{number}. [bold]{f.bottleneck}[/]{where} → {escape(f.summary())}")
            lines.append(f"   [dim]evidence: {escape(f.evidence)}[/]")
        if len(findings) > self.top:
            lines.append(f"   [dim]... {len(findings) - self.top} more in the report (--top N shows more)[/]")
        return lines

    @staticmethod
    def _combined(combined: dict[str, Any] | None) -> list[str]:
        """The findings' bound together, each op counted once (the report's stored 'combined')."""
        if not combined or not combined.get("gain"):
            return []
        left_out = combined.get("overlapping", 0)
        overlap = f"; {left_out} finding(s) on the same ops not added again" if left_out else ""
        return [
            f"Together, each op counted once: at most {combined['gain']:.3g}x per iteration "
            f"({format_time(combined['time_s'])} -> {format_time(combined['best_time_s'])}), "
            f"from {len(combined['rules'])} finding(s){overlap}"
        ]

    @staticmethod
    def _verified(verified: Sequence[VerifiedView]) -> list[Any]:
        """--verify: each finding's technique, the roofline's bound, the measured gain, whether outputs match."""
        from rich.table import Table

        if not verified:
            return ["\n[bold]Verified[/]: no findings to verify"]
        table = Table(
            title="\nVerified (the finding's technique applied to a copy of the model and timed against eager)",
            title_justify="left",
            header_style="bold",
            box=box.SIMPLE_HEAD,
        )
        for name, justify in (("finding", "left"), ("technique", "left"), ("bound", "right"), ("measured", "right")):
            table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
        table.add_column("outputs match", no_wrap=True)
        table.add_column("compile", justify="right", no_wrap=True)
        table.add_column("note", overflow="fold")
        for v in verified:
            match = "-" if v.outputs_match is None else ("yes" if v.outputs_match else "[bold red]NO[/]")
            table.add_row(
                escape(v.label),
                escape(v.technique or "-"),
                format_gain(v.bound_gain),
                measured_text(v),
                match,
                "-" if v.compile_s is None else format_time(v.compile_s),
                escape(v.note),
            )
        return [table]

    def _footer(self, d: DiagnoseView) -> list[str]:
        lines: list[str] = []
        uncounted = d.uncounted
        if uncounted:
            lines.append("\n[bold]Uncounted ops[/] (no cost formula: their FLOPs and bytes are not in the totals)")
            for u in uncounted[: self.top]:
                note = f": {u.note}" if u.note else ""
                lines.append(
                    f"  • {escape(_op(u.op))} x{u.count} ({format_time(u.time_s)}) in "
                    f"{escape(', '.join(u.modules))}{escape(note)}"
                )
            if len(uncounted) > self.top:
                lines.append(f"  [dim]... {len(uncounted) - self.top} more in the report[/]")
        lines.append(
            "[dim]\ntime = measured "
            + ("device (kernel)" if d.summary.device_kind == "cuda" else "self CPU")
            + " time per iteration; intensity = counted FLOPs / compulsory bytes; attainable = FLOPs / roofline time "
            f"(min(roof, intensity x DRAM) for one op); eff. = roofline time / measured time; bound = what limits it, "
            f"from the evidence: compute/memory = achieved near that roof, launch/host = within {LAUNCH_FACTOR:g}x "
            "the launch floor, parallelism = the GPU not filled (grid, waves, occupancy), latency = neither roof "
            "near with the GPU filled, layout = time in layout-conversion kernels (docs/diagnose.md)[/]"
        )
        notes = d.about.get("notes") or []
        if notes:
            lines.append("[dim]Notes: " + escape("; ".join(notes)) + "[/]")
        return lines


def _seconds(value: float) -> str:
    if value >= 10:
        return f"{value:.0f}"
    return f"{value:.1f}" if value >= 0.1 else f"{value:.2f}"


def _other(stages: dict[str, float], total_s: float) -> float:
    return max(total_s - sum(stages.values()), 0.0) if total_s > 0 else 0.0


def stages_line(stages: dict[str, float], total_s: float) -> str:
    """diagnose's own time in one line: 'diagnose took 6.1 s: floor 2.3 s (python+torch 1.4, CUDA init 0.9),
    load 0.2, count 0.8, ...' (``stages``: name -> seconds, roofline.report.records.STAGES; ``total_s``: the
    whole command, process start included where known; what no stage holds is 'other')."""
    from roofline.report.records import FLOOR_STAGES, STAGES, floor_seconds

    floor = floor_seconds(stages)
    python_torch = stages.get("python", 0.0) + stages.get("torch_import", 0.0)
    inner = [f"{'python+torch' if 'python' in stages else 'torch'} {_seconds(python_torch)}"]
    if stages.get("cuda_init", 0.0) >= 0.005:
        inner.append(f"CUDA init {_seconds(stages['cuda_init'])}")
    parts = [f"floor {_seconds(floor)} s ({', '.join(inner)})"]
    parts += [
        f"{STAGES.get(name, name)} {_seconds(value)}" for name, value in stages.items() if name not in FLOOR_STAGES
    ]
    other = _other(stages, total_s)
    if other >= 0.01:
        parts.append(f"other {_seconds(other)}")
    took = max(total_s, sum(stages.values()))
    return f"diagnose took {_seconds(took)} s: {', '.join(parts)}"


def stage_lines(stages: dict[str, float], total_s: float) -> list[str]:
    """--verbose: one line per stage (seconds and share of the whole), the fixed floor marked."""
    from roofline.report.records import FLOOR_STAGES, STAGES

    took = max(total_s, sum(stages.values())) or 1.0
    rows = [*stages.items(), *([("other", _other(stages, total_s))] if total_s > 0 else [])]
    lines = ["diagnose's own time, by stage:"]
    for name, value in rows:
        mark = "  (floor)" if name in FLOOR_STAGES else ""
        lines.append(f"  {STAGES.get(name, name):<13} {value:8.3f} s {100 * value / took:5.1f}%{mark}")
    return lines


__all__ = ["DiagnoseRenderer", "DiagnoseView", "has_console_view", "stage_lines", "stages_line"]
