"""`roofline diagnose --counters` on the example models (run on a CUDA machine with ncu on PATH).

    python benchmarks/ncu_counters_gpu.py --out DIR [--size large|small] [--models a,b] [--timeout-s 540]

For every model in workloads/models (attention_naive, attention_sdpa, conv_nchw_bf16, decode_gemv, diag_matmul,
fp32_matmul, gelu_chain_unfused, kv_cache_cat, launch_bound_tiny_ops, layernorm_few_rows, mamba_scan_naive,
mlp_compute_bound, rmsnorm_written_out, rnn_loop, silu_written_out, softmax_written_out): bf16 (fp32_matmul in
fp32), 3 warm-up + 5 profiled iterations, then one iteration under Nsight Compute. Per model: kernel launches
matched to ops, measured / compulsory DRAM bytes over the matched ops (and the op with the largest ratio), the
share of ops whose counters' bound (the busier of SM and memory throughput) agrees with our roofline bound, the
locality findings, and the cache levels: L2 and L1 bytes (lts__t_bytes.sum, l1tex__t_bytes.sum) over the matched
ops, the ops that are L2-resident or whose L1 traffic dominates (L2 bytes under half their L1 bytes), and the op
with the most L1 traffic per L2 byte. Writes diag-NAME.json (the reports) and summary.json into DIR; prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "workloads" / "models"
DTYPE = {"fp32_matmul": "fp32"}  # every other model runs in bf16


def env(size: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "ROOFLINE_MODEL_SIZE": size, "COLUMNS": "160"}


def run_model(model: Path, out: Path, size: str, timeout_s: float) -> dict[str, Any]:
    report = out / f"diag-{model.stem}.json"
    cmd = [sys.executable, "-m", "roofline", "diagnose", str(model), "--counters", "--device", "cuda"]
    cmd += ["--dtype", DTYPE.get(model.stem, "bf16"), "--warmup", "3", "--iters", "5", "-o", str(report), "--force"]
    begin = time.perf_counter()
    try:
        done = subprocess.run(cmd, env=env(size), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"model": model.stem, "error": f"timed out after {timeout_s:g} s"}
    case: dict[str, Any] = {"model": model.stem, "wall_s": round(time.perf_counter() - begin, 1)}
    notes = [line for line in done.stderr.splitlines() if "--counters" in line]
    if done.returncode != 0 or not report.is_file():
        lines = done.stderr.strip().splitlines()
        return {**case, "error": lines[-1][:300] if lines else f"exit {done.returncode}"}
    data = json.loads(report.read_text())
    counters = data.get("counters")
    if counters is None:
        return {**case, "error": notes[0][:300] if notes else "no counters in the report"}
    ops = counters["ops"]
    measured = sum(o["dram_bytes"] for o in ops)
    compulsory = sum(o["compulsory_bytes"] for o in ops)
    judged = [o for o in ops if o["agree"] is not None]
    worst = max((o for o in ops if o["ratio"] is not None), key=lambda o: o["ratio"], default=None)
    heaviest = max(ops, key=lambda o: o["dram_bytes"], default=None)
    with_l1 = [o for o in ops if o.get("l1_bytes") is not None]
    l1_heavy = max((o for o in with_l1 if o.get("l2_bytes")), key=lambda o: o["l1_bytes"] / o["l2_bytes"], default=None)
    return {
        **case,
        "launches": counters["launches"],
        "matched_launches": counters["matched_launches"],
        "ops_with_counters": len(ops),
        "measured_dram_bytes": measured,
        "compulsory_bytes": compulsory,
        "measured_over_compulsory": measured / compulsory if compulsory else None,
        "bounds_judged": len(judged),
        "bounds_agree": sum(o["agree"] for o in judged),
        "agreement": counters["agreement"],
        "largest_ratio": None if worst is None else {k: worst[k] for k in ("op", "module", "ratio", "dram_bytes")},
        "most_traffic": None
        if heaviest is None
        else {
            k: heaviest[k]
            for k in ("op", "ratio", "counters_bound", "roofline_bound", "sm_pct", "memory_pct", "tensor_pct")
        },
        "l2_bytes": sum(o.get("l2_bytes") or 0 for o in ops),
        "l1_bytes": sum(o["l1_bytes"] for o in with_l1),
        "ops_with_l1": len(with_l1),
        "l2_resident_ops": [o["op"] for o in ops if o.get("l2_resident")],
        "l1_dominant_ops": [o["op"] for o in ops if o.get("l1_dominant")],
        "most_l1_per_l2": None
        if l1_heavy is None
        else {
            **{k: l1_heavy[k] for k in ("op", "module", "dram_bytes", "l2_bytes", "l1_bytes")},
            "l1_over_l2": l1_heavy["l1_bytes"] / l1_heavy["l2_bytes"],
        },
        "l1_evidence": [
            o.get("limiter_evidence", "")
            for o in data.get("rows", [])
            if "L1 traffic" in str(o.get("limiter_evidence", ""))
        ][:3],
        "locality_findings": [f["where"] for f in data.get("findings", []) if f["rule"] == "excess-dram-traffic"],
        "unmatched_kernels": counters["unmatched_kernels"][:5],
        "notes": counters["notes"],
    }


def row(case: dict[str, Any]) -> str:
    if "error" in case:
        return f"{case['model']:24} ERROR {case['error'][:110]}"
    ratio = case["measured_over_compulsory"]
    agreement = case["agreement"]
    return (
        f"{case['model']:24} launches {case['matched_launches']:4}/{case['launches']:<4} "
        f"ops {case['ops_with_counters']:4} "
        f"measured/compulsory {'-' if ratio is None else f'{ratio:6.3f}'}  bounds agree "
        f"{case['bounds_agree']}/{case['bounds_judged']} ({'-' if agreement is None else f'{100 * agreement:.0f}%'})  "
        f"locality {len(case['locality_findings'])}  L2 {case['l2_bytes'] / 1e6:.1f} MB  L1 "
        f"{case['l1_bytes'] / 1e6:.1f} MB ({case['ops_with_l1']} ops, {len(case['l1_dominant_ops'])} L1-dominant)  "
        f"{case['wall_s']} s"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--size", default="large", choices=("large", "small"))
    parser.add_argument("--models", default="", help="comma list of model names (default: all)")
    parser.add_argument("--timeout-s", type=float, default=540.0, help="per model")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    wanted = {m for m in args.models.split(",") if m}
    models = [m for m in sorted(MODELS.glob("*.py")) if not wanted or m.stem in wanted]
    cases = []
    for model in models:
        case = run_model(model, args.out, args.size, args.timeout_s)
        print(row(case), flush=True)
        cases.append(case)
    judged = sum(c.get("bounds_judged", 0) for c in cases)
    agree = sum(c.get("bounds_agree", 0) for c in cases)
    summary = {
        "size": args.size,
        "models": cases,
        "bounds_agree_total": f"{agree}/{judged}",
        "errors": [c["model"] for c in cases if "error" in c],
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"bounds agree on {agree}/{judged} ops; summary in {args.out / 'summary.json'}")
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
