"""How long `roofline diagnose` takes, and where the time goes (issue 15, item 1), on a CUDA machine.

    python benchmarks/diagnose_speed_gpu.py --out DIR [--budget-s 540] [--only NAME,...]

Each case runs as a fresh process, as a user starts it: `python -m roofline diagnose FILE --device cuda --dtype
D -o DIR/diag-NAME.json` (default --warmup/--iters: auto). Cases, in this order (the targets first, so that the
time bound cuts the least important ones):
1. benchmarks/models/gpt2_hf.py (transformers GPT-2 small, prefill 8 x 1024, bf16; skipped when transformers is
   missing) and benchmarks/models/gpt12.py (bf16);
2. a few single-op files written into DIR/ops (one GEMM, a softmax, a layer norm, an add);
3. every example model in workloads/models (ROOFLINE_MODEL_SIZE=large; the dtype benchmarks/diagnose_fixes_gpu.py's
   FIXES gives it).
Per case: the wall time of the process, the report's stage timings (`diagnose.stages`) and fixed floor
(`diagnose.floor_s`: Python start, torch import, CUDA initialisation), the warm-up and profiled iterations run.
Targets (H100): a single-kernel problem (the median over the single-op files and the example models) at most
5 s; GPT-2 small prefill at most 8 s. The whole run stays within --budget-s (default 540 s: 9 minutes); a case
that cannot start within it is listed as skipped. Prints a table and writes DIR/summary.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.fileio import atomic_write_text  # noqa: E402

MODELS = ROOT / "workloads" / "models"
SINGLE_TARGET_S = 5.0  # the median single-kernel problem
GPT2_TARGET_S = 8.0  # GPT-2 small prefill, batch 8 x 1024, bf16
CASE_LIMIT_S = 150.0  # one case at most (a hung run must not take the whole budget)
MIN_START_S = 20.0  # a case starts only with this much of the budget left

# single-op files: name -> (forward's arguments, get_inputs()'s tensors, what forward returns)
OPS: dict[str, tuple[str, str, str]] = {
    "op_gemm_8192": ("a, b", "torch.randn(8192, 8192), torch.randn(8192, 8192)", "torch.matmul(a, b)"),
    "op_softmax": ("a", "torch.randn(8192, 16384),", "torch.softmax(a, dim=-1)"),
    "op_layernorm": ("a", "torch.randn(16384, 8192),", "torch.nn.functional.layer_norm(a, a.shape[-1:])"),
    "op_add": ("a, b", "torch.randn(1 << 28), torch.randn(1 << 28)", "a + b"),
}


def single_op_file(folder: Path, name: str) -> Path:
    args, inputs, expression = OPS[name]
    path = folder / f"{name}.py"
    path.write_text(
        f'"""One op for the diagnose-speed benchmark: {expression}."""\n\n'
        "import torch\n\n\n"
        "class Model(torch.nn.Module):\n"
        f"    def forward(self, {args}):\n"
        f"        return {expression}\n\n\n"
        "def get_inputs():\n"
        f"    return ({inputs})\n",
        encoding="utf-8",
    )
    return path


def fixes() -> dict[str, tuple[str, str]]:
    """FIXES of benchmarks/diagnose_fixes_gpu.py: model -> (dtype on the GPU, fix)."""
    spec = importlib.util.spec_from_file_location("diagnose_fixes_gpu", ROOT / "benchmarks" / "diagnose_fixes_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.FIXES)


def cases(folder: Path) -> list[dict[str, Any]]:
    """(name, file, dtype, kind, target) in the order they run."""
    out: list[dict[str, Any]] = []
    if importlib.util.find_spec("transformers") is not None:
        out.append({"name": "gpt2_hf", "file": ROOT / "benchmarks/models/gpt2_hf.py", "dtype": "bf16", "kind": "gpt2"})
    else:
        out.append({"name": "gpt2_hf", "file": None, "dtype": "bf16", "kind": "gpt2", "skip": "no transformers"})
    out.append({"name": "gpt12", "file": ROOT / "benchmarks/models/gpt12.py", "dtype": "bf16", "kind": "model"})
    ops = folder / "ops"
    ops.mkdir(parents=True, exist_ok=True)
    out += [{"name": name, "file": single_op_file(ops, name), "dtype": "bf16", "kind": "single"} for name in OPS]
    dtypes = fixes()
    for path in sorted(MODELS.glob("*.py")):
        dtype = dtypes.get(path.stem, ("bf16", ""))[0]
        out.append({"name": path.stem, "file": path, "dtype": dtype, "kind": "single"})
    for case in out:
        case["target_s"] = {"gpt2": GPT2_TARGET_S, "single": SINGLE_TARGET_S}.get(case["kind"])
    return out


def run_case(case: dict[str, Any], folder: Path, limit_s: float, device: str, size: str) -> dict[str, Any]:
    report = folder / f"diag-{case['name']}.json"
    command = [sys.executable, "-m", "roofline", "diagnose", str(case["file"]), "--device", device]
    command += ["--dtype", case["dtype"], "-o", str(report), "--force"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env |= {"ROOFLINE_MODEL_SIZE": size, "COLUMNS": "160"}
    row: dict[str, Any] = {"model": case["name"], "dtype": case["dtype"], "kind": case["kind"]}
    row["target_s"] = case["target_s"]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return {**row, "wall_s": time.perf_counter() - start, "error": f"timed out after {limit_s:.0f} s"}
    row["wall_s"] = time.perf_counter() - start
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return {**row, "error": f"exit {done.returncode}: {lines[-1] if lines else ''}"}
    about = json.loads(report.read_text())["diagnose"]
    summary = [line for line in done.stderr.splitlines() if line.startswith("diagnose took ")]
    return {
        **row,
        "floor_s": about.get("floor_s"),
        "stages": about.get("stages", {}),
        "warmup": about.get("warmup"),
        "iters": about.get("iters"),
        "summary_line": summary[-1] if summary else "",
    }


def stages_text(stages: dict[str, float]) -> str:
    skip = {"python", "torch_import", "cuda_init"}
    return " ".join(f"{name} {value:.2f}" for name, value in stages.items() if name not in skip)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the reports and summary.json")
    parser.add_argument("--budget-s", type=float, default=540.0, help="the whole run's time bound (seconds)")
    parser.add_argument("--device", default="cuda", help="cuda (the targets) or cpu (a check of the script)")
    parser.add_argument("--size", default="large", help="ROOFLINE_MODEL_SIZE of the example models")
    parser.add_argument("--only", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    chosen = {name.strip() for name in args.only.split(",") if name.strip()}
    rows: list[dict[str, Any]] = []
    for case in cases(args.out):
        if chosen and case["name"] not in chosen:
            continue
        left = args.budget_s - (time.perf_counter() - began)
        base = {"model": case["name"], "dtype": case["dtype"], "kind": case["kind"], "target_s": case["target_s"]}
        if case.get("skip"):
            rows.append({**base, "skipped": case["skip"]})
        elif left < MIN_START_S:
            rows.append({**base, "skipped": "time budget"})
        else:
            rows.append(run_case(case, args.out, min(CASE_LIMIT_S, left), args.device, args.size))
        row = rows[-1]
        if row.get("target_s") is not None and "wall_s" in row and "error" not in row:
            row["pass"] = row["wall_s"] <= row["target_s"]
        print(f"{row['model']}: {row.get('summary_line') or row.get('error') or row.get('skipped')}", flush=True)

    print()
    print(f"{'model':<24} {'dtype':<5} {'wall s':>7} {'floor s':>7} {'w+i':>5} {'target':>6} {'pass':>5}  stages (s)")
    for row in rows:
        wall = f"{row['wall_s']:.2f}" if "wall_s" in row else "-"
        floor = f"{row['floor_s']:.2f}" if row.get("floor_s") is not None else "-"
        counts = f"{row['warmup']}+{row['iters']}" if row.get("iters") is not None else "-"
        target = f"{row['target_s']:.0f}" if row.get("target_s") is not None else "-"
        verdict = {True: "yes", False: "NO"}.get(row.get("pass"), "-")  # type: ignore[arg-type]
        detail = row.get("error") or row.get("skipped") or stages_text(row.get("stages", {}))
        print(
            f"{row['model']:<24} {row['dtype']:<5} {wall:>7} {floor:>7} {counts:>5} {target:>6} {verdict:>5}  {detail}"
        )

    singles = [r["wall_s"] for r in rows if r["kind"] == "single" and "wall_s" in r and "error" not in r]
    single_floors = [r["floor_s"] for r in rows if r["kind"] == "single" and r.get("floor_s") is not None]
    gpt2 = next((r for r in rows if r["kind"] == "gpt2" and "wall_s" in r and "error" not in r), None)
    verdicts = {
        "single_kernel_median_s": statistics.median(singles) if singles else None,
        "single_kernel_median_floor_s": statistics.median(single_floors) if single_floors else None,
        "single_kernel_cases": len(singles),
        "single_kernel_target_s": SINGLE_TARGET_S,
        "gpt2_s": gpt2["wall_s"] if gpt2 else None,
        "gpt2_floor_s": gpt2.get("floor_s") if gpt2 else None,
        "gpt2_target_s": GPT2_TARGET_S,
    }
    verdicts["single_kernel_pass"] = singles != [] and verdicts["single_kernel_median_s"] <= SINGLE_TARGET_S
    verdicts["gpt2_pass"] = gpt2 is not None and gpt2["wall_s"] <= GPT2_TARGET_S
    print()
    if singles:
        print(
            f"single-kernel problems: median {verdicts['single_kernel_median_s']:.2f} s over {len(singles)} "
            f"(floor median {verdicts['single_kernel_median_floor_s'] or 0:.2f} s), target <= {SINGLE_TARGET_S:.0f} s: "
            f"{'PASS' if verdicts['single_kernel_pass'] else 'FAIL'}"
        )
    if gpt2 is not None:
        print(
            f"GPT-2 small prefill 8x1024 bf16: {gpt2['wall_s']:.2f} s (floor {gpt2.get('floor_s') or 0:.2f} s), "
            f"target <= {GPT2_TARGET_S:.0f} s: {'PASS' if verdicts['gpt2_pass'] else 'FAIL'}"
        )
    summary = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "elapsed_s": time.perf_counter() - began,
        "verdicts": verdicts,
        "rows": rows,
    }
    atomic_write_text(args.out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    print(f"\nwritten: {args.out / 'summary.json'} ({summary['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
