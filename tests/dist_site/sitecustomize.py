"""Imported at start-up by every process of tests/test_distributed.py's launches (this folder is first on their
PYTHONPATH): fixed CPU roofs instead of a calibration, so that a rank never calibrates the CPU (seconds, and
numbers that depend on the host)."""

import roofline.measure.collectives
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

# `calibrate --collectives` (the module's one sweep): the three smallest sizes of the CPU's sweep (4-64 KiB, not up
# to 4 MiB) and 3 batches each, not 9. The test checks the sweep's shape (both kinds, nccl-tests' bus factors, a
# fitted roof per kind, the cache file), never a bandwidth; the same code runs, on smaller messages.
_sweep = roofline.measure.collectives.sweep


def _test_sweep(**kwargs):
    kwargs.setdefault("sizes", roofline.measure.collectives.CPU_SIZES[:3])
    kwargs.setdefault("repeats", 3)
    return _sweep(**kwargs)


roofline.measure.collectives.sweep = _test_sweep
