"""What `diagnose --verify` stored, read back: each finding's technique, the roofline's bound, the measured gain.

A diagnose report written with ``--verify`` holds ``verified``: one entry per finding, in the order of the
report's ``findings`` (rule, technique, ``bound_gain`` = the finding's bound, ``measured_gain`` = eager time /
time with the technique, ``outputs_match``, ``compile_s``, ``eager_s``, ``fixed_s``, ``note``), then ``all``
(every technique whose outputs matched, applied together; its bound is the findings' combined bound). Written by
roofline.diagnose.verify; read here, tolerantly (a missing or odd value reads as unknown), by the HTML and
markdown pages and the chart. A report without ``verified`` has none (None), and every reader shows it as before.

Verify times the whole model, not each op: :func:`op_gains` gives each op a finding covers that finding's
measured gain, which the chart applies to the op's measured time (an estimate, said so where it is drawn).
Pure: no torch, no matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from roofline.report.rows import finite_number, positive_number

ALL = "all"  # the rule of the entry that applies every technique together
ALL_LABEL = "all techniques together"


def format_gain(value: float | None) -> str:
    """'6.5x'; '-' when unknown. Every table of verified results (console, HTML, markdown) writes gains so."""
    return "-" if value is None else f"{value:.3g}x"


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

    @property
    def together(self) -> bool:
        return self.rule == ALL

    @property
    def label(self) -> str:
        """'elementwise-chain' (the finding's rule) or 'all techniques together'."""
        return ALL_LABEL if self.together else self.rule


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


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
    )


def report_verified(report: Any) -> tuple[VerifiedView, ...] | None:
    """The report's verified entries in stored order; None when it has none (written without --verify).

    Each entry but "all" is paired with the finding at its position when the rules line up one to one (verify
    writes one entry per finding, in the findings' order); otherwise no entry gets a finding's ``where``/``ops``."""
    stored = getattr(report, "verified", None)
    if not isinstance(stored, list):
        return None
    entries = [v for v in stored if isinstance(v, Mapping)]
    per_finding = [v for v in entries if v.get("rule") != ALL]
    findings = getattr(report, "findings", None)
    findings = [f for f in findings if isinstance(f, Mapping)] if isinstance(findings, list) else []
    paired = len(findings) == len(per_finding) and all(
        v.get("rule") == f.get("rule") for v, f in zip(per_finding, findings, strict=True)
    )
    pairs = iter(findings if paired else ())
    return tuple(_view(v, None if v.get("rule") == ALL else next(pairs, None)) for v in entries)


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


__all__ = [
    "ALL",
    "ALL_LABEL",
    "VerifiedView",
    "bound_text",
    "format_gain",
    "match_text",
    "op_gains",
    "report_verified",
]
