"""Coverage: every group of identical ops taking >= 5% of the iteration gets a verdict (hand-built ops, no torch)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from diagnose_devices import CPU, rec
from test_diagnose_rules import ctx_of, elementwise, mm

from roofline.findings.model import ModelFinding
from roofline.findings.rules import coverage


def _finding(ops: list[int], time_s: float) -> ModelFinding:
    return ModelFinding(
        rule="x", bottleneck="memory", properties=["locality"], technique="t", evidence="e", time_s=time_s, ops=ops
    )


def test_slow_uncovered_group_is_not_explained_with_its_numbers():
    roof = 2 * 4096**3 / 800e12
    ctx = ctx_of([(mm(0, 4096, 4096, 4096), roof / 0.3, 1), (elementwise(1, 1 << 20), 4.2e-6, 1)])
    (f,) = coverage.cover(ctx, [])
    assert f.rule == "not-explained" and f.ops == [0]
    assert f.properties == []
    assert "at 30% of the roofline" in f.evidence and "mm [4096x4096, 4096x4096]" in f.evidence
    assert "limiter latency" in f.evidence  # neither roof near and no launch facts: latency (bounds.py)
    assert "Nsight Compute --section WarpStateStats" in f.technique
    assert f.best_time_s == pytest.approx(roof + 4e-6)  # its roofline time: the most any fix allows
    assert f.summary().startswith("not explained by a rule; next:")


def test_group_of_identical_ops_counts_together():
    # 20 identical adds, each 1% of the time: together 100%; one verdict for the group
    ops = [(elementwise(i, 1 << 20, module=f"layers.{i}"), 100e-6, 1) for i in range(20)]
    (f,) = coverage.cover(ctx_of(ops), [])
    assert f.ops == list(range(20)) and "20 x add" in f.evidence


def test_small_groups_and_covered_groups_get_nothing():
    roof = 2 * 4096**3 / 800e12
    big = (mm(0, 4096, 4096, 4096), roof / 0.3, 1)
    assert coverage.cover(ctx_of([big]), [_finding([0], roof / 0.3)]) == []  # a rule already explains it
    tiny = [(elementwise(i, 1 << 10, op=f"aten::op{i}"), 1e-6, 1) for i in range(30)]  # 30 groups of 3% each
    assert coverage.cover(ctx_of(tiny), []) == []


def test_near_the_memory_roof_names_fewer_bytes_with_a_bound():
    n = 1 << 26
    add = elementwise(0, n)
    roof = 3 * n * 4 / 2e12
    (f,) = coverage.cover(ctx_of([(add, roof / 0.9, 1)]), [])
    assert f.rule == "near-roof" and f.bottleneck == "memory"
    assert f.properties == ["locality", "redundancy"] and "fewer bytes" in f.technique
    after = max(roof / 2, n / 50e12) + 4e-6
    assert f.best_time_s == pytest.approx(after)
    assert f.best_time_s >= after  # never below the roofline time after halving the bytes


def test_near_the_compute_roof_names_fewer_flops():
    roof = 2 * 8192**3 / 800e12
    (f,) = coverage.cover(ctx_of([(mm(0, 8192, 8192, 8192), roof / 0.85, 1)]), [])
    assert f.rule == "near-roof" and f.bottleneck == "compute"
    assert f.properties == ["sparsity", "separability", "symmetry"]


def test_cpu_next_step_is_not_nsight():
    roof = 2 * 512**3 / 1e11
    (f,) = coverage.cover(ctx_of([(mm(0, 512, 512, 512, dtype="fp32"), roof / 0.2, 1)], device=CPU), [])
    assert "Nsight" not in f.technique and "perf stat" in f.technique


def test_an_unexplained_group_that_inductor_generates_is_a_compile_candidate():
    # the held-out norms and scans: "not explained" where torch.compile was 1.8-2.5x faster (a group norm runs as
    # several kernels in eager); on the CPU every such group is a candidate
    ops = [(elementwise(i, 1 << 20, op="aten::mish", binary=False, module=f"act.{i}"), 100e-6, 2) for i in range(4)]
    ctx = ctx_of(ops)
    (f,) = coverage.cover(ctx, [])
    assert f.rule == "compile-candidate" and f.change == "none" and f.properties == ["locality"]
    assert f.technique.startswith("not explained by a rule; try torch.compile")
    roof = sum(p.roof_time_s + p.launch_floor_s for p in ctx.points)
    assert f.best_time_s == pytest.approx(roof)  # the roofline's bound, as for not-explained
    from roofline.diagnose.verify import technique_for

    assert technique_for("compile-candidate", "cuda") == ("compile", "")
    # a compiled model: compiling is no technique any more
    compiled = ctx_of(ops)
    object.__setattr__(compiled.timing, "compiled", True)
    (g,) = coverage.cover(compiled, [])
    assert g.rule == "not-explained"
    # on a GPU, an op that is one kernel already gains nothing (the oracle: a layer norm 0.45x, a mish 0.86x)
    single = [(r, t, 1) for r, t, _ in ops]
    (h,) = coverage.cover(ctx_of(single), [])
    assert h.rule == "not-explained"
    # ... unless it is long (each call at least LONG_OP_S: the compiled callable's host time hidden behind it)
    long_single = [(r, 2 * coverage.LONG_OP_S, 1) for r, _, _ in ops]
    assert [f.rule for f in coverage.cover(ctx_of(long_single), [])] == ["compile-candidate"]
    just_under = [(r, 0.9 * coverage.LONG_OP_S, 1) for r, _, _ in ops]
    assert [f.rule for f in coverage.cover(ctx_of(just_under), [])] == ["not-explained"]
    # ... or it is a scan, or its kernel is of an instruction-bound family
    scans = [(elementwise(i, 1 << 20, op="aten::cumsum", binary=False, module=f"s.{i}"), 100e-6, 1) for i in range(4)]
    assert [f.rule for f in coverage.cover(ctx_of(scans), [])] == ["compile-candidate"]
    slow = [(r, 0.1, 1) for r, _, _ in ops]  # far below the (smaller) CPU roofs
    (c,) = coverage.cover(ctx_of(slow, CPU), [])  # the CPU: the same single ops are candidates
    assert c.rule == "compile-candidate"


def test_an_unexplained_convolution_names_what_to_try():
    conv = rec(0, "aten::convolution", [(32, 64, 56, 56), (64, 64, 3, 3)], [(32, 64, 56, 56)],
               2 * 32 * 64 * 56 * 56 * 64 * 9, (2 * 32 * 64 * 56 * 56 + 64 * 64 * 9) * 2)  # fmt: skip
    (f,) = coverage.cover(ctx_of([(conv, 5e-3, 1)]), [])
    assert f.rule == "not-explained" and "cudnn.benchmark = True" in f.technique and f.change == "code"


# ------------------------------------------------------------------------------------------- uncounted ops


def _uncounted(index, op, numel=1 << 20, module="block"):
    return replace(elementwise(index, numel, op=op, module=module), flops=None, bytes=None, note="no cost formula")


def test_an_uncounted_op_holding_time_gets_a_finding():
    # the custom op: 2 calls of 150 us = 300 us of 1000 us (30%); the add 700 us is counted
    ops = [
        (_uncounted(0, "mylib::fused_rope"), 150e-6, 1),
        (elementwise(1, 1 << 20), 700e-6, 1),
        (_uncounted(2, "mylib::fused_rope"), 150e-6, 1),
    ]
    (f,) = coverage.uncounted(ctx_of(ops))
    assert f.rule == "uncounted-op" and f.share == pytest.approx(0.3) and f.time_s == pytest.approx(300e-6)
    assert "mylib::fused_rope" in f.evidence and "2 calls" in f.evidence and "30% of the time" in f.evidence
    assert "roofline.register_cost('mylib::fused_rope', flops=..., bytes=...)" in f.technique
    assert f.best_time_s is None and f.where == "block"


def test_a_small_uncounted_op_gets_none_and_a_triton_kernel_is_named():
    small = [(_uncounted(0, "mylib::tiny"), 40e-6, 1), (elementwise(1, 1 << 20), 960e-6, 1)]  # 4%
    assert coverage.uncounted(ctx_of(small)) == []
    big = [(_uncounted(0, "triton::add_kernel"), 500e-6, 1), (elementwise(1, 1 << 20), 500e-6, 1)]
    (f,) = coverage.uncounted(ctx_of(big))
    assert "roofline.register_cost('add_kernel'" in f.technique


def test_the_uncounted_finding_is_produced_by_the_registry():
    from roofline.findings import registry
    from roofline.findings.context import FindingContext

    ops = [(_uncounted(0, "mylib::fused_rope"), 500e-6, 1), (elementwise(1, 1 << 20), 500e-6, 1)]
    found = registry.run(FindingContext(model=ctx_of(ops)), registry.producers(("coverage",)))
    assert "uncounted-op" in [f.rule for f in found]


def test_spread_thin_only_when_it_is():
    from types import SimpleNamespace

    from roofline.render.diagnose import DiagnoseRenderer

    renderer = DiagnoseRenderer()
    thin = renderer._findings([], SimpleNamespace(iteration_s=1.0, uncounted_time_s=0.01))
    assert "spread thin" in thin[0]
    hidden = renderer._findings([], SimpleNamespace(iteration_s=1.0, uncounted_time_s=0.2))
    assert "spread thin" not in hidden[0] and "20%" in hidden[0] and "register" in hidden[0]


def test_pooling_and_upsampling_over_nchw_images_take_channels_last_with_compile():
    # the advice oracle on an H100 (bf16 NCHW images): max pool compiled 3.9x, with channels_last 4.5x; bilinear
    # upsampling 1.7x / 3.2x: the generated kernels read channel vectors per pixel in NHWC
    x, y = (32, 128, 112, 112), (32, 128, 56, 56)
    pool = replace(elementwise(0, 32 * 128 * 56 * 56, op="aten::max_pool2d_with_indices", binary=False),
                   input_shapes=[list(x)], output_shapes=[list(y)], dtype="bf16")  # fmt: skip
    (f,) = coverage.cover(ctx_of([(pool, 2 * coverage.LONG_OP_S, 1)]), [])
    assert f.rule == "compile-candidate-nhwc" and "channels_last with torch.compile" in f.technique
    from roofline.diagnose.verify import technique_for

    assert technique_for("compile-candidate-nhwc", "cuda") == ("channels_last+compile", "")
    # a 3-D input (no image) or an fp32 one: plain compile-candidate
    flat = replace(pool, input_shapes=[[32, 128, 12544]])
    assert coverage.cover(ctx_of([(flat, 2 * coverage.LONG_OP_S, 1)]), [])[0].rule == "compile-candidate"
    single = replace(pool, dtype="fp32")
    assert coverage.cover(ctx_of([(single, 2 * coverage.LONG_OP_S, 1)]), [])[0].rule == "compile-candidate"
    # on the CPU: plain compile-candidate
    assert coverage.cover(ctx_of([(pool, 0.1, 1)], CPU), [])[0].rule == "compile-candidate"
