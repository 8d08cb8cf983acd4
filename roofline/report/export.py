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
    Parquet)."""
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


def points_frame(report: Any, name: str = "") -> pd.DataFrame:
    """A DataFrame of :func:`records`. Integer columns with gaps stay integers (pandas' nullable Int64)."""
    import pandas as pd

    rows = records(report, name)
    columns = list(dict.fromkeys([*POINT_COLUMNS, *(key for row in rows for key in row)]))
    return pd.DataFrame({column: _column([row.get(column) for row in rows]) for column in columns}, columns=columns)


#: the first characters that make a spreadsheet read a cell as a formula (=, +, -, @; tab and carriage return too)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


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
    or infinity as empty; text that starts like a spreadsheet formula behind a ``'`` (:func:`csv_text`)."""
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
    """Every row as CSV (the columns of :func:`points_frame`), written with the csv module: no DataFrame is built,
    so 100,000 rows take seconds, not a minute."""
    import csv
    import io

    rows = records(report, name)
    columns = list(dict.fromkeys([*POINT_COLUMNS, *(key for row in rows for key in row)]))
    cells = [_csv_column([row.get(column) for row in rows]) for column in columns]
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
    buffer = io.BytesIO()
    points_frame(report, name).to_parquet(buffer, index=False)
    return buffer.getvalue()


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
