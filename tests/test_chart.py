"""The chart: what it shows (ChartSpec, pure) and how it is drawn (matplotlib, headless)."""

from __future__ import annotations

import io
import re
import time
from dataclasses import replace

import pytest

from roofline.device import Device
from roofline.errors import UsageError
from roofline.render.figure import Box, figure, figure_bytes, place_label
from roofline.report.chart import KnownDevice, NamedReport, build_chart
from roofline.report.schema import DeviceInfo, Report

# Spec sheet: bf16 = fp16 tensor 1000 TFLOP/s, fp32 vector 50, DRAM 2 TB/s. Measured: bf16 800, DRAM 1.6 TB/s,
# L2 (an L2-resident copy) 8 TB/s.
SPEC = Device(
    name="gpu-x",
    display_name="GPU X",
    vendor="nvidia",
    compute={("bf16", "tensor"): 1e15, ("fp16", "tensor"): 1e15, ("fp32", "vector"): 5e13},
    bandwidth={"dram": 2e12},
    launch_floor_s=4e-6,
)
MEASURED = replace(
    SPEC,
    compute={**SPEC.compute, ("bf16", "tensor"): 8e14},
    bandwidth={"dram": 1.6e12, "l2": 8e12},
    roof_source="measured",
    measured=frozenset({("bf16", "tensor")}),
)
OTHER = Device(  # a projection target without bf16: V100-like
    name="gpu-y",
    display_name="GPU Y",
    vendor="nvidia",
    compute={("fp16", "tensor"): 1e14, ("fp32", "vector"): 1e13},
    bandwidth={"dram": 1e12},
    launch_floor_s=5e-6,
)
KNOWN = {
    "gpu-x": KnownDevice("gpu-x", "GPU X", SPEC, MEASURED),
    "gpu-y": KnownDevice("gpu-y", "GPU Y", OTHER),
}


def info(roof_source: str = "measured") -> DeviceInfo:
    d = MEASURED if roof_source == "measured" else SPEC
    return DeviceInfo(
        name="gpu-x",
        display_name="GPU X",
        roof_source=roof_source,
        dram_bandwidth_bytes_per_s=d.bandwidth["dram"],
        launch_floor_s=4e-6,
        compute_flops_per_s={f"{k[0]} {k[1]}": v for k, v in d.compute.items()},
    )


def row(label: str, flops: float, nbytes: float, median_s: float, roof: str = "bf16 tensor", bound="compute"):
    return {
        "kind": "gemm",
        "label": label,
        "device": "gpu-x",
        "roof": roof,
        "flops": flops,
        "bytes": nbytes,
        "kernels": 1,
        "median_s": median_s,
        "bound": bound,
    }


def bench(rows: list[dict], roof_source: str = "measured") -> Report:
    return Report(source="bench", devices=[info(roof_source)], rows=rows)


ROWS = [
    row("big", 1e12, 1e9, 2e-3),  # I 1000, 500 TFLOP/s
    row("gemv", 1e9, 1e9, 1e-3, bound="memory"),  # I 1, 1 TFLOP/s
    row("tiny", 2e6, 1e5, 8e-6, bound="launch"),  # I 20, 250 GFLOP/s: 2 launch floors
    row("ew", 1e8, 4e8, 4e-4, roof="fp32 vector", bound="memory"),  # I 0.25, 250 GFLOP/s
]


def test_roofs_measured_beside_spec_with_ratios_l2_and_ridges():
    spec = build_chart([NamedReport("r", bench(ROWS))], known=KNOWN)
    (panel,) = spec.panels
    roofs = {(r.name, r.source): r for r in panel.roofs}
    assert set(roofs) == {
        ("bf16 tensor", "measured"),
        ("fp32 vector", "measured"),
        ("DRAM", "measured"),
        ("L2", "measured"),
        ("bf16 tensor", "spec"),
        ("fp32 vector", "spec"),
        ("DRAM", "spec"),
    }  # only the precisions the points use; no fp16 roof
    assert roofs[("bf16 tensor", "measured")].label == "bf16 tensor 800 TFLOP/s (measured, 80% of spec)"
    assert roofs[("DRAM", "measured")].label == "DRAM 1.6 TB/s (measured, 80% of spec)"
    assert roofs[("L2", "measured")].label == "L2 8 TB/s (measured)"
    assert roofs[("bf16 tensor", "spec")].label == "bf16 tensor 1 PFLOP/s (spec)"
    assert all(r.primary == (r.source == "measured") for r in panel.roofs)
    # the measured bf16 roof starts where the fastest measured memory roof (L2) meets it: 800e12 / 8e12 = 100
    assert roofs[("bf16 tensor", "measured")].start == (100.0, 8e14)
    # DRAM rises until the highest compute roof of its set: 800e12 / 1.6e12 = 500 FLOP/B
    assert roofs[("DRAM", "measured")].end == pytest.approx((500.0, 8e14))
    assert sorted((r.intensity, r.label) for r in panel.ridges) == [
        (31.25, "ridge 31.2 FLOP/B"),
        (500.0, "ridge 500.0 FLOP/B"),
    ]
    assert spec.x_range[0] < 0.25 and spec.x_range[1] > 1000 and spec.y_range[1] >= 4 * 1e15


def test_equal_roofs_share_one_label():
    rows = [row("a", 1e12, 1e9, 2e-3), row("b", 1e12, 1e9, 2e-3, roof="fp16 tensor")]
    (panel,) = build_chart([NamedReport("r", bench(rows, "spec"))], known={}).panels
    labels = [r.label for r in panel.roofs if r.kind == "compute"]
    assert labels == ["bf16/fp16 tensor 1 PFLOP/s (spec)", ""]


def test_launch_band_top_labels_and_notes():
    spec = build_chart([NamedReport("r", bench(ROWS))], known=KNOWN, top=2)
    (panel,) = spec.panels
    band = panel.band
    assert band is not None
    assert band.flops == 2e6 and band.top == pytest.approx(2e6 / 4e-6) and band.x_range == (10.0, 40.0)
    assert band.label == "launch band (4 us floor):\nkernels of ≤ 2 MFLOP stay below 500 GFLOP/s"
    assert [m.label for m in panel.marks] == ["big", "gemv", None, None]  # the top 2 by time, short labels
    assert spec.notes == ()


def test_above_the_measured_roof_is_not_a_counting_error_above_the_spec_roof_is():
    rows = [row("over-measured", 9e11, 1e9, 1e-3), row("over-spec", 1.2e12, 1e9, 1e-3)]  # 900 and 1200 TFLOP/s
    spec = build_chart([NamedReport("r", bench(rows))], known=KNOWN)
    assert [m.above_roof for m in spec.panels[0].marks] == [True, True]
    soft, hard = spec.notes
    assert soft.startswith("1 point(s) above the measured roof but under the spec roof (over-measured)")
    assert hard.startswith("1 point(s) above the spec roof (up to 150% of it: over-spec): a roof is a hard limit")
    spec_only = build_chart([NamedReport("r", bench(rows, "spec"))], known={})
    (note,) = spec_only.notes
    assert note.startswith("1 point(s) above their roof (up to 120% of it: over-spec)")


def test_skipped_points_are_counted_in_a_note():
    rows = [*ROWS, {**row("untimed", 1e9, 1e9, 0.0)}, {**row("uncounted", 1e9, 1e9, 1e-3), "flops": None}]
    spec = build_chart([NamedReport("r", bench(rows))], known=KNOWN)
    assert spec.counts == {"points": 6, "plotted": 4, "skipped": 2, "above_roof": 0}
    (note,) = spec.notes
    assert note == (
        "r: 2 of 6 point(s) not plotted: 1 not timed (no measured time); "
        "1 uncounted (no cost formula: FLOPs unknown), 23% of the time"  # 1 ms of 4.408 ms
    )


def test_projection_keeps_intensity_and_spec_efficiency():
    spec = build_chart([NamedReport("r", bench(ROWS))], known=KNOWN, projections=["gpu-y"])
    _, there = spec.panels
    assert there.projected and there.title.startswith("GPU Y (gpu-y) · projected")
    ew = next(m for m in there.marks if m.point.label == "gemm ew")
    # on its own spec roofs: 250 GFLOP/s of min(50T, 0.25 x 2 TB/s = 500 G) = 50%; there: 50% of 0.25 x 1 TB/s
    assert (ew.x, ew.y, ew.bound) == (0.25, pytest.approx(0.5 * 0.25e12), "memory")
    assert {m.point.label for m in there.marks} == {"gemm ew"}  # no bf16 roof there
    (note,) = spec.notes
    assert note.startswith("gpu-y: 3 point(s) not re-drawn: it has no roof for bf16 tensor")
    with pytest.raises(UsageError, match="--device gpu-z: no spec sheet"):
        build_chart([NamedReport("r", bench(ROWS))], known=KNOWN, projections=["gpu-z"])


def test_place_label_takes_the_first_free_spot_and_asks_for_a_leader_when_moved():
    area = Box(0, 0, 500, 500)
    assert place_label((100, 100), (50, 10), area=area, taken=[], dots=[], base_gap=5) == (
        Box(105, 95, 155, 105),  # right of the point, no leader line
        False,
    )
    blocked = [Box(0, 0, 500, 120)]  # the whole band around the point is taken
    placed = place_label((100, 100), (50, 10), area=area, taken=blocked, dots=[], base_gap=5)
    assert placed is not None
    box, leader = placed
    assert box.y0 >= 120 and leader
    assert not any(box.overlap(t) for t in blocked)
    # no spot in the area is free of labels: the label is left out, never drawn over another
    assert place_label((100, 100), (50, 10), area=area, taken=[area], dots=[], base_gap=5) is None


# ------------------------------------------------------------------------------------------------ drawing


def _label_boxes(fig) -> list:
    """Extents of the horizontal labels (a rotated roof label's axis-aligned extent is not its footprint)."""
    renderer = fig.canvas.get_renderer()
    return [
        (text.get_text(), text.get_window_extent(renderer=renderer))
        for ax in fig.axes
        for text in ax.texts
        if text.get_text() and text.get_rotation() == 0
    ]


def test_one_point_draws_with_units_and_the_png_is_1600_by_1000():
    spec = build_chart([NamedReport("one", bench([row("only", 1e12, 1e9, 2e-3)]))], known=KNOWN)
    fig = figure(spec)
    png = figure_bytes(fig, "png")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and (width, height) == (1600, 1000)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "Arithmetic intensity (FLOP/byte)" and ax.get_ylabel() == "Throughput (FLOP/s)"
    ticks = [ax.yaxis.get_major_formatter()(v, 0) for v in (1e12, 1e15)]
    assert ticks == ["1 TFLOP/s", "1 PFLOP/s"]
    legend = fig.legends[0]
    assert legend.get_bbox_to_anchor().x0 > ax.get_window_extent().x1  # outside the data area


def test_svg_holds_labels_and_roof_names_and_labels_do_not_overlap():
    spec = build_chart([NamedReport("r", bench(ROWS))], known=KNOWN)
    fig = figure(spec)
    svg = figure_bytes(fig, "svg").decode()
    texts = set(re.findall(r"<!-- (.*?) -->", svg))  # matplotlib keeps each text as a comment beside its paths
    for expected in (
        "bf16 tensor 800 TFLOP/s (measured, 80% of spec)",
        "DRAM 1.6 TB/s (measured, 80% of spec)",
        "L2 8 TB/s (measured)",
        "ridge 500.0 FLOP/B",
        "big",
        "gemv",
        "1 PFLOP/s",
    ):
        assert expected in texts, expected
    boxes = _label_boxes(fig)
    assert len(boxes) >= 8  # 4 point labels, 4 compute roof labels, 2 ridges, the launch band
    for i, (text_a, a) in enumerate(boxes):
        for text_b, b in boxes[i + 1 :]:
            assert not a.overlaps(b), (text_a, text_b)


def test_pdf_output():
    spec = build_chart([NamedReport("r", bench(ROWS))], known=KNOWN)
    assert figure_bytes(figure(spec, size_px=(800, 500)), "pdf").startswith(b"%PDF")


def test_thousands_of_points_draw_fast():
    rows = [row(f"p{i}", 1e9 * (1 + i % 97), 1e8 * (1 + i % 89), 1e-4 * (1 + i % 13)) for i in range(2000)]
    started = time.process_time()  # this process's CPU time: other load on the machine does not count
    spec = build_chart([NamedReport("many", bench(rows, "spec"))], known={})
    buffer = io.BytesIO(figure_bytes(figure(spec), "png"))
    assert time.process_time() - started < 6.0
    assert len(spec.panels[0].marks) == 2000 and sum(1 for m in spec.panels[0].marks if m.label) == 10
    assert buffer.getvalue()[:4] == b"\x89PNG"


def test_several_reports_overlay_with_a_legend_entry_each():
    first = NamedReport("before", bench(ROWS))
    second = NamedReport("after", bench([row("big", 1e12, 1e9, 1.5e-3)]))
    spec = build_chart([first, second], known=KNOWN)
    assert spec.series == ("before", "after") and len(spec.panels) == 1
    assert {m.series for m in spec.panels[0].marks} == {0, 1}
    legend = [t.get_text() for t in figure(spec).legends[0].get_texts()]
    assert "before" in legend and "after" in legend


def test_the_h100_bench_chart_has_no_overlapping_labels_inside_the_axes():
    from pathlib import Path

    from roofline.api import chart_spec

    report = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "bench-gpu-h100.json"
    calibration = report.with_name("calibration-h100.json")
    fig = figure(chart_spec(report, calibration=calibration, top=12))
    boxes = _label_boxes(fig)
    assert len(boxes) >= 12 + 4  # the labelled points, the roofs, the ridges
    area = fig.axes[0].get_window_extent()
    for i, (text_a, a) in enumerate(boxes):
        assert area.x0 <= a.x0 and a.x1 <= area.x1 and area.y0 <= a.y0 and a.y1 <= area.y1, text_a
        for text_b, b in boxes[i + 1 :]:
            assert not a.overlaps(b), (text_a, text_b)


def diag_row(index: int, op: str, flops: float, nbytes: float, time_s: float) -> dict:
    return {
        "index": index,
        "op": op,
        "module": "",
        "phase": "forward",
        "input_shapes": [[index + 1, 32]],
        "flops": flops,
        "bytes": nbytes,
        "roof": "bf16 tensor",
        "timed": True,
        "time_s": time_s,
        "kernels": 1,
        "bound": "memory",
    }


def diagnosed(l2: dict[int, float | None], roof_source: str = "measured") -> Report:
    rows = [diag_row(0, "aten::mm", 1e9, 1e8, 1e-3), diag_row(1, "aten::add", 1e6, 1e7, 1e-4)]
    ops = [{"index": i, "op": rows[i]["op"], "l2_bytes": v} for i, v in l2.items()]
    return Report(source="diagnose", devices=[info(roof_source)], rows=rows, counters={"source": "ncu", "ops": ops})


def test_counters_l2_bytes_give_l2_points_against_the_l2_roof_linked_to_their_dram_points():
    # mm: 1e9 FLOPs over 4e8 measured L2 bytes: I 2.5 (its DRAM point: 1e9 / 1e8 = 10); add has no L2 bytes
    spec = build_chart([NamedReport("d", diagnosed({0: 4e8, 1: None}))], known=KNOWN)
    (panel,) = spec.panels
    assert any(r.name == "L2" and r.primary for r in panel.roofs)
    (l2,) = panel.cache_marks
    assert (l2.level, l2.x, l2.y, l2.x_dram, l2.level_bytes) == ("L2", 2.5, 1e12, 10.0, 4e8)
    assert l2.point.kind == "aten::mm"
    assert spec.x_range[0] < 2.5
    assert not any("L2" in n for n in spec.notes)
    svg = figure_bytes(figure(spec), "svg").decode()
    assert "measured L2 bytes" in svg  # the legend says which point is which


def test_no_l2_points_without_counters_and_without_an_l2_roof_points_and_a_note():
    (panel,) = build_chart([NamedReport("d", diagnosed({}))], known=KNOWN).panels
    assert panel.cache_marks == ()
    # spec roofs: the sheet has no L2 bandwidth: no L2 roof; the L2 points drawn all the same (measured), a note
    spec = build_chart([NamedReport("d", diagnosed({0: 4e8, 1: 2e7}, roof_source="spec"))], known=KNOWN)
    (panel,) = spec.panels
    assert not any(r.name == "L2" and r.primary for r in panel.roofs)
    assert [(m.level, m.x, m.level_bytes) for m in panel.cache_marks] == [("L2", 2.5, 4e8), ("L2", 0.05, 2e7)]
    assert (
        "gpu-x: Nsight Compute measured L2 bytes for 2 op(s), but no L2 bandwidth is known for it (spec sheet or "
        "calibration): the L2 points are drawn without a L2 roof"
    ) in spec.notes


def diagnosed_l1(l1: dict[int, float], roof_source: str = "spec") -> Report:
    report = diagnosed({0: 4e8}, roof_source)
    ops = [{"index": i, "op": report.rows[i]["op"], "l1_bytes": v, "l2_bytes": 4e8 if i == 0 else None}
           for i, v in l1.items()]  # fmt: skip
    return report.model_copy(update={"counters": {"source": "ncu", "ops": ops}})


# a sheet that gives L1/shared memory a bandwidth (30 TB/s; no shipped sheet does: the figure is made up here)
SMEM_SPEC = replace(SPEC, bandwidth={"dram": 2e12, "smem": 3e13})
SMEM_MEASURED = replace(MEASURED, bandwidth={"dram": 1.6e12, "l2": 8e12, "smem": 3e13})


@pytest.mark.parametrize("roof_source", ["spec", "measured"])
def test_counters_l1_bytes_give_l1_points_against_the_shared_memory_roof(roof_source):
    # mm: 1e9 FLOPs over 2e9 measured L1 bytes: I 0.5; add: 1e6 over 1e8: I 0.01; both at their DRAM points' rates
    known = {"gpu-x": KnownDevice("gpu-x", "GPU X", SMEM_SPEC, SMEM_MEASURED)}
    spec = build_chart([NamedReport("d", diagnosed_l1({0: 2e9, 1: 1e8}, roof_source))], known=known)
    (panel,) = spec.panels
    assert any(r.name == "shared memory" for r in panel.roofs)
    l1 = [m for m in panel.cache_marks if m.level == "L1"]
    assert [(m.point.kind, m.x, m.y, m.x_dram, m.level_bytes) for m in l1] == [
        ("aten::mm", 0.5, 1e12, 10.0, 2e9),
        ("aten::add", 0.01, 1e10, 0.1, 1e8),
    ]
    assert spec.x_range[0] < 0.01
    assert not any("L1" in n for n in spec.notes)
    svg = figure_bytes(figure(spec), "svg").decode()
    assert "L1 point: FLOPs" in svg  # the legend names the L1 point
    # the L2 point beside it: against the L2 roof where the panel has one (the measured), else with a note
    assert [m.level for m in panel.cache_marks] == ["L2", "L1", "L1"]
    assert any("drawn without a L2 roof" in n for n in spec.notes) == (roof_source == "spec")


def test_l1_points_without_a_shared_memory_bandwidth_are_drawn_with_a_note():
    spec = build_chart([NamedReport("d", diagnosed_l1({0: 2e9, 1: 1e8}))], known=KNOWN)
    (panel,) = spec.panels
    assert not any(r.name == "shared memory" for r in panel.roofs)
    assert [(m.point.kind, m.x) for m in panel.cache_marks if m.level == "L1"] == [
        ("aten::mm", 0.5),
        ("aten::add", 0.01),
    ]
    assert (
        "gpu-x: Nsight Compute measured L1 bytes for 2 op(s), but no shared memory bandwidth is known for it (spec "
        "sheet: memory.smem.bandwidth_gb_per_s): the L1 points are drawn without a shared memory roof"
    ) in spec.notes
    svg = figure_bytes(figure(spec), "svg").decode()
    assert "L1 point: FLOPs" in svg
