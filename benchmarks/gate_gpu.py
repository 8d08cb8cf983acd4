"""`roofline gate` on a real GPU: does it stay quiet on noise and catch a planted regression?

    python3 benchmarks/gate_gpu.py --out DIR                      # CUDA (about 3 minutes on an H100)
    python3 benchmarks/gate_gpu.py --out DIR --device cpu --quick # the same logic on the CPU, tiny sizes

1. Baseline: `roofline bench SUITE` (8 bf16 rows of 20 us - 2 ms: GEMMs, a GEMV-shaped GEMM, element-wise, norms,
   fused attention) BASELINE_RUNS times (default 3), then `roofline baseline save` of all of them (each point's
   run-to-run drift widens its limit) and, for comparison, of the first run alone.
2. Planted regression: the same suite measured in this process, the two GEMMs' B operand stored with a stride of 2
   (a non-contiguous view, as a stray slice would leave it), so torch copies it before every GEMM: same keys,
   slower kernels. `roofline gate` on that report must exit 1 naming exactly those two rows.
3. Fresh runs: `roofline gate SUITE --baseline ...` measured and gated in one step, RUNS times (default 10),
   each a new process, as CI would: every one must exit 0. Each run's report is also gated against the one-run
   baseline (recorded, not required: it shows what the drift allowance buys).
Every step runs under a time budget (--budget-s, default 330 s): the fresh runs stop early, with a note, when the
next one would not fit. Writes into DIR: the suite, baseline-report-N.json, baseline.json, baseline-1run.json,
regressed-report.json, regression.{json,md,xml} (the gate's JSON, markdown and JUnit), run-NN.{json,gate.json,md,xml},
summary.json and summary.md; prints progress and a summary table. Exit 0 when every expectation held, 1 when one
did not, 2 when the set-up failed.
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
sys.path.insert(0, str(ROOT))

# 8 rows, 20 us - 2 ms each on an H100 (bench-gpu-h100.json): one bench row is about 0.5 s of rest + up to
# --max-time of sampling, so a run of the suite is ~10 s plus the process start.
GPU_SUITE = """\
name: gate-gpu
description: the gate demo's suite (benchmarks/gate_gpu.py), bf16, 20 us - 2 ms per row on an H100
workloads:
  - {kind: gemm, m: 4096, n: 4096, k: 4096, dtype: bf16}
  - {kind: gemm, m: 8192, n: 8192, k: 8192, dtype: bf16}
  - {kind: gemm, m: 8, n: 8192, k: 8192, dtype: bf16}
  - {kind: elementwise, op: gelu, numel: 33554432, dtype: bf16}
  - {kind: elementwise, op: add, numel: 67108864, dtype: bf16}
  - {kind: norm, op: [layernorm, softmax], rows: 16384, cols: 4096, dtype: bf16}
  - {kind: attention, batch: 1, heads: 32, seq_q: 2048, head_dim: 128, dtype: bf16, causal: true, impl: fused}
"""
# CPU: small fp32 shapes; the GEMV-shaped GEMM is memory-bound, so the planted copy of B triples its time.
QUICK_SUITE = """\
name: gate-quick
description: the gate demo's suite on the CPU (benchmarks/gate_gpu.py --quick), fp32, tiny
workloads:
  - {kind: gemm, m: 128, n: 128, k: 128, dtype: fp32}
  - {kind: gemm, m: 1, n: 1024, k: 1024, dtype: fp32}
  - {kind: elementwise, op: add, numel: 262144, dtype: fp32}
  - {kind: norm, op: layernorm, rows: 256, cols: 256, dtype: fp32}
"""
REGRESSED = {  # suite -> the GEMM labels whose B operand the planted regression makes non-contiguous
    "gate-gpu": ("m=4096 n=4096 k=4096", "m=8 n=8192 k=8192"),
    "gate-quick": ("m=1 n=1024 k=1024",),
}
STRIDE = {"gate-gpu": 2, "gate-quick": 8}  # the CPU's noise needs a bigger planted slowdown


QUICK_ENV = {"OMP_NUM_THREADS": "1"}  # CPU: one thread; OpenMP threads on a busy shared VM stall for milliseconds
EXTRA_ENV: dict[str, str] = {}


def env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "160", "NO_COLOR": "1", **EXTRA_ENV}


def _range(low: float, high: float) -> str:
    return f"{100 * low:+.1f}% .. {100 * high:+.1f}%"


def say(text: str) -> None:
    print(text, flush=True)


def roofline(args: list[str], timeout_s: float) -> tuple[int, str, str, float]:
    """`python -m roofline ARGS` in a new process: (exit code, stdout, stderr, seconds)."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "roofline", *args],
            capture_output=True,
            text=True,
            env=env(),
            cwd=ROOT,
            timeout=max(timeout_s, 1.0),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return 124, out, f"timed out after {timeout_s:.0f} s", time.perf_counter() - start
    return done.returncode, done.stdout, done.stderr, time.perf_counter() - start


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


# ------------------------------------------------------------------------------------------ the regression


def strided_gemm_build(build: Any, labels: tuple[str, ...], stride: int, torch: Any, device: Any) -> Any:
    """A bench build function whose GEMMs with these labels read B through a strided view (a copy per call)."""
    from roofline.bench import runners

    def regressed(kind: str, params: Any) -> Any:
        bench = build(kind, params)
        if kind != "gemm" or params.label() not in labels:
            return bench
        op = bench.op  # the same op name: the same key, so the gate compares it with the baseline's row
        bench.release()
        scale = params.k**-0.25
        a = runners.random(torch, (params.m, params.k), params.dtype, device, scale=scale)
        b = runners.random(torch, (params.k, stride * params.n), params.dtype, device, scale=scale)[:, ::stride]
        c = torch.empty((params.m, params.n), dtype=a.dtype, device=device)
        assert not b.is_contiguous()

        def fn() -> None:
            torch.matmul(a, b, out=c)

        settings = runners.fp32_math(torch, params.tf32) if params.dtype == "fp32" else None
        notes = [f"planted regression: B is a stride-{stride} view (copied before every GEMM)"]
        return runners.Bench(
            op, fn, lambda: [c], torch=torch, device=device, poison=[c], settings=settings, notes=notes
        )

    return regressed


def measure_regressed(suite: Path, name: str, device: str, max_time: float, out: Path) -> None:
    import torch

    from roofline.gate.run import measure_suite
    from roofline.report.schema import write_report

    torch_device = torch.device("cuda", 0) if device.startswith("cuda") else torch.device("cpu")
    labels = REGRESSED[name]
    report = measure_suite(
        str(suite),
        device=device,
        max_time_s=max_time,
        command=f"benchmarks/gate_gpu.py: {suite.name} with strided B for {', '.join(labels)}",
        wrap_build=lambda build: strided_gemm_build(build, labels, STRIDE[name], torch, torch_device),
    )
    write_report(report, out)


# ------------------------------------------------------------------------------------------ main


# NB: a shared CPU VM drifts by tens of percent between runs (seen here: -34% on unchanged code, every sample of a
# run shifted alike, so no test on one run's samples can tell); the quick mode checks the logic with a loose limit.
QUICK_RULES = ["--fail-on", "efficiency:-75%"]
RULES: list[str] = []


def gate_args(out: Path, stem: str) -> list[str]:
    return [*RULES, "--json", "--markdown", str(out / f"{stem}.md"), "--junit", str(out / f"{stem}.xml")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="directory for every file written")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--quick", action="store_true", help="tiny CPU shapes (tests the script's logic)")
    parser.add_argument("--runs", type=int, default=None, help="fresh gated runs (default 10; --quick 3)")
    parser.add_argument("--baseline-runs", type=int, default=3, help="bench runs pooled into the baseline (3)")
    parser.add_argument("--max-time", type=float, default=None, help="bench --max-time per row (0.5; quick 0.05)")
    parser.add_argument("--budget-s", type=float, default=330.0, help="stop starting runs past this (seconds)")
    parser.add_argument(
        "--fail-on", action="append", default=[], metavar="RULE", help="a gate rule for every gate call (repeatable)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    quick = args.quick
    if quick:
        EXTRA_ENV.update(QUICK_ENV)
        os.environ.update(QUICK_ENV)  # this process measures the planted regression: the same threads
        RULES.extend(QUICK_RULES)
    for rule in args.fail_on:
        RULES.extend(["--fail-on", rule])
    runs = args.runs if args.runs is not None else (3 if quick else 10)
    max_time = args.max_time if args.max_time is not None else (0.05 if quick else 0.5)
    name = "gate-quick" if quick else "gate-gpu"
    suite = out / f"{name}.yaml"
    suite.write_text(QUICK_SUITE if quick else GPU_SUITE)
    measure = ["--device", args.device, "--max-time", str(max_time)]
    summary: dict[str, Any] = {
        "device": args.device,
        "suite": name,
        "max_time_s": max_time,
        "rules": RULES or ["defaults"],
        "runs": [],
    }

    def left() -> float:
        return args.budget_s - (time.perf_counter() - started)

    # 1. baseline: several runs pooled (and the first alone, for comparison)
    reports = []
    for run in range(1, args.baseline_runs + 1):
        say(f"[gate_gpu] baseline run {run}/{args.baseline_runs}: roofline bench {suite.name} {' '.join(measure)}")
        report = out / f"baseline-report-{run}.json"
        code, _, err, seconds = roofline(["bench", str(suite), *measure, "-o", str(report)], left())
        if code != 0:
            say(f"[gate_gpu] baseline run failed (exit {code}): {last_line(err)}")
            return 2
        say(f"[gate_gpu]   {seconds:.1f} s")
        reports.append(str(report))
        summary.setdefault("baseline_s", []).append(seconds)
    for target, pooled in (("baseline.json", reports), ("baseline-1run.json", reports[:1])):
        code, text, err, _ = roofline(["baseline", "save", *pooled, "-o", str(out / target)], 60)
        if code != 0:
            say(f"[gate_gpu] baseline save failed (exit {code}): {last_line(err)}")
            return 2
        say(f"[gate_gpu]   {text.splitlines()[0]}")
    per_run = max(summary["baseline_s"]) * 1.3 + 5  # a gated run measures the same suite, plus the gate

    # 2. the planted regression (in this process), gated from a report
    say(f"[gate_gpu] planted regression: strided B for {', '.join(REGRESSED[name])}")
    start = time.perf_counter()
    try:
        measure_regressed(suite, name, args.device, max_time, out / "regressed-report.json")
    except Exception as exc:  # report it and go on: the fresh runs still say something
        say(f"[gate_gpu]   measuring failed: {type(exc).__name__}: {exc}")
        summary["regression"] = {"ok": False, "error": str(exc)}
    else:
        code, text, err, _ = roofline(
            [
                "gate",
                str(out / "regressed-report.json"),
                "-b",
                str(out / "baseline.json"),
                *gate_args(out, "regression"),
            ],
            120,
        )
        (out / "regression.json").write_text(text)
        failed = []
        if text.strip():
            result = json.loads(text)
            failed = [p["label"] for p in result["points"] if p["verdict"] == "regression"]
        expected = sorted(f"gemm {label} {'fp32' if quick else 'bf16'}" for label in REGRESSED[name])
        ok = code == 1 and sorted(failed) == expected
        summary["regression"] = {"ok": ok, "exit_code": code, "failed": failed, "expected": expected,
                                 "seconds": time.perf_counter() - start}  # fmt: skip
        say(f"[gate_gpu]   exit {code}; regressions: {', '.join(failed) or 'none'} -> {'ok' if ok else 'NOT OK'}")
        if code == 2:
            say(f"[gate_gpu]   {last_line(err)}")

    # 3. fresh runs, each measured and gated in one step
    for index in range(1, runs + 1):
        if left() < per_run:
            say(f"[gate_gpu] budget: {left():.0f} s left, a run takes ~{per_run:.0f} s: stop at {index - 1} of {runs}")
            summary["stopped_early"] = f"{index - 1} of {runs} runs (budget)"
            break
        stem = f"run-{index:02d}"
        gate = ["gate", str(suite), "-b", str(out / "baseline.json"), *measure, "-o", str(out / f"{stem}.json")]
        code, text, err, seconds = roofline([*gate, *gate_args(out, stem)], min(left(), 3 * per_run))
        (out / f"{stem}.gate.json").write_text(text)
        row: dict[str, Any] = {"run": index, "exit_code": code, "seconds": seconds}
        if text.strip():
            result = json.loads(text)
            verdicts = [p["verdict"] for p in result["points"]]
            changes = [c["change"] for p in result["points"] for c in p["checks"] if c["metric"] == "efficiency"]
            row.update(
                verdict=result["verdict"],
                counts={v: verdicts.count(v) for v in sorted(set(verdicts))},
                worst_efficiency_change=min(changes) if changes else None,
                best_efficiency_change=max(changes) if changes else None,
                warnings=result["warnings"],
            )
        else:
            row["error"] = last_line(err)
        if (out / f"{stem}.json").is_file():  # the same report against the one-run baseline: no drift allowance
            alone, text1, _, _ = roofline(
                ["gate", str(out / f"{stem}.json"), "-b", str(out / "baseline-1run.json"), *RULES, "--json"], 60
            )
            row["one_run_baseline_exit_code"] = alone
            if text1.strip():
                row["one_run_baseline_failed"] = [
                    p["label"] for p in json.loads(text1)["points"] if p["verdict"] in ("regression", "inconclusive")
                ]
        summary["runs"].append(row)
        spread = (
            f"efficiency change {_range(row['worst_efficiency_change'], row['best_efficiency_change'])}"
            if row.get("worst_efficiency_change") is not None
            else row.get("error", "")
        )
        alone = row.get("one_run_baseline_exit_code")
        say(
            f"[gate_gpu] run {index:2d}/{runs}: exit {code} {row.get('verdict', '')} in {seconds:.1f} s; {spread}; "
            f"against the one-run baseline: exit {alone}"
        )
        per_run = max(per_run, seconds * 1.1)

    # summary
    done = summary["runs"]
    passed = sum(1 for r in done if r["exit_code"] == 0)
    summary["fresh_runs_passed"] = f"{passed} of {len(done)}"
    summary["ok"] = bool(done) and passed == len(done) and summary.get("regression", {}).get("ok", False)
    summary["seconds"] = time.perf_counter() - started
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        f"# gate demo on {args.device}: {'OK' if summary['ok'] else 'NOT OK'} ({summary['seconds']:.0f} s)",
        "",
        "| run | exit | verdict | points | efficiency change (min .. max) | seconds | one-run baseline |",
        "|---|---:|---|---|---|---:|---|",
    ]
    for r in done:
        counts = ", ".join(f"{n} {v}" for v, n in r.get("counts", {}).items())
        change = (
            _range(r["worst_efficiency_change"], r["best_efficiency_change"])
            if r.get("worst_efficiency_change") is not None
            else r.get("error", "")
        )
        alone = f"exit {r.get('one_run_baseline_exit_code')}" + (
            f": {', '.join(r['one_run_baseline_failed'])}" if r.get("one_run_baseline_failed") else ""
        )
        cells = [str(r["run"]), str(r["exit_code"]), r.get("verdict", ""), counts, change, f"{r['seconds']:.1f}", alone]
        lines.append("| " + " | ".join(cells) + " |")
    reg = summary.get("regression", {})
    lines += [
        "",
        f"planted regression: exit {reg.get('exit_code')}, failed: {', '.join(reg.get('failed', [])) or 'none'} "
        f"(expected {', '.join(reg.get('expected', []))}): {'ok' if reg.get('ok') else 'NOT OK'}",
    ]
    failing_alone = sum(1 for r in done if r.get("one_run_baseline_exit_code") not in (0, None))
    summary["one_run_baseline_not_passed"] = f"{failing_alone} of {len(done)}"
    lines.append(f"against the first baseline run alone (no drift allowance): {failing_alone} of {len(done)} failed")
    if summary.get("stopped_early"):
        lines.append(f"stopped early: {summary['stopped_early']}")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    say("")
    say("\n".join(lines))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
