"""Run-to-run agreement of `roofline bench`: the same suite twice, each in a new process, row medians compared.

    python3 benchmarks/bench_stability.py --out DIR                       # CUDA: the bench-gpu suite
    python3 benchmarks/bench_stability.py --out DIR --device cpu --quick  # the same logic on the CPU, tiny sizes

Target (issue 15): the two runs' medians within 2% for at least 95% of the rows. Also reported per run: the rows
flagged unstable (`!`), the rows re-measured, and the samples the drift rule dropped (all from the reports).
Writes DIR/run-1.json, DIR/run-2.json (the bench reports) and DIR/summary.json; prints a table. Exit 0 when the
target held, 1 when it did not, 2 when a run failed.
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
TOLERANCE = 0.02  # two runs' medians within 2% ...
SHARE = 0.95  # ... for at least 95% of the rows

QUICK_SUITE = """\
name: stability-quick
description: benchmarks/bench_stability.py --quick, fp32, tiny CPU rows
workloads:
  - {kind: gemm, m: 128, n: 128, k: 128, dtype: fp32}
  - {kind: gemm, m: 1, n: 1024, k: 1024, dtype: fp32}
  - {kind: elementwise, op: add, numel: 262144, dtype: fp32}
  - {kind: norm, op: layernorm, rows: 256, cols: 256, dtype: fp32}
"""


def env(quick: bool) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    extra = {"OMP_NUM_THREADS": "1"} if quick else {}
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "160", "NO_COLOR": "1", **extra}


def run_suite(suite: str, device: str, report: Path, quick: bool, timeout_s: float) -> tuple[int, str, float]:
    """`python -m roofline bench SUITE` in a new process: (exit code, stderr tail, seconds)."""
    args = [sys.executable, "-m", "roofline", "bench", suite, "--device", device, "-o", str(report), "--force"]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, env=env(quick), cwd=ROOT, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s:.0f} s", time.perf_counter() - start
    return done.returncode, done.stderr.strip()[-2000:], time.perf_counter() - start


def rows_of(report: Path) -> dict[str, dict[str, Any]]:
    data = json.loads(report.read_text())
    return {f"{row['kind']} {row['label']}": row for row in data["rows"]}


def compare(first: dict[str, dict[str, Any]], second: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for key in first.keys() & second.keys():
        a, b = first[key], second[key]
        ratio = b["median_s"] / a["median_s"] if a["median_s"] > 0 else float("inf")
        out.append(
            {
                "row": key,
                "median_1_s": a["median_s"],
                "median_2_s": b["median_s"],
                "ratio": ratio,
                "within": abs(ratio - 1) <= TOLERANCE,
                "unstable": [bool(a.get("unstable")), bool(b.get("unstable"))],
                "remeasured": [bool(a.get("remeasured")), bool(b.get("remeasured"))],
                "discarded": [a.get("discarded", 0), b.get("discarded", 0)],
                "n": [a["n"], b["n"]],
                "spread": [a["relative_spread"], b["relative_spread"]],
            }
        )
    return sorted(out, key=lambda r: r["row"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for the reports and summary.json")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--suite", default=None, help="a suite name or file (default: bench-gpu, or the quick one)")
    parser.add_argument("--quick", action="store_true", help="a 4-row CPU suite of tiny fp32 ops")
    parser.add_argument("--timeout-s", type=float, default=280.0, help="per run of the suite")
    opts = parser.parse_args(argv)
    opts.out.mkdir(parents=True, exist_ok=True)
    suite = opts.suite
    if suite is None:
        if opts.quick:
            path = opts.out / "stability-quick.yaml"
            path.write_text(QUICK_SUITE)
            suite = str(path)
        else:
            suite = "bench-gpu" if opts.device == "cuda" else "bench-cpu"

    runs = []
    for index in (1, 2):
        report = opts.out / f"run-{index}.json"
        code, stderr, seconds = run_suite(suite, opts.device, report, opts.quick, opts.timeout_s)
        print(f"run {index}: exit {code}, {seconds:.1f} s", flush=True)
        if code != 0 or not report.exists():
            print(stderr, file=sys.stderr)
            return 2
        runs.append({"report": str(report), "seconds": seconds})
    first, second = (rows_of(Path(r["report"])) for r in runs)
    rows = compare(first, second)
    within = sum(r["within"] for r in rows)
    share = within / len(rows) if rows else 0.0
    print(f"\n{'row':60} {'run 1':>10} {'run 2':>10} {'ratio':>7}  n1/n2    dropped  flags")
    for r in rows:
        flags = ",".join(f"{what}{i + 1}" for what in ("unstable", "remeasured") for i, v in enumerate(r[what]) if v)
        print(
            f"{r['row'][:60]:60} {r['median_1_s'] * 1e6:9.1f}u {r['median_2_s'] * 1e6:9.1f}u {r['ratio']:7.3f}"
            f"  {r['n'][0]:>4}/{r['n'][1]:<4} {r['discarded'][0]:>3}/{r['discarded'][1]:<3}  "
            f"{'' if r['within'] else 'OUT '}{flags}"
        )
    summary = {
        "suite": suite,
        "device": opts.device,
        "rows": len(rows),
        "within_2pct": within,
        "share_within": share,
        "target_share": SHARE,
        "unstable_rows": [sum(r["unstable"][i] for r in rows) for i in (0, 1)],
        "remeasured_rows": [sum(r["remeasured"][i] for r in rows) for i in (0, 1)],
        "discarded_samples": [sum(r["discarded"][i] for r in rows) for i in (0, 1)],
        "run_seconds": [r["seconds"] for r in runs],
        "per_row": rows,
    }
    (opts.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"\n{within} of {len(rows)} rows within {TOLERANCE:.0%} ({share:.1%}; target {SHARE:.0%}); unstable rows "
        f"{summary['unstable_rows']}, re-measured {summary['remeasured_rows']}, samples dropped as drift "
        f"{summary['discarded_samples']}; runs took {runs[0]['seconds']:.0f} s and {runs[1]['seconds']:.0f} s"
    )
    return 0 if rows and share >= SHARE else 1


if __name__ == "__main__":
    raise SystemExit(main())
