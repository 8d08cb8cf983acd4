"""One definition of every number: a report rendered by every renderer (console, JSON, CSV, Parquet, HTML,
Markdown, chart data, gate) shows the same attainable rate, efficiency and bound for every row.

A bench report (a multi-roof fused attention, a three-kernel naive attention, a launch-bound tiny op, a row above
its roof) and a diagnose report (hand-built op records and timings; a call site of two calls of different bounds,
a launch-bound op, a view, an untimed op) are built with the library's own writers, written, read back and
rendered; numbers are parsed back out of the text, allowing only the display's rounding. No torch, no timing.
"""

from __future__ import annotations

import io
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from diagnose_devices import GPU, rec

from roofline import ironlaw
from roofline.analysis import analyze_one
from roofline.bench.items import expand_items
from roofline.bench.run import bench_row
from roofline.device import Device
from roofline.diagnose.pipeline import DiagnoseResult
from roofline.diagnose.place import place
from roofline.gate import check
from roofline.measure.engine import Measurement
from roofline.render.analyze import AnalysisRenderer
from roofline.render.bench import BenchRenderer
from roofline.render.diagnose import DiagnoseRenderer
from roofline.render.gate import GateRenderer
from roofline.render.report_html import HtmlReportRenderer
from roofline.render.report_markdown import MarkdownReportRenderer
from roofline.report.baseline import from_report
from roofline.report.chart import NamedReport, build_chart
from roofline.report.export import to_csv, to_parquet
from roofline.report.points import report_document, report_points
from roofline.report.records import OpTiming, Timing
from roofline.report.rows import BenchRow, OpPoint, Row
from roofline.report.schema import VERSION, new_report, read_report, write_report
from roofline.roofs import device_from_sheet
from roofline.specs.loader import load_registry

ROOT = Path(__file__).resolve().parents[1]
V1_ANALYZE = ROOT / "tests" / "golden" / "report-v1" / "analyze-decode.json"  # written by roofline 0.1.0, version 1
V1_BENCH = ROOT / "benchmarks" / "results" / "bench-gpu-h100.json"  # version 1
V1_DIAGNOSE = ROOT / "benchmarks" / "results" / "diagnose-gpt12-h100.json"  # version 1
PREFIX = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # no cell wraps: one table row per line


# ------------------------------------------------------------------------------------------------ parsing


def number(text: str) -> tuple[float, float] | None:
    """'655.6 TFLOP/s' -> (6.556e14, 5e10): the value and half a unit of its last shown digit; '-' -> None."""
    text = text.strip()
    if text in ("-", ""):
        return None
    match = re.fullmatch(r"([\d,]+(?:\.(\d+))?)\s*([kMGTPE]?)(?:FLOP/s|B/s|OP/s)?", text)
    assert match, f"not a rate: {text!r}"
    scale = PREFIX[match.group(3)]
    decimals = len(match.group(2) or "")
    return float(match.group(1).replace(",", "")) * scale, 0.5 * 10**-decimals * scale


def percent(text: str) -> tuple[float, float] | None:
    """'79.9%' -> (0.799, 0.0005); '-' -> None."""
    text = text.strip()
    if text in ("-", ""):
        return None
    match = re.fullmatch(r"(\d+(?:\.(\d+))?)%", text)
    assert match, f"not a percentage: {text!r}"
    return float(match.group(1)) / 100, 0.5 * 10 ** -len(match.group(2) or "") / 100


def shown(stored: float | None, parsed: tuple[float, float] | None, what: str) -> None:
    """The text shows the stored value, to its rounding."""
    if stored is None:
        assert parsed is None, f"{what}: shows {parsed}, stores nothing"
        return
    assert parsed is not None, f"{what}: stores {stored}, shows nothing"
    value, half_unit = parsed
    assert abs(value - stored) <= half_unit * 1.0001 + 1e-12 * abs(stored), f"{what}: shows {value}, stores {stored}"


def same(stored: float | None, got: Any, what: str) -> None:
    """A number carried exactly (JSON, Parquet) or as CSV text."""
    if stored is None:
        assert got is None or got == "" or (isinstance(got, float) and math.isnan(got)) or got is pd.NA, what
    else:
        assert float(got) == pytest.approx(stored, rel=1e-12), what


def table_rows(text: str, first_cell: str | None = None) -> list[list[str]]:
    """The cells of the rows of the first console table of ``text`` (rich, SIMPLE_HEAD box): the lines after the
    header rule, up to the first blank line, split on runs of 2+ spaces (cells hold single spaces only)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() and set(line.strip()) <= {"─", " "})
    if first_cell is not None:  # the table whose title line holds first_cell
        title = next(i for i, line in enumerate(lines) if first_cell in line)
        start = next(i for i in range(title, len(lines)) if lines[i].strip() and set(lines[i].strip()) <= {"─", " "})
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def markdown_rows(text: str) -> list[dict[str, str]]:
    """The points table of a Markdown report, one header -> cell dict per row."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split(" | ")]
    out = []
    for line in lines[2:]:
        cells = [c.strip() for c in line[2:-2].split(" | ")]
        assert len(cells) == len(header), line
        out.append(dict(zip(header, cells, strict=True)))
    return out


class _Table(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def html_rows(page: str) -> list[dict[str, str]]:
    table = page[page.index('<table class="points">') :]
    parser = _Table()
    parser.feed(table[: table.index("</table>") + len("</table>")])
    header, *rows = parser.rows
    return [dict(zip(header, row, strict=True)) for row in rows]


# ------------------------------------------------------------------------------------------------ reports


def h100() -> Device:
    return device_from_sheet(load_registry().get("h100-sxm"))


def measurement(median_s: float) -> Measurement:
    samples = [median_s * 0.99, median_s, median_s * 1.01]
    return Measurement(median_s, median_s * 0.99, median_s * 1.01, samples, "cuda-events", "cold", "spread", 3, 0.1)


# (kind, values, efficiency the fake median gives; None: a median of 1.5 launch floors)
BENCH = [
    ("gemm", {"m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"}, 0.75),
    ("attention", {"batch": 1, "heads": 32, "seq_q": 4096, "head_dim": 128, "causal": True, "impl": "fused"}, 0.8),
    ("attention", {"batch": 1, "heads": 32, "seq_q": 2048, "head_dim": 128, "causal": True, "impl": "naive"}, 0.4),
    ("elementwise", {"op": "gelu", "numel": 1024, "dtype": "bf16"}, None),  # launch-bound by the counts already
    ("elementwise", {"op": "add", "numel": 2**22, "dtype": "bf16"}, 0.96),  # memory-bound, launch-bound measured
    ("elementwise", {"op": "add", "numel": 2**26, "dtype": "bf16"}, 1.25),  # above its roof (a warm cache)
]


def bench_report(tmp_path: Path) -> tuple[list[BenchRow], Any, Device]:
    device = h100()
    rows = []
    for kind, values, efficiency in BENCH:
        (item,) = expand_items(kind, values)
        row = analyze_one(item.kind, item.values, device)
        median = row.launch_time_s * 1.5 if efficiency is None else row.roof_time_s / efficiency
        rows.append(bench_row(row, measurement(median), item, op=f"torch {kind}", cache="cold"))
    report = new_report("roofline bench one-definition -o r.json", "bench", [device], rows).model_copy(
        update={"bench": {"device_kind": "cuda", "gpu": "NVIDIA H100", "sheet": "h100-sxm", "suite": {"name": "x"}}}
    )
    path = tmp_path / "bench.json"
    write_report(report, path)
    return rows, read_report(path), device


def diagnose_result() -> DiagnoseResult:
    n = 4096
    records = [
        rec(0, "aten::mm", [(n, n), (n, n)], [(n, n)], 2 * n**3, 3 * n * n * 2, module="blocks.0"),
        rec(1, "aten::add", [(n, n), (n, n)], [(n, n)], n * n, 3 * n * n * 2, math="vector", module="blocks.0"),
        rec(2, "aten::add", [(n, n), (n, n)], [(n, n)], n * n, 3 * n * n * 2, math="vector", module="blocks.0"),
        rec(3, "aten::mul", [(1024,), (1024,)], [(1024,)], 1024, 3 * 1024 * 2, math="vector", module="blocks.1"),
        rec(4, "aten::view", [(n, n)], [(n * n,)], 0, 0, math="none", module="blocks.1"),
        rec(5, "aten::gelu", [(n, n)], [(n, n)], 8 * n * n, 2 * n * n * 2, math="vector", module="blocks.1"),
        rec(6, "aten::relu", [(n, n)], [(n, n)], n * n, 2 * n * n * 2, math="vector", module="blocks.1"),  # untimed
    ]
    ops = [
        OpTiming(0, 250e-6, 1, samples_s=(240e-6, 260e-6)),
        OpTiming(1, 6e-6, 1, samples_s=(6e-6, 6e-6)),  # launch-bound (within 2 floors)
        OpTiming(2, 120e-6, 1, samples_s=(115e-6, 125e-6)),  # memory-bound: the site's bound by time
        OpTiming(3, 5e-6, 1, samples_s=(5e-6, 5e-6)),  # launch-bound
        OpTiming(5, 25e-6, 1, samples_s=(24e-6, 26e-6)),  # above its roof (33.6 us of bytes)
    ]
    timing = Timing(device="cuda", iterations=2, wall_s=450e-6, ops=ops, kernel_count=5, gpu_busy_s=406e-6)
    placed = place(records, timing, GPU)
    options = {"entry": None, "device": "cuda", "dtype": "bf16", "mode": "inference", "warmup": 1, "iters": 2}
    return DiagnoseResult(Path("model.py"), "model", {**options, "argv": []}, GPU, records, timing, placed, [])


# ------------------------------------------------------------------------------------------------ bench


def test_bench_rows_store_the_iron_law_once(tmp_path):
    rows, report, _ = bench_report(tmp_path)
    fused, naive, tiny, short, above = rows[1:]
    assert report.version == VERSION
    for row in rows:
        assert row.attainable_flops_per_s == pytest.approx(row.flops / row.roof_time_s)
        assert row.efficiency == pytest.approx(row.roof_time_s / row.median_s)
        assert row.efficiency == pytest.approx(row.achieved_flops_per_s / row.attainable_flops_per_s)
    # fused attention: one kernel with vector softmax FLOPs: attainable below the tensor roof's curve
    assert fused.attainable_flops_per_s < ironlaw.attainable(fused.intensity, fused.peak_flops_per_s, 3.35e12)
    assert naive.kernels == 3 and naive.bound == "memory"
    assert tiny.bound == tiny.analytic_bound == "launch"
    assert short.bound == "launch" and short.analytic_bound == "memory"
    assert above.efficiency == pytest.approx(1.25)


def test_every_renderer_shows_the_bench_rows_stored_values(tmp_path):
    rows, report, device = bench_report(tmp_path)
    typed = report.typed_rows()
    assert [type(r) for r in typed] == [BenchRow] * len(rows)
    labels = [f"{r.kind} {r.label}" for r in rows]

    # JSON: the document read back holds the values the writer stored
    for row, back in zip(rows, typed, strict=True):
        for name in ("intensity", "attainable_flops_per_s", "roof_time_s", "efficiency", "bound"):
            assert getattr(back, name) == getattr(row, name), name

    # console
    text = BenchRenderer(device, timing="cuda events", color=False).render(rows)
    cells = table_rows(text)
    assert len(cells) == len(rows)
    for row, line in zip(rows, cells, strict=True):
        assert line[-1] == row.bound
        shown(row.efficiency, percent(line[-2]), f"console eff. {row.label}")
        shown(row.attainable_flops_per_s, number(line[-3]), f"console attainable {row.label}")

    # CSV and Parquet: the point columns and the row's own
    frames = {
        "csv": pd.read_csv(io.StringIO(to_csv(report, "r")), keep_default_na=False, na_values=[""]),
        "parquet": pd.read_parquet(io.BytesIO(to_parquet(report, "r"))),
    }
    for fmt, frame in frames.items():
        for row, (_, got) in zip(rows, frame.iterrows(), strict=True):
            for column in ("point.attainable_flops_per_s", "attainable_flops_per_s"):
                same(row.attainable_flops_per_s, got[column], f"{fmt} {column}")
            for column in ("point.efficiency", "efficiency"):
                same(row.efficiency, got[column], f"{fmt} {column}")
            assert got["point.bound"] == got["bound"] == row.bound

    # chart data: each mark is its row, at y = efficiency x attainable
    spec = build_chart([NamedReport("r", report)], known={})
    (panel,) = spec.panels
    assert len(panel.marks) == len(rows)
    for mark in panel.marks:
        row = rows[mark.point.index]
        assert mark.point.attainable == row.attainable_flops_per_s and mark.point.efficiency == row.efficiency
        assert mark.bound == mark.point.bound == row.bound
        assert mark.y == pytest.approx(row.efficiency * row.attainable_flops_per_s)
        assert mark.above_roof == (row.efficiency > 1)

    # Markdown and HTML
    doc = report_document(report, "r", notes=spec.notes)
    md = markdown_rows(MarkdownReportRenderer().render(doc))
    page = html_rows(HtmlReportRenderer().render(doc))
    for p, md_cells, html_cells in zip(doc.points, md, page, strict=True):
        row, label = rows[p.index], labels[p.index]
        assert md_cells["point"] == html_cells["point"] == label
        for what, cells in (("markdown", md_cells), ("html", html_cells)):
            assert cells["bound"] == row.bound, what
            shown(row.attainable_flops_per_s, number(cells["attainable (FLOP/s)"]), f"{what} attainable {label}")
            shown(row.efficiency, percent(cells["eff."]), f"{what} eff. {label}")

    # gate: its points, their checks and its console table
    result = check(report, from_report(report, commit="0" * 40))
    assert result.verdict == "pass" and len(result.points) == len(rows)
    gate_cells = table_rows(GateRenderer(color=False).render(result))
    for row, point, line in zip(rows, result.points, gate_cells, strict=True):
        assert point.current.efficiency == point.baseline.efficiency == row.efficiency
        assert point.current.bound == row.bound
        (efficiency,) = [c for c in point.checks if c.metric == "efficiency"]
        assert efficiency.current == pytest.approx(row.efficiency)
        after = line[1].split(" → ")[-1]
        shown(row.efficiency, percent(after), f"gate console {row.label}")


# ------------------------------------------------------------------------------------------------ diagnose


def test_every_renderer_shows_the_diagnose_rows_stored_values(tmp_path, monkeypatch):
    monkeypatch.setattr("roofline.specs.detect.describe_machine", lambda *a, **k: {"kind": "cuda", "name": "GPU"})
    result = diagnose_result()
    placed = result.placed
    points = placed.points
    path = tmp_path / "diag.json"
    write_report(result.report("roofline diagnose model.py"), path)
    report = read_report(path)
    assert [OpPoint.model_validate(p.model_dump()) for p in report.typed_rows()] == points  # JSON: as stored

    # the one call site of two calls, and the group rule
    (site,) = [a for a in placed.aggregates.ops if a.count == 2]
    first, second = points[1], points[2]
    assert (first.bound, second.bound, site.bound) == ("launch", "memory", "memory")
    assert site.efficiency == pytest.approx((first.roof_time_s + second.roof_time_s) / (first.time_s + second.time_s))
    assert site.attainable_flops_per_s == pytest.approx(site.flops / site.roof_time_s)
    assert points[3].bound == "launch" and points[4].bound == "none" and points[5].efficiency > 1
    assert not points[6].timed and points[6].efficiency is None

    # console: the call sites and the modules as stored (the view reads the report written)
    text = DiagnoseRenderer(top=50, color=False).render(report)
    for title, aggregates in (("Top ops by time", placed.aggregates.ops), ("Top modules", placed.aggregates.modules)):
        cells = table_rows(text, title)
        assert len(cells) == len(aggregates)
        for a, line in zip(aggregates, cells, strict=True):
            assert line[-1] == (a.limiter or a.bound), a.key  # the evidence class where the report has one
            shown(a.efficiency, percent(line[-2]), f"console eff. {a.key}")
            shown(a.attainable_flops_per_s, number(line[-3]), f"console attainable {a.key}")

    # CSV and Parquet: one row per op call
    frames = {
        "csv": pd.read_csv(io.StringIO(to_csv(report, "r")), keep_default_na=False, na_values=[""]),
        "parquet": pd.read_parquet(io.BytesIO(to_parquet(report, "r"))),
    }
    for fmt, frame in frames.items():
        assert len(frame) == len(points)
        for p, (_, got) in zip(points, frame.iterrows(), strict=True):
            for column in ("point.attainable_flops_per_s", "attainable_flops_per_s"):
                same(p.attainable_flops_per_s, got[column], f"{fmt} {column} {p.op}")
            for column in ("point.efficiency", "efficiency"):
                same(p.efficiency, got[column], f"{fmt} {column} {p.op}")
            assert got["point.bound"] == got["bound"] == p.bound

    # chart data, Markdown and HTML: one point per op and shapes (here: per call site), and per call
    sites = {a.op: a for a in placed.aggregates.ops}
    spec = build_chart([NamedReport("r", report)], known={})
    (panel,) = spec.panels
    assert {m.point.kind for m in panel.marks} == {"aten::mm", "aten::add", "aten::mul", "aten::gelu"}
    for mark in panel.marks:
        a = sites[mark.point.kind]
        assert mark.point.attainable == pytest.approx(a.attainable_flops_per_s, rel=1e-12)
        assert mark.point.efficiency == pytest.approx(a.efficiency, rel=1e-12)
        assert mark.bound == mark.point.bound == a.bound
        assert mark.y == pytest.approx(a.efficiency * a.attainable_flops_per_s)
    for per_call in (False, True):
        doc = report_document(report, "r", per_call=per_call)
        md = markdown_rows(MarkdownReportRenderer(rows=100).render(doc))
        page = html_rows(HtmlReportRenderer(rows=100).render(doc))
        assert len(md) == len(page) == len(doc.points) == (len(points) if per_call else len(points) - 1)
        for p, md_cells, html_cells in zip(doc.points, md, page, strict=True):
            assert md_cells["point"] == html_cells["point"] == p.label
            if per_call:
                stored = points[p.index]
                values = (stored.attainable_flops_per_s, stored.efficiency, stored.limiter or stored.bound)
            else:
                a = sites[p.kind]
                values = (a.attainable_flops_per_s, a.efficiency, a.limiter or a.bound)
            for what, cells in (("markdown", md_cells), ("html", html_cells)):
                assert cells["bound"] == values[2], (what, p.label)
                shown(values[0], number(cells["attainable (FLOP/s)"]), f"{what} attainable {p.label}")
                shown(values[1], percent(cells["eff."]), f"{what} eff. {p.label}")

    # gate: one point per op call
    result_gate = check(report, from_report(report, commit="0" * 40))
    assert len(result_gate.points) == len(points)
    gate_cells = table_rows(GateRenderer(color=False).render(result_gate))
    for p, point, line in zip(points, result_gate.points, gate_cells, strict=True):
        assert point.current.bound == p.bound
        assert point.current.efficiency == (p.efficiency if p.timed else None)
        after = line[1].split(" → ")[-1]
        shown(p.efficiency if p.timed else None, percent(after) if after != "-" else None, f"gate {p.op}")


# ------------------------------------------------------------------------------------------------ analytic


def test_analyze_shows_one_attainable_rate_in_the_console_csv_and_markdown(tmp_path):
    """The issue's example: decode llama-3-8b at batch 512 on an H100 (387 kernels)."""
    device = h100()
    row = analyze_one("decode", {"model": "llama-3-8b", "batch": 512}, device)
    assert row.attainable_flops_per_s == pytest.approx(852.8e12, rel=1e-4)  # not the fp16 roof's 989.4
    assert row.efficiency == pytest.approx(row.roof_time_s / row.time_s)
    card = AnalysisRenderer([device], color=False).render([row])
    (line,) = [line for line in card.splitlines() if line.strip().startswith("attainable")]
    shown(row.attainable_flops_per_s, number(line.split(maxsplit=1)[1]), "console attainable")
    path = tmp_path / "r.json"
    write_report(new_report("roofline analyze decode", "analytic", [device], [row]), path)
    report = read_report(path)
    (frame_row,) = pd.read_csv(io.StringIO(to_csv(report, "r"))).to_dict("records")
    assert frame_row["point.attainable_flops_per_s"] == pytest.approx(row.attainable_flops_per_s, rel=1e-12)
    assert frame_row["point.efficiency"] == pytest.approx(row.efficiency, rel=1e-12)
    assert frame_row["point.bound"] == frame_row["bound"] == row.bound
    (cells,) = markdown_rows(MarkdownReportRenderer().render(report_document(report, "r")))
    shown(row.attainable_flops_per_s, number(cells["attainable (FLOP/s)"]), "markdown attainable")
    shown(row.efficiency, percent(cells["eff."]), "markdown eff.")


# ------------------------------------------------------------------------------------------------ version 1


def test_version_1_reports_load_upgraded_once():
    data = json.loads(V1_ANALYZE.read_text())
    assert data["version"] == 1 and "roof_time_s" not in data["rows"][0] and "efficiency" not in data["rows"][0]
    report = read_report(V1_ANALYZE)
    assert report.version == VERSION
    rows = report.typed_rows()
    assert all(isinstance(r, Row) for r in rows)
    for stored, row in zip(data["rows"], rows, strict=True):
        assert row.roof_time_s == pytest.approx(stored["time_s"] - stored["launch_time_s"])
        assert row.efficiency == pytest.approx(row.roof_time_s / row.time_s)
        assert row.attainable_flops_per_s == stored["attainable_flops_per_s"]  # kept, not recomputed
        assert row.attainable_flops_per_s == pytest.approx(row.flops / row.roof_time_s, rel=1e-9)
    batch512 = next(p for p in report_points(report) if "batch=512" in p.label and p.device == "h100-sxm")
    assert batch512.attainable == pytest.approx(852.8e12, rel=1e-4)
    # bench and diagnose version-1 reports stored every value already: loaded as they are
    for path, model in ((V1_BENCH, BenchRow), (V1_DIAGNOSE, OpPoint)):
        raw = json.loads(path.read_text())
        loaded = read_report(path)
        assert loaded.rows == raw["rows"]
        assert all(isinstance(r, model) for r in loaded.typed_rows())
    fused = next(
        p for p in report_points(read_report(V1_BENCH)) if p.label.endswith("seq_q=4096 head_dim=128 causal fused")
    )
    assert fused.efficiency == pytest.approx(0.7987, abs=1e-4)  # the console's value, no longer 0.708 on the chart
