"""`--timeout SECONDS` of diagnose, bench and gate: a wall-clock bound on the work, as coreutils `timeout` gives,
but inside the process, so that the work finished so far is kept (bench writes its rows) and the message says
what was running. SIGALRM (signal.setitimer) raises roofline.errors.TimedOut, a KeyboardInterrupt like Ctrl-C;
the CLI exits 124 (gate: 4, nothing measured)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer


def timeout_option(outcome: str) -> Any:
    """The --timeout option; ``outcome``: what the command does when it runs out (said in --help)."""
    return typer.Option(
        None,
        "--timeout",
        help=f"Stop after SECONDS of wall-clock time: {outcome}. Default: no limit.",
        metavar="SECONDS",
        show_default=False,
    )


def check_timeout(seconds: float | None) -> float | None:
    """``seconds`` when it is a positive finite number (or None: no limit), else UsageError (exit 2)."""
    if seconds is None:
        return None
    if not math.isfinite(seconds) or seconds <= 0:
        from roofline.errors import UsageError

        raise UsageError(f"--timeout {seconds:g}: give a positive number of seconds, e.g. --timeout 600")
    return seconds


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise roofline.errors.TimedOut in the main thread once ``seconds`` of wall-clock time have passed inside
    the block (None: no limit); the timer is stopped and the previous SIGALRM handler put back on the way out."""
    seconds = check_timeout(seconds)
    if seconds is None:
        yield
        return
    import signal
    import threading

    from roofline.errors import TimedOut, UsageError

    if not hasattr(signal, "setitimer"):
        raise UsageError("--timeout: not available on this platform (no SIGALRM); use the shell's `timeout`")
    if threading.current_thread() is not threading.main_thread():
        raise UsageError("--timeout: only in the main thread (signals are delivered there)")

    def handler(signum: int, frame: object) -> None:
        raise TimedOut(seconds)

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        try:
            signal.setitimer(signal.ITIMER_REAL, seconds)
        except (OverflowError, ValueError, OSError) as exc:
            raise UsageError(f"--timeout {seconds:g}: too large for the system's timer ({exc})") from None
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        if previous is not None:  # None: a handler not set from Python, which cannot be put back
            signal.signal(signal.SIGALRM, previous)
