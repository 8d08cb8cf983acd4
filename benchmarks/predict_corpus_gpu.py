"""Diagnose every generated problem of the advice corpus in one process, one report each: the per-problem set of
`roofline predict`'s validation (issue 30, item 1).

    python3 benchmarks/predict_corpus_gpu.py --out DIR [--time-limit 300] [--filter conv,softmax]   # GPU-only

Run it on each of the two GPUs (an H100 and an H200) into the DIR benchmarks/predict_collect_gpu.py filled (its
calibration.json is what the predictor uses), then on any machine:

    python3 benchmarks/predict_pairs.py --a DIR_H100 --b DIR_H200 --out benchmarks/results/predict/predict-pairs

Per problem of benchmarks/advice_corpus.py's generated tables (modules, conv and Linear chains, epilogues, the
small host-bound ones; the example models are diagnosed by predict_collect_gpu.py as files): built on the GPU in
bf16 with its GPU shape, ``roofline.diagnose(model, inputs, device='cuda', warmup=3)`` (iterations: auto), the
report written atomically as DIR/diag-corpus-ID.json ('+' in an id written as '_'). A problem that fails to build
or diagnose is listed with its one-line reason in DIR/corpus-manifest.json (written after every problem) and the
run goes on; --time-limit (seconds, default 300) stops between problems and lists the rest as not run. Exit 0
when every problem that ran succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT), str(ROOT / "benchmarks")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from advice_corpus import Problem, corpus, free_device  # noqa: E402

from roofline.fileio import atomic_write_text  # noqa: E402


def report_name(problem_id: str) -> str:
    """The report's file name: diag-corpus-ID.json, with '+' (chains) as '_'."""
    return f"diag-corpus-{problem_id.replace('+', '_')}.json"


def select(problems: list[Problem], filters: str) -> list[Problem]:
    wanted = [f for f in filters.split(",") if f]
    return [p for p in problems if not wanted or any(w in p.id for w in wanted)]


def diagnose_one(problem: Problem, device: str, quick: bool) -> Any:
    import roofline

    model, inputs, kwargs = problem.build(device, quick)
    try:
        return roofline.diagnose(model, inputs, kwargs, device=device, warmup=3, name=problem.id).report()
    finally:
        del model, inputs, kwargs
        free_device(device)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="directory for the reports (created)")
    parser.add_argument("--device", default="cuda", help="cuda | cuda:N | cpu (cpu: the small fp32 shapes)")
    parser.add_argument("--filter", default="", help="comma list: problems whose id contains any of these")
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds for the whole run (default 300)")
    args = parser.parse_args(argv)
    quick = not args.device.startswith("cuda")
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    problems = select(corpus(models=False), args.filter)
    start = time.monotonic()
    records: list[dict[str, Any]] = []
    not_run: list[str] = []
    failed = False
    for problem in problems:
        if time.monotonic() - start > args.time_limit:
            not_run.append(problem.id)
            continue
        began = time.monotonic()
        record: dict[str, Any] = {"id": problem.id, "kind": problem.kind, "family": problem.family}
        try:
            report = diagnose_one(problem, args.device, quick)
            path = out / report_name(problem.id)
            atomic_write_text(path, report.to_json())
            record["report"] = path.name
        except Exception as exc:  # one problem's failure is recorded, the run goes on
            failed = True
            record["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        record["seconds"] = round(time.monotonic() - began, 2)
        records.append(record)
        print(f"{problem.id:<40} {record['seconds']:6.1f} s  {record.get('error', 'ok')}", flush=True)
        manifest = {"device": args.device, "problems": records, "not_run": not_run}
        atomic_write_text(out / "corpus-manifest.json", json.dumps(manifest, indent=2) + "\n")
    manifest = {
        "device": args.device,
        "elapsed_s": round(time.monotonic() - start, 1),
        "problems": records,
        "not_run": not_run,
    }
    atomic_write_text(out / "corpus-manifest.json", json.dumps(manifest, indent=2) + "\n")
    print(f"{len(records)} problem(s) in {manifest['elapsed_s']} s; not run (time limit): {len(not_run)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
