"""Gains are bounds: a property test over every rule with random inputs (hypothesis). For every finding of every
model rule (the registry's model stage: roofline.findings.rules.RULES), the coverage rule (not-explained,
near-roof) and the analytic rules: the floor (the roofline time of the ops after the technique) is recorded
whenever a best time is; the best time is never below it nor above the time now; and the floor is never below what
no technique that keeps the FLOPs can beat: the ops' FLOPs at their roof (half of it for 2:4 sparsity; at the
device's highest roof for a precision change). And each finding names a rule its producer declared in the registry,
with properties that rule declares. Hand-built ops with injected timings, shipped sheets for the analytic rows: no
torch, no host timing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from diagnose_devices import CPU, GPU, rec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.costs.base import get_model
from roofline.diagnose.place import place, place_op
from roofline.errors import RooflineError
from roofline.findings import registry
from roofline.findings.analytic import AnalyticContext
from roofline.findings.base import Finding
from roofline.findings.context import FindingContext
from roofline.findings.model import ModelContext, ModelFinding
from roofline.findings.registry import Rule
from roofline.findings.rules import RULES, coverage, produce_all
from roofline.ironlaw import place_cost
from roofline.report.records import OpRecord, OpTiming, Timing
from roofline.report.rows import KernelFacts
from roofline.roofs import device_from_sheet
from roofline.specs.loader import load_registry

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLACK = 1e-12  # relative
HALF_FLOPS = {"compute-bound"}  # 2:4 sparsity: half the FLOPs at the same roof
FEWER_FLOPS = {"cheaper-algorithm"}  # a cheaper algorithm: fewer FLOPs, no FLOP floor
HIGHER_ROOF = {"fp32-matmul", "lower-precision"}  # the same FLOPs on a higher roof

# ------------------------------------------------------------------------------------------------ ops


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _size(dtype: str) -> int:
    return 4 if dtype == "fp32" else 2


def vec(i, op, shapes, out, producers, *, dtype="fp32", params=None, flops=None, **kw) -> OpRecord:
    nbytes = sum(_numel(s) for s in [*shapes, *out]) * _size(dtype)
    return rec(i, op, shapes, out, max(_numel(s) for s in shapes) if flops is None else flops, nbytes, dtype=dtype,
               math="vector", input_producers=tuple(producers), input_params=tuple(params or [False] * len(shapes)),
               **kw)  # fmt: skip


def matmul(i, m, n, k, *, dtype, producers=(None, None), params=(False, True)) -> OpRecord:
    return rec(i, "aten::mm", [(m, k), (k, n)], [(m, n)], 2 * m * n * k, (m * k + k * n + m * n) * _size(dtype),
               dtype=dtype, input_producers=tuple(producers), input_params=tuple(params))  # fmt: skip


def chain(i, numel, length, dtype):
    names = ["aten::add", "aten::mul", "aten::gelu", "aten::tanh", "aten::sub"]
    ops, prev = [], None
    for j in range(length):
        ops.append(vec(i + j, names[j % len(names)], [(numel,)], [(numel,)], [prev], dtype=dtype))
        prev = i + j
    return ops


def written_out(i, kind, rows, cols, dtype):
    x, row, w = (rows, cols), (rows, 1), (cols,)
    if kind == "rms_norm":
        return [
            vec(i, "aten::pow", [x], [x], [None], dtype=dtype),
            vec(i + 1, "aten::mean", [x], [row], [i], dtype=dtype),
            vec(i + 2, "aten::add", [row], [row], [i + 1], dtype=dtype),
            vec(i + 3, "aten::rsqrt", [row], [row], [i + 2], dtype=dtype),
            vec(i + 4, "aten::mul", [x, row], [x], [None, i + 3], dtype=dtype),
            vec(i + 5, "aten::mul", [x, w], [x], [i + 4, None], params=[False, True], dtype=dtype),
        ]
    if kind == "softmax":
        return [
            vec(i, "aten::amax", [x], [row], [None], dtype=dtype),
            vec(i + 1, "aten::sub", [x, row], [x], [None, i], dtype=dtype),
            vec(i + 2, "aten::exp", [x], [x], [i + 1], dtype=dtype),
            vec(i + 3, "aten::sum", [x], [row], [i + 2], dtype=dtype),
            vec(i + 4, "aten::div", [x, row], [x], [i + 2, i + 3], dtype=dtype),
        ]
    if kind == "sum_div":  # no fused op: fusion across the reduction
        return [
            vec(i, "aten::sum", [x], [row], [None], dtype=dtype),
            vec(i + 1, "aten::div", [x, row], [x], [None, i], dtype=dtype),
        ]
    return [  # silu
        vec(i, "aten::sigmoid", [x], [x], [None], dtype=dtype),
        vec(i + 1, "aten::mul", [x, x], [x], [None, i], dtype=dtype),
    ]


def recurrence(i, steps, hidden, dtype):
    ops = []
    for t in range(steps):
        j = i + 4 * t
        h_prev = j - 1 if t else None
        ops += [
            rec(j, "aten::addmm", [(hidden,), (16, hidden), (hidden, hidden)], [(16, hidden)], 2 * 16 * hidden**2,
                (hidden + 2 * 16 * hidden + hidden**2) * _size(dtype), dtype=dtype,
                input_producers=(None, None, None), input_params=(True, False, True)),
            matmul(j + 1, 16, hidden, hidden, dtype=dtype, producers=(h_prev, None)),
            vec(j + 2, "aten::add", [(16, hidden), (16, hidden)], [(16, hidden)], [j, j + 1], dtype=dtype),
            vec(j + 3, "aten::tanh", [(16, hidden)], [(16, hidden)], [j + 2], dtype=dtype),
        ]  # fmt: skip
    return ops


def cache_cat(i, steps, length, dtype):
    ops = []
    for t in range(steps):
        prev, grown = (1, 8, length + t, 64), (1, 8, length + t + 1, 64)
        ops.append(vec(i + t, "aten::cat", [prev, (1, 8, 1, 64)], [grown], [i + t - 1 if t else None, None],
                       flops=0, dtype=dtype))  # fmt: skip
    return ops


def conv(i, batch, channels, size, dtype):
    x, w = (batch, channels, size, size), (channels, channels, 3, 3)
    out = (batch, channels, size - 2, size - 2)
    flops = 2 * _numel(out) * channels * 9
    nbytes = (_numel(x) + _numel(w) + _numel(out)) * _size(dtype)
    return [rec(i, "aten::convolution", [x, w], [out], flops, nbytes, dtype=dtype, input_producers=(None, None),
                input_params=(False, True), input_layouts=("contiguous", "contiguous"))]  # fmt: skip


def attention(i, seq, dim, dtype):
    q, kt, s = (8, seq, dim), (8, dim, seq), (8, seq, seq)
    size = _size(dtype)
    return [
        rec(i, "aten::bmm", [q, kt], [s], 2 * 8 * seq * seq * dim, (2 * _numel(q) + _numel(s)) * size, dtype=dtype,
            input_producers=(None, None), input_params=(False, False)),
        vec(i + 1, "aten::_softmax", [s], [s], [i], dtype=dtype),
        rec(i + 2, "aten::bmm", [s, q], [q], 2 * 8 * seq * seq * dim, (_numel(s) + 2 * _numel(q)) * size,
            dtype=dtype, input_producers=(i + 1, None), input_params=(False, False)),
    ]  # fmt: skip


def diag_matmul(i, n, dtype):
    return [
        vec(i, "aten::diag_embed", [(n,)], [(n, n)], [None], flops=0, dtype=dtype),
        matmul(i + 1, n, n, n, dtype=dtype, producers=(i, None), params=(False, False)),
    ]


def strided(i, numel, dtype):
    return [vec(i, "aten::add", [(numel,), (numel,)], [(numel,)], [None, None], dtype=dtype, non_contiguous=True)]


POW2 = st.integers(10, 22).map(lambda e: 1 << e)
DIM = st.integers(1, 4096)
GROUPS = st.sampled_from(["rms_norm", "softmax", "silu", "sum_div"])
ROWS = st.one_of(st.integers(1, 16), DIM)  # few rows: memory-bound GEMV and skinny products


def block(dtypes):
    """One random piece of a model: a function of the first op index returning its records."""
    dtype = st.sampled_from(dtypes)
    return st.one_of(
        st.builds(lambda m, n, k, d, p: lambda i: [matmul(i, m, n, k, dtype=d, params=(False, p))],
                  ROWS, DIM, DIM, dtype, st.booleans()),
        st.builds(lambda n, length, d: lambda i: chain(i, n, length, d), POW2, st.integers(2, 5), dtype),
        st.builds(lambda k, r, c, d: lambda i: written_out(i, k, r, c, d), GROUPS, st.integers(1, 512),
                  st.integers(64, 8192), dtype),
        st.builds(lambda s, h, d: lambda i: recurrence(i, s, h, d), st.integers(8, 12), st.sampled_from([64, 256]),
                  dtype),
        st.builds(lambda s, n, d: lambda i: cache_cat(i, s, n, d), st.integers(2, 6), st.integers(64, 4096), dtype),
        st.builds(lambda b, c, s, d: lambda i: conv(i, b, c, s, d), st.integers(1, 32), st.sampled_from([16, 64, 128]),
                  st.integers(8, 64), dtype),
        st.builds(lambda s, h, d: lambda i: attention(i, s, h, d), st.integers(16, 2048), st.sampled_from([64, 128]),
                  dtype),
        st.builds(lambda n, d: lambda i: diag_matmul(i, n, d), st.integers(64, 4096), dtype),
        st.builds(lambda n, d: lambda i: strided(i, n, d), POW2, dtype),
    )  # fmt: skip


UNDERFILLED = KernelFacts(name="k", time_s=1e-3, launches=1, grid=[16, 1, 1], block=[1024, 1, 1],
                          blocks_per_sm=0.16, occupancy=0.08)  # fmt: skip


@st.composite
def models(draw, device):
    """A random model: random blocks, each op with a random measured efficiency (0.05..1.2), kernel count and (on
    the GPU) sometimes under-filling launch facts; the wall time at or above the summed op time."""
    gpu = device is GPU
    dtypes = ["bf16", "fp16", "fp32"] if gpu else ["fp32"]
    makers = draw(st.lists(block(dtypes), min_size=1, max_size=6))
    records: list[OpRecord] = []
    for make in makers:
        records += make(len(records))
    if draw(st.booleans()):  # the same pieces again (identical groups, layers)
        records += [replace(r, index=r.index + len(records), input_producers=tuple(
            None if p is None else p + len(records) for p in r.input_producers)) for r in records]  # fmt: skip
    kind = "cuda" if gpu else "cpu"
    timings = []
    for r in records:
        probe, _ = place_op(r, OpTiming(r.index, 1.0, 1), device, kind)
        efficiency = draw(st.floats(0.05, 1.2))
        time_s = max(probe.roof_time_s, 1e-9) / efficiency
        kernels = draw(st.integers(0, 3)) if gpu else 0
        facts = (UNDERFILLED.model_copy(update={"time_s": time_s}),) if gpu and draw(st.integers(0, 7)) == 0 else ()
        timings.append(OpTiming(r.index, time_s, kernels, kernel_facts=facts))
    total = sum(t.device_time_s for t in timings)
    wall = total * draw(st.floats(1.0, 3.0))
    idle = (wall - total) if gpu else 0.0
    timing = Timing(device=kind, iterations=10, wall_s=wall, ops=timings,
                    kernel_count=sum(t.kernels for t in timings), gpu_busy_s=total if gpu else 0.0,
                    gpu_idle_s=idle)  # fmt: skip
    placed = place(records, timing, device)
    return ModelContext.of(placed.points, device, timing, placed=placed)


# ------------------------------------------------------------------------------------------------ checks


def check_bound(f: Finding, flop_floor: float) -> None:
    """The finding's best time lies in [floor_s, time_s] and the floor is not below ``flop_floor``."""
    if f.best_time_s is not None:
        assert f.floor_s is not None, f
        assert f.best_time_s >= f.floor_s * (1 - SLACK), f
        assert f.best_time_s <= f.time_s * (1 + SLACK), f
    if f.floor_s is not None:
        assert f.floor_s > 0, f
        if f.rule in FEWER_FLOPS:
            return
        share = 0.5 if f.rule in HALF_FLOPS or (f.rule == "near-roof" and f.bottleneck == "compute") else 1.0
        assert f.floor_s >= share * flop_floor * (1 - 1e-9), (f, flop_floor)


def check_declared(f: Finding, rules: Sequence[Rule]) -> None:
    """A finding names one of its producer's declared rules, and properties that rule declares."""
    declared = next((r for r in rules if r.id == f.rule), None)
    assert declared is not None, (f.rule, [r.id for r in rules])
    assert set(f.properties) <= {p.value for p in declared.properties}, f


def model_findings(ctx: ModelContext) -> list[ModelFinding]:
    """Every rule's findings (unfiltered by share) and the coverage findings on top of them."""
    found: list[ModelFinding] = []
    for rule in RULES:
        made = rule.produce(FindingContext(model=ctx))  # NB: unfiltered by share
        for f in made:
            check_declared(f, rule.rules)
        found += made
    covered = coverage.cover(ctx, found)
    for f in covered:
        check_declared(f, registry.rules(("coverage",)))
    return found + covered


def check_model(ctx: ModelContext) -> None:
    top = max(ctx.device.compute.values())
    for f in model_findings(ctx):
        assert f.ops, f
        pts = [ctx.by_index[i] for i in f.ops]
        at_roof = sum(p.compute_time_s for p in pts)
        check_bound(f, sum(p.flops for p in pts) / top if f.rule in HIGHER_ROOF else at_roof)


@SETTINGS
@given(models(GPU))
def test_every_model_rule_on_a_gpu_is_bounded_by_its_floor(ctx):
    check_model(ctx)


@SETTINGS
@given(models(CPU))
def test_every_model_rule_on_a_cpu_is_bounded_by_its_floor(ctx):
    check_model(ctx)


# ------------------------------------------------------------------------------------------------ analytic

SHEETS = load_registry()
DEVICES = {name: device_from_sheet(SHEETS.get(name)) for name in ("a100-sxm-80gb", "h100-sxm", "l4", "mi300x", "t4")}

WORKLOADS = st.one_of(
    st.fixed_dictionaries({"kind": st.just("gemm"), "m": DIM, "n": DIM, "k": DIM, "batch": st.integers(1, 8),
                           "dtype": st.sampled_from(["fp16", "bf16", "fp32"]), "tf32": st.booleans()}),
    st.fixed_dictionaries({"kind": st.just("elementwise"), "op": st.sampled_from(["add", "relu", "gelu"]),
                           "numel": st.integers(4, 28).map(lambda e: 1 << e),
                           "dtype": st.sampled_from(["fp16", "fp32"])}),
    st.fixed_dictionaries({"kind": st.just("norm"), "op": st.sampled_from(["layernorm", "rmsnorm", "softmax"]),
                           "rows": st.integers(1, 8192), "cols": st.integers(1, 8192)}),
    st.fixed_dictionaries({"kind": st.just("attention"), "heads": st.integers(1, 32), "seq_q": st.integers(1, 4096),
                           "head_dim": st.sampled_from([64, 128]), "impl": st.sampled_from(["fused", "naive"]),
                           "batch": st.integers(1, 4)}),
    st.fixed_dictionaries({"kind": st.just("conv2d"), "in_channels": st.integers(1, 256), "height": st.integers(3, 128),
                           "width": st.integers(3, 128), "out_channels": st.integers(1, 256),
                           "batch": st.integers(1, 32)}),
    st.fixed_dictionaries({"kind": st.just("decode"), "d_model": st.sampled_from([1024, 4096]),
                           "params": st.sampled_from([125_000_000, 1_000_000_000, 7_000_000_000]),
                           "batch": st.integers(1, 64), "context": st.integers(0, 8192),
                           "weight_dtype": st.sampled_from(["fp16", "int8"])}),
)  # fmt: skip


@SETTINGS
@given(WORKLOADS, st.sampled_from(sorted(DEVICES)))
def test_every_analytic_rule_is_bounded_by_its_floor(values, device_name):
    device = DEVICES[device_name]
    kind = values.pop("kind")
    model = get_model(kind)
    try:
        params = model.parse(values)
        cost = model(params)
        placement = place_cost(cost, device)
    except RooflineError:
        return  # a workload the sheet cannot place (no roof for its dtype): bad input, not a finding
    top = max(device.compute.values())
    for f in produce_all(
        FindingContext(analytic=AnalyticContext(kind, params, cost, placement, device)), ("analytic",)
    ):
        check_declared(f, registry.rules(("analytic",)))
        check_bound(f, placement.flops / top if f.rule in HIGHER_ROOF else placement.compute_s)
