"""Baselines: the points of one measured report, kept to gate later runs against (`roofline gate`).

A baseline is a versioned JSON document (schema ``roofline.baseline``, version 1) holding, per point (a bench row
or a diagnose op): its key, counts (FLOPs, bytes, kernels), time, roof time, efficiency and every timing sample;
plus the identity of what was measured (to refuse a baseline of another suite or model), the machine (to warn
when it differs), the tool version and the git commit of the working directory.

A baseline can pool several runs of the same suite or model (:func:`from_reports`): each point keeps every run's
samples and each run's median (``run_medians_s``), from which the gate learns how far that point drifts from run
to run (clocks, power, the runner) -- a drift that no test on one run's samples can see.

Keys match a point across runs (:func:`points_of`):
- bench: ``kind | label | dtype | op`` (e.g. ``gemm | m=4096 n=4096 k=4096 | bf16 | gemm torch.matmul bf16``);
- diagnose: ``phase | module path | op | input shapes | #occurrence`` (``rank R | `` first for a distributed
  run's rows), the occurrence counting earlier ops of
  the report with the same phase, module, op and shapes (0 for the first). An op inserted elsewhere in the
  model leaves every other key unchanged.

Reading is tolerant (unknown keys are ignored: a later minor version may add some); another ``schema``, another
``version``, invalid JSON or a document that does not validate is a :class:`BaselineError`, and
:func:`save` never overwrites a file that is not a baseline.
"""

from __future__ import annotations

import json
import math
import shlex
import subprocess
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roofline import ironlaw
from roofline.errors import RooflineError
from roofline.report.machine import MachineInfo, machine_of
from roofline.report.outputs import BASELINE_SCHEMA
from roofline.report.rows import finite_number, positive_number
from roofline.version import __version__
from roofline.yamlio import (
    MAX_JSON_BYTES,
    dumps_json,
    keep_parsed,
    parse_json,
    parse_json_bytes,
    paused_gc,
    read_bytes,
)

SCHEMA = BASELINE_SCHEMA
VERSION = 1
MEASURED_SOURCES = ("bench", "diagnose")


class BaselineError(RooflineError):
    """A baseline that is missing, corrupt, foreign, or of another suite or model (exit 2)."""


class _Stored(BaseModel):
    # Tolerant reading of the versioned document: keys added by a later minor version are ignored.
    model_config = ConfigDict(extra="ignore", defer_build=True, populate_by_name=True)


class Point(_Stored):
    """One bench row or diagnose op, as the gate compares it."""

    key: str
    label: str  # for people: 'gemm m=4096 n=4096 k=4096 bf16', 'layers.0.mlp aten::mm 64×128, 128×256'
    flops: int | float | None = None
    bytes: int | float | None = None
    kernels: int | None = None
    time_s: float | None = None  # bench: median of the samples; diagnose: mean per iteration
    roof_time_s: float | None = None  # the roofline's time for the counted work (efficiency = roof / time)
    efficiency: float | None = None
    samples_s: list[float] = Field(default_factory=list)  # every run's samples, pooled
    run_medians_s: list[float] = Field(default_factory=list)  # the median time of each run (2+ runs: its drift)
    bound: str | None = None


class Identity(_Stored):
    """What was measured. Two identities name different workloads when a field known on both sides differs."""

    source: Literal["bench", "diagnose"]
    suite: str | None = None  # bench: the suite (file stem or shipped name), None for a single command
    model: str | None = None  # diagnose: the model file's name
    model_path: str | None = None
    entry: str | None = None
    dtype: str | None = None
    mode: str | None = None

    def mismatch(self, other: Identity) -> str | None:
        """Why ``other`` measured something else than self, or None."""
        if self.source != other.source:
            return f"a {self.source} baseline cannot gate a {other.source} report"
        if self.source == "bench":
            if self.suite and other.suite and self.suite != other.suite:
                return f"baseline of suite {self.suite!r}, report of suite {other.suite!r}"
            return None
        if self.model != other.model:
            return f"baseline of model {self.model!r}, report of model {other.model!r}"
        for field in ("entry", "dtype", "mode"):
            if getattr(self, field) != getattr(other, field):
                return (
                    f"baseline of {self.model} with {field} {getattr(self, field)!r}, "
                    f"report with {field} {getattr(other, field)!r}"
                )
        return None

    def describe(self) -> str:
        if self.source == "bench":
            return f"bench suite {self.suite}" if self.suite else "bench"
        extras = [f"{name} {value}" for name in ("entry", "dtype", "mode") if (value := getattr(self, name))]
        return f"diagnose {self.model}" + (f" ({', '.join(extras)})" if extras else "")


class ReportRef(_Stored):
    path: str | None = None
    created_utc: str = ""
    command: str = ""


class Baseline(_Stored):
    schema_: str = Field(SCHEMA, alias="schema")
    version: int = VERSION
    created_utc: str = ""
    tool_version: str = __version__
    commit: str | None = None  # git HEAD of the working directory when saved
    identity: Identity
    machine: MachineInfo
    reports: list[ReportRef] = Field(default_factory=list)  # the runs pooled, in order
    points: list[Point]

    def to_json(self) -> str:
        return dumps_json(self.model_dump(mode="json", by_alias=True), indent=2) + "\n"


# ------------------------------------------------------------------------------------------ from a report


def require_measured(report: Any, where: str) -> None:
    """BaselineError unless ``report`` (read from ``where``) holds measured rows: a bench or diagnose report,
    complete (not interrupted) and not empty."""
    if report.source not in MEASURED_SOURCES:
        raise BaselineError(
            f"{where}: this is an {report.source} report, with no measured times: gate a `roofline bench` or "
            "`roofline diagnose` report"
        )
    extra = report.model_extra or {}
    if extra.get("interrupted"):
        raise BaselineError(
            f"{where}: the run was interrupted ({len(report.rows)} of {extra.get('total', '?')} rows): run it again"
        )
    if not report.rows:
        raise BaselineError(f"{where}: the report has no rows")
    timed = [row for row in report.rows if report.source == "bench" or row.get("timed", True)]
    if report.source == "bench":
        bare = next((index for index, row in enumerate(timed) if not row.get("samples_s")), None)
    else:  # diagnose reports written before samples were kept have none: refused only when no op has any
        bare = 0 if timed and not any(row.get("samples_s") for row in timed) else None
    if bare is not None:
        raise BaselineError(
            f"{where}: rows[{bare}] has no timing samples (samples_s), which the gate measures with: gate the report "
            f"as `roofline {report.source}` wrote it, or run it again"
        )


def _shape_text(shapes: Any) -> str:
    if not isinstance(shapes, list):
        return ""
    return ", ".join(["×".join(map(str, s)) if isinstance(s, list) else str(s) for s in shapes])


def _positive(value: Any) -> float | None:
    return positive_number(value)


def _samples(values: Any) -> list[float]:
    """A row's samples as floats; nulls (a NaN the report held) and anything not a finite number left out."""
    if not isinstance(values, list):
        return []
    if set(map(type, values)) <= _FLOAT and all(map(math.isfinite, values)):  # NB: every report's: checked in C
        return list(values)
    return [number for value in values if (number := finite_number(value)) is not None]


_FLOAT = {float}


def _bench_point(row: dict[str, Any]) -> Point:
    get = row.get
    kind, label = str(get("kind") or ""), str(get("label") or "")
    dtype, op = str(get("dtype") or ""), str(get("op") or "")
    return Point(
        key=" | ".join((kind, label, dtype, op)),
        label=" ".join(part for part in (kind, label, dtype) if part),
        flops=row.get("flops"),
        bytes=row.get("bytes"),
        kernels=row.get("kernels"),
        time_s=_positive(row.get("median_s")),
        roof_time_s=row.get("roof_time_s"),
        efficiency=row.get("efficiency"),
        samples_s=_samples(row.get("samples_s")),
        bound=row.get("bound"),
    )


_COMPACT = json.JSONEncoder(separators=(",", ":"))


def _diagnose_points(rows: list[dict[str, Any]]) -> list[Point]:
    seen: Counter[str] = Counter()
    points = []
    for row in rows:
        shapes = row.get("input_shapes") or []
        base = " | ".join(
            (
                str(row.get("phase") or "forward"),
                str(row.get("module") or ""),
                str(row.get("op") or ""),
                _COMPACT.encode(shapes),  # NB: json.dumps(shapes, separators=(",", ":")), its encoder made once
            )
        )
        rank = row.get("rank")
        if rank is not None:  # a distributed run's rows: each rank's ops apart (docs/distributed.md)
            base = f"rank {rank} | {base}"
        occurrence = seen[base]
        seen[base] += 1
        module = row.get("module") or "(model)"
        phase = "" if row.get("phase", "forward") == "forward" else f"[{row.get('phase')}] "
        phase = phase if rank is None else f"[rank {rank}] {phase}"
        label = f"{phase}{module} {row.get('op', '')} {_shape_text(shapes)}".rstrip()
        timed = row.get("timed", True)
        points.append(
            Point(
                key=f"{base} | #{occurrence}",
                label=label + (f" #{occurrence + 1}" if occurrence else ""),
                flops=row.get("flops"),
                bytes=row.get("bytes"),
                kernels=row.get("kernels"),
                time_s=_positive(row.get("time_s")) if timed else None,
                roof_time_s=row.get("roof_time_s"),
                efficiency=row.get("efficiency") if timed else None,
                samples_s=_samples(row.get("samples_s")) if timed else [],
                bound=row.get("bound"),
            )
        )
    return points


def points_of(report: Any, where: str = "the report") -> list[Point]:
    """The report's points with their keys (see the module docstring), in report order. BaselineError (naming
    ``where``) when two bench rows are one point."""
    if report.source == "bench":
        points = [_bench_point(row) for row in report.rows]
        first: dict[str, int] = {}
        for index, point in enumerate(points):
            earlier = first.setdefault(point.key, index)
            if earlier != index:  # one point would pool two rows' samples: the gate could not tell them apart
                raise BaselineError(
                    f"{where}: rows {earlier} and {index} are one point ({point.label!r}: same kind, label, "
                    "dtype and op): give the workloads different labels, or keep one"
                )
        return points
    if report.source == "diagnose":
        return _diagnose_points(list(report.rows))
    raise BaselineError(f"a {report.source} report has no measured points")


#: The `roofline bench` commands that run one workload kind, in the versions that wrote no suite block: any other
#: first word after `bench` named a suite. Frozen: reports written since then say which suite they ran.
_LEGACY_BENCH_COMMANDS = ("gemm", "attention", "elementwise", "norm", "conv2d", "decode")


def _legacy_suite(command: str) -> str | None:
    """The suite of a bench report written before reports stored it, from its command line: `bench suite X`,
    `bench X.yaml` or `bench SHIPPED`."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if "bench" not in words:
        return None
    rest = words[words.index("bench") + 1 :]
    if rest[:1] == ["suite"]:
        rest = rest[1:]
    if not rest or rest[0].startswith("-"):
        return None
    first = rest[0]
    if first.endswith((".yaml", ".yml")):
        return Path(first).stem
    return None if first in _LEGACY_BENCH_COMMANDS else first


def suite_of(report: Any) -> str | None:
    """The suite a bench report ran (its file's stem, else its name), None for a single command.

    Read from the report's ``bench.suite`` block (null for a single command); a report written before that block
    existed has no ``suite`` key, and its command line tells (the one place a command line is parsed)."""
    bench = (report.model_extra or {}).get("bench") or {}
    if "suite" not in bench:
        return _legacy_suite(report.command)
    suite = bench["suite"]
    if not isinstance(suite, dict):
        return None
    return Path(str(suite.get("file") or suite.get("name"))).stem or None


def identity_of(report: Any) -> Identity:
    if report.source == "bench":
        return Identity(source="bench", suite=suite_of(report))
    extra = report.model_extra or {}
    block = extra.get("diagnose") or {}
    model = str(block.get("model") or "")
    return Identity(
        source="diagnose",
        model=Path(model).name or None,
        model_path=model or None,
        entry=block.get("entry"),
        dtype=block.get("dtype"),
        mode=block.get("mode"),
    )


def git_commit(cwd: Path | None = None) -> str | None:
    """HEAD of the git repository around ``cwd`` (read-only), or None outside one or without git."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


def from_report(report: Any, *, path: Path | str | None = None, commit: str | None = None) -> Baseline:
    """A baseline of one measured Report; ``commit`` defaults to git HEAD of the working directory."""
    return from_reports([report], paths=[path], commit=commit)


def _run_time(point: Point) -> float | None:
    if point.samples_s:
        from roofline.samples import median

        return median(point.samples_s)
    return point.time_s


def _pool(runs: list[Point]) -> Point:
    """One key's points from several runs: counts and roof time of the first, samples pooled, run medians kept."""
    first = runs[0]
    medians = [t for t in (_run_time(p) for p in runs) if t is not None and t > 0]
    samples = [s for p in runs for s in p.samples_s]
    if len(runs) == 1:  # NB: first is this baseline's own (points_of made it): set, not copied
        first.run_medians_s = medians
        return first
    from roofline.samples import median

    time_s = median(medians) if medians else None
    roof = first.roof_time_s
    return first.model_copy(
        update={
            "time_s": time_s,
            "efficiency": ironlaw.efficiency(roof, time_s) if roof is not None and time_s else first.efficiency,
            "samples_s": samples,
            "run_medians_s": medians,
        }
    )


def from_reports(
    reports: Sequence[Any], *, paths: Sequence[Path | str | None] | None = None, commit: str | None = None
) -> Baseline:
    """A baseline pooling one or more measured reports of the same suite or model (one report per run).

    Points are matched by key; a point missing from some runs keeps the runs it has. Counts, roof times and the
    machine are the first report's."""
    if not reports:
        raise BaselineError("a baseline needs at least one report")
    paths = list(paths or [None] * len(reports))
    names = [str(path or f"report {index + 1}") for index, path in enumerate(paths)]
    for report, name in zip(reports, names, strict=True):
        require_measured(report, name)
    identity = identity_of(reports[0])
    for report, name in zip(reports[1:], names[1:], strict=True):
        mismatch = identity.mismatch(identity_of(report))
        if mismatch:
            raise BaselineError(f"{name}: not a run of what {names[0]} measured ({mismatch})")
    by_key: dict[str, list[Point]] = {}
    for report, name in zip(reports, names, strict=True):
        for point in points_of(report, name):
            by_key.setdefault(point.key, []).append(point)
    return Baseline(
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        commit=(commit if commit is not None else git_commit()) or None,
        identity=identity,
        machine=machine_of(reports[0]),
        reports=[
            ReportRef(path=str(path) if path else None, created_utc=r.created_utc, command=r.command)
            for r, path in zip(reports, paths, strict=True)
        ],
        points=[_pool(runs) for runs in by_key.values()],
    )


# ------------------------------------------------------------------------------------------ files


def parse(text: str | bytes, source: str) -> Baseline:
    """The baseline in ``text`` (a file's text, or its bytes: then a binary or non-UTF-8 file is one error line)."""
    with paused_gc():
        if isinstance(text, bytes):
            data = parse_json_bytes(text, source, BaselineError, "JSON baseline", "corrupt baseline", "save it again")
        else:
            data = parse_json(text, source, BaselineError, "corrupt baseline", "save it again")
    keep_parsed(data)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else None
        what = f"schema {found!r}" if found else "no schema"
        raise BaselineError(f'{source}: not a roofline baseline ({what}; expected "{SCHEMA}")')
    if data.get("version") != VERSION:
        raise BaselineError(
            f"{source}: baseline version {data.get('version')!r} is not read by roofline {__version__} "
            f"(reads version {VERSION}): save it again with this version"
        )
    try:
        with paused_gc():
            return Baseline.model_validate(data, strict=True)
    except ValidationError as exc:
        from roofline.yamlio import describe_validation_error

        raise BaselineError(f"{source}: corrupt baseline: {describe_validation_error(exc)}: save it again") from None
    except RecursionError:
        raise BaselineError(f"{source}: corrupt baseline: nested too deeply: save it again") from None


def load(path: Path | str) -> Baseline:
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise BaselineError(f"{path}: no such baseline: save one with `roofline baseline save REPORT.json -o {path}`")
    data = read_bytes(path, BaselineError, "baseline", MAX_JSON_BYTES)
    return parse(data, str(path))


def save(baseline: Baseline, path: Path | str, *, force: bool = False, option: str = "-o") -> Path:
    """Write atomically. A file already at ``path`` is replaced only when it is a roofline baseline itself (or
    ``force``). A write that fails (disk full) is one line ``{option} PATH: cannot write it: ...`` (UsageError)."""
    from roofline.report.outputs import write

    path = Path(path)
    if path.exists() and not force:
        try:
            load(path)
        except BaselineError as exc:
            raise BaselineError(
                f"{exc}: not overwritten (remove it, give --force, or write the baseline elsewhere)"
            ) from None
    write(path, baseline.to_json(), option=option)
    return path
