"""Measuring: the timing engine (``engine``) and its device backends (``backends``), the stopping rule (``stats``),
the calibration cache (``calibration``) and the ceiling measurements (``ceilings``, ``ceilings_gpu``, ``ceilings_cpu``).

Nothing is imported here, so that reading the calibration cache does not load the timing engine."""
