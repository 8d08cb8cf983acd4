"""A report's table (roofline.report.export.records) made column by column: 100,000 rows in about a second.

:func:`table` gives the columns :func:`roofline.report.export.records` would have (the point columns, then every
field of every row flattened, in order of first appearance) and each column's values (``record.get(column)`` of
every record) without making a record per row: the rows are grouped by their shape (keys, the types of their
values, the shape of each object in them), each shape flattened once into a plan (column -> the keys that read
it), and each column read from the rows of a shape in one pass. A row whose values are not JSON's types (a row
built in Python with other objects) raises :class:`Unplanned`: records makes that table.

:func:`csv_text` joins columns of CSV cells as the csv module writes them (csv.writer, lineterminator "\\n"): the
characters that make it quote a field are asked of the module once; a column without any is joined as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from roofline.report.points import Point

_SCALARS = frozenset((str, int, float, bool, type(None)))
_LEAVES = _SCALARS | {list}

#: how flatten writes a column's values: as they are, lists among them (number text or JSON text), empty objects
SCALAR, LIST, EMPTY = "scalar", "list", "empty"


class Unplanned(Exception):
    """A row :func:`table` cannot read as records does: records itself makes the table."""


def _shape(row: dict[str, Any]) -> tuple[Any, ...]:
    """The row's keys, the types of its values and the shape of each object in it: what its records look like."""
    types = tuple(map(type, row.values()))
    if dict in types:
        return tuple(row), types, tuple([_shape(value) for value in row.values() if type(value) is dict])
    return tuple(row), types


class _Mixed(Exception):
    """Rows that are not all of one shape: grouped by shape first."""


def _same_keys(dicts: Sequence[dict[str, Any]]) -> tuple[Any, ...]:
    """The keys every one of ``dicts`` has, in the same order (in C: a tuple of each one's keys, counted)."""
    keys = list(map(tuple, dicts))
    if keys.count(keys[0]) != len(keys):
        raise _Mixed
    return keys[0]


def _flat_columns(dicts: Sequence[dict[str, Any]], prefix: str, out: dict[str, tuple[Sequence[Any], str]]) -> None:
    """Flatten's columns (roofline.report.export.flatten) of objects that have the same keys in the same order,
    each with its values (one per object, read by transposing the objects' values in C) and how flatten writes
    them; a column named again keeps its first place and takes the later values, as flatten's dict does. _Mixed
    where a key holds an object in some and not in others, or objects of different keys; Unplanned for a value
    that is not JSON's."""
    keys = _same_keys(dicts)
    for key, values in zip(keys, zip(*map(dict.values, dicts), strict=True), strict=True):
        if type(key) is not str:
            raise Unplanned
        name = f"{prefix}{key}"
        kinds = set(map(type, values))
        if dict in kinds:
            if len(kinds) > 1:
                raise _Mixed
            if values[0]:
                _flat_columns(values, f"{name}.", out)
            elif any(values):
                raise _Mixed
            else:
                out[name] = (values, EMPTY)
        elif kinds <= _SCALARS:
            out[name] = (values, SCALAR)
        elif kinds <= _LEAVES:
            out[name] = (values, LIST)
        else:
            raise Unplanned


def _groups(rows: Sequence[Any]) -> list[tuple[list[int] | None, dict[str, tuple[Sequence[Any], str]]]]:
    """Each group of rows of one shape (its row indices; None: every row) with its flattened columns, groups in
    order of their first row. Rows of one shape (the common case) are found so column by column in C; else each
    row's shape is compared with the one before (their strings and types are the same objects)."""
    if not all(type(row) is dict for row in rows):
        raise Unplanned
    if not rows:
        return []
    try:
        out: dict[str, tuple[Sequence[Any], str]] = {}
        _flat_columns(rows, "", out)
        return [(None, out)]
    except _Mixed:
        pass
    groups: dict[tuple[Any, ...], list[int]] = {}
    last: tuple[Any, ...] | None = None
    members: list[int] = []
    for index, row in enumerate(rows):
        shape = _shape(row)
        if shape != last:
            found = groups.get(shape)
            members = groups[shape] = [] if found is None else found
            last = shape
        members.append(index)
    found = []
    for indices in groups.values():
        out = {}
        _flat_columns([rows[i] for i in indices], "", out)  # NB: one shape: never _Mixed
        found.append((indices, out))
    return found


def table(
    rows: Sequence[Mapping[str, Any]],
    points: Sequence[Point],
    point_columns: Mapping[str, Callable[[Point], Any]],
    flat_list: Callable[[Any], Any],
    flat_empty: Callable[[Any], Any],
) -> tuple[list[str], dict[str, list[Any]]]:
    """The columns of records (the point columns, named in ``point_columns`` with how each reads a point, then the
    rows' flattened fields by first appearance) and each one's values, ``record.get(column)`` of every record.
    ``flat_list`` and ``flat_empty``: what flatten writes of a list and of an empty object. Unplanned when a row
    is not a dict of JSON values."""
    n = len(rows)
    if len(points) != n:
        raise Unplanned
    columns = {name: [read(p) for p in points] for name, read in point_columns.items()}
    order = dict.fromkeys(point_columns)
    for indices, flat in _groups(rows):  # NB: in order of each group's first row: as records' keys appear
        for name, (values, how) in flat.items():
            if how == LIST:
                made = [flat_list(v) if type(v) is list else v for v in values]
            elif how == EMPTY:
                made = [flat_empty(v) for v in values]
            else:
                made = list(values)
            order.setdefault(name)
            if indices is None:
                columns[name] = made
                continue
            column = columns.get(name)
            if column is None:
                column = columns[name] = [None] * n
            for i, value in zip(indices, made, strict=True):
                column[i] = value
    return list(order), columns


# ------------------------------------------------------------------------------------------------ CSV text

_QUOTING: list[re.Pattern[str] | None] = []


def _quoting() -> re.Pattern[str] | None:
    """The characters that make this Python's csv writer (excel dialect, lineterminator "\\n") quote a field, as a
    pattern, asked of the module once; None when it quotes otherwise than ``"`` + the field with ``"`` doubled +
    ``"`` alone (then the module writes the file)."""
    if not _QUOTING:
        import csv
        import io

        def written(field: str) -> str:
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerow([field, "x"])
            return out.getvalue()[: -len(",x\n")]

        triggers = [c for c in map(chr, range(128)) if written(f"a{c}b") != f"a{c}b"]
        known = triggers and all(written(f"a{c}b") == '"' + f"a{c}b".replace('"', '""') + '"' for c in triggers)
        known = known and all(written(field) == field for field in ("", " a ", "é", "\u2028"))
        _QUOTING.append(re.compile("[" + re.escape("".join(triggers)) + "]") if known else None)
    return _QUOTING[0]


def csv_text(header: list[str], cells: list[list[str]]) -> str | None:
    """The CSV text of the ``header`` row and the columns of ``cells`` (each a list of text, one per row) as
    csv.writer(lineterminator="\\n") writes them; None where this Python's writer quotes in a way not known here."""
    quote = _quoting()
    if quote is None:
        return None
    head = ",".join(_quoted(header, quote)) + "\n"
    return head + "".join([",".join(row) + "\n" for row in zip(*(_quoted(c, quote) for c in cells), strict=True)])


def _quoted(column: list[str], quote: re.Pattern[str]) -> list[str]:
    if not quote.search("".join(column)):  # NB: one scan of the column in C; most columns need no quotes
        return column
    return ['"' + cell.replace('"', '""') + '"' if quote.search(cell) else cell for cell in column]


__all__ = ["EMPTY", "LIST", "SCALAR", "Unplanned", "csv_text", "table"]
