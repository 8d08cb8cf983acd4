"""`roofline predict`: the scaling of each class on hand-built ops (exact factors), the aggregation and its range,
the baseline, the CLI's output and its one-line errors, and the committed two-GPU error table (when present)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path

import pytest

from roofline.device import Device
from roofline.predict import OpInput, predict, scale_op
from roofline.report.chart import KnownDevice
from roofline.report.schema import Report, device_info, write_report
from roofline.roofs import Ceilings, Pair

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "predict"

HERE = Device("here", "Here GPU", "nvidia", {("bf16", "tensor"): 1e15, ("fp32", "vector"): 1e14}, {"dram": 1e12}, 4e-6)
THERE = Device(
    "there", "There GPU", "nvidia", {("bf16", "tensor"): 4e15, ("fp32", "vector"): 2e14}, {"dram": 2e12}, 2e-6
)


def pair(clock_there: float = 1000.0, sms_there: int = 50) -> Pair:
    return Pair(
        Ceilings("here", "Here GPU", HERE, "spec sheet", 1000.0, 100),
        Ceilings("there", "There GPU", THERE, "spec sheet", clock_there, sms_there),
        "spec",
    )


T = 10e-6  # every op below is measured at 10 us here


def op(**kwargs) -> OpInput:
    return OpInput(time_s=T, roof="bf16 tensor", **kwargs)


# ------------------------------------------------------------------------------------------------ one op


def test_memory_op_mid_way_between_same_efficiency_and_share():
    # bytes 8 MB: 8 us here, 4 us there (rho 0.5); 2 us of the 10 are beyond the roof and follow the clock (x1)
    p = scale_op(op(flops=1e6, bytes=8e6, limiter="memory"), pair())
    assert (p.low_s, p.high_s) == pytest.approx((5e-6, 6e-6))  # same efficiency 5 us; share 4 + 2 = 6 us
    assert p.predicted_s == pytest.approx(5.5e-6)
    assert p.limiter == "memory" and not p.derived and p.factor == pytest.approx(0.55)


def test_compute_op_follows_its_compute_roof():
    # 8 GFLOP: 8 us here at 1 PFLOP/s, 2 us there at 4 (rho 0.25); the 2 us beyond follow the clock
    p = scale_op(op(flops=8e9, bytes=1e6, limiter="compute"), pair())
    assert (p.low_s, p.predicted_s, p.high_s) == pytest.approx((2.5e-6, 3.25e-6, 4e-6))


def test_compute_by_instruction_issue_follows_the_clock():
    p = scale_op(op(flops=1e9, bytes=1e5, limiter="compute"), pair(clock_there=2000.0))  # 1 us of 10 on the roof
    assert p.limiter == "issue"
    assert p.predicted_s == pytest.approx(5e-6)  # clock x0.5
    assert p.low_s == pytest.approx(T * 0.25) and p.high_s == pytest.approx(5e-6)  # same efficiency: x0.25


def test_latency_op_keeps_its_time_at_the_same_clock_and_the_range_reaches_the_roofline():
    p = scale_op(op(flops=1e6, bytes=3e6, limiter="latency"), pair())
    assert p.predicted_s == pytest.approx(T) and (p.low_s, p.high_s) == pytest.approx((5e-6, T))


def test_latency_is_capped_by_the_targets_roofline():
    slow = replace(THERE, bandwidth={"dram": 0.25e12})  # 3 MB take 12 us there
    p = scale_op(op(flops=1e6, bytes=3e6, limiter="latency"), replace(pair(), there=replace(pair().there, device=slow)))
    assert p.predicted_s == pytest.approx(12e-6)


def test_derived_latency_is_mid_way():
    p = scale_op(op(flops=1e6, bytes=3e6), pair())
    assert p.derived and p.limiter == "latency"
    assert p.predicted_s == pytest.approx(7.5e-6) and (p.low_s, p.high_s) == pytest.approx((5e-6, T))


def test_parallelism_scales_by_waves_on_the_targets_sms():
    p = scale_op(op(flops=1e6, bytes=1e6, limiter="parallelism", blocks=150), pair())
    assert p.predicted_s == pytest.approx(T * 3 / 2)  # ceil(150/100) = 2 waves here, ceil(150/50) = 3 there
    two = scale_op(op(flops=1e6, bytes=1e6, limiter="parallelism", blocks=150, active_blocks_per_sm=2), pair())
    assert two.predicted_s == pytest.approx(T * 2)  # 1 wave of 200 slots here, 2 of 100 there
    few = scale_op(op(flops=1e6, bytes=1e6, limiter="parallelism", blocks=40), pair(clock_there=2000.0))
    assert few.predicted_s == pytest.approx(T / 2)  # one wave on both: the clock alone


def test_launch_bound_op_scales_its_launch_floors():
    p = scale_op(op(flops=1e3, bytes=1e3, limiter="launch", kernels=2), pair())
    assert p.predicted_s == pytest.approx(6e-6)  # 2 x 2 us floors there + the 2 us beyond 2 x 4 us here
    assert (p.low_s, p.high_s) == pytest.approx((6e-6, T))


def test_host_and_none_are_unchanged_layout_is_mid_way():
    for limiter in ("host", "none"):
        p = scale_op(op(flops=1e6, bytes=8e6, limiter=limiter), pair(clock_there=2000.0))
        assert p.predicted_s == p.low_s == p.high_s == T
    p = scale_op(op(flops=1e6, bytes=8e6, limiter="layout"), pair())
    assert (p.low_s, p.predicted_s, p.high_s) == pytest.approx((5e-6, 7.5e-6, T))


def test_classes_derived_for_rows_without_a_limiter():
    assert scale_op(op(flops=1e6, bytes=8e6), pair()).limiter == "memory"
    assert scale_op(op(flops=8e9, bytes=1e6), pair()).limiter == "compute"
    assert scale_op(op(flops=1e3, bytes=1e3, bound="launch", kernels=1), pair()).limiter == "launch"
    assert scale_op(op(), pair()).limiter == "none"
    untimed = scale_op(OpInput(time_s=0.0), pair())
    assert untimed.predicted_s == 0.0 and untimed.factor is None


# ------------------------------------------------------------------------------------------------ a report


def _row(index: int, op_name: str, flops: float, nbytes: float, time_s: float, limiter: str) -> dict:
    c, m = flops / 1e15, nbytes / 1e12
    roof_time = max(c, m)
    return {
        "index": index,
        "op": op_name,
        "module": f"m{index}",
        "phase": "forward",
        "input_shapes": [[index + 1]],
        "flops": flops,
        "bytes": nbytes,
        "roof": "bf16 tensor",
        "timed": True,
        "time_s": time_s,
        "kernels": 1,
        "intensity": flops / nbytes,
        "roof_time_s": roof_time,
        "attainable_flops_per_s": flops / roof_time,
        "efficiency": roof_time / time_s,
        "bound": "memory" if m >= c else "compute",
        "limiter": limiter,
    }


def _diagnose_report() -> Report:
    rows = [
        _row(0, "aten::add", 1e6, 8e6, T, "memory"),  # 5.5 us (5 - 6)
        _row(1, "aten::mm", 8e9, 1e6, T, "compute"),  # 3.25 us (2.5 - 4)
        _row(2, "aten::cumsum", 1e6, 3e6, T, "latency"),  # 10 us (5 - 10)
    ]
    summary = {"op_time_s": 32e-6, "uncounted_time_s": 2e-6, "wall_s": 40e-6}
    devices = [device_info(HERE)]
    return Report(source="diagnose", command="roofline diagnose m.py", devices=devices, rows=rows, summary=summary)


KNOWN = {"here": KnownDevice("here", "Here GPU", HERE), "there": KnownDevice("there", "There GPU", THERE)}


def test_a_model_is_its_ops_plus_uncounted_plus_unchanged_gaps():
    result = predict(_diagnose_report(), pair(), KNOWN, name="m")
    total = result.total
    assert total.ops_s == pytest.approx(30e-6) and total.uncounted_s == pytest.approx(2e-6)
    assert total.gap_s == pytest.approx(8e-6)  # iteration 40 us - ops 30 - uncounted 2
    assert total.measured_s == pytest.approx(40e-6)
    assert total.predicted_s == pytest.approx(5.5e-6 + 3.25e-6 + 10e-6 + 2e-6 + 8e-6)
    # the range: each op's low and high summed; uncounted from the clock (x1) to the bandwidth ratio (x0.5)
    assert total.low_s == pytest.approx(5e-6 + 2.5e-6 + 5e-6 + 1e-6 + 8e-6)
    assert total.high_s == pytest.approx(6e-6 + 4e-6 + 10e-6 + 2e-6 + 8e-6)
    assert [g.limiter for g in result.groups] == ["memory", "compute", "latency"]


def test_the_baseline_is_the_spec_peaks_at_the_same_efficiency():
    result = predict(_diagnose_report(), pair(), KNOWN, name="m")
    by_op = {g.label.split()[0]: g for g in result.groups}
    assert by_op["add"].baseline_s == pytest.approx(T * 0.5)  # the bandwidth ratio
    assert by_op["mm"].baseline_s == pytest.approx(T * 0.25)  # the compute ratio
    assert by_op["cumsum"].baseline_s == pytest.approx(T * 0.5)  # placed as memory-bound: the bandwidth ratio
    assert result.total.baseline_s == pytest.approx(5e-6 + 2.5e-6 + 5e-6 + 2e-6 + 8e-6)  # the rest unchanged
    data = result.to_dict()
    assert data["total"]["predicted_s"] == pytest.approx(result.total.predicted_s)
    assert data["groups"][0]["baseline_s"] == pytest.approx(by_op["add"].baseline_s)


# ------------------------------------------------------------------------------------------------ the CLI


def _bench_report(tmp_path: Path) -> Path:
    from roofline.roofs import device_from_sheet
    from roofline.specs.loader import load_registry

    h100 = device_from_sheet(load_registry([]).get("h100-sxm"))
    rows = [
        {
            "kind": "elementwise",
            "label": "add numel=1",
            "device": "h100-sxm",
            "roof": "bf16 tensor",
            "flops": 1e6,
            "bytes": 3.35e8,  # 100 us at 3.35 TB/s
            "kernels": 1,
            "median_s": 110e-6,
            "intensity": 1e6 / 3.35e8,
            "roof_time_s": 1e-4,
            "attainable_flops_per_s": 1e10,
            "efficiency": 1e-4 / 110e-6,
            "bound": "memory",
        }
    ]
    path = tmp_path / "bench.json"
    write_report(Report(source="bench", command="roofline bench", devices=[device_info(h100)], rows=rows), path)
    return path


def test_cli_table_json_and_chart(cli, tmp_path):
    report = _bench_report(tmp_path)
    result = cli("predict", str(report), "--device", "h200-sxm")
    assert result.code == 0, result.err
    assert "predicted on" in result.out and "spec ceilings" in result.out and "add numel=1" in result.out
    result = cli("predict", str(report), "-d", "h200-sxm,a100-sxm-80gb", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["schema"] == "roofline.predict"
    assert [p["there"]["device"] for p in data["predictions"]] == ["h200-sxm", "a100-sxm-80gb"]
    (row,) = data["predictions"][0]["groups"]
    # memory, derived: same efficiency x0.698 (3.35 / 4.8 TB/s); share: 100 us x0.698 + 10 us at the same clock
    assert row["limiter"] == "memory"
    assert row["low_s"] == pytest.approx(110e-6 * 3.35 / 4.8)
    assert row["high_s"] == pytest.approx(100e-6 * 3.35 / 4.8 + 10e-6)
    assert row["baseline_s"] == pytest.approx(110e-6 * 3.35 / 4.8)
    pytest.importorskip("matplotlib")
    chart = tmp_path / "p.png"
    result = cli("predict", str(report), "-d", "h200-sxm", "--plot", str(chart))
    assert result.code == 0, result.err
    assert chart.read_bytes().startswith(b"\x89PNG")


def _one_error(result) -> str:
    assert result.code == 2, result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.err
    return lines[0]


def test_cli_bad_input_is_one_line(cli, tmp_path):
    report = _bench_report(tmp_path)
    assert "unknown device 'nope-gpu'" in _one_error(cli("predict", str(report), "--device", "nope-gpu"))
    assert "no spec sheet" in _one_error(cli("predict", str(report), "--device", "cpu"))
    assert "--device" in _one_error(cli("predict", str(report)))
    analytic = tmp_path / "analytic.json"
    write_report(Report(source="analytic", command="roofline analyze", devices=[], rows=[{"kind": "gemm"}]), analytic)
    assert "no measured times" in _one_error(cli("predict", str(analytic), "--device", "h200-sxm"))
    data = json.loads(report.read_text())
    data["rows"][0]["median_s"] = 0.0
    untimed = tmp_path / "untimed.json"
    untimed.write_text(json.dumps(data))
    assert "no timed rows" in _one_error(cli("predict", str(untimed), "--device", "h200-sxm"))
    data = json.loads(report.read_text())
    data["devices"][0]["name"] = "AMD EPYC 9654"
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps(data))
    assert "has no spec sheet" in _one_error(cli("predict", str(cpu), "--device", "h200-sxm"))
    assert "at least 1" in _one_error(cli("predict", str(report), "--device", "h200-sxm", "--top", "0"))


def test_cli_refuses_measured_basis_without_calibrations(cli, tmp_path):
    report = _bench_report(tmp_path)
    line = _one_error(cli("predict", str(report), "--device", "h200-sxm", "--roofs", "measured"))
    assert "no measured ceilings" in line


# ------------------------------------------------------------------------------------------------ committed results


def _pairs_module():
    spec = importlib.util.spec_from_file_location("predict_pairs", ROOT / "benchmarks" / "predict_pairs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_error_table_recomputed_from_committed_results(tmp_path):
    a, b = RESULTS / "h100.tar.gz", RESULTS / "h200.tar.gz"
    assert a.is_file() and b.is_file(), "benchmarks/results/predict/{h100,h200}.tar.gz (predict_collect_gpu.py)"
    pairs = _pairs_module()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    result = pairs.error_table(pairs.unpacked(a, tmp_path / "a"), pairs.unpacked(b, tmp_path / "b"))
    assert result["table"] and all(row["ops"]["n"] > 0 for row in result["table"])
    committed = RESULTS / "predict-pairs.json"
    if committed.is_file():
        expected = json.loads(committed.read_text())
        assert [r["direction"] for r in result["table"]] == [r["direction"] for r in expected["table"]]
        for got, want in zip(result["table"], expected["table"], strict=True):
            for key in ("ops", "ops_baseline", "models", "models_baseline", "models_gpu", "models_gpu_baseline"):
                assert got[key]["n"] == want[key]["n"]
                for stat in ("median", "p90"):
                    assert got[key][stat] == pytest.approx(want[key][stat], abs=1e-9)


def test_error_table_on_synthetic_pair(tmp_path):
    """The validation script end to end on two hand-made directories: B measured exactly as predicted."""
    pairs = _pairs_module()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    report = _bench_report(tmp_path)
    (a / "bench-x.json").write_text(report.read_text())
    data = json.loads(report.read_text())
    data["devices"][0]["name"] = "h200-sxm"
    data["rows"][0]["median_s"] = 100e-6 * 3.35 / 4.8 + 10e-6  # what H100 -> H200 predicts at the high end
    (b / "bench-x.json").write_text(json.dumps(data))
    result = pairs.error_table(a, b)
    directions = [r["direction"] for r in result["table"]]
    assert directions == ["h100-sxm -> h200-sxm", "h200-sxm -> h100-sxm", "both"]
    assert result["table"][0]["ops"]["n"] == 1
    assert "| both |" in pairs.markdown(result)


def test_diagnose_predict_checks_its_targets_before_the_run(cli, tmp_path):
    model = tmp_path / "m.py"
    model.write_text("raise SystemExit('must not run')\n")
    assert "unknown device 'nope-gpu'" in _one_error(cli("diagnose", str(model), "--predict", "nope-gpu"))
    assert "--predict with --json" in _one_error(cli("diagnose", str(model), "--predict", "h200-sxm", "--json"))


# ------------------------------------------------------------------------------------------------ measured basis


def _calibration(tmp_path: Path, sheet: str, sustained: float, burst: float | None) -> Path:
    from datetime import datetime, timezone

    from roofline.measure.calibration import Calibration, Ceiling, Machine

    ceilings = [
        Ceiling(name="dram-copy", kind="bandwidth", value=3.0e12 if sheet == "h100-sxm" else 4.2e12, unit="B/s"),
        Ceiling(name="gemm-bf16", kind="compute", value=sustained, unit="FLOP/s", dtype="bf16", phase="sustained"),
    ]
    if burst is not None:
        ceilings.append(
            Ceiling(name="gemm-bf16-burst", kind="compute", value=burst, unit="FLOP/s", dtype="bf16", phase="burst")
        )
    cal = Calibration(
        created_utc=datetime(2026, 11, 24, tzinfo=timezone.utc),
        machine=Machine(kind="cuda", name=sheet, sheet=sheet),
        ceilings=ceilings,
    )
    path = tmp_path / f"cal-{sheet}.json"
    path.write_text(cal.model_dump_json(by_alias=True))
    return path


def test_measured_compute_ratio_uses_burst_gemms_where_both_have_them(tmp_path):
    from roofline.report.schema import read_report
    from roofline.roofs import target_pairs

    report = read_report(_bench_report(tmp_path), note=None)
    cals = [_calibration(tmp_path, "h100-sxm", 716e12, 805e12), _calibration(tmp_path, "h200-sxm", 643e12, 789e12)]
    (p,) = target_pairs(report.devices[0], ["h200-sxm"], calibrations=cals)
    assert p.basis == "measured"
    assert p.here.device.compute[("bf16", "tensor")] == 805e12
    assert p.there.device.compute[("bf16", "tensor")] == 789e12
    assert p.here.source.endswith("burst GEMM ceilings") and p.there.source.endswith("burst GEMM ceilings")
    # one side without burst figures: both sides sustained (a ratio never mixes the two)
    cals[1] = _calibration(tmp_path, "h200-sxm", 643e12, None)
    (p,) = target_pairs(report.devices[0], ["h200-sxm"], calibrations=cals)
    assert p.here.device.compute[("bf16", "tensor")] == 716e12
    assert p.there.device.compute[("bf16", "tensor")] == 643e12


def test_labels_match_without_source_lines():
    pairs = _pairs_module()
    assert pairs.match_label("mul [8, 8] x3 @ (model) at workloads/m.py:29,33") == "mul [8, 8] x3 @ (model)"
    assert pairs.match_label("mul [8, 8] x3 @ (model)") == "mul [8, 8] x3 @ (model)"
    assert pairs.match_label("gemm at scale m=8 n=8") == "gemm at scale m=8 n=8"  # not a FILE:LINE tail


def test_error_table_gives_corpus_problems_a_row_of_their_own(tmp_path):
    """diag-corpus-*.json (benchmarks/predict_corpus_gpu.py) count as problems, the other diagnose reports as
    models: one report of each, measured on the H200 exactly as the H100's time unchanged."""
    pairs = _pairs_module()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    for name in ("diag-corpus-add-x.json", "diag-model.json"):
        for where, device in ((a, "h100-sxm"), (b, "h200-sxm")):
            info = device_info(HERE).model_copy(update={"name": device})
            write_report(_diagnose_report().model_copy(update={"devices": [info]}), where / name)
    result = pairs.error_table(a, b)
    both = result["table"][-1]
    assert both["direction"] == "both"
    assert (both["problems"]["n"], both["models_gpu"]["n"]) == (2, 2)  # one of each, both ways
    assert all(pairs.is_problem(c["report"]) == c["report"].startswith("diag-corpus-") for c in result["comparisons"])
    assert "| both | per problem, GPU time | 2 |" in pairs.markdown(result)


def test_the_corpus_collector_writes_a_report_per_problem_and_a_manifest(tmp_path):
    spec = importlib.util.spec_from_file_location("predict_corpus_gpu", ROOT / "benchmarks" / "predict_corpus_gpu.py")
    assert spec is not None and spec.loader is not None
    collector = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collector)
    assert collector.report_name("conv+relu-stem") == "diag-corpus-conv_relu-stem.json"
    code = collector.main(["--out", str(tmp_path), "--device", "cpu", "--filter", "small-linear-rows16"])
    manifest = json.loads((tmp_path / "corpus-manifest.json").read_text())
    assert code == 0 and [p["id"] for p in manifest["problems"]] == ["small-linear-rows16"]
    report = json.loads((tmp_path / "diag-corpus-small-linear-rows16.json").read_text())
    assert report["source"] == "diagnose" and any(row["op"] == "aten::addmm" for row in report["rows"])
