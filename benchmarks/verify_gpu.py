"""`roofline diagnose --verify` on every example model on a GPU: each finding's mechanical technique applied and
measured beside the roofline's bound (the bound must never be below the measured gain).

    python benchmarks/verify_gpu.py --out DIR [--cases a,b] [--device cuda]

Per model (workloads/models, large sizes, the dtype of benchmarks/diagnose_fixes_gpu.py's FIXES): one
`roofline diagnose MODEL --verify` run; the report's "verified" entries (technique, bound, measured gain, outputs
match) are collected. Writes summary.json into DIR and prints a table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from diagnose_fixes_gpu import FIXES, MODELS, env  # noqa: E402

NOISE = 0.10  # a measured gain may exceed the bound by run-to-run noise alone


def run(model: Path, out: Path, dtype: str, device: str, size: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "roofline", "-q", "diagnose", str(model), "--device", device, "--dtype", dtype]
    cmd += ["--verify", "-o", str(out), "--force"]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env(size), capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1], "seconds": seconds}
    report = json.loads(out.read_text())
    verified = report.get("verified") or []
    for v in verified:
        bound, measured = v.get("bound_gain"), v.get("measured_gain")
        v["holds"] = None if bound is None or measured is None else measured <= bound * (1 + NOISE)
    return {"seconds": seconds, "verified": verified}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", default=None)
    parser.add_argument("--cases", default="")
    parser.add_argument(
        "--extra", default="", help="more model files, FILE[:DTYPE],... (e.g. benchmarks/models/gpt2_hf.py:bf16)"
    )
    args = parser.parse_args(argv)
    size = args.size or ("large" if args.device.startswith("cuda") else "small")
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    cases = [(n, MODELS / f"{n}.py", FIXES[n][0]) for n in [n for n in args.cases.split(",") if n] or list(FIXES)]
    for item in filter(None, args.extra.split(",")):
        file, _, dtype = item.partition(":")
        cases.append((Path(file).stem, Path(file), dtype or "bf16"))
    for name, file, dtype in cases:
        dtype = dtype if args.device.startswith("cuda") else "fp32"
        case = {"case": name, "dtype": dtype, **run(file, args.out / f"v-{name}.json", dtype, args.device, size)}
        results.append(case)
        if "error" in case:
            print(f"{name:24} failed: {case['error']}", flush=True)
        for v in case.get("verified", []):
            bound = f"{v['bound_gain']:.2f}x" if v.get("bound_gain") else "-"
            measured = f"{v['measured_gain']:.2f}x" if v.get("measured_gain") else "-"
            print(
                f"{name:24} {v['rule']:22} {v.get('technique') or '-':16} bound {bound:>8} measured {measured:>8} "
                f"match={v.get('outputs_match')!s:5} holds={v.get('holds')!s:5} {v.get('note', '')[:60]}",
                flush=True,
            )
        (args.out / "summary.json").write_text(json.dumps(results, indent=2) + "\n")
    checked = [v["holds"] for r in results for v in r.get("verified", []) if v.get("holds") is not None]
    print(f"bound holds: {sum(checked)}/{len(checked)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
