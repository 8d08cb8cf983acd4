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
