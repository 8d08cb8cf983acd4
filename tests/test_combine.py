"""The combined bound: each op's saving counted once."""

from __future__ import annotations

import pytest

from roofline.findings.combine import combined
from roofline.findings.model import ModelFinding


def f(rule, ops, time_s, best):
    return ModelFinding(
        rule=rule,
        bottleneck="memory",
        properties=[],
        technique="t",
        evidence="e",
        time_s=time_s,
        best_time_s=best,
        ops=ops,
    )


def test_overlapping_findings_do_not_add_their_savings():
    chain = f("chain", [0, 1, 2], 6e-3, 1e-3)  # saves 5 ms
    launch = f("launch", [2, 3], 3e-3, 1e-3)  # saves 2 ms, shares op 2 with the chain
    other = f("other", [4], 2e-3, 1.5e-3)  # saves 0.5 ms
    both = combined([launch, chain, other], 10e-3)
    assert both.rules == ["chain", "other"] and both.overlapping == 1
    assert both.best_time_s == pytest.approx(10e-3 - 5e-3 - 0.5e-3)
    assert both.gain == pytest.approx(10 / 4.5)
    # between the largest single saving and the sum of all
    assert 5e-3 <= both.time_s - both.best_time_s <= 7.5e-3


def test_no_saving_no_combined_bound():
    assert combined([f("x", [0], 1e-3, None)], 1e-3) is None
    assert combined([], 1e-3) is None
