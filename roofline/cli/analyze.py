"""`roofline analyze KIND`: napkin math for a workload on any device, no GPU needed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from roofline.cli.common import (
    Command,
    json_option,
    option,
    print_text,
    spec_option,
    split_list,
    with_options,
    workload_options,
    workload_values,
)
from roofline.cli.output import (
    command_line,
    force_option,
    plot_option,
    prepare_outputs,
    save_report,
    write_requested_plot,
)
from roofline.cli.verbosity import info
from roofline.costs.params import ANALYZE

app = typer.Typer(
    help=(
        "Napkin math for a workload on any device (no GPU needed): FLOPs, bytes, intensity, ridge, bound, "
        "attainable rate, minimum time, and the optimization that fits.\n\n"
        "A comma list on a size option sweeps it (one row per value; several lists: every combination). "
        "--device a,b,c compares devices side by side."
    ),
    no_args_is_help=True,
)


DEVICE_HELP = (
    "Spec-sheet name(s), or cpu (this CPU, measured roofs); comma list to compare (default: $ROOFLINE_DEVICE, the "
    "project's [tool.roofline] device, or this GPU)."
)
ROOFS_HELP = (
    "spec (sheet), measured (this machine's `roofline calibrate` cache; error if none) or auto (measured when a "
    "calibration of that device is cached, else spec)."
)
OUTPUT_HELP = "Also write the report JSON here (read by plot and gate)."


@dataclass(frozen=True)
class Run:
    """What every analyze command is told besides its workload (--plot and --force reach the output code through
    the command's context)."""

    device: str | None
    spec: list[Path] | None
    roofs: str
    as_json: bool
    output: Path | None


def _run_options() -> Callable[[Command], Command]:
    """The options every analyze command takes, after its workload's; the command receives them as ``opts``."""
    return with_options(
        "opts",
        [
            option("device", typer.Option(None, "--device", "-d", help=DEVICE_HELP), str | None),
            option("spec", spec_option(), list[Path] | None),
            option("roofs", typer.Option("auto", "--roofs", help=ROOFS_HELP), str),
            option("as_json", json_option(), bool),
            option("output", typer.Option(None, "--output", "-o", help=OUTPUT_HELP), Path | None),
            option("plot", plot_option(), Path | None),
            option("force", force_option(), bool),
        ],
        lambda device, spec, roofs, as_json, output, **_: Run(device, spec, roofs, as_json, output),
    )


def _devices(opts: Run) -> list:  # -> list[Device]
    """The devices of --device; the CPU's measured roofs (a calibration, the first time) under the process guard
    (roofline.resources.memory_guard: an allocation past the free memory fails instead of the OOM killer)."""
    import contextlib

    from roofline.resources import memory_guard
    from roofline.roofs import sheet_devices

    names = split_list(opts.device, "--device") if opts.device else None
    on_cpu = any(name.strip().lower() == "cpu" for name in names or [])
    with memory_guard() if on_cpu else contextlib.nullcontext():
        return sheet_devices(names, spec_files=opts.spec or [], roofs=opts.roofs)


def _prepare(output: Path | None, spec: list[Path] | None, read: tuple[str, Any] = ("", None)) -> Path | None:
    """Before any work (--device cpu measures): check -o and --plot (roofline.cli.output.prepare_outputs).
    ``read``: the suite or model config file the command reads, if any."""
    inputs = [*(("a --spec sheet", path) for path in spec or [])]
    if isinstance(read[1], (str, Path)) and str(read[1]).endswith((".yaml", ".yml")):
        inputs.append(read)
    return prepare_outputs(output, "report", inputs=inputs)


def _emit(rows: list, devices: list, opts: Run, where: Path | None, title: str = "") -> None:
    """Render or print JSON, then write the report when -o is given (``where``: prepared)."""
    from roofline.report.schema import new_report

    output = opts.output
    report = new_report(command_line(), "analytic", devices, rows)
    if opts.as_json:
        print_text(report.to_json())
    else:
        from roofline.render.analyze import AnalysisRenderer

        print_text(AnalysisRenderer(devices, title=title).render(rows))
    if output is not None and where is not None:
        save_report(report, where, output)
    write_requested_plot(report, output.stem if output is not None else "analyze")
    if output is not None and not opts.as_json:
        info(f"Report written to {output}")


def run(kind: str, values: dict[str, Any], opts: Run) -> None:
    from roofline.analysis import sweep
    from roofline.costs.suite import check_sweep, sweep_size

    where = _prepare(opts.output, opts.spec, ("the model config", values.get("model")))
    given = {key: value for key, value in values.items() if value is not None}
    check_sweep(sweep_size(given))  # NB: refused before the devices are read
    devices = _devices(opts)
    warning = check_sweep(sweep_size(given) * len(devices))
    if warning:
        info(warning)
    rows = sweep(kind, given, devices)
    _emit(rows, devices, opts, where)


def _analyze(kind: str, texts: dict[str, Any], opts: Run) -> None:
    run(kind, workload_values(ANALYZE[kind], texts), opts)


# Each command's options: its workload's (roofline.costs.params, declared once for analyze, bench and suites), then
# _run_options'.


@app.command()
@workload_options(ANALYZE["gemm"])
@_run_options()
def gemm(texts: dict[str, Any], opts: Run) -> None:
    """GEMM / batched GEMM: C = A @ B, 2*m*n*k FLOPs per batch entry."""
    _analyze("gemm", texts, opts)


@app.command()
@workload_options(ANALYZE["attention"])
@_run_options()
def attention(texts: dict[str, Any], opts: Run) -> None:
    """Attention softmax(QK^T)V, naive or fused, causal or not, MHA/GQA/MQA."""
    _analyze("attention", texts, opts)


def _llm(kind: str, texts: dict[str, Any], opts: Run) -> None:
    from roofline.errors import UsageError

    model = _model_or_config(texts["model"], texts["config"])
    values = workload_values(ANALYZE[kind], {**texts, "model": model})
    del values["config"]  # NB: read as the model
    if (values["model"] is None) == (values["params"] is None):
        raise UsageError(
            "give either --model NAME|FILE.yaml, --config ID|DIR|CONFIG.json or --params P (with --d-model) "
            "for the napkin form"
        )
    if values["model"] is None and values.get("kv_dtype") is not None and values.get("layers") is None:
        raise UsageError(
            "--kv-dtype in the napkin form needs the KV cache's shape: give --layers and --heads (--kv-heads for GQA)"
        )
    if values["model"] is not None:
        for key, option_name in (("layers", "--layers"), ("heads", "--heads"), ("kv_heads", "--kv-heads")):
            if values.get(key) is not None:
                raise UsageError(f"{option_name} is for the napkin form (--params): the model config has its own")
    run(kind, values, opts)


def _model_or_config(model: str | None, config: str | None) -> str | None:
    """--model, or the config.json --config names (a hub id, a directory or the file: roofline.costs.hfhub; read by
    roofline.costs.hfconfig through the model loader)."""
    if config is None:
        return model
    from roofline.costs.hfhub import resolve_config
    from roofline.errors import UsageError

    if model is not None:
        raise UsageError("give --model or --config, not both")
    return str(resolve_config(config).path)


@app.command()
@workload_options(ANALYZE["decode"])
@_run_options()
def decode(texts: dict[str, Any], opts: Run) -> None:
    """One LLM decode step (one new token per sequence): weights streamed once per step."""
    _llm("decode", texts, opts)


@app.command()
@workload_options(ANALYZE["prefill"])
@_run_options()
def prefill(texts: dict[str, Any], opts: Run) -> None:
    """LLM prefill of a prompt: every prompt token through every layer, causal attention."""
    _llm("prefill", texts, opts)


@app.command()
@workload_options(ANALYZE["elementwise"])
@_run_options()
def elementwise(texts: dict[str, Any], opts: Run) -> None:
    """An element-wise op: FLOPs per element from a table, each input read and the output written once."""
    _analyze("elementwise", texts, opts)


@app.command()
@workload_options(ANALYZE["norm"])
@_run_options()
def norm(texts: dict[str, Any], opts: Run) -> None:
    """Row-wise normalisations: layernorm, rmsnorm, softmax."""
    _analyze("norm", texts, opts)


@app.command()
@workload_options(ANALYZE["conv2d"])
@_run_options()
def conv2d(texts: dict[str, Any], opts: Run) -> None:
    """2-D convolution (NCHW): 2 * output elements * (Cin/groups) * kh * kw FLOPs."""
    _analyze("conv2d", texts, opts)


@app.command()
@_run_options()
def suite(
    file: Annotated[str, typer.Argument(help="A suite YAML, or the name of a shipped suite (transformer-ops).")],
    opts: Run,
) -> None:
    """Every workload of a suite file (kind + parameters per entry; list values sweep)."""
    from roofline.analysis import analyze_items
    from roofline.costs.suite import check_sweep, load_suite, suite_path

    loaded, items = load_suite(file)
    where = _prepare(opts.output, opts.spec, ("the suite file", suite_path(file)))
    devices = _devices(opts)
    warning = check_sweep(len(items) * len(devices))
    if warning:
        info(warning)
    _emit(analyze_items(items, devices), devices, opts, where, title=f"suite {loaded.name}")


from roofline.cli.tile import tile  # noqa: E402  (its own module: registered here)

app.command("tile")(tile)
