"""What hardware is this? GPUs through NVML and torch, the CPU through /proc/cpuinfo, sysfs and torch.

- :func:`detect`: every GPU (matched against the spec sheets, checked against them) and the CPU, for
  `roofline specs detect`;
- :func:`describe_cuda` / :func:`describe_cpu`: the :class:`Machine` a calibration or a report is keyed on;
- :func:`nvml_index`: NVML's index of one of torch's CUDA devices, found by UUID;
- :func:`nvml_gpu_names`, :func:`llc_bytes`, :func:`cpu_model`: single facts.

Pure apart from reading the machine: nothing is printed (rendering lives elsewhere) and NVML is used
read-only (never a set call). Every backend is injectable, so tests run with fakes on any machine:

- ``nvml``: an object shaped like the ``pynvml`` module (``nvmlInit``, ``nvmlDeviceGetCount``, ...).
  Default: ``pynvml``, imported lazily; if the import fails or ``nvmlInit`` raises, NVML is skipped silently.
- ``torch``: an object shaped like the ``torch`` module (``cuda.is_available``, ``cuda.device_count``,
  ``cuda.get_device_properties``, ``backends.cpu.get_cpu_capability``, ``get_num_threads``).
  Default (:func:`detect`): ``torch`` when it is already imported, else imported only when there may be a GPU
  (NVML sees one, or a GPU device node exists: :data:`GPU_DEVICE_NODES`), since importing it takes seconds; a
  CPU-only machine is described from /proc/cpuinfo alone (its SIMD flags instead of torch's dispatch ISA).
  Skipped if not installed.
- ``cpu_reader``: a callable returning the text of /proc/cpuinfo, or None where there is none.

Pass ``nvml=False`` or ``torch=False`` to switch a backend off.

A GPU's derived DRAM bandwidth is max memory clock (MHz) x 2 x bus width (bits) / 8, with the clock as the
driver reports it (H100: 2619 x 2 x 5120 / 8 = 3352 GB/s). The formula holds for NVIDIA parts; under a ROCm
build of torch without NVML it is not derived (AMD drivers report the HBM clock on another basis).
"""

from __future__ import annotations

import os
import platform
import sys
import uuid as uuid_module
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from roofline.specs.loader import SpecRegistry, normalize
from roofline.specs.machine import Machine
from roofline.specs.schema import SpecSheet

WARN_FRACTION = 0.05  # a check warns when |derived / sheet - 1| exceeds this
CPU_NOTE = "CPU roofs come from measurement (roofline calibrate), not a spec sheet"
CPUINFO_PATH = "/proc/cpuinfo"
CPU_CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"
UNKNOWN_CPU = "unknown CPU"
#: device nodes a GPU driver creates (NVIDIA, AMD ROCm, WSL): without one (and no NVML device) torch sees no GPU
GPU_DEVICE_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")
NO_TORCH_NOTE = "torch not loaded (no GPU here): `roofline calibrate --device cpu` shows torch's threads and ISA"

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
    simd: str | None = None  # the widest SIMD /proc/cpuinfo lists (AVX-512, AVX2, ...), when torch was not loaded

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


def _nvml(nvml: Any) -> Any:
    """The NVML module to use: ``nvml`` (injected), pynvml when None, nothing when False."""
    if nvml is False:
        return None
    return nvml if nvml is not None else _import_pynvml()


def _driver(nvml: Any) -> str | None:
    return _text(_call(getattr(nvml, "nvmlSystemGetDriverVersion", None)))


def _init(nvml: Any) -> bool:
    """nvmlInit() succeeded (each success is paired with one nvmlShutdown(): NVML counts them)."""
    if nvml is None:
        return False
    try:
        nvml.nvmlInit()
    except Exception:
        return False
    return True


def driver_version(nvml: Any = None) -> str | None:
    """The NVIDIA driver's version through NVML (read-only), or None where NVML cannot be used."""
    nvml = _nvml(nvml)
    if not _init(nvml):
        return None
    try:
        return _driver(nvml)
    finally:
        _call(getattr(nvml, "nvmlShutdown", None))


def _read_nvml(nvml: Any) -> list[dict[str, Any]]:
    """One dict per device NVML sees, in NVML's index order; [] if NVML cannot be initialised."""
    if not _init(nvml):
        return []
    try:
        clock_sm = getattr(nvml, "NVML_CLOCK_SM", _NVML_CLOCK_SM)
        clock_mem = getattr(nvml, "NVML_CLOCK_MEM", _NVML_CLOCK_MEM)

        def fn(name: str) -> Callable[..., Any] | None:
            return getattr(nvml, name, None)  # a function this pynvml lacks reads as None

        driver = _driver(nvml)
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
    devices = _read_nvml(_nvml(nvml))
    return [d["name"] for d in devices if d.get("name")]


def torch_uuid(torch: Any, index: int) -> str | None:
    """The UUID of torch's CUDA device ``index`` as text ('58f1d1d0-...'), or None where torch gives none
    (an older torch, a fake, a device that cannot be queried)."""
    cuda = getattr(torch, "cuda", None)
    props = _call(getattr(cuda, "get_device_properties", None), index)
    raw = getattr(props, "uuid", None)
    if isinstance(raw, (bytes, bytearray)) and len(raw) == 16:
        return str(uuid_module.UUID(bytes=bytes(raw)))
    return _text(raw)


def _nvml_uuids(text: str) -> list[str]:
    """NVML's spellings of a device UUID: 'GPU-<uuid>' for a GPU, 'MIG-<uuid>' for a MIG instance."""
    if text[:4].upper() in ("GPU-", "MIG-"):
        return [text]
    return [f"GPU-{text}", f"MIG-{text}"]


def _nvml_index_by_uuid(nvml: Any, text: str) -> int | None:
    """NVML's index of the device (a MIG instance: of its GPU) whose UUID is ``text``; None when NVML cannot
    tell (no NVML, a pynvml without nvmlDeviceGetHandleByUUID, an unknown UUID)."""
    by_uuid = getattr(nvml, "nvmlDeviceGetHandleByUUID", None) if nvml is not None else None
    get_index = getattr(nvml, "nvmlDeviceGetIndex", None) if nvml is not None else None
    if by_uuid is None or get_index is None or not _init(nvml):
        return None
    try:
        for candidate in _nvml_uuids(text):
            handle = _call(by_uuid, candidate)
            if handle is None:
                continue
            if _call(getattr(nvml, "nvmlDeviceIsMigDeviceHandle", None), handle):
                handle = _call(getattr(nvml, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", None), handle)
            index = _call(get_index, handle) if handle is not None else None
            if isinstance(index, int) and index >= 0:
                return index
        return None
    finally:
        _call(getattr(nvml, "nvmlShutdown", None))


def visible_index(index: int, env: Mapping[str, str] | None = None) -> int:
    """The fallback: entry ``index`` of CUDA_VISIBLE_DEVICES when it is a list of integers, else ``index``."""
    env = os.environ if env is None else env
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return index
    entries = [e.strip() for e in value.split(",") if e.strip()]
    if not entries or not all(e.isdigit() for e in entries):
        return index  # UUIDs or MIG ids: only the UUID lookup can tell
    return int(entries[index]) if index < len(entries) else index


def nvml_index(torch: Any, index: int, *, nvml: Any = None, env: Mapping[str, str] | None = None) -> int:
    """NVML's index of torch's CUDA device ``index``: the GPU whose NVML names, clocks and limits belong to it.

    By UUID: torch's ``get_device_properties(index).uuid`` looked up with ``nvmlDeviceGetHandleByUUID``
    ('GPU-<uuid>', or 'MIG-<uuid>' for a MIG instance, which gives the index of its GPU) and
    ``nvmlDeviceGetIndex``. That holds whatever CUDA_VISIBLE_DEVICES (integers, UUIDs, MIG ids) and
    CUDA_DEVICE_ORDER say.

    Fallback, where either side is unavailable (torch without ``uuid``, ROCm, no NVML or no driver, a pynvml
    without the lookup, a UUID NVML does not know): :func:`visible_index`. NB: the fallback assumes CUDA numbers
    the GPUs in NVML's (PCI bus) order, which holds under CUDA_DEVICE_ORDER=PCI_BUS_ID or with identical GPUs;
    with mixed GPUs under CUDA's default FASTEST_FIRST it can name another GPU (:func:`detect` warns when the
    names differ). ``nvml``: a pynvml-shaped object (None: pynvml; False: off); ``env``: os.environ."""
    text = torch_uuid(torch, index)
    found = _nvml_index_by_uuid(_nvml(nvml), text) if text else None
    return found if found is not None else visible_index(index, env)


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


def _torch_gpu(props: Any) -> dict[str, Any]:
    """The facts of one torch device's properties (0 where a driver does not fill a field reads as None)."""
    major, minor = getattr(props, "major", None), getattr(props, "minor", None)
    return {
        "name": _text(getattr(props, "name", None)),
        "sm_count": _positive_int(getattr(props, "multi_processor_count", None)),
        "l2_bytes": _positive_int(getattr(props, "L2_cache_size", None)),
        "memory_bytes": _positive_int(getattr(props, "total_memory", None)),
        "memory_clock_mhz": _khz_to_mhz(getattr(props, "memory_clock_rate", None)),
        "bus_width_bits": _positive_int(getattr(props, "memory_bus_width", None)),
        "max_sm_clock_mhz": _khz_to_mhz(getattr(props, "clock_rate", None)),
        "compute_capability": _capability((major, minor)) if major is not None else None,
    }


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
        devices.append({"index": index, **_torch_gpu(props)})
    return devices


def _is_rocm(torch: Any) -> bool:
    return getattr(getattr(torch, "version", None), "hip", None) is not None


def describe_cuda(torch: Any, sheet_name: str | None = None, *, nvml: Any = None) -> Machine:
    """torch's current CUDA device as a :class:`Machine` (``sheet_name``: the spec sheet matched to it)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    facts = _torch_gpu(props)
    return Machine(
        kind="cuda",
        name=props.name,
        sheet=sheet_name,
        driver=driver_version(nvml),
        cuda=getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None),
        torch=torch.__version__,
        compute_capability=facts["compute_capability"],
        sm_count=facts["sm_count"],
        l2_bytes=facts["l2_bytes"],
        memory_bytes=facts["memory_bytes"],
        max_sm_clock_mhz=facts["max_sm_clock_mhz"],
    )


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


#: /proc/cpuinfo flag -> SIMD name, widest first
_SIMD_FLAGS = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4_2", "SSE4.2"), ("asimd", "NEON"))


def parse_simd(text: str | None) -> str | None:
    """The widest SIMD extension the first CPU's flags (x86 'flags', Arm 'Features') list, or None. Pure."""
    if not text:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            flags = set(value.split())
            return next((name for flag, name in _SIMD_FLAGS if flag in flags), None)
    return None


def gpu_node_present(nodes: tuple[str, ...] = GPU_DEVICE_NODES) -> bool:
    """Whether a GPU driver's device node exists (torch can only see a GPU where one does)."""
    return any(os.path.exists(node) for node in nodes)


def _torch_if_needed(nvml_devs: list[dict[str, Any]]) -> Any:
    """torch when it is already imported, or when there may be a GPU for it to see; else None (no import)."""
    if "torch" in sys.modules:
        return sys.modules["torch"]
    if nvml_devs or gpu_node_present():
        return _import_torch()
    return None


def _model_or_platform(model: str | None) -> str:
    return model or platform.processor() or platform.machine() or UNKNOWN_CPU


def cpu_model(cpu_reader: Callable[[], str | None] | None = None) -> str:
    """The CPU's model name (/proc/cpuinfo), else what ``platform`` says, else 'unknown CPU'."""
    model, _ = _parse_cpuinfo(_call(cpu_reader or _read_cpuinfo))
    return _model_or_platform(model)


def _parse_cache_size(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper()
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def llc_bytes(root: str | Path = CPU_CACHE_DIR) -> int | None:
    """Size of the highest-level cache of cpu0 from sysfs, or None where sysfs does not say."""
    best: tuple[int, int] | None = None
    base = Path(root)
    try:
        entries = sorted(base.glob("index*"))
    except OSError:
        return None
    for entry in entries:
        try:
            level = int((entry / "level").read_text().strip())
            size = _parse_cache_size((entry / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if size and (best is None or level > best[0] or (level == best[0] and size > best[1])):
            best = (level, size)
    return best[1] if best else None


def _torch_cpu(torch: Any) -> tuple[str | None, int | None]:
    """(ISA torch dispatches to, torch's thread count); Nones without torch."""
    if torch is None:
        return None, None
    cpu_backend = getattr(getattr(torch, "backends", None), "cpu", None)
    isa = _text(_call(getattr(cpu_backend, "get_cpu_capability", None)))
    return isa, _positive_int(_call(getattr(torch, "get_num_threads", None)))


def _describe_cpu(torch: Any, cpu_reader: Callable[[], str | None]) -> CpuInfo:
    text = _call(cpu_reader)
    model, physical = _parse_cpuinfo(text)
    isa, threads = _torch_cpu(torch)
    info = CpuInfo(
        model=_model_or_platform(model),
        logical_cores=os.cpu_count(),
        physical_cores=physical,
        isa=isa,
        torch_threads=threads,
    )
    if torch is None:
        info.simd = parse_simd(text)
        info.note = f"{CPU_NOTE}; {NO_TORCH_NOTE}"
    return info


def describe_cpu(torch: Any, *, cpu_reader: Callable[[], str | None] | None = None) -> Machine:
    """This machine's CPU as torch uses it, as a :class:`Machine` (its key does not depend on anything measured)."""
    isa, threads = _torch_cpu(torch)
    return Machine(
        kind="cpu",
        name=cpu_model(cpu_reader),
        torch=torch.__version__,
        cpu_threads=threads,
        logical_cores=os.cpu_count(),
        isa=isa,
        llc_bytes=llc_bytes(),
    )


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
    nvml_index_of: Callable[[int], int],
    warnings: list[str],
) -> list[dict[str, Any]]:
    """One record per GPU: NVML's fields first (name, memory clock included), torch's filling the gaps.
    ``nvml_index_of(torch index)`` pairs them (:func:`nvml_index`)."""
    if not torch_devs:
        return [dict(d, source="nvml") for d in nvml_devs]
    if not nvml_devs:
        return [dict(d, source="torch") for d in torch_devs]
    by_index = {d["index"]: dict(d, source="nvml") for d in nvml_devs}
    extra = []
    for tdev in torch_devs:
        target = nvml_index_of(tdev["index"])
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
    env: Mapping[str, str] | None = None,
) -> Detection:
    """Describe this machine's GPUs (matched against ``registry``) and CPU. See the module docstring."""
    env = os.environ if env is None else env
    nvml = _nvml(nvml)
    cpu_reader = cpu_reader or _read_cpuinfo

    warnings: list[str] = []
    nvml_devs = _read_nvml(nvml)
    # NB: importing torch takes seconds; a machine with no GPU device node and no NVML GPU has no GPU for it to see
    torch = None if torch is False else (torch if torch is not None else _torch_if_needed(nvml_devs))
    torch_devs = _read_torch_gpus(torch)
    derive = bool(nvml_devs) or not _is_rocm(torch)

    def nvml_index_of(index: int) -> int:
        return nvml_index(torch, index, nvml=nvml if nvml is not None else False, env=env)

    gpus: list[GpuInfo] = []
    for record in _merge(nvml_devs, torch_devs, nvml_index_of, warnings):
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


def describe_machine(torch_device: str | None, sheet: str | None = None) -> dict[str, Any]:
    """This machine as a report's ``machine`` block ('cpu', 'cuda', 'cuda:N'); {} when it cannot be told.

    ``sheet``: the spec sheet matched to the GPU (ignored for the CPU).
    Never raises: a description that fails must not lose a measurement."""
    try:
        import torch

        if str(torch_device or "cpu").startswith("cuda"):
            index = int(str(torch_device).partition(":")[2] or 0)
            with torch.cuda.device(index):
                machine = describe_cuda(torch, sheet)  # describes the current device
        else:
            machine = describe_cpu(torch)
        return machine.model_dump(mode="json", exclude_none=True)
    except Exception:
        return {}
