"""The threshold language of `roofline gate`: what fails, in which direction, by how much.

A rule is ``METRIC:LIMIT`` (``--fail-on``, repeatable; or the ``fail-on`` list of ``[tool.roofline.gate]``)::

    rule    = metric ":" limit
    metric  = "time" | "efficiency" | "eff" | "flops" | "bytes" | "kernels"      (case-insensitive)
    limit   = "off" | [sign] number [unit]
    sign    = "+" | "-"                 the direction of change that fails
    number  = 0, 5, 2.5, .5, 1e6 ...    never negative (the sign is the direction)
    unit    = "%"                       relative to the baseline's value
            | "s" | "ms" | "us" | "ns"  time only: an absolute time
            | (none)                    absolute, in the metric's unit: seconds, the efficiency as a fraction of
                                        the roof (0.05 = 5 points), FLOPs, bytes, kernels

- ``time`` fails when it rises: ``time:+10%`` (or ``time:10%``). A ``-`` sign is an error.
- ``efficiency`` (achieved / attainable) fails when it falls: ``efficiency:-5%`` (or ``efficiency:5%``).
  A ``+`` sign is an error.
- Counts fail in the direction of their sign: ``flops:+0`` on any increase, ``flops:-10%`` on a fall of more
  than 10%; without a sign in both directions: ``flops:0`` on any change.
- ``METRIC:off`` turns the metric's checks off.

A limit fails when the change is *beyond* it (strictly): ``flops:0`` fails on any change, ``time:+10%`` on a
rise of more than 10%. Sources apply in order: the defaults, then pyproject.toml, then ``--fail-on``. A source
that names a metric replaces every earlier limit of that metric (``--fail-on flops:+0`` leaves only the rise
check of flops); within one source the rules of a metric combine (``flops:+0`` and ``flops:-10%``).

Defaults (:data:`DEFAULT_RULES`): ``flops:0 bytes:0 kernels:0 efficiency:-5%``, time off. On one machine
``efficiency:-5%`` is ``time:+5.26%`` (efficiency = roof time / measured time, the roof time being fixed by
the counts); across GPUs of one family only the efficiency compares, so it is the default time-like check.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from roofline.errors import UsageError

Direction = Literal["+", "-"]

METRICS = ("time", "efficiency", "flops", "bytes", "kernels")
COUNT_METRICS = ("flops", "bytes", "kernels")
TIMED_METRICS = ("time", "efficiency")
ALIASES = {"eff": "efficiency"}
#: the direction in which each timed metric regresses
BAD_DIRECTION: dict[str, Direction] = {"time": "+", "efficiency": "-"}

DEFAULT_RULES = ("flops:0", "bytes:0", "kernels:0", "efficiency:-5%")
DEFAULT_CONFIDENCE = 0.99

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_LIMIT = re.compile(r"(?P<sign>[+-])?(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)(?P<unit>%|s|ms|us|µs|ns)?")
_EXAMPLES = "e.g. efficiency:-5%, time:+10%, time:+50us, flops:0, kernels:+1"


class ThresholdError(UsageError):
    """A malformed --fail-on rule (exit 2)."""


@dataclass(frozen=True)
class Limit:
    """One direction of one metric: a change beyond ``value`` in ``direction`` fails."""

    metric: str
    direction: Direction
    value: float  # >= 0: a fraction of the baseline (relative) or an amount in the metric's unit
    relative: bool
    text: str  # the rule as written, normalised: 'efficiency:-5%'

    @property
    def log_bound(self) -> float:
        """Relative limits as a log ratio: log(1 + value) rising, log(1 - value) falling."""
        return math.log1p(self.value) if self.direction == "+" else math.log1p(-self.value)


@dataclass(frozen=True)
class Rule:
    """A parsed ``METRIC:LIMIT``: the limits it sets, or the metric it turns off (``limits`` empty)."""

    metric: str
    limits: tuple[Limit, ...]
    text: str

    @property
    def off(self) -> bool:
        return not self.limits


def _metric(name: str, text: str, source: str) -> str:
    metric = ALIASES.get(name.strip().lower(), name.strip().lower())
    if metric not in METRICS:
        raise ThresholdError(f"{source} {text!r}: unknown metric {name.strip()!r}: use one of {', '.join(METRICS)}")
    return metric


def parse_rule(text: str, source: str = "--fail-on") -> Rule:
    """One rule; ThresholdError (one line, naming ``source``) when it is malformed."""
    if not isinstance(text, str) or ":" not in text:
        raise ThresholdError(f"{source} {text!r}: write METRIC:LIMIT, {_EXAMPLES}")
    name, _, limit_text = text.partition(":")
    metric = _metric(name, text, source)
    limit_text = limit_text.strip()
    if limit_text.lower() == "off":
        return Rule(metric, (), f"{metric}:off")
    match = _LIMIT.fullmatch(limit_text.lower().replace(" ", ""))
    if match is None:
        raise ThresholdError(
            f"{source} {text!r}: {limit_text!r} is not a limit: write [+|-]NUMBER[%], or off ({_EXAMPLES})"
        )
    sign, unit = match["sign"], match["unit"]
    value = float(match["number"])
    relative = unit == "%"
    if relative:
        value /= 100
    elif unit:
        if metric != "time":
            raise ThresholdError(
                f"{source} {text!r}: a time unit ({unit}) fits only time; {metric} takes a % or a number"
            )
        value *= TIME_UNITS[unit]
    if not math.isfinite(value):
        raise ThresholdError(f"{source} {text!r}: the limit must be a finite number")
    bad = BAD_DIRECTION.get(metric)
    if bad is not None and sign is not None and sign != bad:
        verb = "rises" if bad == "+" else "falls"
        raise ThresholdError(
            f"{source} {text!r}: {metric} regresses when it {verb}: write {metric}:{bad}{limit_text.lstrip('+-')}"
        )
    directions: tuple[Direction, ...] = (bad,) if bad else ((sign,) if sign else ("+", "-"))  # type: ignore[assignment]
    if relative and "-" in directions and value >= 1:
        raise ThresholdError(f"{source} {text!r}: a fall of 100% or more cannot happen: use a smaller limit, or off")
    normal = f"{metric}:{sign or bad or ''}{limit_text.lstrip('+-')}"  # timed metrics: their sign made explicit
    return Rule(metric, tuple(Limit(metric, d, value, relative, normal) for d in directions), normal)


@dataclass
class Rules:
    """The limits in force, keyed by (metric, direction), plus how timed metrics are tested."""

    limits: dict[tuple[str, Direction], Limit] = field(default_factory=dict)
    confidence: float = DEFAULT_CONFIDENCE
    stats: bool = True  # False (--no-stats): compare single numbers (medians) against the limits

    def apply(self, rule: Rule) -> None:
        if rule.off:
            for key in [key for key in self.limits if key[0] == rule.metric]:
                del self.limits[key]
        for limit in rule.limits:
            self.limits[(limit.metric, limit.direction)] = limit

    def for_metric(self, metric: str) -> list[Limit]:
        return [limit for (name, _), limit in self.limits.items() if name == metric]

    @property
    def texts(self) -> list[str]:
        """The rules in force, one per metric (both directions of an unsigned count rule shown once)."""
        return list(dict.fromkeys(limit.text for metric in METRICS for limit in self.for_metric(metric)))


def build_rules(
    *sources: tuple[str, list[str] | tuple[str, ...]],
    confidence: float | None = None,
    stats: bool = True,
    defaults: bool = True,
) -> Rules:
    """Rules from the defaults and then each (source name, rule texts) in order; later rules win."""
    rules = Rules(stats=stats)
    if confidence is not None:
        if not (isinstance(confidence, (int, float)) and 0.5 <= confidence < 1):
            raise ThresholdError(f"--confidence {confidence!r}: use a level between 0.5 and 1, e.g. 0.99")
        rules.confidence = float(confidence)
    everything = [("default", DEFAULT_RULES)] if defaults else []
    for source, texts in [*everything, *sources]:
        named: set[str] = set()
        for text in texts:
            rule = parse_rule(text, source)
            if rule.metric not in named:  # this source decides the metric: earlier sources' limits go
                named.add(rule.metric)
                rules.apply(Rule(rule.metric, (), f"{rule.metric}:off"))
            rules.apply(rule)
    return rules
