"""The pytest plugin: the ``roofline_gate`` fixture gates a kernel (any callable on tensors) inside a test.

    def test_fused_gelu(roofline_gate):
        x = torch.randn(4096, 4096, device="cuda")
        roofline_gate(fused_gelu, (x,), min_efficiency=0.6)              # at least 60% of the roofline
        roofline_gate(fused_gelu, (x,), baseline="baselines/gelu.json")  # no regression against a baseline

Registered through the ``pytest11`` entry point (pyproject.toml), so installing roofline makes the fixture
available; nothing heavy is imported until a test uses it. The callable is measured by roofline.diagnose (the
pipeline of `roofline diagnose`): every aten op it runs is counted, timed and placed on the device's roofline.
``min_efficiency``: the roofline time of its counted ops over their measured time (1.0: on the roof) must reach
it. ``baseline``: a baseline file (roofline.report.baseline); the measurement is gated against it by
roofline.gate.check with the default rules plus ``rules`` (e.g. ``["time:+10%"]``); a missing baseline fails the
test, naming ``pytest --roofline-save-baselines``, which writes it (and passes) instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

SAVE_OPTION = "--roofline-save-baselines"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("roofline", "roofline: gate kernels against the roofline")
    group.addoption(
        SAVE_OPTION,
        action="store_true",
        default=False,
        help="roofline_gate: write each baseline= file from this run's measurement instead of gating against it",
    )


def efficiency(result: Any) -> float:
    """Roofline time over measured time of the counted ops (a DiagnoseResult's summary): 1.0 is on the roof."""
    summary = result.placed.summary
    return summary.roof_time_s / summary.counted_time_s if summary.counted_time_s > 0 else 0.0


class RooflineGate:
    """The ``roofline_gate`` fixture's value: call it with a callable and its inputs (see the module docstring)."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request
        self.save = bool(request.config.getoption(SAVE_OPTION, default=False))

    def __call__(
        self,
        fn: Any,
        inputs: Any = (),
        *,
        min_efficiency: float | None = None,
        baseline: str | Path | None = None,
        rules: Sequence[str] = (),
        name: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        mode: str = "inference",
        warmup: int = 3,
        iters: int = 20,
        **options: Any,
    ) -> Any:
        """Measure ``fn(*inputs)`` and fail the test when it is below ``min_efficiency`` or regresses against
        ``baseline``; the roofline.api.Diagnosis (findings, frame(), report()) is returned either way it passes.
        ``options``: more of roofline.diagnose's (sheet, roofs, stages...)."""
        from roofline.api import diagnose

        if min_efficiency is None and baseline is None:
            raise pytest.UsageError("roofline_gate: give min_efficiency=, baseline= or both")
        if min_efficiency is not None and not 0 < min_efficiency <= 1:
            raise pytest.UsageError(f"roofline_gate: min_efficiency={min_efficiency}: a fraction in (0, 1]")
        label = name or self.request.node.name
        diagnosis = diagnose(
            fn, inputs, name=label, device=device, dtype=dtype, mode=mode, warmup=warmup, iters=iters, **options
        )
        report = diagnosis.report(f"pytest {self.request.node.nodeid}")
        failures: list[str] = []
        if min_efficiency is not None:
            achieved = efficiency(diagnosis.result)
            if achieved < min_efficiency:
                top = diagnosis.findings[0] if diagnosis.findings else None
                why = f"; top finding: {top.rule}: {top.evidence}" if top is not None else ""
                failures.append(
                    f"{label}: {achieved:.1%} of the roofline, below min_efficiency={min_efficiency:.0%}{why}"
                )
        if baseline is not None:
            failures += self._against(report, Path(baseline), rules, label)
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
        return diagnosis

    def _against(self, report: Any, path: Path, rules: Sequence[str], label: str) -> list[str]:
        from roofline.gate import check
        from roofline.report import baseline as baselines

        if self.save:
            path.parent.mkdir(parents=True, exist_ok=True)
            baselines.save(baselines.from_report(report), path, option="baseline=")
            return []
        if not path.exists():
            return [f"{label}: no baseline at {path}: run `pytest {SAVE_OPTION}` once to write it"]
        result = check(report, path, list(rules))
        if result.verdict == "pass":
            return []
        reasons = [f"{p.label}: {c.reason or c.rule}" for p in result.points for c in p.failed]
        shown = "; ".join(reasons) or ", ".join(result.warnings) or "no point could be judged"
        return [f"{label}: {result.verdict} against {path}: {shown}"]


@pytest.fixture
def roofline_gate(request: pytest.FixtureRequest) -> RooflineGate:
    """Gate a kernel: ``roofline_gate(fn, inputs, min_efficiency=0.6)`` or ``baseline="b.json"`` (roofline)."""
    return RooflineGate(request)


__all__ = ["SAVE_OPTION", "RooflineGate", "efficiency", "roofline_gate"]
