"""What hardware is this? GPUs through NVML and torch, the CPU through /proc/cpuinfo and torch.

Pure apart from reading the machine: nothing is printed (rendering lives elsewhere) and NVML is used
read-only (never a set call). Every backend is injectable, so tests run with fakes on any machine:

- ``nvml``: an object shaped like the ``pynvml`` module (``nvmlInit``, ``nvmlDeviceGetCount``, ...).
  Default: ``pynvml``, imported lazily; if the import fails or ``nvmlInit`` raises, NVML is skipped silently.
- ``torch``: an object shaped like the ``torch`` module (``cuda.is_available``, ``cuda.device_count``,
  ``cuda.get_device_properties``, ``backends.cpu.get_cpu_capability``, ``get_num_threads``).
  Default: ``torch``, imported lazily; skipped if not installed.
- ``cpu_reader``: a callable returning the text of /proc/cpuinfo, or None where there is none.

Pass ``nvml=False`` or ``torch=False`` to switch a backend off.

A GPU's derived DRAM bandwidth is max memory clock (MHz) x 2 x bus width (bits) / 8, with the clock as the
driver reports it (H100: 2619 x 2 x 5120 / 8 = 3352 GB/s). The formula holds for NVIDIA parts; under a ROCm
build of torch without NVML it is not derived (AMD drivers report the HBM clock on another basis).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from roofline.specs.loader import SpecRegistry, normalize
from roofline.specs.schema import SpecSheet

WARN_FRACTION = 0.05  # a check warns when |derived / sheet - 1| exceeds this
CPU_NOTE = "CPU roofs come from measurement (roofline calibrate), not a spec sheet"
CPUINFO_PATH = "/proc/cpuinfo"

# pynvml's values, used when an injected NVML object lacks the constants.
_NVML_CLOCK_SM = 1
_NVML_CLOCK_MEM = 2


@dataclass
class Check:
    """One quantity read from the device compared with the matched sheet; ``ratio`` = derived / sheet."""

    quantity: str
    unit: str
    derived: float
    sheet: float
    ratio: float
    warn: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GpuInfo:
    index: int
    name: str
    source: str  # "nvml", "torch" or "nvml+torch"
    sheet: str | None = None  # canonical name of the matched spec sheet
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    memory_clock_mhz: float | None = None
    bus_width_bits: int | None = None
    max_sm_clock_mhz: float | None = None
    compute_capability: str | None = None
    driver_version: str | None = None
    derived_bandwidth_gb_per_s: float | None = None
    checks: list[Check] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CpuInfo:
    model: str
    logical_cores: int | None
    physical_cores: int | None
    isa: str | None
    torch_threads: int | None
    note: str = CPU_NOTE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Detection:
    gpus: list[GpuInfo]
    cpu: CpuInfo
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------------- helpers


def _call(fn: Callable[..., Any] | None, *args: Any) -> Any:
    """fn(*args), or None if fn is missing or raises (NVMLError, AttributeError, RuntimeError, ...)."""
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    text = str(value).strip()
    return text or None


def _positive_int(value: Any) -> int | None:
    """An int > 0, else None (torch reports 0 for fields a driver does not fill)."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _khz_to_mhz(value: Any) -> float | None:
    khz = _positive_int(value)
    return khz / 1000 if khz is not None else None


def _fmt(value: float) -> str:
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def derive_bandwidth_gb_per_s(memory_clock_mhz: float | None, bus_width_bits: int | None) -> float | None:
    """Peak DRAM bandwidth in GB/s: clock (MHz) x 2 (double data rate) x bus width (bits) / 8 / 1000."""
    if not memory_clock_mhz or not bus_width_bits:
        return None
    return memory_clock_mhz * 2 * bus_width_bits / 8 / 1000


# ------------------------------------------------------------------------------------------------ NVML


def _import_pynvml() -> Any:
    try:
        import pynvml
    except Exception:
        return None
    return pynvml


def _read_nvml(nvml: Any) -> list[dict[str, Any]]:
    """One dict per device NVML sees, in NVML's index order; [] if NVML cannot be initialised."""
    if nvml is None:
        return []
    try:
        nvml.nvmlInit()
    except Exception:
        return []
    try:
        clock_sm = getattr(nvml, "NVML_CLOCK_SM", _NVML_CLOCK_SM)
        clock_mem = getattr(nvml, "NVML_CLOCK_MEM", _NVML_CLOCK_MEM)

        def fn(name: str) -> Callable[..., Any] | None:
            return getattr(nvml, name, None)  # a function this pynvml lacks reads as None

        driver = _text(_call(fn("nvmlSystemGetDriverVersion")))
        count = _positive_int(_call(fn("nvmlDeviceGetCount"))) or 0
        devices = []
        for index in range(count):
            handle = _call(fn("nvmlDeviceGetHandleByIndex"), index)
            if handle is None:
                continue
            memory = _call(fn("nvmlDeviceGetMemoryInfo"), handle)
            capability = _call(fn("nvmlDeviceGetCudaComputeCapability"), handle)
            devices.append(
                {
                    "index": index,
                    "name": _text(_call(fn("nvmlDeviceGetName"), handle)),
                    "memory_bytes": _positive_int(getattr(memory, "total", None)),
                    "bus_width_bits": _positive_int(_call(fn("nvmlDeviceGetMemoryBusWidth"), handle)),
                    "max_sm_clock_mhz": _positive_int(_call(fn("nvmlDeviceGetMaxClockInfo"), handle, clock_sm)),
                    "memory_clock_mhz": _positive_int(_call(fn("nvmlDeviceGetMaxClockInfo"), handle, clock_mem)),
                    "compute_capability": _capability(capability),
                    "driver_version": driver,
                }
            )
        return devices
    finally:
        _call(getattr(nvml, "nvmlShutdown", None))


def nvml_gpu_names(nvml: Any = None) -> list[str]:
    """Names of the GPUs NVML sees (read-only, no torch import): the cheap default for --device."""
    devices = _read_nvml(_import_pynvml() if nvml is None else nvml)
    return [d["name"] for d in devices if d.get("name")]


def _capability(value: Any) -> str | None:
    try:
        major, minor = value
        return f"{int(major)}.{int(minor)}"
    except (TypeError, ValueError):
        return None


# ----------------------------------------------------------------------------------------------- torch


def _import_torch() -> Any:
    try:
        import torch
    except Exception:
        return None
    return torch


def _read_torch_gpus(torch: Any) -> list[dict[str, Any]]:
    if torch is None:
        return []
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not _call(getattr(cuda, "is_available", None)):
        return []
    count = _positive_int(_call(getattr(cuda, "device_count", None))) or 0
    devices = []
    for index in range(count):
        props = _call(getattr(cuda, "get_device_properties", None), index)
        if props is None:
            continue
        major, minor = getattr(props, "major", None), getattr(props, "minor", None)
        devices.append(
            {
                "index": index,
                "name": _text(getattr(props, "name", None)),
                "sm_count": _positive_int(getattr(props, "multi_processor_count", None)),
                "l2_bytes": _positive_int(getattr(props, "L2_cache_size", None)),
                "memory_bytes": _positive_int(getattr(props, "total_memory", None)),
                "memory_clock_mhz": _khz_to_mhz(getattr(props, "memory_clock_rate", None)),
                "bus_width_bits": _positive_int(getattr(props, "memory_bus_width", None)),
                "max_sm_clock_mhz": _khz_to_mhz(getattr(props, "clock_rate", None)),
                "compute_capability": _capability((major, minor)) if major is not None else None,
            }
        )
    return devices


def _is_rocm(torch: Any) -> bool:
    return getattr(getattr(torch, "version", None), "hip", None) is not None


def _visible_nvml_indices(count: int, env: dict[str, str]) -> list[int] | None:
    """NVML index of each torch device under CUDA_VISIBLE_DEVICES, when it is a list of integers."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    entries = [e.strip() for e in value.split(",") if e.strip()]
    try:
        indices = [int(e) for e in entries]
    except ValueError:
        return None  # UUIDs or MIG ids: fall back to index order, checked by name
    return indices[:count]


# ------------------------------------------------------------------------------------------------- CPU


def _read_cpuinfo() -> str | None:
    try:
        with open(CPUINFO_PATH, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _parse_cpuinfo(text: str | None) -> tuple[str | None, int | None]:
    """(model name, physical core count) from /proc/cpuinfo text; None for what it does not say."""
    if not text:
        return None, None
    model: str | None = None
    cores: set[tuple[str, str]] = set()
    complete = True
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields.setdefault(key.strip().lower(), value.strip())
        if "processor" not in fields:
            continue
        if model is None and fields.get("model name"):
            model = fields["model name"]
        if "physical id" in fields and "core id" in fields:
            cores.add((fields["physical id"], fields["core id"]))
        else:
            complete = False
    return model, (len(cores) if cores and complete else None)


def _describe_cpu(torch: Any, cpu_reader: Callable[[], str | None]) -> CpuInfo:
    model, physical = _parse_cpuinfo(_call(cpu_reader))
    model = model or platform.processor() or platform.machine() or "unknown"
    isa = threads = None
    if torch is not None:
        cpu_backend = getattr(getattr(torch, "backends", None), "cpu", None)
        isa = _text(_call(getattr(cpu_backend, "get_cpu_capability", None)))
        threads = _positive_int(_call(getattr(torch, "get_num_threads", None)))
    return CpuInfo(model=model, logical_cores=os.cpu_count(), physical_cores=physical, isa=isa, torch_threads=threads)


# ---------------------------------------------------------------------------------------------- checks


def _checks(gpu: GpuInfo, sheet: SpecSheet) -> list[tuple[Check, str]]:
    """(check, what it is in a warning) for each quantity both the device and the sheet give."""
    dram = sheet.memory.dram
    pairs: list[tuple[str, str, str, float | None, float | None]] = [
        (
            "dram bandwidth",
            "GB/s",
            "derived DRAM bandwidth",
            gpu.derived_bandwidth_gb_per_s,
            dram.bandwidth_gb_per_s,
        ),
        (
            "SM count" if sheet.compute_unit_name == "SM" else f"{sheet.compute_unit_name} count",
            sheet.compute_unit_name,
            f"reported {sheet.compute_unit_name} count",
            gpu.sm_count,
            sheet.compute_units,
        ),
        (
            "L2 capacity",
            "MiB",
            "reported L2 capacity",
            gpu.l2_bytes / 2**20 if gpu.l2_bytes else None,
            sheet.memory.l2.capacity_mib if sheet.memory.l2 else None,
        ),
        # Sheets quote memory as marketing "GB", which for GPU memory means GiB: an H100 80GB reports
        # 85045460992 B (79.2 GiB, 1% under 80 GiB but 6% over 80e9), so compare in GiB.
        (
            "memory capacity",
            "GiB",
            "reported memory capacity",
            gpu.memory_bytes / 2**30 if gpu.memory_bytes else None,
            dram.capacity_gb,
        ),
    ]
    out = []
    for quantity, unit, what, derived, expected in pairs:
        if derived is None or not expected:
            continue
        ratio = derived / expected
        out.append((Check(quantity, unit, derived, float(expected), ratio, abs(ratio - 1) > WARN_FRACTION), what))
    return out


# ------------------------------------------------------------------------------------------------ main

_FIELDS = (
    "sm_count",
    "l2_bytes",
    "memory_bytes",
    "memory_clock_mhz",
    "bus_width_bits",
    "max_sm_clock_mhz",
    "compute_capability",
    "driver_version",
)


def _merge(
    nvml_devs: list[dict[str, Any]],
    torch_devs: list[dict[str, Any]],
    env: dict[str, str],
    warnings: list[str],
) -> list[dict[str, Any]]:
    """One record per GPU: NVML's fields first (name, memory clock included), torch's filling the gaps."""
    if not torch_devs:
        return [dict(d, source="nvml") for d in nvml_devs]
    if not nvml_devs:
        return [dict(d, source="torch") for d in torch_devs]
    by_index = {d["index"]: dict(d, source="nvml") for d in nvml_devs}
    mapping = _visible_nvml_indices(len(torch_devs), env)
    extra = []
    for position, tdev in enumerate(torch_devs):
        target = mapping[position] if mapping is not None and position < len(mapping) else tdev["index"]
        ndev = by_index.get(target)
        if ndev is None:
            extra.append(dict(tdev, source="torch"))
            continue
        if ndev["name"] and tdev["name"] and normalize(ndev["name"]) != normalize(tdev["name"]):
            warnings.append(
                f"NVML GPU {target} is {ndev['name']!r} but torch device {tdev['index']} is "
                f"{tdev['name']!r}: not merged (check CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER)"
            )
            extra.append(dict(tdev, source="torch", index=tdev["index"]))
            continue
        for key in (*_FIELDS, "name"):
            if ndev.get(key) is None and tdev.get(key) is not None:
                ndev[key] = tdev[key]
        ndev["source"] = "nvml+torch"
    return [by_index[i] for i in sorted(by_index)] + extra


def detect(
    registry: SpecRegistry,
    *,
    nvml: Any = None,
    torch: Any = None,
    cpu_reader: Callable[[], str | None] | None = None,
    env: dict[str, str] | None = None,
) -> Detection:
    """Describe this machine's GPUs (matched against ``registry``) and CPU. See the module docstring."""
    env = os.environ if env is None else env
    nvml = None if nvml is False else (nvml if nvml is not None else _import_pynvml())
    torch = None if torch is False else (torch if torch is not None else _import_torch())
    cpu_reader = cpu_reader or _read_cpuinfo

    warnings: list[str] = []
    nvml_devs = _read_nvml(nvml)
    torch_devs = _read_torch_gpus(torch)
    derive = bool(nvml_devs) or not _is_rocm(torch)

    gpus: list[GpuInfo] = []
    for record in _merge(nvml_devs, torch_devs, env, warnings):
        gpu = GpuInfo(
            index=record["index"],
            name=record["name"] or "unknown GPU",
            source=record["source"],
            **{key: record.get(key) for key in _FIELDS},
        )
        if derive:
            gpu.derived_bandwidth_gb_per_s = derive_bandwidth_gb_per_s(gpu.memory_clock_mhz, gpu.bus_width_bits)
        sheet = registry.find(record["name"]) if record["name"] else None
        if sheet is None:
            warnings.append(f"no spec sheet matches {gpu.name!r}: add one with --spec FILE (see docs/spec-sheets.md)")
        else:
            gpu.sheet = sheet.name
            for check, what in _checks(gpu, sheet):
                gpu.checks.append(check)
                if check.warn:
                    warnings.append(
                        f"{sheet.name}: {what} {_fmt(check.derived)} {check.unit} differs from the sheet's "
                        f"{_fmt(check.sheet)} {check.unit} by {abs(check.ratio - 1) * 100:.1f}%"
                    )
        gpus.append(gpu)

    return Detection(gpus=gpus, cpu=_describe_cpu(torch, cpu_reader), warnings=list(dict.fromkeys(warnings)))
