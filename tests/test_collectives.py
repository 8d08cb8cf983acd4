"""Collectives, pure: nccl-tests' bus bandwidth factors (exact), message bytes from shapes, the communication roof
and its fit, overlap arithmetic on injected intervals, skew, splitting the counted records, reading a trace,
matching calls to work, the findings, the chart spec and the console table."""

from __future__ import annotations

from fractions import Fraction

import pytest

from roofline.costs.collectives import (
    CommRoof,
    bus_factor,
    busbw,
    check_under_link,
    fit_roof,
    is_communication_op,
    kind_of,
    message_bytes,
    roof_time,
    work_kind,
)
from roofline.diagnose.collectives import (
    CollectiveCall,
    Work,
    collective_rows,
    match_ranks,
    overlap,
    roof_floor,
    skew,
    split_records,
    trace_activity,
    union,
    waits,
    without_communication,
)
from roofline.findings.rules.collectives import communication_findings, wait_findings
from roofline.report.collectives_chart import collectives_chart
from roofline.report.records import OpRecord


@pytest.mark.parametrize(
    ("kind", "n", "factor"),
    [
        ("all_reduce", 2, Fraction(1)),
        ("all_reduce", 4, Fraction(3, 2)),
        ("all_reduce", 8, Fraction(7, 4)),
        ("all_gather", 2, Fraction(1, 2)),
        ("all_gather", 8, Fraction(7, 8)),
        ("reduce_scatter", 4, Fraction(3, 4)),
        ("all_to_all", 8, Fraction(7, 8)),
        ("broadcast", 8, Fraction(1)),
        ("send", 2, Fraction(1)),
        ("recv", 2, Fraction(1)),
        ("all_reduce", 1, Fraction(0)),
    ],
)
def test_bus_factor_is_nccl_tests(kind, n, factor):
    assert bus_factor(kind, n) == float(factor)


def test_busbw_is_algbw_times_the_factor():
    # 1 GiB all-reduced on 8 ranks in 10 ms: algbw 107.37 GB/s, busbw x 7/4
    size = 1 << 30
    assert busbw("all_reduce", size, 0.01, 8) == pytest.approx(size / 0.01 * 7 / 4, rel=1e-15)
    assert busbw("all_gather", size, 0.01, 8) == pytest.approx(size / 0.01 * 7 / 8, rel=1e-15)
    assert busbw("all_reduce", size, 0.0, 8) is None
    with pytest.raises(ValueError):
        bus_factor("gossip", 2)


def test_message_bytes_from_the_counted_shapes():
    # dist.all_reduce(t): c10d::allreduce_([t]): t's bytes
    assert message_bytes("c10d::allreduce_", [(16576,)], [(16576,)], 4, 2) == 16576 * 4
    # all_gather_into_tensor(out [16, 64], in [8, 64]): the gathered output
    assert message_bytes("c10d::_allgather_base_", [(16, 64), (8, 64)], [(16, 64)], 4, 2) == 16 * 64 * 4
    # all_gather(list of 2 x [1000], [1000]) flattened: 2 outputs + 1 input -> the outputs
    assert message_bytes("c10d::allgather_", [(1000,), (1000,), (1000,)], [], 2, 2) == 2000 * 2
    # reduce_scatter_tensor(out [500], in [1000]): the input
    assert message_bytes("c10d::_reduce_scatter_base_", [(500,), (1000,)], [(500,)], 4, 2) == 4000
    # all_to_all_single(out, in): the input
    assert message_bytes("c10d::alltoall_base_", [(1000,), (1000,)], [], 4, 2) == 4000
    assert message_bytes("c10d::broadcast_", [(10, 10)], [], 8, 4) == 800
    assert message_bytes("c10d::send", [(7,)], [], 4, 2) == 28
    # the functional collectives (FSDP2, DTensor) return their output
    assert message_bytes("_c10d_functional::all_gather_into_tensor", [(8, 64)], [(16, 64)], 2, 2) == 16 * 64 * 2
    assert message_bytes("_c10d_functional::reduce_scatter_tensor", [(16, 64)], [(8, 64)], 2, 2) == 16 * 64 * 2


def test_names():
    assert kind_of("c10d::allreduce_") == "all_reduce"
    assert kind_of("aten::mm") is None
    assert is_communication_op("_c10d_functional::wait_tensor") and is_communication_op("record_param_comms")
    assert not is_communication_op("aten::add")
    assert work_kind("gloo:all_reduce") == "all_reduce"
    assert work_kind("nccl:all_gather") == "all_gather"
    assert work_kind("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == "all_reduce"
    assert work_kind("ncclKernel_AllGather_RING_LL_Sum_int8_t") == "all_gather"
    assert work_kind("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") == "sendrecv"
    assert work_kind("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL") == "reduce_scatter"
    assert work_kind("void at::native::vectorized_elementwise_kernel") is None


def test_the_roof_and_its_fit():
    assert roof_time("all_reduce", 1 << 20, 2, 10e-6, 1e9) == pytest.approx((1 << 20) / 1e9)  # the bytes bind
    assert roof_time("all_reduce", 1024, 2, 10e-6, 1e9) == pytest.approx(10e-6)  # the latency binds
    roof = CommRoof(100e9, 20e-6, "measured")
    assert roof.knee_bus_bytes == pytest.approx(2e6)
    assert roof.bus_bandwidth(2e6) == pytest.approx(100e9)  # at the knee: the whole bandwidth
    assert roof.bus_bandwidth(2e5) == pytest.approx(10e9)  # below: bytes / latency
    assert roof.bus_bandwidth(2e9) == pytest.approx(100e9)
    # the measured roof of the issue: the fit no longer promises an unbounded bandwidth from the smallest message
    measured = [(8192, 27.1e-6), (1 << 20, 30e-6), (1 << 27, 0.85e-3), (1 << 30, (1 << 30) / 328e9)]
    latency, bandwidth = fit_roof(measured, "all_reduce", 2)
    assert latency == pytest.approx(27.1e-6) and bandwidth == pytest.approx(328e9)


def _roof_points():
    from hypothesis import strategies as st

    point = st.tuples(st.integers(1, 1 << 32), st.floats(1e-7, 10.0, allow_nan=False, allow_infinity=False))
    return st.lists(point, min_size=1, max_size=12)


@pytest.mark.parametrize("kind, ranks", [("all_reduce", 2), ("all_reduce", 8), ("all_gather", 4), ("send", 2)])
def test_roof_fit_properties(kind, ranks):
    from hypothesis import given, settings

    @settings(max_examples=150, deadline=None)
    @given(_roof_points())
    def check(points):
        latency, bandwidth = fit_roof(points, kind, ranks)
        best = max(busbw(kind, size, t, ranks) for size, t in points)
        assert bandwidth <= best * (1 + 1e-12)  # never above the best measured
        for size, t in points:  # every point on or above the roof
            assert t >= roof_time(kind, size, ranks, latency, bandwidth) * (1 - 1e-12)

    check()


@pytest.mark.parametrize("latency, bandwidth", [(20e-6, 100e9), (5e-6, 450e9), (80e-6, 1e9)])
def test_points_on_the_roof_give_it_back(latency, bandwidth):
    factor = bus_factor("all_reduce", 8)
    sizes = (8, 8192, 1 << 20, 1 << 26, 1 << 30)  # both parts sampled: under and over the knee
    line = [(s, max(latency, s * factor / bandwidth)) for s in sizes]
    got_latency, got_bandwidth = fit_roof(line, "all_reduce", 8)
    assert got_latency == pytest.approx(latency, rel=1e-12) and got_bandwidth == pytest.approx(bandwidth, rel=1e-12)


def test_a_roof_above_the_link_is_an_error():
    check_under_link(300e9, 450e9, "h100-sxm")
    check_under_link(300e9, None)
    with pytest.raises(ValueError, match="above the link's peak 450 GB/s"):
        check_under_link(4.8e18, 450e9, "h100-sxm")


def test_overlap_on_injected_intervals():
    comm = [(0.0, 10.0), (20.0, 30.0)]
    compute = [(5.0, 25.0)]
    o = overlap(comm, compute, iterations=2, scale=1.0)
    assert (o.communication_s, o.overlapped_s, o.exposed_s) == (10.0, 5.0, 5.0)  # per iteration
    assert o.exposed_share == 0.5
    assert union([(0, 2), (1, 3), (5, 6), (6, 7)]) == [(0, 3), (5, 7)]
    nothing = overlap([(0.0, 4.0)], [], 1, scale=1.0)
    assert nothing.exposed_s == 4.0 and nothing.overlapped_s == 0.0
    hidden = overlap([(1.0, 2.0)], [(0.0, 1.5), (1.5, 3.0)], 1, scale=1.0)
    assert hidden.exposed_s == 0.0 and hidden.overlapped_s == 1.0


def test_skew_and_stragglers():
    s = skew({0: 1.0, 1: 1.0, 2: 1.05, 3: 1.5})
    assert s.median_s == pytest.approx(1.025) and s.slowest_rank == 3 and s.stragglers == (3,)
    assert s.ratio == pytest.approx(1.5 / 1.025)
    even = skew({0: 1.0, 1: 1.0})
    assert even.stragglers == () and even.ratio == 1.0
    assert skew({}) is None


def _record(index, op, shapes, dtypes=("fp32",), producers=(), outputs=()):
    return OpRecord(
        index=index, op=op, module="", module_type="", phase="forward", input_shapes=shapes, input_dtypes=dtypes,
        output_shapes=outputs, flops=0, bytes=0, dtype="fp32", math="vector", input_producers=producers,
    )  # fmt: skip


def test_split_records_renumbers_and_keeps_the_calls():
    records = [
        _record(0, "aten::mm", ((8, 64), (64, 64))),
        _record(1, "c10d::_allgather_base_", ((16, 64), (8, 64)), ("fp32", "fp32"), (None, 0)),
        _record(2, "_c10d_functional::wait_tensor", ((16, 64),)),
        _record(3, "aten::relu", ((16, 64),), producers=(0,)),
    ]
    compute, calls = split_records(records, 2)
    assert [r.op for r in compute] == ["aten::mm", "aten::relu"]
    assert [r.index for r in compute] == [0, 1] and compute[1].input_producers == (0,)
    assert calls == [
        CollectiveCall(0, "c10d::_allgather_base_", "all_gather", 4096, "fp32", "forward", "", ((16, 64), (8, 64)))
    ]


def test_trace_activity_and_rows():
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "user_annotation", "name": "roofline::iteration", "ts": 0, "dur": 100, "tid": 1},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10, "dur": 30, "tid": 1},
            {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "ts": 40, "dur": 10, "tid": 1},
            {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "ts": 42, "dur": 2, "tid": 1},  # in c10d
            {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "ts": 45, "dur": 40, "tid": 2,
             "args": {"Input Dims": [[1000]], "Input type": ["float"]}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 60, "dur": 10, "tid": 1},
            {"ph": "X", "cat": "user_annotation", "name": "roofline::iteration", "ts": 100, "dur": 100, "tid": 1},
            {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "ts": 150, "dur": 20, "tid": 2,
             "args": {"Input Dims": [[1000]], "Input type": ["float"]}},
        ]
    }  # fmt: skip
    activity = trace_activity(trace)
    assert activity.device == "cpu" and activity.iterations == 2 and activity.iteration_us == [100, 100]
    assert activity.compute == [(10.0, 40.0), (60.0, 70.0)]
    assert [(w.cls, w.bytes) for w in activity.work] == [("all_reduce", 4000), ("all_reduce", 4000)]
    calls = [CollectiveCall(0, "c10d::allreduce_", "all_reduce", 4000, "fp32", "backward", "", ((1000,),))]
    rows, notes = collective_rows(calls, activity.work, 2, 2, roof=CommRoof(1e9, 10e-6, "measured"), rank=0)
    assert notes == [] and len(rows) == 1
    row = rows[0]
    assert row["bytes"] == 4000 and row["calls"] == 1 and row["time_s"] == pytest.approx(30e-6)
    assert row["busbw_bytes_per_s"] == pytest.approx(4000 / 30e-6)  # factor 1 on 2 ranks
    assert row["roof_time_s"] == pytest.approx(max(10e-6, 4000 / 1e9))
    assert row["efficiency"] == pytest.approx(row["roof_time_s"] / 30e-6)
    # work no counted call explains: its bytes from the trace
    rows, notes = collective_rows([], activity.work, 2, 2, rank=1)
    assert rows[0]["source"] == "profile" and rows[0]["bytes"] == 4000 and notes


def test_gpu_trace_kernels():
    trace = [
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 0, "dur": 50},
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "ts": 20, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5},
    ]
    activity = trace_activity(trace)
    assert activity.device == "cuda" and activity.compute == [(20.0, 70.0)]
    o = overlap([(w.start_us, w.end_us) for w in activity.work], activity.compute, 1)
    assert o.overlapped_s == pytest.approx(30e-6) and o.exposed_s == pytest.approx(20e-6)


def test_without_communication_leaves_compute():
    events = [
        {"kind": "op", "name": "c10d::allreduce_"},
        {"kind": "op", "name": "aten::mm"},
        {"kind": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL"},
        {"kind": "kernel", "name": "sgemm"},
    ]
    assert [e["name"] for e in without_communication(events)] == ["aten::mm", "sgemm"]


def test_findings_are_bounds():
    rows = [
        {"kind": "all_reduce", "bytes": 4096, "bus_bytes": 4096.0, "time_s": 50e-6, "calls": 4},
        {"kind": "all_reduce", "bytes": 1 << 30, "bus_bytes": float(1 << 30), "time_s": 20e-3, "calls": 1},
    ]
    found = communication_findings(
        0.1, 0.03, 0.05, rows, latency_s=20e-6, bus_bytes_per_s=100e9,
        skew={"stragglers": [1], "slowest_rank": 1, "slowest_s": 0.1, "median_s": 0.08, "ratio": 1.25},
    )  # fmt: skip
    by_rule = {f.rule: f for f in found}
    exposed = by_rule["communication-exposed"]
    assert exposed.time_s == 0.1 and exposed.best_time_s == pytest.approx(0.07)
    small = by_rule["small-messages"]  # 4 calls of 4 KiB (below 20 us x 100 GB/s) merged into one
    assert small.time_s == pytest.approx(200e-6)
    assert small.best_time_s == pytest.approx(max(20e-6, 4 * 4096 / 100e9))
    assert by_rule["straggler"].best_time_s == 0.08
    assert communication_findings(0.1, 0.001, 0.05, rows) == []  # 1% exposed: no finding


def test_chart_spec():
    section = {
        "roof": {"source": "measured", "bus_bytes_per_s": 1e9, "latency_s": 1e-5},
        "collectives": [
            {"kind": "all_reduce", "bus_bytes": 4096.0, "busbw_bytes_per_s": 1e8, "rank": 0, "calls": 1},
            {"kind": "all_gather", "bus_bytes": None, "busbw_bytes_per_s": None, "rank": 1, "calls": 1},
        ],
    }
    spec = collectives_chart(section)
    assert [(p.kind, p.bus_bytes) for p in spec.points] == [("all_reduce", 4096.0)]
    assert spec.ceiling and all(y <= 1e9 * (1 + 1e-12) for _, y in spec.ceiling)
    x, y = spec.ceiling[-1]
    assert y == pytest.approx(x / max(1e-5, x / 1e9))
    assert collectives_chart({"collectives": []}).notes


def test_nccl_kernel_metadata_gives_the_bytes():
    kernel = {"ph": "X", "cat": "kernel", "ts": 0, "dur": 10}
    reduce = {"In msg nelems": 1000, "Out msg nelems": 1000, "dtype": "BFloat16"}
    gather = {"In msg nelems": 500, "Out msg nelems": 1000, "dtype": "Float"}
    trace = [
        {**kernel, "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "args": reduce},
        {**kernel, "name": "ncclDevKernel_AllGather_RING_LL", "args": gather},
        {**kernel, "name": "ncclDevKernel_SendRecv", "args": {}},
    ]
    assert [w.bytes for w in trace_activity(trace).work] == [2000, 4000, None]


def test_unnamed_nccl_kernels_are_matched_in_order():
    assert work_kind("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)") == "nccl"
    calls = [
        CollectiveCall(0, "c10d::_allgather_base_", "all_gather", 4096, "bf16", "forward", "", ()),
        CollectiveCall(1, "c10d::_reduce_scatter_base_", "reduce_scatter", 4096, "bf16", "backward", "", ()),
    ]
    work = [Work("ncclDevKernel_Generic_4", "nccl", 10.0 * i, 10.0 * i + 1 + i % 2) for i in range(4)]  # 2 iterations
    rows, notes = collective_rows(calls, work, 2, 2)
    assert notes == [] and [(r["kind"], r["time_s"]) for r in rows] == [
        ("all_gather", pytest.approx(1e-6)),
        ("reduce_scatter", pytest.approx(2e-6)),
    ]


def test_exposed_bound_is_the_step_hidden_or_on_the_roof():
    rows = [
        {"kind": "all_reduce", "bytes": 1 << 27, "bus_bytes": float(1 << 27), "time_s": 4e-3, "calls": 2,
         "roof_time_s": 1e-3},
    ]  # fmt: skip
    (hidden,) = communication_findings(0.010, 0.004, 0.008, rows)
    assert hidden.rule == "communication-exposed"
    assert hidden.best_time_s == pytest.approx(0.006)  # hidden behind compute: the step less the exposed part
    assert "bucket_cap_mb" in hidden.technique and "gradient_as_bucket_view" in hidden.technique
    assert "25% of the communication roof" in hidden.evidence
    # all of it on the roof (2 x 4 ms) takes longer than the step less the exposed part: the roof bounds it
    slow_roof = [{**rows[0], "roof_time_s": 3.9e-3}]
    (roofed,) = communication_findings(0.010, 0.004, 0.008, slow_roof)
    assert roofed.best_time_s == pytest.approx(7.8e-3)
    fsdp = [{**rows[0], "kind": "all_gather"}, {**rows[0], "kind": "reduce_scatter"}]
    (advice,) = communication_findings(0.010, 0.004, 0.008, fsdp)
    assert "backward_prefetch" in advice.technique and "reshard_after_forward" in advice.technique


def test_waits_are_the_runs_imbalance():
    # rank 1 arrives last; ranks 0 and 2 wait 8 ms a step with no compute beside it
    ranks = {0: (0.02, 0.008, 0.009), 1: (0.02, 0.0005, 0.001), 2: (0.02, 0.008, 0.01)}
    (wait,) = wait_findings(ranks)
    assert wait.rule == "communication-wait" and wait.bottleneck == "imbalance"
    busy = [0.012, 0.0195, 0.012]
    assert wait.best_time_s == pytest.approx(sum(busy) / 3)  # balanced: the mean busy time, not the step less a wait
    assert "rank 1 arrives last" in wait.evidence
    assert wait_findings({0: (0.02, 0.0004, 0.001), 1: (0.02, 0.0, 0.0)}) == []  # 1%: no finding
    assert wait_findings({0: (0.02, 0.01, 0.01)}) == []  # one rank waits for nobody


def _work(cls, start, end):
    return Work(f"ncclDevKernel_{cls}", cls, start, end)


def test_match_ranks_tells_wait_from_transfer():
    # one 170 MB all-reduce: rank 0 launched 3.6 ms before rank 1; both end together
    ranks = {
        0: [_work("all_reduce", 0.0, 4190.0), _work("all_gather", 5000.0, 5050.0)],
        1: [_work("all_gather", 5010.0, 5040.0), _work("all_reduce", 3620.0, 4190.0)],
    }
    matched, notes = match_ranks(ranks)
    assert notes == []
    r0 = {w.cls: w for w in matched[0]}
    r1 = {w.cls: w for w in matched[1]}
    assert r0["all_reduce"].transfer_us == pytest.approx(570.0) and r0["all_reduce"].wait_us == pytest.approx(3620.0)
    assert r1["all_reduce"].wait_us == 0.0 and r1["all_reduce"].transfer_us == pytest.approx(570.0)
    assert r0["all_reduce"].transfer_interval == (3620.0, 4190.0)
    assert r0["all_gather"].wait_us == pytest.approx(20.0) and r1["all_gather"].wait_us == 0.0
    # different counts of a class: left as measured, named
    uneven, notes = match_ranks({0: [_work("all_reduce", 0, 10)], 1: []})
    assert uneven[0][0].wait_us == 0.0 and "different numbers of calls" in notes[0]
    alone, notes = match_ranks({0: [_work("all_reduce", 0, 10)]})
    assert alone[0][0].wait_us == 0.0 and notes == []


def test_rows_and_overlap_use_the_transfer():
    call = CollectiveCall(0, "c10d::allreduce_", "all_reduce", 170_000_000, "float32", "backward", "", ((1,),))
    ranks = {0: [_work("all_reduce", 0.0, 4190.0)], 1: [_work("all_reduce", 3620.0, 4190.0)]}
    matched, _ = match_ranks(ranks)
    roof = CommRoof(328e9, 27e-6, "measured")
    (row0,), _ = collective_rows([call], matched[0], 1, 2, roof=roof, rank=0)
    (row1,), _ = collective_rows([call], matched[1], 1, 2, roof=roof, rank=1)
    for row in (row0, row1):
        assert row["time_s"] == pytest.approx(570e-6)
        assert row["busbw_bytes_per_s"] == pytest.approx(170e6 / 570e-6)
        assert row["efficiency"] == pytest.approx((170e6 / 328e9) / 570e-6)
    assert row0["wait_s"] == pytest.approx(3620e-6) and row0["duration_s"] == pytest.approx(4190e-6)
    assert row1["wait_s"] == 0.0
    compute = [(0.0, 3000.0)]
    over = overlap([w.transfer_interval for w in matched[0]], compute, 1)
    assert over.communication_s == pytest.approx(570e-6) and over.exposed_s == pytest.approx(570e-6)
    waited = waits(matched[0], compute, 1)
    assert waited.wait_s == pytest.approx(3620e-6) and waited.exposed_s == pytest.approx(620e-6)


def test_a_transfer_is_never_under_the_roof():
    # the last rank (0) took 118 us for 170 MB: its peer had sent most of it before it arrived
    ranks = {0: [_work("all_reduce", 3310.0, 3428.0)], 1: [_work("all_reduce", 0.0, 3428.0)]}
    ranks = {r: [Work(w.name, w.cls, w.start_us, w.end_us, bytes=170_112_000) for w in ws] for r, ws in ranks.items()}
    roof = CommRoof(329e9, 10e-6, "measured")
    matched, _ = match_ranks(ranks, roof_floor(roof, 2))
    at_roof = 170_112_000 / 329e9 * 1e6
    for r in (0, 1):
        (w,) = matched[r]
        assert w.transfer_us == pytest.approx(at_roof) and w.early and w.shortest_us == pytest.approx(118.0)
    assert matched[0][0].wait_us == 0.0 and matched[1][0].wait_us == pytest.approx(3428.0 - at_roof)
    assert matched[0][0].transfer_interval == (3310.0, 3428.0)  # never before the call began
    call = CollectiveCall(0, "c10d::allreduce_", "all_reduce", 170_112_000, "bfloat16", "backward", "", ((1,),))
    (row,), _ = collective_rows([call], matched[0], 1, 2, roof=roof, rank=0)
    assert row["early"] and row["busbw_bytes_per_s"] == pytest.approx(329e9) and row["efficiency"] == pytest.approx(1.0)
    assert row["shortest_s"] == pytest.approx(118e-6)
    # no bytes in the trace: the latency is the floor
    tiny = {0: [_work("all_gather", 0.0, 4.0)], 1: [_work("all_gather", 0.0, 30.0)]}
    matched, _ = match_ranks(tiny, roof_floor(roof, 2))
    assert matched[0][0].transfer_us == pytest.approx(10.0) and matched[1][0].wait_us == pytest.approx(20.0)
    # above the roof: as measured, not early
    slow = {
        0: [Work("k", "all_reduce", 0.0, 1000.0, bytes=1 << 20)],
        1: [Work("k", "all_reduce", 0.0, 1500.0, bytes=1 << 20)],
    }
    matched, _ = match_ranks(slow, roof_floor(roof, 2))
    assert matched[0][0].transfer_us == 1000.0 and not matched[0][0].early


def test_rebuilt_buckets_are_timed_from_the_profile():
    # the counting pass saw DDP's first iteration: one 170 MB all-reduce; the profiled steps run 3 buckets each
    call = CollectiveCall(0, "c10d::allreduce_", "all_reduce", 170_000_000, "bfloat16", "backward", "", ((1,),))
    sizes = (25_000_000, 25_000_000, 120_000_000)
    work = [
        Work("ncclDevKernel_AllReduce", "all_reduce", 1000.0 * i + 100 * k, 1000.0 * i + 100 * k + 50, bytes=size)
        for i in range(2)
        for k, size in enumerate(sizes)
    ]
    rows, notes = collective_rows([call], work, 2, 2, rank=0)
    assert sorted((r["bytes"], r["calls"]) for r in rows) == [(25_000_000, 2.0), (120_000_000, 1.0)]
    assert all(r["source"] == "profile" and r["phase"] == "backward" and r["kind"] == "all_reduce" for r in rows)
    assert "rebuilds its buckets" in notes[0]
    # without the trace's bytes: the counted call, timed by the median of the kind's calls
    blind = [Work(w.name, w.cls, w.start_us, w.end_us) for w in work]
    (row,), notes = collective_rows([call], blind, 2, 2, rank=0)
    assert row["bytes"] == 170_000_000 and "median of the kind's calls" in notes[0]
