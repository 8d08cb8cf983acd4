"""Validate `roofline predict` on one set measured on two GPUs: predict each from the other, compare.

    python3 benchmarks/predict_pairs.py --a DIR_H100 --b DIR_H200 --out benchmarks/results/predict/predict-pairs

The committed sets: --a benchmarks/results/predict/h100.tar.gz --b benchmarks/results/predict/h200.tar.gz.
DIR_A and DIR_B: what benchmarks/predict_collect_gpu.py wrote on each GPU (bench-gpu.json, diag-*.json and
calibration.json), as a folder or a .tar.gz of one. Runs on the CPU (no torch). For every report present in both,
predicts A -> B and B -> A with both calibrations (--roofs auto: measured ceilings when both calibration.json
files are there) and compares with what the other GPU measured:

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


def match_label(label: str) -> str:
    """A point's label without its source lines (`... at FILE:LINE,LINE`): reports written before the source lines
    (issue 29) label the same group without them."""
    head, sep, tail = label.rpartition(" at ")
    return head if sep and ":" in tail and " " not in tail.strip() else label


def _measured_groups(report: Any) -> dict[str, float]:
    from roofline.predict import OpInput
    from roofline.report.points import report_points

    if report.source == "bench":
        return {match_label(p.label): p.time_s for p in report_points(report) if p.time_s}
    times: dict[str, float] = {}
    for p in report_points(report):
        total = sum(OpInput.of_row(report.rows[i], "diagnose").time_s for i in p.rows)
        if total > 0:
            times[match_label(p.label)] = total
    return times


def compare(
    source: Path, target: Path, calibrations: Sequence[Path], *, min_share: float = MIN_SHARE
) -> dict[str, Any]:
    """One report predicted from ``source`` onto ``target``'s GPU and compared with ``target``'s times."""
    from roofline.predict import predict_report
    from roofline.report.schema import read_report

    here = read_report(source, note=None)
    there = read_report(target, note=None)
    device = there.devices[0].name
    (prediction,) = predict_report(here, [device], name=source.stem, calibrations=calibrations)
    measured = _measured_groups(there)
    ops_total = sum(g.measured_s for g in prediction.groups) or 1.0
    ops = []
    for g in prediction.groups:
        label = match_label(g.label)
        if label not in measured or (here.source == "diagnose" and g.measured_s < min_share * ops_total):
            continue
        m = measured[label]
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
    model = gpu = None
    if here.source == "diagnose":
        summary = there.summary or {}
        op_time = float(summary.get("op_time_s") or 0.0)
        m = max(op_time, float(summary.get("wall_s") or 0.0))
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
                "gap_here_s": t.gap_s,
                "gap_there_s": max(m - op_time, 0.0),
            }
        if op_time > 0:  # the GPU's time alone: the ops (counted and uncounted), host gaps left out on both sides
            g = {key: t_value - t.gap_s for key, t_value in (("predicted_s", t.predicted_s), ("low_s", t.low_s))}
            g |= {"high_s": t.high_s - t.gap_s, "baseline_s": t.baseline_s - t.gap_s}
            gpu = {
                "here_s": t.ops_s + t.uncounted_s,
                "measured_s": op_time,
                **g,
                "error": _error(g["predicted_s"], op_time),
                "baseline_error": _error(g["baseline_s"], op_time),
                "in_range": g["low_s"] <= op_time <= g["high_s"],
            }
    return {
        "report": source.name,
        "from": here.devices[0].name,
        "to": device,
        "basis": prediction.pair.basis,
        "ops": ops,
        "model": model,
        "model_gpu": gpu,
    }


def is_problem(report: str) -> bool:
    """A report of the advice corpus's generated problems (benchmarks/predict_corpus_gpu.py), not a model's."""
    return report.startswith("diag-corpus-")


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
        whole = [c for c in picked if not is_problem(c["report"])]
        models = [c["model"] for c in whole if c["model"]]
        gpus = [c["model_gpu"] for c in whole if c.get("model_gpu")]
        problems = [c["model_gpu"] for c in picked if is_problem(c["report"]) and c.get("model_gpu")]
        rows.append(
            {
                "direction": label,
                "ops": _stats([o["error"] for o in ops]),
                "ops_baseline": _stats([o["baseline_error"] for o in ops]),
                "models": _stats([m["error"] for m in models]),
                "models_baseline": _stats([m["baseline_error"] for m in models]),
                "models_in_range": sum(1 for m in models if m["in_range"]),
                "models_gpu": _stats([m["error"] for m in gpus]),
                "models_gpu_baseline": _stats([m["baseline_error"] for m in gpus]),
                "models_gpu_in_range": sum(1 for m in gpus if m["in_range"]),
                "problems": _stats([m["error"] for m in problems]),
                "problems_baseline": _stats([m["baseline_error"] for m in problems]),
                "problems_in_range": sum(1 for m in problems if m["in_range"]),
            }
        )
    return {"min_share": min_share, "table": rows, "comparisons": comparisons}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| direction | what | n | median (ours / baseline) | p90 (ours / baseline) | in range |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in result["table"]:
        for what, key, in_range in (
            ("per op", "ops", None),
            ("per problem, GPU time", "problems", "problems_in_range"),
            ("per model, GPU time", "models_gpu", "models_gpu_in_range"),
            ("per model, iteration", "models", "models_in_range"),
        ):
            ours, base = r[key], r[f"{key}_baseline"]
            if ours["n"] == 0:
                continue
            fraction = f"{r[in_range]}/{ours['n']}" if in_range else "-"
            lines.append(
                f"| {r['direction']} | {what} | {ours['n']} | {_pct(ours['median'])} / {_pct(base['median'])} | "
                f"{_pct(ours['p90'])} / {_pct(base['p90'])} | {fraction} |"
            )
    lines.append("")
    lines.append(
        f"Error: |predicted / measured - 1|. Per op: bench rows and diagnose op groups holding at least "
        f"{100 * result['min_share']:g}% of their model's op time. Per problem, GPU time: the ops' time (counted and "
        "uncounted) of each generated problem of the advice corpus (benchmarks/predict_corpus_gpu.py). Per model, "
        "GPU time: the same of each model's diagnose report. Per model, iteration: the uninstrumented iteration's "
        "wall time, host gaps included (kept unchanged by the prediction: they follow the host, not the GPU). "
        "Baseline: spec peaks at the same efficiency (`roofline plot --device`)."
    )
    return "\n".join(lines) + "\n"


def unpacked(path: Path, into: Path) -> Path:
    """``path`` itself when it is a directory; a .tar.gz of one (as committed under benchmarks/results/predict)
    extracted into ``into`` (its one top-level directory returned)."""
    import tarfile

    if path.is_dir():
        return path
    if not path.is_file():
        raise SystemExit(f"Error: {path}: no such folder or .tar.gz (what benchmarks/predict_collect_gpu.py wrote)")
    with tarfile.open(path, "r:gz") as archive:
        if hasattr(tarfile, "data_filter"):  # Python 3.10.12+, 3.11.4+
            archive.extractall(into, filter="data")
        else:  # pragma: no cover - older patch releases
            archive.extractall(into)
    found = [p for p in into.iterdir() if p.is_dir()]
    if len(found) != 1:
        raise SystemExit(f"{path}: expected one directory of reports in the archive, found {len(found)}")
    return found[0]


def main() -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", type=Path, required=True, help="Reports measured on one GPU (a folder or its .tar.gz).")
    parser.add_argument("--b", type=Path, required=True, help="The same reports measured on the other GPU.")
    parser.add_argument("--out", type=Path, required=True, help="Output stem: writes OUT.json and OUT.md.")
    parser.add_argument("--min-share", type=float, default=MIN_SHARE, help="Diagnose op groups below it are left out.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as a_dir, tempfile.TemporaryDirectory() as b_dir:
        a, b = unpacked(args.a, Path(a_dir)), unpacked(args.b, Path(b_dir))
        result = error_table(a, b, min_share=args.min_share)
    from roofline.fileio import atomic_write_text

    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out.with_suffix(".json"), json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    atomic_write_text(args.out.with_suffix(".md"), text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
