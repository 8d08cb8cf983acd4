"""`--timeout TIME` of diagnose, bench and gate: a wall-clock bound on the work, as coreutils `timeout` gives,
but inside the process, so that the work finished so far is kept (bench writes its rows) and the message says
what was running. SIGALRM (signal.setitimer) raises roofline.errors.TimedOut, a KeyboardInterrupt like Ctrl-C;
the CLI exits 124 (gate: 4, nothing measured)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer


def timeout_option(outcome: str) -> Any:
    """The --timeout option; ``outcome``: what the command does when it runs out (said in --help)."""
    return typer.Option(
        None,
        "--timeout",
        help=f"Stop after TIME of wall-clock time (600, 90s, 10min; bare: seconds): {outcome}. Default: no limit.",
        metavar="TIME",
        show_default=False,
    )


def check_timeout(seconds: float | str | None) -> float | None:
    """``seconds`` when it is a positive finite number (or None: no limit), else UsageError (exit 2); a text is the
    option's (``600``, ``10min``: roofline.units.parse_time)."""
    if seconds is None:
        return None
    if isinstance(seconds, str):
        from roofline.units import parse_time

        return parse_time(seconds, "--timeout", "s")
    if not math.isfinite(seconds) or seconds <= 0:
        from roofline.errors import UsageError

        raise UsageError(f"--timeout {seconds:g}: give a positive number of seconds, e.g. --timeout 600")
    return seconds


@contextmanager
def time_limit(seconds: float | str | None) -> Iterator[None]:
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


#: the signals that stop a command (Ctrl-C, SIGTERM, SIGHUP, --timeout's SIGALRM), held while finished work is kept
STOPPING = ("SIGINT", "SIGTERM", "SIGHUP", "SIGALRM")


class SignalHold:
    """Holds the stopping signals from :meth:`hold` (bench: once its loop has ended, its rows kept) until
    :meth:`release` (once the report is written): a signal that comes in between is recorded, not acted on, so it
    cannot cost the rows finished so far; on release the handlers are put back and the first signal recorded is
    raised again (Ctrl-C, SIGTERM, SIGHUP: their exit code), except SIGALRM, which only --timeout's timer sends and
    which is moot once the work is kept (dropped). NB: the Python-level handlers are swapped, not the signal mask:
    a process-directed signal may reach any thread (torch's own included), and Python runs every handler in the
    main thread. Main thread only (elsewhere: nothing is held)."""

    def __init__(self) -> None:
        self.saved: dict[int, Any] = {}
        self.pending: list[int] = []

    def _record(self, signum: int, frame: object) -> None:
        self.pending.append(signum)

    def hold(self) -> None:
        import signal
        import threading

        if self.saved or threading.current_thread() is not threading.main_thread():
            return
        for name in STOPPING:
            number = getattr(signal, name, None)
            if number is not None:
                self.saved[int(number)] = signal.signal(number, self._record)

    def release(self) -> None:
        import signal

        saved, self.saved = self.saved, {}
        for number, handler in saved.items():
            if signal.getsignal(number) == self._record and handler is not None:  # else: replaced since (--timeout)
                signal.signal(number, handler)
        alarm = getattr(signal, "SIGALRM", None)
        pending = [number for number in self.pending if number != alarm]
        self.pending = []
        if pending:
            signal.raise_signal(pending[0])


def say_stopped(interruption: BaseException | None, done: str, during: str = "") -> NoReturn:
    """How a run stopped (--timeout, Ctrl-C, a signal) and what it kept, in one line; then its exit code
    (roofline.errors.interrupt_exit_code)."""
    from roofline.cli.verbosity import info
    from roofline.errors import TimedOut, interrupt_exit_code

    where = f" while {during}" if during else ""
    if isinstance(interruption, TimedOut):
        info(f"Timed out after {interruption.seconds:g} s (--timeout){where}: {done}")
    else:
        info(f"Interrupted{where}: {done}")
    raise typer.Exit(interrupt_exit_code(interruption))
