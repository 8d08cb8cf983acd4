"""Shape-only cost formulas. The names below (``roofline.costs.cost``, ``get_model``...) register every built-in
workload kind on first use; importing the package alone loads nothing, so that ``roofline.costs.params`` (the
workloads' parameters, which the CLI reads at start-up) stays light."""

from __future__ import annotations

from typing import Any

__all__ = ["REGISTRY", "Cost", "CostModel", "Kernel", "Params", "cost", "get_model", "register"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'roofline.costs' has no attribute {name!r}")
    from roofline.costs import base, models

    del models  # NB: imported for its registrations
    return getattr(base, name)
