"""The roofline math: worked values and properties that must hold for any input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roofline import ironlaw as model

positive = st.floats(min_value=1e-3, max_value=1e18, allow_nan=False, allow_infinity=False)


def test_h100_fp16_ridge_from_the_source_text():
    # 989 TFLOP/s / 3.35 TB/s ~ 295 FLOP/byte (source text, "The roofline model")
    assert model.ridge_point(989.4e12, 3.35e12) == pytest.approx(295.34, abs=0.01)


def test_attainable_on_both_sides_of_the_ridge():
    peak, bw = 100.0, 10.0  # ridge 10
    assert model.attainable(1.0, peak, bw) == 10.0  # memory slope
    assert model.attainable(10.0, peak, bw) == 100.0  # at the ridge
    assert model.attainable(50.0, peak, bw) == 100.0  # flat roof


def test_min_time_and_bound():
    # 1e12 FLOPs on 1e12 FLOP/s = 1 s; 2e12 bytes at 1e12 B/s = 2 s -> memory-bound, 2 s + launch
    assert model.min_time(1e12, 2e12, 1e12, 1e12, 5e-6) == pytest.approx(2 + 5e-6)
    assert model.bound(1.0, 2.0, 5e-6) == "memory"
    assert model.bound(3.0, 2.0, 5e-6) == "compute"
    assert model.bound(1e-7, 2e-7, 5e-6) == "launch"


def test_efficiency():
    assert model.efficiency(50.0, 100.0) == 0.5
    assert math.isnan(model.efficiency(1.0, 0.0))


@given(i=positive, peak=positive, bw=positive)
def test_attainable_never_exceeds_either_roof(i, peak, bw):
    value = model.attainable(i, peak, bw)
    assert value <= peak
    assert value <= i * bw * (1 + 1e-12)


@given(flops=positive, nbytes=positive, peak=positive, bw=positive, extra=positive)
def test_time_is_monotone_in_flops_and_bytes(flops, nbytes, peak, bw, extra):
    base = model.min_time(flops, nbytes, peak, bw, 1e-6)
    assert model.min_time(flops + extra, nbytes, peak, bw, 1e-6) >= base
    assert model.min_time(flops, nbytes + extra, peak, bw, 1e-6) >= base


@given(flops=positive, nbytes=positive, peak=positive, bw=positive)
def test_min_time_matches_attainable_rate(flops, nbytes, peak, bw):
    # Without launch overhead, FLOPs / min time is exactly the attainable rate at that intensity.
    rate = flops / model.min_time(flops, nbytes, peak, bw)
    assert rate == pytest.approx(model.attainable(flops / nbytes, peak, bw), rel=1e-9)
