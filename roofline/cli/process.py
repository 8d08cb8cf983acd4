"""What the `roofline` process may do because it ends after its one command: set by :func:`roofline.cli.main`
when it is the process's entry point (the console script, ``python -m roofline``), never for an in-process caller
(tests calling ``main([...])`` or the typer app, a notebook using :mod:`roofline.api`)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_ENTRY = [False]


def set_entry(entry: bool) -> None:
    """Whether this run of the CLI is the process's entry point (``main()`` called with no argv); the entry point
    also freezes what a large JSON document's parse made (roofline.yamlio.freeze_parsed: its report or baseline
    lives until the process ends, and no collection walks it again)."""
    from roofline.yamlio import freeze_parsed

    _ENTRY[0] = entry
    freeze_parsed(entry)


def is_entry() -> bool:
    return _ENTRY[0]


def freeze_heap() -> None:
    """In the CLI's own process only: move every object alive now into the garbage collector's permanent
    generation (``gc.freeze()``, documented since Python 3.7), so that no later collection walks them again.

    Why: torch's import leaves about 200,000 objects tracked by the collector; each full collection during a
    diagnose walks them all (0.2 s of CPU on this project's CPU host in one diagnose), and so does each of the
    collections of the interpreter's exit (0.3-0.4 s there: the exit took 0.53-0.58 s of a 3.9 s diagnose, 0.17 s
    with the heap frozen). What it costs: the objects frozen are never collected, so garbage cycles among them
    (and their finalizers) outlive the process's work; the process ends right after, and Python does not promise
    to finalize objects still alive at exit anyway. Nothing of the exit is skipped: atexit handlers (logging's
    flush, multiprocessing's child clean-up, weakref finalizers), non-daemon threads, the modules' teardown and
    the flush of standard output all run as before. (Ending with ``os._exit`` after flushing would save a further
    0.1 s here, but would skip those atexit handlers, which the model file's libraries may need, or need
    ``atexit._run_exitfuncs``, a private function: not done.)"""
    if _ENTRY[0]:
        gc.freeze()


@contextlib.contextmanager
def frozen_after() -> Iterator[None]:
    """In the CLI's own process only: the garbage collector paused (``gc.disable()``) while the block runs (an
    import of torch: its own collections walk the growing heap again and again), then every object alive frozen
    (:func:`freeze_heap`) and the collector resumed as it was. Elsewhere: the block alone."""
    with collector_paused():
        try:
            yield
        finally:
            freeze_heap()  # NB: a no-op outside the CLI's own process


@contextlib.contextmanager
def collector_paused(on: bool = True) -> Iterator[None]:
    """In the CLI's own process only (and ``on``): the garbage collector paused while the block runs, then resumed
    as it was. For a command that reads a report and writes what it shows (a page, a chart, a table, a baseline, a
    gate of a report): what it makes is acyclic or lives until the process ends, and the collections its objects
    trigger found nothing (100,000 points, marks and findings took 40% longer with them: each full collection
    walks every object made since the report was read, again and again as they grow). Never around running the
    user's code or measuring (their garbage needs the collector)."""
    if not (on and _ENTRY[0]):
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


__all__ = ["collector_paused", "freeze_heap", "frozen_after", "is_entry", "set_entry"]
