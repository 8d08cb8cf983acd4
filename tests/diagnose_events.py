"""Hand-built profiler events and op records shared by the join and profile tests (no torch)."""

from roofline.report.records import OpRecord


def rec(index: int, op: str, *shapes: tuple[int, ...], flops: int | None = 1) -> OpRecord:
    return OpRecord(
        index=index,
        op=op,
        module="",
        module_type="",
        phase="forward",
        input_shapes=tuple(shapes),
        input_dtypes=("fp32",) * len(shapes),
        output_shapes=(),
        flops=flops,
        bytes=None if flops is None else 1,
        dtype="fp32",
        math="vector",
    )


ADDMM = rec(0, "aten::addmm", (16,), (2, 8), (8, 16))
GELU = rec(1, "aten::gelu", (2, 16))


def iteration_events(offset: float, addmm_kernel_us: float, base_id: int) -> list[dict]:
    """One iteration: aten::linear (composite) -> aten::t, aten::addmm (-> aten::copy_); then aten::gelu.

    Kernels: addmm 1 (stream 7); linear itself 1 (not a counted op); gelu 2 on two streams that overlap."""
    o, i = offset, base_id
    ops = [
        {"kind": "op", "id": i + 1, "name": "aten::linear", "start_us": o + 10, "end_us": o + 40,
         "input_shapes": [[2, 8], [16, 8], [16]]},
        {"kind": "op", "id": i + 2, "name": "aten::t", "start_us": o + 12, "end_us": o + 15, "input_shapes": [[16, 8]]},
        {"kind": "op", "id": i + 3, "name": "aten::addmm", "start_us": o + 20, "end_us": o + 38,
         "input_shapes": [[16], [2, 8], [8, 16]]},
        {"kind": "op", "id": i + 5, "name": "aten::copy_", "start_us": o + 22, "end_us": o + 24,
         "input_shapes": [[2, 16], [2, 16]]},
        {"kind": "op", "id": i + 4, "name": "aten::gelu", "start_us": o + 50, "end_us": o + 70,
         "input_shapes": [[2, 16]]},
    ]  # fmt: skip
    launches = [
        {"kind": "launch", "name": "cudaLaunchKernel", "correlation": i + 101, "start_us": o + 25, "end_us": o + 30},
        {"kind": "launch", "name": "cudaLaunchKernel", "correlation": i + 102, "start_us": o + 39, "end_us": o + 39.5},
        {"kind": "launch", "name": "cudaLaunchKernel", "correlation": i + 103, "start_us": o + 55, "end_us": o + 58},
        {"kind": "launch", "name": "cudaLaunchKernel", "correlation": i + 104, "start_us": o + 60, "end_us": o + 62},
    ]
    kernels = [
        {"kind": "kernel", "name": "gemm", "start_us": o + 33, "end_us": o + 33 + addmm_kernel_us, "stream": 7,
         "external_id": i + 3, "correlation": i + 101},
        {"kind": "kernel", "name": "bias", "start_us": o + 46, "end_us": o + 48, "stream": 7,
         "external_id": i + 1, "correlation": i + 102},
        {"kind": "kernel", "name": "gelu_a", "start_us": o + 57, "end_us": o + 65, "stream": 7,
         "external_id": i + 4, "correlation": i + 103},
        {"kind": "kernel", "name": "gelu_b", "start_us": o + 63, "end_us": o + 69, "stream": 8,
         "external_id": i + 4, "correlation": i + 104},
    ]  # fmt: skip
    marker = {"kind": "iteration", "start_us": o, "end_us": o + 100}
    return [marker, *ops, *launches, *kernels]


def fake_events() -> list[dict]:
    return iteration_events(0, 10, 0) + iteration_events(100, 12, 1000)
