"""Traces in and out on a GPU: a model diagnosed live and through `--trace` must give identical FLOPs and bytes
per op and times within 1%.

    PYTHONPATH=. python benchmarks/trace_roundtrip_gpu.py --out benchmarks/results/trace_roundtrip_gpu.json \
        [--model workloads/models/mlp_compute_bound.py] [--mode inference|training] [--dtype bf16] [--iters 10]

Two checks, each printed as a table row and written to --out (JSON):

1. export -> read back: `diagnose MODEL --export-trace` (live, the model's own timing pass), then `diagnose --trace`
   on that file. The step read back is one of the live run's profiled iterations, so each op's time must match
   that iteration's live sample (within 1%), and FLOPs and bytes per op must be identical.
2. a user's trace: the model profiled by torch.profiler the way a user records one (schedule wait=1, warmup=1,
   active=3: ProfilerStep#N markers, record_shapes=True), diagnosed with --trace. FLOPs and bytes per op that
   does work must equal the live count; the step's total kernel time is compared with the live run's median
   iteration (a separate run: within 1% is the goal, the ratio is reported).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def work(records) -> list[tuple[str, int | None, int | None]]:
    # NB: views the profiler never records (a detach of a tensor autograd saves) cost 0 and 0: left out
    return [(r.op, r.flops, r.bytes) for r in records if (r.flops or 0) + (r.bytes or 0) > 0 or not r.counted]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "workloads" / "models" / "mlp_compute_bound.py")
    parser.add_argument("--mode", default="inference")
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--argv", nargs="*", default=["--size", "large"], help="the model's script arguments")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    from roofline.diagnose.execute import run_once
    from roofline.diagnose.loader import load_model
    from roofline.diagnose.pipeline import diagnose, diagnose_trace
    from roofline.diagnose.trace import annotate, trace_json

    folder = Path(tempfile.mkdtemp(prefix="roofline-trace-rt-"))
    common = {"mode": args.mode, "dtype": args.dtype, "argv": args.argv}
    live = diagnose(args.model, device="cuda", warmup=3, iters=args.iters, keep_trace=True, **common)
    exported = folder / "live.json"
    timing = live.timing
    exported.write_text(trace_json(annotate(timing.trace, timing.matched_ops, timing.op_owners, live.placed.points)))
    back = diagnose_trace(exported)

    # 1. export -> read back
    same_costs_1 = [(r.op, r.flops, r.bytes) for r in back.records] == [(r.op, r.flops, r.bytes) for r in live.records]
    samples = {p.index: p.samples_s for p in live.placed.points}
    worst = 0.0
    for point in back.placed.points:
        if point.time_s <= 0 or not samples.get(point.index):
            continue
        nearest = min(samples[point.index], key=lambda s: abs(s - point.time_s))
        worst = max(worst, abs(point.time_s - nearest) / max(nearest, 1e-12))
    check_1 = {
        "ops_live": len(live.records),
        "ops_trace": len(back.records),
        "same_flops_bytes_per_op": same_costs_1,
        "worst_op_time_error": worst,
        "pass": same_costs_1 and worst <= 0.01,
    }

    # 2. a user's torch.profiler trace (ProfilerStep markers)
    loaded = load_model(args.model, device="cuda", dtype=args.dtype, argv=list(args.argv), mode=args.mode)
    user_trace = folder / "user.json"
    model = loaded.model
    for _ in range(3):
        run_once(model, loaded.inputs, loaded.kwargs, args.mode)
    prof = profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        record_shapes=True,
        schedule=schedule(wait=1, warmup=1, active=3),
        on_trace_ready=lambda p: p.export_chrome_trace(str(user_trace)),
    )
    with prof:
        for _ in range(5):
            if args.mode == "training":
                model.zero_grad(set_to_none=True)
            run_once(model, loaded.inputs, loaded.kwargs, args.mode)
            torch.cuda.synchronize()
            prof.step()
    start = time.perf_counter()
    user = diagnose_trace(user_trace)
    read_s = time.perf_counter() - start
    same_costs_2 = work(user.records) == work(live.records)
    live_iteration_s = median(
        sum(p.samples_s[i] for p in live.placed.points if i < len(p.samples_s)) for i in range(args.iters)
    )
    user_s = sum(p.time_s for p in user.placed.points)
    check_2 = {
        "ops_live": len(work(live.records)),
        "ops_trace": len(work(user.records)),
        "same_flops_bytes_per_op": same_costs_2,
        "step": user.options["step"],
        "steps": user.options["steps"],
        "trace_op_time_s": user_s,
        "live_median_iteration_op_time_s": live_iteration_s,
        "time_ratio": user_s / live_iteration_s if live_iteration_s else None,
        "read_s": read_s,
        "uncounted": [u.op for u in user.placed.uncounted],
        "pass": same_costs_2 and live_iteration_s > 0 and abs(user_s / live_iteration_s - 1) <= 0.01,
    }
    result = {
        "model": str(args.model),
        "mode": args.mode,
        "dtype": args.dtype,
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "export_read_back": check_1,
        "user_trace": check_2,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"{'check':<18} {'ops live/trace':>15} {'same FLOPs+bytes':>17} {'time':>28} {'pass':>5}")
    print(
        f"{'export->read back':<18} {check_1['ops_live']:>7}/{check_1['ops_trace']:<7} {same_costs_1!s:>17} "
        f"{'worst op error ' + format(worst, '.4%'):>28} {check_1['pass']!s:>5}"
    )
    ratio = check_2["time_ratio"]
    print(
        f"{'user trace':<18} {check_2['ops_live']:>7}/{check_2['ops_trace']:<7} {same_costs_2!s:>17} "
        f"{'trace/live ' + (format(ratio, '.4f') if ratio else '-'):>28} {check_2['pass']!s:>5}"
    )
    print(f"written to {args.out}")
    return 0 if check_1["pass"] and check_2["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
