"""The instruction roof (roofline.costs.instructions) and the bound class it decides (roofline.findings.bounds):
per-element counts against hand-derived numbers, the issue rate of a spec sheet, the class on injected timings
(the held-out H100 cases: softplus at 63% of DRAM with SM 91% busy, a cumsum with SM 74%), today's path where no
estimate exists, and the fusion bound's instruction floor. No torch, no timing of the host."""

from __future__ import annotations

from dataclasses import replace

import pytest
from diagnose_devices import GPU, rec

from roofline.costs import instructions as ins
from roofline.diagnose.place import place, place_op
from roofline.findings import bounds
from roofline.findings.model import ModelContext
from roofline.findings.rules import fusion
from roofline.report.records import OpTiming, Timing
from roofline.report.rows import KernelFacts
from roofline.roofs import device_from_sheet
from roofline.specs.loader import load_registry

# an H100 SXM's SMs, boost clock and DRAM bandwidth on the test GPU's roofs
H100 = replace(GPU, compute_units=132, clock_hz=1.98e9, bandwidth={"dram": 3.35e12})
ISSUE = 132 * 4 * 32 * 1.98e9  # thread-instructions/s
SFU = 132 * 16 * 1.98e9

ROWS, COLS = 4096, 16384
N = ROWS * COLS


def unary(index: int, op: str, shape=(ROWS, COLS), *, dtype: str = "bf16", flops_per: int = 1):
    n = shape[0] * shape[1]
    return rec(index, op, [shape], [shape], flops_per * n, 2 * n * 2, dtype=dtype, math="vector")


def at(record, time_s: float, device=H100, **timing):
    p, _ = place_op(record, OpTiming(record.index, time_s, 1, **timing), device, "cuda")
    return p


# ------------------------------------------------------------------------------------------------ the counts


def test_the_issue_rate_of_the_h100_sheet():
    device = device_from_sheet(load_registry().get("h100-sxm"))
    assert (device.compute_units, device.clock_hz) == (132, 1.98e9)
    rates = ins.issue_rates(device.compute_units, device.clock_hz, device.vendor)
    assert rates is not None
    assert rates.issue_per_s == ISSUE == 33_454_080_000_000
    assert rates.sfu_per_s == SFU == 4_181_760_000_000
    # no clock, no SMs, or not NVIDIA: no estimate
    assert ins.issue_rates(132, 0.0) is None and ins.issue_rates(0, 1.98e9) is None
    assert ins.issue_rates(304, 2.1e9, "amd") is None


@pytest.mark.parametrize(
    ("op", "dtype", "inputs", "output", "total", "sfu"),
    [
        # softplus, bf16, contiguous: 3 (mul, compare, select) + exp 8 + log1p 22 + div 10 = 43 arithmetic;
        # 2 operands (in, out) / 8 bf16 per 16-byte vector = 0.25; 2 conversions; loop 4 / 8 = 0.5
        ("aten::softplus", "bf16", [[ROWS, COLS]], [ROWS, COLS], 45.75, 2),
        # mish: exp 8 + log1p 22 + tanh 14 + mul 1 = 45; SFU: ex2 + ex2 and rcp of the tanh
        ("aten::mish", "bf16", [[ROWS, COLS]], [ROWS, COLS], 47.75, 3),
        # gelu (erf): 4 + erf 16 = 20
        ("aten::gelu", "bf16", [[ROWS, COLS]], [ROWS, COLS], 22.75, 1),
        # silu: exp 8 + add 1 + div 10 = 19
        ("aten::silu_", "bf16", [[ROWS, COLS]], [ROWS, COLS], 21.75, 2),
        # add, bf16: 1 FFMA + 3 operands / 8 + 3 conversions + 0.5
        ("aten::add.Tensor", "bf16", [[ROWS, COLS], [ROWS, COLS]], [ROWS, COLS], 4.875, 0),
        # add, fp32: 1 + 3 / 4 + 0 conversions + 4 / 4
        ("aten::add.Tensor", "fp32", [[ROWS, COLS], [ROWS, COLS]], [ROWS, COLS], 2.75, 0),
        # a scalar operand (0-dim) is an argument: 2 operands
        ("aten::mul.Tensor", "fp32", [[ROWS, COLS], []], [ROWS, COLS], 2.5, 0),
        # broadcast div (64, 4096) / (64, 1): the generic kernel: div 10 + 3 scalar loads/stores + 3 conversions
        # + 25 + 2 dims x (9 + 2 operands + 1)
        ("aten::div.Tensor", "bf16", [[64, 4096], [64, 1]], [64, 4096], 65, 1),
        # x / 2.0: the divisor a 0-dim scalar, a multiply by its reciprocal: 1 + 2 / 8 + 2 + 0.5
        ("aten::div.Tensor", "bf16", [[ROWS, COLS], []], [ROWS, COLS], 3.75, 0),
        # cumsum over rows of 4096, 128 rows: 2**((9 + 12 - 7) // 2) = 128 threads along the row, chunk 256:
        # 2 x 8 steps x 9 = 144 + carry 4 + add 1 + load and store 2 + 2 conversions
        ("aten::cumsum", "bf16", [[128, 4096]], [128, 4096], 153, 0),
        ("aten::cumprod", "fp32", [[128, 4096]], [128, 4096], 151, 0),
        # flip: load, store, 25 + 2 dims x (9 + 2)
        ("aten::flip", "bf16", [[128, 4096]], [128, 4096], 49, 0),
    ],
)
def test_instructions_per_element(op, dtype, inputs, output, total, sfu):
    estimate = ins.estimate(op, dtype, inputs, output)
    assert estimate is not None
    assert (estimate.total, estimate.sfu) == (total, sfu)


def test_what_has_no_estimate_and_the_scan_block():
    assert ins.estimate("aten::native_layer_norm", "bf16", [[16, 4096]], [16, 4096]) is None
    assert ins.estimate("aten::softplus", "int64", [[16]], [16]) is None  # a dtype the tables do not know
    assert ins.has_estimate("aten::mul_.Tensor") and not ins.has_estimate("aten::mm")
    # torch's innermost scan: log2(threads along the row) = (9 + ceil(log2 row) - ceil(log2 rows)) // 2 in [4, 9]
    assert ins.scan_threads_x((128, 4096)) == 128
    assert ins.scan_threads_x((1, 65536)) == 512  # one long row: capped at 2**9
    assert ins.scan_threads_x((65536, 8)) == 16  # many short rows: at least 2**4


def test_instruction_time_takes_the_slower_of_issue_and_sfu():
    rates = ins.issue_rates(132, 1.98e9)
    assert rates is not None
    softplus = ins.estimate("aten::softplus", "bf16", [[N]], [N])
    assert softplus is not None
    assert ins.instruction_time(N, softplus, rates) == pytest.approx(N * 45.75 / ISSUE)  # issue: 45.75 > 2 x 8
    # rsqrt in fp32: 4 + 2 / 4 + 4 / 4 = 5.5 issue slots, but its MUFU.RSQ runs at 16 per SM per clock: 1 x 8 > 5.5
    rsqrt = ins.estimate("aten::rsqrt", "fp32", [[N]], [N])
    assert rsqrt is not None and rsqrt.total == 5.5
    assert ins.instruction_time(N, rsqrt, rates) == pytest.approx(N / SFU)
    assert softplus.arithmetic().total == 43 and softplus.arithmetic().sfu == 2


# ------------------------------------------------------------------------------------------------ the class


def test_softplus_at_63_percent_of_dram_is_instruction_issue():
    # the held-out H100 case: softplus at 63% of DRAM, Nsight Compute reading SM 91%
    record = unary(0, "aten::softplus")
    dram_s = 2 * N * 2 / 3.35e12
    p = at(record, dram_s / 0.63)
    issue_s = N * 45.75 / ISSUE
    assert issue_s > dram_s  # the estimate: more time to issue than to move the bytes
    assert p.limiter == "compute", p.limiter_evidence
    assert p.limiter_evidence.startswith("instruction issue: ~45.8 instructions/element")
    assert f"achieved {100 * issue_s / p.time_s:.0f}% of the SM issue rate" in p.limiter_evidence
    assert "(132 SMs x 4 schedulers x 32 lanes x 1.98 GHz)" in p.limiter_evidence
    assert "63% of DRAM" in p.limiter_evidence
    # the same op on a device without a clock: today's path (63% of DRAM: memory)
    assert at(record, dram_s / 0.63, replace(H100, clock_hz=0.0)).limiter == "memory"
    # far slower than both roofs: neither near, no kernel facts: latency
    assert at(record, 10 * dram_s).limiter == "latency"


def test_a_plain_add_at_80_percent_of_dram_is_memory():
    record = rec(1, "aten::add", [(ROWS, COLS), (ROWS, COLS)], [(ROWS, COLS)], N, 3 * N * 2, math="vector")
    p = at(record, 3 * N * 2 / 3.35e12 / 0.8)
    assert p.limiter == "memory" and "80% of DRAM" in p.limiter_evidence


def test_a_cumsum_with_the_sm_busy_is_instruction_issue():
    # a cumsum of 128 rows of 131072 (bf16): 512 threads along a row, chunks of 1024: 2 x 10 steps x 9 + carry 4 =
    # 184 for the scan, ~189 instructions/element: far more time to issue than its bytes take at the DRAM roof
    record = unary(2, "aten::cumsum", (128, 131072))
    n = 128 * 131072
    issue_s = n * 189 / ISSUE
    p = at(record, issue_s / 0.74)  # the SM 74% of the held-out run
    assert p.memory_time_s / p.time_s == pytest.approx(0.74 * (4 / 3.35e12) / (189 / ISSUE))
    assert p.limiter == "compute" and "scan 184" in p.limiter_evidence, p.limiter_evidence
    # the advice corpus's cumsum on an H100 (131072 rows of 4096, 16 threads along a row: ~99 an element, ncu read
    # 98.2): 2.00 ms measured, ncu SM 79%, DRAM 32%: instruction issue, not latency
    rows = unary(5, "aten::cumsum", (131072, 4096))
    measured = at(rows, 1.997e-3)
    assert measured.limiter == "compute" and "instruction issue" in measured.limiter_evidence
    # without the estimate (a device without a clock) the same op reads 'latency' (16% of DRAM, no kernel facts)
    assert at(record, issue_s / 0.74, replace(H100, clock_hz=0.0)).limiter == "latency"


def test_an_op_without_estimate_keeps_the_kernel_name_fallback():
    # a layer norm has no estimate: the generic element-wise kernel's name still decides, as before
    n = 16 * 4_194_304
    norm = rec(3, "aten::native_layer_norm", [(16, 4_194_304), (4_194_304,), (4_194_304,)], [(16, 4_194_304)],
               8 * n, 2 * n * 4, dtype="fp32", math="vector")  # fmt: skip
    generic = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<Div>>(int)"
    facts = KernelFacts(name=generic, time_s=24e-3, launches=1, grid=[262144, 1, 1], block=[128, 1, 1],
                        occupancy=1.0, active_blocks_per_sm=16)  # fmt: skip
    p = at(norm, 24e-3, kernel_facts=(facts,))
    assert bounds.instruction_roof(p, H100) is None
    assert p.limiter == "compute" and "instruction-bound" in p.limiter_evidence
    # an op with an estimate far from its issue rate is not read from its kernel's name
    add = rec(4, "aten::add", [(ROWS, COLS), (ROWS, COLS)], [(ROWS, COLS)], N, 3 * N * 2, math="vector")
    assert at(add, 24e-3, kernel_facts=(facts,)).limiter == "latency"


# ------------------------------------------------------------------------------------------------ the floor


def test_a_fused_chain_of_mish_is_bounded_by_its_instructions():
    # three mish in a row, each ~48 instructions/element; fused, the bytes fall to one read and one write, but the
    # arithmetic (3 x 45 per element) does not
    n = 2**24
    shape = (n,)
    ops = [unary(i, "aten::mish", (1, n)) for i in range(3)]
    ops = [replace(r, input_shapes=(shape,), output_shapes=(shape,)) for r in ops]

    def chain(device):
        timing = Timing(device="cuda", iterations=10, wall_s=3e-3, ops=[OpTiming(r.index, 1e-3, 1) for r in ops],
                        kernel_count=3)  # fmt: skip
        placed = place(ops, timing, device)
        ctx = ModelContext.of(placed.points, device, timing, placed=placed)
        (finding,) = fusion.elementwise_chain(ctx)
        return finding, placed.points

    with_issue, points = chain(H100)
    bytes_only, _ = chain(replace(H100, clock_hz=0.0))
    arithmetic_s = 3 * n * 45 / ISSUE
    assert bounds.instruction_floor_s(points, H100) == pytest.approx(arithmetic_s)
    assert with_issue.floor_s == pytest.approx(arithmetic_s + H100.launch_floor_s)
    assert bytes_only.floor_s == pytest.approx(2 * n * 2 / 3.35e12 + H100.launch_floor_s)  # read once, write once
    assert with_issue.floor_s > bytes_only.floor_s


# ------------------------------------------------------------------------------------------------ --counters


def _counted(p, sm: float | None, memory: float | None):
    from roofline.findings.counters import OpCounters

    return OpCounters(index=p.index, op=p.op, module=p.module, kernels=["k"], launches=1.0,
                      compulsory_bytes=p.bytes, dram_read_bytes=0.0, dram_write_bytes=0.0, dram_bytes=0.0,
                      ratio=None, sm_pct=sm, memory_pct=memory, roofline_bound=p.roofline_bound,
                      limiter=p.limiter)  # fmt: skip


def test_the_measured_sm_throughput_decides_with_counters():
    from roofline.findings.counters import measured_limiter

    record = unary(0, "aten::softplus")
    dram_s = 2 * N * 2 / 3.35e12
    # without a clock the softplus of the held-out run reads memory at 63% of DRAM; ncu read SM 91%, memory 63%
    memory = at(record, dram_s / 0.63, replace(H100, clock_hz=0.0))
    assert memory.limiter == "memory"
    limiter, evidence = measured_limiter(memory, _counted(memory, 91.0, 63.0))
    assert limiter == "compute" and evidence.startswith("instruction issue, measured: Nsight Compute: SM 91%")
    assert "the estimate said memory" in evidence
    # the SM below 60%, or not the busier unit: the counters leave it
    assert measured_limiter(memory, _counted(memory, 55.0, 40.0)) is None
    assert measured_limiter(memory, _counted(memory, 70.0, 85.0)) is None
    assert measured_limiter(memory, _counted(memory, None, 63.0)) is None
    # the estimate said instruction issue, the counters say the memory side is the busier: memory, or latency
    issue = at(record, dram_s / 0.63)
    assert issue.limiter == "compute"
    assert measured_limiter(issue, _counted(issue, 50.0, 70.0))[0] == "memory"  # type: ignore[index]
    assert measured_limiter(issue, _counted(issue, 30.0, 40.0))[0] == "latency"  # type: ignore[index]
    assert measured_limiter(issue, _counted(issue, 91.0, 63.0)) is None  # they agree


def test_counters_relabel_the_placed_ops_and_their_aggregates():
    from roofline.diagnose.pipeline import with_counters
    from roofline.findings.counters import Counters

    ops = [unary(0, "aten::softplus"), unary(1, "aten::native_layer_norm")]
    dram_s = 2 * N * 2 / 3.35e12
    timing = Timing(device="cuda", iterations=1, wall_s=1.0,
                    ops=[OpTiming(0, dram_s / 0.63, 1), OpTiming(1, dram_s / 0.3, 1)])  # fmt: skip
    placed = place(ops, timing, replace(H100, clock_hz=0.0))
    assert [p.limiter for p in placed.points] == ["memory", "latency"]
    counted = [_counted(placed.points[0], 91.0, 63.0), _counted(placed.points[1], 20.0, 30.0)]
    counters = Counters(source="test", launches=2, matched_launches=2, unmatched_kernels=[], unmatched_dram_bytes=0,
                        ops=counted, agreement=None)  # fmt: skip
    after = with_counters(placed, counters)
    assert [p.limiter for p in after.points] == ["compute", "latency"]
    assert after.points[1] is placed.points[1]  # untouched
    assert with_counters(after, counters) is after  # nothing more to overrule
    softplus = next(a for a in after.aggregates.op_types if a.key == "aten::softplus")
    assert softplus.limiter == "compute"
    assert next(a for a in placed.aggregates.op_types if a.key == "aten::softplus").limiter == "memory"


def test_pooling_instructions_from_its_window():
    # taps per window from the counted FLOPs: max counts a compare per tap, avg an add per tap and a divide per output
    assert ins.pool_window("aten::max_pool2d_with_indices", 900, 100) == 9.0
    assert ins.pool_window("aten::avg_pool2d", 500, 100) == 4.0
    assert ins.pool_window("aten::add", 500, 100) is None
    # max, bf16, 9 taps: arithmetic 9 x 4 + 2 = 38, memory 9 + 1, conversions 9 + 1, index 9 x 24 (a tap's) + 172
    # (an output's) = 388: 446, no SFU
    e = ins.estimate("aten::max_pool2d_with_indices", "bf16", [[8, 16, 64, 64]], [8, 16, 32, 32], window=9.0)
    assert (e.total, e.sfu) == (446.0, 0.0)
    assert dict(e.parts) == {"arithmetic": 38.0, "memory": 10.0, "conversions": 10.0, "index": 388.0}
    # avg, fp32, 4 taps: arithmetic 4 + the divide (10, 1 SFU), memory 5, no conversion, index 96 + 172 = 268: 287
    a = ins.estimate("aten::avg_pool2d", "fp32", [[8, 16, 64, 64]], [8, 16, 32, 32], window=4.0)
    assert (a.total, a.sfu) == (287.0, 1.0)
    assert ins.estimate("aten::avg_pool2d", "fp32", [[8, 16, 64, 64]], [8, 16, 32, 32]) is None  # no window
    assert ins.has_estimate("aten::max_pool2d_with_indices") and not ins.has_estimate("aten::adaptive_avg_pool2d")
