"""The pure half of the timing pass: parsing profiler event dicts and joining them to counted ops (no torch)."""

from __future__ import annotations

import dataclasses

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
    # its GEMM (10 then 12 us) and the kernel aten::linear launched itself (2 us): linear, a composite the counting
    # pass did not record, holds addmm
    assert addmm.device_time_s == pytest.approx((10 + 12) / 2 * 1e-6 + 2e-6)
    assert addmm.kernels == 2
    assert addmm.launch_delay_s == pytest.approx(3e-6 + 6.5e-6)  # 33 - 30 in both iterations; 46 - 39.5
    assert addmm.cpu_time_s == pytest.approx(18e-6)  # host time of the op call
    assert gelu.device_time_s == pytest.approx((8 + 6) * 1e-6)
    assert gelu.kernels == 2
    assert gelu.launch_delay_s == pytest.approx(1e-6)  # 57 - 58 clipped to 0, plus 63 - 62
    assert timing.unmatched_time_s == 0
    assert timing.kernel_count == 4
    # busy: [33,43]+[46,48]+[57,69] (the two gelu streams overlap: counted once) = 24, then 12+2+12 = 26
    assert timing.gpu_busy_s == pytest.approx(25e-6)
    assert timing.gpu_idle_s == pytest.approx(((36 - 24) + (36 - 26)) / 2 * 1e-6)
    assert not any("could not be attributed" in note for note in timing.notes)
    # per-iteration samples (what the gate tests): addmm's kernels took 10 then 12 us, plus 2; gelu's two 8 + 6
    assert addmm.samples_s == pytest.approx((12e-6, 14e-6))
    assert gelu.samples_s == pytest.approx((14e-6, 14e-6))


def test_join_on_cpu_uses_self_cpu_time_and_gives_a_composites_own_to_the_counted_op_inside():
    parsed = parse_events([e for e in fake_events() if e["kind"] in ("op", "iteration")])
    timing = join([ADDMM, GELU], parsed.ops, [], 2, device="cpu")
    addmm, gelu = timing.ops
    # its self time plus the copy_ it calls (18 us), and aten::linear's own 9 us and aten::t's 3 us: linear (not
    # recorded) holds addmm, and t, inside linear, holds no counted op
    assert addmm.device_time_s == pytest.approx(18e-6 + 12e-6)
    assert gelu.device_time_s == pytest.approx(20e-6)
    assert addmm.samples_s == pytest.approx((30e-6, 30e-6))
    assert addmm.kernels == gelu.kernels == 0
    assert timing.unmatched_time_s == 0
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
    gemm, bias = addmm.kernel_facts  # bias: the kernel aten::linear launched itself
    assert bias.name == "bias" and bias.time_s == pytest.approx(2e-6)
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


# ---------------------------------------------------------------------------------------- time under no counted op


def _total_us(ops: list[CpuOp]) -> float:
    return sum(op.self_us for op in ops)


def test_a_composites_own_time_goes_to_the_counted_ops_inside_by_their_time():
    # aten::gru (not recorded) holds two counted ops, mm (30 us own) and add (10 us own), and an aten::empty that
    # holds none: gru's own 8 us and empty's 4 us go to mm and add, 3 to 1
    records = [rec(0, "aten::mm", (4, 8), (8, 4)), rec(1, "aten::add", (4, 4), (4, 4))]
    events = [
        {"kind": "iteration", "start_us": 0, "end_us": 100},
        {"kind": "op", "id": 1, "name": "aten::gru", "start_us": 0, "end_us": 52},
        {"kind": "op", "id": 2, "name": "aten::empty", "start_us": 1, "end_us": 5},
        {"kind": "op", "id": 3, "name": "aten::mm", "start_us": 6, "end_us": 36, "input_shapes": [[4, 8], [8, 4]]},
        {"kind": "op", "id": 4, "name": "aten::add", "start_us": 40, "end_us": 50,
         "input_shapes": [[4, 4], [4, 4]]},
    ]  # fmt: skip
    ops = parse_events(events).ops
    timing = join(records, ops, [], 1, device="cpu")
    mm, add = timing.ops
    assert mm.device_time_s == pytest.approx((30 + 12 * 0.75) * 1e-6)
    assert add.device_time_s == pytest.approx((10 + 12 * 0.25) * 1e-6)
    assert mm.samples_s == pytest.approx((39e-6,))
    assert timing.unmatched_time_s == 0
    assert (mm.device_time_s + add.device_time_s) == pytest.approx(_total_us(ops) * 1e-6)
    assert timing.op_owners == {3: 0, 4: 1}  # the trace's annotations: only the ops each counted op holds


def test_a_kernel_launched_by_an_op_under_no_counted_op_goes_to_the_counted_ops_beside_it():
    # GPU: LinalgBackward0 (an autograd node) holds a counted mm and an uncounted zeros, which launches a memset;
    # the memset goes to mm (the heaviest share: its launch counted there)
    records = [rec(0, "aten::mm", (4, 8), (8, 4))]
    events = [
        {"kind": "iteration", "start_us": 0, "end_us": 100},
        {"kind": "op", "id": 1, "name": "LinalgBackward0", "start_us": 0, "end_us": 50},
        {"kind": "op", "id": 2, "name": "aten::zeros", "start_us": 1, "end_us": 5},
        {"kind": "op", "id": 3, "name": "aten::mm", "start_us": 6, "end_us": 36, "input_shapes": [[4, 8], [8, 4]]},
        {"kind": "kernel", "name": "memset", "start_us": 60, "end_us": 63, "external_id": 2, "correlation": 11},
        {"kind": "kernel", "name": "gemm", "start_us": 64, "end_us": 84, "external_id": 3, "correlation": 12},
        {"kind": "launch", "name": "cudaMemsetAsync", "correlation": 11, "start_us": 2, "end_us": 4},
        {"kind": "launch", "name": "cudaLaunchKernel", "correlation": 12, "start_us": 7, "end_us": 9},
    ]
    parsed = parse_events(events)
    timing = join(records, parsed.ops, parsed.kernels, 1, launches=parsed.launches, device="cuda")
    (mm,) = timing.ops
    assert mm.device_time_s == pytest.approx(23e-6) and mm.kernels == 2
    assert mm.launch_delay_s == pytest.approx((60 - 4 + 64 - 9) * 1e-6)
    assert timing.unmatched_time_s == 0
    assert not any("could not be attributed" in note for note in timing.notes)


def test_an_op_the_counting_pass_saw_decomposed_gives_its_time_to_the_records_of_its_gap():
    # The run calls aten::mish_backward; the counting pass saw it decomposed (sigmoid, a view, mul) between the same
    # counted neighbours (relu before, sum after): its time and its empty's go to sigmoid and mul by their bytes
    # (1 to 3), none to the view (no bytes); those records count as found
    records = [
        rec(0, "aten::relu", (4,)),
        dataclasses.replace(rec(1, "aten::sigmoid", (4,)), bytes=10),
        rec(2, "aten::view", (4,), flops=None),
        dataclasses.replace(rec(3, "aten::mul", (4,), (4,)), bytes=30),
        rec(4, "aten::sum", (4,)),
    ]
    events = [
        {"kind": "iteration", "start_us": 0, "end_us": 100},
        {"kind": "op", "id": 1, "name": "aten::relu", "start_us": 0, "end_us": 5, "input_shapes": [[4]]},
        {"kind": "op", "id": 2, "name": "MishBackward0", "start_us": 10, "end_us": 40},
        {"kind": "op", "id": 3, "name": "aten::mish_backward", "start_us": 11, "end_us": 39},
        {"kind": "op", "id": 4, "name": "aten::empty", "start_us": 12, "end_us": 14},
        {"kind": "op", "id": 5, "name": "aten::sum", "start_us": 50, "end_us": 55, "input_shapes": [[4]]},
    ]  # fmt: skip
    ops = parse_events(events).ops
    timing = join(records, ops, [], 1, device="cpu")
    by = {t.index: t.device_time_s for t in timing.ops}
    assert by == pytest.approx({0: 5e-6, 1: 30e-6 * 0.25, 3: 30e-6 * 0.75, 4: 5e-6})  # no view
    assert timing.unmatched_time_s == 0
    assert any("1 of 5 counted ops were not found" in note and "aten::view" in note for note in timing.notes)


def test_an_autograd_node_that_runs_no_counted_op_stays_unmatched():
    # AddBackward0 passes its gradient on: no counted op in it, around it, nor open in its gap
    records = [rec(0, "aten::relu", (4,)), rec(1, "aten::sum", (4,))]
    events = [
        {"kind": "iteration", "start_us": 0, "end_us": 100},
        {"kind": "op", "id": 1, "name": "aten::relu", "start_us": 0, "end_us": 5, "input_shapes": [[4]]},
        {"kind": "op", "id": 2, "name": "autograd::engine::evaluate_function: AddBackward0", "start_us": 10,
         "end_us": 13},
        {"kind": "op", "id": 3, "name": "AddBackward0", "start_us": 11, "end_us": 12},
        {"kind": "op", "id": 4, "name": "aten::sum", "start_us": 20, "end_us": 25, "input_shapes": [[4]]},
    ]  # fmt: skip
    ops = parse_events(events).ops
    timing = join(records, ops, [], 1, device="cpu")
    assert [t.device_time_s for t in timing.ops] == pytest.approx([5e-6, 5e-6])
    assert timing.unmatched_time_s == pytest.approx(3e-6)


def test_records_the_run_ran_in_another_order_still_take_the_ops_no_record_took():
    # linalg_matrix_exp's backward: the counting pass saw cat, the big exp, then slices; the run slices first (its
    # in-place path) and runs the exp last. In order, the slices take the run's first two; the exp is matched after
    records = [rec(0, "aten::cat", (4, 4)), rec(1, "aten::linalg_matrix_exp", (8, 8)),
               rec(2, "aten::slice", (8, 8)), rec(3, "aten::slice", (4, 8))]  # fmt: skip
    names = [("aten::slice", (8, 8)), ("aten::slice", (4, 8)), ("aten::copy_", (4, 4)), ("aten::slice", (8, 8)),
             ("aten::linalg_matrix_exp", (8, 8))]  # fmt: skip
    ops = [CpuOp(i + 1, name, 10 * i, 10 * i + 5, (shape,), iteration=0, self_us=5) for i, (name, shape) in
           enumerate(names)]  # fmt: skip
    timing = join(records, ops, [], 1, device="cpu")
    assert timing.matched_ops == {1: 2, 2: 3, 5: 1}
    assert {t.index for t in timing.ops} == {1, 2, 3}
    # the copy_ and the third slice lie between the second slice and the exp, records 3 and 1: a gap that runs
    # backwards holds no record, and their time stays unmatched (the cat is not timed)
    assert timing.unmatched_time_s == pytest.approx(10e-6)
    assert [t.device_time_s for t in timing.ops] == pytest.approx([5e-6] * 3)


def test_greedy_align_takes_the_first_equal_item_whatever_it_skips():
    assert align(list("ab"), list("zzzb")) == []  # b's match skips 3 items, leaving b out skips 1
    assert align(list("ab"), list("zzzb"), greedy=True) == [(1, 3)]
    assert align(list("xb"), list("zzzbx"), greedy=True) == [(0, 4)]
    assert align(list("bx"), list("zzzbx"), greedy=True) == [(0, 3), (1, 4)]
