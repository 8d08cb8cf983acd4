"""CPU calibration that cannot poison results, and a newcomer's first hour with bench and specs on a CPU: the busy
rule and the re-measure policy (injected load numbers), the note for rows above a measured roof, the line before
the first implicit calibration, bf16 bench on a CPU, GPU suites on a CPU, piped progress, and `specs detect`
without torch on a machine with no GPU."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from roofline.bench.items import cpu_plan, expand_items, expand_suite
from roofline.cli.output import plain_progress
from roofline.device import Device
from roofline.measure import calibration as cal_mod
from roofline.measure.calibration import Calibration, Ceiling, Load, Machine, busy_reasons, quiet
from roofline.measure.ceilings_cpu import others_share
from roofline.roofs import calibrating_line, over_roof_note

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)


def _cpu_cal(fp32: float = 300e9, *, busy: bool = False, load: Load | None = None, machine: Machine | None = None):
    return Calibration(
        created_utc=T0,
        machine=machine or Machine(kind="cpu", name="Test CPU", torch="2.13.0+cpu", cpu_threads=2),
        ceilings=[
            Ceiling(name="cpu-gemm-fp32", kind="compute", value=fp32, unit="FLOP/s", dtype="fp32"),
            Ceiling(name="cpu-gemm-fp64", kind="compute", value=fp32 / 2, unit="FLOP/s", dtype="fp64"),
            Ceiling(name="cpu-copy", kind="bandwidth", value=21e9, unit="B/s"),
            Ceiling(name="launch-host", kind="latency", value=4e-6, unit="s"),
        ],
        busy=busy,
        load=load,
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    return tmp_path


# ---------------------------------------------------------------------------------------------- busy rule


@pytest.mark.parametrize(
    ("load", "needles"),
    [
        (None, []),
        (Load(), []),
        (Load(loadavg_before=0.3, cpus=2, others_share=0.05, spread=0.03), []),
        (Load(loadavg_before=1.9, cpus=2), ["load average 1.90 on 2 CPUs"]),
        (Load(loadavg_before=1.9, cpus=4), []),
        (Load(others_share=0.45, cpus=2), ["other processes took 45%"]),
        (Load(spread=0.6), ["spread by 60%"]),
        (Load(loadavg_before=8, cpus=2, others_share=0.5, spread=0.5), ["load average", "other processes", "spread"]),
    ],
)
def test_busy_reasons_from_injected_load(load, needles):
    reasons = busy_reasons(load)
    assert len(reasons) == len(needles)
    for reason, needle in zip(reasons, needles, strict=True):
        assert needle in reason


def test_quiet_and_others_share_are_pure():
    assert quiet(None, 2) and quiet(0.9, 2) and not quiet(1.5, 2) and quiet(3.0, 8)
    # 100 ticks/s, 2 s on 2 CPUs = 400 ticks; 300 busy ticks = 3 CPU-s, of which 2 s were ours: others 1 of 4 s
    assert others_share((1000, 5000), (1300, 5400), 2.0, 100.0) == pytest.approx(0.25)
    assert others_share((1000, 5000), (1300, 5400), 5.0, 100.0) == 0.0  # never below 0
    assert others_share(None, (1, 2), 0.0, 100.0) is None and others_share((1, 2), (1, 2), 0.0, 100.0) is None


def test_old_cache_without_load_fields_still_reads(tmp_path):
    doc = json.loads(_cpu_cal().to_json())
    doc.pop("load"), doc.pop("busy")
    path = tmp_path / "calibration-old.json"
    path.write_text(json.dumps(doc))
    old = cal_mod.load(path)
    assert old.busy is False and old.load is None and old.value("cpu-gemm-fp32") == 300e9
    again = cal_mod.parse(_cpu_cal(busy=True, load=Load(loadavg_before=3.0, cpus=2)).to_json())
    assert again.busy and again.load.loadavg_before == 3.0


def _policy(cache, cached, *, quiet_now):
    machine = cached.machine
    if cached is not None:
        cal_mod.save(cached, cache)
    measured, told = [], []

    def measure():
        measured.append(1)
        return _cpu_cal(fp32=310e9, machine=machine)

    lookup = cal_mod.cached_or_measured(
        machine, measure, directory=cache, quiet_now=lambda: quiet_now, announce=lambda why, path: told.append(why)
    )
    return lookup, measured, told


def test_busy_calibration_is_measured_again_on_a_quiet_machine(cache):
    busy = _cpu_cal(fp32=18.9e9, busy=True, load=Load(loadavg_before=3.0, cpus=2))
    lookup, measured, told = _policy(cache, busy, quiet_now=True)
    assert measured == [1] and told == ["busy"] and not lookup.from_cache
    assert lookup.replaced is not None and lookup.replaced.busy
    assert cal_mod.find(busy.key, cache).value("cpu-gemm-fp32") == 310e9  # the quiet one is now the standing one


def test_busy_calibration_is_used_while_the_machine_is_still_busy(cache):
    busy = _cpu_cal(fp32=18.9e9, busy=True, load=Load(loadavg_before=3.0, cpus=2))
    lookup, measured, told = _policy(cache, busy, quiet_now=False)
    assert measured == [] and told == [] and lookup.from_cache and lookup.calibration.busy
    assert "taken while the machine was busy" in cal_mod.busy_note(lookup.calibration)
    assert "roofline calibrate --refresh" in cal_mod.busy_note(lookup.calibration)


def test_a_quiet_calibration_is_kept(cache):
    lookup, measured, told = _policy(cache, _cpu_cal(), quiet_now=True)
    assert measured == [] and told == [] and lookup.from_cache


def test_first_calibration_is_announced(cache):
    told = []
    machine = _cpu_cal().machine
    lookup = cal_mod.cached_or_measured(
        machine, lambda: _cpu_cal(), directory=cache, announce=lambda why, path: told.append((why, path))
    )
    assert told == [("first", lookup.path)] and not lookup.from_cache


def test_calibrating_line_names_time_cache_and_command():
    line = calibrating_line("first", Path("/c/calibration-cpu.json"), 7.5)
    assert line == (
        "calibrating this CPU's ceilings once (about 8 s; cached in /c/calibration-cpu.json; "
        "`roofline calibrate` to redo) ..."
    )
    again = calibrating_line("busy", Path("/c/x.json"), 7.5, _cpu_cal(busy=True))
    assert "again" in again and "2026-11-21 12:00 UTC" in again and "busy" in again


# -------------------------------------------------------------------------------------- above the roof

CPU = Device(
    name="cpu",
    display_name="Test CPU",
    vendor="other",
    compute={("fp32", "tensor"): 18.9e9, ("fp32", "vector"): 18.9e9},
    bandwidth={"dram": 21e9},
    launch_floor_s=4e-6,
    roof_source="measured",
)


def _row(efficiency, dtype="fp32", bound="compute", label="gemm m=1024 n=1024 k=1024"):
    return SimpleNamespace(efficiency=efficiency, dtype=dtype, bound=bound, label=label)


def test_over_roof_note_names_the_calibration_and_the_refresh():
    found = (_cpu_cal(fp32=18.9e9), Path("/cache/calibration-cpu.json"))
    note = over_roof_note([_row(6.25), _row(0.5, label="small"), _row(1.3, bound="memory")], CPU, found)
    assert note is not None
    assert note.startswith("2 rows ran above the measured roof (up to 625%: gemm m=1024 n=1024 k=1024)")
    assert "calibration of 2026-11-21 12:00 UTC in /cache/calibration-cpu.json" in note
    assert "cpu-gemm-fp32 18.9 GFLOP/s" in note and "cpu-copy 21 GB/s" in note
    assert "`roofline calibrate --refresh --device cpu`" in note


def test_over_roof_note_only_for_measured_roofs_above_100_percent():
    found = (_cpu_cal(), Path("/c.json"))
    assert over_roof_note([_row(0.99), _row(None)], CPU, found) is None
    spec = Device("h100", "H100", "nvidia", {("fp32", "vector"): 1e12}, {"dram": 1e12}, 1e-6)
    assert over_roof_note([_row(2.0)], spec, found) is None  # spec roofs: not a calibration's doing
    assert over_roof_note([_row(2.0)], CPU, None) is None
    busy = (_cpu_cal(busy=True), Path("/c.json"))
    assert "while the machine was busy" in over_roof_note([_row(2.0)], CPU, busy)


# --------------------------------------------------------------------------------------- CLI on the CPU


@pytest.fixture
def this_cpu(cache):
    """This machine's CPU calibration in the cache (fake numbers), so no measurement runs."""
    import torch

    from roofline.specs.detect import describe_cpu

    cal = _cpu_cal(fp32=50e9, machine=describe_cpu(torch))
    return cal_mod.save(cal, cache)


def test_first_implicit_calibration_prints_one_line_when_piped(cli, cache, tmp_path, monkeypatch):
    import roofline.measure.ceilings_cpu as measuring

    calls = []

    def fake(torch, **kwargs):
        from roofline.specs.detect import describe_cpu

        calls.append(1)
        return _cpu_cal(fp32=50e9, machine=describe_cpu(torch))

    monkeypatch.setattr(measuring, "calibrate_cpu", fake)
    args = ("bench", "gemm", "-m", "16", "-n", "16", "-k", "16", "--device", "cpu", "--max-time", "0.02")
    first = cli(*args, "-o", str(tmp_path / "a.json"))
    assert first.code == 0, first.err
    (path,) = cache.glob("calibration-cpu-*.json")
    lines = [line for line in first.err.splitlines() if line.startswith("calibrating")]
    assert lines == [
        f"calibrating this CPU's ceilings once (about {measuring.estimated_seconds():.0f} s; cached in {path}; "
        "`roofline calibrate` to redo) ..."
    ]
    second = cli(*args, "-o", str(tmp_path / "b.json"))
    assert second.code == 0 and "calibrating" not in second.err and calls == [1]


def test_bench_bf16_gemm_runs_on_the_cpu_on_the_fp32_roof(cli, this_cpu, tmp_path):
    out = tmp_path / "r.json"
    args = ("bench", "gemm", "-m", "16", "-n", "16", "-k", "16", "--dtype", "bf16", "--device", "cpu")
    result = cli(*args, "-o", str(out), "--max-time", "0.02", "--json")
    assert result.code == 0, result.err
    (row,) = result.json()["rows"]
    assert row["dtype"] == "bf16" and row["attainable_flops_per_s"] <= 50e9
    assert any("placed on the measured fp32 GEMM roof" in note for note in row["bench_notes"])


def test_gpu_suite_on_an_explicit_cpu_is_one_line_exit_2(cli, this_cpu, tmp_path):
    result = cli("bench", "bench-gpu", "--device", "cpu", "-o", str(tmp_path / "r.json"))
    assert result.code == 2
    line = result.error_line()
    assert "suite bench-gpu is for GPUs: " in line and "rows cannot run on a CPU (bf16" in line
    assert "roofline bench bench-cpu" in line
    assert not (tmp_path / "r.json").exists()


def test_cpu_plan_leaves_out_gpu_rows():
    items = expand_suite(
        [
            ("gemm", {"m": [8, 16], "n": 8, "k": 8, "dtype": "fp32"}, "s"),
            ("elementwise", {"op": "add", "numel": 64, "dtype": "bf16"}, "s"),
            ("decode", {"model": "gpt2", "batch": 1, "act_dtype": "fp16"}, "s"),
        ]
    )
    plan = cpu_plan("mixed", items)
    assert [i.kind for i in plan.run] == ["gemm", "gemm"] and len(plan.gpu_rows) == 5
    assert plan.refuse and "5 of 7 rows cannot run on a CPU (bf16, fp16;" in plan.line
    fp32_only = cpu_plan("cpu", expand_items("gemm", {"m": 8, "n": 8, "k": 8, "dtype": "fp32"}))
    assert fp32_only.line == "" and not fp32_only.refuse and len(fp32_only.run) == 1


def test_gpu_rows_of_a_mostly_cpu_suite_are_left_out_with_a_note(cli, this_cpu, tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "name: mostly-cpu\nworkloads:\n"
        "  - {kind: gemm, m: [8, 16], n: 16, k: 16, dtype: fp32}\n"
        "  - {kind: elementwise, op: add, numel: 4096, dtype: bf16}\n"
    )
    result = cli("bench", str(suite), "--device", "cpu", "-o", str(tmp_path / "r.json"), "--max-time", "0.02")
    assert result.code == 0, result.err
    assert "note: suite mostly-cpu is for GPUs: 1 of 3 rows cannot run on a CPU (bf16;" in result.err
    assert "running the other 2" in result.err


def test_plain_progress_lines_with_an_injected_clock():
    lines: list[str] = []
    ticks = iter([0.0, 1.5, 2.5, 2.6, 6.0, 6.1])
    update = plain_progress(lines.append, now=lambda: next(ticks), every_s=2.0)
    update(0, 5, "m=1")  # t=0: starts
    update(1, 5, "m=2")  # t=1.5: m=1 done, under 2 s since the start: quiet
    update(2, 5, "m=3")  # t=2.5: m=2 done (1.0 s)
    update(3, 5, "m=4")  # t=2.6: m=3 done, 0.1 s after the last line: quiet
    update(4, 5, "m=5")  # t=6.0: m=4 done (3.4 s)
    update(5, 5, "")  # t=6.1: m=5 done, 0.1 s after the last line: quiet
    assert lines == ["bench: 2/5 m=2 1.0 s", "bench: 4/5 m=4 3.4 s"]


def test_piped_bench_prints_progress_lines(cli, this_cpu, tmp_path, monkeypatch):
    monkeypatch.setattr("roofline.cli.output.PLAIN_PROGRESS_EVERY_S", 0.0)
    args = ("bench", "gemm", "-m", "8,16,32", "-n", "16", "-k", "16", "--device", "cpu", "--max-time", "0.02")
    result = cli(*args, "-o", str(tmp_path / "r.json"))
    assert result.code == 0, result.err
    progress = [line for line in result.err.splitlines() if line.startswith("bench: ")]
    assert [line.split()[1] for line in progress] == ["1/3", "2/3", "3/3"]
    assert progress[0].startswith("bench: 1/3 m=8 n=16 k=16 ") and progress[0].endswith(" s")


def test_bench_says_which_calibration_when_rows_beat_the_roof(cli, cache, tmp_path):
    import torch

    from roofline.specs.detect import describe_cpu

    path = cal_mod.save(_cpu_cal(fp32=1e3, machine=describe_cpu(torch)), cache)  # 1 kFLOP/s: every GEMM beats it
    args = ("bench", "gemm", "-m", "16", "-n", "16", "-k", "16", "--device", "cpu", "--max-time", "0.02")
    result = cli(*args, "-o", str(tmp_path / "r.json"))
    assert result.code == 0, result.err
    (note,) = [line for line in result.err.splitlines() if "above the measured roof" in line]
    assert f"in {path}" in note and "cpu-gemm-fp32 1 kFLOP/s" in note and "roofline calibrate --refresh" in note


# --------------------------------------------------------------------------------------------- detect


def test_detect_on_a_machine_without_a_gpu_does_not_import_torch(monkeypatch):
    from roofline.specs import detect as detect_mod
    from roofline.specs.loader import load_registry

    def no_import():
        raise AssertionError("torch imported")

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(detect_mod, "_import_torch", no_import)
    monkeypatch.setattr(detect_mod, "gpu_node_present", lambda nodes=(): False)
    cpuinfo = "processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu sse4_2 avx avx2 fma\n"
    result = detect_mod.detect(load_registry(env={}), nvml=False, cpu_reader=lambda: cpuinfo, env={})
    assert result.gpus == [] and result.cpu.simd == "AVX2" and result.cpu.isa is None
    assert "torch not loaded" in result.cpu.note


@pytest.mark.parametrize(
    ("text", "simd"),
    [("flags : sse4_2 avx2 avx512f", "AVX-512"), ("Features : fp asimd", "NEON"), ("flags : fpu", None), (None, None)],
)
def test_parse_simd(text, simd):
    from roofline.specs.detect import parse_simd

    assert parse_simd(text) == simd


def test_diagnose_says_which_calibration_when_ops_beat_the_roof(cli, cache, tmp_path, monkeypatch):
    import torch

    from roofline.report.records import OpTiming, Timing
    from roofline.specs.detect import describe_cpu

    def timing(model, inputs, kwargs, records, *, device, mode, warmup, iters, **_):
        ops = [OpTiming(index=r.index, device_time_s=1e-3, kernels=0) for r in records]
        return Timing(device="cpu", iterations=iters, wall_s=1e-3 * len(ops), ops=ops)

    monkeypatch.setattr("roofline.diagnose.profile.time_model", timing)
    path = cal_mod.save(_cpu_cal(fp32=1e3, machine=describe_cpu(torch)), cache)
    model = Path(__file__).resolve().parents[1] / "workloads" / "models" / "mlp_compute_bound.py"
    args = ("diagnose", str(model), "--device", "cpu", "--warmup", "1", "--iters", "2")
    result = cli(*args, "-o", str(tmp_path / "d.json"))
    assert result.code == 0, result.err
    (note,) = [line for line in result.err.splitlines() if "above the measured roof" in line]
    assert f"in {path}" in note and "cpu-gemm-fp32 1 kFLOP/s" in note
