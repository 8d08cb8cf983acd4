"""`roofline diagnose --nproc N` and `roofline diagnose` inside a torchrun launch (docs/distributed.md).

--nproc N: the parent checks the options, then runs the same command on N ranks through torch.distributed.run
(roofline.diagnose.launch). Inside a launch (RANK and WORLD_SIZE set): every rank diagnoses itself
(roofline.diagnose.distributed); rank 0 prints and writes the merged report, the others stay quiet.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.cli.verbosity import info
from roofline.errors import UsageError

if TYPE_CHECKING:
    from roofline.diagnose.pipeline import DiagnoseOptions


def strip_option(argv: Sequence[str], name: str) -> list[str]:
    """``argv`` without ``name VALUE`` / ``name=VALUE`` (the launcher's own option)."""
    out: list[str] = []
    skip = False
    for position, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg == "--":
            out += list(argv[position:])
            break
        if arg == name:
            skip = True
            continue
        if arg.startswith(name + "="):
            continue
        out.append(arg)
    return out


def launch_nproc(nproc: int, *, device: str | None, backend: str | None, argv: Sequence[str] | None = None) -> None:
    """The parent of --nproc N: bad input said before any rank starts, then the ranks run."""
    from roofline.diagnose.distributed import check_backend
    from roofline.diagnose.launch import check_nproc, launched, run_ranks
    from roofline.roofs import device_kind

    if launched():
        raise UsageError("--nproc: this process is already a rank of a torchrun launch: leave --nproc out")
    if nproc < 1:
        raise UsageError(f"--nproc {nproc}: at least 1")
    kind = device_kind(device, indexed=False)
    gpus = 0
    if kind == "cuda":
        import torch

        gpus = torch.cuda.device_count()
    check_nproc(nproc, kind, gpus)
    check_backend(backend, kind)
    args = strip_option(list(sys.argv[1:] if argv is None else argv), "--nproc")
    info(f"launching {nproc} ranks through torch.distributed.run ({kind})")
    run_ranks(nproc, args)


def diagnose_rank_cli(
    model: Path,
    *,
    options: DiagnoseOptions,
    backend: str | None,
    top: int,
    as_json: bool,
    output: Path,
    export_trace: Path | None,
    timeout: float | None,
) -> None:
    """One rank of a launch: diagnose it; rank 0 prints the tables and writes the merged report (and --plot's
    charts: the roofline of every rank's ops, and the collectives beside it)."""
    import contextlib

    from roofline.cli import verbosity
    from roofline.cli.common import print_text
    from roofline.cli.output import command_line, prepare_all, save_report, write_requested_plot
    from roofline.cli.timeout import time_limit
    from roofline.diagnose.distributed import diagnose_rank, launch_from_env
    from roofline.diagnose.launch import record_failure

    launch = launch_from_env()
    assert launch is not None
    if options.verify or options.counters:
        raise UsageError("--verify and --counters: one process at a time (leave them out under torchrun)")
    if export_trace is not None:
        raise UsageError("--export-trace: one process at a time (leave it out under torchrun)")
    first = launch.rank == 0
    if not first:
        verbosity.set_level(verbosity.QUIET)
    try:
        where = None
        if first:
            (where,) = prepare_all(output, "report", inputs=[("the model file", model)])
        quiet_stdout = contextlib.redirect_stdout(sys.stderr) if as_json or not first else contextlib.nullcontext()
        if as_json:
            from roofline.cli.stdout import divert

            divert()  # the model's threads too, after the run: standard output carries our document alone
        with time_limit(timeout), quiet_stdout:
            result = diagnose_rank(model, options, launch=launch, backend=backend)
    except BaseException as exc:
        record_failure(exc)
        raise
    if not first or result.merged is None:
        return
    report = result.report(command_line())
    if as_json:
        print_text(report.to_json())
    else:
        from roofline.render.diagnose import DiagnoseRenderer
        from roofline.render.distributed import DistributedRenderer

        print_text(DiagnoseRenderer(top=top).render(report))
        print_text(DistributedRenderer(top=top).render(result.merged))
    assert where is not None
    save_report(report, where, output)
    write_requested_plot(report, output.stem)
    _collectives_plot(result.merged)
    info(f"Report written to {output} ({result.group.world_size} ranks)")


def _collectives_plot(section: dict[str, Any]) -> None:
    """--plot FILE: the chart of collectives beside it, FILE's name with '-collectives'."""
    from roofline.cli.output import CHART_FORMATS, requested_plot
    from roofline.report.collectives_chart import collectives_chart
    from roofline.report.outputs import write

    path = requested_plot()
    if path is None:
        return
    from roofline.render.collectives_figure import chart_bytes

    fmt = CHART_FORMATS.get(path.suffix.lower(), "png")
    target = path.with_name(f"{path.stem}-collectives{path.suffix or '.png'}")
    data = chart_bytes(collectives_chart(section), fmt)
    write(target.absolute(), data.decode("utf-8") if fmt == "svg" else data, option="--plot", shown=target)
    info(f"Chart of collectives written to {target}")


__all__ = ["calibrate_collectives", "diagnose_rank_cli", "launch_nproc", "strip_option"]


# ------------------------------------------------------------------------------------------------ calibrate


def calibrate_collectives(
    *, device: str | None, backend: str | None, nproc: int | None, refresh: bool, as_json: bool
) -> None:
    """`roofline calibrate --collectives`: outside a launch, the cached sweep for this device, backend and world
    size (unless --refresh), else N ranks launched to measure it; inside one, every rank measures and rank 0
    saves and prints."""
    from roofline.cli.common import print_json, print_text
    from roofline.diagnose.distributed import check_backend, default_backend, launch_from_env
    from roofline.diagnose.launch import check_nproc, run_ranks
    from roofline.measure import collectives as measured
    from roofline.render.distributed import CollectivesCalibrationRenderer
    from roofline.roofs import device_kind

    launch = launch_from_env()
    if launch is None:
        kind = device_kind(device, indexed=False)
        gpus = 0
        name = "cpu"
        if kind == "cuda":
            import torch

            gpus = torch.cuda.device_count()
            name = torch.cuda.get_device_name(0) if gpus else "cuda"
        n = nproc if nproc is not None else (gpus if kind == "cuda" else 2)
        check_nproc(n, kind, gpus)
        if n < 2:
            raise UsageError(f"--collectives: {n} rank moves nothing: give --nproc 2 or more (GPUs: one per rank)")
        chosen = check_backend(backend, kind)
        if not refresh:
            cached = measured.find(name, chosen, n)
            if cached is not None:
                info(f"cached from {cached.created_utc:%Y-%m-%d %H:%M} UTC, use --refresh to re-measure")
                _show(cached, as_json, print_json, print_text, CollectivesCalibrationRenderer)
                return
        args = strip_option(list(sys.argv[1:]), "--nproc")
        if "--collectives" not in args:
            args.append("--collectives")
        info(f"measuring collectives on {n} ranks through torch.distributed.run ({chosen})")
        run_ranks(n, args)
        return
    if nproc is not None:
        raise UsageError("--nproc: this process is already a rank of a torchrun launch: leave --nproc out")
    import torch
    import torch.distributed as dist

    from roofline.cli import verbosity
    from roofline.diagnose.distributed import init_group, rank_device
    from roofline.diagnose.launch import record_failure

    if launch.rank != 0:
        verbosity.set_level(verbosity.QUIET)
    try:
        where = rank_device(device, launch, torch)
        group = init_group(launch, where, backend or default_backend("cuda" if where.startswith("cuda") else "cpu"))
        points, notes = measured.sweep(device=where)
        name = torch.cuda.get_device_name(torch.device(where)) if where.startswith("cuda") else "cpu"
        cal = measured.from_points(
            points,
            device=name,
            device_kind="cuda" if where.startswith("cuda") else "cpu",
            backend=group.backend,
            world_size=group.world_size,
            link=link_peak(torch, where) if where.startswith("cuda") else None,
            notes=notes,
        )
        if group.initialised_here:
            dist.destroy_process_group()
    except BaseException as exc:
        record_failure(exc)
        raise
    if launch.rank != 0:
        return
    path = measured.save(cal)
    info(f"collectives calibration written to {path}")
    _show(cal, as_json, print_json, print_text, CollectivesCalibrationRenderer)


def link_peak(torch: Any, device: str) -> Any:
    """The spec sheet's interconnect peak per direction of this GPU (NVLink, else PCIe), or None without a sheet
    or a figure."""
    from roofline.measure.collectives import LinkPeak
    from roofline.roofs import gpu_names, gpu_sheet, torch_index

    names, _ = gpu_names(torch, torch_index(device))
    sheet = gpu_sheet(names, required=False)
    links = None if sheet is None else sheet.interconnect
    link = None if links is None else (links.nvlink_bandwidth_per_gpu or links.pcie_bandwidth)
    if sheet is None or links is None or link is None:
        return None
    which = "NVLink" if link is links.nvlink_bandwidth_per_gpu else "PCIe"
    return LinkPeak(
        bytes_per_s=link.per_direction_gb_per_s * 1e9,
        source=f"the {sheet.name} sheet's {which} per GPU, one direction ({link.direction} in its source)",
    )


def _show(cal: Any, as_json: bool, print_json: Any, print_text: Any, renderer: Any) -> None:
    if as_json:
        print_json(cal.model_dump(mode="json", by_alias=True))
    else:
        print_text(renderer().render(cal))
