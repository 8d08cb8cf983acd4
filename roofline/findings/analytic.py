"""An analytic row as its rules see it: :class:`AnalyticContext` (the workload, its cost, its placement, the
device) and the what-if placement of the same workload with other parameters.

The rules are the analytic family (:mod:`roofline.findings.rules.analytic`), each a small pure function of the
row's context returning a Finding or None, declared in the registry (:mod:`roofline.findings.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roofline.costs.base import Cost, Params
from roofline.costs.models import get_model
from roofline.device import Device
from roofline.errors import RooflineError
from roofline.ironlaw import Placement, place_cost


@dataclass(frozen=True)
class AnalyticContext:
    """One analytic row: its workload (kind, parameters), its cost and its placement on the device."""

    kind: str
    params: Params
    cost: Cost
    placement: Placement
    device: Device

    def what_if(self, **changes: Any) -> Placement | None:
        """The placement of the same workload with some parameters changed (None if not applicable)."""
        model = get_model(self.kind)
        try:
            params = model.parse({**self.params.model_dump(), **changes})
            return place_cost(model(params), self.device)
        except RooflineError:
            return None


__all__ = ["AnalyticContext"]
