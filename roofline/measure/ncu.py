"""Nsight Compute counters: read an ``ncu --csv --page raw`` export, and run ``ncu`` on a command.

The raw page is one row per profiled kernel launch, after two header rows: the column names (``ID``, ``Kernel
Name``, ... then one column per metric, e.g. ``dram__bytes_read.sum``) and their units (``byte``, ``Kbyte``,
``Mbyte``, ``ns``/``nsecond``, ``usecond``, ``%``). Values may carry thousands separators (``1,980,000``); ``n/a``
and empty cells read as missing. ncu's own lines (``==PROF==``, ``==WARNING==``) and the program's output before
the header are skipped, so ``ncu ... > out.csv`` reads as well as ``--log-file``. Units are converted exactly
(decimal arithmetic): bytes to bytes (Kbyte = 1000 bytes, KiB = 1024), times to seconds, percentages kept as
percent. Columns we do not read are ignored.

What we read per launch (:class:`KernelCounters`): DRAM bytes read and written (``dram__bytes_read.sum``,
``dram__bytes_write.sum``: required), L2 bytes (``lts__t_bytes.sum``), L1 bytes (``l1tex__t_bytes.sum``: the
bytes requested through the L1/TEX cache's tag stage -- global, local, texture and surface accesses; shared-memory
accesses are not among them), SM and memory throughput (% of peak:
``sm__throughput.avg.pct_of_peak_sustained_elapsed``, ``gpu__compute_memory_throughput.avg.pct_of_peak_sustained_
elapsed``), achieved occupancy (``sm__warps_active.avg.pct_of_peak_sustained_active``), tensor-pipe activity
(``sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed``) and the duration (``gpu__time_duration.sum``);
all but the DRAM bytes are optional (None when the export lacks them).

A file that is not such an export -- another tool's CSV, ncu's details page (``Metric Name`` rows), an export
without its units row, a truncated file, one without the DRAM byte metrics -- is a :class:`CountersError`: one line
naming the fix. Running ncu: :func:`ncu_command` (only the metrics above, ``--clock-control none``, ``--csv --page
raw``, an NVTX range) and :func:`run_ncu`, whose failures (ncu not on PATH, no permission to the counters:
ERR_NVGPUCTRPERM) are a :class:`CountersUnavailable` naming the fix.

An ncu report file (``.ncu-rep``) is read through Nsight Compute's own Python module ``ncu_report`` (its
``extras/python`` folder) into the same fields (:func:`read_ncu_rep`; :func:`read_counters` picks the reader by
suffix); where the module cannot be imported, a CountersError names the fix (NCU_REPORT_FIX).
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from roofline.errors import RooflineError

DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
L2_BYTES = "lts__t_bytes.sum"
L1_BYTES = "l1tex__t_bytes.sum"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY_PCT = "sm__warps_active.avg.pct_of_peak_sustained_active"
TENSOR_PCT = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
DURATION = "gpu__time_duration.sum"

#: the metrics `roofline diagnose --counters` asks ncu for (and nothing else: each costs replay passes)
METRICS = (DRAM_READ, DRAM_WRITE, L2_BYTES, L1_BYTES, SM_PCT, MEMORY_PCT, OCCUPANCY_PCT, TENSOR_PCT, DURATION)
REQUIRED = (DRAM_READ, DRAM_WRITE)
#: the NVTX range the profiled child wraps its one iteration in (ncu --nvtx-include 'RANGE/')
NVTX_RANGE = "roofline_counters"
PERMISSION_URL = "https://developer.nvidia.com/ERR_NVGPUCTRPERM"

EXPORT_HINT = f"export it with `ncu --metrics {','.join(REQUIRED)},... --csv --page raw APP > FILE.csv`"

_BYTES = {
    "byte": 1,
    "bytes": 1,
    "b": 1,
    "kbyte": 10**3,
    "mbyte": 10**6,
    "gbyte": 10**9,
    "tbyte": 10**12,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SECONDS = {
    "ns": Decimal("1e-9"),
    "nsecond": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "usecond": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "msecond": Decimal("1e-3"),
    "s": Decimal(1),
    "second": Decimal(1),
}


class CountersError(RooflineError):
    """An ncu export we cannot read (exit 2)."""


class CountersUnavailable(RooflineError):
    """ncu cannot collect counters here: not on PATH, no permission, or it failed. The message names the fix."""


class KernelCounters(BaseModel):
    """One profiled kernel launch's counters, in base units (bytes, seconds; percentages as percent, 0..100)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int  # ncu's launch ID (its order)
    name: str
    dram_read_bytes: int
    dram_write_bytes: int
    l2_bytes: int | None = None
    l1_bytes: int | None = None  # through the L1/TEX cache (l1tex__t_bytes.sum)
    sm_pct: float | None = None  # SM (compute) throughput, % of peak
    memory_pct: float | None = None  # memory throughput (the busiest of DRAM, L2, L1), % of peak
    occupancy_pct: float | None = None  # achieved occupancy, % of the warps an SM holds
    tensor_pct: float | None = None  # tensor pipe active, % of peak (None: not collected / not on this GPU)
    duration_s: float | None = None

    @property
    def dram_bytes(self) -> int:
        return self.dram_read_bytes + self.dram_write_bytes


def _number(text: str) -> Decimal | None:
    """A cell as a Decimal: thousands separators dropped; None for '', 'n/a' and other non-numbers."""
    cleaned = text.strip().replace(",", "")
    if not cleaned or cleaned.lower() in ("n/a", "nan", "-"):
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _bytes(value: Decimal | None, unit: str, column: str, where: str) -> int | None:
    if value is None:
        return None
    factor = _BYTES.get(unit.strip().lower())
    if factor is None:
        raise CountersError(f"{where}: column {column} has unit {unit!r}, not bytes: {EXPORT_HINT}")
    return int((value * factor).to_integral_value())


def _seconds(value: Decimal | None, unit: str, column: str, where: str) -> float | None:
    if value is None:
        return None
    factor = _SECONDS.get(unit.strip().lower())
    if factor is None:
        raise CountersError(f"{where}: column {column} has unit {unit!r}, not a time: {EXPORT_HINT}")
    return float(value * factor)


def _percent(value: Decimal | None, unit: str, column: str, where: str) -> float | None:
    if value is None:
        return None
    if unit.strip() != "%":
        raise CountersError(f"{where}: column {column} has unit {unit!r}, not %: {EXPORT_HINT}")
    return float(value)


def _rows(text: str) -> tuple[list[list[str]], int]:
    """The CSV rows from the header on (ncu's '==' lines dropped), and the header's line number."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",') or line.startswith("ID,")), None)
    if start is None:
        return [], 0
    body = [line for line in lines[start:] if not line.startswith("==")]
    return list(csv.reader(io.StringIO("\n".join(body)))), start + 1


def parse_csv(text: str, source: str = "the ncu export") -> list[KernelCounters]:
    """Every kernel launch of an ``ncu --csv --page raw`` export, in ncu's order. CountersError (one line naming
    the fix) for anything else."""
    rows, header_line = _rows(text)
    if not rows:
        raise CountersError(f'{source}: not an Nsight Compute CSV (no "ID" header row): {EXPORT_HINT}')
    names = [n.strip() for n in rows[0]]
    if "Metric Name" in names or "Metric Value" in names:
        raise CountersError(
            f"{source}: an ncu details-page export (one row per metric): export the raw page instead "
            "(ncu --csv --page raw, or ncu --import FILE.ncu-rep --csv --page raw)"
        )
    if "Kernel Name" not in names:
        raise CountersError(f'{source}: no "Kernel Name" column: not an ncu --page raw export: {EXPORT_HINT}')
    missing = [m for m in REQUIRED if m not in names]
    if missing:
        raise CountersError(
            f"{source}: the export lacks {', '.join(missing)}: profile with --metrics "
            f"{','.join(METRICS)} (or a section set that includes them)"
        )
    if len(rows) < 2 or (rows[1] and rows[1][0].strip()):
        raise CountersError(
            f"{source}: no units row under the header (ncu --csv --page raw writes one; this is another ncu "
            f"version or an edited file): {EXPORT_HINT}"
        )
    units = rows[1]
    if len(units) != len(names):
        raise CountersError(f"{source}: the units row has {len(units)} columns, the header {len(names)}: truncated?")
    col = {n: i for i, n in enumerate(names)}
    out: list[KernelCounters] = []
    for offset, row in enumerate(rows[2:]):
        line = header_line + 2 + offset
        if not row or all(not c.strip() for c in row):
            continue
        where = f"{source}, line {line}"
        if len(row) != len(names):
            raise CountersError(
                f"{where}: {len(row)} of {len(names)} columns: the file is truncated or damaged: re-export it"
            )

        def cell(name: str, row: list[str] = row) -> Decimal | None:
            return _number(row[col[name]]) if name in col else None

        def unit(name: str) -> str:
            return units[col[name]] if name in col else ""

        ident = _number(row[col["ID"]])
        read = _bytes(cell(DRAM_READ), unit(DRAM_READ), DRAM_READ, where)
        write = _bytes(cell(DRAM_WRITE), unit(DRAM_WRITE), DRAM_WRITE, where)
        if ident is None or read is None or write is None:
            raise CountersError(f"{where}: no launch ID or DRAM bytes in this row: the file is damaged: re-export it")
        out.append(
            KernelCounters(
                id=int(ident),
                name=row[col["Kernel Name"]].strip(),
                dram_read_bytes=read,
                dram_write_bytes=write,
                l2_bytes=_bytes(cell(L2_BYTES), unit(L2_BYTES), L2_BYTES, where),
                l1_bytes=_bytes(cell(L1_BYTES), unit(L1_BYTES), L1_BYTES, where),
                sm_pct=_percent(cell(SM_PCT), unit(SM_PCT), SM_PCT, where),
                memory_pct=_percent(cell(MEMORY_PCT), unit(MEMORY_PCT), MEMORY_PCT, where),
                occupancy_pct=_percent(cell(OCCUPANCY_PCT), unit(OCCUPANCY_PCT), OCCUPANCY_PCT, where),
                tensor_pct=_percent(cell(TENSOR_PCT), unit(TENSOR_PCT), TENSOR_PCT, where),
                duration_s=_seconds(cell(DURATION), unit(DURATION), DURATION, where),
            )
        )
    if not out:
        raise CountersError(f"{source}: the export holds no kernel launches (nothing was profiled)")
    return out


def read_csv(path: Path) -> list[KernelCounters]:
    """:func:`parse_csv` of a file; a missing or unreadable file is a CountersError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise CountersError(f"{path}: no such file") from None
    except OSError as exc:
        raise CountersError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_csv(text, str(path))


# ------------------------------------------------------------------------------------------------ .ncu-rep

NCU_REPORT_FIX = (
    "reading a .ncu-rep needs Nsight Compute's Python module ncu_report, which cannot be imported here nor found "
    "beside the ncu on PATH: put the extras/python folder of the Nsight Compute install on PYTHONPATH (e.g. "
    "PYTHONPATH=/usr/local/cuda/nsight-compute-VERSION/extras/python), or export the report as CSV "
    "(ncu --import FILE.ncu-rep --csv --page raw > FILE.csv) and read that"
)
#: units ncu_report's values are in where a metric does not say (IMetric has no unit before some versions):
#: bytes, nanoseconds, percent
_DEFAULT_UNITS = {"bytes": "byte", "seconds": "nsecond", "percent": "%"}


#: where Nsight Compute installs live besides the ncu on PATH (its folder and the CUDA toolkit's it belongs to)
NCU_INSTALL_GLOBS = ("/opt/nvidia/nsight-compute/*", "/usr/local/cuda*/nsight-compute*")


def ncu_report_dirs(ncu: str | None = None) -> list[Path]:
    """The extras/python folders holding ncu_report.py, the ncu on PATH's own first: beside it or its parent
    (an install's ncu), under its CUDA toolkit (/usr/local/cuda-X/bin/ncu is a wrapper of
    /usr/local/cuda-X/nsight-compute-Y/ncu), then the usual install places, the newest version first."""
    import glob
    import os

    bases: list[Path] = []
    found = ncu if ncu is not None else shutil.which("ncu")
    if found:
        real = Path(os.path.realpath(found)).parent
        bases += [real, real.parent]
        bases += [Path(p) for p in sorted(glob.glob(str(real.parent / "nsight-compute*")), reverse=True)]
    for pattern in NCU_INSTALL_GLOBS:
        bases += [Path(p) for p in sorted(glob.glob(pattern), reverse=True)]
    dirs: list[Path] = []
    for base in bases:
        extras = base / "extras" / "python"
        if (extras / "ncu_report.py").is_file() and extras not in dirs:
            dirs.append(extras)
    return dirs


def _ncu_report() -> Any:
    """Nsight Compute's own Python report module: importable as is, else from the install of the ncu on PATH
    (:func:`ncu_report_dirs`, its folder put on sys.path); or a CountersError naming the fix."""
    import importlib
    import sys

    try:
        return importlib.import_module("ncu_report")  # NB: ships in Nsight Compute's extras/python
    except ImportError:
        pass
    for folder in ncu_report_dirs():
        sys.path.insert(0, str(folder))
        try:
            return importlib.import_module("ncu_report")
        except ImportError:
            sys.path.remove(str(folder))
    raise CountersError(NCU_REPORT_FIX)


def _metric(action: Any, name: str, kind: str, where: str) -> Decimal | int | float | None:
    metric = action.metric_by_name(name)
    if metric is None:
        return None
    try:
        value = Decimal(repr(float(metric.as_double())))
    except (TypeError, ValueError, InvalidOperation):
        return None
    if not value.is_finite():
        return None
    unit_of = getattr(metric, "unit", None)
    unit = str(unit_of()) if callable(unit_of) else _DEFAULT_UNITS[kind]
    if kind == "bytes":
        return _bytes(value, unit or _DEFAULT_UNITS[kind], name, where)
    if kind == "seconds":
        return _seconds(value, unit or _DEFAULT_UNITS[kind], name, where)
    return _percent(value, unit or "%", name, where)


def _action_name(module: Any, action: Any) -> str:
    """The kernel's demangled name (as ``--print-kernel-base demangled`` writes it in the CSV)."""
    demangled = getattr(getattr(module, "IAction", None), "NameBase_DEMANGLED", None)
    return str(action.name(demangled) if demangled is not None else action.name()).strip()


def read_ncu_rep(path: Path) -> list[KernelCounters]:
    """Every kernel launch of an Nsight Compute report file (``ncu --export FILE``, ``.ncu-rep``) read through
    Nsight Compute's own Python module ``ncu_report`` (load_report, range_by_idx, action_by_idx, metric_by_name),
    with the fields :func:`parse_csv` fills, launches numbered in the report's order. A CountersError (one line
    naming the fix) where the module cannot be imported, the file is missing or unreadable, or it lacks the DRAM
    byte metrics."""
    path = Path(path)
    if not path.is_file():
        raise CountersError(f"{path}: no such file")
    module = _ncu_report()
    try:
        context = module.load_report(str(path))
    except Exception as exc:  # NB: ncu_report raises its own types for a damaged or foreign file
        raise CountersError(f"{path}: ncu_report cannot read it ({exc}): re-export it with ncu --export") from None
    out: list[KernelCounters] = []
    for r in range(context.num_ranges()):
        launches = context.range_by_idx(r)
        for a in range(launches.num_actions()):
            action = launches.action_by_idx(a)
            where = f"{path}, range {r}, launch {a}"
            read = _metric(action, DRAM_READ, "bytes", where)
            write = _metric(action, DRAM_WRITE, "bytes", where)
            if read is None or write is None:
                missing = ", ".join(m for m, v in ((DRAM_READ, read), (DRAM_WRITE, write)) if v is None)
                raise CountersError(
                    f"{where}: the report lacks {missing}: profile with --metrics {','.join(METRICS)} "
                    "(or a section set that includes them)"
                )
            l2 = _metric(action, L2_BYTES, "bytes", where)
            l1 = _metric(action, L1_BYTES, "bytes", where)
            pct = {
                name: _metric(action, name, "percent", where)
                for name in (SM_PCT, MEMORY_PCT, OCCUPANCY_PCT, TENSOR_PCT)
            }
            duration = _metric(action, DURATION, "seconds", where)
            out.append(
                KernelCounters(
                    id=len(out),
                    name=_action_name(module, action),
                    dram_read_bytes=int(read),
                    dram_write_bytes=int(write),
                    l2_bytes=None if l2 is None else int(l2),
                    l1_bytes=None if l1 is None else int(l1),
                    sm_pct=_float(pct[SM_PCT]),
                    memory_pct=_float(pct[MEMORY_PCT]),
                    occupancy_pct=_float(pct[OCCUPANCY_PCT]),
                    tensor_pct=_float(pct[TENSOR_PCT]),
                    duration_s=_float(duration),
                )
            )
    if not out:
        raise CountersError(f"{path}: the report holds no kernel launches (nothing was profiled)")
    return out


def _float(value: Decimal | int | float | None) -> float | None:
    return None if value is None else float(value)


def read_counters(path: Path) -> list[KernelCounters]:
    """The launches of an ncu export: a ``.ncu-rep`` through :func:`read_ncu_rep`, anything else as the CSV raw
    page (:func:`read_csv`)."""
    return read_ncu_rep(path) if Path(path).suffix == ".ncu-rep" else read_csv(path)


# ------------------------------------------------------------------------------------------------ running ncu


def ncu_command(ncu: str, log_file: Path, command: Sequence[str], metrics: Sequence[str] = METRICS) -> list[str]:
    """``ncu`` profiling the kernels inside the NVTX range NVTX_RANGE of ``command``: only ``metrics``, clocks as
    they are (``--clock-control none``: ncu locks them to base by default), the raw page as CSV into
    ``log_file``, kernel names demangled as the torch profiler shows them."""
    return [
        ncu,
        "--metrics",
        ",".join(metrics),
        "--clock-control",
        "none",
        "--nvtx",
        "--nvtx-include",
        f"{NVTX_RANGE}/",
        "--print-kernel-base",
        "demangled",
        "--csv",
        "--page",
        "raw",
        "--log-file",
        str(log_file),
        *command,
    ]


def _permission(text: str) -> bool:
    return "ERR_NVGPUCTRPERM" in text or "permission to access NVIDIA GPU Performance Counters" in text


PERMISSION_FIX = (
    "ncu lacks permission to the GPU performance counters (ERR_NVGPUCTRPERM): run as root, or let non-admin users "
    f"profile (NVIDIA's guide: {PERMISSION_URL})"
)
MISSING_FIX = (
    "ncu (Nsight Compute) is not on PATH: install Nsight Compute (it ships with the CUDA toolkit, in "
    "/usr/local/cuda/bin) and put it on PATH"
)


def run_ncu(
    command: Sequence[str],
    workdir: Path,
    *,
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
    timeout_s: float | None = None,
) -> list[KernelCounters]:
    """Run ``command`` under ncu (:func:`ncu_command`, its CSV in ``workdir``) and parse what it wrote.
    CountersUnavailable (one line naming the fix) when ncu is missing, lacks permission, fails or profiled
    nothing; the command's own failure (its exit status, its last stderr line) too."""
    ncu = which("ncu")
    if ncu is None:
        raise CountersUnavailable(MISSING_FIX)
    log = Path(workdir) / "ncu-raw.csv"
    try:
        done = run(ncu_command(ncu, log, command), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise CountersUnavailable(f"ncu did not finish within {timeout_s:g} s") from None
    except OSError as exc:
        raise CountersUnavailable(f"ncu could not be started ({ncu}): {exc.strerror or exc}") from None
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    said = "\n".join([text, done.stdout or "", done.stderr or ""])
    if _permission(said):
        raise CountersUnavailable(PERMISSION_FIX)
    if done.returncode != 0:
        last = [line for line in (done.stderr or "").splitlines() if line.strip()]
        detail = f": {last[-1].strip()[:200]}" if last else ""
        raise CountersUnavailable(f"the profiled run under ncu failed (exit {done.returncode}){detail}")
    try:
        return parse_csv(text, "ncu's output")
    except CountersError as exc:
        errors = [line for line in said.splitlines() if line.startswith("==ERROR==")]
        raise CountersUnavailable(errors[0] if errors else str(exc)) from None


__all__ = [
    "DRAM_READ",
    "DRAM_WRITE",
    "DURATION",
    "L1_BYTES",
    "L2_BYTES",
    "MEMORY_PCT",
    "METRICS",
    "NCU_REPORT_FIX",
    "NVTX_RANGE",
    "OCCUPANCY_PCT",
    "PERMISSION_URL",
    "SM_PCT",
    "TENSOR_PCT",
    "CountersError",
    "CountersUnavailable",
    "KernelCounters",
    "ncu_command",
    "ncu_report_dirs",
    "parse_csv",
    "read_counters",
    "read_csv",
    "read_ncu_rep",
    "run_ncu",
]
