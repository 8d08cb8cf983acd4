"""Placing counted ops with their timings on a roofline, aggregating them and summing the iteration: hand-built
records, timings and devices, exact numbers. No torch."""

from __future__ import annotations

import json
from functools import partial

import pytest
from diagnose_devices import CPU, GPU
from diagnose_devices import rec as shared_rec

from roofline.diagnose.place import place, place_op
from roofline.ironlaw import LAUNCH_FACTOR
from roofline.report.aggregate import aggregate_points
from roofline.report.records import OpTiming, Timing

# NB: here every record's module type is 'Model' unless given (the shared helper guesses 'Linear' inside modules)
rec = partial(shared_rec, module_type="Model")


def timing(ops, *, device="cuda", wall_s=None, busy_s=0.0, idle_s=0.0, kernels=None, unmatched_s=0.0):
    ops = [OpTiming(index=i, device_time_s=t, kernels=k) for i, t, k in ops]
    return Timing(
        device=device,
        iterations=10,
        wall_s=wall_s if wall_s is not None else sum(o.device_time_s for o in ops),
        ops=ops,
        kernel_count=sum(o.kernels for o in ops) if kernels is None else kernels,
        gpu_busy_s=busy_s,
        gpu_idle_s=idle_s,
        unmatched_time_s=unmatched_s,
    )


N = 4096
GEMM = rec(0, "aten::mm", [(N, N), (N, N)], [(N, N)], 2 * N**3, 3 * N * N * 2)


def test_a_gemm_on_its_tensor_roof():
    point, note = place_op(GEMM, OpTiming(0, 250e-6, 1), GPU, "cuda")
    assert note == ""
    assert point.roof == "bf16 tensor" and point.peak_flops_per_s == 800e12
    assert point.intensity == pytest.approx(2 * N**3 / (3 * N * N * 2))  # 1365.3 FLOP/B
    assert point.ridge == pytest.approx(800e12 / 2e12)
    assert point.attainable_flops_per_s == 800e12  # min(peak, intensity x bandwidth)
    assert point.compute_time_s == pytest.approx(2 * N**3 / 800e12)
    assert point.memory_time_s == pytest.approx(3 * N * N * 2 / 2e12)
    assert point.roof_time_s == point.compute_time_s
    assert point.achieved_flops_per_s == pytest.approx(2 * N**3 / 250e-6)
    assert point.achieved_bytes_per_s == pytest.approx(3 * N * N * 2 / 250e-6)
    assert point.efficiency == pytest.approx(point.compute_time_s / 250e-6)  # 0.687
    assert point.bound == point.roofline_bound == "compute"
    assert point.launch_floor_s == 4e-6 and point.kernels == 1 and point.timed
    assert point.samples_s == []  # none given


def test_a_point_keeps_the_per_iteration_samples():
    point, _ = place_op(GEMM, OpTiming(0, 250e-6, 1, samples_s=(240e-6, 260e-6)), GPU, "cuda")
    assert point.samples_s == [240e-6, 260e-6]
    assert json.loads(point.model_dump_json())["samples_s"] == [240e-6, 260e-6]


def test_memory_bound_and_launch_bound():
    add = rec(1, "aten::add", [(N, N), (N, N)], [(N, N)], N * N, 3 * N * N * 2, math="vector")
    point, _ = place_op(add, OpTiming(1, 60e-6, 1), GPU, "cuda")
    assert point.roof == "fp32 vector"  # no bf16 vector peak on the sheet: element-wise work uses fp32
    assert point.roofline_bound == point.bound == "memory"
    assert point.attainable_flops_per_s == pytest.approx(point.intensity * 2e12)
    assert point.efficiency == pytest.approx((3 * N * N * 2 / 2e12) / 60e-6)
    tiny = rec(2, "aten::add", [(8,), (8,)], [(8,)], 8, 96, math="vector")
    # within LAUNCH_FACTOR x (floor x kernels) of the floor: launch; just above: the roofline's bound
    assert place_op(tiny, OpTiming(2, LAUNCH_FACTOR * 4e-6, 1), GPU, "cuda")[0].bound == "launch"
    assert place_op(tiny, OpTiming(2, 2.1 * 4e-6, 1), GPU, "cuda")[0].bound == "memory"
    assert place_op(tiny, OpTiming(2, 15e-6, 2), GPU, "cuda")[0].bound == "launch"  # two kernels: floor 8 us
    # on the CPU one op is one dispatch, whatever its kernel count (0)
    assert place_op(tiny, OpTiming(2, 5e-6, 0), CPU, "cpu")[0].bound == "launch"


def test_views_and_untimed_ops():
    view = rec(3, "aten::view", [(N, N)], [(N * N,)], 0, 0, math="none")
    point, _ = place_op(view, OpTiming(3, 0.0, 0), GPU, "cuda")
    assert point.bound == "none" and point.intensity is None and point.efficiency is None and point.roof == ""
    cpu_view, _ = place_op(view, OpTiming(3, 1e-6, 0), CPU, "cpu")
    assert cpu_view.bound == "launch"  # a view's host time is all dispatch
    untimed, _ = place_op(GEMM, None, GPU, "cuda")
    assert not untimed.timed and untimed.time_s == 0 and untimed.efficiency is None
    assert untimed.bound == "compute"


def test_missing_roof_falls_back_to_fp32_with_a_note():
    point, note = place_op(GEMM, OpTiming(0, 1e-3, 0), CPU, "cpu")
    assert point.roof == "fp32 tensor" and "no bf16 tensor roof" in note


def test_place_aggregates_and_summary():
    records = [
        GEMM,
        rec(1, "aten::add", [(N, N), (N, N)], [(N, N)], N * N, 3 * N * N * 2, math="vector", module="blocks.0"),
        rec(2, "aten::add", [(N, N), (N, N)], [(N, N)], N * N, 3 * N * N * 2, math="vector", module="blocks.1"),
        rec(3, "aten::view", [(N, N)], [(N * N,)], 0, 0, math="none"),
        rec(4, "aten::weird", [(N,)], [(N,)], None, None, math="vector", note="no cost formula"),
        rec(5, "aten::weird", [(N,)], [(N,)], None, None, math="vector", note="no cost formula"),
    ]
    t = timing(
        [(0, 250e-6, 1), (1, 60e-6, 1), (2, 40e-6, 1), (3, 0.0, 0), (4, 20e-6, 1), (5, 30e-6, 1)],
        wall_s=500e-6,
        busy_s=400e-6,
        idle_s=100e-6,
    )
    placed = place(records, t, GPU)
    assert [p.index for p in placed.points] == [0, 1, 2, 3]  # the uncounted ops are not points
    (weird,) = placed.uncounted
    assert weird.op == "aten::weird" and weird.count == 2 and weird.time_s == pytest.approx(50e-6)
    assert weird.note == "no cost formula"
    s = placed.summary
    assert s.device_kind == "cuda" and s.iterations == 10
    assert s.op_time_s == pytest.approx(400e-6) and s.counted_time_s == pytest.approx(350e-6)
    assert s.uncounted_time_s == pytest.approx(50e-6) and s.uncounted_ops == 2
    assert s.flops == 2 * N**3 + 2 * N * N and s.bytes == 3 * N * N * 2 * 3
    assert s.wall_s == 500e-6 and s.kernel_count == 5
    assert s.achieved_flops_per_s == pytest.approx(s.flops / 500e-6)
    assert s.mfu_roof == "bf16 tensor"  # the roof holding the most FLOPs
    assert s.mfu == pytest.approx(s.flops / 500e-6 / 800e12)
    assert s.mbu == pytest.approx(s.bytes / 500e-6 / 2e12)
    assert s.gpu_idle_share == pytest.approx(0.2)
    assert s.host_overhead_share == pytest.approx(1 - 400 / 500)
    assert s.ops == 4 and s.work_ops == 3 and s.timed_ops == 4
    agg = placed.aggregates
    by_type = {a.key: a for a in agg.op_types}
    add = by_type["aten::add"]
    assert add.count == 2 and add.time_s == pytest.approx(100e-6) and add.time_share == pytest.approx(100 / 400)
    assert add.flops == 2 * N * N and add.bytes == 6 * N * N * 2
    assert add.intensity == pytest.approx(add.flops / add.bytes)
    assert add.achieved_flops_per_s == pytest.approx(add.flops / 100e-6)
    assert add.efficiency == pytest.approx(add.roof_time_s / 100e-6) and add.bound == "memory"
    assert add.attainable_flops_per_s == pytest.approx(add.flops / add.roof_time_s)
    assert agg.op_types[0].key == "aten::mm"  # largest time first
    modules = {a.key: a for a in agg.modules}
    assert set(modules) == {"(model)", "blocks.0", "blocks.1"}
    assert modules["(model)"].count == 2 and modules["(model)"].time_s == pytest.approx(250e-6)
    sites = agg.ops
    assert sites[0].op == "aten::mm" and sites[0].input_shapes == [[N, N], [N, N]]
    assert len(sites) == 4  # the two adds are in two modules: two call sites
    json.dumps(placed.model_dump(mode="json"), allow_nan=False)  # no NaN or infinity anywhere


def test_cpu_summary_has_no_gpu_idle():
    t = timing([(0, 1e-3, 0)], device="cpu", wall_s=2e-3)
    s = place([GEMM], t, CPU).summary
    assert s.gpu_idle_share is None and s.host_overhead_share == pytest.approx(0.5) and s.kernel_count == 0


def test_call_sites_group_repeated_calls():
    records = [rec(i, "aten::mm", [(8, 8), (8, 8)], [(8, 8)], 1024, 384, module="cell") for i in range(5)]
    placed = place(records, timing([(i, 10e-6, 1) for i in range(5)]), GPU)
    (site,) = placed.aggregates.ops
    assert site.count == 5 and site.time_s == pytest.approx(50e-6) and site.time_share == pytest.approx(1.0)
    assert site.key == "aten::mm @ cell [8x8, 8x8]"
    again = aggregate_points(placed.points)
    assert again.ops[0].count == 5
