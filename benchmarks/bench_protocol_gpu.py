"""How the per-sample protocol changes a short op's time on a GPU: five protocols against triton.testing.do_bench.

    python3 benchmarks/bench_protocol_gpu.py --out results.json

For a few bench rows (a 4096x4096 decode GEMV, a GELU of 16M elements, a 4096^3 GEMM and a 28672x4096 GEMV, bf16),
in one process, twice each: do_bench (median, warm-up 25 ms, rep 200 ms), then 400 samples per protocol, each
protocol after 0.5 s of rest, with CUDA events around each call and a 256 MiB L2 flush before it:

- B: flush + call queued back to back, one synchronisation at the end (do_bench's protocol);
- C: the same, synchronised after every sample;
- D: synchronised, the flush then a 50 us sleep kernel before each call;
- E: back to back, the flush then the sleep kernel before each call;
- F: synchronised, the sleep kernel then the flush before each call.

Prints one line per row (medians in microseconds, the SM clock NVML read before and after each) and writes them
as JSON. What it showed on an H100 is in docs/performance.md ("Bench timing against do_bench").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROWS = [
    ("gemm", {"m": 1, "n": 4096, "k": 4096, "batch": 1, "dtype": "bf16", "out_dtype": None, "tf32": False}),
    ("elementwise", {"op": "gelu", "numel": 16777216, "dtype": "bf16"}),
    ("gemm", {"m": 4096, "n": 4096, "k": 4096, "batch": 1, "dtype": "bf16", "out_dtype": None, "tf32": False}),
    ("gemm", {"m": 1, "n": 28672, "k": 4096, "batch": 1, "dtype": "bf16", "out_dtype": None, "tf32": False}),
]
PROTOCOLS = [
    ("B_back_to_back", False, ("flush",)),
    ("C_sync_each", True, ("flush",)),
    ("D_sync_flush_sleep", True, ("flush", "sleep")),
    ("E_back_to_back_flush_sleep", False, ("flush", "sleep")),
    ("F_sync_sleep_flush", True, ("sleep", "flush")),
]
SAMPLES = 400


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="JSON file for the medians")
    args = parser.parse_args()
    import torch
    from triton.testing import do_bench

    from roofline.bench.runners import build
    from roofline.costs.base import get_model
    from roofline.measure.backends import gpu_busy, nvml_clock

    cache = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")
    busy = gpu_busy(torch, 1980, 50)
    clock = nvml_clock(0)

    def mhz() -> float | None:
        return clock.sample()[0] if clock is not None else None

    def protocol(fn: Any, sync_each: bool, steps: tuple[str, ...]) -> float:
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(SAMPLES)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(SAMPLES)]
        for start, end in zip(starts, ends, strict=True):
            for step in steps:
                if step == "flush":
                    cache.zero_()
                elif busy is not None:
                    busy()
            start.record()
            fn()
            end.record()
            if sync_each:
                end.synchronize()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)) * 1e3

    out = []
    for kind, values in ROWS:
        bench = build(kind, get_model(kind).parse(values), torch=torch, device=torch.device("cuda"))
        result: dict[str, Any] = {"kind": kind, "params": values}
        with bench.active():
            bench.prepare()
            for _ in range(20):
                bench.fn()
            torch.cuda.synchronize()
            for rep in range(2):
                time.sleep(0.5)
                before = mhz()
                result[f"do_bench{rep}"] = do_bench(bench.fn, warmup=25, rep=200, return_mode="median") * 1e3
                result[f"clk_do_bench{rep}"] = (before, mhz())
                for name, sync_each, steps in PROTOCOLS:
                    time.sleep(0.5)
                    before = mhz()
                    result[f"{name}{rep}"] = protocol(bench.fn, sync_each, steps)
                    result[f"clk_{name}{rep}"] = (before, mhz())
        bench.release()
        torch.cuda.empty_cache()
        shown = "  ".join(f"{k}={v:.2f}" for k, v in result.items() if isinstance(v, float))
        print(f"{kind} {values}: {shown}", flush=True)
        out.append(result)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
