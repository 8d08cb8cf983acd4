"""The timing pass: parsing profiler events, joining them to counted ops (with fakes), and time_model end to end."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from roofline.diagnose.timing import (
    MARKER,
    CpuOp,
    LaunchCall,
    align,
    events_from_profiler,
    join,
    parse_events,
    time_model,
)
from roofline.errors import DeviceError, UserCodeError, WorkloadError
from roofline.report.records import KernelEvent, OpRecord


def rec(index: int, op: str, *shapes: tuple[int, ...], flops: int | None = 1) -> OpRecord:
    return OpRecord(
        index=index,
        op=op,
        module="",
        module_type="",
        phase="forward",
        input_shapes=tuple(shapes),
        input_dtypes=("fp32",) * len(shapes),
        output_shapes=(),
        flops=flops,
        bytes=None if flops is None else 1,
        dtype="fp32",
        math="vector",
    )


ADDMM = rec(0, "aten::addmm", (16,), (2, 8), (8, 16))
GELU = rec(1, "aten::gelu", (2, 16))


def iteration_events(offset: float, addmm_kernel_us: float, base_id: int) -> list[dict]:
    """One iteration: aten::linear (composite) -> aten::t, aten::addmm (-> aten::copy_); then aten::gelu.

    Kernels: addmm 1 (stream 7); linear itself 1 (not a counted op); gelu 2 on two streams that overlap."""
    o, i = offset, base_id
    ops = [
        {"kind": "op", "id": i + 1, "name": "aten::linear", "start_us": o + 10, "end_us": o + 40,
         "input_shapes": [[2, 8], [16, 8], [16]]},
        {"kind": "op", "id": i + 2, "name": "aten::t", "start_us": o + 12, "end_us": o + 15, "input_shapes": [[16, 8]]},
        {"kind": "op", "id": i + 3, "name": "aten::addmm", "start_us": o + 20, "end_us": o + 38,
         "input_shapes": [[16], [2, 8], [8, 16]]},
        {"kind": "op", "id": i + 5, "name": "aten::copy_", "start_us": o + 22, "end_us": o + 24,
         "input_shapes": [[2, 16], [2, 16]]},
        {"kind": "op", "id": i + 4, "name": "aten::gelu", "start_us": o + 50, "end_us": o + 70,
         "input_shapes": [[2, 16]]},
    ]  # fmt: skip
    launches = [
        {"kind": "launch", "name": "cudaLaunchKernel", "correlation": i + 101, "start_us": o + 25, "end_us": o + 30},
        {"kind": "launch", "name": "cudaLaunchKernel", "correlation": i + 102, "start_us": o + 39, "end_us": o + 39.5},
        {"kind": "launch", "name": "cudaLaunchKernel", "correlation": i + 103, "start_us": o + 55, "end_us": o + 58},
        {"kind": "launch", "name": "cudaLaunchKernel", "correlation": i + 104, "start_us": o + 60, "end_us": o + 62},
    ]
    kernels = [
        {"kind": "kernel", "name": "gemm", "start_us": o + 33, "end_us": o + 33 + addmm_kernel_us, "stream": 7,
         "external_id": i + 3, "correlation": i + 101},
        {"kind": "kernel", "name": "bias", "start_us": o + 46, "end_us": o + 48, "stream": 7,
         "external_id": i + 1, "correlation": i + 102},
        {"kind": "kernel", "name": "gelu_a", "start_us": o + 57, "end_us": o + 65, "stream": 7,
         "external_id": i + 4, "correlation": i + 103},
        {"kind": "kernel", "name": "gelu_b", "start_us": o + 63, "end_us": o + 69, "stream": 8,
         "external_id": i + 4, "correlation": i + 104},
    ]  # fmt: skip
    marker = {"kind": "iteration", "start_us": o, "end_us": o + 100}
    return [marker, *ops, *launches, *kernels]


def fake_events() -> list[dict]:
    return iteration_events(0, 10, 0) + iteration_events(100, 12, 1000)


def test_parse_events_derives_iteration_parent_and_self_time():
    parsed = parse_events(fake_events())
    assert parsed.iterations == 2
    assert len(parsed.ops) == 10 and len(parsed.kernels) == 8 and len(parsed.launches) == 8
    by_id = {op.id: op for op in parsed.ops}
    assert by_id[2].parent == 1 and by_id[3].parent == 1 and by_id[5].parent == 3 and by_id[1].parent is None
    assert by_id[1].self_us == pytest.approx(30 - 3 - 18)
    assert by_id[3].self_us == pytest.approx(16)
    assert by_id[1003].iteration == 1 and by_id[3].iteration == 0
    assert [op.id for op in parsed.ops[:5]] == [1, 2, 3, 5, 4]  # start order, parents first


def test_join_on_gpu_exact_times_counts_busy_idle_delays():
    parsed = parse_events(fake_events())
    timing = join([ADDMM, GELU], parsed.ops, parsed.kernels, 2, launches=parsed.launches, device="cuda", wall_s=1e-4)
    assert timing.device == "cuda" and timing.iterations == 2 and timing.wall_s == 1e-4
    addmm, gelu = timing.ops
    assert addmm.index == 0 and gelu.index == 1
    assert addmm.device_time_s == pytest.approx((10 + 12) / 2 * 1e-6)
    assert addmm.kernels == 1
    assert addmm.launch_delay_s == pytest.approx(3e-6)  # 33 - 30 in both iterations
    assert addmm.cpu_time_s == pytest.approx(18e-6)  # host time of the op call
    assert gelu.device_time_s == pytest.approx((8 + 6) * 1e-6)
    assert gelu.kernels == 2
    assert gelu.launch_delay_s == pytest.approx(1e-6)  # 57 - 58 clipped to 0, plus 63 - 62
    assert timing.unmatched_time_s == pytest.approx(2e-6)  # the kernel aten::linear launched itself
    assert timing.kernel_count == 4
    # busy: [33,43]+[46,48]+[57,69] (the two gelu streams overlap: counted once) = 24, then 12+2+12 = 26
    assert timing.gpu_busy_s == pytest.approx(25e-6)
    assert timing.gpu_idle_s == pytest.approx(((36 - 24) + (36 - 26)) / 2 * 1e-6)
    assert any("kernels per iteration could not be attributed" in note for note in timing.notes)
    # per-iteration samples (what the gate tests): addmm's kernel took 10 then 12 us; gelu's two kernels 8 + 6
    assert addmm.samples_s == pytest.approx((10e-6, 12e-6))
    assert gelu.samples_s == pytest.approx((14e-6, 14e-6))


def test_join_on_cpu_uses_self_cpu_time():
    parsed = parse_events([e for e in fake_events() if e["kind"] in ("op", "iteration")])
    timing = join([ADDMM, GELU], parsed.ops, [], 2, device="cpu")
    addmm, gelu = timing.ops
    assert addmm.device_time_s == pytest.approx(18e-6)  # its self time plus the copy_ it calls
    assert gelu.device_time_s == pytest.approx(20e-6)
    assert addmm.samples_s == pytest.approx((18e-6, 18e-6))
    assert addmm.kernels == gelu.kernels == 0
    assert timing.unmatched_time_s == pytest.approx(12e-6)  # aten::linear's own 9 us + aten::t's 3 us
    assert timing.kernel_count == 0 and timing.gpu_busy_s == 0 and timing.gpu_idle_s == 0


def test_join_matches_leaf_ops_by_shapes_in_order():
    # Two aten::addmm of different shapes: each record gets the one with its shapes, in execution order.
    first, second = rec(0, "aten::addmm", (16,), (2, 8), (8, 16)), rec(1, "aten::addmm", (4,), (2, 16), (16, 4))
    ops = [
        CpuOp(1, "aten::addmm", 0, 10, ((16,), (2, 8), (8, 16)), iteration=0, self_us=10),
        CpuOp(2, "aten::addmm", 20, 25, ((4,), (2, 16), (16, 4)), iteration=0, self_us=5),
    ]
    timing = join([second, first], ops, [], 1, device="cpu")  # given out of order: sorted by index
    assert {t.index: t.device_time_s for t in timing.ops} == pytest.approx({0: 10e-6, 1: 5e-6})


def test_join_falls_back_to_names_and_reports_missing_ops():
    # The profiler spells cat's TensorList differently; a counted op the profiler never saw is reported.
    records = [rec(0, "aten::cat", (2, 8), (2, 8)), rec(1, "aten::relu", (4, 8)), rec(2, "aten::sum", (4, 8))]
    ops = [
        CpuOp(1, "aten::cat", 0, 4, (), iteration=0, self_us=4),
        CpuOp(2, "aten::relu", 5, 7, ((4, 8),), iteration=0, self_us=2),
    ]
    timing = join(records, ops, [], 1, device="cpu")
    assert [t.index for t in timing.ops] == [0, 1]
    assert any("1 of 3 counted ops were not found" in note and "aten::sum" in note for note in timing.notes)


def test_join_finds_a_folded_op_through_its_launch_call():
    # The profiler folded the launching op away (its id is gone): the launch call's time finds the op around it.
    ops = [CpuOp(1, "aten::gelu", 0, 10, ((2, 16),), iteration=0)]
    kernels = [KernelEvent("k", 12, 3, 7, external_id=99, correlation=5)]
    timing = join([GELU], ops, kernels, 1, launches=[LaunchCall(5, 4, 6)], device="cuda")
    assert timing.ops[0].kernels == 1 and timing.ops[0].device_time_s == pytest.approx(3e-6)
    assert timing.ops[0].launch_delay_s == pytest.approx(6e-6)
    assert timing.unmatched_time_s == 0


def test_align_keeps_order():
    assert align(list("abcabc"), list("xabyc")) == [(0, 1), (1, 2), (2, 4)]


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


def test_time_model_cpu_end_to_end():
    model, x = mlp()
    timing = time_model(model, (x,), {}, MLP_RECORDS, device="cpu", warmup=1, iters=3)
    assert timing.device == "cpu" and timing.iterations == 3
    assert [t.index for t in timing.ops] == [0, 1, 2]
    assert all(t.device_time_s > 0 and t.kernels == 0 for t in timing.ops)
    assert timing.wall_s > 0 and timing.unmatched_time_s > 0  # aten::linear and aten::t around the addmms
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
