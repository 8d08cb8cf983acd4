"""What a measured ceiling is, shared by the GPU and CPU measurements (``ceilings_gpu``, ``ceilings_cpu``).

torch is passed in (the CLI imports it lazily), so importing these modules is cheap; nothing here prints: a
``progress(step_name, index, total)`` callback reports each step (called before step ``index`` starts, and
once more with ``index == total`` at the end).

Conventions (measurement-facts.md, "Empirical ceilings"):
- Bandwidth counts the logical bytes of the kernel: a copy moves 2 x size (read + write), a read-only
  reduction size, a write-only fill size, a triad 3 x size (STREAM's convention: a CPU's write-allocate
  read of the destination is not counted).
- DRAM buffers are at least 4x the last-level cache (GPU: L2), so a sample cannot be served from cache and no
  flush is needed. GEMMs flush the L2 before every sample (outside the timed region).
- Every GEMM runs on random data (never zeros: tensor cores are ~13% faster on zeros), and its output is
  checked (finite, not all zero).
- The timing engine takes the median of samples; the SM clock is sampled through NVML (read-only) and
  samples below 75% of the maximum clock or with a slowdown reason are counted as throttled.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from roofline.measure.calibration import Calibration, CalibrationSummary, Ceiling, Skipped, now_utc

Progress = Callable[[str, int, int], None]

GIB = 2**30
MIB = 2**20
MIN_UNTHROTTLED = 5  # fewer unthrottled samples than this: the ceiling is the median of all samples


class Steps:
    """Runs named steps in order, reports progress, turns a failing step into a 'skipped' entry."""

    def __init__(self, names: tuple[str, ...], progress: Progress | None) -> None:
        self.names = names
        self.progress = progress
        self.index = 0
        self.ceilings: list[Ceiling] = []
        self.skipped: list[Skipped] = []

    def run(self, name: str, body: Callable[[], Ceiling | list[Ceiling] | None]) -> None:
        if self.progress is not None:
            self.progress(name, self.index, len(self.names))
        self.index += 1
        try:
            result = body()
        except Exception as exc:  # one unsupported dtype or kernel must not end the calibration
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self.skipped.append(Skipped(name=name, reason=f"{type(exc).__name__}: {text[:200]}"))
            return
        if result is None:
            return
        self.ceilings.extend(result if isinstance(result, list) else [result])

    def skip(self, name: str, reason: str) -> None:
        if self.progress is not None:
            self.progress(name, self.index, len(self.names))
        self.index += 1
        self.skipped.append(Skipped(name=name, reason=reason))

    def done(self) -> None:
        if self.progress is not None:
            self.progress("done", len(self.names), len(self.names))

    def calibration(self, machine: Any, notes: list[str], started_s: float, **extra: Any) -> Calibration:
        """The calibration these steps measured: their ceilings and skips, the machine, the notes and the time
        taken since ``started_s`` (a time.perf_counter() reading)."""
        return Calibration(
            created_utc=now_utc(),
            machine=machine,
            ceilings=self.ceilings,
            skipped=self.skipped,
            notes=notes,
            elapsed_s=time.perf_counter() - started_s,
            **extra,
        )


def ceiling_time(m: Any) -> tuple[float, str]:
    """The time a ceiling is computed from: the median of unthrottled samples when there are enough of them
    (a ceiling is what the device does at its clocks, not under a power cap), else the median of all."""
    from roofline.samples import median

    if not m.throttled or not any(m.throttled):
        return m.median_s, ""
    kept = [t for t, slow in zip(m.samples_s, m.throttled, strict=True) if not slow]
    if len(kept) >= MIN_UNTHROTTLED:
        return median(kept), f"median of {len(kept)} unthrottled samples ({m.throttled_count} throttled set aside)"
    return m.median_s, f"{m.throttled_count} of {m.n} samples throttled: the ceiling is probably low"


def rate_ceiling(
    name: str,
    kind: str,
    work: float,
    m: Any,
    unit: str,
    *,
    shape: str,
    dtype: str | None = None,
    spec: float | None = None,
    note: str = "",
) -> Ceiling:
    seconds, how = ceiling_time(m)
    value = work / seconds
    note = "; ".join(part for part in (note, how) if part)
    return Ceiling(
        name=name,
        kind=kind,  # type: ignore[arg-type]
        value=value,
        unit=unit,
        dtype=dtype,
        spec_value=spec,
        ratio=value / spec if spec else None,
        work=work,
        shape=shape,
        note=note,
        measurement=CalibrationSummary.from_measurement(m),
    )


def latency_ceiling(name: str, m: Any, *, shape: str, note: str = "") -> Ceiling:
    return Ceiling(
        name=name,
        kind="latency",
        value=m.median_s,
        unit="s",
        shape=shape,
        note=note,
        measurement=CalibrationSummary.from_measurement(m),
    )


def size_text(nbytes: int) -> str:
    if nbytes >= GIB and nbytes % GIB == 0:
        return f"{nbytes // GIB} GiB"
    return f"{nbytes / MIB:.4g} MiB"


def check_output(torch: Any, out: Any, name: str) -> None:
    """The kernel wrote its output: finite and not all zero (an unwritten or degenerate result is no ceiling)."""
    values = out.float() if out.dtype not in (torch.float32, torch.float64) else out
    if not bool(torch.isfinite(values).all()) or not bool(values.ne(0).any()):
        raise RuntimeError(f"{name}: output not written (non-finite or all zero)")
