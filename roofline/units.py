"""Units: parsing sizes from the command line and formatting quantities with explicit units.

Everything inside the library is in base SI units (FLOP, byte, second, FLOP/s, byte/s); prefixes are
decimal (1 GB = 1e9 bytes, 1 TB/s = 1e12 byte/s) as in vendor spec sheets. Only this module converts.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from roofline.errors import UsageError

_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "ki": 2**10, "mi": 2**20, "gi": 2**30}
_ATOM = re.compile(r"^\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*(ki|mi|gi|k|m|g|t)?\s*$", re.IGNORECASE)
_POW = re.compile(r"^\s*(\d+)\s*\^\s*(\d+)\s*$")


#: the largest size an option takes (elements, bytes, a product of sizes): 2^62, so that every count derived from
#: sizes stays a finite number (a float holds it; a product of two never reaches infinity)
MAX_SIZE = 2**62


def _too_large(text: str, option: str) -> UsageError:
    return UsageError(f"{option}: {text!r} is too large: a size is at most 2^62 (about 4.6e18)")


def _parse_atom(text: str, option: str) -> Fraction:
    """One factor, exactly (a Fraction: 9007199254740993 stays odd, 1e400 is no infinity)."""
    text = text.strip()
    if len(text) > 100:  # Python refuses to read integers of over 4300 digits: say why before it does
        raise _too_large(text[:20] + "...", option)
    pow_match = _POW.match(text)
    if pow_match:
        base, exponent = int(pow_match.group(1)), int(pow_match.group(2))
        if base > 1 and exponent * math.log2(base) > 62:  # checked before computing: 10^99999999 would take ages
            raise _too_large(text, option)
        return Fraction(base**exponent)
    match = _ATOM.match(text)
    if not match:
        raise UsageError(
            f"{option}: cannot read {text!r} as a size: use a number such as 4096, 4k, 2^12, 8.75e9 "
            "or a product such as 4096x4096"
        )
    number = match.group(1)
    if "e" in number.lower() and int(number.lower().partition("e")[2]) > 100:  # 1e99999999: not worth computing
        raise _too_large(text, option)
    value = Fraction(number) * _SUFFIX[(match.group(2) or "").lower()]
    if value > MAX_SIZE:
        raise _too_large(text, option)
    return value


def parse_size(text: str, option: str = "size", *, allow_zero: bool = False, integer: bool = True) -> float:
    """One size: ``4096``, ``4k`` (=4000), ``4Ki`` (=4096), ``2^12``, ``8.75e9``, ``4096x4096`` (product).

    A size is finite and at most :data:`MAX_SIZE` (a product too): a UsageError naming ``option`` otherwise."""
    parts = re.split(r"\s*[x*]\s*", text.strip(), flags=re.IGNORECASE)
    value = Fraction(1)
    for part in parts:
        value *= _parse_atom(part if len(parts) == 1 or part.strip() else text, option)  # 'x', '4x': say all of it
        if value > MAX_SIZE:
            raise _too_large(text, option)
    if value < 0 or (value == 0 and not allow_zero):
        raise UsageError(f"{option}: {text!r} must be {'zero or more' if allow_zero else 'positive'}")
    if integer:
        if value.denominator != 1:
            raise UsageError(f"{option}: {text!r} is not a whole number")
        return int(value)
    return float(value)


def split_list(text: str, option: str) -> list[str]:
    """A comma list of words (device names, dtypes): ``a,b,c``; an empty item is a UsageError."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise UsageError(f"{option}: empty item in {text!r}: write a comma list such as a,b,c")
    return items


def parse_sizes(text: str, option: str = "size", **kwargs: bool) -> list:
    """A comma list of sizes (a sweep): ``1,8,64,256``."""
    items = [item for item in text.split(",")]
    if any(not item.strip() for item in items):
        raise UsageError(f"{option}: empty item in {text!r}: write a comma list such as 1,8,64")
    return [parse_size(item, option, **kwargs) for item in items]


#: time units an option takes (``5us``, ``1.2 ms``), in seconds, exactly; ``µs`` is ``us``
TIME_UNITS: dict[str, Fraction] = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),
    "ms": Fraction(1, 10**3),
    "s": Fraction(1),
    "min": Fraction(60),
    "h": Fraction(3600),
}
_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)(?:e([+-]?\d+))?\s*(ns|us|µs|ms|s|min|h)?\s*$", re.IGNORECASE)
MIN_TIME_S, MAX_TIME_S = Fraction(1, 10**9), 10**9  # 1 ns to about 32 years: a time outside them is a typo
_TIME_RANGE = f"a time is 1 ns to {MAX_TIME_S:g} s"


def parse_time(text: str, option: str, unit: str = "s") -> float:
    """A time in ``unit`` (an option's documented unit: ``s``, ``ms``, ``us``): ``5us``, ``5 us``, ``1.2ms``,
    ``0.5s``, ``250ns``, ``2min``, or a bare number, read in ``unit``. Exact before the last rounding
    (``1.2ms`` in us is 1200.0). Positive and finite, 1 ns to :data:`MAX_TIME_S` seconds: a UsageError naming
    ``option`` otherwise."""
    scale = TIME_UNITS[unit]
    match = _TIME.match(text)
    if not match:
        raise UsageError(
            f"{option}: cannot read {text!r} as a time: use a number in {unit} or one with a unit, "
            "such as 5us, 1.2ms, 0.5s, 250ns"
        )
    number, exponent, given = match.group(1), match.group(2), match.group(3)
    if exponent is not None and abs(int(exponent)) > 100:  # 1e99999999: not worth computing
        raise UsageError(f"{option}: {text!r} is out of range: {_TIME_RANGE}")
    seconds = Fraction(number) * Fraction(10) ** int(exponent or 0) * (TIME_UNITS[given.lower()] if given else scale)
    if seconds <= 0:
        raise UsageError(f"{option}: {text!r} must be positive")
    if not MIN_TIME_S <= seconds <= MAX_TIME_S:
        raise UsageError(f"{option}: {text!r} is out of range: {_TIME_RANGE}")
    return float(seconds / scale)


def parse_times(text: str, option: str, unit: str = "s") -> list[float]:
    """A comma list of times (a sweep): ``5us,10us`` or ``5,10`` in ``unit``."""
    items = text.split(",")
    if any(not item.strip() for item in items):
        raise UsageError(f"{option}: empty item in {text!r}: write a comma list such as 5us,10us")
    return [parse_time(item, option, unit) for item in items]


def _si(value: float, unit: str, prefixes: str = "kMGTPE", digits: int = 4) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}"
    exponent = min(max(math.floor(math.log10(abs(value)) / 3), 0), len(prefixes))
    text = f"{value / 1000**exponent:.{digits}g}"
    if abs(float(text)) >= 1000 and exponent < len(prefixes):  # 999999 rounds to 1000k: say 1M
        exponent += 1
        text = f"{value / 1000**exponent:.{digits}g}"
    prefix = "" if exponent == 0 else prefixes[exponent - 1]
    return f"{text} {prefix}{unit}"


def format_count(value: float, unit: str = "FLOP") -> str:
    """137438953472 -> '137 GFLOP' (decimal prefixes)."""
    return _si(value, unit)


def format_bytes(value: float) -> str:
    """100663296 -> '101 MB' (decimal, as spec sheets and the source texts write them)."""
    return _si(value, "B")


def format_rate(value: float, unit: str = "FLOP/s") -> str:
    """9.894e14 -> '989 TFLOP/s'."""
    return _si(value, unit)


def format_bandwidth(bytes_per_s: float) -> str:
    return _si(bytes_per_s, "B/s")


def format_time(seconds: float) -> str:
    """Seconds with the unit that keeps 3 significant digits: '5.22 ms', '143 us', '1.2 s'."""
    if seconds == 0 or not math.isfinite(seconds):
        return f"{seconds:g} s"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_intensity(flop_per_byte: float) -> str:
    """FLOP/byte: one decimal from 10 up (1365.3), three significant digits below (1.25, 0.999)."""
    if not math.isfinite(flop_per_byte):
        return "inf"
    if flop_per_byte >= 10:
        return f"{flop_per_byte:,.1f}"
    return f"{flop_per_byte:.3g}"
