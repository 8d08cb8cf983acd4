"""Traces in and out on a GPU: a model diagnosed live and through `--trace` must give identical FLOPs and bytes
per op, and each op the time its trace holds for it (within 1%).

    PYTHONPATH=. python benchmarks/trace_roundtrip_gpu.py --out benchmarks/results/trace-roundtrip-h100.json \
        [--model workloads/models/mlp_compute_bound.py] [--mode inference|training] [--dtype bf16] [--iters 10]

Two checks, each printed as a table row and written to --out (JSON):

1. export -> read back: `diagnose MODEL --export-trace` (live, the model's own timing pass), then `diagnose --trace`
   on that file. The step read back is one of the live run's profiled iterations, so each op's time must match
   that iteration's live sample (within 1%), and FLOPs and bytes per op must be identical.
2. a user's trace: the model profiled by torch.profiler the way a user records one (schedule wait=1, warmup=1,
   active=3, one `prof.step()` per loop step, no synchronize: ProfilerStep#N markers, record_shapes=True), then
   diagnosed with --trace. Passes when (a) FLOPs and bytes per op equal the live count (op by op, in order; the
   zero-cost aten::detach the live count sees where autograd saves an op's output, and the profiler never
   records, is listed, not failed) and (b) each op's time equals the time of the kernels it launched in that
   trace's diagnosed step (read from the JSON here, by External id, over the op and the ops inside it), within 1%,
   and the ops' times plus the unmatched time add up to the step's kernel time.
   Reported, not a pass criterion: the step's kernel time against the live run's per-iteration kernel time
   (median, min, max over its iterations). The two are separate runs of the same kernels (clocks, caches and the
   allocator differ between them), so they are compared like with like (kernel time per iteration, not a wall
   time), and the ratio says how far two runs differ, not whether the trace was read right.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNEL_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
LIVE_ONLY = ("aten::detach", 0, 0)  # the counting pass sees it where autograd saves an output; the profiler never


def costs(records) -> list[tuple[str, int | None, int | None]]:
    return [(r.op, r.flops, r.bytes) for r in records]


def aligned_pairs(live, traced) -> list[tuple[int, int]]:
    """(live position, trace position) of the ops whose (op, FLOPs, bytes) the cost alignment pairs."""
    a, b = costs(live), costs(traced)
    pairs = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            pairs += list(zip(range(i1, i2), range(j1, j2), strict=True))
    return pairs


def compare_costs(live, traced) -> dict[str, Any]:
    """Op by op, in order: the differences between the live count and the trace's (live-only zero-cost detaches
    listed apart)."""
    a, b = costs(live), costs(traced)
    only_live: list[Any] = []
    only_trace: list[Any] = []
    detaches = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        left = a[i1:i2]
        detaches += sum(1 for c in left if c == LIVE_ONLY)
        only_live += [list(c) for c in left if c != LIVE_ONLY]
        only_trace += [list(c) for c in b[j1:j2]]
    return {
        "ops_live": len(a),
        "ops_trace": len(b),
        "live_only_zero_cost_detaches": detaches,
        "only_live": only_live[:20],
        "only_trace": only_trace[:20],
        "same": not only_live and not only_trace,
    }


def kernel_times(trace: dict[str, Any], step: str) -> tuple[dict[int, float], float]:
    """From the JSON alone: seconds of the kernels each op of the host's ``step`` marker launched, itself or through
    the ops nested in it (by External id), by the op's External id; and the step's kernel seconds in all."""
    events = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    marker = next(
        e for e in events if e.get("name") == step and not str(e.get("cat", "")).startswith("gpu_")
    )  # NB: the host's marker; Kineto writes its projection on the GPU under the same name (gpu_user_annotation)
    lo, hi = marker["ts"], marker["ts"] + marker["dur"]
    ops = [e for e in events if e.get("cat") in ("cpu_op", "operator") and lo <= e["ts"] <= hi]
    own: dict[Any, float] = defaultdict(float)
    for k in events:
        if str(k.get("cat", "")).lower() in KERNEL_CATS:
            own[(k.get("args") or {}).get("External id")] += k["dur"] * 1e-6
    children: dict[int, list[dict[str, Any]]] = defaultdict(list)
    threads: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in sorted(ops, key=lambda e: (e["ts"], -e["dur"])):
        threads[(e.get("pid"), e.get("tid"))].append(e)
    for chain in threads.values():
        stack: list[dict[str, Any]] = []
        for e in chain:
            while stack and not e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            if stack:
                children[id(stack[-1])].append(e)
            stack.append(e)

    def total(e: dict[str, Any]) -> float:
        external = e["args"].get("External id")
        mine = own.get(external, 0.0) if external is not None else 0.0
        return mine + sum(total(c) for c in children.get(id(e), []))

    ids = {e["args"].get("External id") for e in ops} - {None}
    return {e["args"].get("External id"): total(e) for e in ops}, sum(t for i, t in own.items() if i in ids)


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
    # NB: the live count's zero-cost detaches are not in any trace: ops are paired by the cost alignment, and a
    # read-back op's time is compared with its live twin's samples (indices differ once a detach is skipped)
    compared_1 = compare_costs(live.records, back.records)
    same_costs_1 = compared_1["same"]
    samples = {p.index: p.samples_s for p in live.placed.points}
    live_index = {r.index: i for i, r in enumerate(live.records)}
    back_to_live = {back.records[j].index: live.records[i].index for i, j in aligned_pairs(live.records, back.records)}
    worst = 0.0
    for point in back.placed.points:
        twin = back_to_live.get(point.index)
        if point.time_s <= 0 or twin is None or twin not in live_index or not samples.get(twin):
            continue
        nearest = min(samples[twin], key=lambda s: abs(s - point.time_s))
        worst = max(worst, abs(point.time_s - nearest) / max(nearest, 1e-12))
    check_1 = {
        "ops_live": len(live.records),
        "ops_trace": len(back.records),
        "live_only_zero_cost_detaches": compared_1["live_only_zero_cost_detaches"],
        "same_flops_bytes_per_op": same_costs_1,
        "worst_op_time_error": worst,
        "pass": same_costs_1 and worst <= 0.01,
    }

    # 2. a user's torch.profiler trace (ProfilerStep markers), recorded as a user records one
    loaded = load_model(args.model, device="cuda", dtype=args.dtype, argv=list(args.argv), mode=args.mode)
    user_trace = folder / "user.json"
    model = loaded.model
    for _ in range(3):
        run_once(model, loaded.inputs, loaded.kwargs, args.mode)
    torch.cuda.synchronize()
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
            prof.step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    user = diagnose_trace(user_trace)
    read_s = time.perf_counter() - start
    compared = compare_costs(live.records, user.records)
    per_op, step_kernel_s = kernel_times(json.loads(user_trace.read_text()), user.options["step"])
    time_of = {p.index: p.time_s for p in user.placed.points}
    worst_2, worst_op = 0.0, ""
    for external, index in user.timing.matched_ops.items():
        expected = per_op.get(external, 0.0)
        got = time_of.get(index, 0.0)
        error = abs(got - expected) / expected if expected > 0 else (0.0 if got == 0 else float("inf"))
        if error > worst_2:
            worst_2, worst_op = error, user.records[index].op
    accounted_s = sum(time_of.values()) + user.timing.unmatched_time_s
    accounted = abs(accounted_s - step_kernel_s) <= 0.01 * step_kernel_s if step_kernel_s > 0 else False
    per_iteration = [sum(p.samples_s[i] for p in live.placed.points if i < len(p.samples_s)) for i in range(args.iters)]
    live_iteration_s = median(per_iteration)
    user_s = sum(time_of.values())
    check_2 = {
        **compared,
        "same_flops_bytes_per_op": compared["same"],
        "step": user.options["step"],
        "steps": user.options["steps"],
        "ops_timed": len(user.timing.matched_ops),
        "worst_op_time_error_vs_own_kernels": worst_2,
        "worst_op": worst_op,
        "step_kernel_s": step_kernel_s,
        "ops_plus_unmatched_s": accounted_s,
        "unmatched_s": user.timing.unmatched_time_s,
        "uncounted": [u.op for u in user.placed.uncounted],
        "read_s": read_s,
        "pass": compared["same"] and worst_2 <= 0.01 and accounted,
        # reported only: two separate runs of the same kernels (kernel time per iteration in each)
        "trace_op_kernel_s": user_s,
        "live_iteration_kernel_s": {
            "median": live_iteration_s,
            "min": min(per_iteration),
            "max": max(per_iteration),
        },
        "trace_over_live_median": user_s / live_iteration_s if live_iteration_s else None,
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
    print(f"{'check':<18} {'ops live/trace':>15} {'same FLOPs+bytes':>17} {'time':>34} {'pass':>5}")
    print(
        f"{'export->read back':<18} {check_1['ops_live']:>7}/{check_1['ops_trace']:<7} {same_costs_1!s:>17} "
        f"{'worst op vs live sample ' + format(worst, '.4%'):>34} {check_1['pass']!s:>5}"
    )
    print(
        f"{'user trace':<18} {check_2['ops_live']:>7}/{check_2['ops_trace']:<7} {compared['same']!s:>17} "
        f"{'worst op vs own kernels ' + format(worst_2, '.4%'):>34} {check_2['pass']!s:>5}"
    )
    if compared["live_only_zero_cost_detaches"]:
        print(f"  live-only zero-cost aten::detach (not in any trace): {compared['live_only_zero_cost_detaches']}")
    for side in ("only_live", "only_trace"):
        if compared[side]:
            print(f"  {side}: {compared[side]}")
    ratio = check_2["trace_over_live_median"]
    print(
        f"  reported, not a criterion: kernel time per step, trace {user_s * 1e3:.4f} ms / live median "
        f"{live_iteration_s * 1e3:.4f} ms (min {min(per_iteration) * 1e3:.4f}, max {max(per_iteration) * 1e3:.4f}) = "
        f"{format(ratio, '.4f') if ratio else '-'} (two separate runs)"
    )
    print(f"written to {args.out}")
    return 0 if check_1["pass"] and check_2["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
