"""`roofline bench KIND`: run built-in workloads for real on this machine and place them on its roofline."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from roofline.cli.common import (
    Command,
    json_option,
    option,
    print_text,
    spec_option,
    with_options,
    workload_options,
    workload_values,
)
from roofline.cli.output import (
    bench_progress,
    command_line,
    force_option,
    plot_option,
    prepare_outputs,
    save_report,
    write_requested_plot,
)
from roofline.cli.timeout import check_timeout, say_stopped, time_limit, timeout_option
from roofline.cli.verbosity import info, verbose
from roofline.costs.params import BENCH

DEFAULT_OUTPUT = Path("roofline-bench.json")
DEFAULT_MAX_TIME_S = 1.0  # NB: = roofline.bench.target.DEFAULT_MAX_TIME_S (not imported: --help stays light)
DEVICE_HELP = "Where to run: cuda (cuda:N) or cpu (default: cuda when torch sees a GPU, else cpu)."
SHEET_HELP = (
    "GPU spec sheet for the roofs (default: the sheet matching this GPU's name; a cached calibration of that sheet "
    "replaces its roofs with measured ones)."
)
WARM_HELP = (
    "Warm: no flush before each sample; cold: flush the L2 (CPU: the caches) before each sample, outside the timed "
    "region (default: cold on a GPU, warm on the CPU)."
)
MAX_TIME_HELP = (
    "Time budget per row (0.5, 500ms, 2s; bare: seconds; default 1 s): sampling stops earlier once the spread settles."
)
OUTPUT_HELP = "Report JSON, written atomically (rows with every sample)."


class BenchGroup(TyperGroup):
    """`roofline bench FILE.yaml` (or the name of a shipped suite) is short for `roofline bench suite FILE.yaml`."""

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        if args and args[0] not in self.commands and "suite" in self.commands:
            from roofline.costs.suite import shipped_suites

            first = args[0]
            if first.endswith((".yaml", ".yml")) or first in shipped_suites():
                return "suite", self.commands["suite"], args
        return super().resolve_command(ctx, args)


app = typer.Typer(
    cls=BenchGroup,
    help=(
        "Run built-in workloads for real on this machine (GPU or CPU) and place them on its roofline: measured "
        "median time and spread, achieved FLOP/s and bytes/s, efficiency against the roofs, bound.\n\n"
        "Roofs come from the GPU's spec sheet, or from `roofline calibrate` when this GPU has a cached "
        "calibration (the CPU always uses measured roofs). Every run writes a report (-o, default "
        "roofline-bench.json) with every sample. A comma list on a size option sweeps it. "
        "`roofline bench FILE.yaml` runs a suite."
    ),
    no_args_is_help=True,
)


@dataclass(frozen=True)
class Options:
    device: str | None
    sheet: str | None
    spec: list[Path] | None
    warm: bool | None
    max_time: float
    output: Path
    as_json: bool
    timeout: float | None = None


def max_time_s(text: str | None) -> float:
    """--max-time's value in seconds (bench's default when not given)."""
    from roofline.units import parse_time

    return DEFAULT_MAX_TIME_S if text is None else parse_time(text, "--max-time", "s")


def _bench_options() -> Callable[[Command], Command]:
    """The options every bench command takes, after its workload's; the command receives them as ``opts``."""
    return with_options(
        "opts",
        [
            option("device", typer.Option(None, "--device", "-d", help=DEVICE_HELP, metavar="cuda|cpu"), str | None),
            option("sheet", typer.Option(None, "--sheet", help=SHEET_HELP), str | None),
            option("spec", spec_option(), list[Path] | None),
            option("warm", typer.Option(None, "--warm/--cold", help=WARM_HELP, show_default=False), bool | None),
            option(
                "max_time",
                typer.Option(None, "--max-time", help=MAX_TIME_HELP, metavar="TIME", show_default=False),
                str | None,
            ),
            option("output", typer.Option(DEFAULT_OUTPUT, "--output", "-o", help=OUTPUT_HELP), Path),
            option("plot", plot_option(), Path | None),
            option("force", force_option(), bool),
            option("as_json", json_option(), bool),
            option("timeout", timeout_option("the rows finished so far are written, exit 124"), str | None),
        ],
        lambda device, sheet, spec, warm, max_time, output, as_json, timeout, **_: Options(
            device, sheet, spec, warm, max_time_s(max_time), output, as_json, check_timeout(timeout)
        ),
    )


def execute(
    items: list, opts: Options, title: str = "", suite: dict[str, str] | None = None, config: str | None = None
) -> None:
    """Run the items on the target device, render them, write the report; exit 130 when interrupted (143/129 when
    terminated, 124 when --timeout ran out: the rows finished so far are written first). ``config``: decode's
    --model, when a file."""
    from roofline.bench.run import run_bench
    from roofline.bench.target import open_target
    from roofline.cli.timeout import SignalHold
    from roofline.costs.suite import check_sweep
    from roofline.resources import memory_guard
    from roofline.roofs import device_kind

    inputs = [("the suite file", (suite or {}).get("file")), *(("a --spec sheet", path) for path in opts.spec or [])]
    if config is not None and config.endswith((".yaml", ".yml")):
        inputs.append(("the model config", config))
    where = prepare_outputs(opts.output, "report", inputs=inputs)
    assert where is not None
    warning = check_sweep(len(items))
    if warning:
        info(warning)
    on_cpu = device_kind(opts.device) == "cpu"
    if on_cpu:  # NB: before the target (a first CPU run calibrates): a run of which no row fits is refused at once
        _refuse_if_nothing_fits(items)
    signals = SignalHold()  # from the loop's end to the report written: a signal then waits (rows are not lost)
    try:
        with time_limit(opts.timeout), memory_guard() if on_cpu else contextlib.nullcontext():
            target = open_target(
                opts.device, sheet=opts.sheet, spec_files=opts.spec or [], warm=opts.warm, max_time_s=opts.max_time
            )
            with bench_progress() as progress:
                result = run_bench(
                    items, target.device, target.harness, target.build, progress=progress, hold=signals.hold
                )
        _finish(result, target, opts, where, title, suite)
    finally:
        signals.release()
    if result.interrupted:
        say_stopped(result.interruption, f"{len(result.rows)} of {result.total} rows measured and written.")


def _refuse_if_nothing_fits(items: list) -> None:
    """On the CPU, before anything is opened or allocated: when no item fits in the free host memory, the first
    one's reason is the one-line error (exit 2)."""
    from roofline.bench.run import BenchResult, memory_skips, nothing_ran
    from roofline.bench.target import host_free

    skips = memory_skips(items, host_free())
    if items and len(skips) == len(items):
        error = nothing_ran(BenchResult([], skips, len(items)))
        assert error is not None
        raise error


def _finish(result: Any, target: Any, opts: Options, where: Path, title: str, suite: dict[str, str] | None) -> None:
    """The rows shown (table or --json) and written (the report, --plot); a row skipped for memory is one line on
    stderr too. No row ran: the first reason is the one-line error (exit 2) and no report is written."""
    from roofline.bench.run import bench_report, nothing_ran

    error = nothing_ran(result)
    if error is not None:
        raise error
    for skip in result.skipped:
        if skip.out_of_memory:
            info(f"note: skipped {skip.kind} {skip.label}: {skip.reason.removeprefix(f'{skip.kind} {skip.label}: ')}")
    report = bench_report(command_line(), target, result, suite)
    if opts.as_json:
        print_text(report.to_json())
    else:
        from roofline.render.bench import BenchRenderer

        renderer = BenchRenderer(
            target.device,
            timing=target.harness.description,
            title=title,
            notes=target.notes,
            skipped=result.skipped,
            interrupted=result.interrupted,
            total=result.total,
            verbose=verbose(),
        )
        print_text(renderer.render(result.rows))
    save_report(report, where, opts.output)  # after the table: a full disk does not lose what was measured
    write_requested_plot(report, opts.output.stem)
    info(f"Report written to {opts.output}")
    _note_over_roof(result.rows, target.device)


def _default_dtype(opts: Options) -> str:
    from roofline.roofs import device_kind

    return "bf16" if device_kind(opts.device) == "cuda" else "fp32"


def _bench(kind: str, texts: dict[str, Any], opts: Options) -> None:
    from roofline.bench.items import expand_items

    values = workload_values(BENCH[kind], texts, lambda: _default_dtype(opts))
    execute(expand_items(kind, values), opts)


# Each command's options: its workload's (roofline.costs.params, declared once for analyze, bench and suites), then
# _bench_options'.


@app.command()
@workload_options(BENCH["gemm"])
@_bench_options()
def gemm(texts: dict[str, Any], opts: Options) -> None:
    """GEMM / batched GEMM, C = A @ B (torch.matmul / torch.bmm; fp8 torch._scaled_mm; int8 torch._int_mm)."""
    _bench("gemm", texts, opts)


@app.command()
@workload_options(BENCH["attention"])
@_bench_options()
def attention(texts: dict[str, Any], opts: Options) -> None:
    """Attention softmax(QK^T/sqrt(d))V: naive (three kernels) vs fused (SDPA), causal or not, MHA/GQA/MQA."""
    _bench("attention", texts, opts)


@app.command()
@workload_options(BENCH["elementwise"])
@_bench_options()
def elementwise(texts: dict[str, Any], opts: Options) -> None:
    """An element-wise op into a preallocated output (every op of `roofline analyze elementwise`)."""
    _bench("elementwise", texts, opts)


@app.command()
@workload_options(BENCH["norm"])
@_bench_options()
def norm(texts: dict[str, Any], opts: Options) -> None:
    """Row-wise normalisations: F.layer_norm, F.rms_norm, softmax over the last dimension."""
    _bench("norm", texts, opts)


@app.command()
@workload_options(BENCH["conv2d"])
@_bench_options()
def conv2d(texts: dict[str, Any], opts: Options) -> None:
    """2-D convolution, NCHW (F.conv2d)."""
    _bench("conv2d", texts, opts)


@app.command()
@workload_options(BENCH["decode"])
@_bench_options()
def decode(texts: dict[str, Any], opts: Options) -> None:
    """LLM decode, GEMV-shaped: the weight GEMMs of one decoder layer at M = batch (memory-bound at small batch)."""
    from roofline.bench.items import decode_gemm_items, expand_items
    from roofline.errors import UsageError

    model, n, k = texts["model"], texts["n"], texts["k"]
    if model is not None and (n is not None or k is not None):
        raise UsageError("give either --model NAME|FILE.yaml or one weight GEMM with -n N -k K, not both")
    if model is None and (n is None or k is None):
        raise UsageError("give --model NAME|FILE.yaml (a decoder layer's GEMMs) or -n N -k K (one weight GEMM)")
    values = workload_values(BENCH["decode"], texts, lambda: _default_dtype(opts))
    if model is None:
        items = decode_gemm_items(values["batch"], values["n"], values["k"], values["act_dtype"])
    else:
        items = expand_items("decode", {key: values[key] for key in ("model", "batch", "act_dtype")})
    execute(items, opts, config=model)


@app.command()
@_bench_options()
def suite(
    file: Annotated[
        str,
        typer.Argument(help="A suite YAML, or the name of a shipped suite (bench-gpu, bench-cpu, transformer-ops)."),
    ],
    opts: Options,
) -> None:
    """Every workload of a suite file (kind + parameters per entry; list values sweep). Also `roofline bench FILE`."""
    from roofline.bench.items import expand_suite
    from roofline.costs.suite import load_suite, suite_path

    loaded, entries = load_suite(file)
    items = _on_cpu(loaded.name, expand_suite(entries), opts.device)
    execute(items, opts, title=f"suite {loaded.name}", suite={"name": loaded.name, "file": str(suite_path(file))})


def _on_cpu(name: str, items: list, device: str | None) -> list:
    """A suite's items as they run on a CPU (rows at GPU dtypes left out, one line saying so); a GPU suite on an
    explicit --device cpu (or one with nothing to run on the CPU) is one line, exit 2."""
    from roofline.bench.items import cpu_plan
    from roofline.errors import DeviceError
    from roofline.roofs import device_kind

    if device_kind(device) != "cpu":
        return items
    plan = cpu_plan(name, items)
    if not plan.line:
        return items
    if (device is not None and plan.refuse) or not plan.run:
        raise DeviceError(plan.line)
    info(f"note: {plan.line}; running the other {len(plan.run)}")
    return plan.run


def _note_over_roof(rows: list, device: Any) -> None:
    """A note when rows ran above 100% of measured roofs: which calibration, and how to refresh it."""
    from roofline.roofs import check_over_roof

    note = check_over_roof(rows, device)
    if note:
        info(f"note: {note}")
