"""Imported at start-up by every process of tests/test_distributed.py's launches (this folder is first on their
PYTHONPATH): fixed CPU roofs instead of a calibration, so that a rank never calibrates the CPU (seconds, and
numbers that depend on the host)."""

import roofline.roofs
from roofline.device import Device

FAKE_CPU = Device(
    name="cpu",
    display_name="Test CPU",
    vendor="other",
    compute={("fp32", "vector"): 1e11, ("fp32", "tensor"): 1e11, ("fp64", "vector"): 5e10, ("fp64", "tensor"): 5e10},
    bandwidth={"dram": 2e10},
    launch_floor_s=5e-6,
    roof_source="measured",
)

roofline.roofs.cpu_roofs = lambda torch: (FAKE_CPU, ["test roofs (tests/dist_site)"])
