"""Every built-in workload kind, registered: look a kind up here (``get_model``), not in base, which holds the
registry but imports no formula (each formula module imports base and registers its kinds)."""

from __future__ import annotations

from roofline.costs import attention, conv, elementwise, gemm, llm, norms  # noqa: F401  (each registers its kinds)
from roofline.costs.base import REGISTRY, get_model

__all__ = ["REGISTRY", "get_model"]
