"""`roofline specs`: list, show, detect and validate GPU spec sheets."""

from __future__ import annotations

from pathlib import Path

import typer

from roofline.cli.common import json_option, print_json, print_text, registry, spec_option

app = typer.Typer(help="GPU spec sheets: dense peaks per precision, memory levels, launch floor.", no_args_is_help=True)


@app.command("list")
def list_(spec: list[Path] | None = spec_option(), as_json: bool = json_option()) -> None:
    """Every known sheet (built-in, $ROOFLINE_SPECS_DIR, --spec) with its headline roofs."""
    from roofline.render.specs import SpecListRenderer
    from roofline.specs.summary import sheet_summary

    reg = registry(spec)
    if as_json:
        print_json({"specs": [sheet_summary(reg.sheets[n], reg.origins[n], str(reg.paths[n])) for n in reg.names()]})
        return
    print_text(SpecListRenderer().render(reg))


@app.command()
def show(
    name: str = typer.Argument(..., help="Sheet name or a name the device reports (e.g. 'NVIDIA H100 80GB HBM3')."),
    spec: list[Path] | None = spec_option(),
    as_json: bool = json_option(),
) -> None:
    """One sheet in full: every roof, ridge points, memory levels, sources."""
    from roofline.render.specs import SpecShowRenderer
    from roofline.roofs import sheet_detail

    reg = registry(spec)
    sheet = reg.get(name)
    if as_json:
        print_json(sheet_detail(sheet, reg.origins[sheet.name], str(reg.paths[sheet.name])))
        return
    print_text(SpecShowRenderer(reg.origins[sheet.name], reg.paths[sheet.name]).render(sheet))


@app.command()
def detect(spec: list[Path] | None = spec_option(), as_json: bool = json_option()) -> None:
    """The local GPU(s) via NVML and torch (read-only), matched to sheets; else the CPU."""
    from roofline.render.specs import DetectRenderer
    from roofline.specs.detect import detect as run_detect

    result = run_detect(registry(spec))
    if as_json:
        print_json(result.to_dict())
        return
    print_text(DetectRenderer().render(result))


@app.command()
def validate(
    files: list[Path] = typer.Argument(..., help="Spec-sheet YAML file(s) to check."),
    as_json: bool = json_option(),
) -> None:
    """Check spec sheets against the schema: exit 0 when all are valid, else 2 with the first problem."""
    from roofline.specs.loader import load_sheet

    sheets = [(path, load_sheet(path)) for path in files]  # raises SpecError -> one line, exit 2
    if as_json:
        print_json({"valid": [{"file": str(path), "name": sheet.name} for path, sheet in sheets]})
        return
    for path, sheet in sheets:
        typer.echo(f"ok: {path} ({sheet.name}, {sheet.display_name})")
