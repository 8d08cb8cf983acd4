"""Our instruction estimate (roofline.costs.instructions) against the instructions a kernel executes, measured by
Nsight Compute on a GPU (issue 27: the bound classes that disagree with ncu are index-heavy kernels).

    python benchmarks/instruction_counts_gpu.py --out benchmarks/results/instruction-counts-h100.json

For each case (an advice-corpus problem and its dominant kernel) ncu profiles the kernel's second launch with
``--clock-control none`` and reads: its duration, the thread-instructions executed (sm__sass_thread_inst_executed),
the warp-instructions issued, the integer and shared-memory shares, and the pipes' utilisation (issue, ALU, FMA,
LSU). Per output element: measured thread-instructions beside the estimate, their ratio, and the time the estimate
says the SMs need against the kernel's measured time (the share the instruction class compares with NEAR). Prints a
table and writes a JSON. Needs ncu on PATH and a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from diagnose_fixes_gpu import parse_metrics  # noqa: E402

# NB: the first set is the counts (any ncu since 2020 has them); the second the pipes, asked apart so that a metric
# an ncu lacks costs only that set
COUNTS = (
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    "sm__sass_thread_inst_executed.sum",
    "smsp__inst_executed.sum",
    "smsp__sass_thread_inst_executed_op_integer_pred_on.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
    "smsp__sass_inst_executed_op_global_ld.sum",
    "smsp__sass_inst_executed_op_global_st.sum",
)
PIPES = (
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__issue_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__mio_inst_issued.avg.pct_of_peak_sustained_active",
)

RUNNER = """
import sys
sys.path.insert(0, {benchmarks!r}); sys.path.insert(0, {root!r})
from advice_oracle import replay
replay({problem!r}, "cuda", False)
"""


def _taps(length: int, out: int, kernel: int, stride: int, padding: int) -> int:
    from roofline.costs.aten.pooling import window_taps

    return window_taps(length, out, kernel, stride, padding, 1)


def cases() -> list[dict[str, Any]]:
    """(problem, kernel, elements, the estimate's arguments): the advice corpus's GPU shapes (bf16)."""
    m, k = 131072, 4096
    n, c, h = 64, 128, 256
    window_max = (_taps(h, h // 2, 3, 2, 1) / (h // 2)) ** 2  # MaxPool2d(3, stride=2, padding=1)
    return [
        {"problem": "softplus-rows128k", "kernel": "vectorized_elementwise_kernel", "elements": m * k,
         "op": "aten::softplus", "inputs": [[m, k]], "output": [m, k]},
        {"problem": "gelu-rows128k", "kernel": "vectorized_elementwise_kernel", "elements": m * k,
         "op": "aten::gelu", "inputs": [[m, k]], "output": [m, k]},
        # the convolution's NCHW -> NHWC copy of its input: torch's generic element-wise kernel
        {"problem": "conv2d-c64", "kernel": "elementwise_kernel", "elements": 64 * 64 * 224 * 224,
         "op": "aten::copy_", "inputs": [[64, 64, 224, 224]], "output": [64, 64, 224, 224], "strided": True},
        {"problem": "maxpool2d-c128", "kernel": "max_pool_forward_nchw", "elements": n * c * (h // 2) ** 2,
         "op": "aten::max_pool2d_with_indices", "inputs": [[n, c, h, h]], "output": [n, c, h // 2, h // 2],
         "window": window_max},
        {"problem": "avgpool2d-c128", "kernel": "avg_pool2d_out_cuda_frame", "elements": n * c * (h // 2) ** 2,
         "op": "aten::avg_pool2d", "inputs": [[n, c, h, h]], "output": [n, c, h // 2, h // 2], "window": 4.0},
        {"problem": "cumsum-rows128k", "kernel": "tensor_kernel_scan_innermost_dim", "elements": m * k,
         "op": "aten::cumsum", "inputs": [[m, k]], "output": [m, k]},
    ]  # fmt: skip


def profile(case: dict[str, Any], metrics: tuple[str, ...], work: Path, timeout: float) -> tuple[dict[str, float], str]:
    ncu = shutil.which("ncu")
    script = work / f"run-{case['problem']}.py"
    script.write_text(RUNNER.format(benchmarks=str(ROOT / "benchmarks"), root=str(ROOT), problem=case["problem"]))
    cmd = [ncu or "ncu", "--clock-control", "none", "--metrics", ",".join(metrics), "--csv"]
    cmd += ["-k", f"regex:^{case['kernel']}$", "--launch-skip", "1", "--launch-count", "1", sys.executable, str(script)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {}, f"ncu ran past {timeout:.0f} s"
    values = parse_metrics(done.stdout)
    error = "" if values else (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["?"])[-1]
    return values, error[:300]


def estimate_row(case: dict[str, Any], measured: dict[str, float], sheet_name: str = "h100-sxm") -> dict[str, Any]:
    from roofline.costs.instructions import estimate, instruction_time, issue_rates
    from roofline.specs.loader import load_registry

    sheet = load_registry().get(sheet_name)  # NB: the issue rate of the GPU measured: name its sheet
    est = estimate(case["op"], "bf16", case["inputs"], case["output"], strided=case.get("strided", False),
                   window=case.get("window"))  # fmt: skip
    elements = case["elements"]
    thread_inst = measured.get("sm__sass_thread_inst_executed.sum")
    seconds = (measured.get("gpu__time_duration.sum") or 0.0) * 1e-9  # NB: ncu reports nsecond
    clock = measured.get("sm__cycles_elapsed.avg.per_second")  # cycles/s
    row: dict[str, Any] = {
        "problem": case["problem"],
        "kernel": case["kernel"],
        "elements": elements,
        "estimate_per_element": est.total if est else None,
        "estimate_parts": dict(est.parts) if est else None,
        "measured_per_element": thread_inst / elements if thread_inst else None,
        "integer_per_element": (measured.get("smsp__sass_thread_inst_executed_op_integer_pred_on.sum") or 0) / elements,
        "shared_ld_st_per_element_warp": (
            (measured.get("smsp__sass_inst_executed_op_shared_ld.sum") or 0)
            + (measured.get("smsp__sass_inst_executed_op_shared_st.sum") or 0)
        )
        / elements,
        "kernel_s": seconds or None,
        "sm_clock_hz": clock,
        "metrics": measured,
    }
    if est and thread_inst:
        row["measured_over_estimate"] = thread_inst / elements / est.total
    if est and seconds and sheet is not None:
        rates = issue_rates(sheet.compute_units or 0, (sheet.boost_clock_mhz or 0) * 1e6)
        if rates is not None:
            row["estimate_share_of_time"] = instruction_time(elements, est, rates) / seconds
            if thread_inst:
                # the measured instructions at the same issue rate: what the class would read with exact counts
                row["measured_share_of_time"] = thread_inst / rates.issue_per_s / seconds
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/instruction-counts-h100.json"))
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds per ncu run")
    parser.add_argument("--sheet", default="h100-sxm", help="the spec sheet of the GPU measured (its issue rate)")
    parser.add_argument("--filter", default="", help="comma list: cases whose problem contains any of these")
    args = parser.parse_args()
    if shutil.which("ncu") is None:
        print("Error: ncu is not on PATH: this benchmark reads Nsight Compute's counters", file=sys.stderr)
        return 2
    import torch

    words = [w for w in args.filter.split(",") if w]
    chosen = [c for c in cases() if not words or any(w in c["problem"] for w in words)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in chosen:
            started = time.monotonic()
            counts, error = profile(case, COUNTS, Path(tmp), args.timeout)
            pipes, pipe_error = profile(case, PIPES, Path(tmp), args.timeout)
            row = estimate_row(case, {**counts, **pipes}, args.sheet)
            row["errors"] = [e for e in (error, pipe_error) if e]
            row["seconds"] = round(time.monotonic() - started, 1)
            rows.append(row)
            print(f"{case['problem']}: {row['seconds']} s {row['errors'] or ''}", file=sys.stderr, flush=True)
    doc = {
        "benchmark": "instruction_counts_gpu",
        "device_name": torch.cuda.get_device_name(),
        "sheet": args.sheet,
        "torch": torch.__version__,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")

    def f(x: Any, spec: str = ".1f") -> str:
        return "-" if x is None else format(x, spec)

    print(
        "| problem | kernel | estimate /elem | measured /elem | measured / estimate | integer /elem | estimate's "
        "share of time | measured's share | issue % | ALU % | FMA % | LSU % | SM % |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        m = r["metrics"]
        print(
            f"| {r['problem']} | {r['kernel']} | {f(r['estimate_per_element'])} | {f(r['measured_per_element'])} | "
            f"{f(r.get('measured_over_estimate'), '.2f')} | {f(r['integer_per_element'])} | "
            f"{f(r.get('estimate_share_of_time'), '.2f')} | {f(r.get('measured_share_of_time'), '.2f')} | "
            f"{f(m.get('sm__issue_active.avg.pct_of_peak_sustained_active'))} | "
            f"{f(m.get('sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active'))} | "
            f"{f(m.get('sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active'))} | "
            f"{f(m.get('sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active'))} | "
            f"{f(m.get('sm__throughput.avg.pct_of_peak_sustained_elapsed'))} |"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
