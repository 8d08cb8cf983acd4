"""Wall time of `roofline --help` and every `roofline analyze` command (target: under 0.5 s each).

    python benchmarks/cli_startup.py [--repeat 10] [--out benchmarks/results/cli_startup.json]

Each command runs as a fresh process (`python -m roofline ...`), as a user would start it; the table shows
the median and p20-p80 of the wall times, and whether torch was imported (it must not be).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.fileio import atomic_write_text  # noqa: E402

COMMANDS: list[list[str]] = [
    ["--help"],
    ["analyze", "gemm", "-m", "4096", "-n", "4096", "-k", "4096", "--dtype", "fp16", "--device", "h100-sxm"],
    [
        "analyze",
        "attention",
        "--seq",
        "8192",
        "--heads",
        "64",
        "--head-dim",
        "128",
        "--impl",
        "naive,fused",
        "--device",
        "h100-sxm",
    ],
    ["analyze", "decode", "--model", "llama-3-8b", "--batch", "1,8,64,256", "--device", "h100-sxm"],
    ["analyze", "decode", "--params", "8.75e9", "--d-model", "4096", "--device", "h100-sxm"],
    ["analyze", "prefill", "--model", "llama-3-8b", "--seq", "1024", "--device", "h100-sxm,a100-sxm-80gb"],
    ["analyze", "elementwise", "--op", "gelu", "--numel", "4096x4096", "--device", "h100-sxm"],
    ["analyze", "norm", "--op", "layernorm", "--rows", "2048", "--cols", "4096", "--device", "h100-sxm"],
    ["analyze", "conv2d", "-c", "64", "--out-channels", "128", "--height", "56", "--width", "56", "-d", "h100-sxm"],
    ["analyze", "suite", "transformer-ops", "--device", "h100-sxm"],
]

PROBE = (
    "import runpy, sys\n"
    "sys.argv = ['roofline'] + sys.argv[1:]\n"
    "try:\n    runpy.run_module('roofline', run_name='__main__')\n"
    "except SystemExit as e:\n    code = e.code\n"
    "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)\n"
)


def time_command(args: list[str], repeat: int) -> dict:
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(ROOT)}
    samples = []
    torch_imported = False
    for _ in range(repeat):
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "roofline", *args], env=env, capture_output=True, text=True)
        samples.append(time.perf_counter() - start)
        if result.returncode != 0:
            raise SystemExit(f"`roofline {' '.join(args)}` failed: {result.stderr.strip()}")
    probe = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True)
    torch_imported = probe.stderr.strip().splitlines()[-1] == "TORCH"
    q = statistics.quantiles(samples, n=5) if len(samples) >= 2 else [samples[0]] * 4
    return {
        "command": "roofline " + " ".join(args),
        "median_s": statistics.median(samples),
        "p20_s": q[0],
        "p80_s": q[3],
        "samples_s": samples,
        "torch_imported": torch_imported,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--target", type=float, default=0.5, help="seconds")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cli_startup.json")
    args = parser.parse_args()

    results = [time_command(command, args.repeat) for command in COMMANDS]
    width = max(len(r["command"]) for r in results)
    print(f"{'command':<{width}}  median    p20-p80          torch  target")
    for r in results:
        ok = "ok" if r["median_s"] < args.target and not r["torch_imported"] else "MISS"
        print(
            f"{r['command']:<{width}}  {r['median_s']:.3f} s  {r['p20_s']:.3f}-{r['p80_s']:.3f} s  "
            f"{'yes' if r['torch_imported'] else 'no':<5}  {ok}"
        )
    document = {
        "benchmark": "cli_startup",
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "processor": platform.processor(),
        },
        "repeat": args.repeat,
        "target_s": args.target,
        "results": results,
    }
    atomic_write_text(args.out, json.dumps(document, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0 if all(r["median_s"] < args.target and not r["torch_imported"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
