"""`roofline diagnose --trace` and `--export-trace`: a torch.profiler trace diagnosed as a live run, and a live run
written as an annotated trace. CPU only (a GPU round trip: benchmarks/trace_roundtrip_gpu.py)."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import pytest
from diagnose_devices import CPU_SLOW_LAUNCH as CPU
from diagnose_doubles import FixedDevice

from roofline.diagnose.pipeline import Boundaries, DiagnoseOptions, diagnose, diagnose_trace
from roofline.diagnose.trace import TRACE_SCHEMA, annotate, load_trace, read_trace, split_steps
from roofline.errors import WorkloadError

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TRACE = DATA / "mlp_train_cpu.json.gz"  # tests/data/record_trace.py
MLP = ROOT / "workloads" / "models" / "mlp_compute_bound.py"

BOUNDARIES = Boundaries(device=FixedDevice(CPU))


@pytest.fixture
def fake_cpu(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    return CPU


def work(records) -> list[tuple[str, int | None, int | None]]:
    """(op, FLOPs, bytes) of the ops that do work, in order. NB: views the profiler never records (the detach of a
    tensor autograd saves) and its spelling of a reshape's view (aten::_reshape_alias) are left out: 0 and 0."""
    return [(r.op, r.flops, r.bytes) for r in records if (r.flops or 0) + (r.bytes or 0) > 0 or not r.counted]


def counted_live(mode: str):
    from roofline.diagnose.count import count_ops

    spec = importlib.util.spec_from_file_location("mlp_for_trace", MLP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.Model(*module.get_init_inputs())
    return count_ops(model, module.get_inputs(), {}, mode=mode)


# ------------------------------------------------------------------------------------------------ in


def test_committed_trace_gives_the_live_counts_per_op():
    result = diagnose_trace(TRACE, boundaries=BOUNDARIES)
    assert result.options["steps"] == 3 and result.options["step"].startswith("ProfilerStep#")
    assert result.options["mode"] == "training"
    live = counted_live("training")
    assert work(result.records) == work(live)
    assert any(r.phase == "backward" for r in result.records)
    # times come from the trace: each matched op's CPU self time in the step
    timed = {t.index: t for t in result.timing.ops}
    assert all(r.index in timed for r in result.records)
    assert sum(t.device_time_s for t in result.timing.ops) > 0
    assert result.placed.summary.wall_s == pytest.approx(_median_step_s(TRACE))
    assert not result.placed.uncounted


def _median_step_s(path: Path) -> float:
    trace = read_trace(path)
    steps, _ = split_steps(trace["traceEvents"])
    lengths = sorted((end - start, i) for i, (_, start, end) in enumerate(steps))
    return lengths[(len(lengths) - 1) // 2][0] * 1e-6


def test_median_step_is_the_one_diagnosed():
    run = load_trace(read_trace(TRACE))
    steps, kind = split_steps(read_trace(TRACE)["traceEvents"])
    assert kind == "ProfilerStep" and len(steps) == 3
    durations = {name: end - start for name, start, end in steps}
    ordered = sorted(durations, key=durations.get)
    assert run.step == ordered[1]
    assert any("median step" in note for note in run.notes)


def test_ops_without_shapes_are_uncounted_with_their_time(tmp_path):
    trace = read_trace(TRACE)
    stripped = 0
    for event in trace["traceEvents"]:
        if event.get("name") == "aten::addmm":
            event["args"].pop("Input Dims", None)
            stripped += 1
    assert stripped
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(trace))
    result = diagnose_trace(path, boundaries=BOUNDARIES)
    (uncounted,) = [u for u in result.placed.uncounted if u.op == "aten::addmm"]
    assert uncounted.count == 3 and uncounted.time_s > 0
    assert "record_shapes" in uncounted.note


def test_a_trace_without_step_markers_is_one_iteration(tmp_path):
    trace = read_trace(TRACE)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep")]
    path = tmp_path / "nosteps.json"
    path.write_text(json.dumps(trace))
    result = diagnose_trace(path, boundaries=BOUNDARIES)
    assert result.options["steps"] == 1 and result.options["step"] == ""
    assert len(work(result.records)) == 3 * len(work(counted_live("training")))


# ------------------------------------------------------------------------------------------------ round trip


def test_live_run_exported_and_read_back_gives_the_same_costs_and_times(tmp_path, fake_cpu):
    live = diagnose(MLP, DiagnoseOptions(device="cpu", warmup=1, iters=3, keep_trace=True), boundaries=BOUNDARIES)
    assert live.timing.trace is not None
    exported = annotate(live.timing.trace, live.timing.matched_ops, live.timing.op_owners, live.placed.points)
    path = tmp_path / "live.json"
    path.write_text(json.dumps(exported))
    back = diagnose_trace(path, boundaries=BOUNDARIES)
    assert back.options["steps"] == 3
    assert [(r.op, r.flops, r.bytes) for r in back.records] == [(r.op, r.flops, r.bytes) for r in live.records]
    # the step read back is one of the live run's profiled iterations: each op's time is that iteration's sample
    times = {p.index: p for p in live.placed.points}
    for point in back.placed.points:
        # NB: the Chrome trace holds times to the nanosecond
        assert any(point.time_s == pytest.approx(s, abs=2e-8) for s in times[point.index].samples_s)


def test_export_annotates_ops_with_their_stored_values(tmp_path, fake_cpu):
    live = diagnose(MLP, DiagnoseOptions(device="cpu", warmup=0, iters=2, keep_trace=True), boundaries=BOUNDARIES)
    out = annotate(live.timing.trace, live.timing.matched_ops, live.timing.op_owners, live.placed.points)
    assert next(iter(out)) == "schema" and out["schema"] == TRACE_SCHEMA
    annotated = [e for e in out["traceEvents"] if "roofline" in e.get("args", {})]
    assert len(annotated) == 2 * len(live.placed.points)  # each op, in each profiled iteration
    by_index = {p.index: p for p in live.placed.points}
    for event in annotated:
        ours = event["args"]["roofline"]
        point = by_index[ours["index"]]
        assert event["name"] == point.op
        assert (ours["flops"], ours["bytes"], ours["intensity_flop_per_byte"]) == (
            point.flops,
            point.bytes,
            point.intensity,
        )
        assert (ours["bound"], ours["efficiency"]) == (point.bound, point.efficiency)


def test_annotate_marks_kernels_by_their_launching_op():
    from types import SimpleNamespace

    point = SimpleNamespace(
        op="aten::mm", index=0, module="", flops=8, bytes=4, intensity=2.0, bound="compute", limiter="compute",
        efficiency=0.5, roof="fp32 tensor", time_s=1e-6,
    )  # fmt: skip
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5, "args": {"External id": 7}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "ts": 1, "dur": 1, "args": {"External id": 8}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 6, "dur": 2, "args": {"External id": 8}},
            {"ph": "X", "cat": "kernel", "name": "other", "ts": 9, "dur": 2, "args": {"External id": 99}},
        ]
    }
    out = annotate(trace, {7: 0}, {7: 0, 8: 0}, [point])
    marked = [e["name"] for e in out["traceEvents"] if "roofline" in e["args"]]
    assert marked == ["aten::mm", "gemm"]  # not the child op: only the op matched and the kernels it owns
    assert trace["traceEvents"][0]["args"] == {"External id": 7}  # the input is not changed


# ------------------------------------------------------------------------------------------------ CLI


def _error(result) -> str:
    lines = result.err.strip().splitlines()
    assert lines and lines[-1].startswith("Error: "), result.err
    return lines[-1]


def test_cli_trace_and_export(cli, tmp_path, fake_cpu):
    report = tmp_path / "r.json"
    exported = tmp_path / "t.json"
    result = cli("diagnose", "--trace", str(TRACE), "-o", str(report), "--export-trace", str(exported))
    assert result.code == 0, result.err
    text = " ".join(result.out.split())  # NB: the console wraps at the terminal width
    assert "a torch.profiler trace" in text and "median of 3" in text
    data = json.loads(report.read_text())
    assert data["diagnose"]["trace"] == str(TRACE) and data["diagnose"]["steps"] == 3
    written = json.loads(exported.read_text())
    assert written["schema"] == TRACE_SCHEMA and any("roofline" in e.get("args", {}) for e in written["traceEvents"])
    again = cli("diagnose", "--trace", str(TRACE), "-o", str(report), "--export-trace", str(exported))
    assert again.code == 0, again.err  # our own trace is replaced


def test_cli_live_export(cli, tmp_path, fake_cpu):
    exported = tmp_path / "live.json"
    args = ("diagnose", str(MLP), "--device", "cpu", "--warmup", "0", "--iters", "1")
    result = cli(*args, "-o", str(tmp_path / "r.json"), "--export-trace", str(exported))
    assert result.code == 0, result.err
    assert json.loads(exported.read_text())["schema"] == TRACE_SCHEMA


def test_cli_export_refuses_a_file_not_ours(cli, tmp_path):
    other = tmp_path / "notes.json"
    other.write_text('{"mine": 1}')
    result = cli("diagnose", "--trace", str(TRACE), "-o", str(tmp_path / "r.json"), "--export-trace", str(other))
    assert result.code == 2 and "--export-trace" in _error(result) and "--force" in _error(result)
    assert other.read_text() == '{"mine": 1}'


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--trace", "T"), "or --trace TRACE.json: one of them"),
        ((), "or --trace TRACE.json: one of them"),
        (("--iters", "3"), "--iters: only for a live run"),
        (("--device", "cpu"), "--device: only for a live run"),
    ],
)
def test_cli_usage(cli, tmp_path, args, says):
    base = ["diagnose", str(MLP)] if args and args[0] == "--trace" else ["diagnose"]
    if args and args[0] != "--trace":
        base = ["diagnose", "--trace", str(TRACE)]
    result = cli(*base, *args, "-o", str(tmp_path / "r.json"))
    assert result.code == 2 and says in _error(result)


def _gz(tmp_path: Path, data: bytes, name: str = "t.json.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("foreign", "not a torch.profiler (Kineto) trace"),
        ("no_shapes", "recorded without shapes"),
        ("truncated", "truncated or corrupt"),
        ("not_json", "not JSON"),
        ("not_trace", "not a Chrome trace"),
        ("missing", "no such file"),
    ],
)
def test_bad_traces_get_one_line(cli, tmp_path, content, says):
    if content == "foreign":  # Chrome's own trace format, from another tool: no cpu_op events
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "v8", "name": "Run", "ts": 0, "dur": 1}]}))
    elif content == "no_shapes":
        trace = read_trace(TRACE)
        for event in trace["traceEvents"]:
            for key in ("Input Dims", "Input type", "Input Strides", "Concrete Inputs"):
                event.get("args", {}).pop(key, None)
        path = tmp_path / "t.json"
        path.write_text(json.dumps(trace))
    elif content == "truncated":
        data = TRACE.read_bytes()
        path = _gz(tmp_path, data[: len(data) // 2])
    elif content == "not_json":
        path = tmp_path / "t.json"
        path.write_text("ProfilerStep#1 aten::mm 12.5us\n")
    elif content == "not_trace":
        path = _gz(tmp_path, gzip.compress(b'{"schema": "something else"}'))
    else:
        path = tmp_path / "absent.json"
    result = cli("diagnose", "--trace", str(path), "-o", str(tmp_path / "r.json"))
    assert result.code == 2, result.err
    line = _error(result)
    assert says in line and len(result.err.strip().splitlines()) == 1
    if content in ("foreign", "no_shapes"):
        assert "record_shapes=True" in line


def test_read_trace_errors_are_workload_errors(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("[1, 2")
    with pytest.raises(WorkloadError, match="not JSON"):
        read_trace(path)


@pytest.mark.gpu
def test_gpu_round_trip_kernels(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    live = diagnose(MLP, DiagnoseOptions(device="cuda", warmup=1, iters=3, keep_trace=True))
    exported = annotate(live.timing.trace, live.timing.matched_ops, live.timing.op_owners, live.placed.points)
    assert any("roofline" in e.get("args", {}) for e in exported["traceEvents"] if e.get("cat") == "kernel")
    path = tmp_path / "live.json"
    path.write_text(json.dumps(exported))
    back = diagnose_trace(path)
    assert back.timing.device == "cuda" and back.timing.kernel_count > 0
    assert [(r.op, r.flops, r.bytes) for r in back.records] == [(r.op, r.flops, r.bytes) for r in live.records]
