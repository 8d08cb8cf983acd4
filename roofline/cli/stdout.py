"""Standard output as the `roofline` command owns it (installed by :func:`roofline.cli.main` for one command).

- Any encoding: text that the stream's encoding cannot hold (an arrow on an ASCII or latin-1 stdout, a lone
  surrogate from a label) is written with a fallback (``->``, ``x``, ``...``, the letter without its accent, else
  ``?``) instead of failing: the error handler ``roofline.fallback`` on stdout and stderr.
- A failing standard output (a full device, an I/O error, a closed pipe) never stops the command: the failure is
  remembered and later writes dropped, so the command still writes its files (-o, --plot); at the end
  :func:`settle` says it in one line, ``Error: standard output: cannot write it: No space left on device``, exit 2
  (a closed pipe, ``roofline ... | head``, is said by nothing: the command's own exit code stands).
- ``--json`` with the user's code (diagnose): :func:`divert` sends every write to standard output but our document
  to standard error from then on, from any thread, Python's ``print`` and the C library's writes on file
  descriptor 1 alike (the latter in the CLI's own process, where file descriptor 1 is moved), so that standard
  output carries one JSON document.

Documents (the tables, JSON, CSV... every command prints) go through :func:`write_document`.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import sys
import unicodedata
from typing import Any

ERRORS = "roofline.fallback"

_FALLBACK = {
    "\u2192": "->",
    "\u2190": "<-",
    "\u2194": "<->",
    "\u21d2": "=>",
    "\u00d7": "x",
    "\u2026": "...",
    "\u00b1": "+/-",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2248": "~",
    "\u2260": "!=",
    "\u00b5": "u",
    "\u03bc": "u",
    "\u2014": "-",
    "\u2013": "-",
    "\u2212": "-",
    "\u00b7": ".",
    "\u2022": "*",
    "\u2713": "ok",
    "\u2717": "x",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u00a0": " ",
    "\u221e": "inf",
    "\u221a": "sqrt",
    "\u0394": "d",
}


def _one(char: str) -> str:
    """An ASCII stand-in for ``char``."""
    if char in _FALLBACK:
        return _FALLBACK[char]
    if "\u2500" <= char <= "\u257f":  # box drawing: horizontal, vertical, corners and joins
        name = unicodedata.name(char, "")
        if "HORIZONTAL" in name and "VERTICAL" not in name:
            return "-"
        if "VERTICAL" in name and "HORIZONTAL" not in name and "AND" not in name:
            return "|"
        return "+"
    if "\u2580" <= char <= "\u259f":  # block elements (bars)
        return "#"
    plain = unicodedata.normalize("NFKD", char).encode("ascii", "ignore").decode("ascii")
    return plain if plain.isprintable() and plain else "?"


def _fallback(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    return "".join(_one(char) for char in exc.object[exc.start : exc.end]), exc.end


codecs.register_error(ERRORS, _fallback)


def _set_errors(stream: Any, errors: str) -> str | None:
    """Set the stream's error handler; its previous one (None: not a stream that can change it)."""
    previous = getattr(stream, "errors", None)
    reconfigure = getattr(stream, "reconfigure", None)
    if previous is None or reconfigure is None:
        return None
    try:
        reconfigure(errors=errors)
    except (AttributeError, OSError, ValueError, TypeError):
        return None
    return str(previous)


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None


class _Binary:
    """``sys.stdout.buffer`` of :class:`Owned`: binary documents (PNG, PDF, Parquet) with the same failure rule;
    after :func:`divert`, the binary writes of the user's code go where its text goes (standard error)."""

    def __init__(self, owner: Owned) -> None:
        self._owner = owner

    def _target(self) -> Any:
        owner = self._owner
        return owner.document.buffer if owner.others is None else owner.others.buffer

    def write(self, data: bytes) -> int:
        if self._owner.others is not None:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                self._target().write(data)
            return len(data)
        return int(self._owner.guard(lambda: self._target().write(data), len(data)))

    def flush(self) -> None:
        if self._owner.others is not None:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                self._target().flush()
            return
        self._owner.guard(lambda: self._target().flush(), 0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)


class Owned:
    """``sys.stdout`` while a command runs: writes go to ``document`` (the real standard output) until
    :func:`divert`, to ``others`` after it; a failure of the real standard output is remembered (``failure``),
    not raised. Everything else (encoding, isatty, fileno...) is the real stream's."""

    def __init__(self, stream: Any, entry: bool) -> None:
        self.document = stream
        self.others: Any = None  # None: not diverted
        self.failure: OSError | None = None
        self.entry = entry
        self.errors_before = _set_errors(stream, ERRORS)

    def guard(self, write: Any, size: int) -> Any:
        if self.failure is not None:
            return size
        try:
            return write()
        except OSError as exc:
            self._failed(exc)
            return size

    def _failed(self, exc: OSError) -> None:
        """Remember the failure; in the CLI's own process, point the file descriptor at /dev/null so that what is
        still buffered (and the interpreter's own flush at exit) goes nowhere instead of failing again."""
        self.failure = exc
        fd = _fileno(self.document)
        if not self.entry or fd is None:
            return
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)
            self.document.flush()
        except (OSError, ValueError):
            pass

    def write(self, text: str) -> int:
        if self.others is not None:
            try:
                return int(self.others.write(text))
            except (OSError, ValueError):
                return len(text)
        return int(self.guard(lambda: self.document.write(text), len(text)))

    def write_document(self, text: str) -> None:
        self.guard(lambda: self.document.write(text), len(text))

    def flush(self) -> None:
        if self.others is not None:
            with contextlib.suppress(OSError, ValueError):
                self.others.flush()
        self.guard(lambda: self.document.flush(), 0)

    def close(self) -> None:
        """The user's code may call sys.stdout.close(): the command still prints its report."""
        self.flush()

    @property
    def closed(self) -> bool:
        return False

    @property
    def buffer(self) -> _Binary:
        return _Binary(self)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.document, name)


def owned() -> Owned | None:
    """The owned standard output of the running command (None outside :func:`roofline.cli.main`)."""
    return sys.stdout if isinstance(sys.stdout, Owned) else None


class Installed:
    """What :func:`install` changed, to put back with :meth:`restore` (an in-process caller's streams)."""

    def __init__(self, out: Owned, stderr: Any, stderr_errors: str | None) -> None:
        self.out, self.stderr, self.stderr_errors = out, stderr, stderr_errors
        self.fd_saved: int | None = None  # divert(): the real standard output's file descriptor 1, moved

    def restore(self) -> None:
        """Put back what :func:`install` and :func:`divert` changed. In the CLI's own process nothing is put back:
        the process ends right after, and a thread the user's code left must not write into our document now."""
        out = self.out
        out.flush()
        if out.entry:
            return
        if self.fd_saved is not None:
            with contextlib.suppress(OSError):
                os.dup2(self.fd_saved, 1)
            os.close(self.fd_saved)
        if sys.stdout is out:
            sys.stdout = out.document
        if out.errors_before is not None:
            _set_errors(out.document, out.errors_before)
        if self.stderr_errors is not None:
            _set_errors(self.stderr, self.stderr_errors)


_INSTALLED: list[Installed] = []


def install(entry: bool) -> Installed:
    """Own sys.stdout for one command (see the module docstring); ``entry``: the CLI's own process."""
    out = Owned(sys.stdout, entry)
    installed = Installed(out, sys.stderr, _set_errors(sys.stderr, ERRORS))
    sys.stdout = out  # type: ignore[assignment]
    _INSTALLED.append(installed)
    return installed


def uninstall(installed: Installed) -> None:
    installed.restore()
    if installed in _INSTALLED:
        _INSTALLED.remove(installed)


def write_document(text: str) -> None:
    """Our own document (a table, JSON, CSV, markdown) to standard output, also after :func:`divert`."""
    out = owned()
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_document(text)


def divert() -> None:
    """From now until the command ends, whatever is written to standard output but our documents goes to standard
    error: Python's writes from any thread; in the CLI's own process also the C library's and child processes'
    (file descriptor 1 then points at standard error; ours is kept on a copy). Without an owned stdout (a test's
    runner): nothing."""
    out = owned()
    if out is None or out.others is not None:
        return
    out.flush()
    fd = _fileno(out.document)
    if out.entry and fd == 1 and _INSTALLED:
        try:
            saved = os.dup(1)
            os.dup2(2, 1)
        except OSError:
            out.others = sys.stderr
            return
        encoding = getattr(out.document, "encoding", None) or "utf-8"
        others = out.document  # still writes to file descriptor 1, now standard error
        out.document = io.TextIOWrapper(io.FileIO(os.dup(saved), "w"), encoding=encoding, errors=ERRORS)
        _INSTALLED[-1].fd_saved = saved
        out.others = others
        return
    out.others = sys.stderr


def settle() -> OSError | None:
    """At the command's end: flush standard output; the failure of the real standard output, if any (a closed pipe
    included)."""
    out = owned()
    if out is None:
        return None
    out.flush()
    return out.failure


__all__ = ["ERRORS", "Installed", "Owned", "divert", "install", "owned", "settle", "uninstall", "write_document"]
