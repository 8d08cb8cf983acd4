"""Report rows as a table: a pandas DataFrame, CSV text, Parquet bytes (the raw data for your own plots).

One table row per report row (diagnose: per op call). Columns: the point as the chart places it
(``point.label``, ``point.intensity``, ``point.throughput_flops_per_s``, ...; see POINT_COLUMNS), then every
field of the row: nested dicts flattened with dots (``params.m``), lists and dicts inside lists as JSON text
(``samples_s``, ``findings``), so a CSV keeps every value and :func:`unflatten` gives the row back.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from roofline.errors import RooflineError
from roofline.report.points import Point, report_points
from roofline.report.sequences import strip_sequences
from roofline.yamlio import dumps_json

if TYPE_CHECKING:
    import pandas as pd

POINT_COLUMNS = (
    "report",
    "source",
    "point.label",
    "point.device",
    "point.roof",
    "point.intensity",
    "point.throughput_flops_per_s",
    "point.attainable_flops_per_s",
    "point.time_s",
    "point.share",
    "point.efficiency",
    "point.bound",
    "point.flags",
)
PREFIX = "point."
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class MissingDependencyError(RooflineError):
    """An optional package this output needs is not installed."""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain_numbers(values: Any) -> bool:
    """A list of finite floats and ints (not bools): its JSON text is its items' repr joined (samples, clocks)."""
    for v in values:
        kind = type(v)
        if kind is int:
            continue
        if kind is not float or not math.isfinite(v):
            return False
    return True


def flatten(row: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'params': {'m': 1}, 'samples_s': [1, 2]} -> {'params.m': 1, 'samples_s': '[1, 2]'}."""
    flat: dict[str, Any] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if type(value) in _SCALARS:  # most values: no isinstance against the Mapping ABC (slow, once per cell)
            flat[name] = value
        elif isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)) and _plain_numbers(value):
            flat[name] = "[" + ", ".join(map(repr, value)) + "]"  # as json.dumps writes them, without its machinery
        elif isinstance(value, (list, tuple, Mapping)):
            flat[name] = dumps_json(value, default=str)  # a NaN or infinity as null, never invalid JSON
        else:
            flat[name] = value
    return flat


def json_columns(row: Mapping[str, Any], prefix: str = "") -> set[str]:
    """The columns :func:`flatten` writes as JSON text for this row (its lists, and empty dicts)."""
    names: set[str] = set()
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            names |= json_columns(value, f"{name}.")
        elif isinstance(value, (list, tuple, Mapping)):
            names.add(name)
    return names


def unflatten(flat: Mapping[str, Any], json_columns: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """The inverse of :func:`flatten` for the columns it wrote (``json_columns`` hold JSON text)."""
    row: dict[str, Any] = {}
    for name, value in flat.items():
        if name in json_columns and isinstance(value, str):
            value = json.loads(value)
        target = row
        *parents, leaf = name.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return row


def _point_columns(p: Point) -> dict[str, Any]:
    return {
        "report": p.report,
        "source": p.source,
        "point.label": p.label,
        "point.device": p.device,
        "point.roof": p.roof,
        "point.intensity": p.intensity,
        "point.throughput_flops_per_s": p.throughput,
        "point.attainable_flops_per_s": p.attainable,
        "point.time_s": p.time_s,
        "point.share": p.share,
        "point.efficiency": p.efficiency,
        "point.bound": p.bound,
        "point.flags": ",".join(p.flags),
    }


def records(report: Any, name: str = "") -> list[dict[str, Any]]:
    """Flat dicts, one per report row: point columns, then the row's own fields."""
    points = report_points(report, name, per_call=True)
    return [{**_point_columns(p), **flatten(row)} for p, row in zip(points, report.rows, strict=True)]


_SURROGATES = re.compile("[\ud800-\udfff]")


def _cell(value: Any) -> Any:
    """A NaN or infinity as missing; lone surrogates (which UTF-8 cannot encode) as U+FFFD."""
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is str:  # NB: an ASCII string (nearly all) has no surrogate: checked in C before any regex
        return value if value.isascii() or not _SURROGATES.search(value) else _SURROGATES.sub("\ufffd", value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str) and _SURROGATES.search(value):
        return _SURROGATES.sub("\ufffd", value)
    return value


def _column(values: list[Any]) -> Any:
    """One column's values as pandas should hold them: integers (with gaps) as nullable Int64, counts past 2^63 as
    floats, text mixed with numbers as JSON text, a NaN or infinity as a missing value (empty in CSV, null in
    Parquet). Floats, integers, booleans and plain text (ASCII, no escape character) in C passes."""
    kinds = set(map(type, values))
    plain = _plain(values, kinds)
    if plain == "float":
        return [math.nan if v is None else v for v in values] if _NONE in kinds else list(values)
    if plain in ("bool", "text"):
        return list(values)
    if plain == "int":
        import pandas as pd

        return pd.array(values, dtype="Int64")
    return _typed_column(values)


def _plain(values: list[Any], kinds: set[type]) -> str:
    """What a column of ``kinds`` holds where its values pass in C, each maybe with nulls: 'float' (finite
    floats), 'bool' (booleans; all null too), 'text' (plain text: :func:`_plain_texts`), 'int' (int64 integers);
    '' none of those (the column goes value by value)."""
    if kinds <= _FLOATS and float in kinds and _finite(values, kinds):
        return "float"
    if kinds <= _BOOLS:
        return "bool"
    if kinds <= _TEXTS and _plain_texts(values, kinds):
        return "text"
    if kinds <= _INTS and _int64(values, kinds):
        return "int"
    return ""


def _typed_column(values: list[Any]) -> Any:
    """_column value by value (any column)."""
    import pandas as pd

    values = [_cell(v) for v in values]
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        if all(_INT64_MIN <= v <= _INT64_MAX for v in present):
            return pd.array(values, dtype="Int64")
        return [None if v is None else float(v) for v in values]  # Parquet has no wider integer
    if present and any(isinstance(v, str) for v in present) and not all(isinstance(v, str) for v in present):
        # mixed text and numbers in one column (Parquet needs one type): all as JSON text
        return [v if v is None or isinstance(v, str) else dumps_json(v) for v in values]
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return [float("nan") if v is None else float(v) for v in values]
    return values


_NONE = type(None)
_FLOATS = frozenset((float, _NONE))
_INTS = frozenset((int, _NONE))
_TEXTS = frozenset((str, _NONE))
_BOOLS = frozenset((bool, _NONE))


def _present(values: list[Any], kinds: set[type]) -> list[Any]:
    return [v for v in values if v is not None] if _NONE in kinds else values


def _finite(values: list[Any], kinds: set[type]) -> bool:
    """A column of floats and nulls: every float finite (in C)."""
    return all(map(math.isfinite, _present(values, kinds)))


def _int64(values: list[Any], kinds: set[type]) -> bool:
    """A column of ints and nulls: some int, every one in int64's range."""
    present = _present(values, kinds)
    return bool(present) and min(present) >= _INT64_MIN and max(present) <= _INT64_MAX


def _plain_texts(values: list[Any], kinds: set[type]) -> bool:
    """A column of texts and nulls, ASCII without an escape character: no surrogate to replace and no terminal
    control sequence to strip (roofline.report.sequences.strip_sequences leaves them as they are)."""
    present = _present(values, kinds)
    return all(map(str.isascii, present)) and "\x1b" not in "".join(present)


def points_frame(report: Any, name: str = "") -> pd.DataFrame:
    """A DataFrame of :func:`records`. Integer columns with gaps stay integers (pandas' nullable Int64)."""
    import pandas  # noqa: F401  NB: first, so that a missing pandas is said before any work

    columns, values = _table(report, name)
    return _frame(columns, values)


def _table(report: Any, name: str) -> tuple[list[str], dict[str, list[Any]]]:
    """The columns of :func:`records` and each one's values (``record.get(column)`` of every record): made column
    by column (roofline.report.columns.table), or from the records where a row is not plain JSON data."""
    from roofline.report.columns import Unplanned, table

    points = report_points(report, name, per_call=True)
    try:
        return table(report.rows, points, _POINT_READERS, _flat_list, _flat_empty)
    except Unplanned:
        rows = [{**_point_columns(p), **flatten(row)} for p, row in zip(points, report.rows, strict=True)]
        columns = list(dict.fromkeys([*POINT_COLUMNS, *(key for row in rows for key in row)]))
        return columns, {column: [row.get(column) for row in rows] for column in columns}


def _flat_list(value: list[Any]) -> str:
    """What :func:`flatten` writes of a list: the lists of floats (samples, clocks) and of texts (notes) in C."""
    if not value:
        return "[]"
    kinds = set(map(type, value))
    if kinds == _FLOAT_SET and all(map(math.isfinite, value)):  # NB: _plain_numbers
        return "[" + ", ".join(map(float.__repr__, value)) + "]"
    if kinds == _STR_SET:  # NB: as json.dumps writes a list of texts (ASCII escapes, ", " between)
        from json.encoder import encode_basestring_ascii

        return "[" + ", ".join(map(encode_basestring_ascii, value)) + "]"
    if _plain_numbers(value):
        return "[" + ", ".join(map(repr, value)) + "]"
    return dumps_json(value, default=str)


_FLOAT_SET = {float}
_STR_SET = {str}


def _flat_empty(value: dict[str, Any]) -> str:
    """What :func:`flatten` writes of an empty object."""
    return dumps_json(value, default=str)


_POINT_READERS: dict[str, Any] = {
    "report": lambda p: p.report,
    "source": lambda p: p.source,
    "point.label": lambda p: p.label,
    "point.device": lambda p: p.device,
    "point.roof": lambda p: p.roof,
    "point.intensity": lambda p: p.intensity,
    "point.throughput_flops_per_s": lambda p: p.throughput,
    "point.attainable_flops_per_s": lambda p: p.attainable,
    "point.time_s": lambda p: p.time_s,
    "point.share": lambda p: p.share,
    "point.efficiency": lambda p: p.efficiency,
    "point.bound": lambda p: p.bound,
    "point.flags": lambda p: ",".join(p.flags),
}


#: the first characters that make a spreadsheet read a cell as a formula (=, +, -, @; tab and carriage return too)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_STARTS = frozenset(_FORMULA_START)


def csv_text(text: str) -> str:
    """A text cell that a spreadsheet cannot run and a terminal cannot obey: terminal control sequences stripped
    (roofline.report.sequences), and one that starts like a formula (``=HYPERLINK(...)``, ``+1``, ``-2+3``,
    ``@SUM``) behind a leading ``'`` (OWASP's CSV-injection rule: shown as text, the quote hidden); numbers are
    written as numbers, never through this."""
    text = strip_sequences(text)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _csv_column(values: list[Any]) -> list[str]:
    """One column as CSV text, typed as :func:`_column` types it for pandas (and as pandas writes it): integers as
    integers, numbers as Python's shortest float text, text mixed with numbers as JSON text, a missing value, NaN
    or infinity as empty; text that starts like a spreadsheet formula behind a ``'`` (:func:`csv_text`). Floats,
    integers, booleans and plain text in C passes."""
    kinds = set(map(type, values))
    none = _NONE in kinds
    if kinds <= _FLOATS and _finite(values, kinds):
        return ["" if v is None else repr(v) for v in values] if none else list(map(float.__repr__, values))
    if kinds <= _INTS and _int64(values, kinds):
        return ["" if v is None else str(v) for v in values] if none else list(map(int.__repr__, values))
    if kinds <= _BOOLS:
        return ["" if v is None else str(v) for v in values]
    if kinds <= _TEXTS and _plain_texts(values, kinds):
        if {v[:1] for v in values if v}.isdisjoint(_FORMULA_STARTS):
            return ["" if v is None else v for v in values] if none else list(values)
        return ["" if v is None else csv_text(v) for v in values]
    return _typed_csv_column(values)


def _typed_csv_column(values: list[Any]) -> list[str]:
    """_csv_column value by value (any column)."""
    values = [_cell(v) for v in values]
    present = [v for v in values if v is not None]
    ints = bool(present) and all(isinstance(v, int) and not isinstance(v, bool) for v in present)
    if ints and all(_INT64_MIN <= v <= _INT64_MAX for v in present):
        return ["" if v is None else str(v) for v in values]
    if present and any(isinstance(v, str) for v in present) and not all(isinstance(v, str) for v in present):
        return ["" if v is None else csv_text(v) if isinstance(v, str) else dumps_json(v) for v in values]
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return ["" if v is None else repr(float(v)) for v in values]
    return ["" if v is None else csv_text(v) if isinstance(v, str) else str(v) for v in values]


def to_csv(report: Any, name: str = "") -> str:
    """Every row as CSV (the columns of :func:`points_frame`): no DataFrame is built, no record per row
    (roofline.report.columns), and the cells are joined as the csv module writes them, so 100,000 rows take a few
    seconds, not a minute."""
    import csv
    import io

    from roofline.report.columns import csv_text as joined

    columns, values = _table(report, name)
    cells = [_csv_column(values[column]) for column in columns]
    text = joined(columns, cells)
    if text is not None:
        return text
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(zip(*cells, strict=True))
    return out.getvalue()


def to_parquet(report: Any, name: str = "") -> bytes:
    import io

    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            "Parquet output needs pyarrow: pip install pyarrow (or pip install 'roofline[parquet]'), "
            "or write --format csv"
        ) from None
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    columns, values = _table(report, name)
    table = _arrow_table(columns, values)
    if table is None:
        _frame(columns, values).to_parquet(buffer, index=False)
    else:
        pq.write_table(table, buffer)
    return buffer.getvalue()


def _frame(columns: list[str], values: dict[str, list[Any]]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({column: _column(values[column]) for column in columns}, columns=columns)


def _arrow_table(columns: list[str], values: dict[str, list[Any]]) -> Any:
    """The pyarrow Table pandas writes of :func:`_frame` (the same types, nulls and pandas metadata: the same
    Parquet file), made from the columns without the DataFrame, where every column is all floats, all integers
    (in int64), all booleans, all plain text (:func:`_plain_texts`) or all null, each maybe with nulls but the
    booleans; else None (the DataFrame makes it). The pandas metadata (each column's pandas and numpy type) is
    pyarrow's of a one-row frame of each column's first value and the dtype pandas gives the column, and the
    arrow types are that schema's: a column that does not convert to its type gives None too."""
    import pandas as pd
    import pyarrow as pa

    if not columns or not values[columns[0]]:
        return None
    dtypes: dict[str, Any] = {}
    for column in columns:
        kinds = set(map(type, values[column]))
        plain = _plain(values[column], kinds)
        if kinds == {_NONE}:
            dtypes[column] = object
        elif plain == "float":
            dtypes[column] = "float64"
        elif plain == "int":
            dtypes[column] = "Int64"
        elif plain == "bool" and kinds == {bool}:  # NB: booleans with nulls: pandas makes them objects
            dtypes[column] = "bool"
        elif plain == "text":
            dtypes[column] = pd.Series(["text"]).dtype  # NB: what pandas makes of a list of texts (str, object)
        else:
            return None
    sample = {c: pd.Series([next((v for v in values[c] if v is not None), None)], dtype=dtypes[c]) for c in columns}
    schema = pa.Schema.from_pandas(pd.DataFrame(sample, columns=columns), preserve_index=False)
    try:
        arrays = [
            pa.nulls(len(values[c]), type=field.type)
            if dtypes[c] is object
            else pa.array(values[c], type=field.type, from_pandas=True)
            for c, field in zip(columns, schema, strict=True)
        ]
        return pa.Table.from_arrays(arrays, schema=schema)
    except (pa.ArrowException, TypeError, ValueError):
        return None


__all__ = [
    "POINT_COLUMNS",
    "csv_text",
    "flatten",
    "json_columns",
    "points_frame",
    "records",
    "to_csv",
    "to_parquet",
    "unflatten",
]
