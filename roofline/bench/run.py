"""The bench loop: workloads x one device -> measured rows placed on that device's roofline.

The loop (:func:`run_bench`) is pure orchestration over injected parts, so it is tested with fakes:

- ``build(kind, params) -> Runnable``: the op to time (``runners.build`` on a real device);
- a :class:`Harness`: the timing backend (CUDA events, CPU clock), the cache flush, the clock monitor and the
  stopping rule, handed to ``roofline.measure.measure``;
- the :class:`~roofline.device.Device` whose roofs place the rows (a spec sheet, a calibration, the CPU).

Per item: the cost formula gives exact FLOPs and bytes, ``place`` the iron-law time on the roofs, the
harness the measured time, and a :class:`~roofline.report.rows.BenchRow` holds all three. Efficiency is the
roofline time over the measured median (1.0 = on the roof; launches excluded) and the bound 'launch' when the
median is within roofline.ironlaw.LAUNCH_FACTOR of the launch floors: see :func:`bench_row`. Before an item
allocates anything, its memory estimate (roofline.bench.memory) is checked against what the device has free (the
harness's ``memory``): one that does not fit is skipped with the reason, as is one whose allocation fails (out of
memory), and the rest go on; Ctrl-C stops the loop and returns the rows finished so far.

What runs lives in ``roofline.bench.items`` (:class:`~roofline.bench.items.BenchItem`), the real set-up in
``roofline.bench.target`` (``open_target``: CUDA or CPU, roofs resolved by ``roofline.roofs``; torch lazily).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from roofline import ironlaw
from roofline.analysis import analyze_one
from roofline.bench import memory as bench_memory
from roofline.bench.items import BenchItem
from roofline.costs.models import get_model
from roofline.device import Device
from roofline.errors import ResourceError, RooflineError, WorkloadError, is_out_of_memory
from roofline.measure.engine import Backend, ClockMonitor, Measurement, measure
from roofline.measure.stopping import StoppingRule
from roofline.report.rows import BenchRow, Row
from roofline.samples import median as median_of


class Runnable(Protocol):
    """What the loop needs from an op (``runners.Bench`` is one)."""

    op: str
    fn: Callable[[], object] | None
    notes: list[str]

    def active(self) -> AbstractContextManager[None]: ...

    def prepare(self) -> None: ...

    def check(self) -> None: ...

    def release(self) -> None: ...


Build = Callable[[str, Any], Runnable]  # (kind, validated params) -> op
Progress = Callable[[int, int, str], None]  # (items done, items in all, label of the one starting or '')


@dataclass(frozen=True)
class Skipped:
    """An item that did not run, and why (out of memory, an op this device or torch cannot run)."""

    kind: str
    label: str
    reason: str
    out_of_memory: bool = False
    error: RooflineError | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("error")
        return data


@dataclass
class BenchResult:
    rows: list[BenchRow]
    skipped: list[Skipped]
    total: int
    interrupted: bool = False
    interruption: KeyboardInterrupt | None = None  # what stopped it: Ctrl-C, or SIGTERM/SIGHUP (errors.Terminated)

    def first_error(self) -> RooflineError | None:
        """The first skip that was not an out-of-memory (a problem to report when nothing ran)."""
        return next((s.error for s in self.skipped if s.error is not None and not s.out_of_memory), None)


def _noop() -> None:
    pass


@dataclass
class Harness:
    """How each item is timed: passed to roofline.measure.measure."""

    backend: Backend
    flush: Callable[[], object] | None = None
    lead: Callable[[], object] | None = None  # untimed, after the flush, when samples are taken one by one
    cover: Callable[[float], object] | None = None  # untimed, once ahead of each batch: a sleep of the seconds given
    batch_s: float = 0.0  # samples queued back to back, about this much of the op's time per batch (0: one by one)
    clock: ClockMonitor | None = None
    rule: StoppingRule = field(default_factory=StoppingRule)
    warmup_s: float = 0.02
    threads: int | None = None
    now: Callable[[], float] = time.perf_counter
    cleanup: Callable[[], None] = _noop  # after each item, once its tensors are released (CUDA: empty_cache)
    description: str = ""  # e.g. 'device time per call (CUDA events), L2 flushed before each sample'
    cache: str | None = None  # 'cold' | 'warm' when ``flush`` does more than flush (None: from the measurement)
    rest_s: float = 0.0  # idle time before each item (CUDA: REST_S), after synchronising the device
    sleep: Callable[[float], None] = time.sleep
    check: bool = True  # a second sample set per row; re-measure once when it disagrees (measure's ``check``)
    memory: Callable[[], bench_memory.Free | None] | None = None  # free memory now, before each item (None: unchecked)

    def measure(self, fn: Callable[[], object]) -> Measurement:
        if self.rest_s > 0:
            self.backend.synchronize()
            self.sleep(self.rest_s)
        return measure(
            fn,
            self.backend,
            flush=self.flush,
            lead=self.lead,
            cover=self.cover,
            batch_s=self.batch_s,
            rule=self.rule,
            warmup_s=self.warmup_s,
            clock=self.clock,
            now=self.now,
            threads=self.threads,
            check=self.check,
        )


# ------------------------------------------------------------------------------------------------ loop


def bench_row(
    row: Row, m: Measurement, item: BenchItem, op: str = "", notes: Sequence[str] = (), cache: str | None = None
) -> BenchRow:
    """``row`` (analytic) with measurement ``m``: achieved rates, and the efficiency and bound of the measured
    median (roofline.ironlaw): roofline time / median; 'launch' within LAUNCH_FACTOR of the launch floors."""
    median = m.median_s
    fields = {name: getattr(row, name) for name in Row.model_fields}
    fields.update(
        label=item.label,
        efficiency=ironlaw.row_efficiency(row.roof_time_s, median) or 0.0,
        bound=ironlaw.measured_bound(row.bound, median, row.launch_time_s),
    )
    return BenchRow(
        **fields,
        name=item.name,
        op=op,
        bench_notes=list(dict.fromkeys([*item.notes, *notes])),
        median_s=median,
        p20_s=m.p20_s,
        p80_s=m.p80_s,
        samples_s=list(m.samples_s),
        n=m.n,
        relative_spread=m.relative_spread if median > 0 else 0.0,
        method=m.method,
        cache=cache or m.cache,
        stop_reason=m.stop_reason,
        throttled_count=m.throttled_count,
        throttle_reasons=list(m.throttle_reasons),
        clocks_mhz=list(m.clocks_mhz),
        threads=m.threads,
        discarded=m.discarded,
        confirm_n=len(m.confirm_samples_s),
        confirm_median_s=median_of(m.confirm_samples_s) if m.confirm_samples_s else None,
        remeasured=m.remeasured,
        remeasure_reason=m.remeasure_reason,
        unstable=m.unstable,
        unstable_reason=m.unstable_reason,
        batch=m.batch,
        achieved_flops_per_s=row.flops / median if median > 0 else 0.0,
        achieved_bytes_per_s=row.bytes / median if median > 0 else 0.0,
        analytic_bound=row.bound,
    )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def run_bench(
    items: Sequence[BenchItem],
    device: Device,
    harness: Harness,
    build: Build,
    *,
    progress: Progress | None = None,
    hold: Callable[[], None] | None = None,
) -> BenchResult:
    """Cost, place, build, time and check every item on ``device``; see the module docstring. A KeyboardInterrupt
    (Ctrl-C, SIGTERM/SIGHUP, --timeout) anywhere in the loop, inside a row or between two, ends it with the rows
    finished so far. ``hold``: called once the loop has ended, however it ended, before anything else (the CLI
    holds the stopping signals there until the rows are written: roofline.cli.timeout.SignalHold)."""
    rows: list[BenchRow] = []
    skipped: list[Skipped] = []
    interrupted = False
    interruption: KeyboardInterrupt | None = None
    try:  # NB: around the whole loop: a signal between two rows (in a clean-up, in progress) keeps the rows too
        for index, item in enumerate(items):
            if progress is not None:
                progress(index, len(items), item.label)
            _run_item(item, device, harness, build, rows, skipped)
        if progress is not None:
            progress(len(items), len(items), "")
    except KeyboardInterrupt as exc:
        if hold is not None:
            hold()
        interrupted, interruption = True, exc
    finally:
        if hold is not None:
            hold()
    if progress is not None and interrupted:
        progress(len(rows) + len(skipped), len(items), "")
    return BenchResult(rows, skipped, len(items), interrupted, interruption)


def _run_item(
    item: BenchItem, device: Device, harness: Harness, build: Build, rows: list[BenchRow], skipped: list[Skipped]
) -> None:
    """Run one item: its row appended to ``rows``, or its skip to ``skipped``. A KeyboardInterrupt goes on up once
    the item's tensors are released."""
    bench: Runnable | None = None
    failed = False
    try:
        params = get_model(item.kind).parse(item.values, item.source)
        too_big = memory_skip(item, params, harness.memory() if harness.memory is not None else None)
        if too_big is not None:  # NB: before anything is allocated (an allocation past the free memory may not fail)
            skipped.append(too_big)
            return
        bench = build(item.kind, params)  # can it run here?
        row = analyze_one(item.kind, item.values, device, item.source)  # does the device have its roof?
        with bench.active():
            bench.prepare()  # one call, output checked
            assert bench.fn is not None
            measured = harness.measure(bench.fn)
            bench.check()
        rows.append(bench_row(row, measured, item, bench.op, bench.notes, cache=harness.cache))
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        failed = True
        if is_out_of_memory(exc):
            skipped.append(Skipped(item.kind, item.label, f"out of memory: {_one_line(exc)}", True))
        elif isinstance(exc, RooflineError):
            skipped.append(Skipped(item.kind, item.label, str(exc), error=exc))
        elif isinstance(exc, (RuntimeError, NotImplementedError)):  # torch cannot run it (dtype, device)
            message = f"{item.kind} {item.label}: torch failed: {_one_line(exc)}"
            skipped.append(Skipped(item.kind, item.label, message, error=WorkloadError(message)))
        else:
            raise
    finally:
        if bench is not None:
            bench.release()
        bench = None
        if failed:
            gc.collect()  # the traceback's frames may hold tensors in reference cycles
        harness.cleanup()


def memory_skip(item: BenchItem, params: Any, free: bench_memory.Free | None) -> Skipped | None:
    """The skip of ``item`` (its validated ``params``) when its memory estimate does not fit in ``free``, else None."""
    reason = bench_memory.check(bench_memory.estimate(item.kind, params), free)
    return Skipped(item.kind, item.label, f"{item.kind} {item.label}: {reason}", True) if reason else None


def memory_skips(items: Sequence[BenchItem], free: bench_memory.Free | None) -> list[Skipped]:
    """The items that do not fit in ``free`` (checked before a target is opened: no calibration, no allocation)."""
    skips = (memory_skip(item, get_model(item.kind).parse(item.values, item.source), free) for item in items)
    return [skip for skip in skips if skip is not None]


def nothing_ran(result: BenchResult) -> RooflineError | None:
    """The one-line error of a run in which no row ran (every item skipped, not interrupted): the first skip that
    was not for memory (a usage problem), else the first memory skip; None when a row ran."""
    if result.rows or result.interrupted or not result.skipped:
        return None
    error = result.first_error()
    if error is not None:
        return error
    first = result.skipped[0]
    name = f"{first.kind} {first.label}: "
    more = f" (and the other {len(result.skipped) - 1} rows)" if len(result.skipped) > 1 else ""
    return ResourceError(f"{name}{first.reason.removeprefix(name)}{more}: nothing ran")


def bench_report(command: str, target: Any, result: Any, suite: dict[str, str] | None = None) -> Any:
    """The versioned report of a bench run: its rows, the target's facts, the suite's name and file (``suite``:
    null for a single command; baselines read it), the machine, what was skipped. One home for `roofline bench`
    and `roofline gate SUITE`."""
    from roofline.report.schema import new_report
    from roofline.specs.detect import describe_machine

    info = {**target.info, "roof_source": target.device.roof_source, "notes": target.notes, "suite": suite}
    return new_report(command, "bench", [target.device], result.rows).model_copy(
        update={
            "bench": info,
            "machine": describe_machine(f"{target.kind}:{target.info.get('index', 0)}", target.device.name),
            "skipped": [s.to_dict() for s in result.skipped],
            "interrupted": result.interrupted,
            "total": result.total,
        }
    )
