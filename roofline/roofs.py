"""The one roof resolver: from what a command was told (device names, --device cpu|cuda[:N], --sheet, --roofs) to
the :class:`~roofline.device.Device` whose roofs it places work on, and notes saying where those roofs come from.

- a spec sheet -> Device: :func:`device_from_sheet` (:func:`sheet_roofs`, :func:`sheet_detail`: its roofs as data);
- ``--roofs auto|spec|measured``: :func:`with_roofs` replaces a sheet's roofs with a cached calibration of that
  sheet (:func:`find_calibration`): auto when there is one, measured requires one, spec never;
- the default device: :func:`default_device_names` (analyze: $ROOFLINE_DEVICE, else the GPU NVML reports) and
  :func:`torch_device` (the measuring commands: CUDA when torch sees a GPU, else the CPU);
- a GPU: :func:`gpu_roofs`, its sheet matched on the name NVML reports for it (the NVML device found by UUID,
  :func:`roofline.specs.detect.nvml_index`), then torch's name;
- the CPU: :func:`cpu_roofs`, its measured roofs (this machine's cached calibration, else measured now, cached);
- :func:`device_roofs`: either, for a torch device: what bench, diagnose and gate use;
- :func:`calibration_for`: `roofline calibrate`'s cache policy for this machine (cached, else measured and cached);
- :func:`known_devices`: the sheet's and the measured roofs per device, for charts;
- :func:`target_pairs`: the report's GPU and each target GPU on one basis (both measured or both sheets), for
  `roofline predict` (:func:`check_targets`: the targets' sheets, checked before a run).

Every command resolves its roofs here. torch and NVML are imported lazily: importing this module is cheap.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.device import Device, LinkRoof, SmFacts
from roofline.errors import CalibrationError, DeviceError, RooflineError, UnknownDeviceError, UsageError
from roofline.specs.schema import SpecSheet
from roofline.units import split_list

if TYPE_CHECKING:
    from roofline.measure.calibration import Announce, Calibration, Lookup
    from roofline.report.chart import KnownDevice
    from roofline.specs.loader import SpecRegistry

#: the values of --roofs
ROOFS = ("auto", "spec", "measured")
#: the kinds of --device the measuring commands take
DEVICE_KINDS = ("cpu", "cuda")
ENV_DEVICE = "ROOFLINE_DEVICE"
SHEET_ON_CPU = "--sheet names a GPU spec sheet: CPU roofs come from measurement (roofline calibrate)"

CalibrationProgress = Callable[[str, int, int], None]  # (step, index, total), as roofline.measure.ceilings reports


# ------------------------------------------------------------------------------------------- spec sheets


def device_from_sheet(sheet: SpecSheet) -> Device:
    """The roofs of a spec sheet in base units: dense peaks per (dtype, unit), bandwidth and capacity per memory
    level (DRAM always; L2, an LLC and shared memory where the sheet gives them), the launch floor."""
    compute: dict[tuple[str, str], float] = {}
    for unit, peaks in (
        ("vector", sheet.compute_dense_tflops.vector),
        ("tensor", sheet.compute_dense_tflops.tensor),
    ):
        for dtype, tflops in peaks.model_dump().items():
            if tflops is not None:
                compute[(dtype, unit)] = float(round(tflops * 1e12))
    mem = sheet.memory
    bandwidth = {"dram": float(round(mem.dram.bandwidth_gb_per_s * 1e9))}
    capacities = {"dram": mem.dram.capacity_gb * 1e9}
    for level in ("l2", "llc"):
        cache = getattr(mem, level)
        if cache is not None:
            capacities[level] = cache.capacity_mib * 2**20
            if cache.bandwidth_gb_per_s:
                bandwidth[level] = cache.bandwidth_gb_per_s * 1e9
    if mem.smem is not None and mem.smem.bandwidth_gb_per_s:
        bandwidth["smem"] = mem.smem.bandwidth_gb_per_s * 1e9
    links: list[LinkRoof] = []
    if sheet.interconnect is not None:
        for field, name in (
            ("nvlink_bandwidth_per_gpu", "nvlink"),
            ("infinity_fabric_bandwidth_per_gpu", "infinity_fabric"),
            ("pcie_bandwidth", "pcie"),
        ):
            link = getattr(sheet.interconnect, field)
            if link is not None:
                links.append(LinkRoof(name, link.per_direction_gb_per_s * 1e9, link.direction, link.gb_per_s))
    return Device(
        name=sheet.name,
        display_name=sheet.display_name,
        vendor=sheet.vendor,
        compute=compute,
        bandwidth=bandwidth,
        launch_floor_s=sheet.launch_floor_us * 1e-6,
        capacities=capacities,
        compute_units=sheet.compute_units,
        clock_hz=float(sheet.boost_clock_mhz) * 1e6 if sheet.boost_clock_mhz else 0.0,
        unit_name=sheet.compute_unit_name,
        sm=sm_facts(sheet),
        links=tuple(links),
    )


def sm_facts(sheet: SpecSheet) -> SmFacts:
    """The sheet's per-SM facts in bytes and counts (None where it lacks one)."""
    kib = 1024
    smem, limits = sheet.memory.smem, sheet.sm_limits

    def scaled(value: float | None, factor: int) -> int | None:
        return None if value is None else round(value * factor)

    return SmFacts(
        smem_per_sm_bytes=scaled(smem.per_sm_kib, kib) if smem else None,
        smem_per_block_bytes=scaled(smem.per_block_kib, kib) if smem else None,
        reserved_smem_per_block_bytes=scaled(limits.reserved_smem_per_block_kib, kib) if limits else None,
        registers=scaled(limits.register_file_kib, kib // 4) if limits else None,
        max_threads=limits.max_threads if limits else None,
        max_blocks=limits.max_blocks if limits else None,
        max_threads_per_block=limits.max_threads_per_block if limits else None,
        warp_size=limits.warp_size if limits else None,
    )


def sheet_roofs(sheet: SpecSheet) -> list[dict[str, Any]]:
    """Every compute roof of a sheet with its ridge point against DRAM (for JSON and tables)."""
    from roofline.ironlaw import ridge_point

    device = device_from_sheet(sheet)
    return [
        {
            "dtype": dtype,
            "unit": unit,
            "peak_flops_per_s": peak,
            "ridge_flop_per_byte": ridge_point(peak, device.dram_bandwidth),
        }
        for (dtype, unit), peak in sorted(device.compute.items(), key=lambda item: (item[0][1], -item[1]))
    ]


def sheet_detail(sheet: SpecSheet, origin: str, path: str) -> dict[str, Any]:
    """`roofline specs show --json`: the sheet, its roofs, where it was loaded from."""
    return {"sheet": sheet.model_dump(mode="json"), "roofs": sheet_roofs(sheet), "origin": origin, "path": path}


def _registry(spec_files: Iterable[Path]) -> SpecRegistry:
    from roofline.specs.loader import load_registry

    return load_registry(list(spec_files))


# ------------------------------------------------------------------------------------------------ --roofs


def check_roofs(roofs: str) -> str:
    """``roofs`` when it is one of auto, spec, measured; UsageError otherwise."""
    if roofs not in ROOFS:
        raise UsageError(f"--roofs: {roofs!r} is not one of {', '.join(ROOFS)}")
    return roofs


def find_calibration(device: Device, given: Calibration | None = None) -> Calibration | None:
    """The calibration whose ceilings replace the roofs of ``device`` (a sheet's): ``given`` when it measured
    that sheet, else the newest cached GPU calibration of the sheet, else None."""
    if given is not None and given.machine.kind == "cuda" and given.machine.sheet == device.name:
        return given
    from roofline.measure import calibration

    return calibration.latest_for_sheet(device.name)


def measured_note(cal: Calibration) -> str:
    return f"roofs measured by roofline calibrate on {cal.created_utc:%Y-%m-%d %H:%M} UTC ({cal.machine.name})"


def with_roofs(device: Device, roofs: str = "auto") -> tuple[Device, list[str]]:
    """``device`` (a sheet's roofs) as ``--roofs`` asks, and a note on where the roofs come from.

    spec: unchanged. auto: a cached calibration of the sheet replaces the roofs it measured; none cached, or one
    that cannot be used (the note says why), keeps the sheet's. measured: as auto, but UsageError when none is
    cached."""
    from roofline.measure import calibration

    check_roofs(roofs)
    if roofs == "spec":
        return device, []
    try:
        cal = find_calibration(device)
        measured = calibration.apply(device, cal) if cal is not None else None
    except RooflineError as exc:
        if roofs == "measured":
            raise
        return device, [f"calibration of {device.name} not usable, spec roofs used: {exc}"]
    if cal is None or measured is None:
        if roofs == "measured":
            raise UsageError(
                f"--roofs measured: no calibration of {device.name} is cached: run `roofline calibrate` on that "
                "GPU or use --roofs spec"
            )
        return device, []
    return measured, [measured_note(cal)]


# --------------------------------------------------------------------------------------- named devices


def default_device_names(env: Mapping[str, str] | None = None) -> list[str]:
    """$ROOFLINE_DEVICE (a comma list), else the first GPU NVML reports (read-only, no torch import)."""
    env = os.environ if env is None else env
    if env.get(ENV_DEVICE):
        return split_list(env[ENV_DEVICE], ENV_DEVICE)
    from roofline.specs.detect import nvml_gpu_names  # looked up per call (tests patch it)

    names = nvml_gpu_names()
    if names:
        return names[:1]
    raise UsageError(
        "no --device given and no GPU detected: name one, e.g. --device h100-sxm "
        f"(`roofline specs list` shows them), or set {ENV_DEVICE}"
    )


def sheet_devices(names: Sequence[str] | None, *, spec_files: Iterable[Path] = (), roofs: str = "auto") -> list[Device]:
    """The devices named (spec-sheet names or aliases; None: :func:`default_device_names`), each once, with the
    roofs ``--roofs`` asks for (:func:`with_roofs`): what `roofline analyze` places workloads on. ``cpu`` is this
    machine's CPU with its measured roofs (:func:`cpu_roofs`: the cached calibration, else one run now)."""
    check_roofs(roofs)
    registry = _registry(spec_files)
    names = list(names) if names else default_device_names()
    devices = []
    for name in dict.fromkeys(names):
        if name.strip().lower() == "cpu":  # NB: a CPU has no spec sheet: its roofs are measured, as bench's are
            if roofs == "spec":
                raise UsageError("--device cpu has no spec sheet (its roofs are measured): drop --roofs spec")
            devices.append(cpu_roofs(_import_torch())[0])
            continue
        devices.append(with_roofs(device_from_sheet(registry.get(name)), roofs)[0])
    return devices


def known_devices(
    names: Iterable[str], *, calibration: str | Path | None = None, spec_files: Iterable[Path] = ()
) -> dict[str, KnownDevice]:
    """Spec sheet and measured roofs per device name (keyed by the sheet's canonical name too, when found).

    Measured roofs: ``calibration`` (a `roofline calibrate` JSON) for the device it measured, else the newest
    cached calibration of that sheet. UsageError when ``calibration`` measured none of the devices."""
    from roofline.measure import calibration as cal_module
    from roofline.report.chart import KnownDevice

    registry = _registry(spec_files)
    given = cal_module.load(Path(calibration)) if calibration is not None else None
    used = False
    known: dict[str, KnownDevice] = {}
    for name in dict.fromkeys(names):
        sheet = registry.find(name)
        if sheet is None:
            known[name] = KnownDevice(name, name)
            continue
        spec = device_from_sheet(sheet)
        cal = find_calibration(spec, given)
        used = used or (cal is not None and cal is given)
        measured = cal_module.apply(spec, cal) if cal is not None else None
        known[name] = known[spec.name] = KnownDevice(spec.name, spec.display_name, spec, measured)
    if given is not None and not used:
        measured_what = given.machine.sheet or given.machine.name
        raise UsageError(
            f"--calibration {calibration}: it measured {measured_what}, which no report or --device shows: "
            "drop it or plot a report of that device"
        )
    return known


# --------------------------------------------------------------------------------- two GPUs, one basis


@dataclass(frozen=True)
class Ceilings:
    """One device's roofs as a comparison of two GPUs uses them (`roofline predict`)."""

    name: str
    display_name: str
    device: Device  # the roofs used (spec or measured)
    source: str  # 'spec sheet' or where the measured ceilings come from
    clock_mhz: float | None  # boost clock from the sheet (None: unknown)
    sms: int  # SMs (0: unknown)
    gemm: str = ""  # the measured GEMM ceilings used: 'burst' or 'sustained' ('' for a sheet)

    @property
    def measured(self) -> bool:
        return self.device.roof_source != "spec"


@dataclass(frozen=True)
class Pair:
    """The device a report was measured on and a target, on one basis."""

    here: Ceilings
    there: Ceilings
    basis: str  # 'measured' (both calibrated) or 'spec' (both sheets)
    note: str = ""  # why spec when measured ones were asked for or exist for one side only

    @property
    def clock_ratio(self) -> float:
        """kappa: a clock-bound time there over here (1 when a clock is unknown)."""
        a, b = self.here.clock_mhz, self.there.clock_mhz
        return a / b if a and b else 1.0

    @property
    def bandwidth_ratio(self) -> float:
        return self.here.device.dram_bandwidth / self.there.device.dram_bandwidth

    def describe(self) -> str:
        return (
            f"{self.here.name} ({self.here.source}) -> {self.there.name} ({self.there.source}); "
            f"DRAM x{self.bandwidth_ratio:.3g} time, clock x{self.clock_ratio:.3g}"
        )


def _target_sheet(registry: SpecRegistry, name: str) -> SpecSheet:
    """The sheet of a target GPU; UnknownDeviceError for cpu or a name without a sheet."""
    if name.strip().lower() == "cpu":
        raise UnknownDeviceError("--device cpu: a CPU has no spec sheet to predict on (name a GPU)")
    return registry.get(name)


def check_targets(targets: Sequence[str], spec_files: Iterable[Path] = ()) -> list[str]:
    """The target GPUs' sheet names (each once); UnknownDeviceError for one without a sheet (checked before a
    run)."""
    registry = _registry(spec_files)
    names = [_target_sheet(registry, name).name for name in targets]
    if not names:
        raise UsageError("--device: name at least one target GPU (`roofline specs list` shows them)")
    return list(dict.fromkeys(names))


def stored_roofs(spec: Device, info: Any) -> Device | None:
    """The roofs a report stored (``info``: its DeviceInfo) when it placed its rows on measured ones, over the
    sheet's ``spec`` (None when it used the sheet's)."""
    if info is None or getattr(info, "roof_source", "spec") == "spec":
        return None
    from dataclasses import replace

    compute = dict(spec.compute)
    measured = set()
    for label, value in (info.compute_flops_per_s or {}).items():
        parts = label.split()
        if len(parts) == 2 and value and value != spec.compute.get((parts[0], parts[1])):
            compute[(parts[0], parts[1])] = float(value)
            measured.add((parts[0], parts[1]))
    return replace(
        spec,
        compute=compute,
        bandwidth={**spec.bandwidth, "dram": float(info.dram_bandwidth_bytes_per_s)},
        launch_floor_s=float(info.launch_floor_s or spec.launch_floor_s),
        roof_source="measured",
        measured=frozenset(measured),
    )


def gemm_phase(cal: Calibration, wanted: str) -> str:
    """'burst' when ``wanted`` and ``cal`` measured burst GEMM figures, else 'sustained'.

    NB: a ratio of compute roofs uses the burst figures (from rest) where both calibrations have them: bench rows
    and diagnose iterations are short and rested, and a sustained figure (after a thermal soak) depends on the power
    cap of the lease (two H100 leases: 682 and 716 TFLOP/s bf16 sustained, 794 and 805 burst)."""
    if wanted == "burst" and any(c.name.startswith("gemm-") and c.name.endswith("-burst") for c in cal.ceilings):
        return "burst"
    return "sustained"


def target_pairs(
    info: Any,
    targets: Sequence[str],
    *,
    roofs: str = "auto",
    calibrations: Sequence[Path] = (),
    spec_files: Sequence[Path] = (),
) -> list[Pair]:
    """One Pair per target (spec-sheet names or aliases, each once) for a report measured on ``info`` (the
    report's DeviceInfo: its device's name and the roofs it stored).

    ``roofs``: auto (measured ceilings when both devices have them: a --calibration file, a cached calibration,
    or for the report's device the measured roofs the report stored; else both sheets), spec, measured (a
    UsageError when either lacks them). UsageError for a report's device without a sheet; UnknownDeviceError for a
    target without one."""
    from roofline.measure import calibration as cal_module

    check_roofs(roofs)
    if not targets:
        raise UsageError("--device: name at least one target GPU (`roofline specs list` shows them)")
    registry = _registry(spec_files)
    here_sheet = registry.find(info.name)
    if here_sheet is None and info.name.strip().lower() == "cpu":
        raise UsageError(
            "the report was measured on a CPU: predict scales a GPU's report to other GPUs (a CPU has no spec sheet "
            "to scale from): run bench or diagnose on a GPU and predict that report"
        )
    if here_sheet is None:
        raise UsageError(
            f"the report was measured on {info.name!r}, which has no spec sheet (a CPU report, or give its sheet "
            "with --spec FILE): predict scales GPU reports"
        )
    there_sheets = [_target_sheet(registry, name) for name in dict.fromkeys(targets)]
    given: dict[str, Any] = {}
    for path in calibrations:
        cal = cal_module.load(Path(path))
        sheet = cal.machine.sheet or ""
        if cal.machine.kind != "cuda" or sheet not in {here_sheet.name, *(s.name for s in there_sheets)}:
            raise UsageError(
                f"--calibration {path}: it measured {sheet or cal.machine.name}, neither the report's device "
                f"({here_sheet.name}) nor a --device target"
            )
        given[sheet] = (cal, path)

    def ceilings(sheet: SpecSheet, stored: Any = None, gemm: str = "burst") -> tuple[Ceilings, Ceilings | None]:
        spec = device_from_sheet(sheet)
        clock = float(sheet.boost_clock_mhz) if sheet.boost_clock_mhz else None
        plain = Ceilings(spec.name, spec.display_name, spec, "spec sheet", clock, spec.compute_units)
        if roofs == "spec":
            return plain, None
        try:
            if spec.name in given:
                cal, path = given[spec.name]
                where = f"measured: {path}"
            else:
                cal = find_calibration(spec)
                where = f"measured: cached calibration of {cal.created_utc:%Y-%m-%d}" if cal is not None else ""
            phase = gemm_phase(cal, gemm) if cal is not None else "sustained"
            measured = cal_module.apply(spec, cal, gemm=phase) if cal is not None else None
            if measured is not None:
                where += f", {phase} GEMM ceilings"
        except CalibrationError:
            measured, where = None, ""
        if measured is None and stored is not None:
            phase = "sustained"
            measured, where = stored_roofs(spec, stored), "measured: the report's stored roofs (sustained GEMMs)"
        if measured is None:
            return plain, None
        return plain, Ceilings(spec.name, spec.display_name, measured, where, clock, spec.compute_units, phase)

    here_spec, here_measured = ceilings(here_sheet, info)
    found = []
    for sheet in there_sheets:
        there_spec, there_measured = ceilings(sheet)
        if here_measured is not None and there_measured is not None:
            if here_measured.gemm != there_measured.gemm:
                # NB: one side has no burst figures (an older calibration, the report's stored roofs): both sustained
                here_measured = ceilings(here_sheet, info, "sustained")[1]
                there_measured = ceilings(sheet, None, "sustained")[1]
                assert here_measured is not None and there_measured is not None
            found.append(Pair(here_measured, there_measured, "measured"))
            continue
        lacking = [c.name for c, m in ((here_spec, here_measured), (there_spec, there_measured)) if m is None]
        if roofs == "measured":
            raise UsageError(
                f"--roofs measured: no measured ceilings of {' or '.join(lacking)} (run `roofline calibrate` on "
                "that GPU and pass its file with --calibration, or use --roofs auto)"
            )
        note = ""
        if roofs == "auto" and len(lacking) == 1:
            note = f"no calibration of {lacking[0]}: both devices' sheets used (a ratio never mixes the two)"
        found.append(Pair(here_spec, there_spec, "spec", note))
    return found


# --------------------------------------------------------------------------------------- torch devices


def _import_torch() -> Any:
    import torch

    return torch


def device_kind(device: str | None, *, indexed: bool = True) -> str:
    """'cuda' or 'cpu' for a --device value ('cuda', 'cuda:N' when ``indexed``, 'cpu'; None: cuda when torch
    sees a GPU). UsageError for any other name."""
    if device is None:
        return "cuda" if _import_torch().cuda.is_available() else "cpu"
    name = device.strip().lower()
    if re.fullmatch(r"cuda(?::\d+)?" if indexed else "cuda", name):
        return "cuda"
    if name == "cpu":
        return "cpu"
    hint = " (cuda:N for GPU N)" if indexed else ""
    raise UsageError(f"--device {device!r}: use cpu or cuda{hint}")


def torch_device(device: str | None, *, indexed: bool = True) -> str:
    """The torch device a --device value names: 'cpu', 'cuda' or 'cuda:N' (None: 'cuda' when torch sees a GPU,
    else 'cpu'). DeviceError when CUDA is asked for and absent or N is out of range; UsageError for any other
    name (and for 'cuda:N' unless ``indexed``)."""
    kind = device_kind(device, indexed=indexed)
    if kind == "cpu":
        return "cpu"
    torch = _import_torch()
    name = (device or "cuda").strip().lower()
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if getattr(torch.version, "cuda", None) else "a CPU-only build"
        raise DeviceError(
            f"--device {name}: torch {torch.__version__} ({build}) sees no CUDA GPU: use --device cpu, or install "
            "a CUDA build of torch and check the driver and CUDA_VISIBLE_DEVICES"
        )
    index = name.partition(":")[2]
    if index and int(index) >= torch.cuda.device_count():
        raise DeviceError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    return name


def torch_index(torch_device_name: str) -> int:
    """N of 'cuda:N' (0 for 'cuda')."""
    return int(torch_device_name.partition(":")[2] or 0)


def gpu_sheet(
    gpu_names: Sequence[str], sheet: str | None = None, spec_files: Iterable[Path] = (), *, required: bool = True
) -> SpecSheet | None:
    """The spec sheet of a GPU: --sheet NAME when given, else the first sheet matching a name the GPU reports.
    No match: UsageError when ``required``, else None."""
    registry = _registry(spec_files)
    if sheet:
        return registry.get(sheet)
    for name in gpu_names:
        found = registry.find(name)
        if found is not None:
            return found
    if not required:
        return None
    shown = gpu_names[0] if gpu_names else "this GPU"
    raise UsageError(
        f"no spec sheet matches {shown!r}: name its sheet with --sheet NAME (`roofline specs list`), "
        "or add one with --spec FILE (docs/spec-sheets.md)"
    )


def gpu_names(torch: Any, index: int) -> tuple[list[str], int]:
    """(the names torch's CUDA device ``index`` reports: NVML's first, then torch's; its NVML index)."""
    from roofline.specs.detect import nvml_gpu_names, nvml_index

    props = torch.cuda.get_device_properties(index)
    nvml = nvml_index(torch, index)
    names = nvml_gpu_names()
    reported = [names[nvml]] if nvml < len(names) else []
    return [*reported, props.name], nvml


@dataclass(frozen=True)
class GpuRoofs:
    """A GPU's roofs and what they were resolved from."""

    device: Device
    sheet: SpecSheet
    nvml_index: int  # NVML's index of the GPU (its clocks are read there)
    notes: list[str] = field(default_factory=list)


def gpu_roofs(
    torch: Any, index: int, *, sheet: str | None = None, spec_files: Iterable[Path] = (), roofs: str = "auto"
) -> GpuRoofs:
    """The roofs of torch's CUDA device ``index``: its spec sheet (:func:`gpu_sheet`) as ``--roofs`` asks."""
    check_roofs(roofs)
    names, nvml = gpu_names(torch, index)
    spec = gpu_sheet(names, sheet, spec_files)
    assert spec is not None
    device, notes = with_roofs(device_from_sheet(spec), roofs)
    return GpuRoofs(device, spec, nvml, notes)


def calibration_for(
    kind: str,
    *,
    refresh: bool = False,
    spec_files: Iterable[Path] = (),
    progress: CalibrationProgress | None = None,
    must_save: bool = True,
    torch: Any = None,
    announce: Announce | None = None,
) -> Lookup:
    """This machine's calibration of ``kind`` ('cuda': torch's current device; 'cpu'): the cached one, else
    measured now and cached (roofline.measure.calibration.cached_or_measured: ``refresh``, corrupt files, busy CPU
    calibrations measured again once the machine is quiet, ``announce`` before measuring, ``must_save``). A GPU's
    spec sheet (matched as :func:`gpu_sheet` does, None when none matches) gives the measurement's spec values and
    ratios."""
    from roofline.measure import calibration
    from roofline.specs.detect import describe_cpu, describe_cuda

    torch = torch if torch is not None else _import_torch()
    if kind == "cuda":
        names, _ = gpu_names(torch, torch.cuda.current_device())
        sheet = gpu_sheet(names, None, spec_files, required=False)
        spec = device_from_sheet(sheet) if sheet is not None else None
        machine = describe_cuda(torch, spec.name if spec is not None else None)

        def measure() -> Calibration:
            from roofline.measure import ceilings_gpu  # looked up per call (tests patch it)

            return ceilings_gpu.calibrate_cuda(torch, spec=spec, progress=progress)
    else:
        machine = describe_cpu(torch)

        def measure() -> Calibration:
            from roofline.measure import ceilings_cpu  # looked up per call (tests patch it)

            return ceilings_cpu.calibrate_cpu(torch, progress=progress)

    return calibration.cached_or_measured(
        machine, measure, refresh=refresh, must_save=must_save, quiet_now=_quiet_now, announce=announce
    )


def _quiet_now() -> bool:
    from roofline.measure import calibration, ceilings_cpu

    return calibration.quiet(ceilings_cpu.loadavg(), os.cpu_count())


def calibrating_line(why: str, path: Path, seconds: float, replaced: Calibration | None = None) -> str:
    """The one line a command prints before it calibrates the CPU on its own (``why`` as cached_or_measured
    announces it). Pure."""
    about = f"about {seconds:.0f} s; cached in {path}"
    if why == "busy" and replaced is not None:
        when = f"{replaced.created_utc:%Y-%m-%d %H:%M} UTC"
        return (
            f"calibrating this CPU's ceilings again: the calibration of {when} was taken while the machine was "
            f"busy ({about}) ..."
        )
    if why == "corrupt":
        return f"calibrating this CPU's ceilings again: the cached calibration was unreadable ({about}) ..."
    return f"calibrating this CPU's ceilings once ({about}; `roofline calibrate` to redo) ..."


def _stderr_line(text: str) -> None:
    import sys

    print(text, file=sys.stderr, flush=True)


def cpu_roofs(torch: Any) -> tuple[Device, list[str]]:
    """The CPU's measured roofs: this machine's cached calibration (same CPU, torch and thread count), else a
    calibration run now and cached for the next time (as `roofline calibrate --device cpu` does). Before it
    measures, one line on stderr says so (:func:`calibrating_line`), on a terminal or not: the measuring takes
    seconds. A busy calibration (measured while the machine was busy) is used with a note and measured again at
    the next run on a quiet machine."""
    from roofline.measure import calibration, ceilings_cpu

    def announce(why: str, path: Path) -> None:
        replaced = None
        if why == "busy":
            try:
                replaced = calibration.load(path)
            except RooflineError:
                replaced = None
        _stderr_line(calibrating_line(why, path, ceilings_cpu.estimated_seconds(), replaced))

    lookup = calibration_for("cpu", must_save=False, torch=torch, announce=announce)
    cal = lookup.calibration
    notes = []
    if lookup.corrupt is not None:
        notes.append(f"cached CPU calibration unreadable, measured again: {lookup.corrupt}")
    if lookup.replaced is not None:
        notes.append(
            f"the CPU calibration of {lookup.replaced.created_utc:%Y-%m-%d %H:%M} UTC was taken while the machine "
            "was busy: measured again"
        )
    if lookup.from_cache:
        when = f"{cal.created_utc:%Y-%m-%d %H:%M} UTC"
        notes.append(f"CPU roofs from the calibration of {when} (roofline calibrate)")
    elif lookup.save_error is not None:
        notes.append(f"CPU calibrated now (not cached: {lookup.save_error.strerror or lookup.save_error})")
    else:
        notes.append(f"CPU calibrated now (cached in {lookup.path})")
    if cal.busy:
        notes.append(calibration.busy_note(cal))
    return calibration.cpu_device(cal), notes


def measured_calibration(device: Device, torch: Any = None) -> tuple[Calibration, Path] | None:
    """The cached calibration whose ceilings are ``device``'s measured roofs, and its file: the CPU's (this
    machine's cache entry) or the newest of a GPU's sheet; None for spec roofs or when none is cached. Reads
    the cache only (never measures)."""
    from roofline.measure import calibration

    if device.roof_source != calibration.ROOF_SOURCE_MEASURED:
        return None
    try:
        if device.name == "cpu":
            from roofline.specs.detect import describe_cpu

            path = calibration.cache_path(calibration.machine_key(describe_cpu(torch or _import_torch())))
            found = calibration.load(path) if path.is_file() else None
            return (found, path) if found is not None else None
        found = calibration.latest_for_sheet(device.name)
    except RooflineError:
        return None
    if found is None:
        return None
    return found, calibration.cache_path(found.key)


def _what(row: Any) -> str:
    """A row's label (bench), else its op and module (diagnose)."""
    label = getattr(row, "label", None)
    if label:
        return str(label)
    module = getattr(row, "module", "")
    return f"{getattr(row, 'op', 'op')}{f' in {module}' if module else ''}"


#: an efficiency above this share of a measured roof says the calibration is suspect
OVER_ROOF = 1.0


def over_roof_note(rows: Iterable[Any], device: Device, found: tuple[Calibration, Path] | None) -> str | None:
    """When rows run above 100% of measured roofs: one note naming the calibration (when, its file, the ceilings
    they ran against) and how to refresh it; None otherwise. ``rows``: anything with ``efficiency``, ``dtype``,
    ``bound`` and ``label`` (bench rows) or ``op`` and ``module`` (diagnosed ops); ``found``:
    :func:`measured_calibration`. Pure."""
    from roofline.measure.calibration import ceiling_of
    from roofline.units import format_rate

    if device.roof_source != "measured" or found is None:
        return None
    over = [r for r in rows if getattr(r, "efficiency", None) is not None and r.efficiency > OVER_ROOF]
    if not over:
        return None
    cal, path = found
    worst = max(over, key=lambda r: r.efficiency)
    kind = "cpu" if cal.machine.kind == "cpu" else "cuda"
    # NB: the analytic bound names the roof a row's efficiency is measured against (a tiny row reads 'launch')
    names = dict.fromkeys(
        ceiling_of(
            kind,
            r.dtype,
            getattr(r, "analytic_bound", None) or getattr(r, "roofline_bound", None) or r.bound,
            cal.dram_roof_name,
        )
        for r in over
    )
    values = []
    for name in names:
        ceiling = cal.get(name) if name else None
        if ceiling is not None:
            values.append(f"{name} {format_rate(ceiling.value, ceiling.unit)}")
    shown = f" ({', '.join(values)})" if values else ""
    busy = " while the machine was busy" if cal.busy else ""
    count = f"{len(over)} row{'s' if len(over) != 1 else ''}"
    return (
        f"{count} ran above the measured roof (up to {worst.efficiency:.0%}: {_what(worst)}): the roofs come from "
        f"the calibration of {cal.created_utc:%Y-%m-%d %H:%M} UTC{busy} in {path}{shown}, which is likely low: "
        f"re-measure it with `roofline calibrate --refresh{' --device cpu' if kind == 'cpu' else ''}`"
    )


def device_roofs(
    torch_device_name: str, *, sheet: str | None = None, spec_files: Iterable[Path] = (), roofs: str = "auto"
) -> tuple[Device, list[str]]:
    """The roofs of a torch device ('cpu', 'cuda', 'cuda:N') and notes on where they come from.

    GPU: :func:`gpu_roofs` (its spec sheet, or --sheet NAME, as --roofs asks). CPU: :func:`cpu_roofs` (measured;
    --sheet and --roofs spec are usage errors)."""
    check_roofs(roofs)
    torch = _import_torch()
    if torch_device_name.startswith("cpu"):
        if sheet:
            raise UsageError(SHEET_ON_CPU)
        if roofs == "spec":
            raise UsageError("--roofs spec: the CPU has no spec sheet, its roofs are measured: use --roofs auto")
        return cpu_roofs(torch)
    gpu = gpu_roofs(torch, torch_index(torch_device_name), sheet=sheet, spec_files=spec_files, roofs=roofs)
    return gpu.device, gpu.notes


def check_over_roof(rows: Iterable[Any], device: Device) -> str | None:
    """:func:`over_roof_note` for rows measured on ``device``, looking the calibration up only when a row ran
    above a measured roof (what bench and diagnose print after their results)."""
    rows = list(rows)
    if device.roof_source != "measured" or not any((getattr(r, "efficiency", None) or 0) > OVER_ROOF for r in rows):
        return None
    return over_roof_note(rows, device, measured_calibration(device))


__all__ = [
    "DEVICE_KINDS",
    "ROOFS",
    "Ceilings",
    "GpuRoofs",
    "Pair",
    "calibrating_line",
    "calibration_for",
    "check_over_roof",
    "check_roofs",
    "check_targets",
    "cpu_roofs",
    "default_device_names",
    "device_from_sheet",
    "device_kind",
    "device_roofs",
    "find_calibration",
    "gemm_phase",
    "gpu_names",
    "gpu_roofs",
    "gpu_sheet",
    "known_devices",
    "measured_calibration",
    "measured_note",
    "over_roof_note",
    "sheet_detail",
    "sheet_devices",
    "sheet_roofs",
    "stored_roofs",
    "target_pairs",
    "torch_device",
    "torch_index",
    "with_roofs",
]
