"""`roofline baseline save|show`: the baselines `roofline gate` compares against."""

from __future__ import annotations

from pathlib import Path

import typer

from roofline.cli.common import json_option, print_text
from roofline.cli.output import force_option, forced, prepare_outputs

DEFAULT_OUTPUT = Path("roofline-baseline.json")

app = typer.Typer(
    help=(
        "Baselines for `roofline gate`: the points of one measured report (bench rows or diagnose ops) with their "
        "counts, times, efficiencies and every sample, plus what was measured, the machine, the tool version and "
        "the git commit. See docs/ci.md."
    ),
    no_args_is_help=True,
)


@app.command()
def save(
    reports: list[Path] = typer.Argument(
        ...,
        help="A `roofline bench` or `roofline diagnose` report; several runs of the same suite or model pool into "
        "one baseline that knows each point's run-to-run drift.",
        metavar="REPORT.json...",
    ),
    output: Path = typer.Option(
        DEFAULT_OUTPUT,
        "--output",
        "-o",
        help="The baseline, written atomically. An existing file is replaced only when it is a baseline itself "
        "(or --force).",
    ),
    as_json: bool = json_option(),
    force: bool = force_option(),
) -> None:
    """Save measured reports as a baseline (versioned JSON): points, samples, machine, tool version, commit.

    Give several reports of the same suite or model (one per run, e.g. three runs of `roofline bench SUITE`) and
    the gate widens each point's limit by how far that point drifted between them."""
    from roofline.cli.process import collector_paused
    from roofline.report import baseline as baselines
    from roofline.report.schema import read_report

    prepare_outputs(output, "baseline", inputs=[("a report", path) for path in reports])
    with collector_paused():
        saved = baselines.from_reports([read_report(path) for path in reports], paths=reports)
        baselines.save(saved, output, force=forced())
    if as_json:
        print_text(saved.to_json())
    else:
        from roofline.report.machine import summary

        print_text(
            f"Saved {len(saved.points)} points of {saved.identity.describe()}"
            + (f" ({len(reports)} runs)" if len(reports) > 1 else "")
            + f" to {output}\n"
            f"  machine: {summary(saved.machine)}\n"
            f"  commit: {saved.commit or 'none (not in a git repository)'} · roofline {saved.tool_version}\n"
        )


@app.command()
def show(
    baseline: Path = typer.Argument(..., help="A baseline file.", metavar="BASELINE.json"),
    as_json: bool = json_option(),
) -> None:
    """What a baseline holds: what was measured, on which machine, when, and its points."""
    from roofline.report import baseline as baselines

    loaded = baselines.load(baseline)
    if as_json:
        print_text(loaded.to_json())
        return
    from roofline.render.gate import baseline_text

    print_text(baseline_text(loaded))
