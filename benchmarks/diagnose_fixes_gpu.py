"""Does the diagnosis hold up? Diagnose every example model, apply the fix its top finding names where the fix is
mechanical, measure the gain beside the bound the finding claimed, and ask Nsight Compute whether our bound class
of the dominant kernel agrees with its Speed Of Light section.

    python benchmarks/diagnose_fixes_gpu.py --out DIR               # on a CUDA machine, ncu on PATH
    python benchmarks/diagnose_fixes_gpu.py --out DIR --device cpu --no-ncu --size small   # the logic, on a CPU

Per case (a model file in workloads/models, with EXPECTED_FINDING, and the fix in FIXES below):
1. `roofline diagnose MODEL --device D --dtype T -o DIR/diag-NAME.json`: the top finding (expected?), the bound
   the findings claim for the whole forward (the report's combined bound, each op counted once; the top finding's
   alone: iteration time / (iteration time - its saving)), the dominant group of identical ops and its limiter;
2. the fix (torch.compile, CUDA graphs, channels_last, the fused op or static cache of the file's ModelFixed, TF32,
   SDPA) timed beside the model in this process (CUDA events around the forward, median of ROUNDS alternating
   rounds): measured speedup; the check: measured <= bound x (1 + NOISE);
3. ncu --section SpeedOfLight on the dominant op's longest kernel: SM and memory throughput (% of peak); its class
   (compute when SM >= SOL_HIGH, memory when memory >= SOL_HIGH, else neither) against our limiter (compute,
   memory; parallelism, latency, launch, host and layout count as neither).
Writes diag-*.json, ncu-*.csv and summary.json into DIR and prints a table.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "workloads" / "models"
NOISE = 0.10  # a measured speedup may exceed the bound by run-to-run noise alone
SOL_HIGH = 60.0  # % of peak: Nsight Compute's "high" throughput
WARMUP, ROUNDS, CALLS = 3, 7, 5

# model -> (dtype on the GPU, fix): compile | graphs | channels_last | fixed (the file's ModelFixed) | tf32 |
# file:NAME (that file's Model) | none (no mechanical fix: the bound is recorded, not measured)
FIXES: dict[str, tuple[str, str]] = {
    "gelu_chain_unfused": ("bf16", "compile"),
    "launch_bound_tiny_ops": ("bf16", "graphs"),
    "attention_naive": ("bf16", "file:attention_sdpa"),
    "attention_sdpa": ("bf16", "none"),
    "fp32_matmul": ("fp32", "tf32"),
    "decode_gemv": ("bf16", "none"),
    "mlp_compute_bound": ("bf16", "none"),
    "rnn_loop": ("bf16", "none"),
    "mamba_scan_naive": ("fp32", "none"),
    "conv_nchw_bf16": ("bf16", "channels_last"),
    "diag_matmul": ("bf16", "fixed"),
    "kv_cache_cat": ("bf16", "fixed"),
    "rmsnorm_written_out": ("bf16", "fixed"),
    "silu_written_out": ("bf16", "fixed"),
    "softmax_written_out": ("bf16", "fixed"),
    "layernorm_few_rows": ("fp32", "compile"),
}
# fix -> (roofline.diagnose.verify's technique, what it is)
MECHANICAL = {
    "compile": ("compile", "torch.compile"),
    "graphs": ("reduce-overhead", "torch.compile(mode='reduce-overhead')"),
    "channels_last": ("channels_last", "channels_last"),
    "tf32": ("tf32", "TF32 (torch.backends.cuda.matmul.allow_tf32)"),
}


def env(size: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "ROOFLINE_MODEL_SIZE": size, "COLUMNS": "160"}


def expected(model: Path) -> str | None:
    match = re.search(r'^EXPECTED_FINDING\s*=\s*(None|"([^"]*)")', model.read_text(), re.M)
    return match.group(2) if match and match.group(2) else None


# ------------------------------------------------------------------------------------------------ 1. diagnose


def diagnose(model: Path, out: Path, dtype: str, device: str, size: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "roofline", "-q", "diagnose", str(model), "--device", device, "--dtype", dtype]
    cmd += ["-o", str(out), "--force"]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env(size), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1], "seconds": time.perf_counter() - start}
    report = json.loads(out.read_text())
    summary = report["summary"]
    iteration = max(summary.get("op_time_s") or 0.0, summary.get("wall_s") or 0.0)
    findings = report.get("findings") or []
    top = findings[0] if findings else None
    saving = top.get("saving_s", 0.0) if top else 0.0
    bound_top = iteration / (iteration - saving) if top and iteration > saving > 0 else None
    combined = report.get("combined") or {}
    bound = combined.get("gain") or bound_top  # every finding together, each op once: the model's bound
    rows = [r for r in report["rows"] if r.get("timed")]
    groups: dict[Any, list[dict[str, Any]]] = {}  # identical ops (op, shapes) together: a loop's small ops count
    for r in rows:
        groups.setdefault((r.get("op"), json.dumps(r.get("input_shapes"))), []).append(r)
    top_group = max(groups.values(), key=lambda g: sum(r.get("time_s", 0.0) for r in g)) if groups else None
    dominant = max(top_group, key=lambda r: r.get("time_s", 0.0)) if top_group else None
    group_time = sum(r.get("time_s", 0.0) for r in top_group) if top_group else 0.0
    kernel = ""
    if dominant and dominant.get("kernel_facts"):
        kernel = max(dominant["kernel_facts"], key=lambda k: k.get("time_s", 0.0)).get("name", "")
    return {
        "seconds": time.perf_counter() - start,
        "top": top["rule"] if top else None,
        "rules": [f["rule"] for f in findings],
        "top_gain": top.get("gain") if top else None,
        "bound": bound,
        "bound_top": bound_top,
        "iteration_s": iteration,
        "dominant": {
            "op": dominant.get("op") if dominant else None,
            "share": group_time / iteration if iteration else None,
            "count": len(top_group) if top_group else 0,
            "limiter": (dominant.get("limiter") or dominant.get("bound")) if dominant else None,
            "evidence": dominant.get("limiter_evidence", "") if dominant else "",
            "efficiency": dominant.get("efficiency") if dominant else None,
            "kernel": kernel,
        },
    }


# ------------------------------------------------------------------------------------------------ 2. the fix


def load(model: Path, size: str) -> Any:
    os.environ["ROOFLINE_MODEL_SIZE"] = size
    spec = importlib.util.spec_from_file_location(f"case_{model.stem}", model)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    argv, sys.argv = sys.argv, [str(model)]
    try:
        spec.loader.exec_module(module)
    finally:
        sys.argv = argv
    return module


def _to(value: Any, device: str, dtype: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        value = value.to(device)
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device, dtype) for v in value)
    return value


def build(model: Path, fix: str, device: str, dtype_name: str, size: str) -> tuple[Any, Any, tuple, tuple, str]:
    """(model, fixed model, inputs, fixed inputs, what the fix is)."""
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype_name]
    module = load(model, size)
    torch.manual_seed(0)
    base = module.Model(*module.get_init_inputs()).to(device=device, dtype=dtype).eval()
    inputs = _to(tuple(module.get_inputs()), device, dtype)
    fixed_inputs = inputs
    if fix in MECHANICAL:  # the technique exactly as `roofline diagnose --verify` applies it
        import copy

        from roofline.diagnose.verify import TECHNIQUES

        fixed, fixed_inputs, _ = TECHNIQUES[MECHANICAL[fix][0]](copy.deepcopy(base), inputs, {}, device)
        what = MECHANICAL[fix][1]
    elif fix == "fixed":
        fixed = module.ModelFixed(*module.get_init_inputs()).to(device=device, dtype=dtype).eval()
        fixed.load_state_dict(base.state_dict(), strict=False)
        what = (module.ModelFixed.__doc__ or "ModelFixed").split(":")[-1].strip().split("\n")[0]
    elif fix.startswith("file:"):
        other = load(MODELS / f"{fix[5:]}.py", size)
        fixed = other.Model(*other.get_init_inputs()).to(device=device, dtype=dtype).eval()
        fixed.load_state_dict(base.state_dict(), strict=False)
        what = f"{fix[5:]}.py"
    else:
        raise ValueError(fix)
    return base, fixed, inputs, fixed_inputs, what


def _timer(device: str) -> Any:
    import torch

    if device.startswith("cuda"):

        def run(fn: Any) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(CALLS):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / CALLS

        return run

    def run_cpu(fn: Any) -> float:
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        return (time.perf_counter() - start) / CALLS

    return run_cpu


def measure_fix(model: Path, fix: str, device: str, dtype: str, size: str) -> dict[str, Any]:
    import torch

    base, fixed, inputs, fixed_inputs, what = build(model, fix, device, dtype, size)
    timer = _timer(device)

    def a() -> Any:
        return base(*inputs)

    def b() -> Any:
        return fixed(*fixed_inputs)

    with torch.no_grad():
        for _ in range(WARMUP):
            a(), b()
        before, after = [], []
        for i in range(ROUNDS):  # ABBA: neither side always runs on a warmer GPU
            for side in ((a, before), (b, after)) if i % 2 == 0 else ((b, after), (a, before)):
                side[1].append(timer(side[0]))
    t0, t1 = median(before), median(after)
    return {"fix": what, "before_s": t0, "after_s": t1, "speedup": t0 / t1 if t1 > 0 else None}


# ------------------------------------------------------------------------------------------------ 3. ncu


RUNNER = """
import importlib.util, os, sys, torch
sys.path.insert(0, {root!r})
from benchmarks.diagnose_fixes_gpu import build
base, _, inputs, _, _ = build(__import__('pathlib').Path({model!r}), 'tf32', 'cuda', {dtype!r}, {size!r})
with torch.no_grad():
    for _ in range(3):
        base(*inputs)
    torch.cuda.synchronize()
"""


def kernel_base_name(name: str) -> str:
    """ncu's default kernel-name base ('function'): the demangled name without return type, namespace, templates or
    parameters: 'void at::native::vectorized_elementwise_kernel<4, ...>(...)' -> 'vectorized_elementwise_kernel'."""
    text = re.sub(r"^void\s+", "", name.strip()).replace("(anonymous namespace)::", "")
    depth, cut = 0, len(text)
    for i, ch in enumerate(text):  # the first '<' or '(' at depth 0 ends the qualified name
        if ch in "<(" and depth == 0:
            cut = i
            break
    return text[:cut].split("::")[-1].strip()


def parse_sol(text: str) -> dict[str, float]:
    """SpeedOfLight metrics (%) from `ncu --csv` (details page): the first kernel's."""
    return parse_metrics(text, percent_only=True)


def parse_metrics(text: str, *, percent_only: bool = False) -> dict[str, float]:
    """Metric values from `ncu --csv` (details page), the first kernel's: numbers only (percentages only with
    ``percent_only``), as ncu prints them (no unit conversion)."""
    start = text.find('"ID"')
    rows = list(csv.DictReader(io.StringIO(text[start:]))) if start >= 0 else []
    values: dict[str, float] = {}
    for row in rows:
        name, unit = row.get("Metric Name", ""), row.get("Metric Unit", "")
        if (percent_only and unit != "%") or name in values:
            continue
        try:
            values[name] = float(row.get("Metric Value", "").replace(",", ""))
        except ValueError:
            continue
    return values


#: seconds per unit of ncu's duration metrics
DURATION_UNITS = {"nsecond": 1e-9, "ns": 1e-9, "usecond": 1e-6, "us": 1e-6, "msecond": 1e-3, "ms": 1e-3, "second": 1.0}


def parse_sol_launches(text: str) -> list[dict[str, float]]:
    """SpeedOfLight metrics (%) of every profiled launch in `ncu --csv` (details page), in ID order; each with its
    'Duration' in seconds where the section gives it."""
    start = text.find('"ID"')
    launches: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO(text[start:])) if start >= 0 else []:
        values = launches.setdefault(row.get("ID", ""), {})
        name, unit = row.get("Metric Name", ""), row.get("Metric Unit", "")
        try:
            value = float(row.get("Metric Value", "").replace(",", ""))
        except ValueError:
            continue
        if unit == "%" and name not in values:
            values[name] = value
        elif name == "Duration" and unit in DURATION_UNITS:
            values["Duration"] = value * DURATION_UNITS[unit]
    return [v for v in launches.values() if v]


def sol_class(values: dict[str, float]) -> str | None:
    """compute | memory | both (each at least SOL_HIGH: either of ours agrees) | neither."""
    sm = values.get("Compute (SM) Throughput")
    memory = max(values.get("Memory Throughput", 0.0), values.get("DRAM Throughput", 0.0))
    if sm is None:
        return None
    if sm >= SOL_HIGH and memory >= SOL_HIGH:
        return "both"
    if sm >= SOL_HIGH:
        return "compute"
    if memory >= SOL_HIGH:
        return "memory"
    return "neither"


def agrees(ncu_class: str, ours: str) -> bool:
    return ncu_class == ours or (ncu_class == "both" and ours in ("compute", "memory"))


def ours_class(limiter: str | None, kernel: str = "") -> str | None:
    """Our class of the dominant kernel: roofline.findings.bounds.hardware_class of the op's limiter."""
    from roofline.findings.bounds import hardware_class

    return hardware_class(limiter, [kernel] if kernel else [])


def run_ncu(model: Path, kernel: str, dtype: str, size: str, out: Path) -> dict[str, Any]:
    ncu = shutil.which("ncu")
    if ncu is None or not kernel:
        return {"skipped": "no ncu" if ncu is None else "no kernel name"}
    base = kernel_base_name(kernel)
    script = out.with_suffix(".py")
    script.write_text(RUNNER.format(root=str(ROOT), model=str(model), dtype=dtype, size=size))
    cmd = [ncu, "--clock-control", "none", "--section", "SpeedOfLight", "--csv", "-k", f"regex:^{re.escape(base)}$"]
    cmd += ["--launch-skip", "1", "--launch-count", "1", sys.executable, str(script)]
    done = subprocess.run(cmd, env=env(size), capture_output=True, text=True, timeout=600)
    out.write_text(done.stdout)
    values = parse_sol(done.stdout)
    if not values:
        return {"kernel": base, "error": (done.stderr.strip().splitlines() or ["no metrics"])[-1][:200]}
    return {"kernel": base, "sol": values, "class": sol_class(values)}


# ------------------------------------------------------------------------------------------------ main


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", default=None, help="small | large (default: large on CUDA, small on the CPU)")
    parser.add_argument("--cases", default="", help="comma list of model names (default: all in FIXES)")
    parser.add_argument("--no-ncu", action="store_true")
    parser.add_argument("--no-fix", action="store_true")
    args = parser.parse_args(argv)
    size = args.size or ("large" if args.device.startswith("cuda") else "small")
    args.out.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.cases.split(",") if n] or list(FIXES)
    results = []
    for name in names:
        model = MODELS / f"{name}.py"
        dtype, fix = FIXES[name]
        if not args.device.startswith("cuda"):
            dtype = "fp32"
        case: dict[str, Any] = {"case": name, "expected": expected(model), "dtype": dtype}
        case["diagnose"] = diagnose(model, args.out / f"diag-{name}.json", dtype, args.device, size)
        d = case["diagnose"]
        case["top_ok"] = d.get("top") == case["expected"] if case["expected"] else None
        if fix != "none" and not args.no_fix and "error" not in d:
            try:
                case["measured"] = measure_fix(model, fix, args.device, dtype, size)
            except Exception as exc:  # a fix that does not run here (e.g. torch.compile without a compiler)
                case["measured"] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            m = case["measured"]
            if m.get("speedup") and d.get("bound"):
                case["bound_holds"] = m["speedup"] <= d["bound"] * (1 + NOISE)
        if not args.no_ncu and args.device.startswith("cuda") and "error" not in d:
            ncu = run_ncu(model, d["dominant"]["kernel"], dtype, size, args.out / f"ncu-{name}.csv")
            case["ncu"] = ncu
            ours = ours_class(d["dominant"]["limiter"], d["dominant"].get("kernel") or "")
            if ncu.get("class") and ours:
                case["class_agrees"] = agrees(ncu["class"], ours)
        results.append(case)
        print(line(case), flush=True)
        summary = summarise(results)  # after every case: a run cut short keeps what it measured
        (args.out / "summary.json").write_text(json.dumps({"cases": results, "summary": summary}, indent=2) + "\n")
    print(json.dumps(summarise(results), indent=2))
    return 0


def line(case: dict[str, Any]) -> str:
    d = case["diagnose"]
    if "error" in d:
        return f"{case['case']:24} diagnose failed: {d['error']}"
    m = case.get("measured", {})
    n = case.get("ncu", {})
    bound = f"{d['bound']:.2f}x" if d.get("bound") else "-"
    measured = f"{m['speedup']:.2f}x" if m.get("speedup") else (m.get("error", "-")[:30] if m else "-")
    sol = n.get("sol", {})
    nan = float("nan")
    sm, mem = sol.get("Compute (SM) Throughput", nan), sol.get("Memory Throughput", nan)
    ncu = f"SM {sm:.0f}% mem {mem:.0f}%" if sol else n.get("error", n.get("skipped", "-"))[:30]
    return (
        f"{case['case']:24} top {d.get('top')!s:24} expected {case['expected']!s:22} ok={case['top_ok']!s:5} "
        f"bound {bound:>7} measured {measured:>7} holds={case.get('bound_holds')!s:5} "
        f"limiter {d['dominant']['limiter']!s:11} ncu {ncu} agrees={case.get('class_agrees')}"
    )


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    def count(key: str) -> tuple[int, int]:
        values = [r[key] for r in results if r.get(key) is not None]
        return sum(values), len(values)

    top, class_, holds = count("top_ok"), count("class_agrees"), count("bound_holds")
    return {
        "cases": len(results),
        "top_finding_as_expected": f"{top[0]}/{top[1]}",
        "bound_holds": f"{holds[0]}/{holds[1]}",
        "bound_class_agrees_with_ncu": f"{class_[0]}/{class_[1]}",
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
