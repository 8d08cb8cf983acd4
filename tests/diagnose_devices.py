"""Hand-built devices and op records shared by the diagnose tests (no torch)."""

import dataclasses

from roofline.device import Device
from roofline.report.records import OpRecord

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

# The one fake CPU of the test suite (roofs as a calibration would measure them; fp64 has roofs so that fp64
# workloads place). The hand-built records' rules are worked out with its 3 us launch floor.
CPU = Device(
    name="cpu",
    display_name="Test CPU",
    vendor="other",
    compute={("fp32", "vector"): 1e11, ("fp32", "tensor"): 1e11, ("fp64", "vector"): 5e10, ("fp64", "tensor"): 5e10},
    bandwidth={"dram": 2e10},
    launch_floor_s=3e-6,
    roof_source="measured",
)
# The same CPU with a slow-ish dispatch (5 us), for the tests that run a real model on this machine: a "short op"
# finding then holds on slower CI machines too.
CPU_SLOW_LAUNCH = dataclasses.replace(CPU, launch_floor_s=5e-6)


def rec(index, op, shapes, out, flops, nbytes, *, dtype="bf16", math="tensor", module="", module_type="", **kw):
    """One OpRecord; module_type defaults to 'Model' for the top level, 'Linear' inside a module."""
    return OpRecord(
        index=index,
        op=op,
        module=module,
        module_type=module_type or ("Model" if not module else "Linear"),
        phase=kw.pop("phase", "forward"),
        input_shapes=tuple(tuple(s) for s in shapes),
        input_dtypes=tuple(dtype for _ in shapes),
        output_shapes=tuple(tuple(s) for s in out),
        flops=flops,
        bytes=nbytes,
        dtype=dtype,
        math=math,
        **kw,
    )
