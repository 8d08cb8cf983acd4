"""Validate `roofline predict` on one set measured on two GPUs: predict each from the other, compare.

    python3 benchmarks/predict_pairs.py --a DIR_H100 --b DIR_H200 --out benchmarks/results/predict-pairs

DIR_A and DIR_B: what benchmarks/predict_collect_gpu.py wrote on each GPU (bench-gpu.json, diag-*.json and
calibration.json). Runs on the CPU (no torch). For every report present in both, predicts A -> B and B -> A
with both calibrations (--roofs auto: measured ceilings when both calibration.json files are there) and compares
with what the other GPU measured:

- per op: each bench row (matched by its label), and each diagnose op group (matched by its label: op, shapes,
  calls, modules) holding at least --min-share (default 1%) of its model's op time on the source GPU;
- per model: each diagnose report's iteration time (ops + uncounted + gaps).

The error is |predicted / measured - 1|; the table gives its median and 90th percentile for our predictor and for
the baseline (the spec peaks at the same efficiency: what `roofline plot --device` draws), per direction and for
both. Writes OUT.json (every compared op and model) and OUT.md (the table), prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MIN_SHARE = 0.01


def _quantile(values: Sequence[float], q: float) -> float | None:
    from roofline.samples import quantile

    return quantile(list(values), q) if values else None


def _error(predicted: float, measured: float) -> float:
    return abs(predicted / measured - 1.0)


def _reports(directory: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(directory.glob("*.json")) if p.name.startswith(("bench-", "diag-"))}


def _measured_groups(report: Any) -> dict[str, float]:
    from roofline.findings.predict import OpInput
    from roofline.report.points import report_points

    if report.source == "bench":
        return {p.label: p.time_s for p in report_points(report) if p.time_s}
    times: dict[str, float] = {}
    for p in report_points(report):
        total = sum(OpInput.of_row(report.rows[i], "diagnose").time_s for i in p.rows)
        if total > 0:
            times[p.label] = total
    return times


def compare(
    source: Path, target: Path, calibrations: Sequence[Path], *, min_share: float = MIN_SHARE
) -> dict[str, Any]:
    """One report predicted from ``source`` onto ``target``'s GPU and compared with ``target``'s times."""
    from roofline.findings.predict import predict_report
    from roofline.report.schema import read_report

    here = read_report(source, note=None)
    there = read_report(target, note=None)
    device = there.devices[0].name
    (prediction,) = predict_report(here, [device], name=source.stem, calibrations=calibrations)
    measured = _measured_groups(there)
    ops_total = sum(g.measured_s for g in prediction.groups) or 1.0
    ops = []
    for g in prediction.groups:
        if g.label not in measured or (here.source == "diagnose" and g.measured_s < min_share * ops_total):
            continue
        m = measured[g.label]
        ops.append(
            {
                "label": g.label,
                "limiter": g.limiter,
                "here_s": g.measured_s,
                "measured_s": m,
                "predicted_s": g.predicted_s,
                "baseline_s": g.baseline_s,
                "error": _error(g.predicted_s, m),
                "baseline_error": _error(g.baseline_s, m),
                "in_range": g.low_s <= m <= g.high_s,
            }
        )
    model = None
    if here.source == "diagnose":
        summary = there.summary or {}
        m = max(float(summary.get("op_time_s") or 0.0), float(summary.get("wall_s") or 0.0))
        t = prediction.total
        if m > 0:
            model = {
                "here_s": t.measured_s,
                "measured_s": m,
                "predicted_s": t.predicted_s,
                "low_s": t.low_s,
                "high_s": t.high_s,
                "baseline_s": t.baseline_s,
                "error": _error(t.predicted_s, m),
                "baseline_error": _error(t.baseline_s, m),
                "in_range": t.low_s <= m <= t.high_s,
            }
    return {
        "report": source.name,
        "from": here.devices[0].name,
        "to": device,
        "basis": prediction.pair.basis,
        "ops": ops,
        "model": model,
    }


def _stats(errors: Sequence[float]) -> dict[str, float | int | None]:
    return {"n": len(errors), "median": _quantile(errors, 0.5), "p90": _quantile(errors, 0.9)}


def error_table(dir_a: Path, dir_b: Path, *, min_share: float = MIN_SHARE) -> dict[str, Any]:
    """Every report in both directories predicted both ways; the errors and their median and p90."""
    a, b = _reports(dir_a), _reports(dir_b)
    common = sorted(set(a) & set(b))
    if not common:
        raise SystemExit(f"no report is in both {dir_a} and {dir_b}")
    cal_a = [p for p in [dir_a / "calibration.json"] if p.is_file()]
    cal_b = [p for p in [dir_b / "calibration.json"] if p.is_file()]
    comparisons = []
    for name in common:
        comparisons.append(compare(a[name], b[name], cal_a + cal_b, min_share=min_share))
        comparisons.append(compare(b[name], a[name], cal_a + cal_b, min_share=min_share))
    directions = sorted({(c["from"], c["to"]) for c in comparisons})
    rows = []
    for label, chosen in [*((f"{f} -> {t}", [(f, t)]) for f, t in directions), ("both", directions)]:
        picked = [c for c in comparisons if (c["from"], c["to"]) in chosen]
        ops = [o for c in picked for o in c["ops"]]
        models = [c["model"] for c in picked if c["model"]]
        rows.append(
            {
                "direction": label,
                "ops": _stats([o["error"] for o in ops]),
                "ops_baseline": _stats([o["baseline_error"] for o in ops]),
                "models": _stats([m["error"] for m in models]),
                "models_baseline": _stats([m["baseline_error"] for m in models]),
                "models_in_range": sum(1 for m in models if m["in_range"]),
            }
        )
    return {"min_share": min_share, "table": rows, "comparisons": comparisons}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| direction | per-op n | per-op median (ours / baseline) | per-op p90 (ours / baseline) | per-model n | "
        "per-model median (ours / baseline) | per-model p90 (ours / baseline) | models in range |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["table"]:
        o, ob, m, mb = r["ops"], r["ops_baseline"], r["models"], r["models_baseline"]
        lines.append(
            f"| {r['direction']} | {o['n']} | {_pct(o['median'])} / {_pct(ob['median'])} | {_pct(o['p90'])} / "
            f"{_pct(ob['p90'])} | {m['n']} | {_pct(m['median'])} / {_pct(mb['median'])} | {_pct(m['p90'])} / "
            f"{_pct(mb['p90'])} | {r['models_in_range']}/{m['n']} |"
        )
    lines.append("")
    lines.append(
        f"Error: |predicted / measured - 1|. Per op: bench rows and diagnose op groups holding at least "
        f"{100 * result['min_share']:g}% of their model's op time. Baseline: spec peaks at the same efficiency "
        "(`roofline plot --device`)."
    )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", type=Path, required=True, help="Reports measured on one GPU.")
    parser.add_argument("--b", type=Path, required=True, help="The same reports measured on the other GPU.")
    parser.add_argument("--out", type=Path, required=True, help="Output stem: writes OUT.json and OUT.md.")
    parser.add_argument("--min-share", type=float, default=MIN_SHARE, help="Diagnose op groups below it are left out.")
    args = parser.parse_args()
    result = error_table(args.a, args.b, min_share=args.min_share)
    from roofline.fileio import atomic_write_text

    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    atomic_write_text(args.out.with_suffix(".md"), text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
