"""Measure what a gate compares, in-process: a bench suite or a diagnose model file -> a Report.

The same library calls as `roofline bench SUITE.yaml` (open_target, run_bench, new_report) and `roofline diagnose
MODEL.py` (the diagnose pipeline and its report), so a report measured here gates exactly like one written by
those commands. torch is imported by those calls, lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from roofline.report.schema import Report


def measure_suite(
    file: str,
    *,
    device: str | None = None,
    sheet: str | None = None,
    spec_files: Sequence[Path] = (),
    warm: bool | None = None,
    max_time_s: float | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    command: str = "",
    wrap_build: Callable[[Any], Any] | None = None,
) -> Report:
    """Run every workload of a suite (a YAML file or a shipped suite's name) as `roofline bench` does.

    ``wrap_build(build) -> build`` replaces how ops are built (benchmarks/gate_gpu.py plants a regression)."""
    from roofline.bench.items import expand_suite
    from roofline.bench.run import bench_report, run_bench
    from roofline.bench.target import open_target
    from roofline.costs.suite import load_suite, suite_path

    loaded, entries = load_suite(file)
    items = expand_suite(entries)
    target = open_target(device, sheet=sheet, spec_files=spec_files, warm=warm, max_time_s=max_time_s)
    build = wrap_build(target.build) if wrap_build is not None else target.build
    result = run_bench(items, target.device, target.harness, build, progress=progress)
    if result.interrupted:
        raise KeyboardInterrupt
    if not result.rows:
        error = result.first_error()
        if error is not None:
            raise error
    return bench_report(command, target, result, {"name": loaded.name, "file": str(suite_path(file))})


def measure_model(
    path: Path,
    *,
    command: str = "",
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> Report:
    """Run `roofline diagnose` on a model file (options: entry, device, dtype, mode, warmup, iters, sheet,
    spec_files, roofs, argv) and return its report."""
    from roofline.diagnose.pipeline import diagnose

    return diagnose(path, progress=progress, **options).report(command)


def confirm(first: Report, second: Report, keys: set[str]) -> tuple[Report, list[str]]:
    """``first`` with the rows of ``keys`` (the points that did not pass) taken from the re-measurement
    ``second``, and the labels of the rows replaced. A point then fails only when both measurements fail it:
    a transient (another process, a clock dip) has to strike the same point twice to fail CI, a real
    regression does so every time."""
    from roofline.report.baseline import points_of

    again = {p.key: row for p, row in zip(points_of(second), second.rows, strict=True)}
    rows, replaced = [], []
    for point, row in zip(points_of(first), first.rows, strict=True):
        if point.key in keys and point.key in again:
            rows.append(again[point.key])
            replaced.append(point.label)
        else:
            rows.append(row)
    return first.model_copy(update={"rows": rows}), replaced
