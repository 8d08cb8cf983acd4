"""Test doubles for the diagnose pipeline's boundaries (roofline.diagnose.pipeline.Boundaries): fixed device
facts, a timer of the test's own. Everything between them runs for real."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from roofline.device import Device
from roofline.diagnose.pipeline import Boundaries, DeviceFacts, DiagnoseOptions, Profiler
from roofline.report.records import OpRecord, Timing


class FixedDevice(DeviceFacts):
    """A fixed device (``torch_device``) and roofs (``device``, ``notes``) for live runs and traces; torch's
    import and CUDA's start are not run."""

    def __init__(self, device: Device, torch_device: str = "cpu", notes: Sequence[str] = ()) -> None:
        self.device, self.torch_device, self.notes = device, torch_device, list(notes)

    def import_torch(self) -> None:
        pass

    def resolve(self, device: str | None) -> str:
        return self.torch_device

    def cuda_init(self, torch_device: str) -> None:
        pass

    def roofs(self, torch_device: str, options: DiagnoseOptions) -> tuple[Device, list[str]]:
        return self.device, list(self.notes)

    def trace_roofs(self, kind: str, gpu_names: Sequence[str], options: DiagnoseOptions) -> tuple[Device, list[str]]:
        return self.device, list(self.notes)


class FakeTimer:
    """A timer whose ``time`` is the test's function ((model, inputs, kwargs, records, **options) -> Timing);
    counting by ``count`` when given, else the real counting pass."""

    def __init__(self, time: Callable[..., Timing], count: Callable[..., list[OpRecord]] | None = None) -> None:
        self.time = time
        self._count = count

    def count(self, model: Any, inputs: Any, kwargs: Any, *, mode: str) -> list[OpRecord]:
        if self._count is None:
            return Profiler().count(model, inputs, kwargs, mode=mode)
        return self._count(model, inputs, kwargs, mode=mode)


def timed_by(time: Callable[..., Timing], **others: Any) -> Boundaries:
    """The pipeline's boundaries with ``time`` as its timer (``others``: Boundaries' other fields)."""
    return Boundaries(timer=FakeTimer(time), **others)
