"""`roofline analyze KIND`: napkin math for a workload on any device, no GPU needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from roofline.cli.common import (
    SWEEP,
    conv2d_values,
    json_option,
    print_text,
    sizes_value,
    spec_option,
    split_list,
    words_value,
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

app = typer.Typer(
    help=(
        "Napkin math for a workload on any device (no GPU needed): FLOPs, bytes, intensity, ridge, bound, "
        "attainable rate, minimum time, and the optimization that fits.\n\n"
        "A comma list on a size option sweeps it (one row per value; several lists: every combination). "
        "--device a,b,c compares devices side by side."
    ),
    no_args_is_help=True,
)


def _device() -> Any:
    return typer.Option(
        None,
        "--device",
        "-d",
        help=(
            "Spec-sheet name(s), or cpu (this CPU, measured roofs); comma list to compare "
            "(default: $ROOFLINE_DEVICE or this GPU)."
        ),
    )


def _output() -> Any:
    return typer.Option(None, "--output", "-o", help="Also write the report JSON here (read by plot and gate).")


def _roofs() -> Any:
    return typer.Option(
        "auto",
        "--roofs",
        help="spec (sheet), measured (this machine's `roofline calibrate` cache; error if none) or auto "
        "(measured when a calibration of that device is cached, else spec).",
    )


def _devices(device: str | None, spec: list[Path] | None, roofs: str = "auto") -> list:  # -> list[Device]
    from roofline.roofs import sheet_devices

    return sheet_devices(split_list(device, "--device") if device else None, spec_files=spec or [], roofs=roofs)


def _prepare(output: Path | None, spec: list[Path] | None, read: tuple[str, Any] = ("", None)) -> Path | None:
    """Before any work (--device cpu measures): check -o and --plot (roofline.cli.output.prepare_outputs).
    ``read``: the suite or model config file the command reads, if any."""
    inputs = [*(("a --spec sheet", path) for path in spec or [])]
    if isinstance(read[1], (str, Path)) and str(read[1]).endswith((".yaml", ".yml")):
        inputs.append(read)
    return prepare_outputs(output, "report", inputs=inputs)


def _emit(rows: list, devices: list, as_json: bool, output: Path | None, where: Path | None, title: str = "") -> None:
    """Render or print JSON, then write the report when -o is given (``where``: prepared)."""
    from roofline.report.schema import new_report

    report = new_report(command_line(), "analytic", devices, rows)
    if as_json:
        print_text(report.to_json())
    else:
        from roofline.render.analyze import AnalysisRenderer

        print_text(AnalysisRenderer(devices, title=title).render(rows))
    if output is not None and where is not None:
        save_report(report, where, output)
    write_requested_plot(report, output.stem if output is not None else "analyze")
    if output is not None and not as_json:
        info(f"Report written to {output}")


def run(
    kind: str,
    values: dict[str, Any],
    device: str | None,
    spec: list[Path] | None,
    as_json: bool,
    output: Path | None,
    roofs: str = "auto",
) -> None:
    from roofline.analysis import sweep
    from roofline.costs.suite import check_sweep, sweep_size

    where = _prepare(output, spec, ("the model config", values.get("model")))
    given = {key: value for key, value in values.items() if value is not None}
    check_sweep(sweep_size(given))  # NB: refused before the devices are read
    devices = _devices(device, spec, roofs)
    warning = check_sweep(sweep_size(given) * len(devices))
    if warning:
        info(warning)
    rows = sweep(kind, given, devices)
    _emit(rows, devices, as_json, output, where)


@app.command()
def gemm(
    m: str = typer.Option(..., "-m", help="Rows of A and C." + SWEEP),
    n: str = typer.Option(..., "-n", help="Columns of B and C." + SWEEP),
    k: str = typer.Option(..., "-k", help="Inner (reduction) dimension." + SWEEP),
    batch: str = typer.Option("1", "--batch", "-b", help="Batch of independent GEMMs (bmm)." + SWEEP),
    dtype: str = typer.Option("fp16", "--dtype", help="Operand dtype: fp64 fp32 fp16 bf16 fp8 int8." + SWEEP),
    out_dtype: str | None = typer.Option(None, "--out-dtype", help="Output dtype (default: --dtype)."),
    tf32: bool = typer.Option(False, "--tf32", help="fp32 matmul on TF32 tensor cores."),
    device: str | None = _device(),
    spec: list[Path] | None = spec_option(),
    roofs: str = _roofs(),
    as_json: bool = json_option(),
    output: Path | None = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
) -> None:
    """GEMM / batched GEMM: C = A @ B, 2*m*n*k FLOPs per batch entry."""
    values = {
        "m": sizes_value(m, "-m"),
        "n": sizes_value(n, "-n"),
        "k": sizes_value(k, "-k"),
        "batch": sizes_value(batch, "--batch"),
        "dtype": words_value(dtype, "--dtype"),
        "out_dtype": out_dtype,
        "tf32": tf32,
    }
    run("gemm", values, device, spec, as_json, output, roofs)


@app.command()
def attention(
    seq: str = typer.Option(..., "--seq", "-s", help="Query length (and key length unless --seq-kv)." + SWEEP),
    heads: str = typer.Option(..., "--heads", help="Query heads." + SWEEP),
    head_dim: str = typer.Option("128", "--head-dim", help="Head dimension." + SWEEP),
    kv_heads: str | None = typer.Option(None, "--kv-heads", help="Key/value heads (GQA/MQA; default --heads)." + SWEEP),
    seq_kv: str | None = typer.Option(None, "--seq-kv", help="Key/value length (default --seq)." + SWEEP),
    batch: str = typer.Option("1", "--batch", "-b", help="Batch size." + SWEEP),
    dtype: str = typer.Option("fp16", "--dtype", help="Q/K/V dtype." + SWEEP),
    causal: bool = typer.Option(False, "--causal", help="Causal mask (about half the FLOPs)."),
    impl: str = typer.Option(
        "fused", "--impl", help="fused (FlashAttention/SDPA) or naive (materialises S x S)." + SWEEP
    ),
    device: str | None = _device(),
    spec: list[Path] | None = spec_option(),
    roofs: str = _roofs(),
    as_json: bool = json_option(),
    output: Path | None = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
) -> None:
    """Attention softmax(QK^T)V, naive or fused, causal or not, MHA/GQA/MQA."""
    values = {
        "seq_q": sizes_value(seq, "--seq"),
        "seq_kv": sizes_value(seq_kv, "--seq-kv"),
        "heads": sizes_value(heads, "--heads"),
        "kv_heads": sizes_value(kv_heads, "--kv-heads"),
        "head_dim": sizes_value(head_dim, "--head-dim"),
        "batch": sizes_value(batch, "--batch"),
        "dtype": words_value(dtype, "--dtype"),
        "causal": causal,
        "impl": words_value(impl, "--impl"),
    }
    run("attention", values, device, spec, as_json, output, roofs)


def _llm(
    kind: str,
    values: dict[str, Any],
    device: str | None,
    spec: list[Path] | None,
    as_json: bool,
    output: Path | None,
    roofs: str,
) -> None:
    from roofline.errors import UsageError

    if (values["model"] is None) == (values["params"] is None):
        raise UsageError(
            "give either --model NAME|FILE.yaml, --config CONFIG.json or --params P (with --d-model) "
            "for the napkin form"
        )
    if values["model"] is None and values.get("kv_dtype") is not None and values.get("layers") is None:
        raise UsageError(
            "--kv-dtype in the napkin form needs the KV cache's shape: give --layers and --heads (--kv-heads for GQA)"
        )
    if values["model"] is not None:
        for key, option in (("layers", "--layers"), ("heads", "--heads"), ("kv_heads", "--kv-heads")):
            if values.get(key) is not None:
                raise UsageError(f"{option} is for the napkin form (--params): the model config has its own")
    run(kind, values, device, spec, as_json, output, roofs)


# Options shared by decode and prefill (typer needs them in each signature; the definitions live here once).
def _model() -> Any:
    return typer.Option(
        None,
        "--model",
        help="Model config: a shipped name (gpt2, llama-2-7b, llama-3-8b, llama-3-70b, mistral-7b) or a YAML file.",
    )


def _hf_config() -> Any:
    return typer.Option(
        None,
        "--config",
        help="A Hugging Face config.json (layers, hidden size, heads, KV heads, FFN width, vocab, tied embeddings, "
        "MoE experts and top-k), instead of --model.",
        metavar="CONFIG.json",
    )


def _model_or_config(model: str | None, config: Path | None) -> str | None:
    """--model, or --config's file (read by roofline.costs.hfconfig through the model loader)."""
    if config is None:
        return model
    from roofline.errors import UsageError

    if model is not None:
        raise UsageError("give --model or --config, not both")
    if config.suffix.lower() != ".json":
        raise UsageError(f"--config {config}: a Hugging Face config.json (a .json file)")
    return str(config)


def _params() -> Any:
    return typer.Option(None, "--params", help="Napkin form: parameter count, e.g. 8.75e9 (needs --d-model).")


def _d_model() -> Any:
    return typer.Option(None, "--d-model", help="Hidden width for the napkin form.")


def _act_dtype() -> Any:
    return typer.Option("fp16", "--dtype", help="Activation dtype (GEMMs run in it)." + SWEEP)


def _weight_dtype() -> Any:
    return typer.Option(None, "--weight-dtype", help="Weight dtype: int8/int4 = weight-only quantization." + SWEEP)


def _kv_dtype() -> Any:
    return typer.Option(None, "--kv-dtype", help="KV-cache dtype (default --dtype)." + SWEEP)


def _attention_impl() -> Any:
    return typer.Option("fused", "--attention", help="fused or naive." + SWEEP)


def _layers() -> Any:
    return typer.Option(None, "--layers", help="Napkin form: layers (KV cache, --tp all-reduces, launches)." + SWEEP)


def _heads() -> Any:
    return typer.Option(None, "--heads", help="Napkin form: query heads (head_dim = d_model / heads)." + SWEEP)


def _kv_heads() -> Any:
    return typer.Option(None, "--kv-heads", help="Napkin form: KV heads (GQA; default --heads)." + SWEEP)


def _tp() -> Any:
    return typer.Option(
        "1", "--tp", help="Tensor parallelism: weights and heads split N ways, 2 all-reduces per layer." + SWEEP
    )


def _kernels_per_layer() -> Any:
    return typer.Option(
        None,
        "--kernels-per-layer",
        help="Kernel launches per layer (default: as counted, 12 for a gated layer)." + SWEEP,
    )


def _launch_floor() -> Any:
    return typer.Option(None, "--launch-floor", help="Launch floor in us (default: the device's)." + SWEEP)


def _memory() -> Any:
    return typer.Option(
        None, "--memory", help="Memory budget per GPU, e.g. 80G or 75.6e9 bytes (default: the device's capacity)."
    )


def _numbers(text: str | None, option: str) -> Any:
    """A float option (microseconds): None, one number or a sweep."""
    from roofline.units import parse_sizes

    if text is None:
        return None
    values = parse_sizes(text, option, integer=False)
    return values if len(values) > 1 else values[0]


def _bytes(text: str | None, option: str) -> Any:
    """A byte count such as 80G, 80GB, 75.6e9: None or an int."""
    from roofline.units import parse_size

    if text is None:
        return None
    stripped = text.strip()
    if stripped[-1:] in ("B", "b"):
        stripped = stripped[:-1]
    return int(parse_size(stripped, option, integer=False))


def _serving_values(
    layers: str | None,
    heads: str | None,
    kv_heads: str | None,
    tp: str,
    kernels_per_layer: str | None,
    launch_floor: str | None,
    memory: str | None,
) -> dict[str, Any]:
    return {
        "layers": sizes_value(layers, "--layers"),
        "heads": sizes_value(heads, "--heads"),
        "kv_heads": sizes_value(kv_heads, "--kv-heads"),
        "tp": sizes_value(tp, "--tp"),
        "kernels_per_layer": sizes_value(kernels_per_layer, "--kernels-per-layer"),
        "launch_floor_us": _numbers(launch_floor, "--launch-floor"),
        "memory": _bytes(memory, "--memory"),
    }


def _llm_values(
    model: str | None,
    params: str | None,
    d_model: str | None,
    batch: str,
    dtype: str,
    weight_dtype: str | None,
    kv_dtype: str | None,
    attention_impl: str,
) -> dict[str, Any]:
    return {
        "model": model,
        "params": sizes_value(params, "--params"),
        "d_model": sizes_value(d_model, "--d-model"),
        "batch": sizes_value(batch, "--batch"),
        "act_dtype": words_value(dtype, "--dtype"),
        "weight_dtype": words_value(weight_dtype, "--weight-dtype"),
        "kv_dtype": words_value(kv_dtype, "--kv-dtype"),
        "attention": words_value(attention_impl, "--attention"),
    }


@app.command()
def decode(
    model: str | None = _model(),
    config: Path | None = _hf_config(),
    params: str | None = _params(),
    d_model: str | None = _d_model(),
    batch: str = typer.Option("1", "--batch", "-b", help="Concurrent sequences." + SWEEP),
    context: str | None = typer.Option(
        None, "--context", help="Tokens already in the KV cache of each sequence, at least 1 (default: none)." + SWEEP
    ),
    dtype: str = _act_dtype(),
    weight_dtype: str | None = _weight_dtype(),
    kv_dtype: str | None = _kv_dtype(),
    attention_impl: str = _attention_impl(),
    layers: str | None = _layers(),
    heads: str | None = _heads(),
    kv_heads: str | None = _kv_heads(),
    tp: str = _tp(),
    kernels_per_layer: str | None = _kernels_per_layer(),
    launch_floor: str | None = _launch_floor(),
    memory: str | None = _memory(),
    device: str | None = _device(),
    spec: list[Path] | None = spec_option(),
    roofs: str = _roofs(),
    as_json: bool = json_option(),
    output: Path | None = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
) -> None:
    """One LLM decode step (one new token per sequence): weights streamed once per step."""
    values = _llm_values(
        _model_or_config(model, config), params, d_model, batch, dtype, weight_dtype, kv_dtype, attention_impl
    )
    values["context"] = sizes_value(context, "--context")  # NB: 0 is refused; leave it out for an empty cache
    values |= _serving_values(layers, heads, kv_heads, tp, kernels_per_layer, launch_floor, memory)
    _llm("decode", values, device, spec, as_json, output, roofs)


@app.command()
def prefill(
    model: str | None = _model(),
    config: Path | None = _hf_config(),
    params: str | None = _params(),
    d_model: str | None = _d_model(),
    seq: str = typer.Option(..., "--seq", "-s", help="Prompt length in tokens." + SWEEP),
    batch: str = typer.Option("1", "--batch", "-b", help="Prompts processed together." + SWEEP),
    dtype: str = _act_dtype(),
    weight_dtype: str | None = _weight_dtype(),
    kv_dtype: str | None = _kv_dtype(),
    attention_impl: str = _attention_impl(),
    layers: str | None = _layers(),
    heads: str | None = _heads(),
    kv_heads: str | None = _kv_heads(),
    tp: str = _tp(),
    kernels_per_layer: str | None = _kernels_per_layer(),
    launch_floor: str | None = _launch_floor(),
    memory: str | None = _memory(),
    device: str | None = _device(),
    spec: list[Path] | None = spec_option(),
    roofs: str = _roofs(),
    as_json: bool = json_option(),
    output: Path | None = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
) -> None:
    """LLM prefill of a prompt: every prompt token through every layer, causal attention."""
    values = _llm_values(
        _model_or_config(model, config), params, d_model, batch, dtype, weight_dtype, kv_dtype, attention_impl
    )
    values["seq"] = sizes_value(seq, "--seq")
    values |= _serving_values(layers, heads, kv_heads, tp, kernels_per_layer, launch_floor, memory)
    _llm("prefill", values, device, spec, as_json, output, roofs)


@app.command()
def elementwise(
    op: str = typer.Option(
        ..., "--op", help="relu, gelu, gelu_tanh, silu, add, mul, ... (see docs/cost-models.md)." + SWEEP
    ),
    numel: str = typer.Option(..., "--numel", "-N", help="Elements, e.g. 16777216 or 4096x4096." + SWEEP),
    dtype: str = typer.Option("fp16", "--dtype", help="Element dtype." + SWEEP),
    device: str | None = _device(),
    spec: list[Path] | None = spec_option(),
    roofs: str = _roofs(),
    as_json: bool = json_option(),
    output: Path | None = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
) -> None:
    """An element-wise op: FLOPs per element from a table, each input read and the output written once."""
    values = {
        "op": words_value(op, "--op"),
        "numel": sizes_value(numel, "--numel"),
        "dtype": words_value(dtype, "--dtype"),
    }
    run("elementwise", values, device, spec, as_json, output, roofs)


@app.command()
def norm(
    op: str = typer.Option("layernorm", "--op", help="layernorm, rmsnorm or softmax." + SWEEP),
    rows: str = typer.Option(..., "--rows", help="Rows (tokens)." + SWEEP),
    cols: str = typer.Option(..., "--cols", help="Normalised width (hidden size)." + SWEEP),
    dtype: str = typer.Option("fp16", "--dtype", help="Element dtype." + SWEEP),
    affine: bool = typer.Option(True, "--affine/--no-affine", help="Learned weight (and bias for layernorm)."),
    device: str | None = _device(),
    spec: list[Path] | None = spec_option(),
    roofs: str = _roofs(),
    as_json: bool = json_option(),
    output: Path | None = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
) -> None:
    """Row-wise normalisations: layernorm, rmsnorm, softmax."""
    values = {
        "op": words_value(op, "--op"),
        "rows": sizes_value(rows, "--rows"),
        "cols": sizes_value(cols, "--cols"),
        "dtype": words_value(dtype, "--dtype"),
        "affine": affine,
    }
    run("norm", values, device, spec, as_json, output, roofs)


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
    dtype: str = typer.Option("fp16", "--dtype", help="Dtype." + SWEEP),
    tf32: bool = typer.Option(False, "--tf32", help="fp32 conv on TF32 tensor cores."),
    device: str | None = _device(),
    spec: list[Path] | None = spec_option(),
    roofs: str = _roofs(),
    as_json: bool = json_option(),
    output: Path | None = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
) -> None:
    """2-D convolution (NCHW): 2 * output elements * (Cin/groups) * kh * kw FLOPs."""
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
        words_value(dtype, "--dtype"),
        tf32,
    )
    run("conv2d", values, device, spec, as_json, output, roofs)


@app.command()
def suite(
    file: str = typer.Argument(..., help="A suite YAML, or the name of a shipped suite (transformer-ops)."),
    device: str | None = _device(),
    spec: list[Path] | None = spec_option(),
    roofs: str = _roofs(),
    as_json: bool = json_option(),
    output: Path | None = _output(),
    plot: Path | None = plot_option(),
    force: bool = force_option(),
) -> None:
    """Every workload of a suite file (kind + parameters per entry; list values sweep)."""
    from roofline.analysis import analyze_items
    from roofline.costs.suite import check_sweep, load_suite, suite_path

    loaded, items = load_suite(file)
    where = _prepare(output, spec, ("the suite file", suite_path(file)))
    devices = _devices(device, spec, roofs)
    warning = check_sweep(len(items) * len(devices))
    if warning:
        info(warning)
    _emit(analyze_items(items, devices), devices, as_json, output, where, title=f"suite {loaded.name}")


from roofline.cli.tile import tile  # noqa: E402  (its own module: registered here)

app.command("tile")(tile)
