"""The user-code boundary, and running the user's model once, the same way in the counting and the timing pass.

Every place the user's code runs (the import of their file, get_inputs(), get_init_inputs(), the constructor,
an --entry function, forward in the counting and the timing pass) runs inside :func:`user_code`, which keeps
roofline in charge of the process: an exception (SystemExit included) becomes a UserCodeError carrying their
traceback (its message shown safely, whatever its ``__str__`` does); os._exit() raises instead of ending the
process without a report; a closed sys.stdout or sys.stderr, a replaced one, the working directory and every signal
handler the code installed are put back afterwards. Ctrl-C, SIGTERM/SIGHUP (errors.Terminated)
and --timeout (errors.TimedOut), all KeyboardInterrupts, go on up untouched.
"""

from __future__ import annotations

import io
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

from roofline.errors import RooflineError, UserCodeError

Mode = Literal["inference", "training"]

_depth = 0  # how many user_code() boundaries are open: an inner one only converts exceptions


def exception_text(exc: BaseException) -> str:
    """``Type: message`` of an exception from the user's code (``Type`` alone without a message), whatever its
    ``__str__`` does: one that raises (anything but Ctrl-C), or returns no string, is named instead of shown."""
    name = getattr(type(exc), "__name__", "exception")
    try:
        text = str(exc)
    except KeyboardInterrupt:
        raise
    except BaseException as failure:  # their __str__ may raise anything, SystemExit included
        failure_name = getattr(type(failure), "__name__", "exception")
        return f"{name} (its message could not be shown: its __str__ raised {failure_name})"
    if not isinstance(text, str):  # a str subclass's __str__ may return anything
        return name
    return f"{name}: {text}" if text else name


def user_traceback(exc: BaseException, user_file: str | None = None) -> str:
    """The traceback of ``exc`` with our own frames dropped: from the first frame outside the roofline package
    (the user's code), or the whole chain when none is found. Its last line is :func:`exception_text` (safe
    whatever the exception's ``__str__`` does)."""
    try:
        frames = traceback.extract_tb(exc.__traceback__)
    except KeyboardInterrupt:
        raise
    except BaseException:  # a source line cannot be read (their loader raised)
        return f"{exception_text(exc)}\n"
    keep = [
        f
        for f in frames
        if "/roofline/" not in f.filename.replace("\\", "/") or (user_file and f.filename == user_file)
    ]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(keep or frames)]
    return "".join(lines) + _last_lines(exc)


def _last_lines(exc: BaseException) -> str:
    """The traceback's last lines: a SyntaxError's with its file, line and caret; else :func:`exception_text`."""
    if isinstance(exc, SyntaxError):
        try:
            return "".join(traceback.format_exception_only(type(exc), exc))
        except KeyboardInterrupt:
            raise
        except BaseException:  # a subclass's __str__ that raises
            pass
    return exception_text(exc) + "\n"


class _ExitCalled(BaseException):
    """os._exit(status) called by the user's code (a BaseException: their ``except Exception`` does not catch it)."""

    __module__ = "builtins"  # their traceback ends "ExitCalled: os._exit(0) was called", not our module's path

    def __init__(self, status: object) -> None:
        super().__init__(status)
        self.status = status

    def __str__(self) -> str:
        return f"os._exit({self.status}) was called"


_ExitCalled.__name__ = _ExitCalled.__qualname__ = "ExitCalled"


def _make_exit(real: Callable[[int], NoReturn], owner: int) -> Callable[..., NoReturn]:
    def _exit(status: int = 0, *args: Any, **kwargs: Any) -> NoReturn:
        if os.getpid() != owner:  # a child the user's code forked (multiprocessing ends its children this way)
            real(status)
        raise _ExitCalled(status)

    return _exit


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _closed(stream: Any) -> bool:
    try:
        return bool(stream.closed)
    except Exception:
        return False


def _handlers() -> dict[int, Any]:
    """The Python-level handler of every signal (main thread only: elsewhere none can be set, so none is kept)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    handlers = {}
    for number in signal.valid_signals():
        try:
            handlers[int(number)] = signal.getsignal(number)
        except (OSError, ValueError):
            continue
    return handlers


def _restore_handlers(saved: dict[int, Any]) -> None:
    """Put back every signal handler the user's code replaced (SIGTERM, SIGINT, SIGALRM...): theirs end with their
    calls, so Ctrl-C, SIGTERM and --timeout stop roofline as documented afterwards."""
    import signal

    for number, handler in saved.items():
        if handler is None:  # not set from Python: cannot be put back
            continue
        try:
            if signal.getsignal(number) is not handler:
                signal.signal(number, handler)
        except (OSError, ValueError, TypeError):
            continue


@dataclass
class _Saved:
    """What the user's code may change and roofline needs back: os._exit, the two streams, the working directory,
    the signal handlers."""

    exit: Callable[[int], NoReturn]
    streams: dict[str, tuple[Any, int, bool]]  # name -> (the stream, its fd, whether that fd was open)
    cwd: str | None
    handlers: dict[int, Any]

    @classmethod
    def take(cls) -> _Saved:
        streams = {}
        for name, default_fd in (("stdout", 1), ("stderr", 2)):
            stream = getattr(sys, name)
            fd = _fileno(stream)
            fd = default_fd if fd is None else fd
            streams[name] = (stream, fd, _fd_open(fd))
        try:
            cwd: str | None = os.getcwd()
        except OSError:  # the working directory was removed before we started: nothing to go back to
            cwd = None
        return cls(os._exit, streams, cwd, _handlers())

    def restore(self, what: str) -> str:
        """Put everything back; a line saying what could not be (a closed file descriptor), else ''."""
        os._exit = self.exit
        _restore_handlers(self.handlers)
        problems = []
        for name, (stream, fd, was_open) in self.streams.items():
            if was_open and not _fd_open(fd):
                stream_name = "standard output" if name == "stdout" else "standard error"
                problems.append(f"{what} closed {stream_name} (file descriptor {fd}): roofline cannot print its report")
                setattr(sys, name, stream)
                continue
            if not _closed(stream):
                setattr(sys, name, stream)  # also when the user's code replaced it
                continue
            setattr(sys, name, _reopen(stream, fd, line_buffering=name == "stderr"))
        if self.cwd is not None:
            try:
                if os.getcwd() != self.cwd:
                    os.chdir(self.cwd)
            except OSError:
                os.chdir(self.cwd)  # os.getcwd() fails when the user's code removed its new directory
        return "; ".join(problems)


def _reopen(stream: Any, fd: int, *, line_buffering: bool) -> Any:
    """A working text stream on ``fd`` in place of the closed ``stream`` (``fd`` stays open when it is closed)."""
    encoding = getattr(stream, "encoding", None) or "utf-8"
    errors = getattr(stream, "errors", None) or "backslashreplace"
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False), encoding=encoding, errors=errors, line_buffering=line_buffering
    )


class user_code:  # NB: lower case, used like a function: ``with user_code("the model"):``
    """The boundary around the user's code (see the module docstring).

    An exception from inside becomes ``UserCodeError("{what} raised Type: message")`` with ``trace(exc)`` (their
    frames); SystemExit becomes ``exited`` (formatted with ``code``; default ``"{what} exited (SystemExit:
    {code})"``), os._exit(N) "{what} called os._exit(N)". Our own errors (RooflineError), ``keep`` (e.g. torch's
    out of memory, which the caller explains) and KeyboardInterrupt go on up as they are. The outermost boundary
    also puts os._exit, sys.stdout, sys.stderr and the working directory back afterwards; a closed file
    descriptor 1 or 2 is a UserCodeError (nothing can be printed on it). ``errors=False``: a guard around a
    stage that calls the user's code through inner boundaries: SystemExit and os._exit are converted, other
    exceptions go on up as they are (the stage explains them, e.g. out of memory).

    NB: a class, not a generator: an inner boundary (one per forward in the timing loop) costs about as much as
    an empty ``with``."""

    __slots__ = ("errors", "exited", "keep", "saved", "trace", "what")

    def __init__(
        self,
        what: str = "the model",
        *,
        exited: str = "",
        trace: Callable[[BaseException], str] = user_traceback,
        keep: tuple[type[BaseException], ...] = (),
        errors: bool = True,
    ) -> None:
        self.what, self.exited, self.trace, self.keep, self.errors = what, exited, trace, keep, errors
        self.saved: _Saved | None = None

    def __enter__(self) -> None:
        global _depth
        if _depth == 0:
            self.saved = _Saved.take()
            os._exit = _make_exit(self.saved.exit, os.getpid())
        _depth += 1

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        global _depth
        _depth -= 1
        problem = self.saved.restore(self.what) if self.saved is not None else ""
        self.saved = None
        if exc is None:
            if problem:
                raise UserCodeError(problem)
            return False
        if isinstance(exc, (KeyboardInterrupt, RooflineError)):
            return False
        what = self.what
        if isinstance(exc, _ExitCalled):
            message = (
                f"{what} called os._exit({exc.status}): that would end roofline without a report (raise an "
                "exception to stop instead)"
            )
        elif isinstance(exc, SystemExit):  # NB: sys.exit() must not end (or pass) the run as if it measured
            message = (self.exited or "{what} exited (SystemExit: {code})").format(what=what, code=exc.code)
        elif not self.errors or (self.keep and isinstance(exc, self.keep)):
            return False
        else:
            message = f"{what} raised {exception_text(exc)}"
        raise UserCodeError(message, self.trace(exc)) from None


def _floating_tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() and value.requires_grad else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _floating_tensors(item)]
    return [getattr(value, name) for name in ("loss", "logits") if hasattr(value, name)][:1]


def run_once(
    model: Any,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    mode: Mode,
    *,
    before_backward: Callable[[], None] | None = None,
) -> Any:
    """One forward (inference: under no_grad) or forward + backward of the sum of the outputs (training), inside
    :func:`user_code`: an exception from the user's model, sys.exit() and os._exit() included, becomes a
    UserCodeError carrying their traceback (exit 1); torch's OutOfMemoryError and Ctrl-C go on up.
    ``before_backward``: called once the loss is built, right before its backward (the counting pass's phase)."""
    import torch

    exited = "the model exited while running (SystemExit: {code}): a forward must return"
    with user_code("the model", exited=exited, keep=(torch.cuda.OutOfMemoryError,)):
        if mode == "inference":
            with torch.no_grad():
                return model(*inputs, **kwargs)
        out = model(*inputs, **kwargs)
        tensors = _floating_tensors(out)
        if not tensors:
            raise UserCodeError("--mode training: the model's output has no floating tensor that requires grad")
        loss = sum(t.float().sum() for t in tensors)
        if before_backward is not None:
            before_backward()
        loss.backward()
        return out


__all__ = ["Mode", "run_once", "user_code", "user_traceback"]
