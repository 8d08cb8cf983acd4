"""`roofline calibrate`: measure this machine's ceilings (bandwidth, GEMM rate per dtype, launch floor) and
cache them, so later commands can place kernels against measured roofs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from roofline.cli.common import json_option, print_json, print_text, registry, spec_option

DEVICES = ("cuda", "cpu")


def calibrate(
    device: str | None = typer.Option(
        None,
        "--device",
        "-d",
        help="cuda or cpu (default: cuda when torch sees a GPU, else cpu).",
        metavar="cuda|cpu",
    ),
    refresh: bool = typer.Option(False, "--refresh", help="Measure again even when this machine has a cached result."),
    as_json: bool = json_option(),
    spec: list[Path] | None = spec_option(),
) -> None:
    """Measure this machine's ceilings (bandwidth, GEMM rate per dtype, launch floor) and cache them.

    GPU: DRAM copy/read/write and L2 bandwidth, GEMM rate of bf16 fp16 tf32 fp32 fp64 fp8 int8, and the launch
    floor (about 10 s on an H100). CPU: fp32/fp64 GEMM rate, copy and triad bandwidth, per-op overhead. A cached
    result for this machine (same device, driver, CUDA, torch) is shown instead unless --refresh. Commands that
    time kernels use these as measured roofs. See docs/calibration.md.
    """
    import torch

    from roofline.errors import CalibrationError, DeviceError, UsageError
    from roofline.measure import calibration as cal_mod

    kind = (device or ("cuda" if torch.cuda.is_available() else "cpu")).strip().lower()
    if kind not in DEVICES:
        raise UsageError(f"--device {device!r}: use cuda or cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise DeviceError(
            f"--device cuda: torch {torch.__version__} ({build}) sees no CUDA device: install a CUDA build of "
            "torch and check the driver and CUDA_VISIBLE_DEVICES, or use --device cpu"
        )

    from roofline.measure import ceilings as measuring

    sheet = None
    if kind == "cuda":
        name = torch.cuda.get_device_properties(torch.cuda.current_device()).name
        sheet = registry(spec).find(name)
        machine = measuring.describe_cuda(torch, sheet.name if sheet is not None else None)
    else:
        machine = measuring.describe_cpu(torch)
    key = cal_mod.machine_key(machine)
    path = cal_mod.cache_path(key)

    result = None
    if not refresh:
        try:
            result = cal_mod.find(key)
        except CalibrationError as exc:
            moved = cal_mod.quarantine(path)
            reason = str(exc).removeprefix(f"{path}: ")
            typer.echo(
                f"ignoring corrupt calibration cache {path}: {reason}; re-measuring (moved to {moved})",
                err=True,
            )
        if result is not None:
            when = result.created_utc.strftime("%Y-%m-%d %H:%M UTC")
            typer.echo(f"cached from {when} ({path}), use --refresh to re-measure", err=True)

    if result is None:
        with _progress(kind) as update:
            if kind == "cuda":
                result = measuring.calibrate_cuda(torch, sheet=sheet, progress=update)
            else:
                result = measuring.calibrate_cpu(torch, progress=update)
        path = cal_mod.save(result)
        typer.echo(f"calibration written to {path}", err=True)

    if as_json:
        print_json(result.to_dict())
        return
    from roofline.render.calibrate import CalibrationRenderer

    print_text(CalibrationRenderer().render(result))


class _progress:
    """A transient rich progress bar on stderr, driven by the library's progress(step, index, total)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> Any:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        self._bar = Progress(
            TextColumn(f"calibrating {self.kind}"),
            BarColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,  # a pipe or a log gets no bar (and no stray blank line)
        )
        self._bar.__enter__()
        self._task = self._bar.add_task("starting", total=None)

        def update(step: str, index: int, total: int) -> None:
            label = "done" if index >= total else f"{index + 1}/{total} {step}"
            self._bar.update(self._task, description=label, completed=index, total=total)

        return update

    def __exit__(self, *exc: object) -> None:
        self._bar.__exit__(*exc)
