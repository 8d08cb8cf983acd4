"""`roofline bench`: run built-in workloads for real and place the measured times on the roofline.

- ``runners``: one torch op per workload kind, inputs allocated once on the device, outputs checked.
- ``run``: the loop (workloads x one device -> measured rows), pure orchestration over an injected runner
  factory and timing harness, plus the real CUDA / CPU set-up (torch imported lazily).

Importing this package imports no torch.
"""
