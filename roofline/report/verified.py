"""What `diagnose --verify` stored, read back: each finding's technique, the roofline's bound, the measured gain.

A diagnose report written with ``--verify`` holds ``verified``: one entry per finding, in the order of the
report's ``findings`` (rule, technique, ``bound_gain`` = the finding's bound, ``measured_gain`` = eager time /
time with the technique, ``outputs_match``, ``compile_s``, ``eager_s``, ``fixed_s``, ``note``), then ``all``
(every technique whose outputs matched, applied together; its bound is the findings' combined bound). Written by
roofline.diagnose.verify; read here, tolerantly (a missing or odd value reads as unknown), by the HTML and
markdown pages and the chart. A report without ``verified`` has none (None), and every reader shows it as before.

Per op: each finding whose technique matched also stores ``op_times_s``, its ops' times in the verified run
(one profiled pass, the diagnosis's own, on the fixed model): {op index: seconds per iteration}. The chart draws an
op's arrow to that time (:class:`AfterOps`). Reports written before it, and ops the verified run did not time, have
none: :func:`op_gains` gives each op a finding covers that finding's measured whole-model gain, which the chart
applies to the op's measured time (an estimate, said so where it is drawn). Pure: no torch, no matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofline.report.rows import finite_number, positive_number

ALL = "all"  # the rule of the entry that applies every technique together
ALL_LABEL = "all techniques together"
SWEEP = "sweep"  # the rule of a --verify-all entry: a mechanical technique over the whole model
SWEEP_LABEL = "whole model (--verify-all)"


def format_gain(value: float | None) -> str:
    """'6.5x'; '-' when unknown. Every table of verified results (console, HTML, markdown) writes gains so."""
    return "-" if value is None else f"{value:.3g}x"


def is_slower(measured_gain: float | None, scope_gain: float | None, outputs_match: bool | None) -> bool:
    """A technique measured (outputs matching) and slower than eager: not to be done. Judged on the whole model
    where that was measured (a technique that speeds the finding's own ops but slows the model -- channels_last on
    a convolution whose neighbours then convert layouts -- is slower), else on the finding's ops."""
    judged = measured_gain if measured_gain is not None else scope_gain
    return bool(outputs_match) and judged is not None and judged < 1.0


def measured_text(v: VerifiedView) -> str:
    """The measured gain as every table writes it: on the finding's ops where measured per op (the bound's scope),
    with the whole model's beside it ('4.6x its ops, 1.96x the model'); a technique measured slower (the model's
    gain below 1, or the ops' where the model's was not measured) says so ('0.76x: don't', '1.3x its ops, 0.9x the
    model: don't'); '-' when not measured."""
    if v.measured_gain is None and v.scope_gain is None:
        return "-"
    if v.scope_gain is not None:
        model = f", {format_gain(v.measured_gain)} the model" if v.measured_gain is not None else ""
        text = f"{format_gain(v.scope_gain)} its ops{model}"
    else:
        text = format_gain(v.measured_gain)
    return f"{text}: don't" if is_slower(v.measured_gain, v.scope_gain, v.outputs_match) else text


def bound_text(value: float | None) -> str:
    """The roofline's bound on the gain: 'at most 10.3x'; '-' when the finding has none."""
    return "-" if value is None else f"at most {format_gain(value)}"


def match_text(value: bool | None) -> str:
    """Whether the outputs matched eager's: 'yes', 'NO' or '-' (not run)."""
    return "-" if value is None else ("yes" if value else "NO")


@dataclass(frozen=True)
class VerifiedView:
    """One stored verified entry, ready to show (and, with the finding it belongs to, to draw)."""

    rule: str
    technique: str  # '' when the technique needs a code change (``note`` says why)
    bound_gain: float | None
    measured_gain: float | None  # None unless measured with matching outputs
    outputs_match: bool | None  # None: not run
    compile_s: float | None
    eager_s: float | None
    fixed_s: float | None
    note: str
    where: str = ""  # the finding's modules and ops ('' for "all", or when the entries do not line up)
    ops: tuple[int, ...] = ()  # the report rows (OpPoint indices) the finding covers
    # the verified run's time of the finding's ops, seconds per iteration, by OpPoint index; None: not stored
    # (a report written before per-op verification, or the per-op pass did not run); only positive times
    op_times_s: Mapping[int, float] | None = None
    scope_gain: float | None = None  # the gain on the finding's ops (per-op times); None: not measured per op

    @property
    def together(self) -> bool:
        return self.rule == ALL

    @property
    def label(self) -> str:
        """'elementwise-chain' (the finding's rule), 'all techniques together' or the sweep's label."""
        if self.rule == SWEEP:
            return SWEEP_LABEL
        return ALL_LABEL if self.together else self.rule


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _index(key: Any) -> int | None:
    """An op index as JSON stores a dict key ('12') or as Python holds it (12); None for anything else."""
    if isinstance(key, int) and not isinstance(key, bool):
        return key if key >= 0 else None
    if isinstance(key, str) and key.isdigit():
        return int(key)
    return None


def _op_times(value: Any) -> dict[int, float] | None:
    """The stored per-op times, tolerantly: entries whose index or time is odd are left out (and so estimated)."""
    if not isinstance(value, Mapping):
        return None
    out: dict[int, float] = {}
    for key, seconds in value.items():
        index, time_s = _index(key), positive_number(seconds)
        if index is not None and time_s is not None:
            out[index] = time_s
    return out


def _view(data: Mapping[str, Any], finding: Mapping[str, Any] | None) -> VerifiedView:
    ops = finding.get("ops") if finding is not None else None
    return VerifiedView(
        rule=str(data.get("rule") or ""),
        technique=str(data.get("technique") or ""),
        bound_gain=positive_number(data.get("bound_gain")),
        measured_gain=positive_number(data.get("measured_gain")),
        outputs_match=_bool(data.get("outputs_match")),
        compile_s=finite_number(data.get("compile_s")),
        eager_s=positive_number(data.get("eager_s")),
        fixed_s=positive_number(data.get("fixed_s")),
        note=str(data.get("note") or ""),
        where=str(finding.get("where") or "") if finding is not None else "",
        ops=tuple(i for i in ops if isinstance(i, int) and not isinstance(i, bool)) if isinstance(ops, list) else (),
        op_times_s=_op_times(data.get("op_times_s")),
        scope_gain=positive_number(data.get("scope_gain")),
    )


def report_verified(report: Any) -> tuple[VerifiedView, ...] | None:
    """The report's verified entries in stored order; None when it has none (written without --verify).

    Each entry but "all" is paired with the finding at its position when the rules line up one to one (verify
    writes one entry per finding, in the findings' order); otherwise no entry gets a finding's ``where``/``ops``."""
    stored = getattr(report, "verified", None)
    if not isinstance(stored, list):
        return None
    entries = [v for v in stored if isinstance(v, Mapping)]
    per_finding = [v for v in entries if v.get("rule") not in (ALL, SWEEP)]
    findings = getattr(report, "findings", None)
    findings = [f for f in findings if isinstance(f, Mapping)] if isinstance(findings, list) else []
    paired = len(findings) == len(per_finding) and all(
        v.get("rule") == f.get("rule") for v, f in zip(per_finding, findings, strict=True)
    )
    pairs = iter(findings if paired else ())
    return tuple(_view(v, None if v.get("rule") in (ALL, SWEEP) else next(pairs, None)) for v in entries)


def op_gains(verified: Sequence[VerifiedView]) -> dict[int, VerifiedView]:
    """Each report row a verified finding covers -> the entry whose measured gain it takes: the largest among the
    findings that cover it with a measured gain (outputs matched). "all" covers no row of its own."""
    chosen: dict[int, VerifiedView] = {}
    for v in verified:
        if v.together or v.measured_gain is None or not v.outputs_match:
            continue
        for index in v.ops:
            held = chosen.get(index)
            if held is None or (held.measured_gain or 0.0) < v.measured_gain:
                chosen[index] = v
    return chosen


@dataclass(frozen=True)
class OpAfter:
    """One op with a verified finding's technique: its time in the verified run (``measured``) or, where none was
    stored, its measured time divided by the finding's whole-model gain (an estimate)."""

    time_after_s: float
    measured: bool  # True: the verified run's own time of this op; False: estimated from the whole-model gain
    entry: VerifiedView  # the finding whose technique it takes


def op_times(verified: Sequence[VerifiedView]) -> dict[int, tuple[float, VerifiedView]]:
    """Each report row a verified finding (outputs matched, gain measured) stored a verified time for -> (that
    time, the entry): the smallest, when several findings did."""
    chosen: dict[int, tuple[float, VerifiedView]] = {}
    for v in verified:
        if v.together or v.measured_gain is None or not v.outputs_match or not v.op_times_s:
            continue
        for index in v.ops:
            time_s = v.op_times_s.get(index)
            if time_s is not None and (index not in chosen or time_s < chosen[index][0]):
                chosen[index] = (time_s, v)
    return chosen


@dataclass(frozen=True)
class AfterOps:
    """What each report row becomes with its verified finding's technique (see :class:`OpAfter`)."""

    times: Mapping[int, tuple[float, VerifiedView]]  # op_times
    gains: Mapping[int, VerifiedView]  # op_gains

    @classmethod
    def of(cls, verified: Sequence[VerifiedView]) -> AfterOps:
        return cls(op_times(verified), op_gains(verified))

    def covers(self, index: int) -> bool:
        return index in self.gains

    def after(self, index: int, time_s: float) -> OpAfter | None:
        """Row ``index`` (measured ``time_s``) after the technique: the verified run's time where a finding that
        covers it stored one (the smallest), else its time divided by the largest whole-model gain among the
        findings that cover it (an estimate); None when no finding with a measured gain covers it."""
        if index in self.times:
            time_after, entry = self.times[index]
            return OpAfter(time_after, True, entry)
        entry = self.gains.get(index)
        if entry is None or not entry.measured_gain:
            return None
        return OpAfter(time_s / entry.measured_gain, False, entry)


__all__ = [
    "ALL",
    "ALL_LABEL",
    "AfterOps",
    "OpAfter",
    "VerifiedView",
    "bound_text",
    "format_gain",
    "is_slower",
    "match_text",
    "measured_text",
    "op_gains",
    "op_times",
    "report_verified",
]
