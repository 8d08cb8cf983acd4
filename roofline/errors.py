"""Typed errors. The CLI turns each into one line ``Error: ...`` and the exit code it carries.

Exit codes (documented in docs/cli.md):
  0  success
  1  the user's own code failed (their traceback is shown); for ``gate``: a regression
  2  usage or input error: bad option, unknown device, invalid spec sheet or workload file; work too large for
     the memory this machine has free
  3  ``gate``: inconclusive (too noisy to decide)
  4  ``gate``: nothing was measured (the model or suite failed or stopped): never a pass
  124 ``--timeout`` ran out (as coreutils ``timeout``): the work finished so far is kept
  130 interrupted (Ctrl-C); 143 terminated (SIGTERM), 129 hung up (SIGHUP): handled like Ctrl-C
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_USER_CODE = 1
EXIT_USAGE = 2
EXIT_INCONCLUSIVE = 3
EXIT_NOT_MEASURED = 4
EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (as `timeout` or a closed terminal sends): handled like Ctrl-C, so the work finished so far
    is kept (bench writes its rows), then the exit code is 128 + the signal's number (143, 129)."""

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(name)
        self.exit_code = 128 + signum
        self.signal_name = name


class TimedOut(KeyboardInterrupt):
    """``--timeout`` ran out (SIGALRM, in the main thread): handled like Ctrl-C, so the work finished so far is
    kept (bench writes its rows), then exit 124. ``stage`` names what was running, when the command knows it."""

    exit_code = EXIT_TIMEOUT

    def __init__(self, seconds: float, stage: str = "") -> None:
        super().__init__(seconds)
        self.seconds = seconds
        self.stage = stage

    def __str__(self) -> str:
        return f"timed out after {self.seconds:g} s" + (f" while {self.stage}" if self.stage else "")


def interrupt_exit_code(exc: BaseException | None) -> int:
    """The exit code of an interruption: 128 + the signal's number for SIGTERM/SIGHUP, 124 for --timeout, else
    130 (Ctrl-C)."""
    return exc.exit_code if isinstance(exc, (Terminated, TimedOut)) else EXIT_INTERRUPTED


class RooflineError(Exception):
    """Base class: a problem we can explain in one line."""

    exit_code = EXIT_USAGE


class UsageError(RooflineError):
    """Bad option values, sizes, dtypes."""


class SpecError(RooflineError):
    """A spec sheet that cannot be read or does not validate."""


class UnknownDeviceError(RooflineError):
    """A device name that matches no spec sheet."""


class WorkloadError(RooflineError):
    """A workload, model config or suite file that cannot be used."""


class ReportError(RooflineError):
    """A report file that is missing, corrupt or of a foreign format."""


class DeviceError(RooflineError):
    """A device the command needs is absent or unusable (e.g. --device cuda where torch sees no GPU)."""


class ResourceError(RooflineError):
    """Work too large for the memory this machine has free (``bench``: every row skipped before allocating, or
    out of memory; the process guard's limit reached): one line, exit 2."""


class CalibrationError(RooflineError):
    """A calibration cache file that is corrupt or of a foreign format."""

    def __init__(self, message: str, path: object = None) -> None:
        super().__init__(message)
        self.path = path


class UserCodeError(RooflineError):
    """The user's own code (their model file, its forward) raised: show their traceback, exit 1."""

    exit_code = EXIT_USER_CODE

    def __init__(self, message: str, traceback_text: str = "") -> None:
        super().__init__(message)
        self.traceback_text = traceback_text


class NotMeasured(RooflineError):
    """``gate``: the suite or model measured nothing (its code failed, it timed out, no row was measured): never
    a pass, exit 4. ``traceback_text``: the user's traceback when their code failed."""

    exit_code = EXIT_NOT_MEASURED

    def __init__(self, message: str, traceback_text: str = "") -> None:
        super().__init__(message)
        self.traceback_text = traceback_text


def exception_chain(exc: BaseException, limit: int = 8) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during (``__cause__``, else ``__context__``), outermost
    first, at most ``limit`` of them."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < limit:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    return chain


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.cuda.OutOfMemoryError, a RuntimeError saying 'out of memory', or the host allocator failing: the one
    test bench (an item skipped) and diagnose (one clear line) use, without importing torch."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
