"""Measure the validation set of `roofline predict` on the GPU this runs on, under one time budget.

    python3 benchmarks/predict_collect_gpu.py --out DIR            # about 6-8 minutes on an H100 (budget 500 s)

Run it on each of the two GPUs (an H100 and an H200), each into its own DIR, then on any machine:

    python3 benchmarks/predict_pairs.py --a DIR_H100 --b DIR_H200 --out benchmarks/results/predict-pairs

Writes into DIR: calibration.json (`roofline calibrate --refresh --json`: the measured ceilings the predictor
uses), bench-gpu.json (`roofline bench bench-gpu`, --max-time 0.4 per row), diag-NAME.json (`roofline diagnose`
of every example model in workloads/models at ROOFLINE_MODEL_SIZE=large, bf16 but fp32_matmul in fp32; the GPT
stack benchmarks/models/gpt12.py; GPT-2 small from benchmarks/models/gpt2_hf.py when `transformers` imports; the
Llama-style stack benchmarks/models/llama_block.py in prefill and in decode), and manifest.json (the GPU, each
step's command, exit code and seconds, and the steps skipped because the budget ran out). The most important steps
run first; each gets at most what is left of --budget-s (default 500 s, so the whole run stays under 9 minutes
with the process start). Exit 0 when every step that ran succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "workloads" / "models"
DTYPE = {"fp32_matmul": "fp32"}  # every other model runs in bf16 (as benchmarks/diagnose_gpu.py)
STEP_CAP_S = 120.0  # the most one step may take
RESERVE_S = 5.0  # kept back for writing the manifest


def env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "ROOFLINE_MODEL_SIZE": "large", "COLUMNS": "160"}


def has_transformers() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import transformers"], capture_output=True, env=env())
    return probe.returncode == 0


def steps(out: Path) -> list[tuple[str, list[str], Path | None]]:
    """(name, command, stdout file or None), most important first."""
    roofline = [sys.executable, "-m", "roofline"]
    bench = out / "bench-gpu.json"
    found: list[tuple[str, list[str], Path | None]] = [
        ("calibrate", [*roofline, "calibrate", "--device", "cuda", "--refresh", "--json"], out / "calibration.json"),
        (
            "bench-gpu",
            [*roofline, "bench", "bench-gpu", "--device", "cuda", "--max-time", "0.4", "-o", str(bench)],
            None,
        ),
    ]

    def diagnose(name: str, model: Path, dtype: str = "bf16", args: tuple[str, ...] = ()) -> None:
        command = [*roofline, "diagnose", str(model), "--device", "cuda", "--dtype", dtype]
        command += ["-o", str(out / f"diag-{name}.json")]
        if args:
            command += ["--", *args]
        found.append((f"diagnose {name}", command, None))

    diagnose("gpt12", ROOT / "benchmarks" / "models" / "gpt12.py")
    diagnose("llama-prefill", ROOT / "benchmarks" / "models" / "llama_block.py", args=("--phase", "prefill"))
    diagnose("llama-decode", ROOT / "benchmarks" / "models" / "llama_block.py", args=("--phase", "decode"))
    if has_transformers():
        diagnose("gpt2-hf", ROOT / "benchmarks" / "models" / "gpt2_hf.py")
    for model in sorted(MODELS.glob("*.py")):
        diagnose(model.stem, model, DTYPE.get(model.stem, "bf16"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="Directory for the reports (created).")
    parser.add_argument("--budget-s", type=float, default=500.0, help="Time budget of the whole run (seconds).")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    records = []
    skipped = []
    gpu = ""
    try:
        names = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        )
        gpu = names.stdout.strip().splitlines()[0] if names.returncode == 0 and names.stdout.strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        pass
    failed = False
    for name, command, stdout_file in steps(out):
        left = args.budget_s - (time.monotonic() - start) - RESERVE_S
        if left < 15:
            skipped.append(name)
            continue
        began = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env(), timeout=min(STEP_CAP_S, left))
            code, text, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as exc:
            code, text, err = 124, "", f"timed out after {exc.timeout:.0f} s"
        seconds = time.monotonic() - began
        if stdout_file is not None and code == 0:
            stdout_file.write_text(text)
        failed = failed or code != 0
        tail = (err or "").strip().splitlines()[-3:]
        records.append({"step": name, "command": command, "exit": code, "seconds": round(seconds, 2), "stderr": tail})
        print(f"{name:<32} exit {code:>3}  {seconds:6.1f} s" + (f"  {tail[-1] if tail else ''}" if code else ""))
    manifest = {
        "gpu": gpu,
        "budget_s": args.budget_s,
        "elapsed_s": round(time.monotonic() - start, 1),
        "steps": records,
        "skipped_for_budget": skipped,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    left_out = ", ".join(skipped) or "none"
    print(f"{len(records)} step(s) in {manifest['elapsed_s']} s; skipped for the budget: {left_out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
