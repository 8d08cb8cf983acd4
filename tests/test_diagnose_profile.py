"""The torch half of the timing pass: torch.profiler's events as event dicts (with fakes), and time_model end to
end."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from diagnose_events import ADDMM, GELU, fake_events, rec

from roofline.diagnose.join import join, parse_events
from roofline.diagnose.profile import MARKER, events_from_profiler, facts_from_trace, time_model, trace_facts
from roofline.errors import DeviceError, UserCodeError, WorkloadError

torch = pytest.importorskip("torch")


def test_events_from_profiler_classifies_function_events():
    def evt(name, start, end, device="DeviceType.CPU", **kw):
        base = {"id": 0, "thread": 1, "is_user_annotation": False, "linked_correlation_id": 0, "is_async": False}
        base.update(kw)
        return SimpleNamespace(name=name, device_type=device, time_range=SimpleNamespace(start=start, end=end), **base)

    events = [
        evt(MARKER, 0, 100, is_user_annotation=True),
        evt(MARKER, 0, 100, device="DeviceType.CUDA", is_user_annotation=True),  # gpu_user_annotation
        evt("aten::add", 10, 20, id=7, structured_input_shapes=[[4, 4], [], []],
            input_dtypes=["float", "double", "Scalar"]),
        evt("aten::cat", 21, 30, id=8, structured_input_shapes=[[[2, 8], [2, 8]], []],
            input_dtypes=["TensorList", "Scalar"]),
        evt("cudaLaunchKernel", 12, 14, id=501, linked_correlation_id=7),
        evt("vectorized_add", 15, 18, device="DeviceType.CUDA", id=501, linked_correlation_id=7, device_resource_id=7),
    ]  # fmt: skip
    out = events_from_profiler(events)
    kinds = [e["kind"] for e in out]
    assert kinds == ["iteration", "op", "op", "launch", "kernel"]
    add, cat = out[1], out[2]
    assert add["input_shapes"] == [[4, 4], []]  # the wrapped scalar is a 0-dim tensor; the Scalar is dropped
    assert cat["input_shapes"] == [[2, 8], [2, 8]]
    assert out[3]["correlation"] == 501
    assert out[4] == {
        "kind": "kernel",
        "name": "vectorized_add",
        "start_us": 15.0,
        "end_us": 18.0,
        "stream": 7,
        "external_id": 7,
        "correlation": 501,
    }


def test_events_from_profiler_without_linked_ids():
    # torch < 2.13: no activity type, no linked id; a kernel shares its id with its launch call, and those ids
    # overlap the ops' ids; kineto's own CPU events are not ops. join finds the op around the launch call.
    def evt(name, id_, start, end, device="DeviceType.CPU", **kw):
        base = {"thread": 1, "is_user_annotation": False, "is_async": False, "input_shapes": []}
        base.update(kw)
        return SimpleNamespace(
            name=name, id=id_, device_type=device, time_range=SimpleNamespace(start=start, end=end), **base
        )

    events = [
        evt(MARKER, 1, 0, 100, is_user_annotation=True),
        evt("aten::gelu", 6, 10, 40, input_shapes=[[2, 16], []]),
        evt("Activity Buffer Request", 6, 12, 20),
        evt("cudaLaunchKernel", 19, 25, 30),
        evt("gelu_kernel", 19, 33, 38, device="DeviceType.CUDA", device_resource_id=7),
        evt("aten::relu", 19, 50, 60, input_shapes=[[2, 16]]),  # an op whose id equals the kernel's
    ]  # fmt: skip
    out = events_from_profiler(events)
    assert [e["kind"] for e in out] == ["iteration", "op", "launch", "kernel", "op"]
    assert out[1]["input_shapes"] == [[2, 16]]
    assert out[3]["external_id"] is None and out[3]["correlation"] == 19
    parsed = parse_events(out)
    timing = join([GELU], parsed.ops, parsed.kernels, 1, launches=parsed.launches, device="cuda")
    (gelu,) = timing.ops
    assert (
        gelu.kernels == 1 and gelu.device_time_s == pytest.approx(5e-6) and gelu.launch_delay_s == pytest.approx(3e-6)
    )


def test_launch_facts_from_a_chrome_trace_by_correlation():
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "void at::native::vectorized_layer_norm_kernel<float>",
             "args": {"External id": 5, "correlation": 501, "stream": 7, "registers per thread": 40,
                      "shared memory": 128, "blocks per SM": 0.121212, "warps per SM": 3.878788,
                      "grid": [16, 1, 1], "block": [1024, 1, 1], "est. achieved occupancy %": 6,
                      "occupancy": {"activeBlocksPerMultiprocessor": 2, "limitingFactors": "WARPS"}}},
            {"ph": "X", "cat": "kernel", "name": "old", "args": {"correlation": 502, "grid": [4, 1, 1],
                                                                  "est. achieved occupancy": 0.5}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "args": {"correlation": 501}},
            {"ph": "X", "cat": "kernel", "name": "no args"},
            "not an event",
        ]
    }  # fmt: skip
    facts = facts_from_trace(trace)
    assert set(facts) == {501, 502}
    assert facts[501] == {
        "grid": [16, 1, 1], "block": [1024, 1, 1], "registers_per_thread": 40, "shared_memory_bytes": 128,
        "blocks_per_sm": 0.121212, "warps_per_sm": 3.878788, "occupancy": 0.06, "active_blocks_per_sm": 2,
    }  # fmt: skip
    assert facts[502] == {"grid": [4, 1, 1], "occupancy": 0.5}
    assert facts_from_trace({"nothing": 1}) == {} and facts_from_trace("junk") == {}

    kernel = SimpleNamespace(name="ln", device_type="DeviceType.CUDA", time_range=SimpleNamespace(start=1, end=9),
                             id=501, thread=0, is_user_annotation=False, linked_correlation_id=5, is_async=False,
                             device_resource_id=7)  # fmt: skip
    (event,) = events_from_profiler([kernel], facts=facts)
    assert event["grid"] == [16, 1, 1] and event["occupancy"] == 0.06 and event["correlation"] == 501
    (parsed,) = parse_events([event]).kernels
    assert parsed.grid == (16, 1, 1) and parsed.active_blocks_per_sm == 2


def test_trace_facts_never_raises(tmp_path):
    class Broken:
        def export_chrome_trace(self, path):
            raise RuntimeError("no trace in this build")

    class Garbled:
        def export_chrome_trace(self, path):
            with open(path, "w") as handle:
                handle.write("{not json")

    for prof in (Broken(), Garbled()):
        facts, note = trace_facts(prof)
        assert facts == {} and note.startswith("no kernel launch facts (the profiler's trace could not be read")


# ------------------------------------------------------------------------------------------------ time_model


def mlp() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).eval()
    return model, torch.randn(2, 8)


MLP_RECORDS = [ADDMM, GELU, rec(2, "aten::addmm", (4,), (2, 16), (16, 4))]


def test_time_model_with_a_fake_profile_function():
    model, x = mlp()
    calls = {"model": 0}
    model.register_forward_hook(lambda *args: calls.__setitem__("model", calls["model"] + 1))

    def fake_profile(step, iters, device):
        # 3 warm-up iterations, then 2 uninstrumented ones timed for the wall time, then the profiled ones
        assert (iters, device) == (2, "cpu") and calls["model"] == 5
        return [e for e in fake_events() if e["kind"] in ("op", "iteration")], 10.0  # a very slow profiled loop

    timing = time_model(model, (x,), {}, [ADDMM, GELU], device="cpu", warmup=3, iters=2, profile=fake_profile)
    assert 0 < timing.wall_s < 1.0  # from the uninstrumented loop, not the profiled one
    assert [t.index for t in timing.ops] == [0, 1]
    assert any(note.startswith("the profiler slowed each iteration") for note in timing.notes)


def test_time_model_keeps_the_profiles_own_reason_for_missing_launch_facts():
    model, x = mlp()

    def fake_profile(step, iters, device):
        events = [e for e in fake_events() if e["kind"] in ("op", "iteration")]
        return [*events, {"kind": "note", "text": "no kernel launch facts (a reason): bound classes from ..."}], 1e-3

    timing = time_model(model, (x,), {}, [ADDMM, GELU], device="cpu", warmup=0, iters=2, profile=fake_profile)
    facts_notes = [note for note in timing.notes if note.startswith("no kernel launch facts")]
    assert facts_notes == ["no kernel launch facts (a reason): bound classes from ..."]


def test_time_model_cpu_end_to_end():
    model, x = mlp()
    timing = time_model(model, (x,), {}, MLP_RECORDS, device="cpu", warmup=1, iters=3)
    assert timing.device == "cpu" and timing.iterations == 3
    assert [t.index for t in timing.ops] == [0, 1, 2]
    assert all(t.device_time_s > 0 and t.kernels == 0 for t in timing.ops)
    # aten::linear's own time and aten::t's (inside linear, beside the addmm) go to the addmm linear holds
    assert timing.wall_s > 0 and timing.unmatched_time_s == 0
    assert timing.kernel_count == 0 and timing.gpu_busy_s == 0
    assert not any("not found" in note or "only some" in note for note in timing.notes)


def test_time_model_training_matches_forward_ops_and_leaves_no_grads():
    model, x = mlp()
    model.train()
    records = [*MLP_RECORDS, rec(3, "aten::mm", (2, 4), (4, 16))]  # a backward GEMM: grad of the input of fc2
    timing = time_model(model, (x.requires_grad_(),), {}, records, device="cpu", mode="training", iters=2)
    assert {t.index for t in timing.ops} >= {0, 1, 2, 3}
    assert all(p.grad is None for p in model.parameters())


def test_time_model_no_ops_is_a_workload_error():
    model, x = mlp()
    with pytest.raises(WorkloadError, match="ran no tensor operations"):
        time_model(model, (x,), {}, [], device="cpu")


class OutOfMemoryModel(torch.nn.Module):
    def __init__(self, exc: Exception) -> None:
        super().__init__()
        self.exc = exc

    def forward(self, x):
        raise self.exc


@pytest.mark.parametrize(
    "exc",
    [
        torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1099511627776 bytes"),
    ],
)
def test_time_model_out_of_memory_names_the_options(exc):
    with pytest.raises(DeviceError) as info:
        time_model(OutOfMemoryModel(exc), (torch.ones(1),), {}, [GELU], device="cpu", warmup=1, iters=1)
    message = str(info.value)
    for option in ("--dtype bf16", "get_inputs", "--mode inference"):
        assert option in message


def test_time_model_user_exception_stays_a_user_error():
    with pytest.raises(UserCodeError, match="ValueError"):
        time_model(OutOfMemoryModel(ValueError("boom")), (torch.ones(1),), {}, [GELU], device="cpu")


@pytest.mark.gpu
def test_time_model_cuda_mlp():
    model, x = mlp()
    model, x = model.cuda(), x.cuda()
    timing = time_model(model, (x,), {}, MLP_RECORDS, device="cuda", warmup=2, iters=5)
    assert timing.device == "cuda"
    assert [t.index for t in timing.ops] == [0, 1, 2]
    assert all(t.kernels > 0 and t.device_time_s > 0 for t in timing.ops)
    assert timing.kernel_count >= 3
    span = timing.gpu_busy_s + timing.gpu_idle_s
    assert 0 < timing.gpu_busy_s <= span
    assert timing.wall_s >= timing.gpu_busy_s


def test_time_model_training_clears_the_inputs_grads_every_iteration():
    # Each iteration as the counting pass saw it: no gradient yet on an input either (else the backward adds
    # into it, an add_ the counting pass never saw, left unmatched)
    from roofline.diagnose.profile import grad_leaves

    model, x = mlp()
    model.train()
    x.requires_grad_()
    nested = {"a": [x, torch.ones(2)], "b": (x * 2,)}  # x * 2: not a leaf
    assert grad_leaves(nested) == [x]
    model(x).sum().backward()
    once = x.grad.clone()
    x.grad = None
    time_model(model, (x,), {}, [*MLP_RECORDS], device="cpu", mode="training", warmup=2, iters=2)
    assert torch.equal(x.grad, once)  # the last iteration's gradient, not the sum of 5


def test_time_model_attributes_a_matrix_exps_backward():
    # linalg_matrix_exp's backward runs another path than the counting pass saw (zeros, narrow, copy_ in place of
    # cat, zeros_like): the backward's matrix_exp on the doubled matrix is still found, and the ops around it (the
    # autograd node's own time, its narrows) go to the counted ops it holds
    from roofline.diagnose.count import count_ops

    class MatrixExp(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.linalg.matrix_exp(x)

    model = MatrixExp()
    x = (torch.randn(8, 8) / 8).requires_grad_()
    records = count_ops(model, (x,), {}, mode="training")
    exps = [r.index for r in records if r.op == "aten::linalg_matrix_exp"]
    assert [r.input_shapes for r in records if r.index in exps] == [((8, 8),), ((16, 16),)]
    timing = time_model(model, (x,), {}, records, device="cpu", mode="training", warmup=1, iters=2)
    timed = {t.index: t.device_time_s for t in timing.ops}
    assert all(timed.get(i, 0) > 0 for i in exps)
    total = sum(timed.values()) + timing.unmatched_time_s
    assert timing.unmatched_time_s < 0.1 * total  # left: the autograd engine's nodes that run no counted op
