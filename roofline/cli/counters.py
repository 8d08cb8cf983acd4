"""`roofline counters import FILE.csv [--report REPORT.json] [-o OUT.json]`: Nsight Compute counters on a
diagnose report's ops."""

from __future__ import annotations

from pathlib import Path

import typer

from roofline.cli.common import json_option, print_json, print_text
from roofline.cli.output import force_option, prepare_outputs, save_report
from roofline.cli.verbosity import info

app = typer.Typer(
    name="counters",
    help="Nsight Compute counters beside a diagnosis: measured vs compulsory DRAM bytes, the counters' bound.",
    no_args_is_help=True,
)

DEFAULT_REPORT = Path("roofline-report.json")


@app.command("import")
def import_csv(
    csv_file: Path = typer.Argument(
        ...,
        help="An `ncu --csv --page raw` export of the model's kernels, or an ncu report file (.ncu-rep, read "
        "through Nsight Compute's Python module ncu_report).",
        metavar="FILE.csv|FILE.ncu-rep",
    ),
    report_path: Path = typer.Option(
        DEFAULT_REPORT, "--report", "-r", help="The `roofline diagnose` report whose ops get the counters."
    ),
    output: Path | None = typer.Option(
        None,
        "--output",
        "-o",
        help="Write the report with the counters (a 'counters' section) and the locality findings added.",
    ),
    top: int = typer.Option(10, "--top", help="Ops shown, the most DRAM traffic first."),
    as_json: bool = json_option(),
    force: bool = force_option(),
) -> None:
    """Attach an ncu raw-page export (or a .ncu-rep report) to a diagnose report's ops, by kernel name.

    Per op: DRAM bytes read + written (measured) against its compulsory bytes, L2 bytes, SM and memory throughput
    (% of peak), achieved occupancy, tensor-pipe activity; the counters' bound (the busier of SM and memory) beside
    ours; a locality finding where an op moves at least 2x its compulsory bytes and that traffic sets its floor.
    Record the export with `ncu --metrics dram__bytes_read.sum,dram__bytes_write.sum,... --csv --page raw`
    (docs/diagnose.md lists the metrics), or let `roofline diagnose --counters` run ncu.
    """
    from roofline.errors import ReportError, UsageError
    from roofline.findings.context import FindingContext
    from roofline.findings.counters import attach
    from roofline.findings.rules import produce_all
    from roofline.findings.rules.counters import RULE
    from roofline.measure.ncu import read_counters
    from roofline.report.schema import read_report

    if top < 1:
        raise UsageError(f"--top {top}: at least 1")
    where = prepare_outputs(output, "report", inputs=[("the ncu export", csv_file), ("--report", report_path)])
    report = read_report(report_path)
    if report.source != "diagnose":
        raise ReportError(
            f"{report_path}: a {report.source} report: counters attach to the ops of a `roofline diagnose` report"
        )
    kernels = read_counters(csv_file)
    points = report.typed_rows()
    counters = attach(points, kernels, str(csv_file))
    if not counters.ops:
        raise UsageError(
            f"{csv_file}: none of its {len(kernels)} kernel launches matches a kernel of {report_path}'s ops: "
            "profile the same model (and the same iteration) that the report diagnosed"
        )
    summary = getattr(report, "summary", None) or {}
    iteration_s = max(float(summary.get("op_time_s") or 0.0), float(summary.get("wall_s") or 0.0))
    findings = produce_all(
        FindingContext(points=tuple(points), iteration_s=iteration_s, counters=counters), ("counters",)
    )
    if as_json:
        print_json({"counters": counters.model_dump(mode="json"), "findings": [_finding_dict(f) for f in findings]})
    else:
        from roofline.render.counters import CountersRenderer

        print_text(CountersRenderer(top=top).render(counters, findings))
    if where is not None and output is not None:
        kept = [f for f in (getattr(report, "findings", None) or []) if f.get("rule") != RULE]
        merged = sorted([*kept, *(_finding_dict(f) for f in findings)], key=lambda f: -(f.get("saving_s") or 0.0))
        updated = report.model_copy(update={"counters": counters.model_dump(mode="json"), "findings": merged})
        save_report(updated, where, output)
        info(f"Report written to {output}")


def _finding_dict(finding: object) -> dict[str, object]:
    from roofline.diagnose.pipeline import finding_dict

    return finding_dict(finding)  # type: ignore[arg-type]


__all__ = ["app", "import_csv"]
