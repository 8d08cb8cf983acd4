"""Shape-only cost formulas. Importing this package registers every built-in workload kind."""

from roofline.costs import attention, conv, elementwise, gemm, llm, norms  # noqa: F401
from roofline.costs.base import REGISTRY, Cost, CostModel, Kernel, Params, cost, get_model, register

__all__ = ["REGISTRY", "Cost", "CostModel", "Kernel", "Params", "cost", "get_model", "register"]
