"""The Report: the versioned JSON document every command writes and plot/gate/compare read.

Reading is tolerant (unknown keys are kept and ignored, so older tools read newer minor versions);
a newer version or a foreign document is an error, never silently reinterpreted. Rows are stored as JSON objects
of the models in roofline.report.rows (:meth:`Report.typed_rows` gives them typed).

Versions: 2 stores the iron-law values (roofline.ironlaw) on every row: analytic rows gained ``roof_time_s``
and ``efficiency``. A version-1 report is upgraded when it is loaded (roofline.report.rows.upgrade_rows).
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from roofline.errors import ReportError
from roofline.fileio import atomic_write_text
from roofline.report.machine import machine_of
from roofline.report.outputs import REPORT_SCHEMA
from roofline.report.rows import check_rows, parse_rows, upgrade_rows
from roofline.version import __version__
from roofline.yamlio import (
    MAX_JSON_BYTES,
    dumps_json,
    keep_parsed,
    null_nonfinite,
    parse_json_bytes,
    paused_gc,
    read_bytes,
)

SCHEMA = REPORT_SCHEMA
VERSION = 2
READS = (1, 2)  # the versions read_report loads (version 1 upgraded)


class DeviceInfo(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)

    name: str
    display_name: str
    roof_source: str
    dram_bandwidth_bytes_per_s: float
    launch_floor_s: float
    compute_flops_per_s: dict[str, float]  # 'dtype unit' -> FLOP/s


#: how a notebook shows a Report ('html', 'markdown' -> a function of the report): registered by the render layer
#: (roofline.render.notebook, imported with roofline.api), which this layer cannot import
DISPLAY: dict[str, Callable[[Report], str]] = {}


class Report(BaseModel):
    model_config = ConfigDict(extra="allow", defer_build=True)

    schema_: str = SCHEMA
    version: int = VERSION
    tool_version: str = __version__
    created_utc: str = ""
    command: str = ""
    source: str = "analytic"  # analytic | bench | diagnose
    host: dict[str, str] = {}
    devices: list[DeviceInfo] = []
    rows: list[dict[str, Any]] = []

    @field_validator("rows", mode="plain")
    @classmethod
    def _row_objects(cls, rows: Any) -> list[dict[str, Any]]:
        """A list of objects, kept as they are: pydantic's own check of ``list[dict[str, Any]]`` copied every row
        (a tenth of reading a large report); what the readers need of each row is checked by check_rows."""
        if not isinstance(rows, (list, tuple)):
            raise ValueError(f"Input should be a valid list of row objects (got {type(rows).__name__})")
        if type(rows) is list and all(type(row) is dict for row in rows):
            return rows
        for index, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise ValueError(f"rows[{index}] is not an object (got {row!r:.40})")
        return [dict(row) for row in rows]

    @model_validator(mode="after")
    def _upgrade(self) -> Report:
        """Every row with its stored iron-law values (version 1 and hand-built rows: filled once, here)."""
        self.rows = upgrade_rows(self.source, self.rows, self.devices)
        self.version = max(self.version, VERSION)
        return self

    def _repr_html_(self) -> str | None:
        """Jupyter: summary, memory, the chart, findings and the top points (roofline.render.notebook)."""
        show = DISPLAY.get("html")
        return None if show is None else show(self)

    def _repr_markdown_(self) -> str | None:
        show = DISPLAY.get("markdown")
        return None if show is None else show(self)

    def typed_rows(self) -> list[Any]:
        """The rows as their models (roofline.report.rows: Row, BenchRow or OpPoint, by the report's source)."""
        return parse_rows(self.source, self.rows)

    def save(self, path: str | Path) -> Path:
        """Write the report's JSON at ``path``, atomically (what `plot`, `report` and `gate` read); the path.
        A write that fails (no such folder, disk full) is one UsageError line."""
        from roofline.fileio import writable_place
        from roofline.report.outputs import write

        where = writable_place(path, "Report.save")
        write(where, self.to_json(), option="Report.save", shown=path)
        return where

    def to_json(self) -> str:
        """The report as JSON: indented, except that each row is one line. NB: json's indenting encoder is pure
        Python (a 100,000-row report took 17 s); each row through the C encoder keeps a large report to seconds
        and one row per line still diffs well."""
        data = self.model_dump(mode="json")
        data = {"schema": data.pop("schema_"), **data}
        rows = data.pop("rows", [])
        head = dumps_json({**data, "rows": []}, indent=2, default=str)
        if not rows:
            return head + "\n"
        marker = '\n  "rows": []'
        assert marker in head  # NB: the last key, written as an empty list: the rows go in its place
        body = ",\n".join("    " + dumps_json(row, default=str) for row in rows)
        return head.replace(marker, '\n  "rows": [\n' + body + "\n  ]", 1) + "\n"


def device_info(device: Any) -> DeviceInfo:
    return DeviceInfo(
        name=device.name,
        display_name=device.display_name,
        roof_source=device.roof_source,
        dram_bandwidth_bytes_per_s=device.dram_bandwidth,
        launch_floor_s=device.launch_floor_s,
        compute_flops_per_s={f"{d} {u}": v for (d, u), v in sorted(device.compute.items())},
    )


def new_report(command: str, source: str, devices: list[Any], rows: list[BaseModel]) -> Report:
    return Report(
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=command,
        source=source,
        host={"python": platform.python_version(), "platform": platform.platform(terse=True)},
        devices=[device_info(d) for d in devices],
        rows=[row.model_dump(mode="json") for row in rows],
    )


def write_report(report: Report, path: Path) -> None:
    atomic_write_text(Path(path), report.to_json())


def nonfinite_note(source: object, paths: list[str], shown: int = 3) -> str:
    """'r.json: 3 non-finite values (NaN or Infinity) read as null: rows[0].median_s, ...'."""
    listed = ", ".join(paths[:shown]) + (f" and {len(paths) - shown} more" if len(paths) > shown else "")
    plural = "s" if len(paths) > 1 else ""
    return f"{source}: {len(paths)} non-finite value{plural} (NaN or Infinity) read as null: {listed}"


def _stderr_note(text: str) -> None:
    import sys

    sys.stderr.write(f"note: {text}\n")


def read_report(path: Path, note: Callable[[str], None] | None = _stderr_note) -> Report:
    """The report in ``path`` (version 1 upgraded). NaN and Infinity, which Python's json reads but no strict
    JSON reader does, are read as null (a missing value) and ``note`` is told once where they were (by default
    one line ``note: ...`` on stderr); every other problem is a ReportError."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise ReportError(f"{path}: no such report file")
    raw = read_bytes(path, ReportError, "report", MAX_JSON_BYTES)
    with paused_gc():
        constants: list[str] = []
        data = parse_json_bytes(raw, path, ReportError, "JSON report", "corrupt report", "re-create it", constants)
    del raw
    keep_parsed(data)  # the CLI's own process: its rows are never freed one by one (the process ends after)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ReportError(f'{path}: not a roofline report (no "schema": "{SCHEMA}")')
    if data.get("version") not in READS:
        raise ReportError(
            f"{path}: report version {data.get('version')!r} is not supported by roofline {__version__} "
            f"(reads versions {', '.join(map(str, READS))}): upgrade roofline"
        )
    try:
        data, nonfinite = null_nonfinite(data) if constants else (data, [])
        if nonfinite and note is not None:
            note(nonfinite_note(path, nonfinite))
        data["schema_"] = data.pop("schema")
        problem = check_rows(data.get("rows"))
        if problem:
            raise ReportError(f"{path}: corrupt report: {problem}")
        with paused_gc():
            report = Report.model_validate(data)
    except ValidationError as exc:
        from roofline.yamlio import describe_validation_error

        raise ReportError(f"{path}: corrupt report: {describe_validation_error(exc)}: re-create it") from None
    except RecursionError:
        raise ReportError(f"{path}: corrupt report: nested too deeply: re-create it") from None
    try:
        machine_of(report, clocks=False)  # the machine block, checked now (gate and baseline read it)
    except ValidationError as exc:
        from roofline.yamlio import describe_validation_error

        raise ReportError(f"{path}: corrupt report: machine.{describe_validation_error(exc)}: re-create it") from None
    except ValueError as exc:
        raise ReportError(f"{path}: corrupt report: machine: {exc}: re-create it") from None
    return report
