"""Bound classes from evidence (roofline.findings.bounds): every class on hand-built ops, kernel launch facts and
devices; the under-filled GPU rule; reports without the new fields read back. No torch, no timing of the host."""

from __future__ import annotations

import pytest
from diagnose_devices import CPU, GPU, rec

from roofline.diagnose.place import place, place_op
from roofline.findings import bounds
from roofline.findings.bounds import classify, is_layout_kernel, under_filled
from roofline.findings.model import ModelContext
from roofline.findings.rules import diagnose
from roofline.findings.rules.occupancy import under_filled as under_filled_rule
from roofline.report.records import OpTiming, Timing
from roofline.report.rows import KernelFacts, OpPoint, parse_rows

N = 16 * 4_194_304  # the issue's layer norm: 16 rows of 4.2 M columns
LAYER_NORM = rec(0, "aten::native_layer_norm", [(16, 4_194_304), (4_194_304,), (4_194_304,)], [(16, 4_194_304)],
                 8 * N, 2 * N * 4, dtype="fp32", math="vector")  # fmt: skip
# 537 MB at 2 TB/s: a roofline time of 268 us


def kernel(name: str = "vectorized_layer_norm_kernel", time_s: float = 1e-3, **facts) -> KernelFacts:
    return KernelFacts(name=name, time_s=time_s, launches=1, **facts)


def point(record=LAYER_NORM, time_s: float = 24e-3, *, kernels: int = 1, device=GPU, kind="cuda", **timing):
    p, _ = place_op(record, OpTiming(record.index, time_s, kernels, **timing), device, kind)
    return p


# ------------------------------------------------------------------------------------------------ classes


def test_parallelism_the_issue_layer_norm_16_blocks_on_the_sms():
    facts = kernel(time_s=24e-3, grid=[16, 1, 1], block=[1024, 1, 1], blocks_per_sm=0.16, occupancy=0.08)
    p = point(kernel_facts=(facts,))
    assert (p.limiter, p.bound) == ("parallelism", "memory")  # below the ridge, but not limited by bandwidth
    assert "16 blocks of 1024 threads on 100 SMs" in p.limiter_evidence
    assert "84 of 100 SMs get none" in p.limiter_evidence
    assert "of DRAM" in p.limiter_evidence  # the roofs it is far from


def test_parallelism_from_a_partial_last_wave():
    # 2 resident per SM: 220 blocks = 1.1 waves of 200: the second wave holds 20 blocks, 45% of the slots idle
    facts = kernel(time_s=24e-3, grid=[220, 1, 1], block=[256, 1, 1], occupancy=0.9, active_blocks_per_sm=2)
    p = point(kernel_facts=(facts,))
    assert p.limiter == "parallelism" and "1.10 waves" in p.limiter_evidence
    # 4 whole waves and a bit: 1 - 4.05 / 5 = 19% idle, below TAIL_IDLE: filled
    filled = kernel(time_s=24e-3, grid=[810, 1, 1], block=[256, 1, 1], occupancy=0.9, active_blocks_per_sm=2)
    assert point(kernel_facts=(filled,)).limiter == "latency"


def test_parallelism_from_low_occupancy_but_not_for_tensor_kernels():
    low = kernel(time_s=24e-3, grid=[400, 1, 1], block=[64, 1, 1], occupancy=0.1)
    p = point(kernel_facts=(low,))
    assert p.limiter == "parallelism" and "est. occupancy 10%" in p.limiter_evidence
    # a GEMM runs few large blocks by design: its low occupancy is not read
    mm = rec(1, "aten::mm", [(4096, 4096), (4096, 4096)], [(4096, 4096)], 2 * 4096**3, 3 * 4096**2 * 2)
    q = point(mm, 1e-3, kernel_facts=(kernel("sm90_xmma_gemm", 1e-3, grid=[512, 1, 1], block=[128, 1, 1],
                                                  occupancy=0.06),))  # fmt: skip
    assert q.limiter == "latency"


def test_a_tensor_kernel_right_of_the_ridge_with_the_gpu_filled_is_compute_from_tensor_pace():
    # an implicit-GEMM convolution on an H100 at 37-50% of the bf16 roof: ncu read SM 90-93%, DRAM 10-20%
    mm = rec(1, "aten::mm", [(4096, 4096), (4096, 4096)], [(4096, 4096)], 2 * 4096**3, 3 * 4096**2 * 2)
    filled = kernel("sm90_xmma_fprop_implicit_gemm", 1e-3, grid=[1024, 1, 1], block=[128, 1, 1], occupancy=0.1)
    at_40 = 2 * 4096**3 / (0.4 * 800e12)  # 40% of the 800 TFLOP/s roof of these tests
    q = point(mm, at_40, kernel_facts=(filled,))
    assert q.limiter == "compute" and "tensor pipes set the pace" in q.limiter_evidence and "40%" in q.limiter_evidence
    at_25 = 2 * 4096**3 / ((bounds.TENSOR_PACE - 0.05) * 800e12)
    assert point(mm, at_25, kernel_facts=(filled,)).limiter == "latency"


def test_latency_with_the_gpu_filled_and_without_facts():
    full = kernel(time_s=24e-3, grid=[65536, 1, 1], block=[256, 1, 1], occupancy=1.0, active_blocks_per_sm=8)
    p = point(kernel_facts=(full,))
    assert p.limiter == "latency" and "with the GPU filled" in p.limiter_evidence
    bare = point(kernel_facts=(kernel(time_s=24e-3),))  # an older torch: no grid in the trace
    assert bare.limiter == "latency" and "no kernel launch facts" in bare.limiter_evidence
    assert point().limiter == "latency"  # no kernel facts at all


def test_memory_and_compute_near_their_roofs():
    p = point(time_s=300e-6)  # 268 us of bytes: 89% of DRAM
    assert p.limiter == "memory" and "89% of DRAM" in p.limiter_evidence
    mm = rec(1, "aten::mm", [(4096, 4096), (4096, 4096)], [(4096, 4096)], 2 * 4096**3, 3 * 4096**2 * 2)
    q = point(mm, 200e-6)  # 172 us of FLOPs on the 800 TFLOP/s bf16 tensor roof: 86%
    assert q.limiter == "compute" and "bf16 tensor roof" in q.limiter_evidence
    # below NEAR of either roof: not memory, whatever the intensity says
    assert point(time_s=268e-6 / (bounds.NEAR - 0.01)).limiter == "latency"


def test_launch_on_the_gpu_and_host_on_the_cpu():
    small = rec(2, "aten::mul", [(1024,), (1024,)], [(1024,)], 1024, 3 * 4096, dtype="fp32", math="vector")
    p = point(small, 6e-6)  # within 2x the 4 us floor
    assert p.limiter == p.bound == "launch" and "shorter than their launches" in p.limiter_evidence
    c = point(small, 5e-6, kernels=0, device=CPU, kind="cpu")
    assert c.limiter == "host" and "op dispatch" in c.limiter_evidence
    # a CPU op whose host time is mostly dispatch around its own work
    mid = rec(3, "aten::add", [(2**20,), (2**20,)], [(2**20,)], 2**20, 3 * 2**22, dtype="fp32", math="vector")
    d = point(mid, 100e-6, kernels=0, device=CPU, kind="cpu", cpu_time_s=400e-6)
    assert d.limiter == "host" and "of dispatch" in d.limiter_evidence


def test_cpu_compute_memory_and_latency():
    mid = rec(3, "aten::add", [(2**20,), (2**20,)], [(2**20,)], 2**20, 3 * 2**22, dtype="fp32", math="vector")
    assert point(mid, 700e-6, kernels=0, device=CPU, kind="cpu").limiter == "memory"  # 629 us of bytes
    slow = point(mid, 5e-3, kernels=0, device=CPU, kind="cpu")
    assert slow.limiter == "latency" and "no kernel launch facts on the CPU" in slow.limiter_evidence


def test_layout_conversion_kernels():
    flops, nbytes = 2 * 8 * 64 * 56 * 56 * 64 * 9, 2 * (2 * 8 * 64 * 56 * 56 + 64 * 64 * 9)
    shapes = [(8, 64, 56, 56), (64, 64, 3, 3)]
    conv = rec(4, "aten::convolution", shapes, [(8, 64, 56, 56)], flops, nbytes, dtype="fp32", math="tensor")
    facts = (
        kernel("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>", 400e-6, grid=[1568, 1, 1]),
        kernel("sm80_xmma_fprop_implicit_gemm_tf32f32", 300e-6, grid=[392, 1, 1]),
        kernel("void cudnn::ops::nhwcToNchwKernel<float, float, float, true, false>", 250e-6, grid=[1568, 1, 1]),
    )
    p = point(conv, 1e-3, kernels=3, kernel_facts=facts, layout_time_s=650e-6)
    assert p.limiter == "layout" and "65%" in p.limiter_evidence and "nchwToNhwc" in p.limiter_evidence


def test_none_untimed_and_views():
    untimed, _ = place_op(LAYER_NORM, None, GPU, "cuda")
    assert (untimed.limiter, untimed.limiter_evidence) == ("none", "not timed")
    view = rec(5, "aten::view", [(4, 4)], [(16,)], 0, 0, math="none")
    assert point(view, 1e-3).limiter == "none"
    assert point(view, 2e-6, kernels=0, device=CPU, kind="cpu").limiter == "host"  # a view's dispatch


def test_device_without_sm_count_reads_the_sms_from_the_facts():
    from dataclasses import replace

    facts = kernel(time_s=24e-3, grid=[16, 1, 1], block=[1024, 1, 1], blocks_per_sm=16 / 132)
    limiter, evidence = classify(point(kernel_facts=(facts,)), replace(GPU, compute_units=0), "cuda")
    assert limiter == "parallelism" and "on 132 SMs" in evidence
    assert under_filled(kernel(), GPU) is None  # no facts: nothing to say


@pytest.mark.parametrize(
    ("name", "layout"),
    [
        ("void cudnn::ops::nchwToNhwcKernel<__half, __half, float, false, true, (cudnnKernelDataType_t)0>", True),
        ("void cudnn::engines_precompiled::nhwcToNchwKernel<float, float, float, true, false>", True),
        ("void nchwToFoldedNhwcKernel<float>", True),
        ("void tensorTransformGeneric<float, float, float, true, false, false>", True),
        ("void at::native::transpose_kernel<float>", True),
        ("void cudnn::cnn::nchwAddPaddingKernel<float>", True),
        ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_nhwckrsc_nchw", False),
        ("ampere_sgemm_128x64_tn", False),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", False),
        ("triton_poi_fused_transpose_0", True),
    ],
)
def test_layout_kernel_predicate(name, layout):
    assert is_layout_kernel(name) is layout


# ------------------------------------------------------------------------------------------------ the rule


def ln_timing(time_s: float, facts: tuple[KernelFacts, ...]) -> Timing:
    return Timing(device="cuda", iterations=1, wall_s=time_s * 1.05, ops=[OpTiming(0, time_s, 1, kernel_facts=facts)])


def test_under_filled_rule_fires_with_a_bound_never_below_the_roofline():
    facts = (kernel(time_s=24e-3, grid=[16, 1, 1], block=[1024, 1, 1], blocks_per_sm=0.16, occupancy=0.08),)
    timing = ln_timing(24e-3, facts)
    placed = place([LAYER_NORM], timing, GPU)
    ctx = ModelContext.of(placed.points, GPU, timing, placed=placed)
    (finding,) = under_filled_rule(ctx)
    p = placed.points[0]
    assert finding.rule == "under-filled-gpu" and finding.bottleneck == "parallelism"
    assert finding.properties == ["associativity", "locality"]
    assert "split the reduction" in finding.technique and "torch.compile" in finding.technique
    assert finding.best_time_s == pytest.approx(p.roof_time_s + p.launch_floor_s)
    assert finding.best_time_s >= p.roof_time_s
    assert "16 blocks" in finding.evidence
    assert finding in diagnose(ctx)


def test_under_filled_rule_needs_the_share_and_the_class():
    facts = (kernel(time_s=24e-3, grid=[16, 1, 1], block=[1024, 1, 1]),)
    timing = ln_timing(24e-3, facts)
    timing.wall_s = 24e-3 * 30  # the op is 3% of the iteration
    placed = place([LAYER_NORM], timing, GPU)
    assert under_filled_rule(ModelContext.of(placed.points, GPU, timing, placed=placed)) == []
    full = (kernel(time_s=24e-3, grid=[65536, 1, 1], block=[256, 1, 1], occupancy=1.0),)
    timing = ln_timing(24e-3, full)
    placed = place([LAYER_NORM], timing, GPU)
    assert under_filled_rule(ModelContext.of(placed.points, GPU, timing, placed=placed)) == []


# ------------------------------------------------------------------------------------------------ reports


def test_a_report_row_without_the_new_fields_reads_back():
    p = point(kernel_facts=(kernel(time_s=24e-3, grid=[16, 1, 1]),))
    row = p.model_dump()
    for name in ("kernel_facts", "layout_time_s", "limiter", "limiter_evidence"):
        row.pop(name)
    (old,) = parse_rows("diagnose", [row])
    assert isinstance(old, OpPoint) and old.limiter == "" and old.kernel_facts == [] and old.layout_time_s == 0
    (new,) = parse_rows("diagnose", [p.model_dump()])
    assert new == p and new.kernel_facts[0].grid == [16, 1, 1]


def test_the_aggregates_and_chart_points_carry_the_limiter():
    from roofline.report.points import _op_groups

    facts = (kernel(time_s=24e-3, grid=[16, 1, 1], block=[1024, 1, 1]),)
    timing = ln_timing(24e-3, facts)
    placed = place([LAYER_NORM], timing, GPU)
    assert placed.aggregates.ops[0].limiter == "parallelism"
    assert placed.aggregates.ops[0].bound == "memory"  # the iron law's, as before
    (group,) = _op_groups([p.model_dump() for p in placed.points])
    assert group["limiter"] == "parallelism"
    (older,) = _op_groups([{k: v for k, v in placed.points[0].model_dump().items() if k != "limiter"}])
    assert older["limiter"] == ""


# ------------------------------------------------------------------------------------------------ GPU


@pytest.mark.gpu
def test_cuda_layer_norm_over_16_rows_is_parallelism_bound():
    torch = pytest.importorskip("torch")
    from roofline.diagnose.count import count_ops
    from roofline.diagnose.profile import time_model
    from roofline.roofs import device_roofs

    model = torch.nn.LayerNorm(4_194_304).cuda().eval()
    x = torch.randn(16, 4_194_304, device="cuda")
    records = count_ops(model, (x,), {})
    timing = time_model(model, (x,), {}, records, device="cuda", warmup=2, iters=3)
    device, _ = device_roofs("cuda")
    placed = place(records, timing, device)
    norm = max((p for p in placed.points if "layer_norm" in p.op), key=lambda p: p.time_s)
    assert norm.kernel_facts and norm.kernel_facts[0].grid is not None, timing.notes
    assert norm.limiter == "parallelism", norm.limiter_evidence


def test_instruction_bound_generic_elementwise_and_depthwise_kernels():
    # the H100 case: a broadcast div in PyTorch's generic element-wise kernel at 43% of DRAM, SM busy with offsets
    generic = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::Div>>(int)"
    full = dict(grid=[262144, 1, 1], block=[128, 1, 1], occupancy=1.0, active_blocks_per_sm=16)
    p = point(kernel_facts=(kernel(generic, 24e-3, **full),))
    assert p.limiter == "compute" and "instruction-bound" in p.limiter_evidence
    depthwise = "void at::native::conv_depthwise2d_forward_kernel<3, c10::BFloat16, int>(...)"
    assert point(kernel_facts=(kernel(depthwise, 24e-3, **full),)).limiter == "compute"
    # the vectorized kernel of the same op is not: filled and slow is latency
    vectorized = "void at::native::vectorized_elementwise_kernel<8, at::native::BinaryFunctor<float>>(int)"
    assert point(kernel_facts=(kernel(vectorized, 24e-3, **full),)).limiter == "latency"
    assert bounds.is_instruction_bound_kernel(generic) and not bounds.is_instruction_bound_kernel(vectorized)


def test_cpu_threads_tell_parallelism_from_latency():
    slow = rec(4, "aten::add", [(2**20,), (2**20,)], [(2**20,)], 2**20, 3 * 2**22, dtype="fp32", math="vector")
    p = point(slow, 5e-3, kernels=0, device=CPU, kind="cpu")
    assert classify(p, CPU, "cpu", threads=(1, 8))[0] == "parallelism"
    limiter, evidence = classify(p, CPU, "cpu", threads=(8, 8))
    assert limiter == "latency" and "all 8 cores" in evidence
    assert classify(p, CPU, "cpu")[0] == "latency"  # threads unknown (an older report)


def test_a_matmul_off_the_tile_grid_is_judged_by_its_shape_not_latency():
    # GPT-2's lm_head on an H100: 8192x768 @ 768x50257 bf16 at 13% of the tensor roof with the GPU filled; its rows
    # (50257 x 2 B) are not 16-byte aligned: cuBLAS ran an 'align1' kernel (ncu: SM 26%, memory 76%)
    m, k, n = 8192, 768, 50257

    def mm(n: int):
        return rec(1, "aten::mm", [(m, k), (k, n)], [(m, n)], 2 * m * n * k, 2 * (m * k + k * n + m * n))

    facts = kernel("cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_nn_align1", 6.7e-3, grid=[512, 25, 1],
                   block=[256, 1, 1], occupancy=0.13)  # fmt: skip
    p = point(mm(n), 6.7e-3, kernel_facts=(facts,))
    assert p.limiter == "layout" and "not 16-byte aligned (n=50257 x 2 B)" in p.limiter_evidence
    assert "align1" in p.limiter_evidence
    # aligned rows (50264 x 2 B = 16 x 6283) but off the 64-multiple grid: partial tiles, compute
    q = point(mm(50264), 6.7e-3, kernel_facts=(facts,))
    assert q.limiter == "compute" and "n=50264 off the 64-multiple tile grid" in q.limiter_evidence
    # on the grid (the vocabulary padded to 50304) and as slow: latency, no shape cause
    assert point(mm(50304), 6.7e-3, kernel_facts=(facts,)).limiter == "latency"
    # below the ridge (a GEMV-like matmul): not judged by its shape
    gemv = rec(2, "aten::mm", [(1, 4096), (4096, n)], [(1, n)], 2 * 4096 * n, 2 * 4096 * n)
    assert point(gemv, 1e-3, kernel_facts=(facts,)).limiter not in ("layout", "compute")


# ------------------------------------------------------------------------------------------------ tensor cores


# the held-out case: a bf16 convolution of 3 input channels on cuDNN's CUDA-core fallback (an H100: SM 81%, DRAM 5%)
CONV3 = rec(2, "aten::convolution", [(32, 3, 224, 224), (64, 3, 7, 7)], [(32, 64, 218, 218)],
            2 * 32 * 64 * 218 * 218 * 3 * 49, (32 * 3 * 224 * 224 + 64 * 3 * 49 + 32 * 64 * 218 * 218) * 2)  # fmt: skip
FALLBACK = "void implicit_convolveNd_sgemm<__nv_bfloat16, 2, 1024, 5, 5, 3, 3, 3, 1, false, false, true>(int, ...)"


def test_tensor_cores_not_engaged_is_compute_on_the_cuda_cores():
    # 28.6 GFLOP: 36 us on the 800 TFLOP/s tensor roof; measured 900 us (4%): 31.8 TFLOP/s, 64% of the fp32
    # CUDA-core roof (50 TFLOP/s; the test GPU lists no bf16 CUDA-core rate)
    facts = kernel(FALLBACK, 900e-6, grid=[65536, 1, 1], block=[256, 1, 1], occupancy=1.0, active_blocks_per_sm=8)
    p = point(CONV3, 900e-6, kernel_facts=(facts,))
    assert bounds.cuda_core_fallback(p) == FALLBACK
    assert p.limiter == "compute" and "tensor cores not engaged" in p.limiter_evidence
    assert "input channels 3 not a multiple of 8" in p.limiter_evidence
    assert "64% of the fp32 CUDA-core roof" in p.limiter_evidence  # measured against the CUDA cores' rate too
    # a tensor-core kernel, or an fp32 op, is no fallback
    tc = kernel("sm80_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nchw", 450e-6, grid=[65536, 1, 1])
    assert bounds.cuda_core_fallback(point(CONV3, 450e-6, kernel_facts=(tc,))) is None
    fp32 = rec(3, "aten::convolution", CONV3.input_shapes, CONV3.output_shapes, CONV3.flops, CONV3.bytes * 2,
               dtype="fp32")  # fmt: skip
    assert bounds.cuda_core_fallback(point(fp32, 450e-6, kernel_facts=(facts,))) is None
    # aligned dims: the cause is the algorithm chosen
    mm = rec(4, "aten::mm", [(4096, 4096), (4096, 4096)], [(4096, 4096)], 2 * 4096**3, 3 * 4096**2 * 2)
    q = point(mm, 5e-3, kernel_facts=(kernel("gemv2T_kernel_val", 5e-3, grid=[4096, 1, 1]),))
    assert "the algorithm chosen" in bounds.tensor_core_cause(q)


def test_tensor_cores_idle_finding_bounds_at_the_tensor_roof():
    from roofline.findings.rules.matmul import tensor_cores_idle

    facts = kernel(FALLBACK, 450e-6, grid=[65536, 1, 1], block=[256, 1, 1], occupancy=1.0)
    timing = Timing(device="cuda", iterations=1, wall_s=500e-6,
                    ops=[OpTiming(2, 450e-6, 1, kernel_facts=(facts,))])  # fmt: skip
    placed = place([CONV3], timing, GPU)
    ctx = ModelContext.of(placed.points, GPU, timing, placed=placed)
    f = tensor_cores_idle(ctx)
    assert f is not None and f.rule == "tensor-cores-idle" and f.change == "code"
    assert "(here: 3 input channels -> 8)" in f.technique and "input channels 3" in f.evidence
    p = placed.points[0]
    assert f.best_time_s == pytest.approx(p.roof_time_s + p.launch_floor_s)
    assert any(g.rule == "tensor-cores-idle" for g in diagnose(ctx))


def test_the_hardware_class_of_each_limiter():
    assert bounds.hardware_class("compute") == "compute" and bounds.hardware_class("memory") == "memory"
    for limiter in ("latency", "launch", "parallelism", "host", "none"):
        assert bounds.hardware_class(limiter) == "neither"
    assert bounds.hardware_class(None) is None and bounds.hardware_class("") is None
    # layout is a cause: its conversions are SM-bound where torch's generic element-wise copy does them (its index
    # arithmetic), memory-bound where a dedicated transpose kernel moves the bytes
    copy = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<...>>(int, ...)"
    assert bounds.hardware_class("layout", [copy]) == "compute"
    assert bounds.hardware_class("layout", ["void cudnn::ops::nchwToNhwcKernel<__nv_bfloat16>(...)"]) == "memory"
    assert bounds.hardware_class("layout") == "memory"
