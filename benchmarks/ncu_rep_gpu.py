"""`roofline counters import FILE.ncu-rep` against a real Nsight Compute report (issue 29, item 5), on a GPU:

    python benchmarks/ncu_rep_gpu.py --out benchmarks/results/ncu-rep-h100.json

1. `roofline diagnose MODEL --device cuda -o report.json` (MODEL: workloads/models/gelu_chain_unfused.py);
2. the counting child of `diagnose --counters` (`python -m roofline.diagnose.counters`) under ncu with the metrics
   roofline reads, the NVTX range it opens and `--clock-control none`, written twice: as a report file
   (`ncu -o X.ncu-rep`) and as the raw-page CSV `diagnose --counters` reads (`ncu --import X.ncu-rep --csv --page
   raw`);
3. `roofline counters import` of each (the .ncu-rep through ncu_report, which roofline finds from the ncu on PATH),
   and the two documents compared: the same launches, kernels and values; the L2 and L1 bytes per op
   (lts__t_bytes.sum, l1tex__t_bytes.sum) of each are shown side by side (``cache_bytes``).
Writes the comparison as JSON; exit 0 when the two agree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "workloads" / "models" / "gelu_chain_unfused.py"


def run(cmd: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/ncu-rep-h100.json"))
    args = parser.parse_args()
    ncu = shutil.which("ncu")
    if ncu is None:
        print("Error: ncu is not on PATH", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from roofline.diagnose.counters import child_command
    from roofline.measure.ncu import METRICS, NVTX_RANGE, ncu_report_dirs

    # NB: ncu_report is not put on PYTHONPATH here: roofline finds it from the ncu on PATH (the check of that too)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result: dict[str, Any] = {"ncu": ncu, "ncu_report_dirs": [str(d) for d in ncu_report_dirs(ncu)]}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        report = work / "report.json"
        done = run([sys.executable, "-m", "roofline", "diagnose", str(MODEL), "--device", "cuda", "-o", str(report)],
                   env)  # fmt: skip
        result["diagnose_rc"] = done.returncode
        if done.returncode != 0:
            result["error"] = done.stderr[-2000:]
            return finish(args.out, result, 1)
        child = child_command(MODEL, device="cuda", mode="inference")
        rep = work / "kernels"
        cmd = [ncu, "--metrics", ",".join(METRICS), "--clock-control", "none", "--nvtx", "--nvtx-include",
               f"{NVTX_RANGE}/", "-f", "-o", str(rep), *child]  # fmt: skip
        done = run(cmd, env)
        result["ncu_rc"] = done.returncode
        rep_file = rep.with_suffix(".ncu-rep")
        if not rep_file.is_file():
            result["error"] = (done.stdout + done.stderr)[-2000:]
            return finish(args.out, result, 1)
        csv_file = work / "kernels.csv"
        done = run([ncu, "--import", str(rep_file), "--csv", "--page", "raw", "--print-kernel-base", "demangled"], env)
        csv_file.write_text(done.stdout)
        docs = {}
        for name, source in (("ncu_rep", rep_file), ("csv", csv_file)):
            done = run([sys.executable, "-m", "roofline", "counters", "import", str(source), "--report", str(report),
                        "--json"], env)  # fmt: skip
            result[f"{name}_rc"] = done.returncode
            result[f"{name}_stderr"] = done.stderr[-1500:]
            text = done.stdout.replace(str(source), "SOURCE")  # NB: each names its own file: not a difference
            docs[name] = json.loads(text) if done.returncode == 0 and text.strip() else None
        result["documents"] = docs
        result["cache_bytes"] = {
            name: [
                {k: o.get(k) for k in ("op", "dram_bytes", "l2_bytes", "l1_bytes", "l2_resident", "l1_dominant")}
                for o in _ops(doc)
            ]
            for name, doc in docs.items()
        }
        a, b = docs.get("ncu_rep"), docs.get("csv")
        result["differences"] = differences(a, b)
        result["agree"] = a is not None and b is not None and not result["differences"]
    return finish(args.out, result, 0 if result.get("agree") else 1)


def _ops(doc: dict[str, Any] | None) -> list[dict[str, Any]]:
    return list(((doc or {}).get("counters") or {}).get("ops") or [])


def same(a: Any, b: Any, key: str = "") -> bool:
    """Two imported values alike: kernel names as both tools agree on them (roofline.findings.counters.normalized:
    the report file spells casts and namespaces the CSV drops), numbers within the CSV's rounding (6 decimals of a
    percentage: a relative 1e-6, or 1e-6 absolute), the rest equal."""
    from roofline.findings.counters import normalized

    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], k) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, key) for x, y in zip(a, b, strict=True))
    if key == "kernels" and isinstance(a, str) and isinstance(b, str):
        return normalized(a) == normalized(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= max(1e-6 * max(abs(a), abs(b)), 1e-6)
    return a == b


def differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """Where the two documents differ (:func:`same`): 'missing' when either is absent, else the counters'
    top-level keys and 'op N KEY' per op."""
    if a is None or b is None:
        return ["missing"]
    ca, cb = a.get("counters") or {}, b.get("counters") or {}
    found = [k for k in sorted(set(ca) | set(cb)) if k != "ops" and not same(ca.get(k), cb.get(k), k)]
    found += [k for k in sorted(set(a) | set(b)) if k != "counters" and not same(a.get(k), b.get(k), k)]
    ops_a, ops_b = _ops(a), _ops(b)
    if len(ops_a) != len(ops_b):
        return [*found, f"ops: {len(ops_a)} vs {len(ops_b)}"]
    for x, y in zip(ops_a, ops_b, strict=True):
        found += [f"op {x.get('index')} {k}" for k in sorted(set(x) | set(y)) if not same(x.get(k), y.get(k), k)]
    return found


def finish(out: Path, result: dict[str, Any], code: int) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    shown = {k: v for k, v in result.items() if k != "documents"}
    print(json.dumps(shown, indent=1, default=str)[:6000])
    return code


if __name__ == "__main__":
    sys.exit(main())
