"""The description of one device as torch uses it (:class:`Machine`): what `roofline.specs.detect` probes, what a
calibration is keyed by and what a report's ``machine`` block holds. Its own small module, so that reading a
calibration or a report does not load the probes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Machine(BaseModel):
    """One device as torch uses it, keyed by what does not depend on anything measured: a calibration's
    cache key (roofline.measure.calibration.machine_key) and a report's ``machine`` block."""

    # Tolerant reading: keys written by a later minor version are ignored, not an error.
    model_config = ConfigDict(extra="ignore", defer_build=True)

    kind: Literal["cuda", "cpu"]
    name: str  # GPU name as the device reports it, or the CPU model
    sheet: str | None = None  # matched spec sheet (GPUs only)
    driver: str | None = None
    cuda: str | None = None  # torch.version.cuda
    torch: str | None = None
    cpu_threads: int | None = None  # torch.get_num_threads() during the measurement
    logical_cores: int | None = None
    isa: str | None = None  # torch.backends.cpu.get_cpu_capability()
    llc_bytes: int | None = None
    compute_capability: str | None = None
    sm_count: int | None = None
    l2_bytes: int | None = None
    memory_bytes: int | None = None
    max_sm_clock_mhz: float | None = None
