"""Compiled models (torch.compile): detection, counting on the original computation, fused-kernel attribution by
inductor's kernel names (injected events), and findings that never advise torch.compile to a compiled model."""

from __future__ import annotations

import dataclasses
import itertools
import shutil

import pytest
from diagnose_devices import GPU
from diagnose_events import rec
from test_diagnose_rules import ctx_of, elementwise

from roofline.diagnose.join import attribute_fused, fused_ops, join, parse_events
from roofline.findings.rules import diagnose, fusion, launch

torch = pytest.importorskip("torch")


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.fc(x)) * 0.5 + 1.0


# ------------------------------------------------------------------------------------------------ detection


def test_detects_optimized_module_compiled_function_and_in_place_compile():
    from roofline.diagnose.loader import is_compiled

    plain = Tiny()
    assert not is_compiled(plain)
    assert is_compiled(torch.compile(Tiny()))  # an OptimizedModule (_orig_mod); compiles only when called
    assert is_compiled(torch.compile(lambda x: x * 2))  # a compiled function
    inside = Tiny()
    inside.compile()  # what a file does to its own model
    assert is_compiled(inside)
    outer = torch.nn.Sequential(torch.compile(Tiny()), torch.nn.ReLU())  # a compiled submodule
    assert is_compiled(outer)
    assert not is_compiled(lambda x: x)


def test_load_model_records_compiled(tmp_path):
    from roofline.diagnose.loader import load_model

    file = tmp_path / "compiled.py"
    file.write_text(
        "import torch\n"
        "net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())\n"
        "model = torch.compile(net)\n"
        "example_inputs = (torch.randn(2, 4),)\n"
    )
    loaded = load_model(file, device="cpu")
    assert loaded.compiled is True


# ------------------------------------------------------------------------------------------------ counting


def _names(records):
    return [(r.op, r.module) for r in records]


def test_counts_the_original_computation_without_compiling():
    from roofline.diagnose.count import count_ops

    x = torch.randn(2, 8)
    eager = count_ops(Tiny(), (x,))
    compiled = count_ops(torch.compile(Tiny()), (x,))
    assert _names(compiled) == _names(eager)  # every aten op, module paths without '_orig_mod'
    assert any(r.module == "fc" for r in compiled)
    inside = Tiny()
    inside.compile()
    saved = inside._compiled_call_impl
    assert _names(count_ops(inside, (x,))) == _names(eager)
    assert inside._compiled_call_impl is saved  # put back
    outer = torch.nn.Sequential(torch.compile(Tiny()))
    compiled_child = outer[0]
    assert [m for _, m in _names(count_ops(outer, (x,))) if m] == ["0.fc", "0.fc"] or all(
        "_orig_mod" not in m for _, m in _names(count_ops(outer, (x,)))
    )
    assert outer[0] is compiled_child  # the compiled child is back


# ------------------------------------------------------------------------------------------------ attribution


def test_fused_ops_from_inductor_names():
    known = {"add", "mul", "tanh", "_softmax", "native_layer_norm", "addmm"}
    assert fused_ops("triton_poi_fused_add_mul_tanh_0", known) == ["add", "mul", "tanh"]
    assert fused_ops("triton_red_fused__softmax_1", known) == ["_softmax"]
    assert fused_ops("triton_per_fused_native_layer_norm_12", known) == ["native_layer_norm"]
    assert fused_ops("cpp_fused_add_mul_0", known) == ["add", "mul"]
    assert fused_ops("ampere_sgemm_128x64_nn") == []


def _records():
    return [
        rec(0, "aten::t", (8, 8)),
        rec(1, "aten::addmm", (8,), (2, 8), (8, 8)),
        rec(2, "aten::tanh", (2, 8)),
        rec(3, "aten::mul", (2, 8)),
        rec(4, "aten::add", (2, 8)),
    ]


def _weighted(records, weights):
    return [dataclasses.replace(r, bytes=w) for r, w in zip(records, weights, strict=True)]


def test_attribute_fused_splits_by_weight_in_execution_order():
    records = _weighted(_records(), [0, 10, 1, 1, 2])
    records[0] = dataclasses.replace(records[0], math="none")
    open_ops = [True, False, True, True, True]  # addmm was timed by its aten op
    shares = attribute_fused(records, ["triton_poi_fused_add_mul_tanh_0", "triton_poi_fused_sub_9"], open_ops)
    assert shares[1] == []  # nothing of that name: unattributed
    assert [i for i, _ in shares[0]] == [2, 3, 4]
    assert [f for _, f in shares[0]] == pytest.approx([0.25, 0.25, 0.5])


def _compiled_events(iters=2):
    """Per iteration: the compiled graph's call (not an aten op) launches a fused Triton kernel and an unknown
    kernel; aten::addmm (an extern kernel) launches a GEMM."""
    events = []
    for it in range(iters):
        o, b = it * 1000.0, it * 100
        events += [
            {"kind": "iteration", "start_us": o, "end_us": o + 500},
            {"kind": "op", "id": b + 1, "name": "## Call CompiledFxGraph abc ##", "start_us": o + 1, "end_us": o + 90},
            {"kind": "op", "id": b + 2, "name": "aten::addmm", "start_us": o + 5, "end_us": o + 20,
             "input_shapes": [[8], [2, 8], [8, 8]]},
            {"kind": "kernel", "name": "gemm", "start_us": o + 100, "end_us": o + 140, "stream": 7,
             "external_id": b + 2, "correlation": b + 50},
            {"kind": "kernel", "name": "triton_poi_fused_add_mul_tanh_0", "start_us": o + 150, "end_us": o + 190,
             "stream": 7, "external_id": b + 1, "correlation": b + 51},
            {"kind": "kernel", "name": "triton_poi_fused_sub_3", "start_us": o + 200, "end_us": o + 210,
             "stream": 7, "external_id": b + 1, "correlation": b + 52},
        ]  # fmt: skip
    return events


def test_join_attributes_fused_kernels_and_keeps_the_total():
    records = _weighted(_records(), [0, 10, 1, 1, 2])
    records[0] = dataclasses.replace(records[0], math="none")
    parsed = parse_events(_compiled_events())
    timing = join(records, parsed.ops, parsed.kernels, 2, launches=parsed.launches, device="cuda")
    by = {t.index: t for t in timing.ops}
    assert by[1].device_time_s == pytest.approx(40e-6) and by[1].fused_kernel == ""
    assert by[2].device_time_s == pytest.approx(10e-6) and by[2].fused_kernel == "triton_poi_fused_add_mul_tanh_0"
    assert by[4].device_time_s == pytest.approx(20e-6)
    assert by[4].kernels == 1 and by[2].kernels == 0  # one launch, on the heaviest op
    assert by[3].samples_s == pytest.approx((10e-6, 10e-6))
    assert timing.unmatched_time_s == pytest.approx(10e-6)  # the unknown kernel: reported, not dropped
    kernels_s = sum(k.duration_us for k in parsed.kernels) * 1e-6 / 2
    assert sum(t.device_time_s for t in timing.ops) + timing.unmatched_time_s == pytest.approx(kernels_s)


# ------------------------------------------------------------------------------------------------ findings


def _compiled_ctx(ops, fused: str = "", **kw):
    ctx = ctx_of(ops, **kw)
    timing = dataclasses.replace(ctx.timing, compiled=True)
    points = [p.model_copy(update={"fused_kernel": fused}) for p in ctx.points]
    return type(ctx).of(points, GPU, timing)


def test_no_torch_compile_advice_to_a_compiled_model():
    n = 2**22
    chain = [
        (elementwise(0, n, "aten::mul"), 30e-6, 1),
        (elementwise(1, n, "aten::add"), 30e-6, 1),
        (elementwise(2, n, "aten::tanh", binary=False), 25e-6, 1),
        (elementwise(3, n, "aten::mul"), 30e-6, 1),
    ]
    assert fusion.elementwise_chain(ctx_of(chain))  # eager: a chain to fuse
    assert fusion.elementwise_chain(_compiled_ctx(chain, "triton_poi_fused_add_mul_tanh_0")) == []  # fused already
    unfused = fusion.elementwise_chain(_compiled_ctx(chain))  # compiled, yet unfused (a graph break)
    assert unfused and all("torch.compile" not in f.technique for f in unfused)
    assert "graph break" in unfused[0].technique
    short = [(elementwise(i, 64, module=f"layers.{i}"), 5e-6, 1) for i in range(24)]
    bound = launch.launch_bound(_compiled_ctx(short, wall_s=400e-6, busy_s=120e-6, idle_s=250e-6))
    assert bound is not None and "mode='reduce-overhead'" in bound.technique
    assert "fuse the small ops" not in bound.technique
    every = diagnose(_compiled_ctx([*chain, (elementwise(9, 64), 5e-6, 1)]))
    assert all("torch.compile)" not in f.technique and "or torch.compile" not in f.technique for f in every)


# ------------------------------------------------------------------------------------------------ real compile


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="torch.compile on the CPU "
                    "needs a C++ compiler (none found)")  # fmt: skip
@pytest.mark.xdist_group("inductor")  # the first inductor compile of a process costs seconds: paid once
def test_time_model_times_the_compiled_callable():
    from roofline.diagnose.count import count_ops
    from roofline.diagnose.profile import time_model

    model, x = torch.compile(Tiny()), torch.randn(4, 8)
    records = count_ops(model, (x,))
    ticks = itertools.chain([0.0, 2.5], itertools.repeat(3.0))  # the compiling call's start and end
    timing = time_model(model, (x,), {}, records, device="cpu", warmup=1, iters=2, compiled=True,
                        clock=lambda: next(ticks))  # fmt: skip
    assert timing.compiled and timing.compile_s == pytest.approx(2.5)
    assert any("compiled model" in note for note in timing.notes)


# ------------------------------------------------------------------------------------------------ extern kernels


def _extern_events():
    """A compiled graph calls aten::mm (the counted op is an addmm: inductor adds the bias in a fused kernel),
    whose GEMM comes as two kernels (split-K: the GEMM and its reduction); then SDPA under another spelling."""
    events = []
    for it in range(2):
        o, b = it * 1000.0, it * 100
        events += [
            {"kind": "iteration", "start_us": o, "end_us": o + 500},
            {"kind": "op", "id": b + 1, "name": "## Call CompiledFxGraph abc ##", "start_us": o + 1, "end_us": o + 90},
            {"kind": "op", "id": b + 2, "name": "aten::mm", "start_us": o + 5, "end_us": o + 20,
             "input_shapes": [[2, 8], [8, 8]]},
            {"kind": "op", "id": b + 3, "name": "aten::_scaled_dot_product_efficient_attention", "start_us": o + 30,
             "end_us": o + 40, "input_shapes": [[1, 1, 2, 8], [1, 1, 2, 8], [1, 1, 2, 8]]},
            {"kind": "kernel", "name": "gemm_splitk", "start_us": o + 100, "end_us": o + 130, "stream": 7,
             "external_id": b + 2, "correlation": b + 50},
            {"kind": "kernel", "name": "splitk_reduce", "start_us": o + 131, "end_us": o + 141, "stream": 7,
             "external_id": b + 2, "correlation": b + 51},
            {"kind": "kernel", "name": "triton_poi_fused_addmm_tanh_0", "start_us": o + 150, "end_us": o + 160,
             "stream": 7, "external_id": b + 1, "correlation": b + 52},
            {"kind": "kernel", "name": "fmha_cutlassF", "start_us": o + 170, "end_us": o + 190, "stream": 7,
             "external_id": b + 3, "correlation": b + 53},
        ]  # fmt: skip
    return events


def test_extern_kernels_of_a_compiled_graph_go_to_the_counted_op_of_their_family():
    records = [
        rec(0, "aten::addmm", (8,), (2, 8), (8, 8)),
        rec(1, "aten::tanh", (2, 8)),
        rec(2, "aten::_scaled_dot_product_flash_attention", (1, 1, 2, 8), (1, 1, 2, 8), (1, 1, 2, 8)),
    ]
    parsed = parse_events(_extern_events())
    timing = join(records, parsed.ops, parsed.kernels, 2, launches=parsed.launches, device="cuda", compiled=True)
    by = {t.index: t for t in timing.ops}
    # the GEMM and its reduction (one launching op) plus a share of the fused bias+tanh kernel
    assert by[0].device_time_s > 40e-6 and by[0].kernels == 3  # and the bias (the fused kernel's heaviest op)
    assert by[0].fused_kernel == "triton_poi_fused_addmm_tanh_0"
    assert by[2].device_time_s == pytest.approx(20e-6)
    assert timing.unmatched_time_s == pytest.approx(0.0)
    kernels_s = sum(k.duration_us for k in parsed.kernels) * 1e-6 / 2
    assert sum(t.device_time_s for t in timing.ops) == pytest.approx(kernels_s)
    # an eager model's unmatched aten op stays unmatched: the family rule is for compiled graphs only
    eager = join(records, parsed.ops, parsed.kernels, 2, launches=parsed.launches, device="cuda")
    assert eager.unmatched_time_s == pytest.approx(60e-6)


def test_extern_names_families():
    from roofline.diagnose.join import extern_names

    assert "addmm" in extern_names("aten::mm") and "bmm" in extern_names("aten::baddbmm")
    assert "_scaled_dot_product_flash_attention" in extern_names("aten::_scaled_dot_product_cudnn_attention")
    assert extern_names("aten::sort") == frozenset({"sort"})


def test_fused_ops_reads_inductors_profiled_cpu_kernel_names():
    assert fused_ops("graph_0_cpp_fused_add_gelu_mul_0", {"add", "gelu", "mul"}) == ["add", "gelu", "mul"]
    assert fused_ops("graph_12_cpp_fused_native_layer_norm_tanh_3", {"native_layer_norm", "tanh"}) == [
        "native_layer_norm",
        "tanh",
    ]


def test_cpu_kernels_of_a_compiled_graph_are_attributed():
    records = [rec(0, "aten::addmm", (8,), (2, 8), (8, 8)), rec(1, "aten::gelu", (2, 8)), rec(2, "aten::mul", (2, 8))]
    events = [
        {"kind": "iteration", "start_us": 0.0, "end_us": 500.0},
        {"kind": "op", "id": 1, "name": "## Call CompiledFxGraph abc ##", "start_us": 1, "end_us": 200},
        {"kind": "op", "id": 2, "name": "aten::mm", "start_us": 5, "end_us": 85, "input_shapes": [[2, 8], [8, 8]]},
        {"kind": "op", "id": 3, "name": "aten::copy_", "start_us": 10, "end_us": 30},
        {"kind": "op", "id": 4, "name": "graph_0_cpp_fused_gelu_mul_0", "start_us": 100, "end_us": 160},
    ]
    parsed = parse_events(events)
    timing = join(records, parsed.ops, parsed.kernels, 1, device="cpu", compiled=True)
    by = {t.index: t for t in timing.ops}
    assert by[0].device_time_s == pytest.approx(80e-6)  # the mm with the copy inside it
    assert by[1].device_time_s + by[2].device_time_s == pytest.approx(60e-6)
    assert by[1].fused_kernel == "graph_0_cpp_fused_gelu_mul_0" and by[0].kernels == 0
    assert timing.unmatched_time_s == pytest.approx(59e-6)  # the graph call's own time: no op's


# ------------------------------------------------------------------------------------------------ what blocks compile


def test_compile_blockers_name_the_graph_breaks_and_recompilations():
    n = 2**22
    chain = [(elementwise(0, n, "aten::mul"), 30e-6, 1), (elementwise(1, n, "aten::add"), 30e-6, 1)]
    assert launch.compile_blockers(_compiled_ctx(chain)) is None  # nothing broke
    ctx = _compiled_ctx(chain)
    timing = dataclasses.replace(
        ctx.timing, graphs=2, graph_breaks=[("Failed to trace builtin operator: print", 3)],
        recompiles=["0/0: n == 0"],
    )  # fmt: skip
    found = launch.compile_blockers(type(ctx).of(ctx.points, GPU, timing))
    assert found is not None and found.rule == "compile-blockers" and found.bottleneck == "launch"
    assert "3 graph breaks (2 graphs compiled): Failed to trace builtin operator: print (x3)" in found.evidence
    assert "1 recompilation (guard failed: 0/0: n == 0)" in found.evidence
    assert "torch._dynamo.explain" in found.technique and "mark_dynamic" in found.technique
    # the two unfused ops: at best one fused kernel at their roofline time
    assert found.best_time_s is not None and found.best_time_s >= found.floor_s
    fused = [p.model_copy(update={"fused_kernel": "triton_poi_fused_add_mul_0"}) for p in ctx.points]
    only = launch.compile_blockers(type(ctx).of(fused, GPU, timing))
    assert only is not None and only.best_time_s is None  # nothing ran unfused: no bound, the blockers named


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None, reason="torch.compile on the CPU "
                    "needs a C++ compiler (none found)")  # fmt: skip
def test_dynamo_facts_count_a_graph_break():
    from roofline.diagnose import dynamo

    def f(x):
        y = x.sin()
        print("", end="")
        return y.cos()

    torch._dynamo.reset()
    before = dynamo.snapshot()
    g = torch.compile(f, backend="eager")
    g(torch.randn(4))
    facts = dynamo.facts_since(before)
    assert facts.graphs >= 2 and facts.graph_breaks and "print" in facts.graph_breaks[0][0]
    assert len(facts.graph_breaks[0][0]) <= dynamo.REASON_CHARS


def test_compile_failure_is_recognised():
    from roofline.diagnose.dynamo import failure_line, is_compile_failure

    failed = type("BackendCompilerFailed", (Exception,), {"__module__": "torch._dynamo.exc"})
    inner = failed("backend='inductor' raised:\nboom")
    try:
        try:
            raise inner
        except Exception as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        assert is_compile_failure(outer)
        assert failure_line(outer) == "BackendCompilerFailed: backend='inductor' raised:"
    assert not is_compile_failure(ValueError("the model's own error"))


def test_kernels_of_several_iterations_in_one_sequence_are_all_attributed():
    # the iteration of a kernel is unknown (None): the kernels of 3 iterations come as one sequence; each
    # repetition starts the claims over instead of leaving the later iterations' kernels unattributed
    records = _weighted(_records(), [0, 10, 1, 1, 2])
    open_ops = [True, False, True, True, True]
    shares = attribute_fused(records, ["triton_poi_fused_add_mul_tanh_0"] * 3, open_ops)
    assert [[i for i, _ in share] for share in shares] == [[2, 3, 4]] * 3


def test_auto_warm_up_of_a_compiled_model_runs_after_the_compiling_call():
    # the compiling call is neither a warm-up nor the estimate: at least one call after it sizes the iterations
    from roofline.diagnose.profile import Budget, _timed_runs

    calls = []
    now = iter(itertools.count(0.0, 0.001))
    runs = _timed_runs(
        lambda: calls.append(1), device="cpu", warmup=None, iters=None, budget=Budget(), ops=10, compiled=True,
        profile=lambda step, iters, device: ([], 0.0), clock=lambda: next(now),
    )  # fmt: skip
    assert runs.warmup_calls >= 2 and runs.compile_s > 0
