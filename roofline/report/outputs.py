"""The files a command writes: checked before any work, written at the end without losing what the user owns.

:func:`prepare` runs before anything is measured or any user code runs. For each output (``-o``, ``--plot``,
``--junit``, ``--markdown``) it gives the absolute path to write (a model that changes directory does not move
it) after checking that:

- a file can be written there (roofline.fileio.writable_place: a name, not a directory, a writable directory);
- it is not a file the same command reads (the model, the suite, a report, the baseline, a ``--spec`` sheet):
  always refused, ``--force`` or not;
- no two outputs of the command name one file;
- a file already there is one this command could have written (:func:`is_ours`), or is empty; otherwise it is
  refused unless ``force`` (the command's ``--force``).

:func:`write` writes atomically (roofline.fileio) and turns an OSError (disk full, permission changed) into one
line ``-o PATH: cannot write it: No space left on device`` (a UsageError, exit 2).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

from roofline.errors import UsageError
from roofline.fileio import absolute, atomic_write_bytes, same_file, writable_place, write_failure

Kind = Literal["report", "baseline", "png", "svg", "pdf", "csv", "parquet", "markdown", "html", "junit", "trace"]

#: What each kind of output is, for messages.
DESCRIPTIONS: dict[str, str] = {
    "report": "a roofline report",
    "baseline": "a roofline baseline",
    "png": "a PNG chart drawn by roofline (matplotlib)",
    "svg": "an SVG chart drawn by roofline (matplotlib)",
    "pdf": "a PDF chart drawn by roofline (matplotlib)",
    "csv": "a roofline CSV export",
    "parquet": "a roofline Parquet export",
    "markdown": "roofline markdown",
    "html": "a roofline HTML report",
    "junit": "roofline gate JUnit XML",
    "trace": "a trace written by roofline diagnose --export-trace",
}

#: the ``schema`` a report begins with (roofline.report.schema.SCHEMA), a baseline (roofline.report.baseline.SCHEMA),
#: a trace written by `diagnose --export-trace` (roofline.diagnose.trace writes it): how a file is known as ours
REPORT_SCHEMA = "roofline.report"
BASELINE_SCHEMA = "roofline.baseline"
TRACE_SCHEMA = "roofline-trace/1"
_SNIFF_LIMIT = 64 * 2**20  # a file larger than this is not one of our charts or pages (reports: see _json_schema)
_SCHEMA_FIRST = re.compile(rb'\s*\{\s*"schema"\s*:\s*"([^"\\]*)"')
_MARKERS: dict[str, re.Pattern[bytes]] = {
    # how each text output of ours begins (render/report_markdown, render/gate, render/report_html, report/export)
    "markdown": re.compile(rb"\s*#{1,6} roofline "),
    "html": re.compile(rb"\s*<!DOCTYPE html>.*?<title>roofline ", re.DOTALL | re.IGNORECASE),
    "csv": re.compile(rb"report,source,"),
    "junit": re.compile(rb'\s*(<\?xml[^>]*>\s*)?<testsuites name="roofline gate"'),
}
_MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-", "parquet": b"PAR1"}


def _json_schema(path: Path) -> str | None:
    """The ``schema`` of a JSON document: read from its start (we write it first), else from the whole file."""
    with path.open("rb") as handle:
        head = handle.read(4096)
    found = _SCHEMA_FIRST.match(head)
    if found:
        return found.group(1).decode("utf-8", "replace")
    if not head.lstrip().startswith(b"{"):
        return None
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, MemoryError, RecursionError):
        return None
    schema = data.get("schema") if isinstance(data, dict) else None
    return schema if isinstance(schema, str) else None


def is_ours(path: Path, kind: Kind) -> bool:
    """Whether the existing file at ``path`` is one a command writing ``kind`` may replace: empty, or what that
    command writes: a report or a baseline by its ``schema`` (a report never replaces a baseline, nor the other
    way); markdown, HTML, CSV or JUnit by how ours begin; a PNG, SVG or PDF drawn by matplotlib; a Parquet file with
    our point columns. A file that cannot be read is not ours."""
    try:
        size = path.stat().st_size
        if size == 0:
            return True
        if kind == "trace":
            return _json_schema(path) == TRACE_SCHEMA
        if kind in ("report", "baseline"):
            return _json_schema(path) == (REPORT_SCHEMA if kind == "report" else BASELINE_SCHEMA)
        if size > _SNIFF_LIMIT:
            return False
        data = path.read_bytes()
    except OSError:
        return False
    if kind in _MARKERS:
        return _MARKERS[kind].match(data) is not None
    if kind == "svg":
        return b"<svg" in data[:8192] and b"matplotlib" in data.lower()
    if kind == "parquet":
        return data.startswith(_MAGIC["parquet"]) and b"point.intensity" in data
    magic = _MAGIC.get(kind)
    return magic is not None and data.startswith(magic) and b"matplotlib" in data.lower()


def prepare(
    outputs: Sequence[tuple[str, Path | None, Kind]],
    *,
    inputs: Iterable[tuple[str, Path | str | None]] = (),
    force: bool = False,
) -> list[Path | None]:
    """Check every output before any work (see the module's docstring); the absolute paths, None where an
    output was not asked for. ``outputs``: (option, path as given, kind); ``inputs``: (what it is, path), e.g.
    ("the model file", model). Raises UsageError ``{option} PATH: ...``."""
    read = [(what, absolute(path)) for what, path in inputs if path is not None and os.fspath(path) != ""]
    prepared: list[Path | None] = []
    seen: list[tuple[str, Path]] = []
    for option, given, kind in outputs:
        if given is None:
            prepared.append(None)
            continue
        where = writable_place(given, option)
        for what, path in read:
            if same_file(where, path):
                raise UsageError(
                    f"{option} {given}: is {what} this command reads: not overwritten, even with --force "
                    "(write to another file)"
                )
        for other, path in seen:
            if same_file(where, path):
                raise UsageError(f"{option} {given}: also given to {other}: give each output its own file")
        if where.exists() and not force and not is_ours(where, kind):
            raise UsageError(
                f"{option} {given}: exists and is not {DESCRIPTIONS[kind]}: not overwritten "
                "(give --force to replace it, or write to another file)"
            )
        seen.append((option, where))
        prepared.append(where)
    return prepared


def prepare_one(
    path: Path,
    kind: Kind,
    *,
    option: str = "-o",
    inputs: Iterable[tuple[str, Path | str | None]] = (),
    force: bool = False,
) -> Path:
    """:func:`prepare` for a command with one output."""
    (where,) = prepare([(option, path, kind)], inputs=inputs, force=force)
    assert where is not None
    return where


def write(path: Path, content: str | bytes, *, option: str = "-o", shown: Path | str | None = None) -> None:
    """Write ``content`` atomically at ``path``; an OSError (disk full, no permission) becomes one line
    ``{option} {shown}: cannot write it: {reason}`` (UsageError, exit 2). Nothing is half-written."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise UsageError(write_failure(option, shown if shown is not None else path, exc)) from None
