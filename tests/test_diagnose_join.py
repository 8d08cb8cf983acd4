"""The pure half of the timing pass: parsing profiler event dicts and joining them to counted ops (no torch)."""

from __future__ import annotations

import pytest
from diagnose_events import ADDMM, GELU, fake_events, rec

from roofline.diagnose.join import CpuOp, LaunchCall, align, join, parse_events
from roofline.report.records import KernelEvent


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


# ------------------------------------------------------------------------------------------------ launch facts


def with_facts(events: list[dict]) -> list[dict]:
    """The fake events, each kernel with the launch facts a Kineto trace carries (gelu_b: a cuDNN conversion)."""
    out = []
    for e in events:
        if e["kind"] == "kernel":
            facts = {"grid": [16, 1, 1], "block": [256, 1, 1], "registers_per_thread": 32, "shared_memory_bytes": 1024}
            e = {**e, **facts, "blocks_per_sm": 0.12, "warps_per_sm": 0.97, "occupancy": 0.06}
            if e["name"] == "gelu_b":
                e["name"] = "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>"
        out.append(e)
    return out


def test_join_carries_kernel_launch_facts_per_op():
    parsed = parse_events(with_facts(fake_events()))
    assert parsed.kernels[0].grid == (16, 1, 1) and parsed.kernels[0].occupancy == 0.06
    timing = join([ADDMM, GELU], parsed.ops, parsed.kernels, 2, launches=parsed.launches, device="cuda")
    addmm, gelu = timing.ops
    (gemm,) = addmm.kernel_facts
    assert gemm.name == "gemm" and gemm.launches == 1 and gemm.time_s == pytest.approx(11e-6)  # (10 + 12) / 2
    assert (gemm.grid, gemm.block, gemm.registers_per_thread, gemm.shared_memory_bytes) == ([16, 1, 1], [256, 1, 1],
                                                                                            32, 1024)  # fmt: skip
    assert (gemm.blocks_per_sm, gemm.warps_per_sm, gemm.occupancy) == (0.12, 0.97, 0.06)
    assert [k.name for k in gelu.kernel_facts] == ["gelu_a", gelu.kernel_facts[1].name]  # longest first
    assert gelu.layout_time_s == pytest.approx(6e-6) and addmm.layout_time_s == 0
    assert not any(note.startswith("no kernel launch facts") for note in timing.notes)


def test_join_without_launch_facts_notes_it_and_never_fails():
    parsed = parse_events(fake_events())
    timing = join([ADDMM, GELU], parsed.ops, parsed.kernels, 2, launches=parsed.launches, device="cuda")
    gemm = timing.ops[0].kernel_facts[0]
    assert gemm.grid is None and gemm.block is None and gemm.occupancy is None and gemm.registers_per_thread is None
    assert any(note.startswith("no kernel launch facts (the profiler's trace") for note in timing.notes)
    cpu = join([ADDMM, GELU], parsed.ops, [], 2, device="cpu")
    assert any(note.startswith("no kernel launch facts (a CPU run)") for note in cpu.notes)
    assert all(op.kernel_facts == () for op in cpu.ops)


def test_malformed_launch_facts_read_as_none():
    events = [
        {"kind": "kernel", "name": "k", "start_us": 0, "end_us": 1, "grid": [0, 1], "block": "256",
         "registers_per_thread": -3, "shared_memory_bytes": None, "blocks_per_sm": float("nan"),
         "warps_per_sm": True, "occupancy": 1.5},
        {"kind": "note", "text": "no kernel launch facts (why)"},
    ]  # fmt: skip
    parsed = parse_events(events)
    (k,) = parsed.kernels
    assert (k.grid, k.block, k.registers_per_thread, k.shared_memory_bytes) == (None, None, None, None)
    assert (k.blocks_per_sm, k.warps_per_sm, k.occupancy) == (None, None, None)
    assert parsed.notes == ["no kernel launch facts (why)"]


def test_align_leaves_an_extra_record_unmatched_rather_than_jump_a_layer():
    # Two identical "layers" (a b c d e f); the counting pass saw an extra `x` in layer 1 that the profile holds
    # only in layer 2 (say a scalar the profiler lists differently): x must not pull the rest of layer 1 onto
    # layer 2.
    layer = list("abcdef")
    records = ["a", "b", "x", *layer[2:], *layer]
    profile = [*layer, "a", "b", "x", *layer[2:]]
    pairs = align(records, profile)
    assert (0, 0) in pairs and (1, 1) in pairs and (3, 2) in pairs and (7, 6) in pairs
    assert all(i != 2 for i, _ in pairs)  # x stays unmatched
    assert len(pairs) == len(records) - 1


def test_align_still_skips_extra_profiler_ops():
    assert align(list("abcd"), list("abzzcd")) == [(0, 0), (1, 1), (2, 4), (3, 5)]


def test_join_matches_an_in_place_op_to_its_out_of_place_record():
    # The autograd engine sums two gradients with add (counting pass, under a dispatch mode) or add_ (profiled).
    records = [rec(0, "aten::mm", (4, 8), (8, 4)), rec(1, "aten::add", (4, 4), (4, 4)), rec(2, "aten::relu", (4, 4))]
    ops = [
        CpuOp(1, "aten::mm", 0, 4, ((4, 8), (8, 4)), iteration=0, self_us=4),
        CpuOp(2, "aten::add_", 5, 7, ((4, 4), (4, 4)), iteration=0, self_us=2),
        CpuOp(3, "aten::relu", 8, 9, ((4, 4),), iteration=0, self_us=1),
    ]
    timing = join(records, ops, [], 1, device="cpu")
    assert [t.index for t in timing.ops] == [0, 1, 2]
    assert timing.ops[1].device_time_s == pytest.approx(2e-6) and timing.unmatched_time_s == 0
