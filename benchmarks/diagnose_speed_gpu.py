"""How long `roofline diagnose` takes, and where the time goes (issue 15, item 1; issue 30, item 3), on a CUDA machine.

    python benchmarks/diagnose_speed_gpu.py --out DIR [--budget-s 540] [--only NAME,...] [--corpus] [--shard I/N]
    python benchmarks/diagnose_speed_gpu.py --out DIR --device cpu --quick [--corpus]   (a check on the CPU)

Diagnose's own time over the example models and the corpus (issue 30, item 3) on the H100, in two commands of at
most 10 minutes: `--out DIR1 --corpus --shard 1/2 --budget-s 580`, then `--out DIR2 --corpus --shard 2/2`.

Each case runs as a fresh process, as a user starts it: `python -m roofline diagnose FILE --device cuda --dtype
D -o DIR/diag-NAME.json` (default --warmup/--iters: auto). Cases, in this order (the targets first, so that the
time bound cuts the least important ones):
1. benchmarks/models/gpt2_hf.py (transformers GPT-2 small, prefill 8 x 1024, bf16; skipped when transformers is
   missing) and benchmarks/models/gpt12.py (bf16);
2. a few single-op files written into DIR/ops (one GEMM, a softmax, a layer norm, an add);
3. every example model in workloads/models (ROOFLINE_MODEL_SIZE=large; the dtype benchmarks/diagnose_fixes_gpu.py's
   FIXES gives it);
4. with --corpus: every problem the advice corpus generates (benchmarks/advice_corpus.py: modules, chains, the small
   host-bound ones; its example models are those of 3.), each written into DIR/corpus/ID.py as a model file (a
   module-level `model` and `example_inputs`, built by the corpus at its GPU shape in its dtype, bf16 or fp32).
--only NAME,... keeps the cases named (shell patterns: --only 'conv*,model-*' ...); --shard I/N keeps every Nth
case from the Ith (1-based) of those, to split a long run over several commands.
Before the cases, roofline's modules are compiled to bytecode (`python -m compileall`, as a pip install does; the
bytecode is written even where PYTHONDONTWRITEBYTECODE is set): a checkout that never wrote its bytecode compiles
every module it imports in every process (0.3-0.5 s more of diagnose's own time on this project's CPU host);
--no-compile leaves the checkout as it is.
--device cpu --quick checks the script on a CPU: the single-op files and corpus problems at tiny CPU shapes, the
example models at ROOFLINE_MODEL_SIZE=small, fp32, GPT-2 and gpt12 not run.
Per case: the wall time of the process, the report's stage timings (`diagnose.stages`) and fixed floor
(`diagnose.floor_s`: Python start, torch import, CUDA initialisation), the warm-up and profiled iterations run, and
diagnose's own time: the wall time less the floor and the model's iterations (the warmup, timed and profiled
stages), so the command's own stages and its exit.
Targets (H100): a single-kernel problem (the median over the single-op files and the example models) at most
5 s; GPT-2 small prefill at most 8 s; diagnose's own time at most 0.5 s, the median over the single-op files, the
example models and the corpus (its p90 printed beside it). The whole run stays within --budget-s (default 540 s:
9 minutes); a case that cannot start within it is listed as skipped. Prints a table and writes DIR/summary.json.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from roofline.fileio import atomic_write_text  # noqa: E402

MODELS = ROOT / "workloads" / "models"
SINGLE_TARGET_S = 5.0  # the median single-kernel problem
GPT2_TARGET_S = 8.0  # GPT-2 small prefill, batch 8 x 1024, bf16
OWN_TARGET_S = 0.5  # diagnose's own time (wall - floor - the model's iterations), the median
OWN_KINDS = ("single", "corpus")  # the cases the own-time target is over
ITERATION_STAGES = (
    "first_call",
    "warmup",
    "timed",
    "profiled",
)  # the model's own iterations (first_call: a GPU's lazy init)
CASE_LIMIT_S = 150.0  # one case at most (a hung run must not take the whole budget)
MIN_START_S = 20.0  # a case starts only with this much of the budget left

# single-op files: name -> (forward's arguments, get_inputs()'s tensors, the same at --quick, what forward returns)
OPS: dict[str, tuple[str, str, str, str]] = {
    "op_gemm_8192": (
        "a, b",
        "torch.randn(8192, 8192), torch.randn(8192, 8192)",
        "torch.randn(128, 128), torch.randn(128, 128)",
        "torch.matmul(a, b)",
    ),
    "op_softmax": ("a", "torch.randn(8192, 16384),", "torch.randn(64, 256),", "torch.softmax(a, dim=-1)"),
    "op_layernorm": (
        "a",
        "torch.randn(16384, 8192),",
        "torch.randn(256, 64),",
        "torch.nn.functional.layer_norm(a, a.shape[-1:])",
    ),
    "op_add": (
        "a, b",
        "torch.randn(1 << 28), torch.randn(1 << 28)",
        "torch.randn(1 << 14), torch.randn(1 << 14)",
        "a + b",
    ),
}


def single_op_file(folder: Path, name: str, quick: bool = False) -> Path:
    args, inputs, quick_inputs, expression = OPS[name]
    path = folder / f"{name}.py"
    path.write_text(
        f'"""One op for the diagnose-speed benchmark: {expression}."""\n\n'
        "import torch\n\n\n"
        "class Model(torch.nn.Module):\n"
        f"    def forward(self, {args}):\n"
        f"        return {expression}\n\n\n"
        "def get_inputs():\n"
        f"    return ({quick_inputs if quick else inputs})\n",
        encoding="utf-8",
    )
    return path


def corpus_file_name(problem_id: str) -> str:
    """A file name for a corpus problem's id (``conv+mish-stem`` -> ``conv_mish-stem.py``)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", problem_id) + ".py"


def corpus_file(folder: Path, problem_id: str, device: str, quick: bool) -> Path:
    """A model file for one problem of the advice corpus (benchmarks/advice_corpus.py): a module-level ``model`` and
    ``example_inputs`` (roofline's model-variable convention), built by the corpus on ``device`` (the weights made
    there) at its GPU shape, or its CPU shape with ``quick``, in the corpus's dtype for the device."""
    path = folder / corpus_file_name(problem_id)
    path.write_text(
        f'"""The advice corpus\'s problem {problem_id} (benchmarks/advice_corpus.py) for the diagnose-speed '
        'benchmark."""\n\n'
        "import sys\n\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n\n"
        "from advice_corpus import corpus  # noqa: E402\n\n"
        f"PROBLEM, DEVICE, QUICK = {problem_id!r}, {device!r}, {quick!r}\n"
        "_problem = next(p for p in corpus(models=False) if p.id == PROBLEM)\n"
        "model, example_inputs, _kwargs = _problem.build(DEVICE, QUICK)\n"
        "assert not _kwargs, 'a generated problem takes positional inputs only'\n",
        encoding="utf-8",
    )
    return path


def corpus_problems() -> list[Any]:
    """The problems the advice corpus generates (its example models are this script's own cases)."""
    module = sys.modules.get("advice_corpus")
    if module is None:
        spec = importlib.util.spec_from_file_location("advice_corpus", ROOT / "benchmarks" / "advice_corpus.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["advice_corpus"] = module  # NB: before it runs (its dataclasses look their module up)
        spec.loader.exec_module(module)
    return list(module.corpus(models=False))


def fixes() -> dict[str, tuple[str, str]]:
    """FIXES of benchmarks/diagnose_fixes_gpu.py: model -> (dtype on the GPU, fix)."""
    spec = importlib.util.spec_from_file_location("diagnose_fixes_gpu", ROOT / "benchmarks" / "diagnose_fixes_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.FIXES)


def cases(folder: Path, *, device: str = "cuda", quick: bool = False, corpus: bool = False) -> list[dict[str, Any]]:
    """(name, file, dtype, kind, target) in the order they run; ``quick``: the CPU check (tiny shapes, fp32, no
    GPT-2 or gpt12)."""
    out: list[dict[str, Any]] = []
    gpt2: dict[str, Any] = {"name": "gpt2_hf", "file": None, "dtype": "bf16", "kind": "gpt2"}
    if quick:
        out.append({**gpt2, "skip": "--quick"})
        out.append({"name": "gpt12", "file": None, "dtype": "bf16", "kind": "model", "skip": "--quick"})
    else:
        if importlib.util.find_spec("transformers") is not None:
            out.append({**gpt2, "file": ROOT / "benchmarks/models/gpt2_hf.py"})
        else:
            out.append({**gpt2, "skip": "no transformers"})
        out.append({"name": "gpt12", "file": ROOT / "benchmarks/models/gpt12.py", "dtype": "bf16", "kind": "model"})
    ops = folder / "ops"
    ops.mkdir(parents=True, exist_ok=True)
    op_dtype = "fp32" if quick else "bf16"
    out += [
        {"name": name, "file": single_op_file(ops, name, quick), "dtype": op_dtype, "kind": "single"} for name in OPS
    ]
    dtypes = fixes()
    for path in sorted(MODELS.glob("*.py")):
        dtype = "fp32" if quick else dtypes.get(path.stem, ("bf16", ""))[0]
        out.append({"name": path.stem, "file": path, "dtype": dtype, "kind": "single"})
    if corpus:
        where = folder / "corpus"
        where.mkdir(parents=True, exist_ok=True)
        for problem in corpus_problems():
            dtype = problem.dtype(device)
            out.append({"name": problem.id, "file": corpus_file(where, problem.id, device, quick), "dtype": dtype,
                        "kind": "corpus"})  # fmt: skip
    for case in out:
        case["target_s"] = {"gpt2": GPT2_TARGET_S, "single": SINGLE_TARGET_S}.get(case["kind"])
    return out


def select(all_cases: list[dict[str, Any]], only: str = "", shard: str = "") -> list[dict[str, Any]]:
    """The cases --only names (comma-separated shell patterns; all when empty), then --shard I/N's part of them."""
    patterns = [name.strip() for name in only.split(",") if name.strip()]
    chosen = [c for c in all_cases if not patterns or any(fnmatch.fnmatchcase(c["name"], p) for p in patterns)]
    if not shard:
        return chosen
    index, _, count = shard.partition("/")
    i, n = int(index), int(count)
    if not 1 <= i <= n:
        raise ValueError(f"--shard {shard}: I/N with 1 <= I <= N")
    return chosen[i - 1 :: n]


def run_case(case: dict[str, Any], folder: Path, limit_s: float, device: str, size: str) -> dict[str, Any]:
    report = folder / f"diag-{case['name']}.json"
    command = [sys.executable, "-m", "roofline", "diagnose", str(case["file"]), "--device", device]
    command += ["--dtype", case["dtype"], "-o", str(report), "--force"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env |= {"ROOFLINE_MODEL_SIZE": size, "COLUMNS": "160"}
    row: dict[str, Any] = {"model": case["name"], "dtype": case["dtype"], "kind": case["kind"]}
    row["target_s"] = case["target_s"]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return {**row, "wall_s": time.perf_counter() - start, "error": f"timed out after {limit_s:.0f} s"}
    row["wall_s"] = time.perf_counter() - start
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return {**row, "error": f"exit {done.returncode}: {lines[-1] if lines else ''}"}
    about = json.loads(report.read_text())["diagnose"]
    summary = [line for line in done.stderr.splitlines() if line.startswith("diagnose took ")]
    out = {
        **row,
        "floor_s": about.get("floor_s"),
        "stages": about.get("stages", {}),
        "warmup": about.get("warmup"),
        "iters": about.get("iters"),
        "summary_line": summary[-1] if summary else "",
    }
    out["own_s"] = own_seconds(out)
    return out


def own_seconds(row: dict[str, Any]) -> float | None:
    """Diagnose's own time in a case: its process's wall time less the fixed floor (Python's start, torch's import,
    CUDA's initialisation) and the model's iterations (warm-up, timed, profiled). None without a report."""
    if "wall_s" not in row or "error" in row or row.get("floor_s") is None:
        return None
    stages = row.get("stages", {})
    return float(row["wall_s"] - row["floor_s"] - sum(stages.get(name, 0.0) for name in ITERATION_STAGES))


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` (linear between the closest ranks, as numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = fraction * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def own_time_summary(rows: list[dict[str, Any]], kinds: tuple[str, ...] = OWN_KINDS) -> dict[str, Any]:
    """Diagnose's own time over the cases of ``kinds`` that ran: median, p90, the mean of each stage beyond the
    floor and the iterations, and the 0.5 s target's verdict (on the median)."""
    own = [r for r in rows if r.get("kind") in kinds and r.get("own_s") is not None]
    values = [r["own_s"] for r in own]
    summary: dict[str, Any] = {"cases": len(values), "target_s": OWN_TARGET_S, "kinds": list(kinds)}
    if not values:
        return {**summary, "median_s": None, "p90_s": None, "pass": False}
    summary["median_s"] = statistics.median(values)
    summary["p90_s"] = percentile(values, 0.9)
    summary["pass"] = summary["median_s"] <= OWN_TARGET_S
    skip = {"python", "torch_import", "cuda_init", *ITERATION_STAGES}
    names = [n for r in own for n in r.get("stages", {}) if n not in skip]
    medians = {n: statistics.median(r.get("stages", {}).get(n, 0.0) for r in own) for n in dict.fromkeys(names)}
    exits = [r["own_s"] - sum(v for n, v in r.get("stages", {}).items() if n not in skip) for r in own]
    summary["stage_median_s"] = {**medians, "write+exit": statistics.median(exits)}
    return summary


def own_time_line(summary: dict[str, Any]) -> str:
    """The summary's line for diagnose's own time."""
    if summary["median_s"] is None:
        return f"diagnose's own time: no case of {'/'.join(summary['kinds'])} ran"
    parts = ", ".join(f"{name} {value:.2f}" for name, value in summary["stage_median_s"].items())
    return (
        f"diagnose's own time (wall - floor - iterations): median {summary['median_s']:.2f} s, "
        f"p90 {summary['p90_s']:.2f} s over {summary['cases']} cases, target median <= {summary['target_s']} s: "
        f"{'PASS' if summary['pass'] else 'FAIL'}\n  stage medians (s): {parts}"
    )


def compile_bytecode() -> str:
    """roofline's modules (and the corpus's, which its model files import) compiled to bytecode, as an install
    does; what was done, for the summary."""
    targets = [str(ROOT / "roofline"), str(ROOT / "benchmarks" / "advice_corpus.py")]
    done = subprocess.run([sys.executable, "-m", "compileall", "-q", *targets], capture_output=True, text=True)
    return "compiled (python -m compileall)" if done.returncode == 0 else f"compileall failed: {done.stdout[-200:]}"


def stages_text(stages: dict[str, float]) -> str:
    skip = {"python", "torch_import", "cuda_init"}
    return " ".join(f"{name} {value:.2f}" for name, value in stages.items() if name not in skip)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder for the reports and summary.json")
    parser.add_argument("--budget-s", type=float, default=540.0, help="the whole run's time bound (seconds)")
    parser.add_argument("--device", default="cuda", help="cuda (the targets) or cpu (a check of the script)")
    parser.add_argument("--size", default=None, help="ROOFLINE_MODEL_SIZE of the example models (default: large; "
                        "small with --quick)")  # fmt: skip
    parser.add_argument("--only", default="", help="comma-separated case names or shell patterns (default: all)")
    parser.add_argument("--corpus", action="store_true", help="also the advice corpus's generated problems")
    parser.add_argument("--shard", default="", help="I/N: every Nth case of those selected, from the Ith")
    parser.add_argument("--no-compile", action="store_true", help="do not compile roofline's modules to bytecode "
                        "first (python -m compileall)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="tiny CPU shapes, fp32, no GPT-2/gpt12 (with "
                        "--device cpu: a check of the script)")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    size = args.size or ("small" if args.quick else "large")
    began = time.perf_counter()
    bytecode = "as found" if args.no_compile else compile_bytecode()
    rows: list[dict[str, Any]] = []
    chosen = select(cases(args.out, device=args.device, quick=args.quick, corpus=args.corpus), args.only, args.shard)
    for case in chosen:
        left = args.budget_s - (time.perf_counter() - began)
        base = {"model": case["name"], "dtype": case["dtype"], "kind": case["kind"], "target_s": case["target_s"]}
        if case.get("skip"):
            rows.append({**base, "skipped": case["skip"]})
        elif left < MIN_START_S:
            rows.append({**base, "skipped": "time budget"})
        else:
            rows.append(run_case(case, args.out, min(CASE_LIMIT_S, left), args.device, size))
        row = rows[-1]
        if row.get("target_s") is not None and "wall_s" in row and "error" not in row:
            row["pass"] = row["wall_s"] <= row["target_s"]
        print(f"{row['model']}: {row.get('summary_line') or row.get('error') or row.get('skipped')}", flush=True)

    print()
    print(
        f"{'model':<28} {'dtype':<5} {'wall s':>7} {'floor s':>7} {'own s':>6} {'w+i':>5} {'target':>6} {'pass':>5}"
        "  stages (s)"
    )
    for row in rows:
        wall = f"{row['wall_s']:.2f}" if "wall_s" in row else "-"
        floor = f"{row['floor_s']:.2f}" if row.get("floor_s") is not None else "-"
        own = f"{row['own_s']:.2f}" if row.get("own_s") is not None else "-"
        counts = f"{row['warmup']}+{row['iters']}" if row.get("iters") is not None else "-"
        target = f"{row['target_s']:.0f}" if row.get("target_s") is not None else "-"
        verdict = {True: "yes", False: "NO"}.get(row.get("pass"), "-")  # type: ignore[arg-type]
        detail = row.get("error") or row.get("skipped") or stages_text(row.get("stages", {}))
        print(
            f"{row['model']:<28} {row['dtype']:<5} {wall:>7} {floor:>7} {own:>6} {counts:>5} {target:>6} "
            f"{verdict:>5}  {detail}"
        )

    singles = [r["wall_s"] for r in rows if r["kind"] == "single" and "wall_s" in r and "error" not in r]
    single_floors = [r["floor_s"] for r in rows if r["kind"] == "single" and r.get("floor_s") is not None]
    gpt2 = next((r for r in rows if r["kind"] == "gpt2" and "wall_s" in r and "error" not in r), None)
    own = own_time_summary(rows)
    verdicts = {
        "single_kernel_median_s": statistics.median(singles) if singles else None,
        "single_kernel_median_floor_s": statistics.median(single_floors) if single_floors else None,
        "single_kernel_cases": len(singles),
        "single_kernel_target_s": SINGLE_TARGET_S,
        "gpt2_s": gpt2["wall_s"] if gpt2 else None,
        "gpt2_floor_s": gpt2.get("floor_s") if gpt2 else None,
        "gpt2_target_s": GPT2_TARGET_S,
        "own_time": own,
    }
    verdicts["single_kernel_pass"] = singles != [] and verdicts["single_kernel_median_s"] <= SINGLE_TARGET_S
    verdicts["gpt2_pass"] = gpt2 is not None and gpt2["wall_s"] <= GPT2_TARGET_S
    print()
    if singles:
        print(
            f"single-kernel problems: median {verdicts['single_kernel_median_s']:.2f} s over {len(singles)} "
            f"(floor median {verdicts['single_kernel_median_floor_s'] or 0:.2f} s), target <= {SINGLE_TARGET_S:.0f} s: "
            f"{'PASS' if verdicts['single_kernel_pass'] else 'FAIL'}"
        )
    if gpt2 is not None:
        print(
            f"GPT-2 small prefill 8x1024 bf16: {gpt2['wall_s']:.2f} s (floor {gpt2.get('floor_s') or 0:.2f} s), "
            f"target <= {GPT2_TARGET_S:.0f} s: {'PASS' if verdicts['gpt2_pass'] else 'FAIL'}"
        )
    print(own_time_line(own))
    summary = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "python": platform.python_version(),
        "elapsed_s": time.perf_counter() - began,
        "bytecode": bytecode,
        "verdicts": verdicts,
        "rows": rows,
    }
    atomic_write_text(args.out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    print(f"\nwritten: {args.out / 'summary.json'} ({summary['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
