"""A compiled model diagnosed on a GPU: its fused kernels attributed, its total time against a plain CUDA-event
timing of the compiled forward (goal: within 5%).

    python benchmarks/compiled_gpu.py [--model benchmarks/models/gpt12_compiled.py] [--dtype bf16]

Runs `roofline diagnose MODEL --device cuda` (the report: compiled, compile seconds, the ops' device time, the time
no op was attributed), then times the same compiled forward with CUDA events (median of rounds, after warm-up) in
this process, and prints both with their ratio.
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
    times = []
    with torch.no_grad():
        for _ in range(5):
            model(*inputs)
        for _ in range(20):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    plain = median(times)
    result = {
        "model": str(args.model.relative_to(ROOT)),
        "compiled": options.get("compiled"),
        "compile_s": options.get("compile_s"),
        "ops_timed": len(rows),
        "ops_fused": fused,
        "ops_device_s": device_s,
        "unattributed_s": unattributed,
        "report_total_s": device_s + unattributed,
        "wall_s": summary.get("wall_s"),
        "cuda_events_s": plain,
        "ratio_total_to_events": (device_s + unattributed) / plain if plain else None,
        "top_findings": [f["rule"] for f in report.get("findings", [])[:5]],
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
