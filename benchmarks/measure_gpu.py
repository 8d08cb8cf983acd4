"""GPU measurement checks for `roofline calibrate` and `roofline bench` (run on a CUDA machine).

    python benchmarks/measure_gpu.py --out DIR [--suite bench-gpu]

1. `roofline calibrate --device cuda --refresh --json`: wall time (target <= 30 s), DRAM copy vs the sheet's
   HBM figure (target >= 90%), bf16 GEMM vs the dense peak (target >= 78%).
2. `roofline bench SUITE` twice: for every row slower than 20 us the two medians agree within 2%.
3. The same kernels timed by triton.testing.do_bench (median, its own L2 flush): ours / theirs within 5%.
Writes calibration.json, bench-run1.json, bench-run2.json, bench-run1.txt and summary.json into DIR and prints
a table of every check.
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


def roofline(*args: str, stdout_path: Path | None = None) -> tuple[float, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "COLUMNS": "140",
    }
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "roofline", *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"roofline {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
    if stdout_path is not None:
        stdout_path.write_text(result.stdout)
    return wall, result.stdout


def do_bench_medians(rows: list[dict]) -> dict[int, float]:
    """do_bench median (seconds) for each row index, rebuilding the same op with the bench runners."""
    import torch
    from triton.testing import do_bench

    from roofline.bench.runners import build
    from roofline.costs.base import get_model

    device = torch.device("cuda")
    found: dict[int, float] = {}
    for index, row in enumerate(rows):
        params = get_model(row["kind"]).parse(row["params"])
        bench = build(row["kind"], params, torch=torch, device=device)
        try:
            with bench.active():
                bench.prepare()
                torch.cuda.synchronize()
                time.sleep(0.5)  # the same rested start as `roofline bench` rows (REST_S)
                found[index] = do_bench(bench.fn, warmup=25, rep=200, return_mode="median") * 1e-3
        finally:
            bench.release()
            torch.cuda.empty_cache()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--suite", default="bench-gpu")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    checks: list[tuple[str, str, bool]] = []

    # 1. calibrate
    wall, text = roofline("calibrate", "--device", "cuda", "--refresh", "--json")
    (out / "calibration.json").write_text(text)
    cal = json.loads(text)
    ceilings = {c["name"]: c for c in cal["ceilings"]}
    checks.append(("calibrate wall time <= 30 s", f"{wall:.1f} s", wall <= 30))
    for name, target in (("dram-copy", 0.90), ("gemm-bf16", 0.78)):
        c = ceilings.get(name)
        ratio = c["ratio"] if c else None
        shown = f"{c['value'] / 1e12:.3f} T{c['unit']} = {ratio:.1%} of spec" if c and ratio else "missing"
        checks.append((f"{name} >= {target:.0%} of the sheet", shown, bool(ratio and ratio >= target)))
    _, table = roofline("calibrate", "--device", "cuda")  # the cached table, for the record
    (out / "calibration.txt").write_text(table)

    # 2. bench twice
    runs = []
    for n in (1, 2):
        path = out / f"bench-run{n}.json"
        wall, _ = roofline(
            "bench", args.suite, "--device", "cuda", "-o", str(path), stdout_path=out / f"bench-run{n}.txt"
        )
        runs.append(json.loads(path.read_text()))
        checks.append((f"bench run {n} wall time", f"{wall:.0f} s", True))
    first, second = runs[0]["rows"], runs[1]["rows"]
    pairs = [(a, b) for a, b in zip(first, second, strict=True) if a["median_s"] > 20e-6]
    diffs = [abs(b["median_s"] / a["median_s"] - 1) for a, b in pairs]
    worst = max(range(len(diffs)), key=diffs.__getitem__) if diffs else None
    checks.append(
        (
            f"run-to-run medians within 2% ({len(pairs)} rows > 20 us)",
            f"max {max(diffs):.2%} ({pairs[worst][0]['kind']} {pairs[worst][0]['label']})" if diffs else "no rows",
            bool(diffs) and max(diffs) <= 0.02,
        )
    )

    # 3. do_bench
    theirs = do_bench_medians(first)
    ratios = []
    lines = []
    for index, row in enumerate(first):
        if index not in theirs:
            continue
        ratio = row["median_s"] / theirs[index]
        lines.append(
            f"{row['kind']:<12} {row['label']:<48} ours {row['median_s'] * 1e6:10.1f} us   "
            f"do_bench {theirs[index] * 1e6:10.1f} us   ratio {ratio:.3f}"
        )
        if row["median_s"] > 20e-6:
            ratios.append((abs(ratio - 1), row, ratio))
    (out / "do_bench.txt").write_text("\n".join(lines) + "\n")
    worst_ratio = max(ratios, key=lambda item: item[0]) if ratios else None
    checks.append(
        (
            f"ours vs triton do_bench within 5% ({len(ratios)} rows > 20 us)",
            f"worst ratio {worst_ratio[2]:.3f} ({worst_ratio[1]['kind']} {worst_ratio[1]['label']})"
            if worst_ratio
            else "-",
            bool(ratios) and worst_ratio[0] <= 0.05,
        )
    )

    summary = {
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": cal.get("machine"),
        "checks": [{"check": c, "value": v, "pass": ok} for c, v, ok in checks],
        "run_to_run": [
            {"kind": a["kind"], "label": a["label"], "run1_s": a["median_s"], "run2_s": b["median_s"]}
            for a, b in zip(first, second, strict=True)
        ],
        "do_bench": [
            {"kind": first[i]["kind"], "label": first[i]["label"], "ours_s": first[i]["median_s"], "do_bench_s": t}
            for i, t in theirs.items()
        ],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print("\n".join(lines))
    print()
    for check, value, ok in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {check:<58} {value}")
    return 0 if all(ok for _, _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
