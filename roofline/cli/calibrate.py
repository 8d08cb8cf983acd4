"""`roofline calibrate`: measure this machine's ceilings (bandwidth, GEMM rate per dtype, launch floor) and
cache them, so later commands can place kernels against measured roofs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from roofline.cli.common import json_option, print_json, print_text, spec_option
from roofline.cli.verbosity import info


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
    collectives: bool = typer.Option(
        False,
        "--collectives",
        help="Measure the communication roof instead: all-reduce and all-gather bus bandwidth over message sizes "
        "across N ranks (torch.distributed; GPUs 8 KiB..1 GiB, the CPU 4 KiB..4 MiB), cached per device, backend "
        "and world size. Implied inside a torchrun launch. See docs/distributed.md.",
    ),
    nproc: int | None = typer.Option(
        None, "--nproc", help="--collectives: the ranks (default: every GPU; 2 on the CPU).", metavar="N"
    ),
    backend: str | None = typer.Option(
        None, "--backend", help="--collectives: nccl (GPUs, the default there) or gloo.", metavar="nccl|gloo"
    ),
) -> None:
    """Measure this machine's ceilings (bandwidth, GEMM rate per dtype, launch floor) and cache them.

    GPU: DRAM read/copy/write (each the best of Triton and torch kernels; the best is the DRAM roof) and L2
    bandwidth, GEMM rate of bf16 fp16 tf32 fp32 fp64 fp8 int8 (best over a few shapes; a burst figure from rest and
    a sustained one after a thermal soak, the roof), and the launch floor; the measuring is planned to fit a 24 s
    budget. CPU: fp32/fp64 GEMM rate, copy and triad bandwidth, per-op overhead. A cached
    result for this machine (same device, driver, CUDA, torch) is shown instead unless --refresh. Commands that
    time kernels use these as measured roofs. --collectives measures the communication roof across ranks instead
    (docs/distributed.md). See docs/calibration.md.
    """
    from roofline.diagnose.launch import launched

    if collectives or nproc is not None or backend is not None or launched():
        from roofline.cli.distributed import calibrate_collectives
        from roofline.errors import UsageError

        if not collectives and not launched():
            raise UsageError("--nproc and --backend: only with --collectives")
        calibrate_collectives(device=device, backend=backend, nproc=nproc, refresh=refresh, as_json=as_json)
        return
    from roofline.roofs import calibration_for, torch_device

    kind = torch_device(device, indexed=False)
    with _progress(kind) as update:
        lookup = calibration_for(kind, refresh=refresh, spec_files=spec or [], progress=update)
    path, result = lookup.path, lookup.calibration
    if lookup.corrupt is not None:
        reason = str(lookup.corrupt).removeprefix(f"{path}: ")
        info(f"ignoring corrupt calibration cache {path}: {reason}; re-measuring (moved to {lookup.moved})")
    if lookup.replaced is not None:
        when = lookup.replaced.created_utc.strftime("%Y-%m-%d %H:%M UTC")
        info(f"the cached calibration of {when} was taken while the machine was busy: measured again")
    if lookup.from_cache:
        when = result.created_utc.strftime("%Y-%m-%d %H:%M UTC")
        info(f"cached from {when} ({path}), use --refresh to re-measure")
    else:
        info(f"calibration written to {path}")
    if result.busy:
        from roofline.measure.calibration import busy_note

        info(f"note: {busy_note(result)}")

    if as_json:
        print_json(result.to_dict())
        return
    from roofline.render.calibrate import CalibrationRenderer

    print_text(CalibrationRenderer().render(result))


class _progress:
    """A transient rich progress bar on stderr, driven by the library's progress(step, index, total); it appears at
    the first step (a calibration read from the cache shows none)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._bar: Any = None
        self._task: Any = None

    def _start(self) -> None:
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

    def __enter__(self) -> Any:
        def update(step: str, index: int, total: int) -> None:
            if self._bar is None:
                self._start()
            label = "done" if index >= total else f"{index + 1}/{total} {step}"
            self._bar.update(self._task, description=label, completed=index, total=total)

        return update

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
