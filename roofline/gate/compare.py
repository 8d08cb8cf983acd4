"""Compare a report's points with a baseline's: pure functions from values to a :class:`GateResult`.

Per matched point (same key, see roofline.report.baseline), every limit in force is one :class:`Check`:

- Counts (flops, bytes, kernels) are deterministic: the change is compared with the limit directly.
- Time and efficiency are compared on the timing samples of both sides: the Hodges–Lehmann shift with its
  Mann–Whitney confidence interval (roofline.samples.shift), on log-times for % limits (a ratio) and on the
  values themselves for absolute ones. Efficiency samples are roof time / sample time, so a change of roofs
  (another GPU, a new calibration) moves them too.
    regression    the whole interval lies beyond the limit
    inconclusive  the estimate lies beyond the limit but the interval reaches back over it (too noisy to decide)
    improvement   the whole interval lies beyond the mirrored limit, the other way (time -9.1% for time:+10%)
    pass          otherwise
  A baseline pooling several runs widens each point's limit by how far its runs drifted from their median
  (run-to-run drift shifts every sample of a run alike: no test on one run's samples can see it). A baseline of
  one run cannot know that drift: its limits are widened by an assumed noise (:func:`one_run_noise`: at least
  ONE_RUN_NOISE, more for points whose samples spread more), and a change beyond the limit but within that noise
  is inconclusive, not a regression (the verdict says the baseline has one run).
  Without samples on either side, a change beyond the limit is inconclusive ("no samples"): one number does
  not tell a change from noise. With ``stats`` off (--no-stats) the single numbers (bench: medians; diagnose:
  means per iteration) are compared directly and a change beyond the limit is a regression.

A point's verdict is its worst check's (regression > inconclusive > improvement > pass); points only in the
report are "new", only in the baseline "vanished" (reported, never failed by themselves). Totals: the counts
summed (diagnose: over every op, so an added op that adds FLOPs fails a flops check; bench: over the matched
rows, since a row added to a suite is not a regression); diagnose also sums each iteration's op times, and
tests the model's time and efficiency on those sums, when every op has one sample per iteration.
The gate's verdict: regression if any check regressed, else inconclusive if any was, else pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, repeat
from operator import truediv
from typing import Any, Literal

from pydantic import BaseModel, Field

from roofline import ironlaw
from roofline.gate.thresholds import COUNT_METRICS, Limit, Rules
from roofline.report.baseline import Baseline, Identity, Point
from roofline.report.machine import MachineInfo, differences
from roofline.samples import (
    Shift,
    median,
    numpy_or_none,
    quantile_columns,
    quantile_rows,
    shift,
    shift_rows,
    shifts,
)
from roofline.yamlio import dumps_json

Verdict = Literal["pass", "improvement", "inconclusive", "regression", "new", "vanished"]
GateVerdict = Literal["pass", "inconclusive", "regression"]
Method = Literal["exact", "samples", "no samples", "single numbers"]

SEVERITY = {"pass": 0, "new": 0, "vanished": 0, "improvement": 1, "inconclusive": 2, "regression": 3}
EXIT_CODES = {"pass": 0, "regression": 1, "inconclusive": 3}
#: The run-to-run noise a baseline of one run is assumed to have, at least (a time ratio): on the lent H100 the
#: median of one 8192^3 bf16 GEMM ranged over 1.40-1.61 ms (15%) between runs of the same suite, and identical
#: runs seconds apart moved noisy points by 21% (docs/ci.md). A baseline of two or more runs measures it instead.
ONE_RUN_NOISE = 0.10
ONE_RUN_ADVICE = "save a baseline of two or more runs: roofline baseline save run1.json run2.json -o BASELINE.json"


class Check(BaseModel):
    """One limit applied to one point (or to the totals)."""

    metric: str
    rule: str  # the limit as written: 'efficiency:-5%'
    relative: bool
    baseline: float | None = None  # the point values: median (bench) / mean (diagnose) time, efficiency, count
    current: float | None = None
    change: float | None = None  # relative: current / baseline - 1 (the shift's estimate); absolute: a difference
    low: float | None = None  # confidence interval of the change, in the same form (None: no interval)
    high: float | None = None
    drift: float | None = None  # the baseline's run-to-run drift added to the limit (2+ runs), in the same form
    noise: float | None = None  # one-run baseline: the run-to-run noise assumed and added to the limit, same form
    method: Method
    verdict: Verdict
    reason: str = ""


class PointResult(BaseModel):
    key: str
    label: str
    verdict: Verdict
    checks: list[Check] = Field(default_factory=list)
    baseline: Point | None = None
    current: Point | None = None

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.verdict == "regression"]


class GateResult(BaseModel):
    verdict: GateVerdict
    source: str
    identity: Identity
    rules: list[str]
    confidence: float
    stats: bool
    points: list[PointResult]  # matched points, in report order
    new: list[PointResult] = Field(default_factory=list)
    vanished: list[PointResult] = Field(default_factory=list)
    totals: list[Check] = Field(default_factory=list)
    baseline_machine: MachineInfo
    current_machine: MachineInfo
    machine_differences: list[str] = Field(default_factory=list)
    baseline_commit: str | None = None
    baseline_created_utc: str = ""
    warnings: list[str] = Field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_json(self) -> str:
        """The result as JSON, the points' samples left out (the reports hold them)."""
        sides = {"baseline": {"samples_s"}, "current": {"samples_s"}}
        exclude = {"points": {"__all__": sides}, "new": {"__all__": sides}, "vanished": {"__all__": sides}}
        return dumps_json(self.model_dump(mode="json", exclude=exclude), indent=2) + "\n"

    def count(self, verdict: str) -> int:
        return sum(1 for p in self.points if p.verdict == verdict)


# ------------------------------------------------------------------------------------------ making results

#: False: every Check and PointResult validated by pydantic and every count compared in full (the tests compare
#: both ways); True: the gate's own values, of the fields' types, set without validation (:func:`_trusted`)
_TRUSTED = True
_CHECK_FIELDS = tuple(Check.model_fields)
#: (metric, rule, relative) -> the fields of an unchanged count's check but its values (:func:`_unchanged_count`)
_COUNT_FIELDS: dict[tuple[str, str, bool], dict[str, Any]] = {}
_SETTER = object.__setattr__


def _trusted(cls: type[BaseModel], fields: dict[str, Any], given: Iterable[str]) -> Any:
    """An instance of the pydantic model ``cls`` holding ``fields`` (every field, each of its type), made without
    validating them: what ``cls(**{name: fields[name] for name in given})`` makes (the same ``__dict__`` and fields
    set), for values the gate computed itself. pydantic's validation (2-3 us a model) and ``model_construct`` (more)
    were most of a 100,000-point gate's time after its statistics: 500,000 checks and points."""
    model = cls.__new__(cls)
    _SETTER(model, "__dict__", fields)
    _SETTER(model, "__pydantic_fields_set__", set(given))
    _SETTER(model, "__pydantic_extra__", None)
    _SETTER(model, "__pydantic_private__", None)
    return model


def _check(**fields: Any) -> Check:
    """A Check of these fields: validated (``_TRUSTED`` off), else made as :func:`_trusted` (float fields given as
    ints made floats, as pydantic does)."""
    if not _TRUSTED:
        return Check(**fields)
    values = dict.fromkeys(_CHECK_FIELDS)
    values["reason"] = ""
    values.update(fields)
    for name in ("baseline", "current", "change", "low", "high", "drift", "noise"):
        value = values[name]
        if value is not None and type(value) is not float:
            values[name] = float(value)
    return _trusted(Check, values, fields)


def _point_result(key: str, label: str, verdict: Verdict, checks: list[Check], before: Point, after: Point) -> Any:
    if not _TRUSTED:
        return PointResult(key=key, label=label, verdict=verdict, checks=checks, baseline=before, current=after)
    fields = {"key": key, "label": label, "verdict": verdict, "checks": checks, "baseline": before, "current": after}
    return _trusted(PointResult, fields, fields)


# ------------------------------------------------------------------------------------------ formatting


def percent(change: float) -> str:
    """+12.3%, -0.4%, +0%: signed, 1 decimal under 10%, none above 100%."""
    value = 100 * change
    if value == 0:
        return "+0%"
    digits = 1 if abs(value) < 100 else 0
    return f"{value:+.{digits}f}%"


def amount(metric: str, value: float, signed: bool = False) -> str:
    """A value or a difference in the metric's unit: '1.5 ms', '32.7%' (efficiency), '2.147 GFLOP', '3'."""
    from roofline.units import format_bytes, format_count, format_time

    sign = ("+" if value >= 0 else "-") if signed else ("-" if value < 0 else "")
    size = abs(value)
    if metric == "time":
        text = format_time(size)
    elif metric == "efficiency":
        text = f"{100 * size:.3g}" + (" pt" if signed else "%")  # 3 digits: 32.7%, 0.0421%
    elif metric == "flops":
        text = format_count(size)
    elif metric == "bytes":
        text = format_bytes(size)
    else:
        text = f"{size:g}"
    return sign + text


def change_text(check: Check) -> str:
    if check.change is None:
        return ""
    return percent(check.change) if check.relative else amount(check.metric, check.change, signed=True)


def interval_text(check: Check) -> str:
    if check.low is None or check.high is None:
        return ""
    if not (math.isfinite(check.low) and math.isfinite(check.high)):
        return "unbounded"
    if check.relative:
        return f"{percent(check.low)} to {percent(check.high)}"
    return f"{amount(check.metric, check.low, True)} to {amount(check.metric, check.high, True)}"


# ------------------------------------------------------------------------------------------ counts


def _count_check(metric: str, limits: Sequence[Limit], before: float | None, after: float | None) -> list[Check]:
    if before is None or after is None:
        return []
    if _TRUSTED and type(before) in _NUMBERS and type(after) in _NUMBERS and before == after and math.isfinite(before):
        return _unchanged_count(metric, limits, before, after)  # NB: nearly every count of a gate
    # (verdict, reason, limit) of each limit, merged before any Check is made: an unsigned count limit is two
    # limits (rise, fall) of one rule, shown once with the worse verdict (the first of equals)
    merged: dict[str, tuple[Verdict, str, Limit]] = {}
    diff = after - before
    rel_change = diff / before if before else (0.0 if diff == 0 else math.inf)
    for limit in limits:
        amount_ = rel_change if limit.relative else diff
        toward = amount_ if limit.direction == "+" else -amount_
        if toward > limit.value:
            verdict: Verdict = "regression"
            what = percent(rel_change) if math.isfinite(rel_change) else "from 0"
            reason = (
                f"{metric} {amount(metric, before)} -> {amount(metric, after)} ({what}) beyond {limit.text}: "
                "the work changed (intended? save a new baseline)"
            )
        else:
            verdict = "improvement" if diff < 0 and limit.direction == "+" and len(limits) == 1 else "pass"
            reason = f"{metric} {amount(metric, before)} -> {amount(metric, after)}" if diff else ""
        kept = merged.get(limit.text)
        if kept is None or SEVERITY[verdict] > SEVERITY[kept[0]]:
            merged[limit.text] = (verdict, reason, limit)
    checks = []
    for verdict, reason, limit in merged.values():
        change = rel_change if limit.relative else diff
        checks.append(
            _check(
                metric=metric,
                rule=limit.text,
                relative=limit.relative,
                baseline=before,
                current=after,
                change=change if math.isfinite(change) else None,
                method="exact",
                verdict=verdict,
                reason=reason,
            )
        )
    return checks


_NUMBERS = (int, float)


def _unchanged_count(metric: str, limits: Sequence[Limit], before: float, after: float) -> list[Check]:
    """:func:`_count_check` of a count that did not change (finite numbers, ``before == after``): every limit
    passes (a limit is never negative) with no reason, one check per rule text, made without validation."""
    diff = after - before
    rel_change = diff / before if before else 0.0
    checks: list[Check] = []
    texts: set[str] = set()
    for limit in limits:
        if limit.text in texts:  # an unsigned rule's two directions: one check, the first (both pass)
            continue
        texts.add(limit.text)
        change = rel_change if limit.relative else diff
        fields = _COUNT_FIELDS.get((metric, limit.text, limit.relative))
        if fields is None:
            fields = {**dict.fromkeys(_CHECK_FIELDS), "method": "exact", "verdict": "pass", "reason": ""}
            fields.update(metric=metric, rule=limit.text, relative=limit.relative)
            _COUNT_FIELDS[metric, limit.text, limit.relative] = fields
        fields = fields.copy()
        fields["baseline"] = float(before)
        fields["current"] = float(after)
        fields["change"] = float(change) if math.isfinite(change) else None
        checks.append(_trusted(Check, fields, _COUNT_GIVEN))
    return checks


#: the fields :func:`_count_check` gives a Check
_COUNT_GIVEN = ("metric", "rule", "relative", "baseline", "current", "change", "method", "verdict", "reason")


# ------------------------------------------------------------------------------------------ timed


def _samples(point: Point, metric: str, relative: bool) -> list[float] | None:
    """The values the shift is measured on: log-time / log-efficiency (relative) or time / efficiency."""
    samples = point.samples_s
    if not _positive(samples):
        return None
    if metric == "time":
        return list(map(math.log, samples)) if relative else list(samples)
    roof = point.roof_time_s
    if not roof or roof <= 0:
        return None
    # each sample's roofline time / time (ironlaw.efficiency, whose 0-time case _positive has ruled out), in C
    efficiencies = map(truediv, repeat(roof), samples)
    return list(map(math.log, efficiencies)) if relative else list(efficiencies)


def _positive(samples: Sequence[float]) -> bool:
    """Some samples, each finite and above 0 (checked in C: isfinite first, so that no NaN reaches min)."""
    return bool(samples) and all(map(math.isfinite, samples)) and min(samples) > 0


def _value(point: Point, metric: str) -> float | None:
    value = point.time_s if metric == "time" else point.efficiency
    return value if value is not None and value > 0 and math.isfinite(value) else None


def _drift(point: Point, metric: str, relative: bool) -> float:
    """How far the baseline's runs of this point strayed from their median (0 with fewer than two runs), in the
    units the shift is measured in: a log ratio (relative) or the metric's own unit."""
    medians = [m for m in point.run_medians_s if m > 0]
    if len(medians) < 2:
        return 0.0
    if relative:
        values = [math.log(m) for m in medians]  # efficiency = roof / time: the same log distances
    elif metric == "time":
        values = medians
    elif point.roof_time_s:
        values = [ironlaw.efficiency(point.roof_time_s, m) for m in medians]
    else:
        return 0.0
    middle = median(values)
    return max(abs(v - middle) for v in values)


def _log_spread(samples: Sequence[float]) -> float:
    """Half the p20-p80 range of the samples as a log ratio, log(p80 / p20) / 2: the '±' of the bench table
    (0 with fewer than 5 samples, or any not above 0)."""
    from roofline.samples import quantile

    if len(samples) < 5 or not _positive(samples):
        return 0.0
    return math.log(quantile(samples, 0.8) / quantile(samples, 0.2)) / 2


def _log_spreads(sets: Sequence[Sequence[float]]) -> list[float]:
    """:func:`_log_spread` of each set, their quantiles computed together (roofline.samples.quantile_rows)."""
    counted = [i for i, samples in enumerate(sets) if len(samples) >= 5 and _positive(samples)]
    found = [0.0] * len(sets)
    for i, (high, low) in zip(counted, quantile_rows([sets[i] for i in counted], (0.8, 0.2)), strict=True):
        found[i] = math.log(high / low) / 2
    return found


def one_run_noise(before: Point, after: Point) -> float:
    """The run-to-run noise assumed for a point of a one-run baseline, as a log time ratio: ONE_RUN_NOISE, or the
    spread of either run's samples (half their p20-p80 range) where wider: a point whose samples spread ±20%
    within a run can land 20% off from one run to the next, and one run cannot tell."""
    return max(math.log1p(ONE_RUN_NOISE), _log_spread(before.samples_s), _log_spread(after.samples_s))


def one_run(point: Point) -> bool:
    """A baseline point measured in one run (or saved before baselines kept each run's median)."""
    return len([m for m in point.run_medians_s if m > 0]) < 2


def _in_units(log_ratio: float, metric: str, relative: bool, base_value: float) -> float:
    """A log time ratio as a widening of a limit in its own units: a log ratio (relative), or the time (or
    efficiency) that ratio moves ``base_value`` by."""
    if relative:
        return log_ratio
    if metric == "time":
        return base_value * math.expm1(log_ratio)
    return base_value * -math.expm1(-log_ratio)  # efficiency = roof / time: it falls by 1 - 1/ratio


#: what is computed for every matched pair at once (:func:`_pair_shifts`): (metric, relative) -> the shift, or None
#: where either side has no samples to shift; _NOISE -> the one-run noise of a pair whose baseline has one run
Shifts = Mapping[tuple[str, bool], Any]
#: the key under which a pair's one-run noise (:func:`one_run_noise`) is computed beforehand
_NOISE = ("noise", False)


def _pair_shifts(pairs: Sequence[tuple[Point, Point]], rules: Rules) -> list[dict[tuple[str, bool], Any]]:
    """The shift of every timed limit's samples of every matched (baseline, current) pair, and the one-run noise of
    each pair of a one-run baseline, as _timed_check would compute them one by one, computed together
    (with numpy where importable: :func:`_array_statistics`; else roofline.samples.shifts and quantile_rows one
    set at a time: the same values)."""
    found: list[dict[tuple[str, bool], Any]] = [{} for _ in pairs]
    if not rules.stats:
        return found
    limits = [limit for metric in ("time", "efficiency") for limit in rules.for_metric(metric)]
    kinds = list(dict.fromkeys((limit.metric, limit.relative) for limit in limits))
    numpy = numpy_or_none()
    if numpy is not None:
        _array_statistics(numpy, pairs, kinds, rules.confidence, found)
        return found
    one = [index for index, (before, _) in enumerate(pairs) if one_run(before)]
    spreads = iter(_log_spreads([side.samples_s for i in one for side in pairs[i]]))
    floor = math.log1p(ONE_RUN_NOISE)
    for index in one:  # NB: one_run_noise, the samples' spreads computed together
        found[index][_NOISE] = max(floor, next(spreads), next(spreads))
    for metric, relative in kinds:
        todo: list[tuple[list[float], list[float]]] = []
        where: list[int] = []
        for index, (before, after) in enumerate(pairs):
            if _value(before, metric) is None or _value(after, metric) is None:
                continue  # _timed_check compares nothing
            x, y = _samples(before, metric, relative), _samples(after, metric, relative)
            if x and y:
                todo.append((x, y))
                where.append(index)
            else:
                found[index][metric, relative] = None
        for index, result in zip(where, shifts(todo, rules.confidence), strict=True):
            found[index][metric, relative] = result
    return found


def _array_statistics(
    numpy: Any,
    pairs: Sequence[tuple[Point, Point]],
    kinds: Sequence[tuple[str, bool]],
    confidence: float,
    found: list[dict[tuple[str, bool], Any]],
) -> None:
    """:func:`_pair_shifts` with numpy, set in ``found``: the pairs of the same sample counts as two arrays (made
    once), each row checked as :func:`_positive` checks a set, the one-run noise's quantiles interpolated as
    roofline.samples.quantile_rows does, efficiencies (roof / sample) by the same IEEE divisions, logs by math.log
    mapped in C (numpy's own log may differ in the last bit), the shifts by roofline.samples.shift_rows."""
    floor = math.log1p(ONE_RUN_NOISE)
    by_size: dict[tuple[int, int], list[int]] = {}
    for index, (before, after) in enumerate(pairs):
        by_size.setdefault((len(before.samples_s), len(after.samples_s)), []).append(index)
    for (n, m), indices in by_size.items():
        befores = [pairs[i][0] for i in indices]
        afters = [pairs[i][1] for i in indices]
        x, x_ok = _sample_array(numpy, befores, n)
        y, y_ok = _sample_array(numpy, afters, m)
        one = [row for row, before in enumerate(befores) if one_run(before)]
        if one:
            noises = zip(_array_spreads(numpy, x, x_ok, one), _array_spreads(numpy, y, y_ok, one), strict=True)
            for row, (low, high) in zip(one, noises, strict=True):
                found[indices[row]][_NOISE] = max(floor, low, high)
        for metric, relative in kinds:
            key = (metric, relative)
            timed = [row for row in range(len(indices)) if _value(befores[row], metric) and _value(afters[row], metric)]
            if not timed:
                continue
            ok = x_ok & y_ok
            if metric == "efficiency":
                x_roof, x_roof_ok = _roofs(numpy, befores)
                y_roof, y_roof_ok = _roofs(numpy, afters)
                ok = ok & x_roof_ok & y_roof_ok
            flags = ok.tolist()
            rows = [row for row in timed if flags[row]]
            for row in timed:
                if not flags[row]:
                    found[indices[row]][key] = None
            if not rows:
                continue
            xs, ys = x[rows], y[rows]
            if metric == "efficiency":
                xs, ys = x_roof[rows, None] / xs, y_roof[rows, None] / ys  # NB: every sample above 0 here
            if relative:
                xs, ys = _logs(numpy, xs), _logs(numpy, ys)
            for row, result in zip(rows, shift_rows(xs, ys, confidence), strict=True):
                found[indices[row]][key] = result


def _sample_array(numpy: Any, points: Sequence[Point], n: int) -> tuple[Any, Any]:
    """The samples of ``points`` (n each) as the rows of an array, and whether each row is :func:`_positive`."""
    raw = numpy.fromiter(chain.from_iterable(p.samples_s for p in points), dtype=float, count=n * len(points))
    raw = raw.reshape(len(points), n)
    ok = numpy.isfinite(raw).all(axis=1) & (raw > 0).all(axis=1) if n else numpy.zeros(len(points), dtype=bool)
    return raw, ok


def _roofs(numpy: Any, points: Sequence[Point]) -> tuple[Any, Any]:
    """The points' roof times (1 where none) and where :func:`_samples` takes them (set, not 0 or below)."""
    roofs = [point.roof_time_s for point in points]
    ok = numpy.array([bool(roof) and roof > 0 for roof in roofs], dtype=bool)  # type: ignore[operator]
    return numpy.array([roof if roof else 1.0 for roof in roofs], dtype=float), ok


def _logs(numpy: Any, values: Any) -> Any:
    """math.log of each value (an array's), as an array of the same shape."""
    flat = values.ravel().tolist()
    return numpy.fromiter(map(math.log, flat), dtype=float, count=len(flat)).reshape(values.shape)


def _array_spreads(numpy: Any, raw: Any, ok: Any, rows: Sequence[int]) -> list[float]:
    """:func:`_log_spread` of the given rows of ``raw`` (``ok``: each row :func:`_positive`)."""
    n = raw.shape[1]
    found = [0.0] * len(rows)
    if n < 5:
        return found
    flags = ok.tolist()
    counted = [k for k, row in enumerate(rows) if flags[row]]
    if not counted:
        return found
    ordered = raw[[rows[k] for k in counted]]
    ordered.sort(axis=1)
    high, low = quantile_columns(ordered, (0.8, 0.2))
    for k, ratio in zip(counted, (high / low).tolist(), strict=True):
        found[k] = math.log(ratio) / 2
    return found


def _timed_check(
    limit: Limit, before: Point, after: Point, rules: Rules, computed: Shifts | None = None
) -> Check | None:
    metric = limit.metric
    base_value, cur_value = _value(before, metric), _value(after, metric)
    if base_value is None or cur_value is None:
        return None  # not timed, or no roof time: nothing to compare
    relative = limit.relative
    bad = 1.0 if limit.direction == "+" else -1.0
    shown = math.expm1 if relative else _same

    # Everything is decided in "shift" units: log ratio (relative) or difference (absolute). A baseline of several
    # runs widens the limit by how far this point drifted between them: a run can land that far off unchanged.
    drift = _drift(before, metric, relative)
    # A one-run baseline cannot know the drift: an assumed noise widens the limit for a regression, and a change
    # beyond the limit itself but within that noise is inconclusive (judged with the samples only: --no-stats
    # compares single numbers on machines known to be quiet).
    noise = 0.0
    if rules.stats and one_run(before):
        known_noise = computed.get(_NOISE) if computed is not None else None
        log_noise = one_run_noise(before, after) if known_noise is None else known_noise
        noise = _in_units(log_noise, metric, relative, base_value)
    runs = len(before.run_medians_s)
    known = (limit.log_bound if relative else bad * limit.value) + bad * drift  # the limit, drift included
    bound = known + bad * noise  # and the one-run noise: what a regression must pass
    mirror = -bound
    result: Shift | None = None
    if rules.stats:
        if computed is not None and (metric, relative) in computed:
            result = computed[metric, relative]
        else:
            x, y = _samples(before, metric, relative), _samples(after, metric, relative)
            result = shift(x, y, rules.confidence) if x and y else None
    fields = {
        "metric": metric,
        "rule": limit.text,
        "relative": relative,
        "baseline": base_value,
        "current": cur_value,
        "drift": shown(drift) if drift else None,
        "noise": shown(noise) if noise else None,
    }
    # NB: the reasons' text is made for the checks that do not pass (most pass: no text to make)
    if result is not None:
        est, low, high = result.estimate, result.low, result.high
        if min(bad * low, bad * high) > bad * bound:  # the whole interval beyond the limit
            verdict: Verdict = "regression"
            limit_text, _ = _limit_texts(limit, bound, drift, noise, runs)
            reason = f"{_measured(result, limit, rules, shown)}, beyond {limit_text}"
        elif min(bad * low, bad * high) > bad * known:  # beyond the limit, within the noise one run cannot know
            verdict = "inconclusive"
            _, known_value = _limit_texts(limit, known, drift, 0.0, runs)
            reason = (
                f"{_measured(result, limit, rules, shown)}, beyond {known_value} but within the run-to-run noise of "
                "a one-run baseline "
                f"({_noise_text(noise, metric, relative)}): too noisy to decide; {ONE_RUN_ADVICE}"
            )
        elif bad * est > bad * known:
            verdict = "inconclusive"
            _, known_value = _limit_texts(limit, known, drift, 0.0, runs)
            if result.bounded:
                reason = f"{_measured(result, limit, rules, shown)} straddles {known_value}"
            else:
                reason = (
                    f"{metric} {_signed(shown(est), limit)} beyond {known_value}, but too few samples "
                    f"({result.n_baseline} and {result.n_current}) for a {_level(rules)}"
                )
            reason += ": too noisy to decide"
        elif max(bad * low, bad * high) < bad * mirror:  # the whole interval beyond the mirrored limit
            verdict = "improvement"
            reason = _measured(result, limit, rules, shown)
        else:
            verdict = "pass"
            reason = ""
        fields.update(
            change=shown(est),
            low=shown(low) if math.isfinite(low) else -math.inf,
            high=shown(high) if math.isfinite(high) else math.inf,
            method="samples",
            verdict=verdict,
            reason=reason,
        )
        return _check(**fields)
    # Single numbers: the medians (bench) or means (diagnose) themselves (never a regression with stats on, so the
    # one-run noise does not apply: a change beyond the limit is inconclusive).
    est = math.log(cur_value / base_value) if relative else cur_value - base_value
    method: Method = "single numbers" if not rules.stats else "no samples"
    bound, mirror = known, -known
    fields["noise"] = None
    if bad * est > bad * bound:
        if rules.stats:
            verdict = "inconclusive"
            _, known_value = _limit_texts(limit, known, drift, 0.0, runs)
            reason = f"{metric} {_signed(shown(est), limit)} beyond {known_value}, but no samples to tell it from noise"
        else:
            limit_text, _ = _limit_texts(limit, bound, drift, 0.0, runs)
            verdict, reason = "regression", f"{metric} {_signed(shown(est), limit)} beyond {limit_text} (--no-stats)"
    elif bad * est < bad * mirror:
        verdict, reason = "improvement", f"{metric} {_signed(shown(est), limit)}"
    else:
        verdict, reason = "pass", ""
    return _check(**fields, change=shown(est), method=method, verdict=verdict, reason=reason)


def _measured(result: Shift, limit: Limit, rules: Rules, shown: Callable[[float], float]) -> str:
    """A reason's measured part: the metric's change and its confidence interval, as shown."""
    interval = _range(shown(result.low), shown(result.high), limit)
    return f"{limit.metric} {_signed(shown(result.estimate), limit)} ({_level(rules)} {interval})"


def _same(value: float) -> float:
    return value


def _level(rules: Rules) -> str:
    return f"{100 * rules.confidence:g}% CI"


def _limit_texts(limit: Limit, bound: float, drift: float, noise: float, runs: int) -> tuple[str, str]:
    """The limit in force as a reason names it: (the rule as written, its value) or, widened by a baseline's drift
    or a one-run baseline's noise, the widened value with why, twice: '-10.4% (efficiency:-5% + run-to-run drift
    6.0% over 3 runs)'."""
    shown = math.expm1(bound) if limit.relative else bound
    if drift:
        allowance = percent(math.expm1(drift)).lstrip("+") if limit.relative else amount(limit.metric, drift)
        text = f"{_signed(shown, limit)} ({limit.text} + run-to-run drift {allowance} over {runs} runs)"
        return text, text
    if noise:
        text = (
            f"{_signed(shown, limit)} ({limit.text} + one-run noise {_noise_text(noise, limit.metric, limit.relative)})"
        )
        return text, text
    return limit.text, _limit_value(limit)


def _noise_text(noise: float, metric: str, relative: bool) -> str:
    """The one-run noise as shown: '10.0%' (relative limits), '12 us' or '3.2 pt' (absolute ones)."""
    return percent(math.expm1(noise)).lstrip("+") if relative else amount(metric, noise, signed=True).lstrip("+")


def _signed(value: float, limit: Limit) -> str:
    return percent(value) if limit.relative else amount(limit.metric, value, signed=True)


def _range(low: float, high: float, limit: Limit) -> str:
    return f"{_signed(low, limit)} to {_signed(high, limit)}"


def _limit_value(limit: Limit) -> str:
    return limit.text.partition(":")[2]


# ------------------------------------------------------------------------------------------ points


def compare_points(
    before: Point,
    after: Point,
    rules: Rules,
    computed: Shifts | None = None,
    limits: Mapping[str, Sequence[Limit]] | None = None,
) -> PointResult:
    """Every limit in force applied to one matched point (``computed``: its shifts, computed beforehand;
    ``limits``: ``rules.for_metric`` of each metric, read beforehand)."""
    if limits is None:
        limits = {metric: rules.for_metric(metric) for metric in (*COUNT_METRICS, "time", "efficiency")}
    checks: list[Check] = []
    for metric in COUNT_METRICS:
        checks += _count_check(metric, limits[metric], getattr(before, metric), getattr(after, metric))
    for metric in ("time", "efficiency"):
        for limit in limits[metric]:
            check = _timed_check(limit, before, after, rules, computed)
            if check is not None:
                checks.append(check)
    verdict = max((c.verdict for c in checks), key=SEVERITY.__getitem__, default="pass")
    return _point_result(after.key, after.label, verdict, checks, before, after)


def _total(points: Sequence[Point], per_iteration: bool) -> Point:
    """The points summed: counts, times, roof times (efficiency by roofline.ironlaw.group's rule: summed roofline
    time / summed time); per-iteration samples when every point has as many."""

    def add(name: str) -> float | None:
        values = [getattr(p, name) for p in points]
        return sum(values) if values and all(v is not None for v in values) else None

    samples: list[float] = []
    lengths = {len(p.samples_s) for p in points}
    if per_iteration and len(lengths) == 1 and 0 not in lengths:
        samples = [sum(column) for column in zip(*(p.samples_s for p in points), strict=True)]
    runs: list[float] = []  # each run's total, when every point has a median of every run
    if len({len(p.run_medians_s) for p in points}) == 1:
        runs = [sum(column) for column in zip(*(p.run_medians_s for p in points), strict=True)]
    time_s, roof = add("time_s"), add("roof_time_s")
    return Point(
        key="(total)",
        label="total",
        flops=add("flops"),
        bytes=add("bytes"),
        kernels=add("kernels"),
        time_s=time_s,
        roof_time_s=roof,
        efficiency=ironlaw.row_efficiency(roof, time_s) if roof is not None and time_s is not None else None,
        samples_s=samples,
        run_medians_s=runs,
    )


def compare_totals(source: str, before: Sequence[Point], after: Sequence[Point], rules: Rules) -> list[Check]:
    total = compare_points(_total(before, source == "diagnose"), _total(after, source == "diagnose"), rules)
    if source == "diagnose":
        return total.checks
    return [c for c in total.checks if c.metric in COUNT_METRICS]


def common_mode(matched: Sequence[PointResult], least: int = 3, share: float = 0.8) -> str | None:
    """A warning when (nearly) every point moved the same way beyond its limit: the machine, not the code?

    Considers each point's relative time or efficiency check on samples, as a slowdown (time up, efficiency
    down); warns when at least ``least`` points have one, ``share`` of them moved the same way as their median,
    and that median is beyond the median point's limit."""
    moves: list[tuple[float, float]] = []  # (slowdown as a log ratio, the limit as one)
    for point in matched:
        for check in point.checks:
            if check.metric in ("time", "efficiency") and check.relative and check.change is not None:
                size = float(_limit_value_of(check.rule)) / 100
                if check.metric == "time":
                    moves.append((math.log1p(check.change), math.log1p(size)))
                else:  # an efficiency ratio r is a time ratio 1/r
                    moves.append((-math.log1p(check.change), -math.log1p(-size)))
                break
    if len(moves) < least:
        return None
    slowdowns = sorted(m for m, _ in moves)
    middle = slowdowns[len(slowdowns) // 2]
    limit = sorted(limit for _, limit in moves)[len(moves) // 2]
    together = sum(1 for m in slowdowns if m * middle > 0)
    if abs(middle) <= limit or together < share * len(moves):
        return None
    word = "slower" if middle > 0 else "faster"
    return (
        f"{together} of {len(moves)} points are {word} (median {percent(math.expm1(middle))} in time): a change of the "
        "whole machine (clocks, load, another job) is likelier than of the code; measure the baseline on this "
        "runner, in the same job if you can"
    )


def _limit_value_of(rule: str) -> str:
    """'efficiency:-5%' -> '5' (a relative limit's size in percent)."""
    return rule.partition(":")[2].strip().lstrip("+-").rstrip("%") or "0"


def _within_one_run_noise(check: Check) -> bool:
    """Inconclusive only because the baseline has one run (beyond the limit, within the noise it assumes)."""
    return check.verdict == "inconclusive" and check.noise is not None and ONE_RUN_ADVICE in check.reason


def compare(
    baseline: Baseline,
    points: Sequence[Point],
    identity: Identity,
    machine: MachineInfo,
    rules: Rules,
) -> GateResult:
    """The gate's result for report ``points`` against ``baseline`` (identity already checked by the caller)."""
    base_by_key = {p.key: p for p in baseline.points}
    keys = {p.key for p in points}
    pairs: list[tuple[Point, Point]] = []
    new: list[PointResult] = []
    for point in points:
        before = base_by_key.get(point.key)
        if before is None:
            new.append(PointResult(key=point.key, label=point.label, verdict="new", current=point))
        else:
            pairs.append((before, point))
    computed = _pair_shifts(pairs, rules)  # NB: all at once (numpy): one by one, 10 s of a 100,000-point gate
    limits = {metric: rules.for_metric(metric) for metric in (*COUNT_METRICS, "time", "efficiency")}
    matched = [compare_points(b, a, rules, c, limits) for (b, a), c in zip(pairs, computed, strict=True)]
    vanished = [
        PointResult(key=p.key, label=p.label, verdict="vanished", baseline=p)
        for p in baseline.points
        if p.key not in keys
    ]
    if identity.source == "diagnose":
        totals = compare_totals("diagnose", baseline.points, points, rules)
    else:
        totals = compare_totals(
            "bench", [r.baseline for r in matched if r.baseline], [r.current for r in matched if r.current], rules
        )
    worst = max([*(p.verdict for p in matched), *(c.verdict for c in totals)], key=SEVERITY.__getitem__, default="pass")
    verdict: GateVerdict = worst if worst in ("regression", "inconclusive") else "pass"  # type: ignore[assignment]
    warnings = []
    diffs = differences(baseline.machine, machine)
    if diffs:
        warnings.append("the baseline was measured on another machine: " + "; ".join(diffs))
    common = common_mode(matched)
    if common:
        warnings.append(common)
    noisy = [p for p in matched if any(_within_one_run_noise(c) for c in p.checks)]
    noisy_totals = [c for c in totals if _within_one_run_noise(c)]
    if noisy or noisy_totals:
        what = f"{len(noisy)} point(s)" + (" and the totals" if noisy_totals else "") if noisy else "the totals"
        warnings.append(
            f"the baseline has one run, so it cannot know the run-to-run noise: {what} changed beyond the limit by "
            f"less than the noise assumed (at least {percent(ONE_RUN_NOISE).lstrip('+')}, more for points whose "
            f"samples spread more) and are inconclusive, not regressions; {ONE_RUN_ADVICE}"
        )
    return GateResult(
        verdict=verdict,
        source=identity.source,
        identity=identity,
        rules=rules.texts,
        confidence=rules.confidence,
        stats=rules.stats,
        points=matched,
        new=new,
        vanished=vanished,
        totals=totals,
        baseline_machine=baseline.machine,
        current_machine=machine,
        machine_differences=diffs,
        baseline_commit=baseline.commit,
        baseline_created_utc=baseline.created_utc,
        warnings=warnings,
    )
