"""The shift between two sample sets (roofline.samples.shift, the gate's comparison): Hodges–Lehmann shift,
Mann–Whitney interval, and the order statistics behind them."""

from __future__ import annotations

import math
import random

import pytest

from roofline import samples as stats
from roofline.samples import order_statistics, rank_bound, shift


def test_worked_example_shift_of_two():
    # y - x over x = 1..5, y = 3..7: the 25 differences are 2 + (j - i): -2 once, -1 twice, ..., 6 once.
    # C = floor(12.5 - 1.645 * sqrt(25 * 11 / 12)) = 4: the interval is the 4th and 22nd smallest, 0 and 4.
    assert rank_bound(5, 5, 0.90) == 4
    result = shift([1, 2, 3, 4, 5], [3, 4, 5, 6, 7], 0.90)
    assert (result.estimate, result.low, result.high) == (2.0, 0, 4)
    assert result.bounded and (result.n_baseline, result.n_current) == (5, 5)


def test_rank_bound_against_the_exact_tables():
    # The exact rank of the bound is the two-sided critical value of U + 1: 5%, n = m = 10: 23 + 1; n = m = 20:
    # 127 + 1; 1%, n = m = 10: 16 + 1. The normal approximation, floored, equals it or is wider (conservative).
    assert rank_bound(10, 10, 0.95) == 24
    assert rank_bound(20, 20, 0.95) == 127
    assert rank_bound(10, 10, 0.99) == 15


def test_too_few_samples_give_an_unbounded_interval():
    result = shift([1.0, 2.0], [1.5, 2.5], 0.99)
    assert result.estimate == 0.5
    assert result.low == -math.inf and result.high == math.inf and not result.bounded


def test_an_outlier_moves_the_estimate_by_one_rank_not_by_its_size():
    base = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0, 1.01, 0.99]
    current = [b + 0.1 for b in base]
    clean = shift(base, current).estimate
    current[0] = 50.0
    assert shift(base, current).estimate == pytest.approx(clean, abs=0.02)


@pytest.mark.parametrize("pairs", [(7, 9), (30, 41), (120, 150)])
def test_selection_numpy_and_sort_agree_exactly(monkeypatch, pairs):
    rng = random.Random(sum(pairs))
    n, m = pairs
    # rounded values: many ties, the hard case for a selection
    x = [round(rng.lognormvariate(0, 0.1), 3) for _ in range(n)]
    y = [round(rng.lognormvariate(0.02, 0.1), 3) for _ in range(m)]
    everything = sorted(b - a for b in y for a in x)
    ranks = [1, len(everything), (len(everything) + 1) // 2, rng.randint(1, len(everything))]
    expected = [everything[k - 1] for k in ranks]
    assert order_statistics(x, y, ranks) == expected  # numpy where importable (n*m > 1000), else the sort
    monkeypatch.setattr(stats, "_numpy", lambda: None)
    assert order_statistics(x, y, ranks) == expected  # pure Python: sort
    monkeypatch.setattr(stats, "BRUTE_FORCE_PAIRS", 0)
    assert order_statistics(x, y, ranks) == expected  # pure Python: selection


def test_interval_covers_the_true_shift_as_often_as_it_says():
    rng = random.Random(11)
    covered = 0
    draws = 400
    for _ in range(draws):
        true = rng.uniform(-0.2, 0.2)
        x = [rng.gauss(0, 0.05) for _ in range(rng.randint(10, 60))]
        y = [true + rng.gauss(0, 0.05) for _ in range(rng.randint(10, 60))]
        result = shift(x, y, 0.95)
        covered += result.low <= true <= result.high
    assert covered / draws >= 0.94  # nominal 95%, the floored rank makes it a little wider


def test_bad_arguments():
    with pytest.raises(ValueError, match="samples on both sides"):
        shift([], [1.0])
    with pytest.raises(ValueError, match="between 0 and 1"):
        rank_bound(5, 5, 1.0)
    with pytest.raises(ValueError, match="outside"):
        order_statistics([1.0], [2.0], [2])
