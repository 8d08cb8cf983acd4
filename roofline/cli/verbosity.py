"""How much a command says on standard error: `roofline --quiet` (results and errors only) or `--verbose` (also
our own traceback under an error, for a bug report). Results on standard output are never affected."""

from __future__ import annotations

import contextvars

import typer

QUIET, NORMAL, VERBOSE = -1, 0, 1
_LEVEL: contextvars.ContextVar[int] = contextvars.ContextVar("roofline_verbosity", default=NORMAL)


def set_level(level: int) -> None:
    _LEVEL.set(level)


def level() -> int:
    return _LEVEL.get()


def quiet() -> bool:
    return _LEVEL.get() <= QUIET


def verbose() -> bool:
    return _LEVEL.get() >= VERBOSE


def info(message: str) -> None:
    """A line on standard error that --quiet drops: notes, progress, 'written to', warnings."""
    if not quiet():
        typer.echo(message, err=True)


__all__ = ["NORMAL", "QUIET", "VERBOSE", "info", "level", "quiet", "set_level", "verbose"]
