"""roofline: roofline analysis and GPU performance diagnosis."""

__version__ = "0.1.0"
