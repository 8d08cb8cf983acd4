"""Report formats written and parsed back: Markdown, self-contained HTML, CSV and Parquet (every field)."""

from __future__ import annotations

import io
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from diagnose_devices import CPU as TEST_CPU

from roofline.render.figure import figure, figure_bytes
from roofline.render.report_html import HtmlReportRenderer, inline_svg
from roofline.render.report_markdown import MarkdownReportRenderer
from roofline.report.chart import NamedReport, build_chart
from roofline.report.export import POINT_COLUMNS, flatten, json_columns, points_frame, to_csv, to_parquet, unflatten
from roofline.report.points import report_document
from roofline.report.schema import Report, device_info, read_report

ROOT = Path(__file__).resolve().parents[1]
H100_BENCH = ROOT / "benchmarks" / "results" / "bench-gpu-h100.json"

CPU = device_info(TEST_CPU)  # the diagnose tests' CPU, as a report carries it


def diagnose_report() -> Report:
    """Two op calls of one mm (nested shapes, samples), a view (no FLOPs), an uncounted op, and the top-level
    blocks a diagnose report carries."""

    def op(index, name, module, flops, nbytes, time_s, **extra):
        return {
            "index": index,
            "op": name,
            "module": module,
            "phase": "forward",
            "input_shapes": [[16, 128], [128, 128]],
            "input_dtypes": ["fp32", ""],
            "flops": flops,
            "bytes": nbytes,
            "roof": "fp32 tensor",
            "timed": time_s > 0,
            "time_s": time_s,
            "kernels": 0,
            "samples_s": [time_s, time_s * 1.1],
            "non_contiguous": False,
            "note": "",
            "bound": "memory",
            **extra,
        }

    rows = [
        op(0, "aten::mm", "w_hh", 524288, 131072, 2e-5),
        op(1, "aten::mm", "w_hh", 524288, 131072, 3e-5, non_contiguous=True, note="x | y"),
        op(2, "aten::view", "", 0, 0, 0.0, roof="", bound="none"),
        op(3, "aten::weird", "", None, None, 1e-5, roof=""),
    ]
    return Report(
        source="diagnose",
        command="roofline diagnose model.py --device cpu",
        created_utc="2026-01-02T03:04:05+00:00",
        devices=[CPU],
        rows=rows,
        summary={"device_kind": "cpu", "wall_s": 1e-4, "op_time_s": 6e-5, "flops": 1048576, "bytes": 262144,
                 "roof_time_s": 1.3e-5, "achieved_flops_per_s": 2e10, "mfu": 0.066, "mfu_roof": "fp32 vector",
                 "achieved_bytes_per_s": 5e9, "mbu": 0.25},
        findings=[
            {"rule": "sequential-loop", "bottleneck": "launch", "properties": ["associativity"],
             "technique": "parallel scan", "evidence": "64 steps", "time_s": 6e-5, "best_time_s": 1.5e-5,
             "where": "(model)", "share": 1.0}
        ],
        uncounted=[{"op": "aten::weird", "count": 1, "time_s": 1e-5, "modules": ["(model)"],
                    "input_shapes": [[1]], "note": "no formula"}],
    )  # fmt: skip


def document(report: Report, name: str = "diag"):
    from roofline.api import known_devices

    spec = build_chart([NamedReport(name, report)], known=known_devices([d.name for d in report.devices]))
    return spec, report_document(report, name, notes=spec.notes)


# ------------------------------------------------------------------------------------------------ markdown


def test_markdown_summary_table_and_findings():
    _, doc = document(diagnose_report())
    text = MarkdownReportRenderer().render(doc)
    assert text.startswith("## roofline diagnose report: diag\n")
    assert "- **wall time**: 100 us per iteration (op CPU time 60 us)" in text
    assert "- **points**: 3 (1 on the chart: 1 memory)" in text
    header = (
        "| point | bound | intensity (FLOP/B) | achieved (FLOP/s) | attainable (FLOP/s) | eff. | time per iteration "
        "| share | flags |"
    )
    assert header in text
    # the two mm calls are one point: 1 MFLOP in 50 us = 20.97 GFLOP/s at 4 FLOP/B on a 20 GB/s DRAM roof
    assert "| mm [16x128, 128x128] x2 @ w_hh | memory | 4 | 20.97 GFLOP/s | 80 GFLOP/s | 26% | 50 us | 83% |  |" in text
    assert (
        "1. **launch** ((model), 100% of the time) → associativity: parallel scan; at most 4x (60 us -> 15 us)" in text
    )
    assert "- weird x1 (10 us): no formula" in text
    assert "### Notes" in text and "not plotted" in text
    for line in text.splitlines():  # every table row has as many cells as the header
        if line.startswith("| mm"):
            assert line.count(" | ") == header.count(" | ")


def test_markdown_of_the_h100_bench_report():
    report = read_report(H100_BENCH)
    text = MarkdownReportRenderer(rows=5).render(report_document(report, "bench"))
    assert "**NVIDIA H100 SXM5 80GB** (h100-sxm), measured roofs (roofline calibrate)" in text
    assert "### Points by time (5 of 32)" in text and "27 more in the report" in text
    first_row = next(line for line in text.splitlines() if line.startswith("| attention"))
    assert first_row.startswith("| attention batch=1 heads=32 seq_q=4096 head_dim=128 causal naive | memory | 62.7 |")
    assert "median time" in text and "### Findings" in text


# ------------------------------------------------------------------------------------------------ html


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_self_contained_with_chart_tables_and_findings():
    report = read_report(H100_BENCH)
    spec, doc = document(report, "bench-gpu-h100")
    svg = figure_bytes(figure(spec), "svg").decode()
    page = HtmlReportRenderer(chart_svg=svg).render(doc)
    parsed = _Collect()
    parsed.feed(page)
    assert parsed.tags.count("svg") == 1 and parsed.tags.count("table") == 1 and parsed.tags.count("tr") == 33
    assert "ol" in parsed.tags and "style" in parsed.tags
    # offline: no scripts, links, images, imports or URLs of any kind
    assert not {"script", "link", "img", "iframe", "object"} & set(parsed.tags)
    assert "http" not in page and "@import" not in page
    assert not re.search(r"url\((?!#)", page)  # url(#clip) points inside the SVG itself
    assert not [v for k, v in parsed.attrs if k in ("src", "href") and v and not v.startswith("#")]
    texts = set(re.findall(r"<!-- (.*?) -->", page))
    assert {"bf16 tensor 740.1 TFLOP/s (measured, 75% of spec)", "DRAM 2.972 TB/s (measured, 89% of spec)"} <= texts
    assert "attention seq_q=4096 naive" in texts  # the largest point, labelled
    body = " ".join(parsed.text)
    assert "roofline bench report: bench-gpu-h100" in body and "Points by time (32 of 32)" in body


def test_inline_svg_drops_prolog_metadata_and_size():
    svg = (
        '<?xml version="1.0"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://x/svg11.dtd">\n'
        '<svg xmlns:xlink="http://www.w3.org/1999/xlink" width="1152pt" height="720pt" viewBox="0 0 1152 720" '
        'xmlns="http://www.w3.org/2000/svg" version="1.1">\n <metadata>\n  <rdf:RDF/>\n </metadata>\n<g/></svg>\n'
    )
    assert inline_svg(svg) == '<svg viewBox="0 0 1152 720" version="1.1">\n <g/></svg>'


# ------------------------------------------------------------------------------------------------ csv, parquet


def _same(expected, got) -> bool:
    if expected is None or expected == "":  # CSV has no null: empty text and a missing value are both empty
        return got is None or got == "" or (isinstance(got, float) and math.isnan(got)) or got is pd.NA
    if isinstance(expected, bool):
        return bool(got) is expected
    if isinstance(expected, (int, float)):
        return float(got) == float(expected)
    return str(got) == str(expected)


@pytest.mark.parametrize("which", ["diagnose", "bench"])
def test_csv_round_trips_every_field(which):
    report = diagnose_report() if which == "diagnose" else read_report(H100_BENCH)
    frame = pd.read_csv(io.StringIO(to_csv(report, "r")), keep_default_na=False, na_values=[""], engine="python")
    assert list(frame.columns[: len(POINT_COLUMNS)]) == list(POINT_COLUMNS)
    assert len(frame) == len(report.rows)
    for row, (_, got) in zip(report.rows, frame.iterrows(), strict=True):
        flat = flatten(row)
        for key, value in flat.items():
            assert _same(value, got[key]), (key, value, got[key])
        back = unflatten({k: got[k] for k in flat}, json_columns(row))
        for key, value in row.items():
            if isinstance(value, list):
                assert back[key] == value, key  # lists come back from their JSON text
            if isinstance(value, dict) and value:
                assert set(back[key]) == set(value), key  # nested dicts come back from their dotted columns


def test_csv_flattens_nested_dicts_and_lists():
    report = read_report(H100_BENCH)
    frame = points_frame(report, "bench")
    first = frame.iloc[0]
    assert (first["params.m"], first["params.n"], first["params.dtype"]) == (1024, 1024, "bf16")
    assert json.loads(first["samples_s"])[0] == report.rows[0]["samples_s"][0]
    assert json.loads(first["findings"])[0]["rule"] == "launch-bound"
    assert first["point.throughput_flops_per_s"] == pytest.approx(report.rows[0]["achieved_flops_per_s"])
    assert str(frame["flops"].dtype) == "Int64"


@pytest.mark.parametrize("which", ["diagnose", "bench"])
def test_parquet_round_trips_every_field_exactly(which):
    pytest.importorskip("pyarrow")
    report = diagnose_report() if which == "diagnose" else read_report(H100_BENCH)
    frame = pd.read_parquet(io.BytesIO(to_parquet(report, "r")))
    assert len(frame) == len(report.rows)
    for row, (_, got) in zip(report.rows, frame.iterrows(), strict=True):
        for key, value in flatten(row).items():
            cell = got[key]
            if value is None:
                assert cell is None or cell is pd.NA or (isinstance(cell, float) and math.isnan(cell)), key
            else:
                assert cell == value, (key, value, cell)  # '' stays '', ints stay exact


def test_parquet_without_pyarrow_names_the_fix(monkeypatch):
    import builtins

    from roofline.report.export import MissingDependencyError

    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name == "pyarrow":
            raise ImportError("No module named 'pyarrow'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(MissingDependencyError, match=r"needs pyarrow: pip install pyarrow"):
        to_parquet(diagnose_report())
