"""GPU checks of `roofline diagnose` (run on a CUDA machine with ncu on PATH).

    python benchmarks/diagnose_gpu.py --out DIR

1. `roofline diagnose` on every example model in workloads/models (large sizes): the expected top finding.
2. Instrumentation: the timing pass's kernel time per iteration vs a plain CUDA-event timing of the same forward
   (within 3%), both paced alike (same rest and warm-up, alternating ABBA rounds).
3. `roofline diagnose benchmarks/models/gpt12.py --dtype bf16`: wall clock including warm-up (<= 30 s).
4. Nsight Compute on the GEMM-dominated and the element-wise model: our FLOPs and bytes per kernel type over
   ncu's tensor/FP FLOP counters and DRAM bytes.
Writes diag-*.json, ncu-*.csv and summary.json into DIR; prints a table of every check.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "workloads" / "models"
DTYPE = {"fp32_matmul": "fp32"}  # every other model runs in bf16
REST_S = 1.0  # idle before each block of the instrumentation check
WARMUP, ITERS, ROUNDS = 5, 20, 6


def env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "ROOFLINE_MODEL_SIZE": "large", "COLUMNS": "160"}


def expected(model: Path) -> str | None:
    match = re.search(r'^EXPECTED_FINDING\s*=\s*(None|"([^"]*)")', model.read_text(), re.M)
    return match.group(2) if match and match.group(2) else None


def diagnose(model: Path, out: Path, dtype: str) -> tuple[float, dict]:
    start = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "roofline",
            "diagnose",
            str(model),
            "--device",
            "cuda",
            "--dtype",
            dtype,
            "-o",
            str(out),
            "--json",
        ],
        env=env(),
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if result.returncode != 0:
        return wall, {"error": result.stderr.strip()[-1500:]}
    return wall, json.loads(result.stdout)


def _plain_iterations(step, iters: int) -> list[float]:
    """Per-iteration seconds of ``iters`` back-to-back calls, CUDA events between them (no sync inside the loop)."""
    import torch

    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    torch.cuda.synchronize()
    events[0].record()
    for i in range(iters):
        step()
        events[i + 1].record()
    events[-1].synchronize()
    return [a.elapsed_time(b) * 1e-3 for a, b in itertools.pairwise(events)]


def instrumentation(model: Path, dtype: str) -> dict:
    """The timing pass's GPU busy time per iteration against a plain CUDA-event timing of the same forward, with
    the GPU paced alike in both: each block starts from the same rest and the same warm-up, runs ITERS
    iterations, and the two kinds of block alternate (ABBA over ROUNDS rounds) so that drift in clocks and power
    (an H100 under its power cap runs back-to-back GEMMs slower than it starts them) falls on both equally.
    Both are means per iteration. Returns per-round ratios and their median."""
    import statistics

    import torch

    from roofline.diagnose.count import count_ops
    from roofline.diagnose.join import join, parse_events
    from roofline.diagnose.loader import load_model
    from roofline.diagnose.profile import _step, torch_profile

    os.environ["ROOFLINE_MODEL_SIZE"] = "large"
    loaded = load_model(model, device="cuda", dtype=dtype)
    records = count_ops(loaded.model, loaded.inputs, loaded.kwargs)
    step = _step(loaded.model, loaded.inputs, loaded.kwargs, "inference")

    def block(kind: str) -> float:
        torch.cuda.synchronize()
        time.sleep(REST_S)
        for _ in range(WARMUP):
            step()
        if kind == "plain":
            return statistics.fmean(_plain_iterations(step, ITERS))
        events, _ = torch_profile(step, ITERS, "cuda")
        parsed = parse_events(events)
        timing = join(records, parsed.ops, parsed.kernels, ITERS, launches=parsed.launches, device="cuda")
        return timing.gpu_busy_s  # the union of its kernels per iteration, mean over ITERS

    block("plain")  # first contact: lazy initialisation, autotuning, the profiler's own start-up
    block("profiled")
    rounds = []
    for r in range(ROUNDS):
        order = ("plain", "profiled") if r % 2 == 0 else ("profiled", "plain")
        result = {kind: block(kind) for kind in order}
        rounds.append({**result, "ratio": result["profiled"] / result["plain"]})
    return {"rounds": rounds, "ratio": statistics.median(r["ratio"] for r in rounds)}


KERNEL_CLASSES = (
    ("gemm", re.compile(r"gemm|xmma|cutlass|sm90|matmul|wgmma", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|gelu|relu|add|mul", re.I)),
)
NCU_METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp16_dst_fp32.sum",
    *(
        f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"
        for op in ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma")
    ),
]


def _metric(row: dict, key: str) -> float:
    return float(str(row.get(key, "0")).replace(",", "") or 0)


def kernel_class(name: str) -> str:
    return next((label for label, pattern in KERNEL_CLASSES if pattern.search(name)), "other")


def ncu_counts(model: Path, dtype: str, out_csv: Path) -> dict[str, dict[str, float]]:
    """ncu's FLOPs and DRAM bytes per kernel class for one forward inside the NVTX range 'roofline'."""
    driver = (
        "import os, torch\n"
        "from roofline.diagnose.loader import load_model\n"
        "from roofline.diagnose.execute import run_once\n"
        f"m = load_model({str(model)!r}, device='cuda', dtype={dtype!r})\n"
        "run_once(m.model, m.inputs, m.kwargs, 'inference'); torch.cuda.synchronize()\n"
        "torch.cuda.nvtx.range_push('roofline')\n"
        "run_once(m.model, m.inputs, m.kwargs, 'inference'); torch.cuda.synchronize()\n"
        "torch.cuda.nvtx.range_pop()\n"
    )
    cmd = [
        "ncu",
        "--csv",
        "--page",
        "raw",
        "--nvtx",
        "--nvtx-include",
        "roofline/",
        "--clock-control",
        "none",
        "--metrics",
        ",".join(NCU_METRICS),
        sys.executable,
        "-c",
        driver,
    ]
    result = subprocess.run(cmd, env=env(), capture_output=True, text=True)
    out_csv.write_text(result.stdout + "\n# stderr\n" + result.stderr[-3000:])
    lines = [line for line in result.stdout.splitlines() if line.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    classes: dict[str, dict[str, float]] = {}
    for row in rows[1:] if rows and rows[0].get("ID", "").strip() == "" else rows:  # skip the units row
        try:
            name = row["Kernel Name"]
            v = [_metric(row, key) for key in NCU_METRICS]
        except (KeyError, ValueError):
            continue
        # FMA counts 2 FLOPs; a half-precision instruction is packed (x2) -- measurement-facts.md
        fp = v[5] + v[6] + 2 * v[7] + 2 * (v[8] + v[9] + 2 * v[10])
        tensor = v[3] + v[4]
        entry = classes.setdefault(kernel_class(name), {"kernels": 0, "flops": 0.0, "bytes": 0.0})
        entry["kernels"] += 1
        entry["flops"] += tensor + fp
        entry["bytes"] += v[1] + v[2]
    return classes


def our_counts(model: Path, dtype: str) -> dict[str, dict[str, float]]:
    from roofline.diagnose.count import count_ops
    from roofline.diagnose.loader import load_model

    loaded = load_model(model, device="cuda", dtype=dtype)
    classes: dict[str, dict[str, float]] = {}
    for r in count_ops(loaded.model, loaded.inputs, loaded.kwargs):
        if not r.counted or r.math == "none" or not (r.flops or r.bytes):
            continue
        label = "gemm" if r.math == "tensor" else "elementwise" if r.math == "vector" else "other"
        entry = classes.setdefault(label, {"ops": 0, "flops": 0.0, "bytes": 0.0})
        entry["ops"] += 1
        entry["flops"] += r.flops or 0
        entry["bytes"] += r.bytes or 0
    return classes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--skip-ncu", action="store_true")
    parser.add_argument(
        "--only",
        choices=("models", "instrumentation", "gpt12", "ncu"),
        action="append",
        help="run only these checks (repeatable; default: all)",
    )
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    checks: list[tuple[str, str, bool]] = []
    details: dict = {"models": {}, "instrumentation": {}, "ncu": {}}

    only = set(args.only or ("models", "instrumentation", "gpt12", "ncu"))
    for model in sorted(MODELS.glob("*.py")) if "models" in only else []:
        dtype = DTYPE.get(model.stem, "bf16")
        wall, doc = diagnose(model, out / f"diag-{model.stem}.json", dtype)
        findings = doc.get("findings", []) if "error" not in doc else []
        top = findings[0]["rule"] if findings else None
        want = expected(model)
        ok = "error" not in doc and (top == want if want else all(f["rule"] != "naive-attention" for f in findings))
        shown = doc.get("error", f"top {top!r} (expected {want!r}), {wall:.1f} s")
        checks.append((f"diagnose {model.stem} ({dtype})", shown, ok))
        details["models"][model.stem] = {"expected": want, "findings": [f["rule"] for f in findings], "wall_s": wall}

    for stem in ("mlp_compute_bound", "gelu_chain_unfused") if "instrumentation" in only else ():
        result = instrumentation(MODELS / f"{stem}.py", "bf16")
        rounds = ", ".join(f"{r['ratio']:.3f}" for r in result["rounds"])
        checks.append(
            (
                f"timing pass vs plain CUDA events ({stem}) within 3%",
                f"median ratio {result['ratio']:.3f} over {ROUNDS} ABBA rounds ({rounds})",
                abs(result["ratio"] - 1) <= 0.03,
            )
        )
        details["instrumentation"][stem] = result

    if "gpt12" in only:
        wall, doc = diagnose(ROOT / "benchmarks" / "models" / "gpt12.py", out / "diag-gpt12.json", "bf16")
        checks.append(
            ("diagnose gpt12 (bf16) wall <= 30 s", doc.get("error", f"{wall:.1f} s"), "error" not in doc and wall <= 30)
        )
        details["gpt12_wall_s"] = wall

    if "ncu" not in only:
        pass
    elif not args.skip_ncu and shutil.which("ncu"):
        for stem in ("mlp_compute_bound", "gelu_chain_unfused"):
            model = MODELS / f"{stem}.py"
            theirs = ncu_counts(model, "bf16", out / f"ncu-{stem}.csv")
            ours = our_counts(model, "bf16")
            details["ncu"][stem] = {"ours": ours, "ncu": theirs}
            for label in sorted(set(ours) & set(theirs)):
                o, t = ours[label], theirs[label]
                fr = o["flops"] / t["flops"] if t["flops"] else float("nan")
                br = o["bytes"] / t["bytes"] if t["bytes"] else float("nan")
                checks.append(
                    (
                        f"ncu {stem} {label}: ours/ncu FLOPs, bytes",
                        f"{fr:.3f}, {br:.3f} ({int(t['kernels'])} kernels)",
                        True,
                    )
                )
    else:
        checks.append(("ncu", "skipped (no ncu on PATH or --skip-ncu)", False))

    details["checks"] = [{"check": c, "value": v, "pass": ok} for c, v, ok in checks]
    (out / "summary.json").write_text(json.dumps(details, indent=2, default=str) + "\n")
    for check, value, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {check:<60} {value}")
    return 0 if all(ok for _, _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
