"""Timing: statistics, the stopping rule, the measurement loop and its device backends."""

from roofline.measure.engine import Measurement, measure
from roofline.measure.stats import StoppingRule
from roofline.samples import median, quantile, relative_spread

__all__ = ["Measurement", "StoppingRule", "measure", "median", "quantile", "relative_spread"]
