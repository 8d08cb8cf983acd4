"""roofline.roofs, the one roof resolver: --roofs, default devices, torch devices, a GPU's sheet and roofs (with a
fake torch and fake NVML), the CPU's errors. The CPU's measured roofs: tests/test_calibrate.py."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from roofline import roofs
from roofline.errors import DeviceError, UsageError
from roofline.measure import calibration as cal_mod
from roofline.measure.calibration import Calibration, Ceiling, Machine

H100_NAME = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    return tmp_path


def _h100_calibration() -> Calibration:
    return Calibration(
        created_utc=datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc),
        machine=Machine(kind="cuda", name=H100_NAME, sheet="h100-sxm", driver="580.1", cuda="12.8", torch="2.13.0"),
        ceilings=[
            Ceiling(name="dram-copy", kind="bandwidth", value=3.0e12, unit="B/s"),
            Ceiling(name="gemm-bf16", kind="compute", value=780e12, unit="FLOP/s", dtype="bf16"),
        ],
    )


class FakeTorch:
    """torch-shaped: GPUs by name (None: no CUDA)."""

    def __init__(self, names=None):
        props = [SimpleNamespace(name=name, uuid=None) for name in names or []]
        self.cuda = SimpleNamespace(
            is_available=lambda: bool(props),
            device_count=lambda: len(props),
            get_device_properties=lambda i: props[i],
            current_device=lambda: 0,
        )
        self.version = SimpleNamespace(cuda="12.8" if names else None, hip=None)
        self.__version__ = "2.13.0"


@pytest.fixture
def fake_gpus(monkeypatch):
    """NVML sees an Acme GPU and an H100; torch's device 0 is NVML's GPU 1 (found by UUID in real life)."""
    monkeypatch.setattr("roofline.specs.detect.nvml_gpu_names", lambda nvml=None: ["Acme Rocket 9000", H100_NAME])
    monkeypatch.setattr("roofline.specs.detect.nvml_index", lambda torch, index, **kw: index + 1)


# ------------------------------------------------------------------------------------------------ --roofs


def test_check_roofs():
    assert [roofs.check_roofs(r) for r in roofs.ROOFS] == ["auto", "spec", "measured"]
    with pytest.raises(UsageError, match="--roofs: 'magic' is not one of auto, spec, measured"):
        roofs.check_roofs("magic")


def test_with_roofs_spec_auto_measured(cache):
    from roofline.specs.loader import load_registry

    spec = roofs.device_from_sheet(load_registry().get("h100-sxm"))
    assert roofs.with_roofs(spec, "auto") == (spec, [])
    with pytest.raises(UsageError, match="no calibration of h100-sxm is cached"):
        roofs.with_roofs(spec, "measured")
    cal_mod.save(_h100_calibration())
    assert roofs.with_roofs(spec, "spec") == (spec, [])
    for mode in ("auto", "measured"):
        device, notes = roofs.with_roofs(spec, mode)
        assert device.roof_source == "measured" and device.dram_bandwidth == 3.0e12
        assert notes == [f"roofs measured by roofline calibrate on 2026-11-21 12:00 UTC ({H100_NAME})"]


def test_sheet_devices_dedupes_and_defaults(monkeypatch, cache):
    devices = roofs.sheet_devices(["h100-sxm", "a100-sxm-80gb", "h100-sxm"])
    assert [d.name for d in devices] == ["h100-sxm", "a100-sxm-80gb"]
    monkeypatch.setenv("ROOFLINE_DEVICE", "l4")
    assert [d.name for d in roofs.sheet_devices(None)] == ["l4"]


def test_default_device_names(monkeypatch):
    assert roofs.default_device_names({"ROOFLINE_DEVICE": "h100-sxm, l4"}) == ["h100-sxm", "l4"]
    with pytest.raises(UsageError, match="ROOFLINE_DEVICE: empty item"):
        roofs.default_device_names({"ROOFLINE_DEVICE": "h100-sxm,,l4"})
    monkeypatch.setattr("roofline.specs.detect.nvml_gpu_names", lambda nvml=None: [H100_NAME, "other"])
    assert roofs.default_device_names({}) == [H100_NAME]
    monkeypatch.setattr("roofline.specs.detect.nvml_gpu_names", lambda nvml=None: [])
    with pytest.raises(UsageError, match="no --device given and no GPU detected"):
        roofs.default_device_names({})


# ------------------------------------------------------------------------------------------ torch devices


def test_device_kind_and_torch_device(monkeypatch):
    monkeypatch.setattr(roofs, "_import_torch", lambda: FakeTorch())
    assert roofs.device_kind(None) == "cpu" and roofs.torch_device(None) == "cpu"
    assert roofs.device_kind(" CUDA:1 ") == "cuda" and roofs.torch_device("cpu") == "cpu"
    with pytest.raises(UsageError, match=r"--device 'tpu': use cpu or cuda \(cuda:N for GPU N\)"):
        roofs.torch_device("tpu")
    with pytest.raises(UsageError, match=r"--device 'cuda:1': use cpu or cuda$"):
        roofs.torch_device("cuda:1", indexed=False)
    with pytest.raises(DeviceError, match="sees no CUDA GPU: use --device cpu"):
        roofs.torch_device("cuda")
    monkeypatch.setattr(roofs, "_import_torch", lambda: FakeTorch([H100_NAME]))
    assert roofs.torch_device(None) == "cuda" and roofs.torch_device("cuda:0") == "cuda:0"
    with pytest.raises(DeviceError, match="this machine has 1 CUDA GPU"):
        roofs.torch_device("cuda:1")
    assert roofs.torch_index("cuda") == 0 and roofs.torch_index("cuda:3") == 3


def test_gpu_roofs_match_the_name_nvml_reports_for_the_gpu(fake_gpus, cache):
    torch = FakeTorch(["H100 as torch names it"])
    assert roofs.gpu_names(torch, 0) == ([H100_NAME, "H100 as torch names it"], 1)
    gpu = roofs.gpu_roofs(torch, 0)
    assert (gpu.sheet.name, gpu.nvml_index, gpu.device.roof_source, gpu.notes) == ("h100-sxm", 1, "spec", [])
    cal_mod.save(_h100_calibration())
    gpu = roofs.gpu_roofs(torch, 0)
    assert gpu.device.roof_source == "measured" and gpu.notes[0].startswith("roofs measured by roofline calibrate")
    assert roofs.gpu_roofs(torch, 0, roofs="spec").device.roof_source == "spec"
    assert roofs.gpu_roofs(torch, 0, sheet="h200-sxm").sheet.name == "h200-sxm"


def test_gpu_sheet_without_a_match():
    with pytest.raises(UsageError, match="no spec sheet matches 'Acme Rocket 9000': name its sheet with --sheet"):
        roofs.gpu_sheet(["Acme Rocket 9000"])
    assert roofs.gpu_sheet(["Acme Rocket 9000"], required=False) is None


def test_device_roofs_on_the_cpu_refuses_a_sheet_and_spec_roofs(monkeypatch):
    monkeypatch.setattr(roofs, "_import_torch", lambda: FakeTorch())
    monkeypatch.setattr(roofs, "cpu_roofs", lambda torch: ("measured cpu", ["note"]))
    assert roofs.device_roofs("cpu") == ("measured cpu", ["note"])
    with pytest.raises(UsageError, match="--sheet names a GPU spec sheet"):
        roofs.device_roofs("cpu", sheet="h100-sxm")
    with pytest.raises(UsageError, match="--roofs spec: the CPU has no spec sheet"):
        roofs.device_roofs("cpu", roofs="spec")


def test_device_roofs_on_a_gpu(monkeypatch, fake_gpus, cache):
    monkeypatch.setattr(roofs, "_import_torch", lambda: FakeTorch([H100_NAME, H100_NAME]))
    device, notes = roofs.device_roofs("cuda:1")
    assert device.name == "h100-sxm" and notes == []
    with pytest.raises(UsageError, match="--roofs measured: no calibration of h100-sxm"):
        roofs.device_roofs("cuda", roofs="measured")


def test_calibration_for_a_gpu_uses_its_sheet(monkeypatch, fake_gpus, cache):
    seen = {}

    def calibrate_cuda(torch, *, spec=None, progress=None):
        seen["spec"] = spec
        return _h100_calibration()

    monkeypatch.setattr("roofline.measure.ceilings_gpu.calibrate_cuda", calibrate_cuda)
    monkeypatch.setattr("roofline.specs.detect.driver_version", lambda nvml=None: "580.1")
    torch = FakeTorch([H100_NAME])
    torch.cuda.get_device_properties(0).__dict__.update(major=9, minor=0, multi_processor_count=132, total_memory=1)
    lookup = roofs.calibration_for("cuda", torch=torch)
    assert not lookup.from_cache and seen["spec"].name == "h100-sxm" and lookup.path.is_file()
    again = roofs.calibration_for("cuda", torch=torch)  # same driver, CUDA and torch: the same machine key
    assert again.from_cache and again.calibration.machine.sheet == "h100-sxm" and len(seen) == 1
