"""Start-up of this checkout against a reference checkout, side by side in one run (the machine's speed cancels).

    git worktree add /tmp/ref <commit>
    python benchmarks/cli_startup_compare.py --reference /tmp/ref --rounds 20

Each round starts every command once per checkout as a fresh process (`python -m roofline ...`), alternating which
checkout goes first, and records the wall time and the child's CPU time (user + sys). Prints the medians and the
ratio new / reference; writes benchmarks/results/cli_startup_compare.json.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The interpreter alone, started the same way from each checkout: its difference is the environment's (paths, caches),
# not roofline's, and is taken off each command's time for the net ratio.
BARE = "python -c pass"
COMMANDS = {
    BARE: None,
    "roofline --help": ["--help"],
    "roofline analyze gemm -m 4096 -n 4096 -k 4096 --dtype fp16 --device h100-sxm": (
        ["analyze", "gemm", "-m", "4096", "-n", "4096", "-k", "4096", "--dtype", "fp16", "--device", "h100-sxm"]
    ),
    "roofline analyze decode --model llama-3-8b --batch 1,8,64,256 --device h100-sxm": (
        ["analyze", "decode", "--model", "llama-3-8b", "--batch", "1,8,64,256", "--device", "h100-sxm"]
    ),
}


def start(root: Path, args: list[str] | None) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "120"}
    argv = [sys.executable, "-c", "pass"] if args is None else [sys.executable, "-m", "roofline", *args]
    began = time.perf_counter()
    child = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise SystemExit(
            f"{root}: roofline {' '.join(args)} failed: {child.stderr.read().decode() if child.stderr else ''}"
        )
    return time.perf_counter() - began, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help="a checkout of the reference commit")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "cli_startup_compare.json")
    args = parser.parse_args()
    roots = {"reference": args.reference.resolve(), "this": ROOT}
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {(r, c): [] for r in roots for c in COMMANDS}
    for round_ in range(args.rounds):
        for name, argv in COMMANDS.items():
            order = list(roots.items()) if round_ % 2 else list(reversed(roots.items()))
            for which, root in order:
                samples[(which, name)].append(start(root, argv))
    rows = []
    for name in COMMANDS:
        ref, new = samples[("reference", name)], samples[("this", name)]
        row = {
            "command": name,
            "reference_wall_s": statistics.median(w for w, _ in ref),
            "this_wall_s": statistics.median(w for w, _ in new),
            "reference_cpu_s": statistics.median(c for _, c in ref),
            "this_cpu_s": statistics.median(c for _, c in new),
        }
        row["cpu_ratio"] = row["this_cpu_s"] / row["reference_cpu_s"]
        if name != BARE:
            bare = rows[0]
            row["net_cpu_ratio"] = (row["this_cpu_s"] - bare["this_cpu_s"]) / (
                row["reference_cpu_s"] - bare["reference_cpu_s"]
            )
        rows.append(row)
        net = f"  net of the interpreter {row['net_cpu_ratio']:.3f}" if "net_cpu_ratio" in row else ""
        print(
            f"{name[:60]:60s} wall {row['reference_wall_s']:.3f} -> {row['this_wall_s']:.3f} s  "
            f"cpu {row['reference_cpu_s']:.3f} -> {row['this_cpu_s']:.3f} s  ratio {row['cpu_ratio']:.3f}{net}"
        )
    result = {
        "reference": str(roots["reference"]),
        "rounds": args.rounds,
        "python": platform.python_version(),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
