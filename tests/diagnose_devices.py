"""Hand-built devices shared by the diagnose tests (no torch)."""

from roofline.device import Device

GPU = Device(
    name="test-gpu",
    display_name="Test GPU",
    vendor="nvidia",
    compute={
        ("fp32", "vector"): 50e12,
        ("tf32", "tensor"): 400e12,
        ("bf16", "tensor"): 800e12,
        ("fp16", "tensor"): 800e12,
    },
    bandwidth={"dram": 2e12},
    launch_floor_s=4e-6,
    compute_units=100,
)

CPU = Device(
    name="cpu",
    display_name="Test CPU",
    vendor="other",
    compute={("fp32", "vector"): 1e11, ("fp32", "tensor"): 1e11},
    bandwidth={"dram": 2e10},
    launch_floor_s=3e-6,
    roof_source="measured",
)
