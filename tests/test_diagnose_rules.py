"""The diagnosis rules on hand-built ops: for each rule a case where it fires (with its numbers) and one where it
must not. No torch."""

from __future__ import annotations

import pytest
from diagnose_devices import CPU, GPU, rec

from roofline.diagnose.place import place
from roofline.findings import model
from roofline.findings.model import ModelContext
from roofline.findings.rules import diagnose, fusion, launch, layout, matmul
from roofline.findings.shapes import gemm_dims
from roofline.report.records import OpTiming, Timing


def ctx_of(ops, device=GPU, *, wall_s=None, busy_s=0.0, idle_s=0.0):
    """ops: (record, measured seconds, kernels)."""
    kind = "cpu" if device is CPU else "cuda"
    timings = [OpTiming(index=r.index, device_time_s=t, kernels=k) for r, t, k in ops]
    total = sum(t for _, t, _ in ops)
    timing = Timing(
        device=kind,
        iterations=10,
        wall_s=total if wall_s is None else wall_s,
        ops=timings,
        kernel_count=sum(k for _, _, k in ops),
        gpu_busy_s=busy_s,
        gpu_idle_s=idle_s,
    )
    placed = place([r for r, _, _ in ops], timing, device)
    return ModelContext.of(placed.points, device, timing, placed=placed)


def only(result):
    if isinstance(result, list):
        assert len(result) == 1, result
        return result[0]
    assert result is not None
    return result


def elementwise(index, numel, op="aten::add", *, binary=True, dtype="fp32", module="", **kw):
    size = 4 if dtype == "fp32" else 2
    shapes = [(numel,), (numel,)] if binary else [(numel,)]
    return rec(
        index,
        op,
        shapes,
        [(numel,)],
        numel,
        (len(shapes) + 1) * numel * size,
        dtype=dtype,
        math="vector",
        module=module,
        **kw,
    )


def mm(index, m, n, k, *, dtype="bf16", module="", op="aten::mm", **kw):
    size = {"bf16": 2, "fp16": 2, "fp32": 4}[dtype]
    return rec(
        index,
        op,
        [(m, k), (k, n)],
        [(m, n)],
        2 * m * n * k,
        (m * k + k * n + m * n) * size,
        dtype=dtype,
        module=module,
        **kw,
    )


# ------------------------------------------------------------------------------------------------ shapes


def test_gemm_dims_of_matmul_ops():
    ctx = ctx_of(
        [
            (mm(0, 64, 128, 256), 1e-5, 1),
            (rec(1, "aten::addmm", [(128,), (64, 256), (256, 128)], [(64, 128)], 1, 1), 1e-5, 1),
            (rec(2, "aten::bmm", [(8, 64, 32), (8, 32, 16)], [(8, 64, 16)], 1, 1), 1e-5, 1),
            (rec(3, "aten::linear", [(4, 10, 256), (128, 256)], [(4, 10, 128)], 1, 1), 1e-5, 1),
            (rec(4, "aten::mv", [(64, 256), (256,)], [(64,)], 1, 1), 1e-5, 1),
            (rec(5, "aten::convolution", [(1, 3, 8, 8), (4, 3, 3, 3)], [(1, 4, 6, 6)], 1, 1), 1e-5, 1),
            (elementwise(6, 64), 1e-5, 1),
        ]
    )
    dims = [gemm_dims(p) for p in ctx.points]
    assert (dims[0].m, dims[0].n, dims[0].k, dims[0].batch) == (64, 128, 256, 1)
    assert (dims[1].m, dims[1].n, dims[1].k, dims[1].a, dims[1].b) == (64, 128, 256, 1, 2)
    assert (dims[2].batch, dims[2].m, dims[2].n, dims[2].k) == (8, 64, 16, 32)
    assert (dims[3].m, dims[3].n, dims[3].k) == (40, 128, 256)
    assert (dims[4].m, dims[4].n, dims[4].k) == (64, 1, 256)
    assert dims[5] is None and dims[6] is None


# ------------------------------------------------------------------------------------------------ launch


def test_launch_bound_many_short_kernels():
    ops = [(elementwise(i, 64, module=f"layers.{i}"), 5e-6, 1) for i in range(24)]
    ctx = ctx_of(ops, wall_s=400e-6, busy_s=120e-6, idle_s=250e-6)
    f = only(launch.launch_bound(ctx))
    assert f.rule == "launch-bound" and f.bottleneck == "launch"
    assert f.properties == ["locality", "associativity"]
    assert "CUDA graphs" in f.technique
    assert "24 of 24 ops are short" in f.evidence and "GPU idle 68%" in f.evidence
    assert f.time_s == pytest.approx(400e-6)
    # roofline with 24 launches vs one graph, applied to the ops' device time
    roof = sum(p.roof_time_s for p in ctx.points)
    after = roof + 4e-6  # one graph launch instead of 24
    assert f.best_time_s == f.floor_s == pytest.approx(after)  # the roofline after: the most it allows
    assert f.gain > 20


def test_launch_bound_on_an_idle_gpu_and_not_for_big_kernels():
    big = [(elementwise(i, 2**24, module=f"layers.{i}"), 120e-6, 1) for i in range(20)]
    assert launch.launch_bound(ctx_of(big, wall_s=2.5e-3, busy_s=2.4e-3, idle_s=0.1e-3)) is None
    f = only(launch.launch_bound(ctx_of(big, wall_s=6e-3, busy_s=2.4e-3, idle_s=3.6e-3)))
    assert "GPU idle 60%" in f.evidence


def test_launch_bound_on_the_cpu_uses_the_dispatch_floor():
    ops = [(elementwise(i, 64, module=f"layers.{i}"), 8e-6, 0) for i in range(20)]  # 8 us <= 4 x 3 us, tiny work
    f = only(launch.launch_bound(ctx_of(ops, CPU, wall_s=400e-6)))
    assert "torch.compile" in f.technique and "CUDA graphs" not in f.technique
    assert "outside the ops" in f.evidence
    slow = [(elementwise(i, 64, module=f"layers.{i}"), 30e-6, 0) for i in range(20)]  # 10 floors: not short
    assert launch.launch_bound(ctx_of(slow, CPU)) is None


# ------------------------------------------------------------------------------------------------ loops


def rnn_step(start, step, *, module_of=lambda step, name: name, time_s=10e-6):
    w_ih = module_of(step, "w_ih")
    addmm = rec(
        start,
        "aten::addmm",
        [(128,), (16, 64), (64, 128)],
        [(16, 128)],
        2 * 16 * 64 * 128,
        50_000,
        dtype="fp32",
        module=w_ih,
    )
    return [
        (addmm, time_s, 0),
        (mm(start + 1, 16, 128, 128, dtype="fp32", module=module_of(step, "w_hh")), time_s, 0),
        (elementwise(start + 2, 16 * 128, module=module_of(step, "")), time_s, 0),
        (elementwise(start + 3, 16 * 128, op="aten::tanh", binary=False, module=module_of(step, "")), time_s, 0),
    ]


def test_sequential_loop_over_time_steps():
    ops = [op for step in range(12) for op in rnn_step(4 * step, step)]
    ctx = ctx_of(ops, CPU, wall_s=800e-6)
    (loop,) = ctx.loops
    assert (loop.period, loop.steps, loop.module) == (4, 12, "")
    assert loop.ops == ("aten::addmm", "aten::mm", "aten::add", "aten::tanh")
    f = only(launch.sequential_loop(ctx))
    assert f.rule == "sequential-loop" and f.properties == ["associativity"]
    assert "parallel scan" in f.technique
    assert "runs the same 4 ops (addmm, mm, add, tanh) 12 times in a row" in f.evidence
    assert f.time_s == pytest.approx(800e-6)  # its ops (480 us) and the gaps between them: the whole wall here
    roof = sum(p.roof_time_s for p in ctx.points)
    after = roof + 4 * 3e-6  # one dispatch per op of one step
    assert f.best_time_s == f.floor_s == pytest.approx(after)
    assert launch.launch_bound(ctx) is None  # the loop's small ops are the loop's finding


def test_gpu_idle_between_a_loops_kernels_is_the_loops():
    ops = [(r, 8e-6, 1) for step in range(64) for r, _, _ in rnn_step(4 * step, step)]
    ops.append((mm(256, 64, 64, 64), 10e-6, 1))  # one op outside the loop
    ctx = ctx_of(ops, wall_s=5e-3, busy_s=2.06e-3, idle_s=2.9e-3)
    assert launch.launch_bound(ctx) is None  # the idle GPU waits on the loop's Python steps
    f = only(launch.sequential_loop(ctx))
    gaps = 5e-3 - (256 * 8e-6 + 10e-6)
    assert f.time_s == pytest.approx(256 * 8e-6 + gaps * 256 / 257)  # the gaps shared out by op count
    assert f.bottleneck == "launch"


def test_no_loop_for_few_steps_a_stack_of_layers_or_big_ops():
    assert ctx_of([op for s in range(5) for op in rnn_step(4 * s, s)], CPU).loops == ()
    layers = [op for s in range(12) for op in rnn_step(4 * s, s, module_of=lambda step, n: f"layers.{step}.{n}")]
    assert ctx_of(layers, CPU).loops == ()
    big = [op for s in range(12) for op in rnn_step(4 * s, s, time_s=1e-3)]  # > SMALL_OP_FACTOR x the floor
    ctx = ctx_of(big, CPU)
    assert ctx.loops == () and launch.sequential_loop(ctx) == []


# ------------------------------------------------------------------------------------------------ fusion


def test_elementwise_chain_fusion_bound():
    n = 2**22
    ops = [
        (elementwise(0, n, "aten::mul"), 30e-6, 1),
        (rec(1, "aten::view", [(n,)], [(n,)], 0, 0, math="none"), 0.0, 0),  # views do not break a chain
        (elementwise(2, n, "aten::add"), 30e-6, 1),
        (elementwise(3, n, "aten::tanh", binary=False), 25e-6, 1),
        (elementwise(4, n, "aten::mul"), 30e-6, 1),
    ]
    ctx = ctx_of(ops)
    f = only(fusion.elementwise_chain(ctx))
    assert f.rule == "elementwise-chain" and f.properties == ["locality"] and f.bottleneck == "memory"
    unfused = (3 + 3 + 2 + 3) * n * 4
    fused = 2 * n * 4 + n * 4  # the first op's inputs read once + the last output written once
    assert f"{unfused / 1e6:.4g} MB moved vs {fused / 1e6:.4g} MB fused" in f.evidence
    assert "4 element-wise/norm ops in a row" in f.evidence
    pts = [p for p in ctx.points if p.math == "vector"]
    after = max(sum(p.compute_time_s for p in pts), fused / 2e12) + 4e-6
    assert f.time_s == pytest.approx(115e-6)
    assert f.best_time_s == f.floor_s == pytest.approx(after)
    assert f.ops == [0, 2, 3, 4]


def test_no_chain_when_short_broken_or_of_other_sizes():
    n = 2**20
    assert fusion.elementwise_chain(ctx_of([(elementwise(0, n), 1e-5, 1), (elementwise(1, n), 1e-5, 1)])) == []
    broken = [
        (elementwise(0, n), 1e-5, 1),
        (elementwise(1, n), 1e-5, 1),
        (mm(2, 1024, 1024, 1024), 1e-4, 1),
        (elementwise(3, n), 1e-5, 1),
        (elementwise(4, n), 1e-5, 1),
    ]
    assert fusion.elementwise_chain(ctx_of(broken)) == []
    sizes = [(elementwise(0, n), 1e-5, 1), (elementwise(1, n), 1e-5, 1), (elementwise(2, n // 2), 1e-5, 1)]
    assert fusion.elementwise_chain(ctx_of(sizes)) == []
    gap = [(elementwise(0, n), 1e-5, 1), (elementwise(1, n), 1e-5, 1), (elementwise(3, n), 1e-5, 1)]  # 2: uncounted
    assert fusion.elementwise_chain(ctx_of(gap)) == []


def test_identical_chains_in_every_layer_are_one_finding():
    n = 2**20
    ops = [(elementwise(10 * layer + i, n, module=f"blocks.{layer}"), 1e-5, 1) for layer in range(3) for i in range(3)]
    f = only(fusion.elementwise_chain(ctx_of(ops)))
    assert "x3 (the same chain 3 times)" in f.evidence and len(f.ops) == 9


# ------------------------------------------------------------------------------------------------ attention


def attention_ops(seq=512, heads=8, d=64, start=0, module="attn"):
    bh = heads
    scores = bh * seq * seq
    flops = 2 * bh * seq * seq * d
    first = rec(
        start,
        "aten::bmm",
        [(bh, seq, d), (bh, d, seq)],
        [(bh, seq, seq)],
        flops,
        (2 * bh * seq * d + scores) * 2,
        module=module,
    )
    soft = rec(
        start + 3,
        "aten::_softmax",
        [(1, bh, seq, seq)],
        [(1, bh, seq, seq)],
        5 * scores,
        2 * scores * 2,
        math="vector",
        module=module,
    )
    second = rec(
        start + 4,
        "aten::bmm",
        [(bh, seq, seq), (bh, seq, d)],
        [(bh, seq, d)],
        flops,
        (scores + 2 * bh * seq * d) * 2,
        module=module,
    )
    return [
        (first, 40e-6, 1),
        (elementwise(start + 1, scores, "aten::div", binary=False, dtype="bf16", module=module), 20e-6, 1),
        (elementwise(start + 2, scores, "aten::masked_fill", dtype="bf16", module=module), 20e-6, 1),
        (soft, 25e-6, 1),
        (second, 40e-6, 1),
    ]


def test_naive_attention_materialising_the_scores():
    ctx = ctx_of(attention_ops())
    (att,) = ctx.attention
    assert att.scores_shape == (8, 512, 512) and att.indices == (0, 1, 2, 3, 4)
    f = only(fusion.naive_attention(ctx))
    assert f.rule == "naive-attention" and f.properties == ["associativity", "locality"]
    assert "scaled_dot_product_attention" in f.technique
    assert "materialises the 8x512x512 scores" in f.evidence
    naive = sum(p.bytes for p in ctx.points)
    fused = (2 * 8 * 512 * 64 + 8 * 512 * 64 + 8 * 512 * 64) * 2  # Q, K, V read once, O written once
    assert f"{naive / 1e6:.4g} MB moved vs {fused / 1e6:.4g} MB fused" in f.evidence
    assert f.best_time_s < f.time_s == pytest.approx(145e-6)
    assert fusion.elementwise_chain(ctx) == []  # the scale, mask and softmax belong to the attention finding


def test_no_attention_finding_for_sdpa_or_a_classifier_softmax():
    n = 8 * 512 * 64
    sdpa = rec(
        0,
        "aten::_scaled_dot_product_flash_attention",
        [(1, 8, 512, 64)] * 3,
        [(1, 8, 512, 64)],
        2 * 2 * 8 * 512 * 512 * 64,
        4 * n * 2,
    )
    assert fusion.naive_attention(ctx_of([(sdpa, 50e-6, 1)])) == []
    classifier = [
        (mm(0, 64, 10, 512), 5e-6, 1),
        (rec(1, "aten::_softmax", [(64, 10)], [(64, 10)], 3200, 5120, math="vector"), 3e-6, 1),
    ]
    assert ctx_of(classifier).attention == ()


# ------------------------------------------------------------------------------------------------ GEMV / decode


def gemv(index, n=4096, k=4096, m=1, dtype="bf16", module="mlp.up"):
    size = 2 if dtype == "bf16" else 4
    nbytes = (n + m * k + k * n + m * n) * size
    return rec(
        index, "aten::addmm", [(n,), (m, k), (k, n)], [(m, n)], 2 * m * n * k, nbytes, dtype=dtype, module=module
    )


def test_memory_bound_gemv_weights_dominate():
    ctx = ctx_of([(gemv(0), 25e-6, 1), (gemv(1, module="mlp.down"), 25e-6, 1)])
    f = only(matmul.memory_bound_gemv(ctx))
    assert f.rule == "memory-bound-gemv" and f.properties == ["redundancy"] and f.bottleneck == "memory"
    assert "M = 1" in f.evidence and "quantize" in f.technique
    weight = 4096 * 4096 * 2
    p = ctx.points[0]
    after = max(p.compute_time_s, (p.bytes - weight + weight / 4) / 2e12) + 4e-6  # int4 weights: a quarter
    assert f.best_time_s == f.floor_s == pytest.approx(2 * after)  # both GEMVs at the int4 roofline
    assert 2 < f.gain < 7  # a quarter of the bytes; the launch floor stays


def test_no_gemv_finding_for_a_large_m_gemm():
    assert matmul.memory_bound_gemv(ctx_of([(gemv(0, m=4096), 500e-6, 1)])) is None


# ------------------------------------------------------------------------------------------------ precision


def test_fp32_matmul_on_tensor_cores():
    op = mm(0, 4096, 4096, 4096, dtype="fp32")
    ctx = ctx_of([(op, 3.2e-3, 1)])
    assert ctx.points[0].roof == "fp32 vector"
    f = only(matmul.fp32_matmul(ctx))
    assert f.rule == "fp32-matmul" and f.properties == ["redundancy"] and "TF32" in f.technique
    p = ctx.points[0]
    before = p.roof_time_s + 4e-6
    after = max(p.flops / 400e12, p.bytes / 2e12) + 4e-6
    assert f.best_time_s == f.floor_s == pytest.approx(after)
    assert f.gain == pytest.approx(3.2e-3 / after) and before / after > 7
    assert "bf16" in f.evidence


def test_no_fp32_finding_without_tf32_or_when_tf32_is_already_on():
    op = mm(0, 1024, 1024, 1024, dtype="fp32")
    assert matmul.fp32_matmul(ctx_of([(op, 30e-3, 0)], CPU)) is None
    fast = mm(0, 4096, 4096, 4096, dtype="fp32")  # faster than the fp32 roof allows: TF32 is on
    assert matmul.fp32_matmul(ctx_of([(fast, 1e-3, 1)])) is None
    tiny = mm(0, 8, 32, 32, dtype="fp32")  # less work than a launch: TF32 changes nothing
    assert matmul.fp32_matmul(ctx_of([(tiny, 5e-6, 1)])) is None


# ------------------------------------------------------------------------------------------------ compute


def test_compute_bound_near_the_roof():
    op = mm(0, 8192, 8192, 8192)
    roof = 2 * 8192**3 / 800e12
    ctx = ctx_of([(op, roof / 0.8, 1)])
    f = only(matmul.compute_bound(ctx))
    assert f.rule == "compute-bound" and f.properties == ["sparsity", "separability", "symmetry"]
    assert "at 80% of the bf16 tensor roof" in f.evidence and "2:4" in f.evidence
    p = ctx.points[0]
    after = max(p.compute_time_s / 2, p.memory_time_s) + 4e-6
    assert f.best_time_s == f.floor_s == pytest.approx(after)
    cpu = only(
        matmul.compute_bound(ctx_of([(mm(0, 1024, 1024, 1024, dtype="fp32"), 2 * 1024**3 / 1e11 / 0.9, 0)], CPU))
    )
    assert cpu.best_time_s is None and cpu.saving_s == 0  # no sparse roof known on a CPU


def test_no_compute_bound_finding_far_below_the_roof():
    op = mm(0, 8192, 8192, 8192)
    assert matmul.compute_bound(ctx_of([(op, 2 * 8192**3 / 800e12 / 0.3, 1)])) is None


def test_awkward_shapes_and_wave_quantization():
    roof = 2 * 1793 * 1793 * 4096 / 800e12
    ctx = ctx_of([(mm(0, 1793, 1793, 4096), roof / 0.3, 1)])
    f = only(matmul.awkward_shapes(ctx))
    assert f.rule == "awkward-shapes" and f.properties == ["locality"] and "pad" in f.technique
    assert "m=1793 n=1793 k=4096" in f.evidence
    assert "120 256x128 tiles = 2 waves on 100 SMs; m=1792 n=1792: 1" in f.evidence
    padded = roof * (1856 / 1793) ** 2 + 4e-6  # m, n padded to 1856: the roofline time at the padded shape
    assert f.best_time_s == pytest.approx(min(padded, roof / 0.3 / 2))  # or the measured time x waves 1/2
    aligned = 2 * 1792 * 1792 * 4096 / 800e12
    assert matmul.awkward_shapes(ctx_of([(mm(0, 1792, 1792, 4096), aligned / 0.3, 1)])) is None


def test_awkward_shapes_on_a_cpu_pads_to_the_roofline():
    roof = 2 * 1000 * 1000 * 1000 / 1e11
    f = only(matmul.awkward_shapes(ctx_of([(mm(0, 1000, 1000, 1000, dtype="fp32"), roof / 0.2, 0)], CPU)))
    padded = roof * (1024 / 1000) ** 3
    assert f.best_time_s == pytest.approx(padded + 3e-6)


# ------------------------------------------------------------------------------------------------ layout


def test_non_contiguous_memory_bound_ops():
    n = 2**24
    op = elementwise(0, n, "aten::add", non_contiguous=True)
    roof = 3 * n * 4 / 2e12
    f = only(layout.non_contiguous(ctx_of([(op, roof / 0.1, 1)])))
    assert f.rule == "non-contiguous" and f.properties == ["locality"] and "contiguous" in f.technique
    assert "(10% of DRAM" in f.evidence
    assert f.best_time_s == pytest.approx(roof + 4e-6)
    assert layout.non_contiguous(ctx_of([(elementwise(0, n), roof / 0.1, 1)])) is None  # contiguous
    assert layout.non_contiguous(ctx_of([(op, roof / 0.9, 1)])) is None  # near the bandwidth


# ------------------------------------------------------------------------------------------------ ranking


def test_findings_ranked_by_saving_and_small_ones_dropped():
    n = 2**22
    ops = [(elementwise(i, n), 100e-6, 1) for i in range(4)]  # a chain: big saving
    ops.append((mm(4, 8192, 8192, 8192), 2 * 8192**3 / 800e12 / 0.9, 1))  # compute-bound: saving up to 2x
    ops += [(elementwise(5 + i, 64), 5e-6, 1) for i in range(3)]  # a tiny chain: < 1% of the time
    found = diagnose(ctx_of(ops))
    # the chain's technique keeps the model's math and needs no code change (torch.compile): it leads although
    # 2:4 sparsity (the model's math changed) could save more; that one is last, labelled
    assert [f.rule for f in found] == ["elementwise-chain", "compute-bound"]
    assert found[1].saving_s >= found[0].saving_s
    assert [f.change for f in found] == ["none", "math"]
    assert found[1].technique.endswith("(changes the model's math: check the accuracy)")
    assert "changes the model's math" not in found[0].technique
    assert all(f.share >= model.MIN_FINDING_SHARE for f in found)
    assert diagnose(ctx_of([(elementwise(0, 64), 5e-6, 1)])) == []


def test_within_a_kind_of_change_the_larger_saving_leads():
    from roofline.findings.base import rank
    from roofline.report.rows import Finding

    def f(rule, change, time_s, best_s):
        return Finding(rule=rule, bottleneck="memory", properties=[], technique="t", evidence="e", time_s=time_s,
                       best_time_s=best_s, change=change)  # fmt: skip

    found = [f("a", "math", 1.0, 0.1), f("b", "code", 1.0, 0.5), f("c", "none", 1.0, 0.9), f("d", "code", 1.0, 0.2),
             f("e", "none", 1.0, 0.6), f("old", "", 1.0, 0.3)]  # fmt: skip
    assert [x.rule for x in rank(found)] == ["e", "c", "d", "old", "b", "a"]


def test_no_launch_bound_finding_when_the_gpu_keeps_up():
    # the VGG case: many short kernels but the GPU idle 4.7% of the span: the host keeps up, a graph saves little
    ops = [(elementwise(i, 64, module=f"layers.{i}"), 5e-6, 1) for i in range(24)]
    assert launch.launch_bound(ctx_of(ops, wall_s=130e-6, busy_s=120e-6, idle_s=6e-6)) is None
    assert launch.launch_bound(ctx_of(ops, wall_s=400e-6, busy_s=120e-6, idle_s=250e-6)) is not None


def test_launch_bound_from_a_third_of_the_span_idle():
    # 20 kernels of 120 us: idle 35% of the span (a graph would give 1.54x) fires, idle 30% (1.43x) does not
    big = [(elementwise(i, 2**24, module=f"layers.{i}"), 120e-6, 1) for i in range(20)]
    f = only(launch.launch_bound(ctx_of(big, wall_s=2.4e-3 / 0.65, busy_s=2.4e-3, idle_s=2.4e-3 / 0.65 * 0.35)))
    assert "GPU idle 35%" in f.evidence and "CUDA graphs" in f.technique
    assert launch.launch_bound(ctx_of(big, wall_s=2.4e-3 / 0.7, busy_s=2.4e-3, idle_s=2.4e-3 / 0.7 * 0.3)) is None
