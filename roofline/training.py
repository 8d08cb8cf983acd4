"""Roofline numbers in a training loop: every N steps, one step is profiled and its MFU, MBU, roofline time and top
finding are logged (docs/training.md).

:class:`StepProfiler` is the plain hook for a hand-written loop (``start_step()`` / ``end_step()``, or ``with
profiler.step():``); ``HuggingFaceCallback`` (a ``transformers.TrainerCallback``) and ``LightningCallback`` (a
Lightning ``Callback``) are thin adapters, defined on first use and only where their package imports (never at
``import roofline``). A window is the profiled region of :func:`roofline.profile` with one step
(roofline.diagnose.region: 1 step counted under the dispatch mode, 1 timed plain, 1 profiler warm-up, 1 profiled:
four steps of the loop, the rest untouched), diagnosed as ``roofline.profile()`` does: MFU and MBU are its
iteration summary's (roofline.report.aggregate.iteration_summary, the one definition), the roofline time its
``roof_time_s``, the top finding its first.

Where the numbers go: ``log=`` a JSONL file (one line per window, appended with one write), ``writer=`` a
TensorBoard ``SummaryWriter`` (or anything with ``add_scalar``/``add_text``), ``callback=`` any function of the
entry; the Hugging Face adapter adds them to the trainer's log history and its next ``logs``, the Lightning one to
the trainer's logger. A window whose diagnosis fails logs the error and training goes on.

Reusing the count: the counting step (about 170 ops through the dispatch mode for a small MLP step: 15-20 ms on a
CPU) is paid once, then each later window's count step runs untouched and the window is diagnosed on the kept
records, as long as its profiled ops have the signature of the window that counted them (:func:`op_signature`:
every op's name and input shapes, as a multiset). When the signature differs (new shapes, other ops), nothing is
logged for that window and the next step opens a window that counts afresh; every ``recount_every``-th window
counts afresh anyway (a change the signature cannot see, e.g. a dtype change with the same shapes and op names on a
CPU). ``reuse_counts=False`` counts in every window.
"""

from __future__ import annotations

import gc
import json
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roofline.errors import UsageError

WINDOW_STEPS = 4  # the loop's steps one window takes: counted, timed plain, the profiler's warm-up, profiled
PREFIX = "roofline/"  # the metric names' prefix in TensorBoard and the trainers' logs


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector held off while roofline's own work runs between two steps (the profiler's
    events read, the diagnosis), and restored as it was.

    NB: that work allocates some 10^5 short-lived objects; with the collector on they trigger collections that
    promote them and, every few windows, a full collection over every object of the process (torch's included):
    386 ms once in 10 windows on the 2-core CPU here, 40 ms a window on average (benchmarks/callback_overhead.py).
    Held off, nearly all of them are freed by their reference counts when the diagnosis ends, and the collections
    they would have caused do not happen; the few cycles left are collected at the next collection, as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def append_line(path: Path, entry: dict[str, Any]) -> None:
    """Append ``entry`` as one JSON line with one write to a file opened for appending: lines from several
    processes never interleave, and a line is whole or absent."""
    data = (json.dumps(entry, sort_keys=True, allow_nan=False, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def entry_of(step: int, result: Any) -> dict[str, Any]:
    """The logged numbers of one window's diagnosis (a roofline.diagnose.pipeline.DiagnoseResult)."""
    summary = result.placed.summary
    top = result.findings[0] if result.findings else None
    return {
        "step": step,
        "mfu": summary.mfu,
        "mbu": summary.mbu,
        "mfu_roof": summary.mfu_roof,
        "roofline_time_s": summary.roof_time_s,
        "step_time_s": summary.wall_s,
        "flops": summary.flops,
        "bytes": summary.bytes,
        "device": result.device.name,
        "top_finding": top.rule if top is not None else "",
        "top_finding_text": f"{top.bottleneck} ({top.where}): {top.summary()}" if top is not None else "",
    }


def op_signature(events: Iterable[dict[str, Any]]) -> tuple[tuple[tuple[str, str, str], int], ...]:
    """A profiled window's op stream in a form cheap to compare: how many times each (kind, name, input shapes)
    of its ops and kernels occurs (a multiset: the order threads interleave in does not matter). Two windows with
    the same signature ran the same ops on the same shapes, so their counted FLOPs and bytes are the same."""
    seen: Counter[tuple[str, str, str]] = Counter()
    for e in events:
        kind = e.get("kind")
        if kind == "op":
            seen[("op", str(e.get("name")), repr(e.get("input_shapes")))] += 1
        elif kind == "kernel":  # a GPU's kernels: a dtype change shows in their names
            seen[("kernel", str(e.get("name")), "")] += 1
    return tuple(sorted(seen.items()))


@dataclass(frozen=True)
class CountedStep:
    """A window's count kept for the next windows: the records, their devices, and the signature of the profiled
    ops they were diagnosed with."""

    records: tuple[Any, ...]
    devices: tuple[str, ...]
    signature: tuple[tuple[tuple[str, str, str], int], ...]


def scalars(entry: dict[str, Any]) -> dict[str, float]:
    """The entry's numbers as prefixed scalars (what TensorBoard and the trainers' loggers take)."""
    names = ("mfu", "mbu", "roofline_time_s", "step_time_s")
    return {PREFIX + name: float(entry[name]) for name in names if isinstance(entry.get(name), (int, float))}


class StepProfiler:
    """Profile one step every ``every`` steps of a training loop and log its MFU, MBU, roofline time and top
    finding (the module docstring). Call :meth:`start_step` before and :meth:`end_step` after every step (or run
    it inside ``with profiler.step():``). The first window starts at step ``first`` (default ``every``: after the
    loop has warmed up), then every ``every`` steps; ``every`` must be at least 4 (a window's steps).

    ``model``: the nn.Module, for module paths in the findings (optional). ``device``, ``sheet``, ``spec_files``,
    ``roofs``: as :func:`roofline.profile`; the roofs are resolved once, at the first window (``placed_on``: a
    roofline.device.Device to use instead, e.g. ``roofline.roofs.device_roofs('cpu')[0]`` resolved before the
    loop). :attr:`entries` holds every logged entry; :attr:`last` the latest, :attr:`result` the latest
    diagnosis.

    ``reuse_counts`` (default True): count once and reuse the count while the profiled ops keep its signature (the
    module docstring), counting afresh every ``recount_every`` windows; :attr:`counts` says how many windows
    counted, reused a count, and were dropped because their ops had changed."""

    def __init__(
        self,
        every: int = 100,
        *,
        log: str | Path | None = None,
        writer: Any = None,
        callback: Callable[[dict[str, Any]], None] | None = None,
        model: Any = None,
        first: int | None = None,
        device: str | None = None,
        sheet: str | None = None,
        spec_files: Sequence[Path] = (),
        roofs: str = "auto",
        placed_on: Any = None,
        reuse_counts: bool = True,
        recount_every: int = 10,
    ) -> None:
        if every < WINDOW_STEPS:
            raise UsageError(f"every={every}: at least {WINDOW_STEPS} (one profiled window takes {WINDOW_STEPS} steps)")
        self.every = every
        self.first = every if first is None else first
        if self.first < 0:
            raise UsageError(f"first={self.first}: at least 0")
        self.log = Path(log) if log is not None else None
        self.writer = writer
        self.callback = callback
        self.model = model
        self.device = device
        self._roof_options = {"sheet": sheet, "spec_files": list(spec_files), "roofs": roofs}
        self._roofs: tuple[Any, list[str]] | None = None if placed_on is None else (placed_on, [])
        self.entries: list[dict[str, Any]] = []
        self.result: Any = None  # the latest window's diagnosis (roofline.diagnose.pipeline.DiagnoseResult)
        self.step_index = 0  # the step running now (or next)
        self.profile_s = 0.0  # seconds spent diagnosing windows (their steps' own time is the loop's)
        self._region: Any = None
        self._window_step = 0
        self._in_step = False
        if recount_every < 1:
            raise UsageError(f"recount_every={recount_every}: at least 1")
        self.reuse_counts = reuse_counts
        self.recount_every = recount_every
        self.counted: CountedStep | None = None  # the count the next windows reuse
        self.counts = {"counted": 0, "reused": 0, "changed": 0}
        self._reusing = False  # the open window reuses self.counted
        self._reuses_left = 0  # windows that may still reuse self.counted before one counts afresh
        self._recount_at: int | None = None  # the step a window that counts afresh opens at (the ops changed)

    @property
    def last(self) -> dict[str, Any] | None:
        return self.entries[-1] if self.entries else None

    @property
    def active(self) -> bool:
        """A window is open (its steps are instrumented)."""
        return self._region is not None

    def starts_window(self, step: int) -> bool:
        return (step >= self.first and (step - self.first) % self.every == 0) or step == self._recount_at

    # ------------------------------------------------------------------------------------------- steps

    def start_step(self, model: Any = None) -> None:
        """A step of the loop begins (``model``: the nn.Module, where not given at construction)."""
        if self._in_step:
            raise UsageError("start_step() twice without end_step(): call end_step() after every step")
        self._in_step = True
        if self._region is None and self.starts_window(self.step_index):
            from roofline.diagnose.region import Region

            reuse = self.counted is not None and self._reuses_left > 0
            self._reusing = reuse
            self._recount_at = None
            self._region = Region(
                steps=1,
                warmup=0,
                model=model if model is not None else self.model,
                device=self.device,
                counted=(self.counted.records, self.counted.devices) if reuse and self.counted is not None else None,
            )
            self._window_step = self.step_index
            self._region.__enter__()

    def end_step(self) -> None:
        """The step that began at :meth:`start_step` has ended."""
        if not self._in_step:
            raise UsageError("end_step() without start_step(): call start_step() before every step")
        self._in_step = False
        self.step_index += 1
        region = self._region
        if region is None:
            return
        with gc_paused():
            region.step()
            if region.done:
                self._region = None
                region.__exit__(None, None, None)
                self._conclude(region)

    @contextmanager
    def step(self, model: Any = None) -> Iterator[None]:
        """``with profiler.step(): ...`` one step of the loop; an exception in it closes the open window
        (nothing is logged for it) and goes on up."""
        self.start_step(model)
        try:
            yield
        except BaseException:
            self._in_step = False
            self.step_index += 1
            self.close()
            raise
        self.end_step()

    def close(self) -> None:
        """Close a window left open (the loop ended inside one): nothing is logged for it."""
        region, self._region = self._region, None
        if region is not None:
            region.__exit__(None, None, None)

    # ---------------------------------------------------------------------------------------- diagnosis

    def _roofs_of(self, torch_device: str, **options: Any) -> tuple[Any, list[str]]:
        if self._roofs is None:
            from roofline.roofs import device_roofs

            self._roofs = device_roofs(torch_device, **options)
        return self._roofs

    def _conclude(self, region: Any) -> None:
        from roofline.diagnose.region import diagnose_region

        began = time.perf_counter()
        if not self._keep_count(region):
            self.profile_s += time.perf_counter() - began
            return  # its ops changed since they were counted: the next step opens a window that counts them
        try:
            self.result = diagnose_region(region, roofs_of=self._roofs_of, **self._roof_options)
            entry = entry_of(self._window_step, self.result)
        except Exception as exc:  # NB: never stop the user's training over a diagnosis
            entry = {"step": self._window_step, "error": f"{type(exc).__name__}: {exc}"}
            warnings.warn(f"roofline: the window at step {self._window_step} was not diagnosed: {entry['error']}",
                          stacklevel=3)  # fmt: skip
        self.profile_s += time.perf_counter() - began
        self.emit(entry)

    def _keep_count(self, region: Any) -> bool:
        """Keep a fresh window's count for the next windows; for a window that reused one, whether its profiled
        ops still have the count's signature (False: the count is dropped and the next step opens a window that
        counts afresh)."""
        if not self.reuse_counts or not region.captured.events:
            return True
        signature = op_signature(region.captured.events)
        if not self._reusing:
            self.counts["counted"] += 1
            self._reuses_left = self.recount_every - 1
            if region.captured.records:
                self.counted = CountedStep(tuple(region.captured.records), tuple(region.captured.devices), signature)
            return True
        if self.counted is not None and signature == self.counted.signature:
            self.counts["reused"] += 1
            self._reuses_left -= 1
            return True
        self.counts["changed"] += 1
        self.counted = None
        self._recount_at = self.step_index
        return False

    def emit(self, entry: dict[str, Any]) -> None:
        """Log ``entry`` everywhere this profiler logs to."""
        self.entries.append(entry)
        if self.log is not None:
            append_line(self.log, entry)
        if self.writer is not None:
            for name, value in scalars(entry).items():
                self.writer.add_scalar(name, value, entry["step"])
            text = entry.get("top_finding_text") or entry.get("error")
            if text and hasattr(self.writer, "add_text"):
                self.writer.add_text(PREFIX + "top_finding", text, entry["step"])
        if self.callback is not None:
            self.callback(entry)


# -------------------------------------------------------------------------------------- the adapters


def huggingface_callback(base: type) -> type:
    """The Hugging Face adapter on ``base`` (transformers.TrainerCallback; tests pass a fake): the profiler's
    steps are the trainer's optimizer steps; each entry goes to ``state.log_history`` and its numbers into the
    next ``logs`` the trainer reports (on_log)."""

    class HuggingFaceCallback(base):  # type: ignore[misc, valid-type]
        def __init__(self, every: int = 100, **options: Any) -> None:
            self.profiler = StepProfiler(every, **options)
            self._pending: dict[str, float] = {}
            self._state: Any = None
            user = self.profiler.callback

            def to_trainer(entry: dict[str, Any]) -> None:
                self._pending.update(scalars(entry))
                if self._state is not None:
                    self._state.log_history.append({**scalars(entry), "step": getattr(self._state, "global_step", 0)})
                if user is not None:
                    user(entry)

            self.profiler.callback = to_trainer

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._state = state
            self.profiler.start_step(kwargs.get("model"))

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._state = state
            self.profiler.end_step()

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
        ) -> None:
            if logs is not None and self._pending:
                logs.update(self._pending)
                self._pending = {}

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.profiler.close()

    return HuggingFaceCallback


def lightning_callback(base: type) -> type:
    """The Lightning adapter on ``base`` (lightning.pytorch.Callback; tests pass a fake): the profiler's steps are
    the training batches; each entry's numbers go to the trainer's logger (``log_metrics``)."""

    class LightningCallback(base):  # type: ignore[misc, valid-type]
        def __init__(self, every: int = 100, **options: Any) -> None:
            self.profiler = StepProfiler(every, **options)
            self._trainer: Any = None
            user = self.profiler.callback

            def to_logger(entry: dict[str, Any]) -> None:
                logger = getattr(self._trainer, "logger", None)
                if logger is not None:
                    logger.log_metrics(scalars(entry), step=entry["step"])
                if user is not None:
                    user(entry)

            self.profiler.callback = to_logger

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            self._trainer = trainer
            self.profiler.start_step(pl_module)

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            self._trainer = trainer
            self.profiler.end_step()

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self.profiler.close()

    return LightningCallback


def __getattr__(name: str) -> type:  # PEP 562: the adapters, built where their package imports
    if name == "HuggingFaceCallback":
        try:
            from transformers import TrainerCallback
        except ImportError:
            raise UsageError(
                "roofline.training.HuggingFaceCallback needs transformers: pip install transformers"
            ) from None
        value = huggingface_callback(TrainerCallback)
    elif name == "LightningCallback":
        value = lightning_callback(_lightning_base())
    else:
        raise AttributeError(f"module 'roofline.training' has no attribute {name!r}")
    globals()[name] = value
    return value


def _lightning_base() -> type:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        try:
            from pytorch_lightning import Callback
        except ImportError:
            raise UsageError("roofline.training.LightningCallback needs Lightning: pip install lightning") from None
    return Callback


__all__ = ["PREFIX", "WINDOW_STEPS", "CountedStep", "StepProfiler", "append_line", "entry_of", "huggingface_callback",
           "lightning_callback", "op_signature", "scalars"]  # fmt: skip
