"""Structure whatever the spelling (issue 27, item 4): the rules that read a model's structure rather than its op
names -- an element-wise recurrence over the same elements (a fusion, not a scan), two element-wise ops in a row,
attention with its softmax and mask written out, top-k by repeated max (or a sliced sort), all pairs of one tensor
-- on hand-built ops with fixed times on the test CPU (no torch), and the five models of the issue diagnosed end
to end on a modelled CPU (tests/data/structure/: real counting, never the host's speed)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from diagnose_devices import CPU, rec
from test_diagnose_cli import FAKE_CPU, FAST, modelled_timing
from test_diagnose_rules import ctx_of, only
from test_patterns import rnn_steps, vec

from roofline.findings import structure
from roofline.findings.rules import diagnose, fusion, launch, rewrites

N = 2**20  # elements of the element-wise tensors below
BW, PEAK, LAUNCH = CPU.dram_bandwidth, 1e11, CPU.launch_floor_s
STRUCTURE = Path(__file__).resolve().parent / "data" / "structure"


# ------------------------------------------------------------------------------------------- 1. recurrences


def recurrence(steps: int = 8, *, sliced: bool = False, inputs: str = "", time_s: float = 2e-3) -> list:
    """y = zeros; y = y * 0.9 + x, ``steps`` times (fp32, N elements); ``sliced``: x[t] read from a [steps, N]
    tensor each step (a view narrowing it: a recurrence along a sequence axis); ``inputs``: the storage ids of x
    recorded, 'same' one tensor every step, 'list' another tensor each step (xs[t] of a list)."""
    ops = [(vec(0, "aten::zeros_like", [(N,)], [(N,)], [None], flops=0), time_s, 0)]
    y = 0
    for _ in range(steps):
        i = len(ops)
        ops.append((vec(i, "aten::mul", [(N,)], [(N,)], [y]), time_s, 0))
        if sliced:
            view = rec(i + 1, "aten::select", [(steps, N)], [(N,)], 0, 0, dtype="fp32", math="none",
                       input_producers=(None,), input_params=(False,))  # fmt: skip
            ops.append((view, 1e-6, 0))
        j = len(ops)
        ids = {"": {}, "same": {"input_ids": (None, 7)}, "list": {"input_ids": (None, 7 + j)}}[inputs]
        ops.append((vec(j, "aten::add", [(N,), (N,)], [(N,)], [i, None], **ids), time_s, 0))
        y = j
    return ops


def test_elementwise_recurrence_is_a_fusion_with_a_one_pass_bound():
    ctx = ctx_of(recurrence(), CPU)
    (loop,) = ctx.loops
    assert loop.period == 2 and loop.steps == 8
    assert launch.sequential_loop(ctx) == []  # no scan: each element's steps depend on that element alone
    f = only(rewrites.elementwise_recurrence(ctx))
    assert f.rule == "elementwise-recurrence" and f.properties == ["locality"]
    assert "torch.compile" in f.technique and "registers" in f.technique
    # 8 x (mul 8N + add 12N) bytes step by step vs x and the initial y read once and y written once (12N)
    assert "13.3x fewer bytes" in f.evidence and "8 times on the same 1,048,576 elements" in f.evidence
    after = max(16 * N / PEAK, 12 * N / BW) + LAUNCH  # every step's FLOPs, one pass, one launch
    assert f.best_time_s == pytest.approx(after) and f.floor_s == pytest.approx(after)
    assert diagnose(ctx)[0].rule == "elementwise-recurrence"


@pytest.mark.parametrize("spelling", [{"sliced": True}, {"inputs": "list"}])
def test_a_recurrence_along_a_sequence_axis_stays_a_scan(spelling):
    ctx = ctx_of(recurrence(**spelling), CPU)
    assert len(ctx.loops) == 1
    assert rewrites.elementwise_recurrence(ctx) == []  # x[:, t] or xs[t]: other elements each step
    assert only(launch.sequential_loop(ctx)).rule == "sequential-loop"


def test_the_same_input_tensor_every_step_is_still_the_same_elements():
    ctx = ctx_of(recurrence(inputs="same"), CPU)
    assert launch.sequential_loop(ctx) == []
    assert "13.3x fewer bytes" in only(rewrites.elementwise_recurrence(ctx)).evidence


def test_a_recurrence_through_a_matmul_stays_a_scan():
    ctx = ctx_of(rnn_steps(12, time_s=1e-3), CPU)  # an RNN: the state feeds a matmul
    assert rewrites.elementwise_recurrence(ctx) == [] and rewrites.written_out_topk(ctx) == []
    assert only(launch.sequential_loop(ctx)).rule == "sequential-loop"


# ------------------------------------------------------------------------------------------- 2. a pair


def test_two_unary_ops_in_a_row_are_a_pair_to_fuse():
    ops = [
        (vec(0, "aten::mish", [(N,)], [(N,)], [None], flops=5 * N), 2e-3, 0),
        (vec(1, "aten::mish", [(N,)], [(N,)], [0], flops=5 * N), 2e-3, 0),
    ]
    ctx = ctx_of(ops, CPU)
    f = only(rewrites.elementwise_pair(ctx))
    assert f.rule == "elementwise-pair" and "torch.compile" in f.technique
    assert "mish -> mish on 1,048,576 elements" in f.evidence and "2x fewer bytes" in f.evidence
    before = 2 * (8 * N / BW + LAUNCH)
    after = max(10 * N / PEAK, 8 * N / BW) + LAUNCH
    assert after <= rewrites.PAIR_SHARE * before
    assert f.best_time_s == pytest.approx(after)
    assert diagnose(ctx)[0].rule == "elementwise-pair"


def test_two_binary_ops_save_too_little_and_tiny_ops_are_the_launch_rules():
    binary = [
        (vec(0, "aten::add", [(N,), (N,)], [(N,)], [None, None], input_ids=(0, 1)), 2e-3, 0),
        (vec(1, "aten::mul", [(N,), (N,)], [(N,)], [0, None], input_ids=(None, 2)), 2e-3, 0),
    ]
    assert rewrites.elementwise_pair(ctx_of(binary, CPU)) == []  # 16N of 24N bytes: 2/3 > PAIR_SHARE
    tiny = [
        (vec(0, "aten::mish", [(64,)], [(64,)], [None]), 1e-5, 0),
        (vec(1, "aten::mish", [(64,)], [(64,)], [0]), 1e-5, 0),
    ]
    assert rewrites.elementwise_pair(ctx_of(tiny, CPU)) == []
    shared = [  # the first's output read by another op too: it must be written anyway
        (vec(0, "aten::mish", [(N,)], [(N,)], [None]), 2e-3, 0),
        (vec(1, "aten::mish", [(N,)], [(N,)], [0]), 2e-3, 0),
        (rec(2, "aten::mm", [(1024, 1024), (1024, 1024)], [(1024, 1024)], 2 * 1024**3, 12 * 2**20, dtype="fp32",
             input_producers=(0, None), input_params=(False, False)), 2e-3, 0),
    ]  # fmt: skip
    assert rewrites.elementwise_pair(ctx_of(shared, CPU)) == []


# ------------------------------------------------------------------------------------------- 3. attention


def attention(*, mask: bool = True, exp: bool = True) -> list:
    """bmm, scale, (ones, triu, masked_fill), max, sub, exp, sum, div, bmm: 8 heads of 256 x 256 scores."""
    h, s, d = 8, 256, 64
    sc = (h, s, s)
    row = (h, s, 1)
    out: list = []

    def add(op, shapes, outs, producers, **kw):
        out.append((vec(len(out), op, shapes, outs, producers, **kw), 1e-3, 0))
        return len(out) - 1

    out.append((rec(0, "aten::bmm", [(h, s, d), (h, d, s)], [sc], 2 * h * s * s * d, 4 * (2 * h * s * d + h * s * s),
                    dtype="fp32", input_producers=(None, None), input_params=(False, False)), 2e-3, 0))  # fmt: skip
    scores = add("aten::div", [sc], [sc], [0])
    if mask:
        ones = add("aten::ones", [], [(s, s)], [], flops=0)
        tri = add("aten::triu", [(s, s)], [(s, s)], [ones], flops=0)
        scores = add("aten::masked_fill", [sc, (s, s)], [sc], [scores, tri])
    top = add("aten::max", [sc], [row, row], [scores])
    shifted = add("aten::sub", [sc, row], [sc], [scores, top])
    e = add("aten::exp" if exp else "aten::neg", [sc], [sc], [shifted])
    total = add("aten::sum", [sc], [row], [e])
    probs = add("aten::div", [sc, row], [sc], [e, total])
    i = len(out)
    out.append((rec(i, "aten::bmm", [sc, (h, s, d)], [(h, s, d)], 2 * h * s * s * d, 4 * (2 * h * s * d + h * s * s),
                    dtype="fp32", input_producers=(probs, None), input_params=(False, False)), 2e-3, 0))  # fmt: skip
    return out


def test_attention_with_a_written_out_softmax_and_a_causal_mask_built_in_the_call():
    ops = attention()
    ctx = ctx_of(ops, CPU)
    (att,) = ctx.attention
    assert att.first == 0 and att.second == len(ops) - 1 and att.scores_shape == (8, 256, 256)
    assert set(att.indices) == set(range(len(ops)))  # the mask's ones and triu with it
    assert fusion.written_out_fusion(ctx) == []  # the softmax is the attention's, not a fused-op finding
    f = only(fusion.naive_attention(ctx))
    assert "F.scaled_dot_product_attention" in f.technique and "is_causal=True" in f.technique
    assert "the softmax written out (div, masked_fill, max, sub, exp, sum, div)" in f.evidence
    assert "a mask built in every call (ones, triu)" in f.evidence
    assert diagnose(ctx)[0].rule == "naive-attention"


def test_attention_without_a_mask_is_not_causal_and_no_softmax_is_no_attention():
    f = only(fusion.naive_attention(ctx_of(attention(mask=False), CPU)))
    assert "is_causal" not in f.technique and "mask built" not in f.evidence
    assert ctx_of(attention(exp=False), CPU).attention == ()  # max, sub, neg, sum, div: no softmax


# ------------------------------------------------------------------------------------------- 4. top-k

R, C, K = 256, 8192, 16


def topk_loop(k: int = K) -> list:
    """clone, then k x (max over the last axis, scatter -inf where it was), then cat of the k maxima."""
    ops = [(vec(0, "aten::clone", [(R, C)], [(R, C)], [None], flops=0), 1e-3, 0)]
    x = 0
    maxima = []
    for _ in range(k):
        i = len(ops)
        ops.append((vec(i, "aten::max", [(R, C)], [(R, 1), (R, 1)], [x]), 1e-3, 0))
        ops.append((vec(i + 1, "aten::scatter", [(R, C), (R, 1)], [(R, C)], [x, i], flops=0), 2e-3, 0))
        maxima.append(i)
        x = i + 1
    i = len(ops)
    ops.append((vec(i, "aten::cat", [(R, 1)] * k, [(R, k)], maxima, flops=0), 1e-5, 0))
    return ops


def test_topk_by_repeated_max_is_one_pass_of_torch_topk():
    ctx = ctx_of(topk_loop(), CPU)
    assert len(ctx.loops) == 1
    assert launch.sequential_loop(ctx) == []  # not a scan over a time axis
    f = only(rewrites.written_out_topk(ctx))
    assert f.rule == "written-out-topk" and f.properties == ["redundancy", "associativity"]
    assert "torch.topk(x, 16, dim)" in f.technique and "chunk" in f.technique
    assert "top-16 of 8,192 by 16 passes" in f.evidence
    after = max(R * C / PEAK, (4 * R * C + K * 8 * R) / BW) + LAUNCH  # read once, 16 values + indices written
    assert f.best_time_s == pytest.approx(after)
    assert diagnose(ctx)[0].rule == "written-out-topk"


def sort_then(reader_shape: tuple[int, ...] | None) -> list:
    sort = vec(0, "aten::sort", [(R, C)], [(R, C), (R, C)], [None], flops=R * C * 13)
    ops = [(sort, 5e-3, 0)]
    ops.append((rec(1, "aten::slice", [(R, C)], [(R, K)], 0, 0, dtype="fp32", math="none",
                    input_producers=(0,), input_params=(False,)), 1e-6, 0))  # fmt: skip
    if reader_shape is not None:  # the whole sorted tensor read too
        ops.append((vec(2, "aten::cumsum", [reader_shape], [reader_shape], [0]), 1e-3, 0))
    return ops


def test_a_sort_sliced_to_k_is_a_topk_and_a_sort_read_whole_is_not():
    ctx = ctx_of(sort_then(None), CPU)
    f = only(rewrites.written_out_topk(ctx))
    assert "a full sort of 8,192 elements sliced to the first 16" in f.evidence
    assert f.best_time_s is not None and f.best_time_s < f.time_s
    assert rewrites.written_out_topk(ctx_of(sort_then((R, C)), CPU)) == []


# ------------------------------------------------------------------------------------------- 5. all pairs


def nbody(n: int, *, same: bool = True) -> list:
    """d = pos[None] - pos[:, None]; r2 = (d * d).sum(-1) + eps; inv = r2 ** -1.5;
    f = (d * (inv * m)[..., None]).sum(1)."""
    pairs, d3, t = (n, n), (n, n, 3), 1e-3
    ids = (0, 0) if same else (0, 1)
    return [
        (vec(0, "aten::sub", [(1, n, 3), (n, 1, 3)], [d3], [None, None], input_ids=ids), t, 0),
        (vec(1, "aten::mul", [d3, d3], [d3], [0, 0], input_ids=(2, 2)), t, 0),
        (vec(2, "aten::sum", [d3], [pairs], [1]), t, 0),
        (vec(3, "aten::add", [pairs], [pairs], [2]), t, 0),
        (vec(4, "aten::pow", [pairs], [pairs], [3]), t, 0),
        (vec(5, "aten::mul", [pairs, (1, n)], [pairs], [4, None]), t, 0),
        (vec(6, "aten::mul", [d3, (n, n, 1)], [d3], [0, 5]), t, 0),
        (vec(7, "aten::sum", [d3], [(n, 3)], [6]), t, 0),
    ]


def test_all_pairs_of_one_tensor_name_symmetry_and_a_tree():
    n = 2048
    ctx = ctx_of(nbody(n), CPU)
    (pairs,) = structure.all_pairs(ctx.work(), ctx.dataflow())
    assert pairs.n == n and pairs.indices == tuple(range(8)) and pairs.reductions == 1
    f = only(fusion.all_pairs(ctx))
    assert f.properties == ["separability", "locality", "symmetry"]
    for needle in ("Newton's third law", "half the pairs", "Barnes-Hut", "fast multipole", "torch.cdist"):
        assert needle in f.technique, needle
    assert "2,048 x 2,048 pairs" in f.evidence and "summed over one axis by 1 reduction" in f.evidence
    keep = math.log2(n) / n  # N log2 N of N^2 interactions, the same per-pair cost, each op's launch kept
    after = sum(p.roof_time_s * keep + p.launch_floor_s for p in ctx.points)
    assert f.best_time_s == pytest.approx(after)
    found = [x.rule for x in diagnose(ctx)]
    # torch.compile's fusion keeps the math and needs no code change: it ranks first (findings.base.rank); the
    # symmetry and the tree, a code change, come next
    assert found[:2] == ["fusion-across-reduction", "all-pairs"]


def test_two_tensors_or_few_elements_are_no_all_pairs():
    assert fusion.all_pairs(ctx_of(nbody(2048, same=False), CPU)) == []  # x[None] - y[:, None]: not one set
    assert fusion.all_pairs(ctx_of(nbody(32), CPU)) == []  # N < MIN_PAIRS


# ------------------------------------------------------------------------------------------- end to end


@pytest.fixture
def modelled(monkeypatch):
    """FAKE_CPU's roofs and the modelled CPU's op times (counting still runs the model)."""
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    monkeypatch.setattr("roofline.diagnose.profile.time_model", modelled_timing)


@pytest.mark.parametrize(
    ("model", "rule", "also"),
    [
        ("elementwise_recurrence", "elementwise-recurrence", None),
        ("mish_twice", "elementwise-pair", None),
        ("attention_causal_written_out", "naive-attention", None),
        ("topk_repeated_max", "written-out-topk", None),
        ("nbody_all_pairs", "fusion-across-reduction", "all-pairs"),  # the mechanical fusion first, then the pairs
    ],
)
def test_the_five_models_get_their_structure_as_top_finding(cli, tmp_path, modelled, model, rule, also):
    pytest.importorskip("torch")
    path = STRUCTURE / f"{model}.py"
    result = cli("diagnose", str(path), *FAST, "--json", "-o", str(tmp_path / "r.json"))
    assert result.code == 0, result.err
    findings = result.json()["findings"]
    rules = [f["rule"] for f in findings]
    assert rules[0] == rule, [(f["rule"], f["saving_s"]) for f in findings]
    assert "sequential-loop" not in rules and "not-explained" not in rules, rules
    if also:
        assert also in rules
    top = findings[0]
    assert top["best_time_s"] is not None and top["gain"] > 1
    if rule == "naive-attention":
        assert "is_causal=True" in top["technique"]
    assert f'EXPECTED_FINDING = "{also or rule}"' in path.read_text()


# ------------------------------------------------------------------------------------------- compiled models


def _compiled(ops: list, fused: str = ""):
    ctx = ctx_of(ops, CPU)
    timing = dataclasses.replace(ctx.timing, compiled=True)
    points = [p.model_copy(update={"fused_kernel": fused}) for p in ctx.points]
    return type(ctx).of(points, CPU, timing)


def test_no_torch_compile_advice_to_a_compiled_model():
    assert rewrites.elementwise_recurrence(_compiled(recurrence(), "cpp_fused_add_mul_0")) == []  # fused already
    unfused = only(rewrites.elementwise_recurrence(_compiled(recurrence())))  # compiled, yet unfused
    assert "torch.compile" not in unfused.technique and "graph break" in unfused.technique
    mish = [
        (vec(0, "aten::mish", [(N,)], [(N,)], [None], flops=5 * N), 2e-3, 0),
        (vec(1, "aten::mish", [(N,)], [(N,)], [0], flops=5 * N), 2e-3, 0),
    ]
    assert rewrites.elementwise_pair(_compiled(mish, "cpp_fused_mish_0")) == []
    assert "torch.compile" not in only(rewrites.elementwise_pair(_compiled(mish))).technique
    assert "torch.compile" not in only(fusion.all_pairs(_compiled(nbody(2048)))).technique
