"""`roofline bench`: run built-in workloads for real and place the measured times on the roofline.

- ``items``: what runs: workloads expanded into items (one shape each), validated by their cost models.
- ``runners``: one torch op per workload kind, inputs allocated once on the device, outputs checked.
- ``run``: the loop (workloads x one device -> measured rows), pure orchestration over an injected runner
  factory and timing harness, and the report of a run.
- ``target``: the real CUDA / CPU set-up (roofs from roofline.roofs, timing harness, runners; torch lazily).

Importing this package imports no torch.
"""
