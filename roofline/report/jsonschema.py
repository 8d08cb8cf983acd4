"""The report's JSON Schema, generated from the models that write it (roofline.report.schema, .rows, .machine) and
shipped with the package (``roofline/report/report.schema.json``) so that other tools can validate a report
without importing roofline. `roofline schema` prints it;

    python -m roofline.report.jsonschema --write

regenerates the shipped file (tests/test_report_schema.py fails when it is stale). The schema describes what
roofline writes (version 2); the reader stays tolerant (it also reads version 1 and keys it does not know).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from roofline.report.machine import MachineInfo
from roofline.report.outputs import REPORT_SCHEMA
from roofline.report.rows import Aggregates, BenchRow, IterationSummary, OpPoint, Row, UncountedOp
from roofline.report.schema import VERSION, DeviceInfo

#: the shipped schema, inside the package
SCHEMA_FILE = Path(__file__).with_name("report.schema.json")
DIALECT = "https://json-schema.org/draft/2020-12/schema"

Source = Literal["analytic", "bench", "diagnose"]


class ReportDocument(BaseModel):
    """A report as written: the fields of roofline.report.schema.Report, its rows typed by the report's source
    (analyze: Row, bench: BenchRow, diagnose: OpPoint) and the blocks bench and diagnose add."""

    model_config = ConfigDict(extra="allow", title="roofline report")

    schema_: Literal["roofline.report"] = Field(alias="schema", description="always 'roofline.report'")
    version: Literal[2] = Field(description="the report format's version (roofline reads 1 and 2)")
    tool_version: str = Field(description="the roofline version that wrote it")
    created_utc: str = Field(description="ISO 8601, UTC")
    command: str = Field(description="the command line that made it")
    source: Source = Field(description="the command that made it: analyze, bench or diagnose; it types the rows")
    host: dict[str, str] = Field(description="python and platform")
    devices: list[DeviceInfo] = Field(description="the devices the rows were placed on, with their roofs")
    rows: list[Row | BenchRow | OpPoint] = Field(description="analytic: Row; bench: BenchRow; diagnose: OpPoint")
    machine: MachineInfo | None = Field(None, description="bench and diagnose: the machine measured")
    bench: dict[str, Any] | None = Field(None, description="bench: the target's facts, the suite")
    skipped: list[dict[str, Any]] | None = Field(None, description="bench: the rows not run, and why")
    interrupted: bool | None = Field(None, description="bench and diagnose: stopped before the end")
    total: int | None = Field(None, description="bench: the rows asked for")
    diagnose: dict[str, Any] | None = Field(None, description="diagnose: the model, its options, stages, notes")
    summary: IterationSummary | None = Field(None, description="diagnose: the iteration")
    aggregates: Aggregates | None = Field(None, description="diagnose: time by op, module and limiter")
    findings: list[dict[str, Any]] | None = Field(None, description="diagnose: the findings, best first")
    combined: dict[str, Any] | None = Field(None, description="diagnose: what the findings allow together")
    uncounted: list[UncountedOp] | None = Field(None, description="diagnose: the ops with no cost model")
    verified: list[dict[str, Any]] | None = Field(None, description="diagnose --verify: each technique measured")
    counters: dict[str, Any] | None = Field(None, description="diagnose --counters: hardware counters")


def json_schema() -> dict[str, Any]:
    """The report's JSON Schema (draft 2020-12), as shipped."""
    assert REPORT_SCHEMA == "roofline.report" and VERSION == 2, "update ReportDocument with the report's format"
    schema = ReportDocument.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": DIALECT, "$id": f"{REPORT_SCHEMA}/{VERSION}", **schema}


def render() -> str:
    from roofline.yamlio import dumps_json

    return dumps_json(json_schema(), indent=2) + "\n"


def shipped() -> str:
    """The schema file shipped with the package."""
    return SCHEMA_FILE.read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """``--write``: regenerate the shipped file; ``--check``: exit 1 when it is stale; neither: print it."""
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args == ["--write"]:
        SCHEMA_FILE.write_text(text, encoding="utf-8")
        print(f"written to {SCHEMA_FILE}")
        return 0
    if args == ["--check"]:
        if shipped() != text:
            print(f"{SCHEMA_FILE} is stale: run python -m roofline.report.jsonschema --write", file=sys.stderr)
            return 1
        return 0
    if args:
        print("usage: python -m roofline.report.jsonschema [--write | --check]", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
