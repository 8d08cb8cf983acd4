"""What `roofline bench` runs: workloads expanded into items (one shape each), validated by their cost models.

Lists sweep (one item per combination); ``decode`` becomes the weight GEMMs of one decoder layer at M = batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from roofline.costs.models import get_model
from roofline.costs.params import BENCH_KINDS, bench_value
from roofline.costs.suite import expand
from roofline.errors import UsageError, WorkloadError


@dataclass(frozen=True)
class BenchItem:
    """One workload to run: a cost-model kind, its (scalar) parameters and the label rows show."""

    kind: str
    values: dict[str, Any]
    label: str
    source: str = ""
    name: str = ""  # the op within a larger workload (decode: 'qkv_proj'), '' for a plain workload
    notes: tuple[str, ...] = ()


def _canonical(dtype: Any) -> Any:
    from roofline.dtypes import canonical

    try:
        return canonical(dtype) if isinstance(dtype, str) else dtype
    except UsageError:
        return dtype  # the cost model names the problem


def _bench_defaults(kind: str, point: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The parameters as bench runs them: other names for a value resolved (roofline.costs.params: 'sdpa' is fused
    attention); fp8 GEMMs write bf16 unless told."""
    point = {key: bench_value(kind, key, value) for key, value in point.items()}
    notes: list[str] = []
    if kind == "gemm" and _canonical(point.get("dtype", "fp16")) == "fp8" and point.get("out_dtype") is None:
        point["out_dtype"] = "bf16"
        notes.append("fp8 GEMM (torch._scaled_mm) writes a bf16 C")
    return point, notes


def expand_items(kind: str, values: dict[str, Any], source: str = "") -> list[BenchItem]:
    """The items of workload ``kind`` (list values sweep), each validated by its cost model.

    ``decode`` becomes the weight GEMMs of one decoder layer at M = batch (GEMV-shaped for small batches).
    """
    if kind not in BENCH_KINDS:
        where = f"{source}: " if source else ""
        raise WorkloadError(
            f"{where}bench has no runner for workload kind {kind!r}: use one of {', '.join(BENCH_KINDS)}"
        )
    items: list[BenchItem] = []
    for point in expand({key: value for key, value in values.items() if value is not None}):
        point, notes = _bench_defaults(kind, point)
        if kind == "decode":
            items += _decode_items(point, source)
            continue
        params = get_model(kind).parse(point, source)
        items.append(BenchItem(kind, point, params.label(), source, notes=tuple(notes)))
    return items


def expand_suite(entries: Iterable[tuple[str, dict[str, Any], str]]) -> list[BenchItem]:
    """Items of a loaded suite's (kind, values, source) entries."""
    return [item for kind, values, source in entries for item in expand_items(kind, values, source)]


def decode_layer_gemms(config: Any) -> list[tuple[str, int, int]]:
    """(name, n, k) of the weight GEMMs of one decoder layer of ``config`` (a ModelConfig)."""
    hd, kv = config.dim_head, config.n_kv_heads
    shapes = [("qkv_proj", (config.heads + 2 * kv) * hd, config.hidden), ("o_proj", config.hidden, config.heads * hd)]
    if config.ffn_type == "gated":
        shapes.append(("gate_up_proj", 2 * config.ffn, config.hidden))
    else:
        shapes.append(("up_proj", config.ffn, config.hidden))
    shapes.append(("down_proj", config.hidden, config.ffn))
    return shapes


def _decode_items(point: dict[str, Any], source: str) -> list[BenchItem]:
    where = f"{source}: " if source else ""
    p = get_model("decode").parse(point, source)
    cfg = p.config
    if cfg is None:
        raise WorkloadError(
            f"{where}bench decode runs a model's weight GEMMs: give model (a name or YAML), or one weight "
            "GEMM with -n N -k K, not the napkin form (params, d_model)"
        )
    if p.weight_dtype != p.act_dtype:
        raise WorkloadError(
            f"{where}bench decode runs the weight GEMMs at {p.act_dtype}; weight-only {p.weight_dtype} has no "
            "built-in kernel: drop the weight dtype"
        )
    notes = [
        f"decode {cfg.name}: one layer's weight GEMMs at M = batch (GEMV-shaped); attention, norms, "
        "KV cache and LM head not run"
    ]
    if p.context:
        notes.append("context ignored: the weight GEMMs do not depend on it")
    if cfg.bias:
        notes.append("linear biases not run")
    return [
        _gemm_item(p.batch, n, k, p.act_dtype, source, name, f"decode {cfg.name} {name}", notes)
        for name, n, k in decode_layer_gemms(cfg)
    ]


def _gemm_item(
    m: int, n: int, k: int, dtype: str, source: str, name: str, prefix: str, notes: Sequence[str]
) -> BenchItem:
    values, extra = _bench_defaults("gemm", {"m": m, "n": n, "k": k, "dtype": dtype})
    params = get_model("gemm").parse(values, source)
    return BenchItem("gemm", values, f"{prefix} {params.label()}", source, name, (*notes, *extra))


def decode_gemm_items(batch: Any, n: Any, k: Any, dtype: Any) -> list[BenchItem]:
    """The one-weight-GEMM form of bench decode: y[batch, n] = x[batch, k] @ W[k, n] (lists sweep)."""
    items = []
    for point in expand({"batch": batch, "n": n, "k": k, "dtype": dtype}):
        note = "decode weight GEMM at M = batch (GEMV-shaped)"
        items.append(_gemm_item(point["batch"], point["n"], point["k"], point["dtype"], "", "weight", "decode", [note]))
    return items


# ----------------------------------------------------------------------------------------- suites on a CPU

#: the dtypes a CPU's roofs are measured at (roofline calibrate): rows at other dtypes are GPU rows
CPU_DTYPES = ("fp32", "fp64")
#: a suite whose rows are more than this share GPU rows is a GPU suite: refused on an explicit --device cpu
GPU_SUITE_SHARE = 0.5


def item_dtype(item: BenchItem) -> str:
    """The dtype an item runs at (decode: its activations')."""
    value = item.values.get("dtype", item.values.get("act_dtype", "fp32"))
    return str(_canonical(value)) if value is not None else "fp32"


@dataclass(frozen=True)
class CpuPlan:
    """What of a suite runs on a CPU: ``run`` (rows at CPU dtypes), ``gpu_rows`` (the others, not run there),
    ``line`` (the one line that says so; '' when every row runs) and ``refuse`` (most rows are GPU rows)."""

    run: list[BenchItem]
    gpu_rows: list[BenchItem]
    line: str
    refuse: bool


def cpu_plan(name: str, items: Sequence[BenchItem], cpu_suite: str = "bench-cpu") -> CpuPlan:
    """Split a suite's items for a CPU: rows at dtypes a CPU has measured roofs for run; the others (bf16, fp16,
    fp8, int8: GPU rows) do not, and one line says how many and suggests ``cpu_suite``. Pure."""
    run = [item for item in items if item_dtype(item) in CPU_DTYPES]
    gpu_rows = [item for item in items if item_dtype(item) not in CPU_DTYPES]
    if not gpu_rows:
        return CpuPlan(run, [], "", False)
    dtypes = ", ".join(dict.fromkeys(item_dtype(item) for item in gpu_rows))
    line = (
        f"suite {name} is for GPUs: {len(gpu_rows)} of {len(items)} rows cannot run on a CPU ({dtypes}; a CPU's "
        f"roofs are measured at {' and '.join(CPU_DTYPES)}): run `roofline bench {cpu_suite}` on a CPU"
    )
    return CpuPlan(run, gpu_rows, line, len(gpu_rows) > GPU_SUITE_SHARE * len(items))
