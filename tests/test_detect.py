"""roofline.specs.detect with fake NVML / torch backends (and one real-GPU test, skipped without CUDA)."""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

import pytest

from roofline.specs.detect import CPU_NOTE, Detection, derive_bandwidth_gb_per_s, detect, nvml_index
from roofline.specs.loader import load_registry

H100_NAME = "NVIDIA H100 80GB HBM3"


class NVMLError(Exception):
    pass


class FakeNVML:
    """pynvml-shaped: devices are dicts; a name in ``failing`` raises NVMLError when called, one in
    ``missing`` does not exist (an older pynvml)."""

    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2

    def __init__(self, devices, *, failing=(), missing=(), driver="550.54.15", init_fails=False):
        self.devices = devices
        self.failing = set(failing)
        self.missing = set(missing)
        self.driver = driver
        self.init_fails = init_fails
        self.calls: list[str] = []

    def __getattribute__(self, name):
        if name.startswith("nvml"):
            self.calls.append(name)
            if name in object.__getattribute__(self, "missing"):
                raise AttributeError(name)
            if name in object.__getattribute__(self, "failing"):

                def fail(*args):
                    raise NVMLError(name)

                return fail
        return object.__getattribute__(self, name)

    def nvmlInit(self):
        if self.init_fails:
            raise NVMLError("driver not loaded")

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return self.driver.encode()

    def nvmlDeviceGetCount(self):
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.devices[index]

    def nvmlDeviceGetName(self, handle):
        return handle["name"].encode()  # older pynvml returns bytes

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=handle["memory"], free=0, used=0)

    def nvmlDeviceGetMemoryBusWidth(self, handle):
        return handle["bus"]

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        return handle["sm_clock"] if clock == self.NVML_CLOCK_SM else handle["mem_clock"]

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return handle["cc"]


def nvml_h100(**overrides):
    device = {
        "name": H100_NAME,
        "memory": 85520809984,
        "bus": 5120,
        "sm_clock": 1980,
        "mem_clock": 2619,
        "cc": (9, 0),
    }
    device.update(overrides)
    return device


def h100_props(**overrides):
    props = {
        "name": H100_NAME,
        "multi_processor_count": 132,
        "L2_cache_size": 52428800,
        "total_memory": 85045460992,
        "major": 9,
        "minor": 0,
        "memory_clock_rate": 2619000,
        "memory_bus_width": 5120,
        "clock_rate": 1980000,
    }
    props.update(overrides)
    return SimpleNamespace(**{k: v for k, v in props.items() if v is not None})


class FakeTorch:
    def __init__(self, props=(), *, isa="AVX512", threads=8):
        self._props = list(props)
        self.cuda = SimpleNamespace(
            is_available=lambda: bool(self._props),
            device_count=lambda: len(self._props),
            get_device_properties=lambda i: self._props[i],
        )
        self.backends = SimpleNamespace(cpu=SimpleNamespace(get_cpu_capability=lambda: isa))
        self.version = SimpleNamespace(hip=None, cuda="12.4")
        self.get_num_threads = lambda: threads


CPUINFO = "\n\n".join(
    f"processor\t: {n}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    f"physical id\t: {phys}\ncore id\t\t: {core}\nflags\t\t: fpu avx512f"
    # 2 sockets x 2 cores x 2 hyperthreads = 8 logical, 4 physical
    for n, (phys, core) in enumerate([(p, c) for p in (0, 1) for c in (0, 1)] * 2)
)


@pytest.fixture(scope="module")
def registry():
    return load_registry(env={})


def run(registry, *, nvml=False, torch=None, cpuinfo=CPUINFO, env=None) -> Detection:
    return detect(
        registry,
        nvml=nvml,
        torch=torch if torch is not None else FakeTorch(),
        cpu_reader=lambda: cpuinfo,
        env=env or {},
    )


def test_bandwidth_arithmetic():
    assert derive_bandwidth_gb_per_s(2619, 5120) == pytest.approx(3352.32)
    assert derive_bandwidth_gb_per_s(3201, 6016) == pytest.approx(4814.3, abs=0.1)
    assert derive_bandwidth_gb_per_s(None, 5120) is None
    assert derive_bandwidth_gb_per_s(2619, None) is None


def test_h100_from_torch_matches_sheet_without_warnings(registry):
    result = run(registry, torch=FakeTorch([h100_props()]))
    assert result.warnings == []
    (gpu,) = result.gpus
    assert gpu.index == 0
    assert gpu.name == H100_NAME
    assert gpu.source == "torch"
    assert gpu.sheet == "h100-sxm"
    assert gpu.sm_count == 132
    assert gpu.l2_bytes == 52428800
    assert gpu.memory_bytes == 85045460992
    assert gpu.memory_clock_mhz == 2619
    assert gpu.bus_width_bits == 5120
    assert gpu.max_sm_clock_mhz == 1980
    assert gpu.compute_capability == "9.0"
    assert gpu.driver_version is None  # only NVML gives it
    assert gpu.derived_bandwidth_gb_per_s == pytest.approx(3352.32)
    checks = {c.quantity: c for c in gpu.checks}
    assert set(checks) == {"dram bandwidth", "SM count", "L2 capacity", "memory capacity"}
    assert not any(c.warn for c in gpu.checks)
    assert checks["dram bandwidth"].sheet == 3350
    assert checks["dram bandwidth"].ratio == pytest.approx(3352.32 / 3350)
    assert checks["SM count"].ratio == 1
    assert checks["L2 capacity"].derived == 50
    assert checks["L2 capacity"].unit == "MiB"
    # 85045460992 B = 79.2 GiB against the sheet's 80 (GB read as GiB): 1% under, no warning.
    assert checks["memory capacity"].unit == "GiB"
    assert checks["memory capacity"].ratio == pytest.approx(85045460992 / (80 * 2**30))


def test_h100_nvml_and_torch_merge(registry):
    result = run(registry, nvml=FakeNVML([nvml_h100()]), torch=FakeTorch([h100_props()]))
    assert result.warnings == []
    (gpu,) = result.gpus
    assert gpu.source == "nvml+torch"
    assert gpu.sheet == "h100-sxm"
    assert gpu.name == H100_NAME  # bytes decoded
    assert gpu.driver_version == "550.54.15"
    assert gpu.memory_bytes == 85520809984  # NVML preferred
    assert gpu.sm_count == 132 and gpu.l2_bytes == 52428800  # torch fills what NVML lacks
    assert gpu.derived_bandwidth_gb_per_s == pytest.approx(3352.32)
    json.dumps(result.to_dict())  # JSON-ready


def test_nvml_memory_clock_preferred_over_torch(registry):
    result = run(
        registry,
        nvml=FakeNVML([nvml_h100(mem_clock=2619)]),
        torch=FakeTorch([h100_props(memory_clock_rate=1593000)]),
    )
    assert result.gpus[0].memory_clock_mhz == 2619
    assert result.warnings == []


def test_bandwidth_off_by_20_percent_warns_with_numbers(registry):
    # 2095.2 MHz x 2 x 5120 / 8 = 2681.856 GB/s, 20% under the sheet's 3350
    result = run(registry, torch=FakeTorch([h100_props(memory_clock_rate=2095200)]))
    gpu = result.gpus[0]
    check = next(c for c in gpu.checks if c.quantity == "dram bandwidth")
    assert check.warn
    assert check.ratio == pytest.approx(0.80, abs=0.001)
    assert result.warnings == ["h100-sxm: derived DRAM bandwidth 2682 GB/s differs from the sheet's 3350 GB/s by 19.9%"]


def test_other_checks_warn_beyond_five_percent(registry):
    props = h100_props(multi_processor_count=114, L2_cache_size=52428800, total_memory=70 * 2**30)
    result = run(registry, torch=FakeTorch([props]))
    warned = {c.quantity for c in result.gpus[0].checks if c.warn}
    assert warned == {"SM count", "memory capacity"}
    assert "h100-sxm: reported SM count 114 SM differs from the sheet's 132 SM by 13.6%" in result.warnings
    assert any(w.startswith("h100-sxm: reported memory capacity 70 GiB") for w in result.warnings)


def test_unknown_gpu_gets_no_sheet_and_a_warning(registry):
    result = run(registry, torch=FakeTorch([h100_props(name="Acme Rocket 9000")]))
    (gpu,) = result.gpus
    assert gpu.sheet is None
    assert gpu.checks == []
    assert gpu.derived_bandwidth_gb_per_s == pytest.approx(3352.32)
    assert result.warnings == [
        "no spec sheet matches 'Acme Rocket 9000': add one with --spec FILE (see docs/spec-sheets.md)"
    ]


def test_identical_gpus_warn_once(registry):
    result = run(registry, torch=FakeTorch([h100_props(name="Acme Rocket 9000")] * 4))
    assert [g.index for g in result.gpus] == [0, 1, 2, 3]
    assert len(result.warnings) == 1


def test_nvml_raising_leaves_fields_none(registry):
    failing = {
        "nvmlDeviceGetMemoryBusWidth",
        "nvmlDeviceGetMaxClockInfo",
        "nvmlDeviceGetCudaComputeCapability",
        "nvmlSystemGetDriverVersion",
    }
    fake = FakeNVML([nvml_h100()], failing=failing, missing={"nvmlDeviceGetMemoryInfo"})
    result = run(registry, nvml=fake)
    (gpu,) = result.gpus
    assert gpu.source == "nvml"
    assert gpu.name == H100_NAME and gpu.sheet == "h100-sxm"
    assert gpu.bus_width_bits is None
    assert gpu.memory_clock_mhz is None and gpu.max_sm_clock_mhz is None
    assert gpu.compute_capability is None and gpu.driver_version is None
    assert gpu.memory_bytes is None
    assert gpu.derived_bandwidth_gb_per_s is None
    assert gpu.checks == []  # nothing NVML-only to compare (SM count and L2 need torch)
    assert result.warnings == []
    assert "nvmlShutdown" in fake.calls


def test_nvml_init_failure_is_silent(registry):
    result = run(registry, nvml=FakeNVML([nvml_h100()], init_fails=True), torch=FakeTorch([h100_props()]))
    assert [g.source for g in result.gpus] == ["torch"]
    assert result.warnings == []


def test_nvml_is_only_read():
    fake = FakeNVML([nvml_h100()])
    detect(load_registry(env={}), nvml=fake, torch=FakeTorch(), cpu_reader=lambda: None, env={})
    assert fake.calls, "NVML was not used"
    assert not [c for c in fake.calls if "Set" in c or "Reset" in c]


def test_torch_without_memory_clock_uses_nvml(registry):
    props = h100_props(memory_clock_rate=None, memory_bus_width=None, clock_rate=None)
    result = run(registry, nvml=FakeNVML([nvml_h100()]), torch=FakeTorch([props]))
    gpu = result.gpus[0]
    assert gpu.memory_clock_mhz == 2619 and gpu.bus_width_bits == 5120
    assert gpu.derived_bandwidth_gb_per_s == pytest.approx(3352.32)
    assert result.warnings == []


def test_old_torch_alone_gives_no_bandwidth(registry):
    props = h100_props(memory_clock_rate=None, memory_bus_width=None, clock_rate=None)
    result = run(registry, torch=FakeTorch([props]))
    gpu = result.gpus[0]
    assert gpu.memory_clock_mhz is None and gpu.derived_bandwidth_gb_per_s is None
    assert "dram bandwidth" not in {c.quantity for c in gpu.checks}
    assert result.warnings == []


def test_cuda_visible_devices_maps_torch_to_nvml_index(registry):
    other = nvml_h100(name="Acme Rocket 9000")
    nvml = FakeNVML([other, other, nvml_h100()])
    result = run(registry, nvml=nvml, torch=FakeTorch([h100_props()]), env={"CUDA_VISIBLE_DEVICES": "2"})
    merged = [g for g in result.gpus if g.source == "nvml+torch"]
    assert [(g.index, g.sheet, g.sm_count) for g in merged] == [(2, "h100-sxm", 132)]
    assert not any("not merged" in w for w in result.warnings)


# ------------------------------------------------------------------------------------ GPU index by UUID

UUID_A = "58f1d1d0-3c5e-4f8a-9d3a-0c1b2a3d4e5f"
UUID_B = "11111111-2222-3333-4444-555555555555"


class UuidNVML(FakeNVML):
    """FakeNVML that also finds devices by UUID (a device dict's 'uuid'; 'mig' lists its MIG instances' UUIDs)."""

    def nvmlDeviceGetHandleByUUID(self, text):
        text = text.decode() if isinstance(text, bytes) else text
        for device in self.devices:
            if device.get("uuid") == text:
                return device
            if text in device.get("mig", ()):
                return {"mig_of": device}
        raise NVMLError("NVML_ERROR_NOT_FOUND")

    def nvmlDeviceIsMigDeviceHandle(self, handle):
        return "mig_of" in handle

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle):
        return handle["mig_of"]

    def nvmlDeviceGetIndex(self, handle):
        return next(i for i, device in enumerate(self.devices) if device is handle)


def test_nvml_index_by_uuid_ignores_visible_devices_order():
    # CUDA's FASTEST_FIRST order put NVML's GPU 1 first: the UUID finds it, CUDA_VISIBLE_DEVICES integers would not
    nvml = UuidNVML([nvml_h100(uuid=f"GPU-{UUID_B}"), nvml_h100(uuid=f"GPU-{UUID_A}")])
    torch = FakeTorch([h100_props(uuid=UUID_A), h100_props(uuid=UUID_B)])
    env = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert [nvml_index(torch, i, nvml=nvml, env=env) for i in (0, 1)] == [1, 0]
    assert nvml.calls.count("nvmlInit") == nvml.calls.count("nvmlShutdown")  # every init paired with a shutdown


def test_nvml_index_of_a_mig_instance_is_its_gpu():
    nvml = UuidNVML([nvml_h100(uuid=f"GPU-{UUID_B}"), nvml_h100(uuid=f"GPU-{UUID_A}", mig=[f"MIG-{UUID_B[:-1]}6"])])
    torch = FakeTorch([h100_props(uuid=f"{UUID_B[:-1]}6")])
    assert nvml_index(torch, 0, nvml=nvml, env={"CUDA_VISIBLE_DEVICES": f"MIG-{UUID_B[:-1]}6"}) == 1


def test_nvml_index_takes_prefixed_and_binary_uuids():
    import uuid

    nvml = UuidNVML([nvml_h100(uuid=f"GPU-{UUID_B}"), nvml_h100(uuid=f"GPU-{UUID_A}")])
    assert nvml_index(FakeTorch([h100_props(uuid=f"GPU-{UUID_A}")]), 0, nvml=nvml, env={}) == 1
    assert nvml_index(FakeTorch([h100_props(uuid=uuid.UUID(UUID_A).bytes)]), 0, nvml=nvml, env={}) == 1


@pytest.mark.parametrize(
    ("torch_uuid", "nvml", "visible", "expected"),
    [
        (None, "uuid", "3,5", 5),  # torch gives no UUID: entry 1 of the integer list
        (UUID_A, "plain", "3,5", 5),  # a pynvml without nvmlDeviceGetHandleByUUID
        (UUID_A, "none", "3,5", 5),  # no NVML at all
        ("99999999-0000-0000-0000-000000000000", "uuid", "3,5", 5),  # a UUID NVML does not know
        (None, "uuid", f"GPU-{UUID_A},GPU-{UUID_B}", 1),  # UUIDs in the list, none from torch: torch's index
        (None, "uuid", None, 1),  # nothing to go on: torch's index
        (None, "uuid", "3", 1),  # beyond the list: torch's index
    ],
)
def test_nvml_index_fallback(torch_uuid, nvml, visible, expected):
    devices = [nvml_h100(uuid=f"GPU-{UUID_B}"), nvml_h100(uuid=f"GPU-{UUID_A}")]
    fake = {"uuid": UuidNVML(devices), "plain": FakeNVML(devices), "none": False}[nvml]
    torch = FakeTorch([h100_props(uuid=UUID_B), h100_props(uuid=torch_uuid)])
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert nvml_index(torch, 1, nvml=fake, env=env) == expected


def test_nvml_index_init_failure_falls_back():
    nvml = UuidNVML([nvml_h100(uuid=f"GPU-{UUID_A}")], init_fails=True)
    assert nvml_index(FakeTorch([h100_props(uuid=UUID_A)]), 0, nvml=nvml, env={"CUDA_VISIBLE_DEVICES": "7"}) == 7


def test_detect_merges_by_uuid(registry):
    nvml = UuidNVML([nvml_h100(name="Acme Rocket 9000", uuid=f"GPU-{UUID_B}"), nvml_h100(uuid=f"GPU-{UUID_A}")])
    result = run(registry, nvml=nvml, torch=FakeTorch([h100_props(uuid=UUID_A)]), env={"CUDA_VISIBLE_DEVICES": "0"})
    merged = [g for g in result.gpus if g.source == "nvml+torch"]
    assert [(g.index, g.sheet, g.sm_count) for g in merged] == [(1, "h100-sxm", 132)]
    assert not any("not merged" in w for w in result.warnings)


def test_mismatched_names_are_not_merged(registry):
    nvml = FakeNVML([nvml_h100(name="Acme Rocket 9000")])
    result = run(registry, nvml=nvml, torch=FakeTorch([h100_props()]))
    assert sorted(g.source for g in result.gpus) == ["nvml", "torch"]
    assert any("not merged" in w for w in result.warnings)


def test_sheet_from_tmp_path(tmp_path):
    sheet = tmp_path / "rocket.yaml"
    sheet.write_text(
        "name: acme-rocket\ndisplay_name: Acme Rocket 9000\nvendor: other\narchitecture: rocket\n"
        "aliases: ['Acme Rocket 9000']\ncompute_units: 132\n"
        "compute_dense_tflops: {vector: {fp32: 10}}\n"
        "memory: {dram: {type: HBM3, capacity_gb: 80, bandwidth_gb_per_s: 4000}}\n"
        "launch_floor_us: 5\nsources: ['test']\n"
    )
    registry = load_registry(extra_files=[sheet], env={})
    result = run(registry, torch=FakeTorch([h100_props(name="Acme Rocket 9000")]))
    gpu = result.gpus[0]
    assert gpu.sheet == "acme-rocket"
    assert "L2 capacity" not in {c.quantity for c in gpu.checks}  # the sheet gives no L2
    assert result.warnings == [
        "acme-rocket: derived DRAM bandwidth 3352 GB/s differs from the sheet's 4000 GB/s by 16.2%"
    ]


def test_no_gpu_describes_cpu(registry):
    result = run(registry, nvml=FakeNVML([]), torch=FakeTorch(isa="AVX2", threads=4))
    assert result.gpus == []
    assert result.warnings == []
    cpu = result.cpu
    assert cpu.model == "Intel(R) Xeon(R) Platinum 8480+"
    assert cpu.physical_cores == 4
    assert cpu.logical_cores == os.cpu_count()
    assert cpu.isa == "AVX2"
    assert cpu.torch_threads == 4
    assert cpu.note == CPU_NOTE
    assert json.loads(json.dumps(result.to_dict()))["cpu"]["physical_cores"] == 4


def test_cpuinfo_without_core_ids(registry):
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\nBogoMIPS\t: 50.00\n"
    cpu = run(registry, cpuinfo=arm).cpu
    assert cpu.physical_cores is None
    assert cpu.model  # platform fallback, never empty


def test_no_cpuinfo_and_no_torch(registry, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    monkeypatch.setitem(sys.modules, "pynvml", None)
    result = detect(registry, cpu_reader=lambda: None, env={})
    assert result.gpus == []
    assert result.cpu.physical_cores is None
    assert result.cpu.isa is None and result.cpu.torch_threads is None
    assert result.cpu.model


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA device")
def test_detect_real_gpu(registry):
    result = detect(registry)
    assert result.gpus
    assert any(g.sm_count and g.sm_count > 0 and g.sheet for g in result.gpus), result.to_dict()


def test_nvml_gpu_names_reads_names_only():
    from roofline.specs.detect import nvml_gpu_names

    class FakeNvml:
        def nvmlInit(self):
            pass

        def nvmlShutdown(self):
            pass

        def nvmlDeviceGetCount(self):
            return 1

        def nvmlDeviceGetHandleByIndex(self, index):
            return index

        def nvmlDeviceGetName(self, handle):
            return b"NVIDIA H100 80GB HBM3"

    assert nvml_gpu_names(FakeNvml()) == ["NVIDIA H100 80GB HBM3"]

    class Broken:
        def nvmlInit(self):
            raise RuntimeError("no driver")

    assert nvml_gpu_names(Broken()) == []
