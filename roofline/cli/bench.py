"""`roofline bench KIND`: run built-in workloads for real on this machine and place them on its roofline."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

from roofline.cli.common import SWEEP, conv2d_values, json_option, print_text, sizes_value, spec_option, words_value
from roofline.cli.output import (
    bench_progress,
    command_line,
    force_option,
    plot_option,
    prepare_outputs,
    save_report,
    write_requested_plot,
)
from roofline.cli.timeout import check_timeout, time_limit, timeout_option
from roofline.cli.verbosity import info, verbose

DEFAULT_OUTPUT = Path("roofline-bench.json")
DEFAULT_MAX_TIME_S = 1.0  # NB: = roofline.bench.target.DEFAULT_MAX_TIME_S (not imported: --help stays light)
DEFAULT_DTYPE = " (default: bf16 on a GPU, fp32 on the CPU)." + SWEEP


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


# Options shared by every bench command (typer needs them in each signature; the definitions live here once).
def _device() -> Any:
    return typer.Option(
        None,
        "--device",
        "-d",
        help="Where to run: cuda (cuda:N) or cpu (default: cuda when torch sees a GPU, else cpu).",
        metavar="cuda|cpu",
    )


def _sheet() -> Any:
    return typer.Option(
        None,
        "--sheet",
        help="GPU spec sheet for the roofs (default: the sheet matching this GPU's name; a cached calibration "
        "of that sheet replaces its roofs with measured ones).",
    )


def _warm() -> Any:
    return typer.Option(
        None,
        "--warm/--cold",
        help="Warm: no flush before each sample; cold: flush the L2 (CPU: the caches) before each sample, outside "
        "the timed region (default: cold on a GPU, warm on the CPU).",
        show_default=False,
    )


def _max_time() -> Any:
    return typer.Option(
        DEFAULT_MAX_TIME_S,
        "--max-time",
        help="Time budget per row in seconds (sampling stops earlier once the spread settles).",
    )


def _output() -> Any:
    return typer.Option(
        DEFAULT_OUTPUT, "--output", "-o", help="Report JSON, written atomically (rows with every sample)."
    )


def _timeout() -> Any:
    return timeout_option("the rows finished so far are written, exit 124")


def _options(
    device: str | None,
    sheet: str | None,
    spec: list[Path] | None,
    warm: bool | None,
    max_time: float,
    output: Path,
    j: bool,
    timeout: float | None = None,
) -> Options:
    return Options(device, sheet, spec, warm, max_time, output, j, check_timeout(timeout))


def execute(
    items: list, opts: Options, title: str = "", suite: dict[str, str] | None = None, config: str | None = None
) -> None:
    """Run the items on the target device, render them, write the report; exit 130 when interrupted (143/129 when
    terminated, 124 when --timeout ran out: the rows finished so far are written first). ``config``: decode's
    --model, when a file."""
    from roofline.bench.run import bench_report, run_bench
    from roofline.bench.target import open_target
    from roofline.costs.suite import check_sweep
    from roofline.errors import TimedOut, interrupt_exit_code

    inputs = [("the suite file", (suite or {}).get("file")), *(("a --spec sheet", path) for path in opts.spec or [])]
    if config is not None and config.endswith((".yaml", ".yml")):
        inputs.append(("the model config", config))
    where = prepare_outputs(opts.output, "report", inputs=inputs)
    assert where is not None
    warning = check_sweep(len(items))
    if warning:
        info(warning)
    with time_limit(opts.timeout):
        target = open_target(
            opts.device, sheet=opts.sheet, spec_files=opts.spec or [], warm=opts.warm, max_time_s=opts.max_time
        )
        with bench_progress() as progress:
            result = run_bench(items, target.device, target.harness, target.build, progress=progress)
    if not result.rows and not result.interrupted:
        error = result.first_error()
        if error is not None:  # nothing ran, and not for lack of memory: a usage problem, one line
            raise error
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
    if result.interrupted:
        done = f"{len(result.rows)} of {result.total} rows measured and written."
        if isinstance(result.interruption, TimedOut):
            info(f"Timed out after {result.interruption.seconds:g} s (--timeout): {done}")
        else:
            info(f"Interrupted: {done}")
        raise typer.Exit(interrupt_exit_code(result.interruption))


def _default_dtype(opts: Options) -> str:
    from roofline.roofs import device_kind

    return "bf16" if device_kind(opts.device) == "cuda" else "fp32"


def _dtypes(text: str | None, opts: Options) -> Any:
    return words_value(text, "--dtype") if text is not None else _default_dtype(opts)


def _run_kind(kind: str, values: dict[str, Any], opts: Options) -> None:
    from roofline.bench.items import expand_items

    execute(expand_items(kind, values), opts)


@app.command()
def gemm(
    m: str = typer.Option(..., "-m", help="Rows of A and C." + SWEEP),
    n: str = typer.Option(..., "-n", help="Columns of B and C." + SWEEP),
    k: str = typer.Option(..., "-k", help="Inner (reduction) dimension." + SWEEP),
    batch: str = typer.Option("1", "--batch", "-b", help="Batch of independent GEMMs (torch.bmm)." + SWEEP),
    dtype: str | None = typer.Option(
        None, "--dtype", help="Operand dtype: fp64 fp32 fp16 bf16 fp8 int8" + DEFAULT_DTYPE
    ),
    out_dtype: str | None = typer.Option(None, "--out-dtype", help="fp8 only: output dtype (default bf16)."),
    tf32: bool = typer.Option(False, "--tf32", help="fp32 matmul on TF32 tensor cores."),
    device: str | None = _device(),
    sheet: str | None = _sheet(),
    spec: list[Path] | None = spec_option(),
    warm: bool | None = _warm(),
    max_time: float = _max_time(),
    output: Path = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
    as_json: bool = json_option(),
    timeout: float | None = _timeout(),
) -> None:
    """GEMM / batched GEMM, C = A @ B (torch.matmul / torch.bmm; fp8 torch._scaled_mm; int8 torch._int_mm)."""
    opts = _options(device, sheet, spec, warm, max_time, output, as_json, timeout)
    values = {
        "m": sizes_value(m, "-m"),
        "n": sizes_value(n, "-n"),
        "k": sizes_value(k, "-k"),
        "batch": sizes_value(batch, "--batch"),
        "dtype": _dtypes(dtype, opts),
        "out_dtype": out_dtype,
        "tf32": tf32,
    }
    _run_kind("gemm", values, opts)


@app.command()
def attention(
    seq: str = typer.Option(..., "--seq", "-s", help="Query length (and key length unless --seq-kv)." + SWEEP),
    heads: str = typer.Option(..., "--heads", help="Query heads." + SWEEP),
    head_dim: str = typer.Option("128", "--head-dim", help="Head dimension." + SWEEP),
    kv_heads: str | None = typer.Option(None, "--kv-heads", help="Key/value heads (GQA/MQA; default --heads)." + SWEEP),
    seq_kv: str | None = typer.Option(None, "--seq-kv", help="Key/value length (default --seq)." + SWEEP),
    batch: str = typer.Option("1", "--batch", "-b", help="Batch size." + SWEEP),
    dtype: str | None = typer.Option(None, "--dtype", help="Q/K/V dtype" + DEFAULT_DTYPE),
    causal: bool = typer.Option(False, "--causal", help="Causal mask."),
    impl: str = typer.Option(
        "sdpa",
        "--impl",
        help="naive (baddbmm, softmax, bmm: materialises S x S) and/or sdpa = fused "
        "(scaled_dot_product_attention)." + SWEEP,
    ),
    device: str | None = _device(),
    sheet: str | None = _sheet(),
    spec: list[Path] | None = spec_option(),
    warm: bool | None = _warm(),
    max_time: float = _max_time(),
    output: Path = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
    as_json: bool = json_option(),
    timeout: float | None = _timeout(),
) -> None:
    """Attention softmax(QK^T/sqrt(d))V: naive (three kernels) vs fused (SDPA), causal or not, MHA/GQA/MQA."""
    opts = _options(device, sheet, spec, warm, max_time, output, as_json, timeout)
    values = {
        "seq_q": sizes_value(seq, "--seq"),
        "seq_kv": sizes_value(seq_kv, "--seq-kv"),
        "heads": sizes_value(heads, "--heads"),
        "kv_heads": sizes_value(kv_heads, "--kv-heads"),
        "head_dim": sizes_value(head_dim, "--head-dim"),
        "batch": sizes_value(batch, "--batch"),
        "dtype": _dtypes(dtype, opts),
        "causal": causal,
        "impl": words_value(impl, "--impl"),
    }
    _run_kind("attention", values, opts)


@app.command()
def elementwise(
    op: str = typer.Option(..., "--op", help="relu, gelu, gelu_tanh, silu, add, mul, copy, ... ." + SWEEP),
    numel: str = typer.Option(..., "--numel", "-N", help="Elements, e.g. 16777216, 2^24 or 4096x4096." + SWEEP),
    dtype: str | None = typer.Option(None, "--dtype", help="Element dtype" + DEFAULT_DTYPE),
    device: str | None = _device(),
    sheet: str | None = _sheet(),
    spec: list[Path] | None = spec_option(),
    warm: bool | None = _warm(),
    max_time: float = _max_time(),
    output: Path = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
    as_json: bool = json_option(),
    timeout: float | None = _timeout(),
) -> None:
    """An element-wise op into a preallocated output (every op of `roofline analyze elementwise`)."""
    opts = _options(device, sheet, spec, warm, max_time, output, as_json, timeout)
    values = {"op": words_value(op, "--op"), "numel": sizes_value(numel, "--numel"), "dtype": _dtypes(dtype, opts)}
    _run_kind("elementwise", values, opts)


@app.command()
def norm(
    op: str = typer.Option("layernorm", "--op", help="layernorm, rmsnorm or softmax." + SWEEP),
    rows: str = typer.Option(..., "--rows", help="Rows (tokens)." + SWEEP),
    cols: str = typer.Option(..., "--cols", help="Normalised width (hidden size)." + SWEEP),
    dtype: str | None = typer.Option(None, "--dtype", help="Element dtype" + DEFAULT_DTYPE),
    affine: bool = typer.Option(True, "--affine/--no-affine", help="Learned weight (and bias for layernorm)."),
    device: str | None = _device(),
    sheet: str | None = _sheet(),
    spec: list[Path] | None = spec_option(),
    warm: bool | None = _warm(),
    max_time: float = _max_time(),
    output: Path = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
    as_json: bool = json_option(),
    timeout: float | None = _timeout(),
) -> None:
    """Row-wise normalisations: F.layer_norm, F.rms_norm, softmax over the last dimension."""
    opts = _options(device, sheet, spec, warm, max_time, output, as_json, timeout)
    values = {
        "op": words_value(op, "--op"),
        "rows": sizes_value(rows, "--rows"),
        "cols": sizes_value(cols, "--cols"),
        "dtype": _dtypes(dtype, opts),
        "affine": affine,
    }
    _run_kind("norm", values, opts)


@app.command()
def conv2d(
    batch: str = typer.Option("1", "--batch", "-b", help="Batch size." + SWEEP),
    in_channels: str = typer.Option(..., "--in-channels", "-c", help="Input channels." + SWEEP),
    out_channels: str = typer.Option(..., "--out-channels", help="Output channels." + SWEEP),
    height: str = typer.Option(..., "--height", help="Input height." + SWEEP),
    width: str = typer.Option(..., "--width", help="Input width." + SWEEP),
    kernel_size: str = typer.Option("3", "--kernel-size", help="Square kernel size." + SWEEP),
    stride: str = typer.Option("1", "--stride", help="Stride." + SWEEP),
    padding: str = typer.Option("0", "--padding", help="Zero padding." + SWEEP),
    groups: str = typer.Option("1", "--groups", help="Groups (depthwise = channels)." + SWEEP),
    dtype: str | None = typer.Option(None, "--dtype", help="Dtype" + DEFAULT_DTYPE),
    tf32: bool = typer.Option(False, "--tf32", help="fp32 conv on TF32 tensor cores."),
    device: str | None = _device(),
    sheet: str | None = _sheet(),
    spec: list[Path] | None = spec_option(),
    warm: bool | None = _warm(),
    max_time: float = _max_time(),
    output: Path = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
    as_json: bool = json_option(),
    timeout: float | None = _timeout(),
) -> None:
    """2-D convolution, NCHW (F.conv2d)."""
    opts = _options(device, sheet, spec, warm, max_time, output, as_json, timeout)
    values = conv2d_values(
        batch,
        in_channels,
        out_channels,
        height,
        width,
        kernel_size,
        stride,
        padding,
        groups,
        _dtypes(dtype, opts),
        tf32,
    )
    _run_kind("conv2d", values, opts)


@app.command()
def decode(
    model: str | None = typer.Option(
        None,
        "--model",
        help="Model config whose decoder-layer weight GEMMs run (qkv, o, gate/up, down): a shipped name "
        "(gpt2, llama-2-7b, llama-3-8b, llama-3-70b, mistral-7b) or a YAML file.",
    ),
    n: str | None = typer.Option(None, "-n", help="Without --model: one weight GEMM's output width." + SWEEP),
    k: str | None = typer.Option(None, "-k", help="Without --model: one weight GEMM's input width." + SWEEP),
    batch: str = typer.Option("1", "--batch", "-b", help="Concurrent sequences = the GEMMs' M." + SWEEP),
    dtype: str | None = typer.Option(None, "--dtype", help="Activation and weight dtype" + DEFAULT_DTYPE),
    device: str | None = _device(),
    sheet: str | None = _sheet(),
    spec: list[Path] | None = spec_option(),
    warm: bool | None = _warm(),
    max_time: float = _max_time(),
    output: Path = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
    as_json: bool = json_option(),
    timeout: float | None = _timeout(),
) -> None:
    """LLM decode, GEMV-shaped: the weight GEMMs of one decoder layer at M = batch (memory-bound at small batch)."""
    from roofline.bench.items import decode_gemm_items, expand_items
    from roofline.errors import UsageError

    opts = _options(device, sheet, spec, warm, max_time, output, as_json, timeout)
    if model is not None and (n is not None or k is not None):
        raise UsageError("give either --model NAME|FILE.yaml or one weight GEMM with -n N -k K, not both")
    if model is None:
        if n is None or k is None:
            raise UsageError("give --model NAME|FILE.yaml (a decoder layer's GEMMs) or -n N -k K (one weight GEMM)")
        items = decode_gemm_items(
            sizes_value(batch, "--batch"), sizes_value(n, "-n"), sizes_value(k, "-k"), _dtypes(dtype, opts)
        )
    else:
        values = {"model": model, "batch": sizes_value(batch, "--batch"), "act_dtype": _dtypes(dtype, opts)}
        items = expand_items("decode", values)
    execute(items, opts, config=model)


@app.command()
def suite(
    file: str = typer.Argument(
        ..., help="A suite YAML, or the name of a shipped suite (bench-gpu, bench-cpu, transformer-ops)."
    ),
    device: str | None = _device(),
    sheet: str | None = _sheet(),
    spec: list[Path] | None = spec_option(),
    warm: bool | None = _warm(),
    max_time: float = _max_time(),
    output: Path = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
    as_json: bool = json_option(),
    timeout: float | None = _timeout(),
) -> None:
    """Every workload of a suite file (kind + parameters per entry; list values sweep). Also `roofline bench FILE`."""
    from roofline.bench.items import expand_suite
    from roofline.costs.suite import load_suite, suite_path

    loaded, entries = load_suite(file)
    items = _on_cpu(loaded.name, expand_suite(entries), device)
    execute(
        items,
        _options(device, sheet, spec, warm, max_time, output, as_json, timeout),
        title=f"suite {loaded.name}",
        suite={"name": loaded.name, "file": str(suite_path(file))},
    )


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
