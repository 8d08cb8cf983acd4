"""`roofline calibrate` and the calibration cache: model, cache files, measured roofs, the CLI end to end."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from functools import partial

import pytest

from roofline.errors import CalibrationError
from roofline.measure import calibration as cal_mod
from roofline.measure.calibration import Calibration, CalibrationSummary, Ceiling, Machine
from roofline.roofs import device_from_sheet
from roofline.specs.loader import load_registry

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)


def _summary(median_s: float = 1e-3) -> CalibrationSummary:
    return CalibrationSummary(
        median_s=median_s,
        p20_s=median_s * 0.99,
        p80_s=median_s * 1.01,
        n=12,
        method="cuda-events",
        cache="cold",
        stop_reason="converged",
        relative_spread=0.02,
        throttled_count=2,
        throttle_reasons=["sw-power-cap"],
    )


def _gpu_cal(sheet: str | None = "h100-sxm", created: datetime = T0, driver: str = "580.1") -> Calibration:
    def c(name: str, kind: str, value: float, unit: str, dtype: str | None = None, spec: float | None = None):
        return Ceiling(
            name=name,
            kind=kind,
            value=value,
            unit=unit,
            dtype=dtype,
            spec_value=spec,
            ratio=value / spec if spec else None,
            measurement=_summary(),
        )

    return Calibration(
        created_utc=created,
        machine=Machine(
            kind="cuda", name="NVIDIA H100 80GB HBM3", sheet=sheet, driver=driver, cuda="12.8", torch="2.13.0"
        ),
        ceilings=[
            c("dram-copy", "bandwidth", 3.03e12, "B/s", spec=3.35e12),
            c("dram-read", "bandwidth", 3.10e12, "B/s", spec=3.35e12),
            c("gemm-bf16", "compute", 785e12, "FLOP/s", "bf16", 989.4e12),
            c("gemm-tf32", "compute", 405e12, "FLOP/s", "tf32", 494.7e12),
            c("gemm-fp32", "compute", 51.2e12, "FLOP/s", "fp32", 66.9e12),
            c("gemm-fp64", "compute", 55.4e12, "FLOP/s", "fp64", 66.9e12),
            c("gemm-int8", "compute", 956e12, "OP/s", "int8", 1978.9e12),
            c("launch-events", "latency", 2.5e-6, "s"),
        ],
    )


def _cpu_cal(created: datetime = T0) -> Calibration:
    return Calibration(
        created_utc=created,
        machine=Machine(kind="cpu", name="Test CPU", torch="2.13.0+cpu", cpu_threads=2, llc_bytes=32 * 2**20),
        ceilings=[
            Ceiling(name="cpu-gemm-fp32", kind="compute", value=300e9, unit="FLOP/s", dtype="fp32"),
            Ceiling(name="cpu-gemm-fp64", kind="compute", value=130e9, unit="FLOP/s", dtype="fp64"),
            Ceiling(name="cpu-copy", kind="bandwidth", value=21e9, unit="B/s"),
            Ceiling(name="cpu-triad", kind="bandwidth", value=24e9, unit="B/s"),
            Ceiling(name="launch-host", kind="latency", value=4e-6, unit="s"),
        ],
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    return tmp_path


# ------------------------------------------------------------------------------------------------ model


def test_model_round_trips_through_json():
    cal = _gpu_cal()
    doc = cal.to_dict()
    assert doc["schema"] == "roofline.calibration" and doc["version"] == 1
    again = cal_mod.parse(cal.to_json())
    assert again == cal
    assert again.value("gemm-bf16") == 785e12
    assert again.get("dram-copy").ratio == pytest.approx(3.03 / 3.35)


def test_unknown_future_keys_are_ignored():
    doc = _gpu_cal().to_dict()
    doc["new_top_level"] = {"x": 1}
    doc["machine"]["new_field"] = "y"
    doc["ceilings"][0]["new_field"] = 3
    cal = cal_mod.parse(json.dumps(doc))
    assert cal.value("dram-copy") == 3.03e12


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a calibration document"),
        ('{"schema": "roofline.report", "version": 1}', "not a roofline calibration"),
        ('{"schema": "roofline.calibration", "version": 2}', "version 2"),
        ('{"schema": "roofline.calibration", "version": 1, "machine": {"kind": "cuda"}}', "invalid calibration"),
    ],
)
def test_corrupt_or_foreign_files_raise_the_typed_error(tmp_path, text, message):
    path = tmp_path / "calibration-x.json"
    path.write_text(text)
    with pytest.raises(CalibrationError, match=message) as info:
        cal_mod.load(path)
    assert info.value.path == path
    assert info.value.exit_code == 2


# ------------------------------------------------------------------------------------------------ cache


def test_cache_dir_precedence(tmp_path):
    assert cal_mod.cache_dir({"ROOFLINE_CACHE_DIR": str(tmp_path / "a"), "XDG_CACHE_HOME": "/x"}) == tmp_path / "a"
    assert cal_mod.cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "roofline"
    assert str(cal_mod.cache_dir({})).endswith(os.path.join(".cache", "roofline"))


def test_machine_key_is_a_safe_slug_of_the_machine():
    key = _gpu_cal().key
    assert key == "cuda-nvidia-h100-80gb-hbm3-driver-580.1-cuda-12.8-torch-2.13.0"
    assert _cpu_cal().key == "cpu-test-cpu-torch-2.13.0-cpu-threads-2"
    long = Machine(kind="cpu", name="A/B " * 100, torch="2")
    assert len(cal_mod.machine_key(long)) <= 150 and "/" not in cal_mod.machine_key(long)


def test_save_is_atomic_and_find_reads_it_back(cache, monkeypatch):
    cal = _gpu_cal()
    path = cal_mod.save(cal)
    assert path == cache / f"calibration-{cal.key}.json"
    assert cal_mod.find(cal.key) == cal
    assert cal_mod.find("no-such-machine") is None
    # a write that fails half-way leaves the old file intact and no temporary behind
    import roofline.fileio as fileio

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(fileio.os, "replace", broken_replace)
    with pytest.raises(OSError):
        cal_mod.save(_gpu_cal(created=T0 + timedelta(days=1)))
    assert sorted(p.name for p in cache.iterdir()) == [path.name]
    assert cal_mod.find(cal.key).created_utc == T0


def test_find_raises_on_a_corrupt_file_and_quarantine_keeps_it(cache):
    cal = _gpu_cal()
    path = cal_mod.cache_path(cal.key)
    path.write_text("{truncated")
    with pytest.raises(CalibrationError):
        cal_mod.find(cal.key)
    moved = cal_mod.quarantine(path)
    assert moved.name == path.name + ".corrupt" and moved.read_text() == "{truncated"
    assert cal_mod.find(cal.key) is None


def test_latest_for_sheet_picks_the_newest_and_skips_corrupt_files(cache):
    old = _gpu_cal(created=T0, driver="570.1")
    new = _gpu_cal(created=T0 + timedelta(days=2), driver="580.2")
    other = _gpu_cal(sheet="h200", created=T0 + timedelta(days=5), driver="590")
    for cal in (old, new, other, _cpu_cal()):
        cal_mod.save(cal)
    corrupt = cache / "calibration-zzz.json"
    corrupt.write_text("not json")
    found = cal_mod.latest_for_sheet("h100-sxm")
    assert found is not None and found.machine.driver == "580.2"
    assert cal_mod.latest_for_sheet("a100-sxm-80gb") is None
    assert corrupt.exists()  # skipped, never deleted
    assert [cal.machine.name for _, cal in cal_mod.cached() if cal.machine.kind == "cpu"] == ["Test CPU"]


def test_cached_or_measured_reads_the_cache_refreshes_and_heals_a_corrupt_file(cache):
    cpu = _cpu_cal()
    calls = []

    def measure():
        calls.append(1)
        return cpu

    first = cal_mod.cached_or_measured(cpu.machine, measure)
    assert not first.from_cache and first.path == cal_mod.cache_path(cpu.key) and first.path.is_file()
    assert cal_mod.cached_or_measured(cpu.machine, measure).from_cache and len(calls) == 1
    assert not cal_mod.cached_or_measured(cpu.machine, measure, refresh=True).from_cache and len(calls) == 2
    first.path.write_text("{truncated")
    healed = cal_mod.cached_or_measured(cpu.machine, measure)
    assert not healed.from_cache and isinstance(healed.corrupt, CalibrationError) and len(calls) == 3
    assert healed.moved.read_text() == "{truncated" and cal_mod.find(cpu.key).machine.name == "Test CPU"


def test_cached_or_measured_when_the_cache_cannot_be_written(tmp_path):
    cpu = _cpu_cal()
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(OSError):
        cal_mod.cached_or_measured(cpu.machine, lambda: cpu, directory=blocked)
    lookup = cal_mod.cached_or_measured(cpu.machine, lambda: cpu, directory=blocked, must_save=False)
    assert lookup.calibration is cpu and isinstance(lookup.save_error, OSError) and not lookup.from_cache


def test_latest_for_sheet_without_a_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path / "missing"))
    assert cal_mod.latest_for_sheet("h100-sxm") is None


# ------------------------------------------------------------------------------------------------ roofs


def test_apply_replaces_roofs_and_marks_them_measured():
    spec = device_from_sheet(load_registry().get("h100-sxm"))
    device = cal_mod.apply(spec, _gpu_cal())
    assert device.roof_source == "measured" and spec.roof_source == "spec"
    assert device.dram_bandwidth == 3.03e12
    assert device.compute[("bf16", "tensor")] == 785e12
    assert device.compute[("tf32", "tensor")] == 405e12
    assert device.compute[("fp32", "vector")] == 51.2e12  # NVIDIA: fp32 GEMM runs on CUDA cores
    assert device.compute[("fp64", "tensor")] == 55.4e12  # H100 has fp64 tensor cores
    assert device.compute[("fp64", "vector")] == spec.compute[("fp64", "vector")]
    assert device.compute[("int8", "tensor")] == 956e12
    assert device.compute[("fp8", "tensor")] == spec.compute[("fp8", "tensor")]  # not measured: sheet value
    assert device.launch_floor_s == 2.5e-6
    assert device.roof("bf16", "tensor").flops_per_s == 785e12


def test_apply_fp64_without_tensor_cores_uses_the_vector_roof():
    spec = device_from_sheet(load_registry().get("l4"))
    cal = _gpu_cal(sheet="l4")
    device = cal_mod.apply(spec, cal)
    assert ("fp64", "tensor") not in device.compute
    assert device.compute.get(("fp64", "vector")) == 55.4e12


def test_apply_refuses_another_devices_calibration():
    spec = device_from_sheet(load_registry().get("a100-sxm-80gb"))
    with pytest.raises(CalibrationError, match="h100-sxm"):
        cal_mod.apply(spec, _gpu_cal())
    with pytest.raises(CalibrationError, match="CPU"):
        cal_mod.apply(spec, _cpu_cal())


def test_cpu_device_from_a_cpu_calibration():
    device = cal_mod.cpu_device(_cpu_cal())
    assert device.name == "cpu" and device.display_name == "Test CPU" and device.roof_source == "measured"
    assert device.compute[("fp32", "vector")] == device.compute[("fp32", "tensor")] == 300e9
    assert device.compute[("fp64", "tensor")] == 130e9
    assert device.dram_bandwidth == 21e9
    assert device.launch_floor_s == 4e-6
    assert device.roof("fp32", "tensor").flops_per_s == 300e9  # matmul rows work
    with pytest.raises(CalibrationError):
        cal_mod.cpu_device(_gpu_cal())


# ---------------------------------------------------------------------------------------------- the CLI


@pytest.fixture
def quick(monkeypatch):
    """calibrate_cpu with tiny sizes, counting its calls."""
    import roofline.measure.ceilings_cpu as measuring

    calls = []
    real = partial(measuring.calibrate_cpu, quick=True)

    def fake(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(measuring, "calibrate_cpu", fake)
    return calls


def test_calibrate_cpu_end_to_end_then_cached(cli, cache, quick, monkeypatch):
    result = cli("calibrate", "--device", "cpu", "--refresh", "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["schema"] == "roofline.calibration" and doc["machine"]["kind"] == "cpu" and doc["quick"] is True
    names = [c["name"] for c in doc["ceilings"]]
    assert names == ["cpu-gemm-fp32", "cpu-gemm-fp64", "cpu-copy", "cpu-triad", "launch-host"]
    assert all(c["value"] > 0 and c["measurement"]["n"] >= 1 for c in doc["ceilings"])
    assert doc["skipped"] == []
    files = list(cache.glob("calibration-cpu-*.json"))
    assert len(files) == 1 and "written to" in result.err
    assert len(quick) == 1

    # the second run reads the cache and measures nothing
    import roofline.measure.ceilings_cpu as measuring

    def fail(*args, **kwargs):
        raise AssertionError("re-measured despite the cache")

    monkeypatch.setattr(measuring, "calibrate_cpu", fail)
    again = cli("calibrate", "--device", "cpu")
    assert again.code == 0, again.err
    assert "cached from" in again.err and "--refresh" in again.err
    assert "cpu-gemm-fp32" in again.out and "FLOP/s" in again.out
    assert "roofs from measured (calibration)" in again.out.replace("\n", " ")


def test_corrupt_cache_is_reported_renamed_and_remeasured(cli, cache, quick):
    assert cli("calibrate", "--device", "cpu", "--refresh").code == 0
    (path,) = cache.glob("calibration-cpu-*.json")
    path.write_text('{"schema": "roofline.calibration", "version": 1, "machine": ')
    result = cli("calibrate", "--device", "cpu", "--json")
    assert result.code == 0, result.err
    assert f"ignoring corrupt calibration cache {path}" in result.err and "re-measuring" in result.err
    assert len(quick) == 2
    assert (cache / (path.name + ".corrupt")).read_text().startswith('{"schema"')
    assert cal_mod.load(path).machine.kind == "cpu"


def test_cpu_roofs_measure_once_then_read_the_cache(cache, quick):
    import torch

    from roofline.roofs import cpu_roofs

    device, notes = cpu_roofs(torch)
    assert device.name == "cpu" and device.roof_source == "measured"
    assert notes == [f"CPU calibrated now (cached in {next(cache.glob('calibration-cpu-*.json'))})"]
    again, notes = cpu_roofs(torch)
    assert len(quick) == 1 and again == device
    assert len(notes) == 1 and notes[0].startswith("CPU roofs from the calibration of")


def test_calibrate_cuda_without_cuda_is_one_line_exit_2(cli, cache, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = cli("calibrate", "--device", "cuda")
    assert result.code == 2
    assert result.err.startswith("Error: --device cuda:") and "--device cpu" in result.err
    assert len(result.err.strip().splitlines()) == 1
    assert list(cache.iterdir()) == []


def test_calibrate_rejects_an_unknown_device(cli, cache):
    result = cli("calibrate", "--device", "tpu")
    assert result.code == 2 and result.err.startswith("Error: --device 'tpu'")


def test_help_does_not_import_torch():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys\nfrom roofline.cli import main\ntry:\n    main(['calibrate', '--help'])\nexcept SystemExit:\n"
        "    pass\nprint('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)\n"
    )
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert result.stderr.strip().splitlines()[-1] == "NO-TORCH", result.stderr
    assert "--refresh" in result.stdout


def test_renderer_shows_spec_ratio_and_throttling():
    from roofline.render.calibrate import CalibrationRenderer

    cal = _gpu_cal()
    text = CalibrationRenderer(color=False).render(cal)
    assert "3.03 TB/s" in text  # dram-copy measured, beside its spec
    assert "NVIDIA H100 80GB HBM3 (h100-sxm)" in text
    assert "90%" in text and "785 TFLOP/s" in text and "956 TOP/s" in text
    assert "90% of 3.35 TB/s" in text
    assert "16 of 96 samples" in text and "throttling" in text and "sw-power-cap" in text


# -------------------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_calibrate_cuda_for_real():
    import torch

    from roofline.measure.ceilings_gpu import calibrate_cuda

    steps = []
    cal = calibrate_cuda(torch, progress=lambda name, i, n: steps.append((name, i, n)), budget_s=8)
    assert steps[-1][0] == "done" and steps[-1][1] == steps[-1][2]
    copy, bf16 = cal.get("dram-copy"), cal.get("gemm-bf16")
    assert copy is not None and bf16 is not None, cal.skipped
    assert copy.value > 0 and bf16.value > 0
    if cal.machine.sheet is not None:
        assert copy.value < copy.spec_value and bf16.value < bf16.spec_value
        assert 0 < copy.ratio < 1 and 0 < bf16.ratio < 1
    assert cal.value("launch-events") > 0


# ------------------------------------------------------------------------------------ analyze --roofs


def test_analyze_uses_measured_roofs_when_cached(cli, cache):
    from roofline.measure.calibration import save

    args = ("analyze", "gemm", "-m", "8192", "-n", "8192", "-k", "8192", "--dtype", "bf16", "-d", "h100-sxm", "--json")
    assert cli(*args).json()["rows"][0]["roof_source"] == "spec"  # nothing cached yet
    missing = cli(*args, "--roofs", "measured")
    assert missing.code == 2 and "no calibration of h100-sxm is cached" in missing.err
    save(_gpu_cal())
    row = cli(*args).json()["rows"][0]
    assert row["roof_source"] == "measured"
    assert row["peak_flops_per_s"] == 785e12 and row["bandwidth_bytes_per_s"] == 3.03e12
    assert cli(*args, "--roofs", "spec").json()["rows"][0]["peak_flops_per_s"] == 989.4e12
    # fp8 was not measured: its roof stays the sheet's, and the row says so
    fp8 = cli(
        "analyze", "gemm", "-m", "8192", "-n", "8192", "-k", "8192", "--dtype", "fp8", "-d", "h100-sxm", "--json"
    ).json()["rows"][0]
    assert fp8["roof_source"] == "spec compute, measured bandwidth"
    assert "measured (calibration)" in cli(*args[:-1]).out


def test_ceiling_sets_throttled_samples_aside():
    from roofline.measure.ceilings import ceiling_time
    from roofline.measure.engine import Measurement

    def m(samples, throttled):
        from roofline.samples import median

        return Measurement(
            median_s=median(samples),
            p20_s=0,
            p80_s=0,
            samples_s=samples,
            method="cuda-events",
            cache="cold",
            stop_reason="converged",
            warmup_calls=1,
            elapsed_s=1.0,
            throttled=throttled,
        )

    fast, slow = [1.0e-3] * 6, [1.2e-3] * 6
    seconds, how = ceiling_time(m(fast + slow, [False] * 6 + [True] * 6))
    assert seconds == 1.0e-3 and "6 unthrottled samples (6 throttled set aside)" in how
    seconds, how = ceiling_time(m(fast[:3] + slow, [False] * 3 + [True] * 6))
    assert seconds == 1.2e-3 and "6 of 9 samples throttled" in how  # too few unthrottled: all samples
    assert ceiling_time(m(fast, [False] * 6)) == (1.0e-3, "")
