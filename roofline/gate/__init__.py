"""`roofline gate`: does a report regress against a baseline? The library API (pure: nothing printed).

    from roofline.gate import check
    result = check("roofline-bench.json", "baseline.json", rules=["efficiency:-3%", "time:+10%"])
    assert result.verdict == "pass", [c.reason for p in result.points for c in p.failed]

``rules`` are added to the defaults (``flops:0 bytes:0 kernels:0 efficiency:-5%``; a rule naming a metric
replaces its defaults); the grammar is in roofline.gate.thresholds, the statistics in roofline.samples, the
comparison and verdicts in roofline.gate.compare, the [tool.roofline.gate] table of pyproject.toml in
roofline.gate.config (``roofline.gate.run`` reads it; ``check`` does not). ``roofline.gate.run`` is the CLI's
run: measure a suite or a model, re-measure the points that did not pass, update the baseline. Exit codes of the
CLI: ``result.exit_code`` (0 pass, 1 regression, 3 inconclusive).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from roofline.gate.compare import Check, GateResult, PointResult
from roofline.gate.thresholds import DEFAULT_CONFIDENCE, DEFAULT_RULES, Rules, ThresholdError, build_rules

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_RULES",
    "Check",
    "GateResult",
    "PointResult",
    "Rules",
    "ThresholdError",
    "build_rules",
    "check",
]


def _report(report: Any) -> Any:
    if isinstance(report, (str, Path)):
        from roofline.report.schema import read_report

        return read_report(Path(report))
    return report


def _baseline(baseline: Any) -> Any:
    if isinstance(baseline, (str, Path)):
        from roofline.report.baseline import load

        return load(baseline)
    return baseline


def check(
    report: Any,
    baseline: Any,
    rules: Rules | Sequence[str] | None = None,
    *,
    confidence: float | None = None,
    stats: bool = True,
    where: str | None = None,
) -> GateResult:
    """Gate ``report`` (a Report or the path of one) against ``baseline`` (a Baseline or the path of one).

    ``rules``: a Rules value, or rule texts on top of the defaults. Raises BaselineError (baseline missing,
    corrupt, of another suite or model, or sharing no point with the report), ReportError, ThresholdError.
    ``where`` names the report in those errors (default: its path, else 'report')."""
    from roofline.gate.compare import compare
    from roofline.report.baseline import BaselineError, identity_of, points_of, require_measured
    from roofline.report.machine import machine_of

    if not isinstance(rules, Rules):
        rules = build_rules(("rules", list(rules or [])), confidence=confidence, stats=stats)
    elif confidence is not None:
        rules.confidence = confidence
    where = where or (str(report) if isinstance(report, (str, Path)) else "report")
    report, baseline = _report(report), _baseline(baseline)
    require_measured(report, where)
    identity = identity_of(report)
    mismatch = baseline.identity.mismatch(identity)
    if mismatch:
        raise BaselineError(f"the baseline is of another workload ({mismatch}): gate against that workload's baseline")
    points = points_of(report, where)
    if baseline.points and not {p.key for p in baseline.points} & {p.key for p in points}:
        raise BaselineError(
            f"none of the baseline's {len(baseline.points)} points is in the report "
            f"(baseline of {baseline.identity.describe()}): a baseline of another suite or model?"
        )
    return compare(baseline, points, identity, machine_of(report), rules)
