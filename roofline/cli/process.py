"""What the `roofline` process may do because it ends after its one command: set by :func:`roofline.cli.main`
when it is the process's entry point (the console script, ``python -m roofline``), never for an in-process caller
(tests calling ``main([...])`` or the typer app, a notebook using :mod:`roofline.api`)."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
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
    to finalize objects still alive at exit anyway. (The exit itself: :func:`end_process`, which also skips the
    modules' teardown; the heap frozen still spares the collections of an in-process run's end and of an exit
    that end_process leaves to Python.)"""
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


def end_process(code: object) -> None:
    """The CLI's own process, its command done (files written, output flushed, no thread of the user's code left
    running: roofline.cli._leave): the interpreter's exit done here, without the part that costs and serves
    nothing once the command is over. Python's atexit handlers all run, in their order (logging's flush,
    multiprocessing's and tempfile's clean-up, weakref finalizers, torch's, coverage's, the user's); standard
    output and standard error are flushed, C's stdio buffers too (``fflush(NULL)``: what a C or C++ library
    printed); then ``os._exit(code)``.

    What it skips: the teardown of the objects still alive (their ``__del__``, which Python does not promise to
    run at exit) and the C-level exit handlers of the loaded libraries, torch's static destructors most of all:
    0.20-0.22 s of every process that imported torch on this project's CPU host (``import torch`` then a normal
    exit: 0.245 s after the last line, 0.024 s with ``os._exit``; ``exit()`` of libc alone, after Python's
    teardown was skipped: 0.224 s), and the CUDA runtime's teardown on a GPU (the driver frees the process's
    memory and context when it ends either way). Only where torch was imported (otherwise the exit costs little),
    on POSIX, with a whole-number or no exit code (a message to print is left to Python), and where the
    interpreter has ``atexit._run_exitfuncs`` (CPython's, private; its absence: the normal exit). Elsewhere, and
    for an in-process caller, nothing: the caller's ``sys.exit`` exits as before."""
    if not (code is None or isinstance(code, int)) or os.name != "posix" or "torch" not in sys.modules:
        return
    if watched():  # a profiler writes its file after the command returns (python -m cProfile -m roofline ...)
        return
    import atexit

    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_handlers is None:
        return
    _flush()
    run_handlers()
    _flush()
    os._exit(code or 0)


def watched() -> bool:
    """Whether a tool watches this process: a profiler or tracer (``sys.setprofile``/``sys.settrace``: cProfile
    before Python 3.12, pdb, coverage's tracer) or a ``sys.monitoring`` tool (3.12+: cProfile, coverage,
    debuggers). Such a tool may write its results after the command returns (``python -m cProfile -o FILE -m
    roofline ...`` dumps its stats then): the process then ends as Python ends it."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return False
    return any(monitoring.get_tool(tool) is not None for tool in range(6))


def _flush() -> None:
    """Python's standard output and error, the files the loaded modules hold open (a model file's module-level
    ``log = open(...)``, which a normal exit would flush as it tears the module down), and C's stdio buffers,
    written out (errors ignored: a closed pipe, a file closed meanwhile)."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__, *_open_files()):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).fflush(None)


def _open_files() -> list[object]:
    """The buffered files in the globals of every loaded module (the user's model file among them), not closed.
    NB: only module globals: a file held by an object alone is not found (Python does not promise to flush it at
    exit either); concrete io types, so that the check stays cheap (about 20 ms over torch's modules)."""
    import io

    kinds = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
    found: list[object] = []
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for value in list(names.values()):
            if issubclass(type(value), kinds) and not value.closed:  # NB: type(), not __class__ (no proxy runs)
                found.append(value)
    return found


__all__ = ["collector_paused", "end_process", "freeze_heap", "frozen_after", "is_entry", "set_entry", "watched"]
