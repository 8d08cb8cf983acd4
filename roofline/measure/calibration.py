"""Measured ceilings of one machine: the data model, the cache on disk and its policy, roofs built from them.

Pure apart from the cache directory: no torch import (the measurements live in ``roofline.measure.ceilings_gpu``
and ``roofline.measure.ceilings_cpu``, the machine probes in ``roofline.specs.detect``).

A :class:`Calibration` is one versioned JSON document per machine. The cache keeps one file per machine key
(a slug of device kind, device name, driver, CUDA and torch versions; CPU: and torch's thread count), so a
driver or torch upgrade is a new machine and is re-measured, while the old file stays for comparison.

Reading is tolerant: unknown keys (written by a later minor version) are ignored, and keys added since (``load``,
``busy``) have defaults, so older files still read. A file whose ``schema`` is not ``roofline.calibration`` or whose
``version`` differs from ours is foreign and raises :class:`CalibrationError`, as does a file that is not JSON or
does not validate.

A CPU calibration taken while the machine was busy (:func:`busy_reasons` over the :class:`Load` measured around
it) is marked ``busy``: it is used for the run that measured it, and :func:`cached_or_measured` measures again at
the next run on a quiet machine (:func:`quiet`), so a busy calibration never stays the standing one.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roofline.device import Device
from roofline.errors import CalibrationError
from roofline.fileio import atomic_write_text
from roofline.specs.machine import Machine
from roofline.version import __version__
from roofline.yamlio import dumps_json, parse_json

SCHEMA = "roofline.calibration"
VERSION = 1
ENV_CACHE_DIR = "ROOFLINE_CACHE_DIR"
ROOF_SOURCE_MEASURED = "measured"
FILE_PREFIX = "calibration-"
CORRUPT_SUFFIX = ".corrupt"

CeilingKind = Literal["bandwidth", "compute", "latency"]

# GEMM ceiling name -> operand dtype. int8 is in OP/s, the others in FLOP/s (2 per multiply-add).
GEMM_DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp64", "fp8", "int8")


class _Model(BaseModel):
    # Tolerant reading: keys written by a later minor version are ignored, not an error.
    model_config = ConfigDict(extra="ignore", defer_build=True)


class CalibrationSummary(_Model):
    """What the timing engine saw for one ceiling (seconds per call)."""

    median_s: float
    p20_s: float
    p80_s: float
    n: int
    method: str  # 'cuda-events', 'cuda-graph' (per call), 'host-sync', 'cpu-clock'
    cache: str  # 'cold' (L2 flushed before every sample) or 'warm'
    stop_reason: str = ""
    relative_spread: float | None = None  # (p80 - p20) / median
    throttled_count: int = 0
    throttle_reasons: list[str] = Field(default_factory=list)
    elapsed_s: float | None = None
    threads: int | None = None
    clock_mhz_median: float | None = None  # SM clock sampled after each sample (NVML), when read

    @classmethod
    def from_measurement(cls, m: object) -> CalibrationSummary:  # m: roofline.measure.Measurement
        return cls(
            median_s=m.median_s,  # type: ignore[attr-defined]
            p20_s=m.p20_s,  # type: ignore[attr-defined]
            p80_s=m.p80_s,  # type: ignore[attr-defined]
            n=m.n,  # type: ignore[attr-defined]
            method=m.method,  # type: ignore[attr-defined]
            cache=m.cache,  # type: ignore[attr-defined]
            stop_reason=m.stop_reason,  # type: ignore[attr-defined]
            relative_spread=_finite(m.relative_spread),  # type: ignore[attr-defined]
            throttled_count=m.throttled_count,  # type: ignore[attr-defined]
            throttle_reasons=list(m.throttle_reasons),  # type: ignore[attr-defined]
            elapsed_s=m.elapsed_s,  # type: ignore[attr-defined]
            threads=m.threads,  # type: ignore[attr-defined]
            clock_mhz_median=_clock_median(m.clocks_mhz),  # type: ignore[attr-defined]
        )


class Candidate(_Model):
    """One kernel or shape tried for a ceiling: its rate, or why it failed (``value`` None)."""

    kernel: str  # 'triton-read block=8192 warps=8', 'torch: src.sum()', 'torch.mm'
    shape: str = ""  # '1 GiB fp32', '8192x8192x8192'
    value: float | None = None  # its rate in the ceiling's unit; None: it failed
    error: str = ""


class Ceiling(_Model):
    """One measured ceiling in base units: byte/s (bandwidth), FLOP/s or OP/s (compute), s (latency).

    A ceiling taken as the best of several kernels or shapes names the one that set it (``kernel``, ``shape``) and
    lists every one tried (``candidates``). GEMM ceilings come as a burst figure ('gemm-bf16-burst', ``phase``
    'burst': from rest, the first measurement after idle) and a sustained one ('gemm-bf16', ``phase`` 'sustained':
    after ``soak_s`` seconds of back-to-back GEMMs); the sustained one is the roof."""

    name: str  # 'dram-copy', 'gemm-bf16', 'launch-events', 'cpu-triad', ...
    kind: CeilingKind
    value: float
    unit: str  # 'B/s', 'FLOP/s', 'OP/s', 's'
    dtype: str | None = None  # compute ceilings: the operand dtype
    spec_value: float | None = None  # the sheet's figure in the same unit, when a sheet matches
    ratio: float | None = None  # value / spec_value
    work: float | None = None  # bytes or FLOPs (OPs) per timed call
    shape: str = ""  # what was run: '8192x8192x8192', '1 GiB fp32 x2', ...
    note: str = ""
    measurement: CalibrationSummary | None = None
    kernel: str = ""  # the kernel that set it ('' in files written before it was recorded)
    candidates: list[Candidate] = Field(default_factory=list)  # every kernel or shape tried (best-of ceilings)
    phase: Literal["burst", "sustained"] | None = None  # GEMMs: from rest, or after a thermal soak
    soak_s: float | None = None  # sustained: seconds of back-to-back GEMMs before its samples


class DramRoof(_Model):
    """Which DRAM ceiling is the DRAM roof (the best of copy, read-only and write-only) and the kernel that set it."""

    ceiling: str  # 'dram-read', 'dram-copy' or 'dram-write'
    kernel: str = ""


#: the DRAM ceiling a calibration without ``dram_roof`` (written before it was recorded) uses as its DRAM roof
LEGACY_DRAM_ROOF = "dram-copy"


class Skipped(_Model):
    name: str
    reason: str


class Load(_Model):
    """How busy the machine was around a CPU calibration (what :func:`busy_reasons` judges).

    ``loadavg_before``: the 1-minute load average when the calibration started; ``cpus``: os.cpu_count();
    ``others_share``: the share of all CPUs' time that other processes (and steal) took while it ran, from
    /proc/stat minus this process's own CPU time; ``spread``: the largest relative spread (p80 - p20) / median of
    its GEMM measurements. None where the machine does not say."""

    loadavg_before: float | None = None
    loadavg_after: float | None = None
    cpus: int | None = None
    others_share: float | None = None
    spread: float | None = None


class Calibration(_Model):
    schema_: str = Field(SCHEMA, alias="schema")
    version: int = VERSION
    created_utc: datetime
    tool_version: str = __version__
    machine: Machine
    ceilings: list[Ceiling] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)  # ceilings this device could not measure, and why
    notes: list[str] = Field(default_factory=list)
    elapsed_s: float | None = None
    quick: bool = False  # small sizes for tests: not a ceiling
    load: Load | None = None  # CPU: how busy the machine was around the measurement (None: not recorded)
    busy: bool = False  # CPU: measured while the machine was busy (busy_reasons): re-measured at a quiet run
    dram_roof: DramRoof | None = None  # GPU: the DRAM ceiling used as the DRAM roof (None: older file, 'dram-copy')

    model_config = ConfigDict(extra="ignore", defer_build=True, populate_by_name=True)

    def get(self, name: str) -> Ceiling | None:
        return next((c for c in self.ceilings if c.name == name), None)

    def value(self, name: str) -> float | None:
        ceiling = self.get(name)
        return ceiling.value if ceiling is not None else None

    @property
    def key(self) -> str:
        return machine_key(self.machine)

    @property
    def dram_roof_name(self) -> str:
        """The name of the ceiling used as the DRAM roof: ``dram_roof`` when recorded and present, else
        'dram-copy' (what files written before ``dram_roof`` used)."""
        if self.dram_roof is not None and self.get(self.dram_roof.ceiling) is not None:
            return self.dram_roof.ceiling
        return LEGACY_DRAM_ROOF

    def to_dict(self) -> dict:
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        return dumps_json(self.to_dict(), indent=2) + "\n"


def now_utc() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def _clock_median(clocks: list[float | None]) -> float | None:
    from roofline.samples import median

    read = [c for c in clocks if c is not None]
    return median(read) if read else None


def _finite(value: float) -> float | None:
    return value if value == value and value not in (float("inf"), float("-inf")) else None


# ------------------------------------------------------------------------------------------------- load

#: busy when the 1-minute load average before the calibration exceeds this share of the CPUs
BUSY_LOADAVG_SHARE = 0.5
#: busy when other processes took more than this share of all CPUs' time while it ran
BUSY_OTHERS_SHARE = 0.2
#: busy when a GEMM measurement's relative spread (p80 - p20) / median exceeds this
BUSY_SPREAD = 0.25
#: quiet enough to re-measure a busy calibration: the 1-minute load average under this share of the CPUs
QUIET_LOADAVG_SHARE = 0.5


def busy_reasons(load: Load | None) -> list[str]:
    """Why the machine counts as busy during a calibration with this ``load`` ([] = quiet). Pure."""
    if load is None:
        return []
    reasons = []
    cpus = load.cpus or 1
    if load.loadavg_before is not None and load.loadavg_before > BUSY_LOADAVG_SHARE * cpus:
        reasons.append(f"load average {load.loadavg_before:.2f} on {cpus} CPUs before it started")
    if load.others_share is not None and load.others_share > BUSY_OTHERS_SHARE:
        reasons.append(f"other processes took {load.others_share:.0%} of the CPUs while it ran")
    if load.spread is not None and load.spread > BUSY_SPREAD:
        reasons.append(f"its GEMM timings spread by {load.spread:.0%}")
    return reasons


def quiet(loadavg: float | None, cpus: int | None) -> bool:
    """Whether the machine is quiet enough now to re-measure a busy calibration (unknown load: quiet). Pure."""
    return loadavg is None or loadavg <= QUIET_LOADAVG_SHARE * (cpus or 1)


def busy_note(cal: Calibration) -> str:
    """The note a command shows when it uses a busy calibration."""
    reasons = busy_reasons(cal.load)
    why = f" ({'; '.join(reasons)})" if reasons else ""
    return (
        f"the CPU calibration of {cal.created_utc:%Y-%m-%d %H:%M} UTC was taken while the machine was busy{why}: "
        "its roofs may be low; it is measured again at the next run on a quiet machine "
        "(or now: `roofline calibrate --refresh`)"
    )


# ------------------------------------------------------------------------------------------------ cache


def cache_dir(env: dict[str, str] | None = None) -> Path:
    """$ROOFLINE_CACHE_DIR, else $XDG_CACHE_HOME/roofline, else ~/.cache/roofline."""
    env = os.environ if env is None else env
    if env.get(ENV_CACHE_DIR):
        return Path(env[ENV_CACHE_DIR]).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "roofline"
    return Path.home() / ".cache" / "roofline"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.") or "unknown"


def machine_key(machine: Machine) -> str:
    """A filesystem-safe key: kind, name, driver, CUDA (GPUs), torch, threads (CPUs)."""
    parts = [machine.kind, machine.name]
    if machine.driver:
        parts.append(f"driver-{machine.driver}")
    if machine.kind == "cuda":
        parts.append(f"cuda-{machine.cuda or 'none'}")
    parts.append(f"torch-{machine.torch or 'none'}")
    if machine.kind == "cpu" and machine.cpu_threads:
        parts.append(f"threads-{machine.cpu_threads}")
    key = "-".join(_slug(p) for p in parts)
    if len(key) > 150:  # keep file names well under the 255-byte limit; the checksum keeps them distinct
        key = f"{key[:140].rstrip('-.')}-{zlib.crc32(key.encode()):08x}"
    return key


def cache_path(key: str, directory: Path | None = None) -> Path:
    return (directory or cache_dir()) / f"{FILE_PREFIX}{key}.json"


def save(cal: Calibration, directory: Path | None = None) -> Path:
    """Write the calibration atomically to its cache file; returns the path."""
    path = cache_path(cal.key, directory)
    atomic_write_text(path, cal.to_json())
    return path


def parse(text: str, source: str = "calibration") -> Calibration:
    """A Calibration from JSON text; CalibrationError when it is not JSON, foreign, or invalid."""
    data = parse_json(text, source, CalibrationError, "not JSON", "run `roofline calibrate` again")
    if not isinstance(data, dict):
        raise CalibrationError(f"{source}: not a calibration document (a JSON {type(data).__name__})")
    if data.get("schema") != SCHEMA:
        raise CalibrationError(f"{source}: not a roofline calibration (schema {data.get('schema')!r})")
    if data.get("version") != VERSION:
        raise CalibrationError(
            f"{source}: calibration version {data.get('version')!r}, this roofline reads version {VERSION}"
        )
    try:
        return Calibration.model_validate(data)
    except RecursionError:
        raise CalibrationError(f"{source}: invalid calibration: nested too deeply") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise CalibrationError(f"{source}: invalid calibration: {where}: {first.get('msg')}") from None


def load(path: Path) -> Calibration:
    """Read one calibration file; CalibrationError (with ``.path``) when it is unreadable or corrupt."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"{path}: cannot read ({exc})", path) from None
    try:
        return parse(text, str(path))
    except CalibrationError as exc:
        exc.path = path
        raise


def find(key: str, directory: Path | None = None) -> Calibration | None:
    """The cached calibration for this machine key, or None when there is none.

    Raises CalibrationError (``.path`` set) when the file exists but is corrupt, so the caller can say so."""
    path = cache_path(key, directory)
    if not path.is_file():
        return None
    return load(path)


def quarantine(path: Path) -> Path:
    """Move a corrupt cache file aside to ``FILE.corrupt`` (never deleted); returns the new path."""
    path = Path(path)
    target = path.with_name(path.name + CORRUPT_SUFFIX)
    os.replace(path, target)
    return target


def cached(directory: Path | None = None) -> list[tuple[Path, Calibration]]:
    """Every readable calibration in the cache directory; corrupt files are skipped (and left in place)."""
    directory = directory or cache_dir()
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob(f"{FILE_PREFIX}*.json")):
        try:
            found.append((path, load(path)))
        except CalibrationError:
            continue
    return found


def latest_for_sheet(sheet_name: str, directory: Path | None = None) -> Calibration | None:
    """The newest (by created_utc) cached GPU calibration whose machine matched ``sheet_name``."""
    matches = [cal for _, cal in cached(directory) if cal.machine.kind == "cuda" and cal.machine.sheet == sheet_name]
    return max(matches, key=lambda cal: _aware(cal.created_utc), default=None)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


@dataclass
class Lookup:
    """Where :func:`cached_or_measured` got a machine's calibration from, and what happened on the way."""

    calibration: Calibration
    path: Path  # its cache file
    from_cache: bool  # False: measured now
    corrupt: CalibrationError | None = None  # the cache file was corrupt: moved aside to ``moved``, re-measured
    moved: Path | None = None
    save_error: OSError | None = None  # measured now but not cached (only when ``must_save`` is False)
    replaced: Calibration | None = None  # a cached busy calibration, measured again now that the machine is quiet


#: what cached_or_measured tells ``announce`` before it measures: (why: 'first' | 'busy' | 'corrupt' |
#: 'refresh', the cache file the result goes to)
Announce = Callable[[str, Path], None]


def cached_or_measured(
    machine: Machine,
    measure: Callable[[], Calibration],
    *,
    refresh: bool = False,
    must_save: bool = True,
    directory: Path | None = None,
    quiet_now: Callable[[], bool] = lambda: True,
    announce: Announce | None = None,
) -> Lookup:
    """The cache policy: this machine's cached calibration (its key's file), else ``measure()`` now, saved.

    - ``refresh``: measure even when a calibration is cached (the new one replaces it);
    - a corrupt cache file is moved aside (:func:`quarantine`, never deleted) and the machine re-measured;
    - a cached calibration marked ``busy`` is measured again when ``quiet_now()`` (the new one replaces it, and
      ``replaced`` holds the busy one); on a machine still busy the busy one is used (its ``busy`` flag says so);
    - ``announce(why, path)`` is called just before measuring (why: 'first', 'busy', 'corrupt' or 'refresh');
    - ``must_save`` False: a cache that cannot be written is reported in ``save_error`` instead of raised
      (a command that only needs the roofs goes on)."""
    key = machine_key(machine)
    path = cache_path(key, directory)
    corrupt: CalibrationError | None = None
    moved: Path | None = None
    replaced: Calibration | None = None
    why = "refresh"
    if not refresh:
        why = "first"
        try:
            found = find(key, directory)
        except CalibrationError as exc:
            corrupt, why = exc, "corrupt"
            try:
                moved = quarantine(path)
            except OSError:
                if must_save:
                    raise
        else:
            if found is not None and not (found.busy and quiet_now()):
                return Lookup(found, path, from_cache=True)
            if found is not None:
                replaced, why = found, "busy"
    if announce is not None:
        announce(why, path)
    result = measure()
    lookup = Lookup(result, path, from_cache=False, corrupt=corrupt, moved=moved, replaced=replaced)
    try:
        lookup.path = save(result, directory)
    except OSError as exc:
        if must_save:
            raise
        lookup.save_error = exc
    return lookup


# ------------------------------------------------------------------------------------------------ roofs


def gemm_roof_key(dtype: str, compute: dict[tuple[str, str], float]) -> tuple[str, str]:
    """The (dtype, unit) roof a square GEMM of ``dtype`` runs against on a device with these roofs.

    tf32, 16-bit, fp8 and int8 GEMMs run on tensor (matrix) cores. fp32 runs on CUDA cores on NVIDIA (no fp32
    tensor roof) and on matrix cores where the sheet has one (AMD). fp64 uses the fp64 tensor roof where the
    device has one (A100, H100), else the vector one.
    """
    if dtype in ("fp32", "fp64"):
        return (dtype, "tensor") if (dtype, "tensor") in compute else (dtype, "vector")
    return (dtype, "tensor")


def apply(device: Device, cal: Calibration, *, gemm: Literal["sustained", "burst"] = "sustained") -> Device:
    """``device`` with its roofs replaced by the measured ceilings of ``cal`` (roof_source 'measured').

    - DRAM bandwidth: the DRAM roof the calibration names (``dram_roof``: the best of 'dram-copy', 'dram-read' and
      'dram-write', each counting the bytes it moves); a calibration written before that field uses the copy
      bandwidth ('dram-copy', bytes read + bytes written).
    - Compute: each measured GEMM rate replaces the roof of its dtype (see :func:`gemm_roof_key`); roofs of
      dtypes that were not measured keep the sheet's value. ``gemm``: the sustained figures (the roofs diagnose
      places on) or the burst ones ('gemm-bf16-burst': from rest; the sustained figure where a dtype has none).
    - L2 bandwidth: the measured L2-resident copy (read + write), when there is one.
    - Launch floor: one tiny kernel timed with CUDA events ('launch-events').
    """
    if cal.machine.kind != "cuda":
        raise CalibrationError(f"calibration of {cal.machine.name!r} is a CPU calibration: use cpu_device()")
    if cal.machine.sheet is not None and cal.machine.sheet != device.name:
        raise CalibrationError(
            f"calibration of {cal.machine.name!r} matched sheet {cal.machine.sheet!r}, not {device.name!r}"
        )
    compute = dict(device.compute)
    measured = set()
    for dtype in GEMM_DTYPES:
        rate = (cal.value(f"gemm-{dtype}-burst") if gemm == "burst" else None) or cal.value(f"gemm-{dtype}")
        if rate:
            key = gemm_roof_key(dtype, device.compute)
            compute[key] = rate
            measured.add(key)
    bandwidth = dict(device.bandwidth)
    dram = cal.value(cal.dram_roof_name)
    if dram:
        bandwidth["dram"] = dram  # bytes moved (read + written) per second
    l2 = cal.value("l2-copy")
    if l2:
        bandwidth["l2"] = l2
    launch = cal.value("launch-events")
    return replace(
        device,
        compute=compute,
        bandwidth=bandwidth,
        launch_floor_s=launch or device.launch_floor_s,
        roof_source=ROOF_SOURCE_MEASURED,
        measured=frozenset(measured),
    )


#: dtypes whose matmuls a CPU places on its measured fp32 GEMM rate (none of their own is measured)
CPU_FP32_ROOF_DTYPES = ("bf16", "fp16")
CPU_FP32_ROOF_NOTE = (
    "{dtype} on the CPU: placed on the measured fp32 GEMM roof (the CPU calibration times fp32 and fp64); a CPU "
    "without native {dtype} instructions runs it far below that roof"
)


def ceiling_of(kind: str, dtype: str, bound: str, dram: str = LEGACY_DRAM_ROOF) -> str | None:
    """The name of the ceiling a row of ``dtype`` with this ``bound`` ran against on a device of ``kind`` ('cpu'
    or 'cuda'): the GEMM rate of its dtype (CPU bf16/fp16: fp32's) when compute-bound, the DRAM roof when
    memory-bound (CPU: the copy bandwidth; GPU: ``dram``, the calibration's :attr:`Calibration.dram_roof_name`);
    None for launch-bound rows. Pure."""
    if bound == "memory":
        return "cpu-copy" if kind == "cpu" else dram
    if bound != "compute":
        return None
    if kind == "cpu":
        return f"cpu-gemm-{'fp32' if dtype in CPU_FP32_ROOF_DTYPES or dtype not in ('fp32', 'fp64') else dtype}"
    return f"gemm-{dtype}"


def cpu_device(cal: Calibration) -> Device:
    """A Device named 'cpu' whose roofs are this CPU's measured ceilings.

    fp32/fp64 GEMM rates are both the 'vector' and the 'tensor' roof (a CPU matmul runs on the same SIMD
    units, and matmul rows look up the 'tensor' roof); bf16 and fp16 matmuls run against the fp32 GEMM rate
    (:data:`CPU_FP32_ROOF_DTYPES`: the calibration does not time them; torch runs them on the same units, natively
    only where the CPU has bf16/fp16 instructions); DRAM bandwidth is the copy bandwidth (read + write); the launch
    floor is the host time of one tiny torch op (dispatch overhead).
    """
    if cal.machine.kind != "cpu":
        raise CalibrationError(f"calibration of {cal.machine.name!r} is a GPU calibration: use apply()")
    compute: dict[tuple[str, str], float] = {}
    for dtype in ("fp32", "fp64"):
        rate = cal.value(f"cpu-gemm-{dtype}")
        if rate:
            compute[(dtype, "vector")] = rate
            compute[(dtype, "tensor")] = rate
    for dtype in CPU_FP32_ROOF_DTYPES:
        rate = cal.value(f"cpu-gemm-{dtype}") or compute.get(("fp32", "tensor"))
        if rate:
            compute[(dtype, "tensor")] = rate
    copy = cal.value("cpu-copy")
    missing = [name for name, ok in (("cpu-gemm-fp32", ("fp32", "vector") in compute), ("cpu-copy", copy)) if not ok]
    if missing:
        raise CalibrationError(f"CPU calibration lacks {', '.join(missing)}: re-measure with roofline calibrate")
    capacities = {"llc": float(cal.machine.llc_bytes)} if cal.machine.llc_bytes else {}
    return Device(
        name="cpu",
        display_name=cal.machine.name,
        vendor="other",
        compute=compute,
        bandwidth={"dram": float(copy)},  # type: ignore[arg-type]
        launch_floor_s=cal.value("launch-host") or 0.0,
        roof_source=ROOF_SOURCE_MEASURED,
        capacities=capacities,
        compute_units=0,
        unit_name="core",
    )
