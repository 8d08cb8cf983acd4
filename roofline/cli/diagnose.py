"""`roofline diagnose MODEL.py`: trace, count, time, place and diagnose a real PyTorch model."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import typer

from roofline.cli.common import json_option, print_text, spec_option
from roofline.cli.output import (
    command_line,
    diagnose_status,
    force_option,
    plot_option,
    prepare_all,
    save_report,
    write_requested_plot,
)
from roofline.cli.process import freeze_heap, frozen_after, is_entry
from roofline.cli.timeout import time_limit, timeout_option
from roofline.cli.verbosity import info

DEFAULT_OUTPUT = Path("roofline-report.json")


def diagnose(
    model: Path | None = typer.Argument(
        None,
        help="The model file (Python): class Model + get_inputs() + get_init_inputs(), or a module-level `model` "
        "with `example_inputs` / get_inputs(), or --entry NAME. Or --trace instead.",
        metavar="MODEL.py",
    ),
    script_args: list[str] | None = typer.Argument(
        None, help="Arguments for the script after `--` (its sys.argv[1:]).", metavar="[-- ARGS]"
    ),
    entry: str | None = typer.Option(
        None, "--entry", help="A function in the file returning (model, inputs), used instead of the conventions."
    ),
    device: str | None = typer.Option(
        None,
        "--device",
        "-d",
        help="Where to run: cuda (cuda:N) or cpu (default: cuda when torch sees a GPU, else cpu).",
        metavar="cuda|cpu",
    ),
    dtype: str | None = typer.Option(
        None, "--dtype", help="Cast the model and its floating inputs: fp32, bf16 or fp16 (default: as written)."
    ),
    mode: str = typer.Option("inference", "--mode", help="inference (forward, no grad) or training (+ backward)."),
    warmup: str = typer.Option(
        "auto",
        "--warmup",
        help="Untimed iterations before the timed ones, or auto: until 0.2 s or 3 calls (at least 1).",
        metavar="N|auto",
    ),
    iters: str = typer.Option(
        "auto",
        "--iters",
        help="Timed and profiled iterations (times are per iteration), or auto: about 0.5 s of them from the "
        "warm-up's estimate, at most 4000 counted ops in the profile, 1 to 10.",
        metavar="N|auto",
    ),
    sheet: str | None = typer.Option(
        None,
        "--sheet",
        help="GPU spec sheet for the roofs (default: the sheet matching this GPU's name; a cached calibration "
        "of that sheet replaces its roofs with measured ones unless --roofs spec).",
    ),
    spec: list[Path] | None = spec_option(),
    roofs: str = typer.Option(
        "auto",
        "--roofs",
        help="GPU: spec (the sheet), measured (this GPU's `roofline calibrate` cache; error if none) or auto "
        "(measured when cached, else spec). The CPU always uses measured roofs.",
    ),
    top: int = typer.Option(10, "--top", help="Rows in the top ops and modules tables, and findings shown."),
    as_json: bool = json_option(),
    output: Path = typer.Option(
        DEFAULT_OUTPUT, "--output", "-o", help="Report JSON, written atomically (read by plot and gate)."
    ),
    plot: Path | None = plot_option(),
    verify: bool = typer.Option(
        False,
        "--verify",
        help="After the diagnosis, apply each finding's mechanical technique (torch.compile, CUDA graphs, "
        "channels_last, TF32/bf16 autocast) to a fresh copy of the model, check its outputs and measure the gain "
        "(and, where the outputs match, its ops' times in one profiled pass).",
    ),
    counters: bool = typer.Option(
        False,
        "--counters",
        help="Also run one iteration under Nsight Compute (ncu on PATH): measured DRAM bytes per op against "
        "compulsory, the counters' bound beside ours, a locality finding where the traffic is far above compulsory.",
    ),
    trace: Path | None = typer.Option(
        None,
        "--trace",
        help="Diagnose a torch.profiler (Kineto) trace recorded with record_shapes=True instead of running a model "
        "(its median ProfilerStep#N step).",
        metavar="TRACE.json[.gz]",
    ),
    export_trace: Path | None = typer.Option(
        None,
        "--export-trace",
        help="Write the profiled run as a Chrome trace (Perfetto, chrome://tracing), each op and kernel annotated "
        "with its FLOPs, bytes, intensity, bound and efficiency.",
        metavar="FILE.json",
    ),
    nproc: int | None = typer.Option(
        None,
        "--nproc",
        help="Run the model on N ranks (processes) through torch.distributed.run, one per GPU (gloo ranks on the "
        "CPU): every rank diagnosed, collectives on the communication roof, one merged report. Inside a torchrun "
        "launch leave it out: each rank diagnoses itself. See docs/distributed.md.",
        metavar="N",
    ),
    backend: str | None = typer.Option(
        None,
        "--backend",
        help="The process group's backend with --nproc or under torchrun: nccl (GPUs, the default there) or gloo "
        "(the CPU's default).",
        metavar="nccl|gloo",
    ),
    force: bool = force_option(),
    predict: list[str] | None = typer.Option(
        None,
        "--predict",
        help="Also predict the run's times on this GPU (spec-sheet name; repeatable or a comma list): the table of "
        "`roofline predict` (not with --json: run `roofline predict REPORT.json --json`).",
        metavar="NAME",
    ),
    timeout: float | None = timeout_option("says which stage was running, writes no report, exit 124"),
) -> None:
    """Run a PyTorch model, count what every op must do, time what it did, and say what limits it.

    Counting pass: every aten op with its module, shapes, FLOPs and compulsory bytes. Timing pass (separate,
    torch.profiler): device time per op, kernels, GPU idle. Each op, op type and module is placed on this device's
    roofline (GPU: spec sheet, or measured roofs when calibrated; CPU: measured roofs); the findings name the
    bottleneck, the property to exploit, the technique and the most the roofline lets you gain. Arguments after
    `--` go to the script. --verify measures what each finding's technique gains: a table of the roofline's
    bound beside the measured gain, outputs match and notes, stored as `verified` in the report (`roofline report`
    shows it in html/markdown, `roofline plot --verified` draws each op before and after). --timeout bounds the
    run's wall-clock time. --counters adds Nsight Compute's measured bytes and throughputs per op. --trace
    diagnoses a torch.profiler trace instead; --export-trace writes the run's trace, annotated. --nproc N runs it
    on N ranks (torch.distributed.run) and merges them, collectives on the communication roof (docs/distributed.md).
    See docs/diagnose.md.
    """
    started = _process_age_s()  # before anything of diagnose runs: Python's start and our CLI's imports
    clock = time.perf_counter()
    from roofline.diagnose.pipeline import diagnose as run
    from roofline.diagnose.pipeline import diagnose_trace
    from roofline.errors import UsageError

    warmup_n, iters_n = _count_option("--warmup", warmup), _count_option("--iters", iters)
    if top < 1:
        raise UsageError(f"--top {top}: at least 1")
    if (model is None) == (trace is None):
        raise UsageError("give a model file (roofline diagnose MODEL.py) or --trace TRACE.json, not both")
    if trace is not None:
        live_only = {
            "MODEL.py's arguments after --": bool(script_args),
            "--entry": entry is not None,
            "--device": device is not None,
            "--dtype": dtype is not None,
            "--mode": mode != "inference",
            "--warmup": warmup_n is not None,
            "--iters": iters_n is not None,
            "--verify": verify,
            "--counters": counters,
        }
        given = [name for name, used in live_only.items() if used]
        if given:
            raise UsageError(f"{given[0]}: only for a live run (MODEL.py): --trace diagnoses what the trace recorded")
    targets: list[str] = []
    if predict:
        from roofline.cli.predict import target_names
        from roofline.roofs import check_targets

        if as_json:
            raise UsageError("--predict with --json: run `roofline predict REPORT.json --device NAME --json` after it")
        targets = check_targets(target_names(predict), spec or [])  # before the model runs
    if nproc is not None or backend is not None or _launched():
        if trace is not None:
            raise UsageError("--trace reads one trace: --nproc, --backend and torchrun are for a live run (MODEL.py)")
        _distributed(model, script_args, nproc, backend, device, dict(entry=entry, dtype=dtype, mode=mode,
                     warmup=warmup_n, iters=iters_n, sheet=sheet, spec_files=spec or [], roofs=roofs,
                     argv=script_args or [], verify=verify, counters=counters), top, as_json, output, export_trace,
                     timeout)  # fmt: skip
        return
    inputs = [
        ("the model file" if trace is None else "the trace", model if trace is None else trace),
        *(("a --spec sheet", path) for path in spec or []),
    ]
    # before the model runs (it may chdir)
    where, trace_where = prepare_all(output, "report", [("--export-trace", export_trace, "trace")], inputs=inputs)
    assert where is not None
    # NB: with --json, standard output carries the report alone: whatever the user's file prints goes to stderr.
    quiet_stdout = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    setup_s = 0.0
    with time_limit(timeout), quiet_stdout, diagnose_status() as progress:
        if trace is not None:
            result = diagnose_trace(trace, sheet=sheet, spec_files=spec or [], roofs=roofs, progress=progress)
        else:
            setup_s = time.perf_counter() - clock  # our imports, the options and output files checked
            result = run(
                model,
                entry=entry,
                device=device,
                dtype=dtype,
                mode=mode,
                warmup=warmup_n,
                iters=iters_n,
                sheet=sheet,
                spec_files=spec or [],
                roofs=roofs,
                argv=script_args or [],
                verify=verify,
                counters=counters,
                keep_trace=export_trace is not None,
                stages=_process_stages(),
                progress=progress,
            )
    if result.stages:  # a live run (a --trace diagnosis runs no stages of its own)
        result.stages = {**({"python": started} if started is not None else {}), "setup": setup_s, **result.stages}
    render_begin = time.perf_counter()
    report = result.report(command_line())
    if as_json:
        print_text(report.to_json())
    else:
        from roofline.render.diagnose import DiagnoseRenderer

        print_text(DiagnoseRenderer(top=top).render(result))
        if result.counters is not None:
            from roofline.findings.rules.counters import RULE
            from roofline.render.counters import CountersRenderer

            local = [f for f in result.findings if f.rule == RULE]
            print_text(CountersRenderer(top=top).render(result.counters, local))
    if targets:
        from roofline.predict import predict_report
        from roofline.render.predict import PredictRenderer

        basis = "spec" if roofs == "spec" else "auto"  # a missing calibration of the target is no error here
        predictions = predict_report(report, targets, name=output.stem, roofs=basis, spec_files=spec or [])
        print_text(PredictRenderer(top=top).render(predictions))
    if result.counters_error:
        info(f"note: {result.counters_error}")
    from roofline.roofs import check_over_roof

    over_roof = check_over_roof(result.placed.points, result.device)  # shown after the summary line
    _add_stage(result, report, "render", time.perf_counter() - render_begin)
    write_begin = time.perf_counter()
    save_report(report, where, output)  # after the tables: a full disk does not lose what was measured
    write_requested_plot(report, output.stem)
    info(f"Report written to {output}")
    if export_trace is not None and trace_where is not None:
        _export_trace(result, trace_where, export_trace)
    write_s = time.perf_counter() - write_begin
    _show_stages(result, write_s, started, time.perf_counter() - clock)
    if over_roof:
        info(f"note: {over_roof}")
    freeze_heap()  # the CLI's own process only: its exit need not walk what the diagnosis left (cli/process.py)
    if result.interruption is not None:  # --verify stopped: the report holds what was verified before it
        from roofline.errors import TimedOut, interrupt_exit_code

        done = f"{len(result.verified or [])} finding(s) verified before it; the report keeps them"
        if isinstance(result.interruption, TimedOut):
            info(f"Timed out after {result.interruption.seconds:g} s (--timeout) while verifying: {done}")
        else:
            info(f"Interrupted while verifying: {done}")
        raise typer.Exit(interrupt_exit_code(result.interruption))


def _process_stages() -> Any:
    """The pipeline's stages; in the CLI's own process, torch imported with the garbage collector paused, then
    ``gc.freeze()``: the objects torch leaves (about 200,000) are walked by no collection, during the import, later
    or at exit (roofline.cli.process.frozen_after says what that costs); None (the defaults) for an in-process
    caller."""
    if not is_entry():
        return None
    import dataclasses

    from roofline.diagnose.pipeline import Stages

    stages = Stages()
    import_torch = stages.import_torch

    def import_then_freeze() -> None:
        with frozen_after():
            import_torch()

    return dataclasses.replace(stages, import_torch=import_then_freeze)


def _count_option(name: str, value: str) -> int | None:
    """--warmup / --iters: a whole number, or auto (None: sized from a time budget)."""
    from roofline.errors import UsageError

    text = str(value).strip().lower()
    if text == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"{name} {value}: a whole number or auto") from None


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux: its start time in /proc, to the kernel's clock tick); None
    where that cannot be read."""
    import os

    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as handle:
            uptime = float(handle.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 (starttime), counted after the ')'
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return max(uptime - started, 0.0)


def _add_stage(result: Any, report: Any, name: str, seconds: float) -> None:
    """A stage the CLI times (render) into the result and the report about to be written."""
    from roofline.report.records import floor_seconds

    result.stages[name] = seconds
    about = getattr(report, "diagnose", None)
    if isinstance(about, dict) and "stages" in about:
        about["stages"][name] = seconds
        about["floor_s"] = floor_seconds(about["stages"])


def _show_stages(result: Any, write_s: float, started: float | None, command_s: float) -> None:
    """The one-line summary of diagnose's own time (stderr; --quiet drops it), and with --verbose a line per
    stage."""
    from roofline.cli.verbosity import verbose
    from roofline.render.diagnose import stage_lines, stages_line

    if not result.stages:
        return
    stages = {**result.stages, "write": write_s}
    total = (started or 0.0) + command_s
    if verbose():
        for line in stage_lines(stages, total):
            info(line)
    info(stages_line(stages, total))


def _launched() -> bool:
    from roofline.diagnose.launch import launched

    return launched()


def _distributed(model: Any, script_args: Any, nproc: int | None, backend: str | None, device: str | None,
                 options: dict[str, Any], top: int, as_json: bool, output: Path, export_trace: Path | None,
                 timeout: float | None) -> None:  # fmt: skip
    """--nproc N (the parent: launch the ranks) or a rank of a torchrun launch (roofline.cli.distributed)."""
    from roofline.cli.distributed import diagnose_rank_cli, launch_nproc
    from roofline.errors import UsageError

    if nproc is not None:
        launch_nproc(nproc, device=device, backend=backend)
        return
    if not _launched():
        raise UsageError("--backend: only with --nproc N or inside a torchrun launch")
    diagnose_rank_cli(model, options=options, backend=backend, device=device, top=top, as_json=as_json,
                      output=output, export_trace=export_trace, timeout=timeout)  # fmt: skip


def _export_trace(result: Any, where: Path, shown: Path) -> None:
    """--export-trace: the run's profiler trace, each matched op and kernel annotated with its placed row."""
    from roofline.diagnose.trace import annotate, trace_json
    from roofline.errors import UsageError
    from roofline.report.outputs import write

    timing = result.timing
    if timing.trace is None:
        why = next((n for n in timing.notes if "trace could not be read" in n), "the profiler gave no trace")
        raise UsageError(f"--export-trace {shown}: not written: {why} (the report was written)")
    about = {"device": result.device.name, "model": str(result.path), **{"step": result.options.get("step", "")}}
    annotated = annotate(timing.trace, timing.matched_ops, timing.op_owners, result.placed.points, about)
    write(where, trace_json(annotated), option="--export-trace", shown=shown)
    info(f"Trace written to {shown} (open it in https://ui.perfetto.dev or chrome://tracing)")
