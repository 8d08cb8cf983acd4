"""The gate's shifts computed all at once (roofline.samples.shifts: numpy where importable) are exactly those of
roofline.samples.shift one pair at a time, and the gate's result is the same text on both paths."""

from __future__ import annotations

import importlib.util
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
