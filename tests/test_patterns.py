"""Dataflow patterns and the structural rules built on them: hand-built ops with their producers (no torch), the
counting pass recording producers and parameters for a tiny model, and the example models of each pattern
diagnosed end to end on a modelled CPU (never the host's speed)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from diagnose_devices import CPU, GPU, rec
from test_diagnose_cli import FAKE_CPU, FAST, MODELS, modelled_timing
from test_diagnose_rules import ctx_of, elementwise, mm, only

from roofline.findings import patterns, structure
from roofline.findings.rules import diagnose, fusion, launch, layout, matmul, rewrites

N = 2**20  # elements of the activations below
ROWS, HID = 256, 4096


def vec(index, op, shapes, out, producers, *, params=None, flops=None, dtype="fp32", **kw):
    """An element-wise/reduction op with its producers; bytes = inputs read + output written (fp32)."""
    size = 4 if dtype == "fp32" else 2
    nbytes = sum(_numel(s) for s in [*shapes, *out]) * size
    return rec(
        index,
        op,
        shapes,
        out,
        flops if flops is not None else max(_numel(s) for s in shapes),
        nbytes,
        dtype=dtype,
        math="vector",
        input_producers=tuple(producers),
        input_params=tuple(params or [False] * len(shapes)),
        **kw,
    )


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


# ------------------------------------------------------------------------------------------- recurrences


def rnn_steps(steps, *, time_s, linked=True, known=True):
    """addmm (input projection), mm (recurrent), add, tanh per step; mm reads the previous step's tanh."""
    ops = []
    for t in range(steps):
        i = 4 * t
        h_prev = (i - 1 if t else None) if linked else None
        kw = lambda p: {"input_producers": p, "input_params": (False,) * len(p)} if known else {}  # noqa: E731
        ops += [
            (rec(i, "aten::addmm", [(128,), (16, 64), (64, 128)], [(16, 128)], 262144, 50_000, dtype="fp32",
                 **kw((None, None, None))), time_s, 0),
            (mm(i + 1, 16, 128, 128, dtype="fp32", **kw((h_prev, None))), time_s, 0),
            (elementwise(i + 2, 16 * 128, **kw((i, i + 1))), time_s, 0),
            (elementwise(i + 3, 16 * 128, op="aten::tanh", binary=False, **kw((i + 2,))), time_s, 0),
        ]  # fmt: skip
    return ops


def test_recurrence_found_by_structure_whatever_the_op_durations():
    big = rnn_steps(12, time_s=1e-3)  # far above SMALL_OP_FACTOR x the floor: the old rule missed it
    ctx = ctx_of(big, CPU)
    (loop,) = ctx.loops
    assert loop.carried is not None and loop.carried.recurrent and loop.carried.links == 11
    f = only(launch.sequential_loop(ctx))
    assert f.properties == ["associativity"] and "parallel scan" in f.technique
    assert "a recurrence: in 11 of 11 steps" in f.evidence
    roof = sum(p.roof_time_s for p in ctx.points)
    assert f.best_time_s >= roof  # the same FLOPs and bytes: never below the roofline time


def test_recurrence_falls_back_to_the_small_op_rule_without_producers():
    assert ctx_of(rnn_steps(12, time_s=1e-3, known=False), CPU).loops == ()
    (loop,) = ctx_of(rnn_steps(12, time_s=10e-6, known=False), CPU).loops
    assert loop.carried is not None and not loop.carried.known


def test_independent_repeated_steps_are_not_a_recurrence():
    ctx = ctx_of(rnn_steps(12, time_s=10e-6, linked=False), CPU)
    assert ctx.loops == () and launch.sequential_loop(ctx) == []


# ------------------------------------------------------------------------------------------- fusion


def rmsnorm(start=0, *, x_from=None):
    x, row, w = (ROWS, HID), (ROWS, 1), (HID,)
    i = start
    return [
        vec(i, "aten::pow", [x], [x], [x_from]),
        vec(i + 1, "aten::mean", [x], [row], [i]),
        vec(i + 2, "aten::add", [row], [row], [i + 1]),
        vec(i + 3, "aten::rsqrt", [row], [row], [i + 2]),
        vec(i + 4, "aten::mul", [x, row], [x], [x_from, i + 3]),
        vec(i + 5, "aten::mul", [x, w], [x], [i + 4, None], params=[False, True]),
    ]


def test_fused_op_names_the_written_out_ops():
    assert patterns.fused_op(["pow", "mean", "add", "rsqrt", "mul"]) == "rms_norm"
    assert patterns.fused_op(["mean", "sub", "pow", "mean", "add", "sqrt", "div", "mul"]) == "layer_norm"
    assert patterns.fused_op(["amax", "sub", "exp", "sum", "div"]) == "softmax"
    assert patterns.fused_op(["sigmoid", "mul"]) == "silu"
    assert patterns.fused_op(["div", "erf", "add", "mul"]) == "gelu"
    assert patterns.fused_op(["sum", "div"]) is None


def test_rmsnorm_written_out_is_one_group_and_the_bound_is_the_fused_bytes():
    ops = [(r, 200e-6, 1) for r in rmsnorm()]
    ctx = ctx_of(ops, GPU)
    (group,) = ctx.fusions
    assert group.kind == "rms_norm" and group.indices == (0, 1, 2, 3, 4, 5)
    x_bytes, w_bytes = ROWS * HID * 4, HID * 4
    assert group.fused_bytes == x_bytes + w_bytes + x_bytes  # x and w read once, the result written once
    assert group.reductions == 1 and group.broadcasts == 2
    f = only(fusion.written_out_fusion(ctx))
    assert f.rule == "fused-op" and f.properties == ["locality"] and "F.rms_norm" in f.technique
    floor = group.fused_bytes / GPU.dram_bandwidth + GPU.launch_floor_s
    assert floor <= f.best_time_s < f.time_s
    assert fusion.elementwise_chain(ctx) == []  # no second finding for the same ops
    assert f in diagnose(ctx)


def test_silu_written_out_and_a_generic_reduction_chain():
    silu = [
        vec(0, "aten::sigmoid", [(N,)], [(N,)], [None]),
        vec(1, "aten::mul", [(N,), (N,)], [(N,)], [None, 0]),
    ]
    f = only(fusion.written_out_fusion(ctx_of([(r, 500e-6, 1) for r in silu], GPU)))
    assert f.rule == "fused-op" and "F.silu" in f.technique
    norm = [
        vec(0, "aten::sum", [(ROWS, HID)], [(ROWS, 1)], [None]),
        vec(1, "aten::div", [(ROWS, HID), (ROWS, 1)], [(ROWS, HID)], [None, 0]),
    ]
    f = only(fusion.written_out_fusion(ctx_of([(r, 500e-6, 1) for r in norm], GPU)))
    assert f.rule == "fusion-across-reduction" and "torch.compile" in f.technique


def test_a_consumer_reading_another_activation_stays_outside_the_group():
    ops = [*rmsnorm(), vec(6, "aten::mul", [(ROWS, HID), (ROWS, HID)], [(ROWS, HID)], [5, None])]
    ops[-1] = replace(ops[-1], input_producers=(5, 99))  # 99: a matmul elsewhere (not a fusible op)
    (group,) = ctx_of([(r, 200e-6, 1) for r in ops], GPU).fusions
    assert 6 not in group.indices


def test_no_fusion_without_producers():
    ops = [(replace(r, input_producers=(), input_params=()), 200e-6, 1) for r in rmsnorm()]
    ctx = ctx_of(ops, GPU)
    assert ctx.fusions == () and fusion.written_out_fusion(ctx) == []


# ------------------------------------------------------------------------------------------- KV cache


def test_kv_cache_grown_by_cat_bound_is_the_new_slices():
    cache, new = (1, 8, 1024, 64), (1, 8, 1, 64)
    ops = []
    for t in range(4):
        grown = (1, 8, 1024 + t + 1, 64)
        prev = (1, 8, 1024 + t, 64)
        producer = None if t == 0 else t - 1
        ops.append(vec(t, "aten::cat", [prev if t else cache, new], [grown], [producer, 50], flops=0))
    ctx = ctx_of([(r, 400e-6, 1) for r in ops], GPU)
    found = structure.kv_cache_growth(ctx.points)
    assert [g.from_previous for g in found] == [False, True, True, True]
    assert all(g.axis == 2 and g.new_bytes == 8 * 64 * 4 for g in found)  # one token of 8 heads x 64
    f = only(rewrites.kv_cache_cat(ctx))
    assert f.rule == "kv-cache-cat" and f.properties == ["redundancy"] and "static" in f.technique
    after = sum(2 * g.new_bytes / GPU.dram_bandwidth + GPU.launch_floor_s for g in found)
    assert f.best_time_s >= after and f.best_time_s < f.time_s


def test_a_cat_of_two_activations_or_of_a_parameter_is_no_cache():
    a = vec(0, "aten::cat", [(1024, 64), (1, 64)], [(1025, 64)], [None, None], params=[True, False], flops=0)
    b = vec(1, "aten::cat", [(512, 64), (512, 64)], [(1024, 64)], [7, 8], flops=0)
    assert structure.kv_cache_growth(ctx_of([(a, 1e-4, 1), (b, 1e-4, 1)], GPU).points) == []


# ------------------------------------------------------------------------------------------- matmul operands


def gemv(index, *, weight_is_param):
    return mm(index, 1, 8192, 8192, input_producers=(None, None), input_params=(False, weight_is_param))


def test_gemv_advice_only_when_the_large_operand_is_a_parameter():
    ctx = ctx_of([(gemv(0, weight_is_param=True), 200e-6, 1)], GPU)
    assert only(matmul.memory_bound_gemv(ctx)).rule == "memory-bound-gemv"
    assert matmul.activation_matmul(ctx) is None
    ctx = ctx_of([(gemv(0, weight_is_param=False), 200e-6, 1)], GPU)
    assert matmul.memory_bound_gemv(ctx) is None
    f = only(matmul.activation_matmul(ctx))
    assert f.rule == "activation-matmul" and "batch independent products" in f.technique
    assert "neither operand is a parameter" in f.evidence
    assert f.best_time_s >= ctx.points[0].roof_time_s
    # unknown (older reports): today's rule
    old = mm(0, 1, 8192, 8192)
    assert only(matmul.memory_bound_gemv(ctx_of([(old, 200e-6, 1)], GPU))).rule == "memory-bound-gemv"


def test_diag_matmul_is_a_cheaper_algorithm():
    n = 4096
    diag = vec(0, "aten::diag_embed", [(n,)], [(n, n)], [None], flops=0)
    prod = mm(1, n, n, n, dtype="fp32", input_producers=(0, None), input_params=(False, False))
    ctx = ctx_of([(diag, 50e-6, 1), (prod, 5e-3, 1)], GPU)
    f = only(matmul.cheaper_algorithm(ctx))
    assert f.rule == "cheaper-algorithm" and f.properties == ["sparsity"] and "a[:, None] * b" in f.technique
    after = (n + 2 * n * n) * 4 / GPU.dram_bandwidth + GPU.launch_floor_s
    assert f.best_time_s == f.floor_s == pytest.approx(after)
    assert f.best_time_s >= after


# ------------------------------------------------------------------------------------------- layout


def conv(index, layout, *, dtype="bf16", time_s=2e-3):
    x, w, out = (32, 128, 56, 56), (128, 128, 3, 3), (32, 128, 56, 56)
    flops = 2 * 32 * 128 * 56 * 56 * 128 * 9
    size = 2 if dtype == "bf16" else 4
    nbytes = (2 * _numel(x) + _numel(w)) * size
    r = rec(index, "aten::convolution", [x, w], [out], flops, nbytes, dtype=dtype, input_producers=(None, None),
            input_params=(False, True), input_layouts=(layout, "contiguous"))  # fmt: skip
    return (r, time_s, 3)


def test_nchw_bf16_convolutions_want_channels_last():
    # a short model (0.2 ms): the layout alone (the compiled callable's own host time would not hide)
    short = ctx_of([conv(0, "contiguous", time_s=2e-4)], GPU)
    f = only(layout.conv_layout(short))
    assert f.rule == "conv-layout" and f.properties == ["locality"] and "channels_last" in f.technique
    assert "torch.compile" not in f.technique
    p = short.points[0]
    assert f.best_time_s == pytest.approx(p.roof_time_s + p.launch_floor_s)
    # an iteration of at least COMPILE_WORTH_S (2 ms): the layout with torch.compile, the same bound
    ctx = ctx_of([conv(0, "contiguous")], GPU)
    assert ctx.total_time_s >= layout.COMPILE_WORTH_S
    g = only(layout.conv_layout(ctx))
    assert g.rule == "conv-layout-compile" and "channels_last together with torch.compile" in g.technique
    q = ctx.points[0]
    assert g.best_time_s == pytest.approx(q.roof_time_s + q.launch_floor_s)
    from roofline.diagnose.verify import technique_for

    assert technique_for("conv-layout-compile", "cuda") == ("channels_last+compile", "")
    assert technique_for("conv-layout", "cuda") == ("channels_last", "")
    assert layout.conv_layout(ctx_of([conv(0, "channels_last")], GPU)) == []
    assert layout.conv_layout(ctx_of([conv(0, "contiguous", dtype="fp32")], GPU)) == []  # cuDNN: NCHW is fine
    unknown = (replace(conv(0, "contiguous")[0], input_layouts=()), 2e-3, 3)  # older reports: no layouts
    assert layout.conv_layout(ctx_of([unknown], GPU)) == []


def test_permute_copies_around_a_convolution_are_layout_conversions():
    x = (32, 128, 56, 56)
    copy = vec(0, "aten::clone", [x], [x], [None], flops=0, input_layouts=("strided",), dtype="bf16")
    r, t, k = conv(1, "contiguous", time_s=1e-4)  # near its roof: only the copy gives it away
    r = replace(r, input_producers=(0, None))
    ctx = ctx_of([(copy, 1e-3, 1), (r, t, k)], GPU)
    f = only(layout.conv_layout(ctx))
    assert f.ops == [0, 1] and "permute + contiguous copy" in f.evidence


def _norm_after_conv(op, module_type, *, relu=False):
    x = (32, 128, 56, 56)
    r, t, k = conv(0, "contiguous")
    ops = [(r, t, k)]
    source = 0
    if relu:
        act = vec(1, "aten::relu", [x], [x], [0], flops=_numel(x), dtype="bf16")
        ops.append((act, 2e-4, 1))
        source = 1
    norm = vec(2, op, [x, (128,), (128,)], [x], [source, None, None], flops=8 * _numel(x), dtype="bf16",
               module="norm", module_type=module_type)  # fmt: skip
    ops.append((norm, 1e-3, 1))
    return ops


@pytest.mark.parametrize(
    "op, module_type, relu",
    [("aten::native_group_norm", "GroupNorm", False), ("aten::native_batch_norm", "InstanceNorm2d", True)],
)
def test_a_norm_slow_in_nhwc_after_the_convolution_asks_for_compile_with_the_layout(op, module_type, relu):
    ctx = ctx_of(_norm_after_conv(op, module_type, relu=relu), GPU)
    (f,) = layout.conv_layout(ctx)
    assert f.rule == "conv-layout-norm" and "torch.compile" in f.technique and "slows the norm" in f.technique
    assert "runs slower in NHWC" in f.evidence
    conv_p, norm_p = ctx.by_index[0], ctx.by_index[2]
    assert 2 in f.ops and 0 in f.ops
    # the convolution at its roof with its launch, the norm fused at its roofline time
    assert f.best_time_s == pytest.approx(conv_p.roof_time_s + conv_p.launch_floor_s + norm_p.roof_time_s)
    from roofline.diagnose.verify import technique_for

    assert technique_for("conv-layout-norm", "cuda") == ("channels_last+compile", "")
    assert technique_for("conv-layout-norm", "cuda", compiled=True) == ("channels_last+compile", "")


def test_a_batch_norm_after_the_convolution_keeps_plain_channels_last():
    # not conv-layout-norm (a batch norm is fast in NHWC); the 2 ms iteration takes compile with the layout
    ctx = ctx_of(_norm_after_conv("aten::native_batch_norm", "BatchNorm2d"), GPU)
    (f,) = layout.conv_layout(ctx)
    assert f.rule == "conv-layout-compile" and "slower in NHWC" not in f.evidence


# ------------------------------------------------------------------------------------------- counting


def test_count_records_producers_and_parameters():
    torch = pytest.importorskip("torch")
    from roofline.diagnose.count import count_ops

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = torch.nn.Linear(8, 8)
            self.rec = torch.nn.Linear(8, 8, bias=False)

        def forward(self, x):
            h = x.new_zeros(2, 8)
            for t in range(3):
                h = torch.tanh(self.inp(x[:, t]) + self.rec(h))
            return h

    records = count_ops(Tiny(), (torch.randn(2, 3, 8),))
    by_op = {}
    for r in records:
        by_op.setdefault(r.op, []).append(r)
    mms, adds, tanhs = by_op["aten::mm"], by_op["aten::add"], by_op["aten::tanh"]
    addmm = by_op["aten::addmm"][0]
    assert addmm.input_params == (True, False, True)  # bias, x[:, t], weight.t() (a view of the weight)
    assert addmm.input_producers == (None, None, None)  # parameters and a slice of the model input
    zeros = next(r for r in records if "zeros" in r.op)
    assert mms[0].input_producers == (zeros.index, None)
    for step in (1, 2):
        assert mms[step].input_producers == (tanhs[step - 1].index, None)  # h from the step before
        assert mms[step].input_params == (False, True)
    assert adds[0].input_producers == (by_op["aten::addmm"][0].index, mms[0].index)
    assert all(len(r.input_layouts) == len(r.input_shapes) for r in records)


# ------------------------------------------------------------------------------------------- example models


def fp32_timing(model, inputs, kwargs, records, **kw):
    """The modelled CPU's op times, bf16 ops timed as fp32 (the test CPU has no bf16 roof)."""
    return modelled_timing(model, inputs, kwargs, [replace(r, dtype="fp32") for r in records], **kw)


@pytest.fixture
def modelled(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    monkeypatch.setattr("roofline.diagnose.profile.time_model", fp32_timing)


@pytest.mark.parametrize(
    ("model", "rule", "top"),
    [
        ("rmsnorm_written_out", "fused-op", True),
        ("silu_written_out", "fused-op", True),
        ("softmax_written_out", "fused-op", True),
        ("kv_cache_cat", "kv-cache-cat", True),
        ("mamba_scan_naive", "sequential-loop", True),
        ("conv_nchw_bf16", "conv-layout", False),
        ("diag_matmul", "cheaper-algorithm", True),
    ],
)
def test_example_models_have_their_expected_finding(cli, tmp_path, modelled, model, rule, top):
    result = cli("diagnose", str(MODELS / f"{model}.py"), *FAST, "--json", "-o", str(tmp_path / "r.json"))
    assert result.code == 0, result.err
    findings = result.json()["findings"]
    rules_found = [f["rule"] for f in findings]
    assert rule in rules_found, rules_found
    if top:
        assert rules_found[0] == rule, [(f["rule"], f["saving_s"]) for f in findings]
    found = next(f for f in findings if f["rule"] == rule)
    assert found["best_time_s"] is not None and found["gain"] > 1
    assert f'EXPECTED_FINDING = "{rule}"' in (MODELS / f"{model}.py").read_text()
