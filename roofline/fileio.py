"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``. The file gets the mode any
    new file gets (0666 less the umask): mkstemp alone would leave it private (0600)."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        _write_durably(fd, data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_durably(fd: int, data: bytes) -> None:
    """All of ``data`` to ``fd``, then to the disk, and close it: a full disk shows here (at the write, or at the
    fsync where the file system allocates late). The fault tests replace it with a writer that fails half-way."""
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def atomic_write_text(path: Path, text: str) -> None:
    """Text (reports, baselines, caches) as UTF-8, atomically (see atomic_write_bytes)."""
    atomic_write_bytes(path, text.encode("utf-8"))


# ------------------------------------------------------------------------------------------ outputs


def absolute(path: Path | str) -> Path:
    """``path`` made absolute against the current directory now (not resolved: a link stays a link), so that
    code which changes directory later (a user's model) does not move where a command writes."""
    return Path(os.path.abspath(os.fspath(path)))


def same_file(a: Path | str, b: Path | str) -> bool:
    """Whether two paths name one file: os.path.samefile when both exist, else their resolved spellings."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _nearest_existing(directory: Path) -> Path:
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    return directory


def writable_place(path: Path | str, option: str = "-o") -> Path:
    """Before any work: the absolute path a command will write ``path`` at, after checking that a file can be
    written there: not an empty name, not a directory or another non-file (a device, a pipe), and a writable
    directory around it (checked by creating and removing a temporary file beside it: os.access alone is wrong
    for root and for read-only mounts). Missing directories are created at write time, so the nearest existing
    one is checked. A :class:`roofline.errors.UsageError` ``{option} PATH: ...`` otherwise."""
    from roofline.errors import UsageError

    text = os.fspath(path)
    if text in ("", "."):
        # typer reads an empty -o as Path(""), which is "."
        raise UsageError(f"{option} '': no file name (an empty name, or .): give a file to write")
    where = absolute(text)
    if where.is_dir():
        raise UsageError(f"{option} {text}: is a directory: give a file name in it")
    if where.exists() and not where.is_file():
        raise UsageError(f"{option} {text}: is not a regular file (a device, pipe or socket): give a file to write")
    directory = _nearest_existing(where.parent)
    if not directory.is_dir():
        raise UsageError(f"{option} {text}: {directory} is not a directory")
    try:
        fd, probe = tempfile.mkstemp(prefix=".roofline-probe.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise UsageError(f"{option} {text}: cannot write in {directory}: {exc.strerror or exc}") from None
    os.close(fd)
    Path(probe).unlink(missing_ok=True)
    return where


def write_failure(option: str, path: Path | str, exc: OSError) -> str:
    """The one line for a write that failed at the end (disk full, permission changed): ``-o PATH: cannot write
    it: No space left on device``."""
    return f"{option} {os.fspath(path)}: cannot write it: {exc.strerror or exc}"
