"""`roofline diagnose MODEL.py`: trace, count, time, place and diagnose a real PyTorch model.

The command reads its options into one value (roofline.diagnose.pipeline.DiagnoseOptions), runs the pipeline, builds
the report and shows it: the console view is rendered from the report (roofline.render.diagnose), the same view
`roofline report REPORT.json --format console` prints.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from roofline.cli.timeout import check_timeout, time_limit, timeout_option
from roofline.cli.verbosity import info

if TYPE_CHECKING:
    from roofline.diagnose.hf import HfModel
    from roofline.diagnose.pipeline import Boundaries, DiagnoseOptions, DiagnoseResult
    from roofline.report.schema import Report

DEFAULT_OUTPUT = Path("roofline-report.json")

# ------------------------------------------------------------------------------------------------ the options

MODEL_ARGUMENT = typer.Argument(
    None,
    help="The model file (Python): class Model + get_inputs() + get_init_inputs(), or a module-level `model` "
    "with `example_inputs` / get_inputs(), or --entry NAME. Or --hf ID (a Hugging Face model) or --trace instead.",
    metavar="MODEL.py",
)
SCRIPT_ARGS_ARGUMENT = typer.Argument(
    None, help="Arguments for the script after `--` (its sys.argv[1:]).", metavar="[-- ARGS]"
)
ENTRY_OPTION = typer.Option(
    None, "--entry", help="A function in the file returning (model, inputs), used instead of the conventions."
)
DEVICE_OPTION = typer.Option(
    None,
    "--device",
    "-d",
    help="Where to run: cuda (cuda:N) or cpu (default: cuda when torch sees a GPU, else cpu).",
    metavar="cuda|cpu",
)
DTYPE_OPTION = typer.Option(
    None, "--dtype", help="Cast the model and its floating inputs: fp32, bf16 or fp16 (default: as written)."
)
MODE_OPTION = typer.Option(
    "inference",
    "--mode",
    help="inference (forward, no grad) or training (+ backward). With --hf: prefill (the default: the forward over "
    "--seq tokens), decode (one new token per sequence, --seq tokens already in the KV cache) or training (forward "
    "and backward of the LM loss).",
)
HF_OPTION = typer.Option(
    None,
    "--hf",
    help="A Hugging Face causal LM instead of a model file: a hub id (ORG/NAME), a directory holding config.json, or "
    "a config.json. Built from its config with random weights (no weights downloaded, never the network: the "
    "config from the directory, the hub's local cache or the few roofline ships); random token ids, --batch x "
    "--seq; --mode prefill|decode|training; --dtype default: the config's torch_dtype. Needs transformers "
    "(the hf extra of roofline).",
    metavar="ID|DIR",
)
BATCH_OPTION = typer.Option(None, "--batch", help="With --hf: sequences per step (default 1).", metavar="B")
SEQ_OPTION = typer.Option(
    None,
    "--seq",
    help="With --hf: tokens per sequence (decode: the prompt's tokens already in the KV cache; default 128).",
    metavar="S",
)
WARMUP_OPTION = typer.Option(
    "auto",
    "--warmup",
    help="Untimed iterations before the timed ones, or auto: until 0.2 s or 3 calls (at least 1).",
    metavar="N|auto",
)
ITERS_OPTION = typer.Option(
    "auto",
    "--iters",
    help="Timed and profiled iterations (times are per iteration), or auto: about 0.5 s of them from the "
    "warm-up's estimate, at most 4000 counted ops in the profile, 1 to 10.",
    metavar="N|auto",
)
SHEET_OPTION = typer.Option(
    None,
    "--sheet",
    help="GPU spec sheet for the roofs (default: the sheet matching this GPU's name; a cached calibration "
    "of that sheet replaces its roofs with measured ones unless --roofs spec).",
)
ROOFS_OPTION = typer.Option(
    "auto",
    "--roofs",
    help="GPU: spec (the sheet), measured (this GPU's `roofline calibrate` cache; error if none) or auto "
    "(measured when cached, else spec). The CPU always uses measured roofs.",
)
TOP_OPTION = typer.Option(10, "--top", help="Rows in the top ops and modules tables, and findings shown.")
OUTPUT_OPTION = typer.Option(
    DEFAULT_OUTPUT, "--output", "-o", help="Report JSON, written atomically (read by plot and gate)."
)
VERIFY_OPTION = typer.Option(
    False,
    "--verify",
    help="After the diagnosis, apply each finding's mechanical technique (torch.compile, CUDA graphs, "
    "channels_last, TF32/bf16 autocast) to a fresh copy of the model, check its outputs and measure the gain "
    "(and, where the outputs match, its ops' times in one profiled pass).",
)
VERIFY_ALL_OPTION = typer.Option(
    False,
    "--verify-all",
    help="--verify, and then every mechanical technique over the whole model (torch.compile, CUDA graphs, "
    "channels_last, channels_last with compile, TF32, bf16 autocast): a gain no finding predicted is reported as "
    "missed by the diagnosis.",
)
COUNTERS_OPTION = typer.Option(
    False,
    "--counters",
    help="Also run one iteration under Nsight Compute (ncu on PATH): measured DRAM bytes per op against "
    "compulsory, the counters' bound beside ours, a locality finding where the traffic is far above compulsory.",
)
TRACE_OPTION = typer.Option(
    None,
    "--trace",
    help="Diagnose a torch.profiler (Kineto) trace recorded with record_shapes=True instead of running a model "
    "(its median ProfilerStep#N step).",
    metavar="TRACE.json[.gz]",
)
EXPORT_TRACE_OPTION = typer.Option(
    None,
    "--export-trace",
    help="Write the profiled run as a Chrome trace (Perfetto, chrome://tracing), each op and kernel annotated "
    "with its FLOPs, bytes, intensity, bound and efficiency.",
    metavar="FILE.json",
)
NPROC_OPTION = typer.Option(
    None,
    "--nproc",
    help="Run the model on N ranks (processes) through torch.distributed.run, one per GPU (gloo ranks on the "
    "CPU): every rank diagnosed, collectives on the communication roof, one merged report. Inside a torchrun "
    "launch leave it out: each rank diagnoses itself. See docs/distributed.md.",
    metavar="N",
)
BACKEND_OPTION = typer.Option(
    None,
    "--backend",
    help="The process group's backend with --nproc or under torchrun: nccl (GPUs, the default there) or gloo "
    "(the CPU's default).",
    metavar="nccl|gloo",
)
PREDICT_OPTION = typer.Option(
    None,
    "--predict",
    help="Also predict the run's times on this GPU (spec-sheet name; repeatable or a comma list): the table of "
    "`roofline predict` (not with --json: run `roofline predict REPORT.json --json`).",
    metavar="NAME",
)


def diagnose(
    model: Path | None = MODEL_ARGUMENT,
    script_args: list[str] | None = SCRIPT_ARGS_ARGUMENT,
    hf: str | None = HF_OPTION,
    batch: int | None = BATCH_OPTION,
    seq: int | None = SEQ_OPTION,
    entry: str | None = ENTRY_OPTION,
    device: str | None = DEVICE_OPTION,
    dtype: str | None = DTYPE_OPTION,
    mode: str = MODE_OPTION,
    warmup: str = WARMUP_OPTION,
    iters: str = ITERS_OPTION,
    sheet: str | None = SHEET_OPTION,
    spec: list[Path] | None = spec_option(),
    roofs: str = ROOFS_OPTION,
    top: int = TOP_OPTION,
    as_json: bool = json_option(),
    output: Path = OUTPUT_OPTION,
    plot: Path | None = plot_option(),
    verify: bool = VERIFY_OPTION,
    verify_all: bool = VERIFY_ALL_OPTION,
    counters: bool = COUNTERS_OPTION,
    trace: Path | None = TRACE_OPTION,
    export_trace: Path | None = EXPORT_TRACE_OPTION,
    nproc: int | None = NPROC_OPTION,
    backend: str | None = BACKEND_OPTION,
    force: bool = force_option(),
    predict: list[str] | None = PREDICT_OPTION,
    timeout: str | None = timeout_option("says which stage was running, writes no report, exit 124"),
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
    --hf ID diagnoses a Hugging Face causal LM built from its config with random weights, --batch x --seq random
    tokens, --mode prefill, decode or training (docs/diagnose.md, "Hugging Face models by id"). See docs/diagnose.md.
    """
    started = _process_age_s()  # before anything of diagnose runs: Python's start and our CLI's imports
    clock = time.perf_counter()
    timeout_s = check_timeout(timeout)
    request = _hf_request(hf, batch, seq, mode, model, trace)
    options = _options(entry, device, dtype, mode if request is None else request.mode, warmup, iters, sheet, spec,
                       roofs, script_args, (verify or verify_all, verify_all), counters, export_trace)  # fmt: skip
    _check(model, trace, options, top, request)
    shown = _Shown(top, as_json, output, export_trace, _predict_targets(predict, as_json, spec), options)
    if nproc is not None or backend is not None or _launched():
        if trace is not None or request is not None:
            from roofline.errors import UsageError

            given = "--trace reads one trace" if trace is not None else "--hf runs one process"
            raise UsageError(f"{given}: --nproc, --backend and torchrun are for a model file (MODEL.py)")
        _distributed(model, nproc, backend, options, shown, timeout_s)
        return
    inputs = [
        ("the model file" if trace is None else "the trace", model if trace is None else trace),
        *(("a --spec sheet", path) for path in spec or []),
    ]  # NB: --hf's config is read, never written: model is None then
    # before the model runs (it may chdir)
    where, trace_where = prepare_all(output, "report", [("--export-trace", export_trace, "trace")], inputs=inputs)
    assert where is not None
    result = _run(model if request is None else request, trace, options, as_json, timeout_s, clock)
    if result.stages:  # a live run (a --trace diagnosis runs no stages of its own)
        result.stages = {**({"python": started} if started is not None else {}), **result.stages}
    _show_and_write(result, shown, where, trace_where)
    _show_stages(result, shown.write_s, started, time.perf_counter() - clock)
    if shown.over_roof:
        info(f"note: {shown.over_roof}")
    freeze_heap()  # the CLI's own process only: its exit need not walk what the diagnosis left (cli/process.py)
    _interrupted(result)


@dataclass
class _Shown:
    """What the command shows and writes besides the diagnosis (and, once written, what that took)."""

    top: int
    as_json: bool
    output: Path
    export_trace: Path | None
    targets: list[str]  # --predict: the GPUs' sheet names
    options: DiagnoseOptions
    write_s: float = 0.0
    over_roof: str = ""  # a note said after the stages line


def _options(
    entry: str | None,
    device: str | None,
    dtype: str | None,
    mode: str,
    warmup: str,
    iters: str,
    sheet: str | None,
    spec: list[Path] | None,
    roofs: str,
    script_args: list[str] | None,
    verify: tuple[bool, bool],
    counters: bool,
    export_trace: Path | None,
) -> DiagnoseOptions:
    """The pipeline's options from the command line's (--warmup and --iters: a number or auto)."""
    from roofline.diagnose.pipeline import DiagnoseOptions

    return DiagnoseOptions(
        entry=entry,
        argv=tuple(script_args or ()),
        device=device,
        dtype=dtype,
        mode=mode,
        warmup=_count_option("--warmup", warmup),
        iters=_count_option("--iters", iters),
        sheet=sheet,
        spec_files=tuple(spec or ()),
        roofs=roofs,
        verify=verify[0],
        verify_all=verify[1],
        counters=counters,
        keep_trace=export_trace is not None,
    )


def _check(
    model: Path | None, trace: Path | None, options: DiagnoseOptions, top: int, request: HfModel | None = None
) -> None:
    """UsageError for options that do not go together: --top, a model, --hf or a trace, a trace with a live run's,
    --hf with a model file's."""
    from roofline.errors import UsageError

    if top < 1:
        raise UsageError(f"--top {top}: at least 1")
    if request is not None:
        if options.entry is not None or options.argv:
            given = "--entry" if options.entry is not None else "arguments after --"
            raise UsageError(f"{given}: for a model file; --hf builds the model from its config")
        return
    if (model is None) == (trace is None):
        raise UsageError(
            "give a model file (roofline diagnose MODEL.py), --hf ID (a Hugging Face model) or --trace TRACE.json: "
            "one of them"
        )
    if trace is None:
        return
    live_only = {
        "MODEL.py's arguments after --": bool(options.argv),
        "--entry": options.entry is not None,
        "--device": options.device is not None,
        "--dtype": options.dtype is not None,
        "--mode": options.mode != "inference",
        "--warmup": options.warmup is not None,
        "--iters": options.iters is not None,
        "--verify": options.verify,
        "--counters": options.counters,
    }
    given = [name for name, used in live_only.items() if used]
    if given:
        raise UsageError(f"{given[0]}: only for a live run (MODEL.py): --trace diagnoses what the trace recorded")


def _hf_request(
    hf: str | None, batch: int | None, seq: int | None, mode: str, model: Path | None, trace: Path | None
) -> HfModel | None:
    """--hf ID with its --batch, --seq and --mode (prefill|decode|training; inference: prefill), checked; None
    without --hf (then --batch, --seq, prefill and decode are refused)."""
    from roofline.errors import UsageError

    if hf is None:
        for name, value in (("--batch", batch), ("--seq", seq)):
            if value is not None:
                raise UsageError(f"{name}: only with --hf ID (a model file makes its own inputs in get_inputs())")
        if mode in ("prefill", "decode"):
            raise UsageError(f"--mode {mode}: only with --hf ID; a model file runs inference or training")
        return None
    if model is not None or trace is not None:
        other = f"the model file {model}" if model is not None else "--trace"
        raise UsageError(f"--hf and {other}: give one of them (--hf builds the model itself)")
    from roofline.diagnose.hf import HfModel

    request = HfModel(hf, 1 if batch is None else batch, 128 if seq is None else seq,
                      "prefill" if mode == "inference" else mode)  # fmt: skip
    request.check()
    return request


def _predict_targets(predict: list[str] | None, as_json: bool, spec: list[Path] | None) -> list[str]:
    """--predict: the GPUs' sheet names, checked before the model runs."""
    if not predict:
        return []
    from roofline.cli.predict import target_names
    from roofline.errors import UsageError
    from roofline.roofs import check_targets

    if as_json:
        raise UsageError("--predict with --json: run `roofline predict REPORT.json --device NAME --json` after it")
    return check_targets(target_names(predict), spec or [])


# ------------------------------------------------------------------------------------------------ the run


def _run(
    model: Path | HfModel | None,
    trace: Path | None,
    options: DiagnoseOptions,
    as_json: bool,
    timeout: float | None,
    clock: float,
) -> DiagnoseResult:
    """The diagnosis of the model file (--hf's model, or --trace), inside --timeout and the progress display. NB:
    with --json, standard output carries the report alone: whatever the user's file prints goes to stderr, also from
    a thread it started, after the run (roofline.cli.stdout.divert)."""
    from roofline.cli.stdout import divert
    from roofline.diagnose.pipeline import diagnose, diagnose_hf, diagnose_trace
    from roofline.resources import memory_guard

    if as_json:
        divert()
    quiet_stdout = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    guard = memory_guard() if trace is None and _on_cpu(options.device) else contextlib.nullcontext()
    with time_limit(timeout), quiet_stdout, guard, diagnose_status() as progress:
        if trace is not None:
            return diagnose_trace(trace, options, progress=progress)
        assert model is not None
        setup_s = time.perf_counter() - clock  # our imports, the options and output files checked
        if isinstance(model, Path):
            result = diagnose(model, options, boundaries=_boundaries(), progress=progress)
        else:
            result = diagnose_hf(model.ref, batch=model.batch, seq=model.seq, step=model.step, options=options,
                                 boundaries=_boundaries(), progress=progress)  # fmt: skip
    result.stages = {"setup": setup_s, **result.stages}
    return result


def _on_cpu(device: str | None) -> bool:
    """Whether the model runs on the CPU: ``-d cpu``, or no device given on a machine with no NVIDIA device node.
    NB: decided without importing torch (the CLI imports it later, frozen: _boundaries); a CPU run goes under the
    process guard (roofline.resources.memory_guard: a model allocating past the free memory fails in its own
    traceback instead of meeting the OOM killer); CUDA runs never do (the driver maps more than it allocates)."""
    if device is not None:
        return device.strip().lower() == "cpu"
    return not Path("/dev/nvidiactl").exists()


def _boundaries() -> Boundaries | None:
    """The pipeline's boundaries; in the CLI's own process, torch imported with the garbage collector paused, then
    ``gc.freeze()``: the objects torch leaves (about 200,000) are walked by no collection, during the import, later
    or at exit (roofline.cli.process.frozen_after says what that costs); None (the defaults) for an in-process
    caller."""
    if not is_entry():
        return None
    from roofline.diagnose.pipeline import Boundaries, DeviceFacts

    class FrozenImport(DeviceFacts):
        def import_torch(self) -> None:
            with frozen_after():
                super().import_torch()

    return Boundaries(device=FrozenImport())


def _show_and_write(result: DiagnoseResult, shown: _Shown, where: Path, trace_where: Path | None) -> None:
    """The report built, shown (console view or --json, --predict's table), written, its plot and trace."""
    from roofline.roofs import check_over_roof

    render_begin = time.perf_counter()
    report = result.report(command_line())
    if shown.as_json:
        print_text(report.to_json())
    else:
        from roofline.render.diagnose import DiagnoseRenderer

        print_text(DiagnoseRenderer(top=shown.top).render(report))
    if shown.targets:
        _predictions(report, shown)
    if result.counters_error:
        info(f"note: {result.counters_error}")
    shown.over_roof = check_over_roof(result.placed.points, result.device)  # shown after the summary line
    _add_stage(result, report, "render", time.perf_counter() - render_begin)
    write_begin = time.perf_counter()
    save_report(report, where, shown.output)  # after the tables: a full disk does not lose what was measured
    write_requested_plot(report, shown.output.stem)
    info(f"Report written to {shown.output}")
    if shown.export_trace is not None and trace_where is not None:
        _export_trace(result, trace_where, shown.export_trace)
    shown.write_s = time.perf_counter() - write_begin


def _predictions(report: Report, shown: _Shown) -> None:
    """--predict: the run's times on each GPU named, `roofline predict`'s table."""
    from roofline.predict import predict_report
    from roofline.render.predict import PredictRenderer

    options = shown.options
    basis = "spec" if options.roofs == "spec" else "auto"  # a missing calibration of the target is no error here
    predictions = predict_report(
        report, shown.targets, name=shown.output.stem, roofs=basis, spec_files=list(options.spec_files)
    )
    print_text(PredictRenderer(top=shown.top).render(predictions))


def _interrupted(result: DiagnoseResult) -> None:
    """--verify stopped (Ctrl-C, a signal, --timeout): said, and its exit code; the report holds what was
    verified before it."""
    if result.interruption is None:
        return
    from roofline.cli.timeout import say_stopped

    done = f"{len(result.verified or [])} finding(s) verified before it; the report keeps them"
    say_stopped(result.interruption, done, "verifying")


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


def _distributed(
    model: Any, nproc: int | None, backend: str | None, options: DiagnoseOptions, shown: _Shown, timeout: float | None
) -> None:
    """--nproc N (the parent: launch the ranks) or a rank of a torchrun launch (roofline.cli.distributed)."""
    from roofline.cli.distributed import diagnose_rank_cli, launch_nproc
    from roofline.errors import UsageError

    if nproc is not None:
        launch_nproc(nproc, device=options.device, backend=backend)
        return
    if not _launched():
        raise UsageError("--backend: only with --nproc N or inside a torchrun launch")
    diagnose_rank_cli(model, options=options, backend=backend, top=shown.top, as_json=shown.as_json,
                      output=shown.output, export_trace=shown.export_trace, timeout=timeout)  # fmt: skip


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
