"""Issue 16's round trip on the CPU: an example model profiled the way a user profiles a loop (torch.profiler with a
schedule: wait, warmup, active; ProfilerStep#N markers) and diagnosed with ``--trace`` gives the live run's FLOPs and
bytes per op, and each op's time is the one the same trace holds for it. A GPU trace is rebuilt from a real CPU
trace (kernels, launch calls, the steps' GPU-side projections, a backward thread), so the GPU-only parts of the
reading are tested here too; the H100 check is benchmarks/trace_roundtrip_gpu.py."""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from roofline.diagnose.join import match_key, parse_events
from roofline.diagnose.pipeline import DiagnoseOptions, diagnose, diagnose_trace
from roofline.diagnose.trace import counted_name, load_trace, read_trace, split_steps

torch = pytest.importorskip("torch")

from tests.test_trace import BOUNDARIES, CPU, MLP  # noqa: E402

STEPS, WAIT, WARMUP, ACTIVE = 6, 1, 1, 3


@pytest.fixture
def fake_cpu(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    return CPU


def user_trace(path: Path, mode: str) -> Path:
    """The MLP (small) profiled as a user would: a loop of STEPS steps under torch.profiler with a schedule, the
    trace exported when the active steps end. The loss is the one `diagnose --mode training` sums, so both runs do
    the same work."""
    from torch.profiler import ProfilerActivity, profile, schedule

    from roofline.diagnose.loader import load_model

    loaded = load_model(MLP, device="cpu", dtype="fp32", argv=[], mode=mode)
    model, (x,) = loaded.model, loaded.inputs
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(STEPS):
            if mode == "training":
                model.zero_grad(set_to_none=True)
                out = model(x)
                sum(t.float().sum() for t in [out]).backward()
            else:
                with torch.no_grad():
                    model(x)
            prof.step()
    return path


def costs(records) -> list[tuple[str, int | None, int | None]]:
    return [(r.op, r.flops, r.bytes) for r in records]


# ------------------------------------------------------------------------------------------------ a GPU trace


def _children(ops: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """id(event) -> the events nested directly inside it on its thread."""
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    by_thread: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in sorted(ops, key=lambda e: (e["ts"], -e["dur"])):
        by_thread[(e["pid"], e["tid"])].append(e)
    for events in by_thread.values():
        stack: list[dict[str, Any]] = []
        for e in events:
            while stack and e["ts"] + e["dur"] > stack[-1]["ts"] + stack[-1]["dur"]:  # NB: sorted by start
                stack.pop()
            if stack:
                out[id(stack[-1])].append(e)
            stack.append(e)
    return out


def gpu_shaped(trace: dict[str, Any], backward_thread: bool = True) -> dict[str, Any]:
    """A CPU trace made a CUDA one, as Kineto writes it: each leaf op that is not a view launches one kernel
    (a cudaLaunchKernel inside it, the kernel on stream 7 after the launch and the previous kernel, both with the
    op's External id and a correlation id, joined by an ac2g flow), each ProfilerStep#N marker gets its projection
    on the GPU (a gpu_user_annotation of the same name over its kernels), and (``backward_thread``) the autograd
    engine's work moves to a thread of its own. Kernel durations are fixed numbers (the test's own clock)."""
    trace = copy.deepcopy(trace)
    events = trace["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    children = _children(ops)
    main = ops[0]["tid"]
    if backward_thread:
        engine = [e for e in ops if e["name"].startswith("autograd::engine::evaluate_function: ")]
        for e in events:
            inside = any(g["ts"] <= e.get("ts", -1) and e["ts"] + e.get("dur", 0) <= g["ts"] + g["dur"] for g in engine)
            if e.get("ph") == "X" and e.get("tid") == main and e.get("cat") == "cpu_op" and inside:
                e["tid"] = main + 1
    # NB: views launch nothing, nor an aten::to with nothing under it (.float() of a float tensor returns it)
    views = {"aten::t", "aten::view", "aten::_reshape_alias", "aten::expand", "aten::detach", "aten::as_strided",
             "aten::to"}  # fmt: skip
    added: list[dict[str, Any]] = []
    cursor = 0.0
    correlation = 10_000
    for op in sorted(ops, key=lambda e: e["ts"]):
        if children.get(id(op)) or op["name"] in views or not op["name"].startswith("aten::"):
            continue
        correlation += 1
        external = op["args"]["External id"]
        launch_ts = op["ts"] + op["dur"] / 2
        launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": op["pid"], "tid": op["tid"],
                  "ts": launch_ts, "dur": min(op["dur"] / 4, 2.0),
                  "args": {"External id": external, "correlation": correlation}}  # fmt: skip
        start = max(launch["ts"] + launch["dur"] + 3.0, cursor)
        duration = 20.0 + 7.0 * (correlation % 5)
        cursor = start + duration
        kernel = {"ph": "X", "cat": "kernel", "name": f"kernel_{op['name'][6:]}", "pid": 0, "tid": 7, "ts": start,
                  "dur": duration, "args": {"External id": external, "correlation": correlation, "stream": 7,
                                            "device": 0}}  # fmt: skip
        flow = {"cat": "ac2g", "name": "ac2g", "id": correlation, "bp": "e"}
        added += [
            launch,
            kernel,
            {**flow, "ph": "s", "pid": op["pid"], "tid": op["tid"], "ts": launch_ts},
            {**flow, "ph": "f", "pid": 0, "tid": 7, "ts": start},
        ]
    launched = [(e, k) for e, k in zip(added[::4], added[1::4], strict=True)]
    for step in [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]:
        own = [k for launch, k in launched if step["ts"] <= launch["ts"] <= step["ts"] + step["dur"]]
        if own:
            first, last = min(k["ts"] for k in own), max(k["ts"] + k["dur"] for k in own)
            projection = {"ph": "X", "cat": "gpu_user_annotation", "name": step["name"], "pid": 0, "tid": 7}
            added.append({**projection, "ts": first, "dur": last - first, "args": dict(step["args"])})
    trace["traceEvents"] = events + added
    trace["deviceProperties"] = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]
    return trace


def kernel_time_by_op(trace: dict[str, Any], step: str) -> tuple[dict[int, float], float]:
    """From the trace alone: the seconds of the kernels each op in ``step`` launched, itself or through the ops
    nested in it (by External id), and the step's kernel seconds in all."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    marker = next(e for e in events if e["name"] == step and e.get("cat") == "user_annotation")
    ops = [e for e in events if e.get("cat") == "cpu_op" and marker["ts"] <= e["ts"] <= marker["ts"] + marker["dur"]]
    own: dict[Any, float] = defaultdict(float)
    for k in events:
        if k.get("cat") == "kernel":
            own[k["args"]["External id"]] += k["dur"] * 1e-6
    children = _children(ops)

    def total(e: dict[str, Any]) -> float:
        return own.get(e["args"]["External id"], 0.0) + sum(total(c) for c in children.get(id(e), []))

    ids = {e["args"]["External id"] for e in ops}
    return {e["args"]["External id"]: total(e) for e in ops}, sum(t for i, t in own.items() if i in ids)


# ------------------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_user_trace_gives_the_live_costs_per_op(tmp_path, fake_cpu, mode):
    path = user_trace(tmp_path / "user.json", mode)
    live = diagnose(MLP, DiagnoseOptions(device="cpu", warmup=1, iters=2, mode=mode), boundaries=BOUNDARIES)
    traced = diagnose_trace(path, boundaries=BOUNDARIES)
    assert traced.options["steps"] == ACTIVE and traced.options["mode"] == mode
    assert not traced.placed.uncounted
    live_costs = costs(live.records)
    if mode == "training":
        # NB: the counting pass's dispatch mode sees a zero-cost aten::detach where autograd saves an op's output
        # (relu's) and unpacks it; the profiler never records it. Every other op is the same, in order.
        only_live = [c for c in live_costs if c == ("aten::detach", 0, 0)]
        assert len(only_live) > len([c for c in costs(traced.records) if c[0] == "aten::detach"])
        live_costs = [c for c in live_costs if c != ("aten::detach", 0, 0)]
        traced_costs = [c for c in costs(traced.records) if c != ("aten::detach", 0, 0)]
    else:
        traced_costs = costs(traced.records)
    assert traced_costs == live_costs


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_user_trace_times_are_the_traces_own(tmp_path, mode):
    """CPU: each op's time is the duration the trace holds for the op it matched, in the step diagnosed, plus its
    share of the own time of the composites around it that the counting pass did not record (aten::linear's own,
    and aten::t's beside the addmm inside it); the ops' times and the unmatched time add up to the step's."""
    path = user_trace(tmp_path / "user.json", mode)
    raw = read_trace(path)
    traced = diagnose_trace(path, boundaries=BOUNDARIES)
    steps, _ = split_steps(raw["traceEvents"])
    (step,) = [s for s in steps if s[0] == traced.options["step"]]
    by_id = {e["args"]["External id"]: e for e in raw["traceEvents"] if e.get("cat") == "cpu_op"}
    time_of = {p.index: p.time_s for p in traced.placed.points}
    matched = traced.timing.matched_ops
    assert sorted(matched.values()) == sorted(r.index for r in traced.records)  # every op found, once
    for external, index in matched.items():
        event = by_id[external]
        assert step[1] <= event["ts"] <= step[2]
        assert match_key(event["name"]) == match_key(traced.records[index].op)
        assert time_of[index] >= event["dur"] * 1e-6 * (1 - 1e-6) - 2e-9
    in_step = [e for e in by_id.values() if step[1] <= e["ts"] <= step[2]]
    ops = parse_events(
        {"kind": "op", "id": e["args"]["External id"], "name": e["name"], "start_us": e["ts"],
         "end_us": e["ts"] + e["dur"], "thread": hash(str(e["tid"]))}
        for e in in_step
    ).ops  # fmt: skip
    step_s = sum(op.self_us for op in ops) * 1e-6
    assert sum(time_of.values()) + traced.timing.unmatched_time_s == pytest.approx(step_s, rel=1e-6)
    assert sum(time_of.values()) > sum(by_id[external]["dur"] for external in matched) * 1e-6  # the composites'


@pytest.mark.parametrize("mode", ["inference", "training"])
def test_gpu_user_trace_reads_the_host_steps_and_their_kernels(tmp_path, mode):
    """The H100's 5 live ops against 4 in the trace: Kineto projects each ProfilerStep#N marker onto the GPU
    (gpu_user_annotation, same name), and the median of host and GPU markers together was a GPU one, whose window
    missed the step's first op. Only host markers are steps; each op's time is its kernels' in the trace."""
    cpu = read_trace(user_trace(tmp_path / "user.json", mode))
    trace = gpu_shaped(cpu)
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(trace))
    steps, kind = split_steps(trace["traceEvents"])
    assert kind == "ProfilerStep" and len(steps) == ACTIVE  # not 2 * ACTIVE
    on_cpu = diagnose_trace(tmp_path / "user.json", boundaries=BOUNDARIES)
    traced = diagnose_trace(path, boundaries=BOUNDARIES)
    assert traced.timing.device == "cuda" and traced.options["steps"] == ACTIVE
    assert costs(traced.records) == costs(on_cpu.records)  # the same ops, whichever step is the median
    per_op, step_s = kernel_time_by_op(trace, traced.options["step"])
    time_of = {p.index: p.time_s for p in traced.placed.points}
    for external, index in traced.timing.matched_ops.items():
        assert time_of[index] == pytest.approx(per_op[external], rel=1e-9, abs=1e-12)
    assert sum(time_of.values()) + traced.timing.unmatched_time_s == pytest.approx(step_s, rel=1e-9)
    assert traced.timing.unmatched_time_s == 0
    if mode == "training":
        threads = {e["thread"] for e in load_trace(trace).events if e["kind"] == "op"}
        assert len(threads) == 2  # the backward ran on a thread of its own


def test_the_old_reading_picked_a_gpu_projection(tmp_path):
    """What went wrong on the H100, shown on the rebuilt trace: host and GPU markers together are 2 x ACTIVE
    'steps', and the GPU ones (shorter: the GPU finishes before the host's step ends) hold fewer ops."""
    trace = gpu_shaped(read_trace(user_trace(tmp_path / "user.json", "inference")))
    both = [e for e in trace["traceEvents"] if e.get("ph") == "X" and str(e.get("name")).startswith("ProfilerStep#")]
    assert len(both) == 2 * ACTIVE
    gpu = [e for e in both if e["cat"] == "gpu_user_annotation"]
    ops = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm"]
    inside = [o for o in ops if any(g["ts"] <= o["ts"] <= g["ts"] + g["dur"] for g in gpu)]
    assert len(inside) < len(ops)  # the first addmm of each step starts before its first kernel


def test_live_export_with_gpu_iteration_projections(tmp_path):
    """A live run's exported GPU trace holds roofline::iteration markers on the host and on the GPU: only the
    host's are iterations."""
    trace = gpu_shaped(read_trace(user_trace(tmp_path / "user.json", "inference")))
    for e in trace["traceEvents"]:
        if str(e.get("name", "")).startswith("ProfilerStep#"):
            e["name"] = "roofline::iteration"
    steps, kind = split_steps(trace["traceEvents"])
    assert kind == "roofline::iteration" and len(steps) == ACTIVE


@pytest.mark.parametrize(
    ("name", "parent", "counted"),
    [
        ("aten::_reshape_alias", "aten::reshape", "aten::view"),
        ("aten::add_", "autograd::engine::evaluate_function: MmBackward0", "aten::add"),
        ("aten::add_", "aten::linear", "aten::add_"),  # a user's own in-place add stays
        ("aten::add_", "torch::autograd::AccumulateGrad", "aten::add_"),
        ("aten::addmm", "aten::linear", "aten::addmm"),
    ],
)
def test_counted_name(name, parent, counted):
    assert counted_name(name, parent) == counted


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("aten::add_", "aten::add"),
        ("aten::_reshape_alias", "aten::view"),
        ("aten::__and__", "aten::__and__"),
        ("aten::_softmax", "aten::_softmax"),
        ("aten::mm", "aten::mm"),
    ],
)
def test_match_key(name, key):
    assert match_key(name) == key


def test_a_long_tensor_list_is_uncounted_with_its_reason(tmp_path):
    """torch.profiler leaves out a tensor list of more than 30 tensors (torch 2.13): the op is uncounted, and says
    why, with its time."""
    xs = [torch.randn(4) for _ in range(40)]
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        torch.stack(xs[:20])
        torch.stack(xs)
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    run = load_trace(read_trace(path))
    short, long = [r for r in run.records if r.op == "aten::stack"]
    if short.input_shapes and len(short.input_shapes) == 20 and long.input_shapes:
        pytest.skip("this torch records long tensor lists")
    assert short.counted and not long.counted
    assert "more than 30 tensors" in long.note


def test_benchmark_check_reads_the_rebuilt_gpu_trace(tmp_path):
    """benchmarks/trace_roundtrip_gpu.py's check 2, on the CPU: its own reading of the JSON (each op's kernels by
    External id) agrees with `--trace`, and its cost comparison lists the live-only detaches apart."""
    import importlib.util

    from tests.test_trace import ROOT, counted_live

    spec = importlib.util.spec_from_file_location("trace_roundtrip_gpu", ROOT / "benchmarks" / "trace_roundtrip_gpu.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    trace = gpu_shaped(read_trace(user_trace(tmp_path / "user.json", "training")))
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(trace))
    traced = diagnose_trace(path, boundaries=BOUNDARIES)
    per_op, step_s = bench.kernel_times(json.loads(path.read_text()), traced.options["step"])
    time_of = {p.index: p.time_s for p in traced.placed.points}
    for external, index in traced.timing.matched_ops.items():
        assert time_of[index] == pytest.approx(per_op[external], rel=1e-9, abs=1e-12)
    assert sum(time_of.values()) == pytest.approx(step_s, rel=1e-9)
    compared = bench.compare_costs(counted_live("training"), traced.records)
    assert compared["same"] and compared["live_only_zero_cost_detaches"] > 0
