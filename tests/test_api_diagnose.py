"""The in-process API: roofline.diagnose(model, inputs) and roofline.profile() around a region of a loop, on the
CPU (tiny models; injected timings or CPU roofs where a number would depend on the host's speed)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from diagnose_doubles import timed_by  # noqa: E402
from test_diagnose_cli import FAKE_CPU  # noqa: E402

import roofline  # noqa: E402
from roofline.diagnose.region import Plan  # noqa: E402
from roofline.errors import UsageError, WorkloadError  # noqa: E402
from roofline.report.records import OpTiming, Timing  # noqa: E402


@pytest.fixture
def fake_cpu(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    return FAKE_CPU


def fake_time(model, inputs, kwargs, records, *, device, mode, warmup, iters, **_):
    ops = [OpTiming(index=r.index, device_time_s=1e-4, kernels=0) for r in records]
    return Timing(device="cpu", iterations=iters, wall_s=1e-4 * len(ops) * 1.1, ops=ops)


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def test_diagnose_a_module_with_an_injected_timer(fake_cpu, tmp_path):
    model = Tiny()
    result = roofline.diagnose(model, (torch.randn(4, 32),), warmup=1, iters=3, boundaries=timed_by(fake_time))
    assert isinstance(result, roofline.Diagnosis)
    summary = result.result.placed.summary
    assert summary.iterations == 3 and summary.ops == len(result.result.records) > 0
    assert {"aten::addmm", "aten::gelu"} <= {r.op for r in result.result.records}
    assert any(r.module == "fc1" for r in result.result.records)  # module paths, as for a model file
    assert result.findings and all(f.time_s > 0 for f in result.findings)
    report = result.report()
    assert report.source == "diagnose" and report.diagnose["model"] == "Tiny"
    assert report.diagnose["convention"] == "in-process" and report.diagnose["device"] == "cpu"
    frame = result.frame()
    assert len(frame) == len(report.rows) and "op" in frame.columns
    saved = result.save(tmp_path / "r.json")
    assert roofline.load_report(saved).rows == report.rows
    figure = result.figure()
    assert figure.axes
    assert "Tiny" in repr(result)


def test_diagnose_training_puts_the_module_mode_back(fake_cpu):
    model = Tiny().eval()
    result = roofline.diagnose(model, torch.randn(4, 32), mode="training", iters=1, boundaries=timed_by(fake_time))
    assert any(r.phase == "backward" for r in result.result.records)
    assert model.training is False and all(p.grad is None for p in model.parameters())


def test_diagnose_a_plain_callable_with_keyword_inputs_on_a_real_cpu_run(fake_cpu):
    a, b = torch.randn(64, 64), torch.randn(64, 64)

    def kernel(x, y, *, scale):
        return torch.relu(x @ y) * scale

    result = roofline.diagnose(kernel, (a, b), {"scale": 2.0}, warmup=1, iters=2)
    ops = {p.op: p for p in result.result.placed.points}
    assert {"aten::mm", "aten::relu", "aten::mul"} <= set(ops)
    assert ops["aten::mm"].flops == 2 * 64**3 and ops["aten::mm"].timed and ops["aten::mm"].time_s > 0
    assert result.report().diagnose["model"] == "kernel"


def test_the_package_stays_callable_after_its_modules_are_imported():
    import roofline.diagnose.pipeline  # binds roofline.diagnose to the package

    assert callable(roofline.diagnose) and roofline.diagnose.pipeline is not None


def test_diagnose_bad_input_is_one_error():
    with pytest.raises(UsageError, match=r"not an nn\.Module or callable"):
        roofline.diagnose(42, ())
    with pytest.raises(UsageError, match="--mode"):
        roofline.diagnose(Tiny(), torch.randn(1, 32), mode="fast")
    with pytest.raises(UsageError, match="--dtype"):
        roofline.diagnose(Tiny(), torch.randn(1, 32), dtype="int3", boundaries=timed_by(fake_time))


# ------------------------------------------------------------------------------------------- profile()


def test_plan_phases():
    plan = Plan(warmup=1, steps=3)
    assert [plan.phase(i) for i in range(10)] == [
        "warm-up", "count", "plain", "plain", "plain", "profile", "profile", "profile", "profile", "done",
    ]  # fmt: skip
    assert plan.needed == 9
    with pytest.raises(UsageError):
        Plan(steps=0)


def _train(model, run, steps):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 32)
    done_at = None
    for i in range(steps):
        optimizer.zero_grad(set_to_none=True)
        model(x).sum().backward()
        optimizer.step()
        run.step()
        if run.done and done_at is None:
            done_at = i
    return done_at


def test_profile_a_training_loop_over_three_steps(fake_cpu):
    model = Tiny()
    clock = iter([10.0, 10.03]).__next__  # the plain steps: 30 ms for 3 steps
    run = roofline.api.ProfiledRun(steps=3, model=model, clock=clock)
    with run:
        assert run.phase == "warm-up"
        done_at = _train(model, run, 12)
    assert done_at == run.steps_needed - 1 == 8
    result = run.result
    records = result.records
    assert any(r.phase == "backward" for r in records) and any(r.module == "fc2" for r in records)
    assert not any(r.op.startswith("profiler::") for r in records)  # the optimizer's record_function markers
    summary = result.placed.summary
    assert summary.iterations == 3 and summary.wall_s == pytest.approx(0.01)
    assert summary.timed_ops >= 0.9 * summary.ops  # the profiled steps match the counted one
    assert result.options["mode"] == "training" and result.convention == "region"
    assert run.report().diagnose["model"] == "Tiny" and len(run.frame()) == len(run.report().rows)
    assert any("profiled region" in note for note in run.notes)


def test_profile_without_a_model_names_the_region(fake_cpu):
    a = torch.randn(32, 32)
    with roofline.profile(steps=1, warmup=0) as run:
        for _ in range(run.steps_needed):
            torch.mm(a, a)
            run.step()
    assert run.report().diagnose["model"] == "profiled region"
    assert {r.module for r in run.result.records} == {""}


def test_profile_that_ends_too_early_says_how_many_steps_it_needs(fake_cpu):
    run = roofline.profile(steps=3)
    with pytest.raises(WorkloadError, match=r"ended after 4 step\(s\).*needs 9"), run:
        _train(Tiny(), run, 4)
    with pytest.raises(UsageError, match="not finished"):
        run.findings  # noqa: B018


def test_profile_lets_the_loops_exception_through_and_cleans_up(fake_cpu):
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    run = roofline.profile(steps=1, warmup=0)
    with pytest.raises(RuntimeError, match="boom"), run:
        torch.ones(2) + 1  # the count step: under the dispatch mode
        raise RuntimeError("boom")
    assert _get_current_dispatch_mode() is None
    with pytest.raises(UsageError, match="outside"):
        run.step()
