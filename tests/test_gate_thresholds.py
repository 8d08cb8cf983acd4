"""The threshold language: what each rule means exactly, how sources combine, and one-line errors."""

from __future__ import annotations

import math

import pytest

from roofline.gate.thresholds import DEFAULT_RULES, Limit, ThresholdError, build_rules, parse_rule


@pytest.mark.parametrize(
    ("text", "limits"),
    [
        ("efficiency:-5%", [("efficiency", "-", 0.05, True, "efficiency:-5%")]),
        ("eff:5%", [("efficiency", "-", 0.05, True, "efficiency:-5%")]),  # the bad direction is implied
        ("time:+10%", [("time", "+", 0.10, True, "time:+10%")]),
        ("TIME:10%", [("time", "+", 0.10, True, "time:+10%")]),
        ("time:+50us", [("time", "+", 50e-6, False, "time:+50us")]),
        ("time:2ms", [("time", "+", 2e-3, False, "time:+2ms")]),
        ("time:0.001", [("time", "+", 0.001, False, "time:+0.001")]),
        ("efficiency:-0.05", [("efficiency", "-", 0.05, False, "efficiency:-0.05")]),
        ("flops:0", [("flops", "+", 0.0, False, "flops:0"), ("flops", "-", 0.0, False, "flops:0")]),
        ("flops:+0", [("flops", "+", 0.0, False, "flops:+0")]),
        ("bytes:-10%", [("bytes", "-", 0.10, True, "bytes:-10%")]),
        ("kernels:+1", [("kernels", "+", 1.0, False, "kernels:+1")]),
        ("flops:1e6", [("flops", "+", 1e6, False, "flops:1e6"), ("flops", "-", 1e6, False, "flops:1e6")]),
        (" time : +.5% ", [("time", "+", 0.005, True, "time:+.5%")]),
    ],
)
def test_rules_parse_to_exact_limits(text, limits):
    rule = parse_rule(text)
    assert [(lim.metric, lim.direction, pytest.approx(lim.value), lim.relative, lim.text) for lim in rule.limits] == [
        (m, d, pytest.approx(v), r, t) for m, d, v, r, t in limits
    ]


def test_off_and_log_bounds():
    assert parse_rule("time:off").off
    assert Limit("time", "+", 0.10, True, "").log_bound == pytest.approx(math.log(1.10))
    assert Limit("efficiency", "-", 0.05, True, "").log_bound == pytest.approx(math.log(0.95))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("efficiency-5%", "--fail-on 'efficiency-5%': write METRIC:LIMIT, e.g. efficiency:-5%"),
        ("latency:+5%", "--fail-on 'latency:+5%': unknown metric 'latency': use one of time, efficiency, flops"),
        ("time:-10%", "--fail-on 'time:-10%': time regresses when it rises: write time:+10%"),
        ("efficiency:+5%", "--fail-on 'efficiency:+5%': efficiency regresses when it falls: write efficiency:-5%"),
        ("flops:+5ms", "--fail-on 'flops:+5ms': a time unit (ms) fits only time; flops takes a % or a number"),
        ("efficiency:-100%", "a fall of 100% or more cannot happen"),
        ("time:fast", "--fail-on 'time:fast': 'fast' is not a limit: write [+|-]NUMBER[%], or off"),
        ("time:+-5%", "'+-5%' is not a limit"),
        ("time:5%%", "'5%%' is not a limit"),
        ("time:", "'' is not a limit"),
    ],
)
def test_malformed_rules_are_one_line_errors(text, message):
    with pytest.raises(ThresholdError) as caught:
        parse_rule(text)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.exit_code == 2


def test_defaults():
    rules = build_rules()
    assert DEFAULT_RULES == ("flops:0", "bytes:0", "kernels:0", "efficiency:-5%")
    assert rules.texts == ["efficiency:-5%", "flops:0", "bytes:0", "kernels:0"]
    assert rules.confidence == 0.99 and rules.stats
    assert rules.for_metric("time") == []


def test_a_source_replaces_the_metrics_it_names_and_combines_within_itself():
    rules = build_rules(
        ("pyproject", ["time:+10%", "efficiency:-3%"]),
        ("--fail-on", ["flops:+0", "flops:-10%", "time:off"]),
    )
    assert rules.texts == ["efficiency:-3%", "flops:+0", "flops:-10%", "bytes:0", "kernels:0"]
    flops = {(lim.direction, lim.value, lim.relative) for lim in rules.for_metric("flops")}
    assert flops == {("+", 0.0, False), ("-", 0.10, True)}


def test_confidence_is_checked():
    assert build_rules(confidence=0.95).confidence == 0.95
    with pytest.raises(ThresholdError, match=r"between 0\.5 and 1"):
        build_rules(confidence=1.5)


def test_the_source_is_named_in_errors():
    with pytest.raises(ThresholdError, match=r"^pyproject.toml \[tool.roofline.gate\] fail-on 'time:x'"):
        build_rules(("pyproject.toml [tool.roofline.gate] fail-on", ["time:x"]))
