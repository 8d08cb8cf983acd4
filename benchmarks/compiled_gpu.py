"""A compiled model diagnosed on a GPU: its fused kernels attributed, its total time against a plain CUDA-event
timing of the compiled forward (goal: within 5%).

    python benchmarks/compiled_gpu.py [--model benchmarks/models/gpt12_compiled.py] [--dtype bf16] [--out F.json]

Runs `roofline diagnose MODEL --device cuda` (the report: compiled, compile seconds, the ops' device time, the time
no op was attributed, the iteration's wall time), then times the same compiled forward with CUDA events in this
process: per call (events around one call, synchronised after each) and back to back (events around 20 calls,
the host running ahead as in a real loop and as diagnose's own wall time is taken), median of 5 rounds each after
warm-up; prints the report's iteration time against both with their ratios (goal: within 5%).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "benchmarks" / "models" / "gpt12_compiled.py")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--out", type=Path, default=None, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    out = Path(tempfile.mkdtemp()) / "r.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "roofline", "-q", "diagnose", str(args.model), "--device", "cuda"]
    cmd += ["--dtype", args.dtype, "-o", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        print(done.stderr[-2000:])
        return 1
    report = json.loads(out.read_text())
    summary, options = report["summary"], report["diagnose"]
    rows = [r for r in report["rows"] if r.get("timed")]
    fused = sum(1 for r in rows if r.get("fused_kernel"))
    device_s = sum(r["time_s"] for r in rows)
    unattributed = summary.get("unmatched_time_s") or 0.0

    import torch

    sys.path.insert(0, str(args.model.parent))
    namespace: dict = {"__file__": str(args.model), "__name__": "compiled_model"}
    exec(compile(args.model.read_text(), str(args.model), "exec"), namespace)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    model = namespace["model"].to(device="cuda", dtype=dtype)
    inputs = [t.to("cuda", dtype) if t.is_floating_point() else t.to("cuda") for t in namespace["example_inputs"]]
    calls = 20
    per_call, back_to_back = [], []
    with torch.no_grad():
        for _ in range(5):
            model(*inputs)
        for _ in range(5):
            for _ in range(calls):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                model(*inputs)
                end.record()
                end.synchronize()
                per_call.append(start.elapsed_time(end) / 1e3)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(calls):
                model(*inputs)
            end.record()
            end.synchronize()
            back_to_back.append(start.elapsed_time(end) / 1e3 / calls)
    plain, loop = median(per_call), median(back_to_back)
    iteration = max(summary.get("wall_s") or 0.0, device_s + unattributed)
    result = {
        "model": str(args.model.resolve().relative_to(ROOT))
        if args.model.resolve().is_relative_to(ROOT)
        else str(args.model),
        "compiled": options.get("compiled"),
        "compile_s": options.get("compile_s"),
        "ops_timed": len(rows),
        "ops_fused": fused,
        "ops_device_s": device_s,
        "unattributed_s": unattributed,
        "report_kernels_s": device_s + unattributed,
        "wall_s": summary.get("wall_s"),
        "report_iteration_s": iteration,
        "cuda_events_per_call_s": plain,
        "cuda_events_back_to_back_s": loop,
        "ratio_to_per_call": iteration / plain if plain else None,
        "ratio_to_back_to_back": iteration / loop if loop else None,
        "attributed_share": device_s / (device_s + unattributed) if device_s + unattributed else None,
        "graphs": options.get("graphs"),
        "graph_breaks": options.get("graph_breaks"),
        "top_findings": [f["rule"] for f in report.get("findings", [])[:5]],
    }
    print(json.dumps(result, indent=2))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
