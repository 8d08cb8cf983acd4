"""Diagnose's own time (issue 15): the stages' seconds in the report and on the console, the fixed floor, and the
warm-up and profiled iterations sized from a time budget (--warmup/--iters auto) or given. Every clock is
injected: nothing here depends on the host's speed."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
import torch
from diagnose_devices import CPU_SLOW_LAUNCH as CPU
from diagnose_doubles import FakeTimer, FixedDevice

from roofline.diagnose.pipeline import DEFAULT_ITERS, DEFAULT_WARMUP, Boundaries, DiagnoseOptions, diagnose
from roofline.diagnose.profile import Budget, auto_iters, events_from_kineto, time_model
from roofline.render.diagnose import stage_lines, stages_line
from roofline.report.records import FLOOR_STAGES, OpRecord, OpTiming, Timing, floor_seconds

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "workloads" / "models" / "gelu_chain_unfused.py"

TIMING_PARTS = {"warmup": 0.25, "timed": 0.5, "profiled": 1.0, "events": 0.75}


def ticking(step: float = 0.5):
    """A clock that advances ``step`` seconds each time it is read."""
    ticks = itertools.count(0.0, step)
    return lambda: next(ticks)


def fake_time(seen: dict):
    def time_stage(model, inputs, kwargs, records, *, device, mode, warmup, iters, **extra):
        seen.update(warmup=warmup, iters=iters, **extra)
        ops = [OpTiming(index=r.index, device_time_s=1e-4, kernels=0) for r in records]
        timing = Timing(device="cpu", iterations=iters or 4, wall_s=1e-4 * len(ops) * 1.1, ops=ops)
        timing.warmup_calls = 2 if warmup is None else warmup
        timing.stage_s = dict(TIMING_PARTS)
        return timing

    return time_stage


def boundaries(seen: dict) -> Boundaries:
    return Boundaries(device=FixedDevice(CPU), timer=FakeTimer(fake_time(seen)), clock=ticking(0.5))


# ------------------------------------------------------------------------------------------------ the report


def test_stage_timings_are_in_the_diagnose_report():
    seen: dict = {}
    result = diagnose(MODEL, DiagnoseOptions(device="cpu"), boundaries=boundaries(seen))
    about = result.report("roofline diagnose").model_dump(mode="json")["diagnose"]
    stages_s = about["stages"]
    # each stage read on the injected clock: one tick (0.5 s) between two marks; the timing stage's own parts
    assert list(stages_s) == [
        "torch_import", "cuda_init", "load", "roofs", "count", "warmup", "timed", "profiled", "events", "place",
    ]  # fmt: skip
    assert stages_s["torch_import"] == stages_s["load"] == stages_s["count"] == pytest.approx(0.5)
    assert {name: stages_s[name] for name in ("warmup", "timed", "profiled")} == {
        "warmup": 0.25, "timed": 0.5, "profiled": 1.0,
    }  # fmt: skip
    assert about["floor_s"] == pytest.approx(stages_s["torch_import"] + stages_s["cuda_init"])
    assert json.loads(json.dumps(about))["stages"] == stages_s  # plain JSON


def test_floor_is_python_torch_and_cuda_init():
    stages_s = {"python": 0.5, "torch_import": 1.25, "cuda_init": 0.75, "load": 3.0, "count": 2.0}
    assert FLOOR_STAGES == ("python", "torch_import", "cuda_init")
    assert floor_seconds(stages_s) == 2.5
    line = stages_line(stages_s, 8.0)
    assert line == (
        "diagnose took 8.0 s: floor 2.5 s (python+torch 1.8, CUDA init 0.8), load 3.0, count 2.0, other 0.5"
    )


def test_verbose_lists_each_stage_with_its_share():
    lines = stage_lines({"python": 1.0, "torch_import": 1.0, "load": 2.0}, 5.0)
    assert lines[0] == "diagnose's own time, by stage:"
    assert lines[1].split() == ["python", "1.000", "s", "20.0%", "(floor)"]
    assert lines[3].split() == ["load", "2.000", "s", "40.0%"]
    assert lines[4].split() == ["other", "1.000", "s", "20.0%"]


# ------------------------------------------------------------------------------------------------ iterations


def test_auto_iterations_from_an_estimate():
    budget = Budget()
    assert auto_iters(0.001, 10, budget) == 10  # fast: the most, 10
    assert auto_iters(0.125, 10, budget) == 4  # 0.5 s of them
    assert auto_iters(2.0, 10, budget) == 1  # slow: at least one
    assert auto_iters(0.001, 1000, budget) == 4  # at most 4000 counted ops in the profile
    assert auto_iters(0.0, 0, budget) == 10  # no estimate: the most


def tiny() -> tuple[torch.nn.Module, torch.Tensor, list[OpRecord]]:
    from roofline.diagnose.count import count_ops

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU()).eval()
    x = torch.randn(2, 8)
    return model, x, count_ops(model, (x,))


def calls_counter(model: torch.nn.Module) -> dict:
    calls = {"n": 0}
    model.register_forward_hook(lambda *args: calls.__setitem__("n", calls["n"] + 1))
    return calls


def test_auto_sizing_from_an_injected_clock():
    model, x, records = tiny()
    calls = calls_counter(model)
    asked = {}

    def fake_profile(step, iters, device):
        asked.update(iters=iters, calls=calls["n"])
        return [], 0.0

    # the clock moves 0.125 s per reading: the first warm-up call reads 0.125 s, and 0.2 s have passed after it
    timing = time_model(model, (x,), {}, records, device="cpu", profile=fake_profile, clock=ticking(0.125))
    assert timing.warmup_calls == 1
    assert asked == {"iters": 4, "calls": 1 + 4}  # 0.5 s / 0.125 s; warm-up + the timed loop before the profile
    assert timing.iterations == 4
    assert set(timing.stage_s) == {"warmup", "timed", "profiled", "events"}
    assert timing.stage_s["warmup"] == pytest.approx(0.5)  # readings: start, the call (two), the budget check, end


def test_auto_warmup_stops_at_three_calls():
    model, x, records = tiny()
    calls = calls_counter(model)
    timing = time_model(
        model, (x,), {}, records, device="cpu", iters=2, profile=lambda step, iters, device: ([], 0.0),
        clock=lambda: 0.0,  # no time passes: the call count ends the warm-up
    )  # fmt: skip
    assert timing.warmup_calls == 3 and calls["n"] == 3 + 2


def test_warmup_zero_sizes_from_the_counting_pass():
    model, x, records = tiny()
    asked = {}

    def fake_profile(step, iters, device):
        asked["iters"] = iters
        return [], 0.0

    budget = Budget(upper_s=0.25)  # the counting pass took 0.25 s: at most 2 iterations of 0.5 s
    timing = time_model(model, (x,), {}, records, device="cpu", warmup=0, budget=budget, profile=fake_profile)
    assert timing.warmup_calls == 0 and asked["iters"] == 2


def test_explicit_warmup_and_iters_are_honoured():
    model, x, records = tiny()
    calls = calls_counter(model)
    asked = {}

    def fake_profile(step, iters, device):
        asked.update(iters=iters, calls=calls["n"])
        return [], 0.0

    timing = time_model(
        model, (x,), {}, records, device="cpu", warmup=5, iters=7, profile=fake_profile, clock=ticking(10.0)
    )  # a slow clock would size 1 iteration: the counts given win
    assert asked == {"iters": 7, "calls": 5 + 7} and timing.warmup_calls == 5 and timing.iterations == 7


def test_pipeline_passes_auto_or_the_counts_given():
    seen: dict = {}
    result = diagnose(MODEL, DiagnoseOptions(device="cpu"), boundaries=boundaries(seen))
    assert seen["warmup"] is None and seen["iters"] is None
    assert seen["budget"].upper_s == pytest.approx(0.5)  # the counting pass's seconds, on the injected clock
    assert result.options["auto"] == ["warmup", "iters"]
    assert (result.options["warmup"], result.options["iters"]) == (2, 4)  # what the timing stage ran

    seen.clear()
    result = diagnose(MODEL, DiagnoseOptions(device="cpu", warmup=1, iters=3), boundaries=boundaries(seen))
    assert (seen["warmup"], seen["iters"]) == (1, 3) and "budget" not in seen
    assert "auto" not in result.options and (result.options["warmup"], result.options["iters"]) == (1, 3)


def test_verify_keeps_its_counts_when_the_timing_was_sized(monkeypatch):
    seen: dict = {}
    asked: dict = {}

    def verify(model, inputs, kwargs, findings, *, warmup, iters, sink, **_):
        asked.update(warmup=warmup, iters=iters)

    monkeypatch.setattr("roofline.diagnose.verify.verify", verify)
    diagnose(MODEL, DiagnoseOptions(device="cpu", verify=True), boundaries=boundaries(seen))
    assert asked == {"warmup": DEFAULT_WARMUP, "iters": DEFAULT_ITERS}


# ------------------------------------------------------------------------------------------------ the CLI


@pytest.fixture
def quick(monkeypatch):
    """CPU roofs without a calibration, and the timing stage faked (the counting pass still runs the model)."""
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    monkeypatch.setattr("roofline.diagnose.profile.time_model", fake_time({}))


def test_cli_summary_line_and_verbose_stages(cli, tmp_path, quick):
    out = tmp_path / "r.json"
    normal = cli("diagnose", str(MODEL), "--device", "cpu", "-o", str(out))
    assert normal.code == 0, normal.err
    summary = [line for line in normal.err.splitlines() if line.startswith("diagnose took ")]
    assert len(summary) == 1 and "floor " in summary[0] and "count " in summary[0] and "write " in summary[0]
    assert "by stage" not in normal.err
    report = json.loads(out.read_text())["diagnose"]
    assert {"torch_import", "cuda_init", "load", "count", "warmup", "profiled", "place", "render"} <= set(
        report["stages"]
    )
    assert report["floor_s"] == pytest.approx(floor_seconds(report["stages"]))

    verbose = cli("-v", "diagnose", str(MODEL), "--device", "cpu", "-o", str(out))
    assert verbose.code == 0, verbose.err
    listed = verbose.err.split("diagnose's own time, by stage:\n", 1)[1].splitlines()
    names = [line.split("  ")[1].strip() for line in listed if line.startswith("  ")]
    assert {"torch import", "CUDA init", "load", "count", "warm-up", "profiled", "place", "render", "write"} <= set(
        names
    )

    quiet = cli("-q", "diagnose", str(MODEL), "--device", "cpu", "-o", str(out))
    assert quiet.code == 0 and quiet.err == ""


def test_cli_counts_given_or_auto(cli, tmp_path, quick):
    out = tmp_path / "r.json"
    assert cli("diagnose", str(MODEL), "--device", "cpu", "--warmup", "1", "--iters", "3", "-o", str(out)).code == 0
    report = json.loads(out.read_text())["diagnose"]
    assert (report["warmup"], report["iters"]) == (1, 3) and "auto" not in report
    bad = cli("diagnose", str(MODEL), "--device", "cpu", "--iters", "many")
    assert bad.code == 2 and bad.err == "Error: --iters many: a whole number or auto\n"


# ------------------------------------------------------------------------------------------------ raw events


class RawEvent:
    """A raw kineto event (torch's _KinetoEvent): its values behind methods."""

    def __init__(self, name, start, end, *, device="CPU", corr=0, linked=0, thread=1, activity=None, shapes=(),
                 dtypes=(), metadata="", stream=0):  # fmt: skip
        self.values = dict(name=name, start=start, end=end, device=device, corr=corr, linked=linked, thread=thread,
                           activity=activity, shapes=list(shapes), dtypes=list(dtypes), metadata=metadata,
                           stream=stream)  # fmt: skip

    def name(self):
        return self.values["name"]

    def start_ns(self):
        return self.values["start"]

    def end_ns(self):
        return self.values["end"]

    def device_type(self):
        return self.values["device"]

    def linked_correlation_id(self):
        return self.values["linked"]

    def correlation_id(self):
        return self.values["corr"]

    def is_async(self):
        return False

    def start_thread_id(self):
        return self.values["thread"]

    def end_thread_id(self):
        return self.values["thread"]

    def activity_type(self):
        return self.values["activity"]

    def is_user_annotation(self):
        return False

    def is_python_function(self):
        return False

    def is_hidden_event(self):
        return False

    def structured_input_shapes(self):
        return self.values["shapes"]

    def shapes(self):
        return self.values["shapes"]

    def dtypes(self):
        return self.values["dtypes"]

    def device_resource_id(self):
        return self.values["stream"]

    def metadata_json(self):
        return self.values["metadata"]


def test_events_from_raw_kineto_events_in_one_pass():
    facts = '"grid": [4, 1, 1], "block": [128, 1, 1], "registers per thread": 32, "est. achieved occupancy %": 50'
    raw = [
        RawEvent("roofline::iteration", 1000, 9000, activity="user_annotation"),
        RawEvent(
            "aten::mm",
            2000,
            5000,
            corr=7,
            thread=3,
            activity="cpu_op",
            shapes=[[2, 8], [8, 4]],
            dtypes=["float", "float"],
        ),
        RawEvent("[memory]", 2500, 2500),  # left out, as torch's FunctionEvents leave it out
        RawEvent("cudaLaunchKernel", 3000, 3500, corr=41, linked=7, thread=999, activity="cuda_runtime"),
        RawEvent(
            "_Z6kernelv", 4000, 6000, device="CUDA", corr=41, linked=7, activity="kernel", metadata=facts, stream=7
        ),
    ]
    events, any_facts = events_from_kineto(raw, 1000, demangle=lambda name: "kernel()")
    kinds = [e["kind"] for e in events]
    assert kinds == ["iteration", "op", "launch", "kernel"] and any_facts
    op, launch, kernel = events[1:]
    assert op == {"kind": "op", "start_us": 1.0, "end_us": 4.0, "id": 7, "name": "aten::mm", "thread": 3,
                  "input_shapes": [[2, 8], [8, 4]]}  # fmt: skip
    assert launch["thread"] == 3 and launch["correlation"] == 41  # on its op's thread, as torch puts it
    assert kernel["name"] == "kernel()" and kernel["external_id"] == 7 and kernel["stream"] == 7
    assert kernel["grid"] == [4, 1, 1] and kernel["registers_per_thread"] == 32 and kernel["occupancy"] == 0.5


def test_the_status_line_shows_only_where_stderr_may_be_a_terminal(monkeypatch):
    import io
    import sys

    from roofline.cli import output, verbosity

    class Pipe(io.StringIO):
        def isatty(self) -> bool:
            return False

    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stderr", Pipe())
    with output.diagnose_status() as update:
        assert update is None  # a pipe: no status line (and rich not asked)
    shown = Pipe()
    monkeypatch.setattr(sys, "stderr", shown)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich takes the stream for a terminal: the status line runs
    with output.diagnose_status() as update:
        assert callable(update)
        update("count")
    assert "diagnose" in shown.getvalue()
    level = verbosity.QUIET
    monkeypatch.setattr(verbosity, "quiet", lambda: level == verbosity.QUIET)
    with output.diagnose_status() as update:
        assert update is None  # --quiet: none


def test_the_first_call_runs_on_a_gpu_only_and_in_training_only_for_a_module():
    """Profiler.first_call (the model's lazy initialisation, before the counting pass): on CUDA devices, with a
    timer that has it, and in training only where the gradients can be set back to None."""
    from types import SimpleNamespace

    from roofline.diagnose.pipeline import Profiler, _first_call_applies

    module = SimpleNamespace(model=torch.nn.Linear(2, 2))
    function = SimpleNamespace(model=lambda x: x)
    assert _first_call_applies(Profiler(), module, "cuda:0", "inference")
    assert _first_call_applies(Profiler(), function, "cuda", "inference")
    assert _first_call_applies(Profiler(), module, "cuda:0", "training")
    assert not _first_call_applies(Profiler(), function, "cuda:0", "training")  # no zero_grad: counts would change
    assert not _first_call_applies(Profiler(), module, "cpu", "inference")
    assert not _first_call_applies(FakeTimer(lambda *a, **k: None), module, "cuda:0", "inference")  # no first_call


@pytest.mark.gpu
def test_on_cuda_the_first_call_is_its_own_stage_before_the_count():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    import roofline

    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU())
    result = roofline.diagnose(model, (torch.randn(64, 256),), device="cuda", warmup=1, iters=2).result
    order = list(result.stages)
    assert order.index("roofs") < order.index("first_call") < order.index("count")
    assert sum(1 for r in result.records if r.op == "aten::addmm") == 1  # counted once, after the first call
