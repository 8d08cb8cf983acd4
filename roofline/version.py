"""The package's version (read by hatch at build time; ``roofline.__version__`` is this one)."""

__version__ = "0.1.0"
