"""The training-loop hook (issue 29, item 1): roofline.training.StepProfiler and its Hugging Face and Lightning
adapters (on fakes of their callback interfaces; on the real packages where installed). Tiny model, CPU, fake
roofs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from test_diagnose_cli import FAKE_CPU  # noqa: E402

from roofline.errors import UsageError  # noqa: E402
from roofline.training import (  # noqa: E402
    PREFIX,
    StepProfiler,
    huggingface_callback,
    lightning_callback,
)


@pytest.fixture
def fake_cpu(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))


class Loop:
    """A tiny training loop: one step = forward, backward, optimizer step."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.x = torch.randn(8, 16)

    def step(self) -> None:
        self.opt.zero_grad()
        self.model(self.x).square().mean().backward()
        self.opt.step()


class FakeWriter:
    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []
        self.texts: list[tuple[str, str, int]] = []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))

    def add_text(self, tag, text, step):
        self.texts.append((tag, text, step))


def test_every_n_steps_one_window_is_diagnosed_and_logged_everywhere(fake_cpu, tmp_path):
    loop, writer, seen = Loop(), FakeWriter(), []
    log = tmp_path / "roofline.jsonl"
    profiler = StepProfiler(every=5, first=1, log=log, writer=writer, callback=seen.append, model=loop.model)
    for _ in range(12):  # windows at steps 1 (steps 1-4) and 6 (6-9); step 11 opens one the loop never ends
        with profiler.step():
            loop.step()
    assert profiler.active
    profiler.close()
    assert not profiler.active
    assert [e["step"] for e in profiler.entries] == [1, 6] and seen == profiler.entries
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert lines == profiler.entries
    entry = profiler.last
    # MFU, MBU and the roofline time are the diagnosis's own summary values (one definition)
    summary = profiler.result.placed.summary
    assert entry["mfu"] == summary.mfu and entry["mbu"] == summary.mbu
    assert entry["roofline_time_s"] == summary.roof_time_s > 0 and entry["flops"] == summary.flops > 0
    assert entry["device"] == FAKE_CPU.name
    assert entry["top_finding"] == (profiler.result.findings[0].rule if profiler.result.findings else "")
    assert {(tag, step) for tag, _, step in writer.scalars} == {
        (PREFIX + name, step) for name in ("mfu", "mbu", "roofline_time_s", "step_time_s") for step in (1, 6)
    }
    # the top finding's text at each window that has one (which finding leads follows the measured times)
    assert [step for _, _, step in writer.texts] == [e["step"] for e in profiler.entries if e["top_finding"]]


def test_the_window_schedule_and_misuse():
    profiler = StepProfiler(every=100)
    assert [s for s in range(350) if profiler.starts_window(s)] == [100, 200, 300]
    assert [s for s in range(30) if StepProfiler(every=10, first=0).starts_window(s)] == [0, 10, 20]
    with pytest.raises(UsageError, match="at least 4"):
        StepProfiler(every=3)
    profiler.start_step()
    with pytest.raises(UsageError, match="twice"):
        profiler.start_step()
    profiler.end_step()
    with pytest.raises(UsageError, match="without start_step"):
        profiler.end_step()


def test_an_exception_in_a_step_closes_the_window_and_goes_on_up(fake_cpu):
    loop = Loop()
    profiler = StepProfiler(every=4, first=0, model=loop.model)
    with pytest.raises(RuntimeError, match="boom"), profiler.step():
        loop.step()
        raise RuntimeError("boom")
    assert not profiler.active and profiler.entries == [] and profiler.step_index == 1
    with profiler.step():  # the loop goes on, the hooks and the dispatch mode are gone
        loop.step()
    assert not profiler.active


def test_a_window_that_cannot_be_diagnosed_logs_the_error_and_training_goes_on(fake_cpu, tmp_path):
    profiler = StepProfiler(every=4, first=0, log=tmp_path / "l.jsonl")
    with pytest.warns(UserWarning, match="not diagnosed"):
        for _ in range(4):
            with profiler.step():
                pass  # a step that runs no tensor operation
    assert profiler.entries == [{"step": 0, "error": profiler.entries[0]["error"]}]
    assert "no tensor operations" in profiler.entries[0]["error"]


class FakeTrainerCallback:
    """transformers.TrainerCallback's interface: events with (args, state, control, **kwargs)."""


class FakeState:
    def __init__(self) -> None:
        self.global_step = 0
        self.log_history: list[dict] = []


def test_hugging_face_adapter_on_a_fake_trainer(fake_cpu):
    loop = Loop()
    cls = huggingface_callback(FakeTrainerCallback)
    assert issubclass(cls, FakeTrainerCallback)
    callback, state = cls(every=4, first=0), FakeState()
    for step in range(4):
        callback.on_step_begin(None, state, None, model=loop.model)
        loop.step()
        state.global_step = step + 1
        callback.on_step_end(None, state, None, model=loop.model)
    entry = callback.profiler.last
    assert state.log_history == [{PREFIX + "mfu": entry["mfu"], PREFIX + "mbu": entry["mbu"],
                                  PREFIX + "roofline_time_s": entry["roofline_time_s"],
                                  PREFIX + "step_time_s": entry["step_time_s"], "step": 4}]  # fmt: skip
    logs = {"loss": 1.0}
    callback.on_log(None, state, None, logs=logs)
    assert logs[PREFIX + "mfu"] == entry["mfu"] and logs["loss"] == 1.0
    again = {"loss": 0.5}
    callback.on_log(None, state, None, logs=again)
    assert again == {"loss": 0.5}  # each window's numbers are added once
    callback.on_train_end(None, state, None)


class FakeLightningCallback:
    pass


class FakeLogger:
    def __init__(self) -> None:
        self.logged: list[tuple[dict, int]] = []

    def log_metrics(self, metrics, step):
        self.logged.append((metrics, step))


def test_lightning_adapter_on_a_fake_trainer(fake_cpu):
    loop = Loop()
    cls = lightning_callback(FakeLightningCallback)
    callback = cls(every=4, first=0)
    trainer = type("Trainer", (), {"logger": FakeLogger()})()
    for batch_idx in range(4):
        callback.on_train_batch_start(trainer, loop.model, None, batch_idx)
        loop.step()
        callback.on_train_batch_end(trainer, loop.model, None, None, batch_idx)
    entry = callback.profiler.last
    assert trainer.logger.logged == [
        ({PREFIX + k: entry[k] for k in ("mfu", "mbu", "roofline_time_s", "step_time_s")}, 0)
    ]
    callback.on_train_end(trainer, loop.model)


def test_the_adapters_are_the_real_packages_callbacks_where_installed():
    import roofline.training as training

    transformers = pytest.importorskip("transformers")
    assert issubclass(training.HuggingFaceCallback, transformers.TrainerCallback)


def test_the_lightning_adapter_where_installed():
    import roofline.training as training

    lightning = pytest.importorskip("lightning.pytorch")
    assert issubclass(training.LightningCallback, lightning.Callback)


def test_importing_the_module_imports_no_training_framework_nor_torch():
    code = (
        "import sys, roofline, roofline.training; "
        "print(sorted(m for m in ('torch', 'transformers', 'lightning', 'pytorch_lightning') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------------------------------- reusing the count


def test_the_op_signature_is_the_multiset_of_ops_and_shapes():
    from roofline.training import op_signature

    a = {"kind": "op", "name": "aten::mm", "input_shapes": [[8, 16], [16, 4]]}
    b = {"kind": "op", "name": "aten::add", "input_shapes": [[8, 4], [8, 4]]}
    k = {"kind": "kernel", "name": "gemm_bf16", "start_us": 0.0}
    other = {"kind": "launch", "name": "cudaLaunchKernel"}
    assert op_signature([a, b, b, k, other]) == (
        (("kernel", "gemm_bf16", ""), 1),
        (("op", "aten::add", "[[8, 4], [8, 4]]"), 2),
        (("op", "aten::mm", "[[8, 16], [16, 4]]"), 1),
    )
    assert op_signature([b, a, b, k]) == op_signature([a, b, b, k])  # the order threads interleave in: no matter
    assert op_signature([a, b, k]) != op_signature([a, b, b, k])  # one op more
    assert op_signature([{**a, "input_shapes": [[16, 16], [16, 4]]}, b, b, k]) != op_signature([a, b, b, k])
    assert op_signature([a, b, b, {**k, "name": "gemm_fp32"}]) != op_signature([a, b, b, k])


class ShapedLoop(Loop):
    """The tiny loop with a batch that can change between steps."""

    def batch(self, rows: int) -> None:
        self.x = torch.randn(rows, 16)


def run_windows(profiler: StepProfiler, loop: Loop, steps: int, change: dict[int, int] | None = None) -> None:
    for i in range(steps):
        if change and i in change:
            loop.batch(change[i])  # type: ignore[attr-defined]
        with profiler.step():
            loop.step()
    profiler.close()


def logged(entries):
    """What a window logs that its count decides (MFU and MBU also take the measured time)."""
    return [(e["step"], e["flops"], e["bytes"], e["roofline_time_s"]) for e in entries]


def test_a_count_is_reused_while_the_ops_keep_their_signature_and_logs_the_same(fake_cpu):
    reused = StepProfiler(every=4, first=0, model=(loop := Loop()).model)
    run_windows(reused, loop, 12)
    assert reused.counts == {"counted": 1, "reused": 2, "changed": 0}
    fresh = StepProfiler(every=4, first=0, model=(again := Loop()).model, reuse_counts=False)
    run_windows(fresh, again, 12)
    assert fresh.counted is None
    assert logged(reused.entries) == logged(fresh.entries)
    assert [e["step"] for e in reused.entries] == [0, 4, 8] and reused.entries[0]["flops"] > 0
    # the reused windows diagnose the very records the first window counted
    assert reused.counted is not None
    assert all(a is b for a, b in zip(reused.counted.records, reused.result.records, strict=True))


def test_a_shape_change_drops_the_count_and_the_next_step_counts_afresh(fake_cpu):
    loop = ShapedLoop()
    profiler = StepProfiler(every=5, first=0, model=loop.model)
    # windows: 0-3 counts (batch 8), 5-8 reuses; the batch is 16 from step 9: the window at 10-13 finds other shapes,
    # logs nothing, and step 14 opens a window that counts the new shapes (15 is inside it)
    run_windows(profiler, loop, 19, change={9: 16})
    assert profiler.counts == {"counted": 2, "reused": 1, "changed": 1}
    assert [e["step"] for e in profiler.entries] == [0, 5, 14]
    # the window at 14 logs what a fresh count of batch 16 gives, not the batch of 8's
    fresh = StepProfiler(every=4, first=0, model=(other := ShapedLoop()).model, reuse_counts=False)
    run_windows(fresh, other, 4, change={0: 16})
    assert logged(profiler.entries)[2][1:] == logged(fresh.entries)[0][1:]
    assert profiler.entries[2]["flops"] != profiler.entries[0]["flops"]
    # and its count is the one kept now
    assert profiler.counted is not None
    shapes = [list(s) for r in profiler.counted.records for s in r.input_shapes]
    assert [16, 16] in shapes and [8, 16] not in shapes


def test_every_recount_every_th_window_counts_afresh(fake_cpu):
    profiler = StepProfiler(every=4, first=0, model=(loop := Loop()).model, recount_every=2)
    run_windows(profiler, loop, 16)
    assert profiler.counts == {"counted": 2, "reused": 2, "changed": 0}
    assert [e["step"] for e in profiler.entries] == [0, 4, 8, 12]
    with pytest.raises(UsageError, match="recount_every=0: at least 1"):
        StepProfiler(every=4, recount_every=0)


def test_the_collector_is_held_off_between_steps_and_restored():
    import gc

    from roofline.training import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # left as it was: off
    finally:
        gc.enable()


def test_a_window_reads_the_raw_kineto_events_and_falls_back_to_the_function_events():
    from types import SimpleNamespace

    from roofline.diagnose.profile import profiled_events

    op = SimpleNamespace(device_type="DeviceType.CPU", activity_type=None, linked_correlation_id=0, name="aten::mm",
                         time_range=SimpleNamespace(start=1.0, end=3.0), id=7, thread=1, input_shapes=[[2, 3], [3, 4]],
                         input_dtypes=["float", "float"], is_async=False, is_user_annotation=False)  # fmt: skip
    # no kineto results to read (another torch): torch's FunctionEvent list, no launch facts
    events, facts = profiled_events(SimpleNamespace(events=lambda: [op]))
    assert facts is False
    assert [(e["kind"], e["name"], e["input_shapes"]) for e in events] == [("op", "aten::mm", [[2, 3], [3, 4]])]
    # kineto results that cannot be read: the same
    broken = SimpleNamespace(trace_start_ns=lambda: 0, events=lambda: 1 / 0)
    fallback = SimpleNamespace(profiler=SimpleNamespace(kineto_results=broken), events=lambda: [op])
    assert profiled_events(fallback) == (events, False)
