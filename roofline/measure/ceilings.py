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
- A ceiling measured with several kernels or shapes (:class:`Trial`) is the best of them (:func:`best_rate`): it
  names the kernel and shape that set it and lists every one tried, failures with their error.

The selection logic here is pure over injected trials (each a callable returning a Measurement), so it is tested
on any machine with fake timings; ``ceilings_gpu`` builds the real trials.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from roofline.measure.calibration import (
    Calibration,
    CalibrationSummary,
    Candidate,
    Ceiling,
    DramRoof,
    Skipped,
    now_utc,
)

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

    def detail(self, text: str) -> None:
        """Report progress inside the running step: ``progress('STEP: text', index, total)``."""
        if self.progress is not None and self.index > 0:
            self.progress(f"{self.names[self.index - 1]}: {text}", self.index - 1, len(self.names))

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
    all_samples: bool = False,
) -> Ceiling:
    """A rate ceiling from one measurement: ``work`` per :func:`ceiling_time`, or per the median of all samples
    with ``all_samples`` (a sustained figure: the throttled samples are the state being measured)."""
    seconds, how = (m.median_s, "") if all_samples else ceiling_time(m)
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


def error_text(exc: BaseException) -> str:
    """One short line for an exception: 'Type: first line of the message' (at most 200 characters)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


# ------------------------------------------------------------------------------------------ best of trials


@dataclass(frozen=True)
class Trial:
    """One way to measure a ceiling: a kernel on a shape, ``work`` bytes or FLOPs per call; ``run()`` measures it
    (returns a Measurement) and may raise (a kernel that does not compile or run here)."""

    kernel: str
    shape: str
    work: float
    run: Callable[[], Any]


@dataclass
class Best:
    """What :func:`best_of` found: the fastest trial and its measurement, and every candidate tried."""

    trial: Trial | None
    measurement: Any
    rate: float
    candidates: list[Candidate] = field(default_factory=list)


def best_of(trials: list[Trial] | tuple[Trial, ...], *, all_samples: bool = False) -> Best:
    """Run every trial and keep the fastest rate (work / :func:`ceiling_time`; the median of all samples with
    ``all_samples``); a trial that raises is recorded as a failed candidate. Pure over the injected trials."""
    best = Best(trial=None, measurement=None, rate=0.0)
    for trial in trials:
        try:
            m = trial.run()
        except Exception as exc:  # one kernel that cannot run here must not end the ceiling
            best.candidates.append(Candidate(kernel=trial.kernel, shape=trial.shape, error=error_text(exc)))
            continue
        seconds = m.median_s if all_samples else ceiling_time(m)[0]
        rate = trial.work / seconds if seconds > 0 else 0.0
        best.candidates.append(Candidate(kernel=trial.kernel, shape=trial.shape, value=rate))
        if best.trial is None or rate > best.rate:
            best.trial, best.measurement, best.rate = trial, m, rate
    return best


def best_rate(
    name: str,
    kind: str,
    unit: str,
    trials: list[Trial] | tuple[Trial, ...],
    *,
    dtype: str | None = None,
    spec: float | None = None,
    note: str = "",
) -> Ceiling:
    """The ceiling ``name`` as the best of ``trials``: it names the kernel and shape that set it and lists every
    candidate; RuntimeError (naming the first error) when every trial failed."""
    found = best_of(trials)
    if found.trial is None:
        errors = [c.error for c in found.candidates if c.error]
        raise RuntimeError(f"every kernel failed ({errors[0] if errors else 'none tried'})")
    ceiling = rate_ceiling(
        name,
        kind,
        found.trial.work,
        found.measurement,
        unit,
        shape=found.trial.shape,
        dtype=dtype,
        spec=spec,
        note=note,
    )
    ceiling.kernel = found.trial.kernel
    ceiling.candidates = found.candidates
    return ceiling


# ----------------------------------------------------------------------------------------------- DRAM roof

DRAM_CEILINGS = ("dram-read", "dram-copy", "dram-write")


def dram_roof(ceilings: list[Ceiling]) -> DramRoof | None:
    """The DRAM roof: the fastest of the DRAM ceilings measured (copy, read-only, write-only, each counting the
    bytes it moves), naming it and its kernel; None when none was measured. Pure."""
    measured = [c for c in ceilings if c.name in DRAM_CEILINGS and c.value > 0]
    if not measured:
        return None
    best = max(measured, key=lambda c: c.value)
    return DramRoof(ceiling=best.name, kernel=best.kernel)


TRITON_MISSING_NOTE = "triton not available: torch kernels used"


def triton_note(import_error: str | None, candidates: list[Candidate], triton_prefix: str = "triton") -> str | None:
    """The note a GPU calibration carries about its Triton kernels: Triton could not be imported (``import_error``),
    or every Triton kernel tried failed (the first error named); None when at least one ran. Pure."""
    if import_error is not None:
        return f"{TRITON_MISSING_NOTE} ({import_error})"
    tried = [c for c in candidates if c.kernel.startswith(triton_prefix)]
    if tried and all(c.value is None for c in tried):
        return f"triton kernels failed ({tried[0].error}): torch kernels used"
    return None


# ------------------------------------------------------------------------------------------- GEMM sweeps

Shape = tuple[int, int, int]  # (m, n, k)


def shape_text(shape: Shape) -> str:
    return "x".join(str(d) for d in shape)


def gemm_work(shape: Shape) -> float:
    m, n, k = shape
    return 2.0 * m * n * k


#: seconds a GEMM burst or sustained figure takes beyond its rest and sampling (operands, warm-up, output check)
GEMM_OVERHEAD_S = 0.05


@dataclass(frozen=True)
class GemmPlan:
    """How long each part of the GEMM ceilings takes (seconds): the idle pause before a burst, the sampling cap of
    one burst, extra bursts of the best shape, the thermal soak before the sustained figures, and the
    back-to-back warm-up and sampling cap of each sustained figure; ``shapes`` caps the shapes swept per dtype."""

    rest_s: float = 0.25
    burst_s: float = 0.12
    rebursts: int = 1
    soak_s: float = 2.0
    sustain_warmup_s: float = 0.3
    sustain_s: float = 0.3
    shapes: int = 3

    def seconds(self, shapes_per_dtype: list[int]) -> float:
        """About how long the GEMM ceilings take for dtypes with these shape counts (each burst and sustained
        figure counted with :data:`GEMM_OVERHEAD_S` for its operands, warm-up and output check)."""
        bursts = sum(min(n, self.shapes) + self.rebursts for n in shapes_per_dtype)
        sustained = len(shapes_per_dtype) * (self.sustain_warmup_s + self.sustain_s + GEMM_OVERHEAD_S)
        return bursts * (self.rest_s + self.burst_s + GEMM_OVERHEAD_S) + self.soak_s + sustained


#: the smallest a plan is scaled down to (a short budget still measures every dtype, each with one shape)
MIN_GEMM_PLAN = GemmPlan(
    rest_s=0.1, burst_s=0.05, rebursts=0, soak_s=1.0, sustain_warmup_s=0.2, sustain_s=0.2, shapes=1
)


def plan_gemms(left_s: float, shapes_per_dtype: list[int], full: GemmPlan = GemmPlan()) -> GemmPlan:
    """The GEMM plan that fits in ``left_s`` seconds: ``full`` when it fits, else fewer shapes and re-bursts, then
    every duration scaled down by the same factor (never below :data:`MIN_GEMM_PLAN`). Pure."""
    if full.seconds(shapes_per_dtype) <= left_s:
        return full
    plan = GemmPlan(
        rest_s=full.rest_s,
        burst_s=full.burst_s,
        rebursts=0,
        soak_s=full.soak_s,
        sustain_warmup_s=full.sustain_warmup_s,
        sustain_s=full.sustain_s,
        shapes=max(1, min(2, full.shapes)),
    )
    if plan.seconds(shapes_per_dtype) > left_s:
        plan = GemmPlan(**{**plan.__dict__, "shapes": 1})
    needed = plan.seconds(shapes_per_dtype)
    if needed <= left_s:
        return plan
    factor = max(left_s, 0.0) / needed
    low = MIN_GEMM_PLAN
    return GemmPlan(
        rest_s=max(plan.rest_s * factor, low.rest_s),
        burst_s=max(plan.burst_s * factor, low.burst_s),
        rebursts=0,
        soak_s=max(plan.soak_s * factor, low.soak_s),
        sustain_warmup_s=max(plan.sustain_warmup_s * factor, low.sustain_warmup_s),
        sustain_s=max(plan.sustain_s * factor, low.sustain_s),
        shapes=1,
    )


def gemm_burst(
    dtype: str,
    shapes: list[Shape] | tuple[Shape, ...],
    burst: Callable[[Shape], Any],
    *,
    plan: GemmPlan,
    unit: str = "FLOP/s",
    kernel: str = "torch.mm",
    spec: float | None = None,
    note: str = "",
    progress: Callable[[str], None] | None = None,
) -> tuple[Ceiling, Shape]:
    """The burst figure of one dtype ('gemm-DTYPE-burst', phase 'burst'): ``burst(shape)`` measures one burst from
    rest (an idle pause, then the first samples); the first ``plan.shapes`` shapes are swept, the best shape gets
    ``plan.rebursts`` more bursts, and the fastest burst of all is the figure. Returns it and the best shape.
    ``progress(text)`` is told each burst before it runs. Pure over the injected ``burst``."""
    swept = list(shapes[: max(plan.shapes, 1)])
    trials = []
    for index, shape in enumerate(swept):

        def run(shape: Shape = shape, index: int = index) -> Any:
            if progress is not None:
                progress(f"burst {index + 1}/{len(swept)}: {shape_text(shape)}")
            return burst(shape)

        trials.append(Trial(kernel=kernel, shape=shape_text(shape), work=gemm_work(shape), run=run))
    found = best_of(trials)
    if found.trial is None:
        errors = [c.error for c in found.candidates if c.error]
        raise RuntimeError(errors[0] if errors else "no shape to run")
    best_shape = swept[[shape_text(s) for s in swept].index(found.trial.shape)]
    for again in range(plan.rebursts):

        def rerun(again: int = again) -> Any:
            if progress is not None:
                progress(f"burst again {again + 1}/{plan.rebursts}: {shape_text(best_shape)}")
            return burst(best_shape)

        more = best_of([Trial(kernel=kernel, shape=shape_text(best_shape), work=gemm_work(best_shape), run=rerun)])
        if more.trial is not None and more.rate > found.rate:
            found.trial, found.measurement, found.rate = more.trial, more.measurement, more.rate
    bursts = f"best of {len(swept)} shape{'s' if len(swept) != 1 else ''}" + (
        f" and {plan.rebursts} more burst{'s' if plan.rebursts != 1 else ''} of the best" if plan.rebursts else ""
    )
    ceiling = rate_ceiling(
        f"gemm-{dtype}-burst",
        "compute",
        gemm_work(best_shape),
        found.measurement,
        unit,
        shape=shape_text(best_shape),
        dtype=dtype,
        spec=spec,
        note="; ".join(p for p in (f"burst from rest ({plan.rest_s:g} s idle), {bursts}", note) if p),
    )
    ceiling.kernel, ceiling.candidates, ceiling.phase = kernel, found.candidates, "burst"
    return ceiling, best_shape


def gemm_sustained(
    dtype: str,
    shape: Shape,
    sustain: Callable[[Shape], Any],
    *,
    soaked_s: float,
    unit: str = "FLOP/s",
    kernel: str = "torch.mm",
    spec: float | None = None,
    note: str = "",
) -> Ceiling:
    """The sustained figure of one dtype ('gemm-DTYPE', phase 'sustained', the roof): ``sustain(shape)`` measures
    the best burst shape with no idle pause after ``soaked_s`` seconds of back-to-back GEMMs; its value is the
    median of all samples (throttled ones too: the power-capped state is what is measured). Pure over ``sustain``."""
    m = sustain(shape)
    ceiling = rate_ceiling(
        f"gemm-{dtype}",
        "compute",
        gemm_work(shape),
        m,
        unit,
        shape=shape_text(shape),
        dtype=dtype,
        spec=spec,
        note="; ".join(
            p for p in (f"sustained: after {soaked_s:.1f} s of back-to-back GEMMs, median of all samples", note) if p
        ),
        all_samples=True,
    )
    ceiling.kernel, ceiling.phase, ceiling.soak_s = kernel, "sustained", round(soaked_s, 3)
    return ceiling
