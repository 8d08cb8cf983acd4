"""What every finding producer reads: one :class:`FindingContext`, each stage's part of it filled where this
diagnosis has it.

- ``analytic``: one analytic row (:class:`roofline.findings.analytic.AnalyticContext`: ``roofline analyze``);
- ``model``: a diagnosed model's placed ops, their summary, the timing and the device
  (:class:`roofline.findings.model.ModelContext`: ``roofline diagnose``, a profiled region, a trace);
- ``earlier``: the findings of the stages that ran before (the coverage verdicts cover what they leave);
- ``points``, ``iteration_s``, ``counters``: the ops of a diagnosis, its iteration and the Nsight Compute counters
  attached to them (:class:`roofline.findings.counters.Counters`: ``--counters``, ``roofline counters import``);
- ``distributed``: a distributed step's communication facts (the collectives family).

Pure: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from roofline.findings.analytic import AnalyticContext
from roofline.findings.base import Finding
from roofline.findings.counters import Counters
from roofline.findings.model import ModelContext
from roofline.report.rows import OpPoint


@dataclass(frozen=True)
class FindingContext:
    """One producer's input; a part a stage needs and this diagnosis lacks is None (its producers find nothing)."""

    model: ModelContext | None = None
    analytic: AnalyticContext | None = None
    earlier: tuple[Finding, ...] = ()
    points: tuple[OpPoint, ...] = ()  # the diagnosed ops (the model's when ``model`` is given)
    iteration_s: float = 0.0  # the iteration (the model's when ``model`` is given)
    counters: Counters | None = None
    distributed: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.model is not None:
            if not self.points:
                object.__setattr__(self, "points", self.model.points)
            if not self.iteration_s:
                object.__setattr__(self, "iteration_s", self.model.total_time_s)


__all__ = ["FindingContext"]
