from __future__ import annotations

import pytest

from roofline import dtypes
from roofline.errors import UsageError
from roofline.units import (
    format_bytes,
    format_count,
    format_intensity,
    format_rate,
    format_time,
    parse_size,
    parse_sizes,
    parse_time,
    parse_times,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4096", 4096),
        ("4k", 4000),
        ("4Ki", 4096),
        ("2^12", 4096),
        ("8.75e9", 8_750_000_000),
        ("4096x4096", 16_777_216),
        ("64*1024", 65536),
        ("1M", 1_000_000),
    ],
)
def test_parse_size(text, value):
    assert parse_size(text, "-m") == value


@pytest.mark.parametrize("text", ["0", "-3", "abc", "1.5", "", "4096x"])
def test_parse_size_rejects(text):
    with pytest.raises(UsageError, match="-m"):
        parse_size(text, "-m")


def test_parse_sizes_sweep_and_errors():
    assert parse_sizes("1,8,64,256", "--batch") == [1, 8, 64, 256]
    with pytest.raises(UsageError, match="empty item"):
        parse_sizes("1,,8", "--batch")
    assert parse_size("0", "--padding", allow_zero=True) == 0


def test_formatting_keeps_units_explicit():
    assert format_count(137_438_953_472) == "137.4 GFLOP"
    assert format_bytes(100_663_296) == "100.7 MB"
    assert format_rate(989.4e12) == "989.4 TFLOP/s"
    assert format_rate(3.35e12, "B/s") == "3.35 TB/s"
    assert format_time(5.2239e-3) == "5.22 ms"
    assert format_time(143e-6) == "143 us"
    assert format_intensity(1365.333) == "1,365.3"
    assert format_intensity(1.25) == "1.25"
    assert format_count(999_999) == "1 MFLOP"


def test_dtypes():
    assert dtypes.canonical("BF16") == "bf16"
    assert dtypes.canonical("float32") == "fp32"
    assert dtypes.nbytes(3, "int4") == 2  # 12 bits round up to 2 bytes
    assert dtypes.nbytes(4096, "fp16") == 8192
    with pytest.raises(UsageError, match="unknown dtype 'fp99'"):
        dtypes.canonical("fp99")


@pytest.mark.parametrize(
    ("text", "unit", "value"),
    [
        ("5us", "us", 5.0),
        ("5 us", "us", 5.0),
        ("5µs", "us", 5.0),
        ("5US", "us", 5.0),
        ("1.2ms", "us", 1200.0),
        ("0.5s", "s", 0.5),
        ("250ns", "us", 0.25),
        ("5", "us", 5.0),  # bare: the option's unit
        ("600", "s", 600.0),
        ("2min", "s", 120.0),
        ("1.5h", "s", 5400.0),
        ("1e3", "us", 1000.0),
        ("2.5e-3 s", "ms", 2.5),
        (".5", "s", 0.5),
        ("1ns", "s", 1e-9),
        ("1e9", "s", 1e9),
    ],
)
def test_parse_time(text, unit, value):
    assert parse_time(text, "--t", unit) == value


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "cannot read '' as a time: use a number in us or one with a unit, such as 5us, 1.2ms, 0.5s, 250ns"),
        ("5xs", "cannot read '5xs' as a time"),
        ("5 m", "cannot read '5 m' as a time"),  # m: minutes or milli? neither: min and ms are taken
        ("-1us", "cannot read '-1us' as a time"),
        ("nan", "cannot read 'nan' as a time"),
        ("inf", "cannot read 'inf' as a time"),
        ("5us,6us", "cannot read '5us,6us' as a time"),
        ("0", "'0' must be positive"),
        ("0ms", "'0ms' must be positive"),
        ("0.1ns", "'0.1ns' is out of range: a time is 1 ns to 1e+09 s"),
        ("1e10s", "'1e10s' is out of range: a time is 1 ns to 1e+09 s"),
        ("1e99999999", "'1e99999999' is out of range"),
    ],
)
def test_parse_time_rejects_in_one_line(text, why):
    with pytest.raises(UsageError) as caught:
        parse_time(text, "--t", "us")
    message = str(caught.value)
    assert message.startswith(f"--t: {why}") and "\n" not in message


def test_parse_times_sweep():
    assert parse_times("5us,0.01ms", "--launch-floor", "us") == [5.0, 10.0]
    assert parse_times("5,10", "--launch-floor", "us") == [5.0, 10.0]
    with pytest.raises(UsageError, match="--launch-floor: empty item in '5,'"):
        parse_times("5,", "--launch-floor", "us")
