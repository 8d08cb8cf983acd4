"""Report rows -> points: exact intensity, throughput, efficiency, shares, flags and labels, per report source."""

from __future__ import annotations

import pytest

from roofline.report.points import (
    ABOVE_ROOF,
    NO_FLOPS,
    PREDICTED,
    UNCOUNTED,
    UNTIMED,
    report_document,
    report_findings,
    report_points,
    summarize,
)
from roofline.report.schema import DeviceInfo, Report

# A round device: bf16 tensor 1000 TFLOP/s, fp32 vector 50 TFLOP/s, DRAM 2 TB/s (ridges 500 and 25 FLOP/B).
GPU = DeviceInfo(
    name="h100-sxm",
    display_name="Test H100",
    roof_source="spec",
    dram_bandwidth_bytes_per_s=2e12,
    launch_floor_s=4e-6,
    compute_flops_per_s={"bf16 tensor": 1e15, "fp32 vector": 5e13},
)


def bench_row(label: str, flops: float, nbytes: float, median_s: float, **extra) -> dict:
    return {
        "kind": "gemm",
        "label": label,
        "params": {"m": 1},
        "device": "h100-sxm",
        "roof": "bf16 tensor",
        "flops": flops,
        "bytes": nbytes,
        "kernels": 1,
        "median_s": median_s,
        "time_s": 1e-9,  # the analytic prediction: never the point's time in a bench report
        "bound": "compute",
        **extra,
    }


def test_bench_points_are_exact():
    rows = [
        bench_row("m=4096 n=4096 k=4096", 1e12, 1e9, 2e-3),  # I = 1000, 500 TFLOP/s on a 1000 roof
        bench_row("m=8 n=4096 k=4096", 1e9, 1e9, 1e-3, bound="memory"),  # I = 1, 1 TFLOP/s vs 2 attainable
    ]
    report = Report(source="bench", devices=[GPU], rows=rows)
    big, small = report_points(report, "b")
    assert (big.intensity, big.throughput, big.attainable, big.efficiency) == (1000.0, 5e14, 1e15, 0.5)
    assert big.time_s == 2e-3 and big.share == pytest.approx(2 / 3)
    assert (small.intensity, small.throughput, small.attainable, small.efficiency) == (1.0, 1e12, 2e12, 0.5)
    assert small.share == pytest.approx(1 / 3)
    assert big.flags == () and big.plottable and big.report == "b" and big.device == "h100-sxm"
    assert big.short_label == "gemm m=4096" and small.short_label == "gemm m=8"  # n, k shared: dropped
    assert big.label == "gemm m=4096 n=4096 k=4096"


def test_above_the_roof_is_flagged_and_efficiency_exceeds_one():
    report = Report(source="bench", devices=[GPU], rows=[bench_row("fast", 1e12, 1e9, 5e-4)])  # 2 PFLOP/s
    (p,) = report_points(report)
    assert p.efficiency == 2.0 and p.flags == (ABOVE_ROOF,) and p.above_roof and p.plottable


def test_analytic_points_are_predictions_from_the_predicted_time():
    row = {**bench_row("m=1", 2e9, 1e9, 0.0), "time_s": 2e-3}
    del row["median_s"]
    (p,) = report_points(Report(source="analytic", devices=[GPU], rows=[row]))
    assert p.time_s == 2e-3 and p.throughput == 1e12 and p.attainable == 4e12 and p.efficiency == 0.25
    assert p.flags == (PREDICTED,)


def diag_row(index: int, op: str, module: str, flops, nbytes, time_s: float, **extra) -> dict:
    return {
        "index": index,
        "op": op,
        "module": module,
        "phase": "forward",
        "input_shapes": [[8, 32], [32, 32]],
        "flops": flops,
        "bytes": nbytes,
        "roof": "fp32 vector",
        "timed": time_s > 0,
        "time_s": time_s,
        "kernels": 0,
        "bound": "launch",
        **extra,
    }


def test_diagnose_groups_calls_across_modules_and_flags_what_cannot_be_drawn():
    rows = [
        diag_row(0, "aten::addmm", "blocks.0", 1000, 100, 1e-5),
        diag_row(1, "aten::addmm", "blocks.1", 1000, 100, 3e-5, bound="memory"),
        diag_row(2, "aten::view", "", 0, 0, 2e-6),
        diag_row(3, "aten::weird", "", None, None, 4e-6),
        diag_row(4, "aten::addmm", "blocks.2", 1000, 100, 0.0),  # untimed: its own point
    ]
    report = Report(source="diagnose", devices=[GPU], rows=rows)
    addmm, view, weird, untimed = report_points(report)
    assert (addmm.flops, addmm.bytes, addmm.time_s, addmm.calls) == (2000, 200, 4e-5, 2)
    assert addmm.throughput == pytest.approx(2000 / 4e-5) and addmm.intensity == 10.0
    assert addmm.bound == "memory"  # the bound holding most of the time (3e-5 of 4e-5)
    assert addmm.launches == 2 and addmm.share == pytest.approx(4e-5 / 4.6e-5)
    assert addmm.short_label == "addmm [8x32, 32x32] x2"
    assert addmm.label == "addmm [8x32, 32x32] x2 @ blocks.0, blocks.1"
    assert view.flags == (NO_FLOPS,) and weird.flags == (UNCOUNTED,) and UNTIMED in untimed.flags
    assert [p.plottable for p in (addmm, view, weird, untimed)] == [True, False, False, False]
    per_call = report_points(report, per_call=True)
    assert len(per_call) == 5 and per_call[1].short_label == "addmm [8x32, 32x32] @ blocks.1"
    summary = summarize(report_points(report))
    assert (summary.points, summary.plotted, summary.above_roof) == (4, 1, 0)
    assert summary.skipped == {NO_FLOPS: 1, UNCOUNTED: 1, UNTIMED: 1}
    assert summary.skipped_time_s == pytest.approx(6e-6)


def test_attention_labels_drop_the_settings_every_row_shares():
    rows = [
        {**bench_row(f"batch=1 heads=32 seq_q={s} head_dim=128 causal {impl}", 1e9, 1e8, 1e-4), "kind": "attention"}
        for s in (1024, 2048)
        for impl in ("naive", "fused")
    ]
    rows.append({**bench_row("gelu numel=16777216", 1e6, 1e6, 1e-4), "kind": "elementwise"})
    labels = [p.short_label for p in report_points(Report(source="bench", devices=[GPU], rows=rows))]
    assert labels == [
        "attention seq_q=1024 naive",
        "attention seq_q=1024 fused",
        "attention seq_q=2048 naive",
        "attention seq_q=2048 fused",
        "gelu numel=16777216",  # the label names itself: no 'elementwise' prefix
    ]


def test_findings_largest_saving_first_and_document_orders_points_by_time():
    rows = [
        bench_row("a", 1e9, 1e9, 1e-3, findings=[{"bottleneck": "memory", "time_s": 1.0, "best_time_s": 0.9}]),
        bench_row("b", 1e9, 1e9, 3e-3, findings=[{"bottleneck": "compute", "time_s": 1.0, "best_time_s": 0.25}]),
    ]
    report = Report(source="bench", devices=[GPU], rows=rows)
    first, second = report_findings(report)
    assert (first.where, first.gain, first.saving_s) == ("gemm b", 4.0, 0.75)
    assert second.where == "gemm a" and second.gain == pytest.approx(1 / 0.9)
    doc = report_document(report, "r", notes=["n"])
    assert [p.label for p in doc.points] == ["gemm b", "gemm a"] and doc.notes == ("n",)
