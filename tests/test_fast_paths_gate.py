"""The gate's shifts computed all at once (roofline.samples.shifts: numpy where importable) are exactly those of
roofline.samples.shift one pair at a time, and the gate's result is the same text on both paths."""

from __future__ import annotations

import importlib.util
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline import samples
from roofline.gate import check
from roofline.report.baseline import from_report, from_reports
from roofline.samples import shift, shifts
from tests.gate_synthetic import bench_report, bench_row, noisy

NEEDS_NUMPY = pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="numpy is not installed")

# few distinct values, so that ties are common (timers tick); lists of 1-30 (small n*m: no bounded interval)
_values = st.lists(st.sampled_from([0.5, 1.0, 1.25, 2.0, 3.0, 1e-6, 7.5e-5, -1.0]) | st.floats(-1e3, 1e3), min_size=1)
_pairs = st.lists(st.tuples(_values.map(lambda v: v[:30]), _values.map(lambda v: v[:30])), min_size=1, max_size=12)


@NEEDS_NUMPY
@settings(max_examples=60, deadline=None)
@given(_pairs, st.sampled_from([0.9, 0.95, 0.99]))
def test_shifts_all_at_once_are_those_one_at_a_time(pairs, confidence):
    one_by_one = [shift(x, y, confidence) for x, y in pairs]
    assert shifts(pairs, confidence) == one_by_one
    assert shifts(pairs, confidence, vectorised=False) == one_by_one


@NEEDS_NUMPY
def test_shifts_of_many_pairs_in_several_batches(monkeypatch):
    rng = random.Random(7)
    pairs = [
        (noisy(rng, 1e-4, rng.choice([2, 20, 20, 37]), 0.05, 0.05), noisy(rng, 1.1e-4, rng.choice([20, 3]), 0.05))
        for _ in range(300)
    ]
    monkeypatch.setattr(samples, "BATCH_DIFFERENCES", 1000)  # a few pairs per numpy call
    assert shifts(pairs, 0.99) == [shift(x, y, 0.99) for x, y in pairs]
    assert any(s.bounded for s in shifts(pairs)) and not all(s.bounded for s in shifts(pairs))
    with pytest.raises(ValueError, match="samples on both sides"):
        shifts([([1.0], [])])


def _reports(seed: int) -> tuple[object, object]:
    rng = random.Random(seed)
    before, after = [], []
    for i in range(60):
        median = 10 ** rng.uniform(-5, -3)
        change = rng.choice([0.0, 0.0, 0.03, 0.2, -0.2])
        n, m = rng.choice([(20, 20), (20, 20), (3, 4), (12, 40), (1, 20)])
        sigma = rng.choice([0.04, 0.3])  # 0.3: a spread wider than the one-run noise's floor
        before.append(bench_row(f"m={i}", noisy(rng, median, n, sigma, 0.02)))
        after.append(bench_row(f"m={i}", noisy(rng, median * (1 + change), m, sigma, 0.02)))
    after.append(bench_row("m=new", [1e-4] * 20))
    return bench_report(before), bench_report(after)


@NEEDS_NUMPY
@pytest.mark.parametrize("runs", [1, 2])
@pytest.mark.parametrize("rules", [None, ["time:+5%", "efficiency:-3%"], ["time:+8us", "efficiency:-0.01"]])
def test_the_gate_is_the_same_with_and_without_numpy(monkeypatch, runs, rules):
    old, new = _reports(runs)
    baseline = from_report(old, commit="c0ffee") if runs == 1 else from_reports([old, old], commit="c0ffee")
    fast = check(new, baseline, rules=rules)
    monkeypatch.setattr(samples, "_numpy", lambda: None)
    plain = check(new, baseline, rules=rules)
    assert fast.to_json() == plain.to_json()
    verdicts = {p.verdict for p in fast.points}
    assert {"pass", "regression"} <= verdicts and "samples" in {c.method for p in fast.points for c in p.checks}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(1e-9, 1e3), min_size=1, max_size=12), min_size=1, max_size=10))
def test_quantile_rows_are_the_quantiles_one_set_at_a_time(sets):
    expected = [[samples.quantile(s, q) for q in (0.8, 0.2, 0.5)] for s in sets]
    assert samples.quantile_rows(sets, (0.8, 0.2, 0.5)) == expected
    assert samples.quantile_rows(sets, (0.8, 0.2, 0.5), vectorised=False) == expected


@pytest.mark.parametrize("runs", [1, 2])
def test_the_gate_computed_at_once_is_each_point_compared_alone(runs):
    from roofline.gate.compare import compare_points
    from roofline.gate.thresholds import build_rules

    old, new = _reports(runs + 10)
    baseline = from_report(old, commit="c0ffee") if runs == 1 else from_reports([old, old], commit="c0ffee")
    result = check(new, baseline)
    before = {p.key: p for p in baseline.points}
    alone = [compare_points(before[p.key], p.current, build_rules()) for p in result.points]  # type: ignore[index]
    assert result.points == alone and len(alone) == 60
    assert any(c.noise for p in alone for c in p.checks) == (runs == 1)


# ------------------------------------------------------------------------------------------ checks made unvalidated


def _odd_pairs() -> tuple[object, list[object]]:
    """A baseline and report points with what the gate's fast paths set apart: counts changed, missing, huge or
    signed zeros; samples empty, of a zero or a negative, non-finite; roof times missing or 0; 1 to 3 runs."""
    from roofline.report.baseline import Baseline, Identity, Point
    from roofline.report.machine import MachineInfo

    rng = random.Random(5)
    before, after = [], []
    for i in range(48):
        median = 10 ** rng.uniform(-5, -3)
        n, m = rng.choice([(20, 20), (20, 20), (5, 7), (3, 4), (0, 20), (20, 0)])
        x, y = noisy(rng, median, n, 0.05), noisy(rng, median * rng.choice([1.0, 1.3, 0.7]), m, 0.05)
        odd = i % 8
        if odd == 1 and x:
            x[0] = 0.0
        if odd == 2 and y:
            y[-1] = -1e-6
        if odd == 3 and x:
            x[1] = math.inf
        flops = [2**60 + 1, 10**20, 0, 7, None][i % 5]
        after_flops = flops + 1 if i % 7 == 0 and flops is not None else flops
        roof = [1e-5, None, 0.0, 2.5e-6][i % 4]
        runs = [[], [median], [median, median * 1.1], [median * 0.9, median, 0.0]][i % 4]
        common = {"key": f"k{i}", "label": f"p {i}", "bytes": float(i) if i % 3 else -0.0, "roof_time_s": roof}
        before.append(
            Point(**common, flops=flops, kernels=i % 3 or None, time_s=median, samples_s=x, run_medians_s=runs)
        )
        after.append(Point(**common, flops=after_flops, kernels=i % 3 or None, time_s=median * 1.2, samples_s=y))
        for point in (before[-1], after[-1]):
            point.efficiency = roof / point.time_s if roof else None  # type: ignore[operator]
    machine = MachineInfo.model_validate({"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"})
    baseline = Baseline(identity=Identity(source="bench"), machine=machine, points=before)
    return baseline, after


_RULES = [
    None,
    ["time:+5%", "efficiency:-3%", "flops:0"],
    ["time:+8us", "efficiency:-0.01", "bytes:+0", "kernels:-10%", "flops:+1"],
]


@pytest.mark.parametrize("stats", [True, False])
@pytest.mark.parametrize("rules", _RULES)
def test_checks_made_unvalidated_are_those_pydantic_makes(monkeypatch, rules, stats):
    from roofline.gate import compare as gate_compare
    from roofline.gate.thresholds import build_rules
    from roofline.report.baseline import Identity
    from roofline.report.machine import MachineInfo

    baseline, points = _odd_pairs()
    built = build_rules(("rules", list(rules or [])), stats=stats)
    machine = MachineInfo.model_validate({"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"})
    fast = gate_compare.compare(baseline, points, Identity(source="bench"), machine, built)  # type: ignore[arg-type]
    monkeypatch.setattr(gate_compare, "_TRUSTED", False)
    slow = gate_compare.compare(baseline, points, Identity(source="bench"), machine, built)  # type: ignore[arg-type]
    assert fast.to_json() == slow.to_json()
    assert fast == slow
    pairs = [
        (f, s) for a, b in zip(fast.points, slow.points, strict=True) for f, s in zip(a.checks, b.checks, strict=True)
    ]
    pairs += list(zip(fast.points, slow.points, strict=True))
    assert len(pairs) > 100
    for made, validated in pairs:
        assert made.model_fields_set == validated.model_fields_set
        assert {k: (type(v), v) for k, v in made.__dict__.items()} == {
            k: (type(v), v) for k, v in validated.__dict__.items()
        }
        assert type(made).model_validate(made.model_dump()) == made
    verdicts = {c.verdict for p in fast.points for c in p.checks}
    assert "pass" in verdicts and "regression" in verdicts


@NEEDS_NUMPY
@pytest.mark.parametrize("rules", _RULES)
def test_the_gate_of_odd_points_is_the_same_with_and_without_numpy(monkeypatch, rules):
    from roofline.gate import compare as gate_compare
    from roofline.gate.thresholds import build_rules

    baseline, points = _odd_pairs()
    pairs = [(b, a) for b, a in zip(baseline.points, points, strict=True)]  # type: ignore[attr-defined]
    built = build_rules(("rules", list(rules or [])))
    fast = gate_compare._pair_shifts(pairs, built)
    monkeypatch.setattr(samples, "_numpy", lambda: None)
    plain = gate_compare._pair_shifts(pairs, built)
    assert fast == plain
    found = [value for point in fast for value in point.values()]
    assert any(v is None for v in found) and sum(v is not None for v in found) > 20
    alone = [gate_compare.compare_points(b, a, built) for b, a in pairs]
    together = [gate_compare.compare_points(b, a, built, c) for (b, a), c in zip(pairs, fast, strict=True)]
    assert alone == together


def test_indented_json_writes_columns_as_json_does():
    import json

    from roofline import yamlio

    check = {"metric": "time", "low": None, "rule": "time:+5%", "ok": True, "change": 0.5}
    points = [
        {
            "key": "a | 50% | é\n",
            "n": i,
            "x": [1.5, -0.0, 1e-05][i % 3],
            "maybe": [None, 2, 2.5, False, "s"][i % 5],
            "samples": [[], [1.0, 2.0], [3, 4], ["u", "v"]][i % 4],
            "checks": [[], [check], [check, {**check, "low": -1.25}]][i % 3],
            "side": {"k": i, "t": [0.25] * (i % 2)},
        }
        for i in range(12)
    ]
    document = {"points": points, "n": 12}
    assert yamlio._rows(points, "  ", "\n  ", json.encoder.encode_basestring_ascii) is not None  # the column path
    for indent in (0, 2, 4):
        assert yamlio.indented_json(document, indent) == json.dumps(document, indent=indent)
    for odd in ({**points[0], "x": math.nan}, {**points[0], "samples": [[1]]}, {**points[0], "side": None}):
        rows = [*points, odd]
        assert yamlio._rows(rows, "  ", "\n  ", json.encoder.encode_basestring_ascii) is None  # item by item
        assert yamlio.dumps_json(rows, indent=2) == json.dumps(yamlio.null_nonfinite(rows)[0], indent=2)
