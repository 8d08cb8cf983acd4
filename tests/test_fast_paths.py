"""The fast paths of large reports (issue 30) give exactly what the plain paths give: the JSON decoder (orjson where
installed) the document json reads, or json's own error; the indented encoder json's text; the columnar table,
CSV cells and CSV text those of the records and the csv module; the one-loop points those of _point; the findings
made when read those sorted as views; and the outputs of small reports the same whichever path made them."""

from __future__ import annotations

import csv
import gc
import importlib.util
import io
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.errors import ReportError
from roofline.report import columns, export, points
from roofline.report.schema import read_report
from roofline.yamlio import (
    OVERFLOW,
    UNDECIDED,
    dumps_json,
    fast_loads,
    indented_json,
    null_nonfinite,
    parse_json,
    parse_json_bytes,
)

#: the fast decoder's own tests need orjson (the `fast` extra); without it every path is json's, and the rest hold
NEEDS_ORJSON = pytest.mark.skipif(importlib.util.find_spec("orjson") is None, reason="orjson is not installed")


def _both(monkeypatch: pytest.MonkeyPatch, data: bytes) -> tuple[object, object]:
    """(fast path, json) results of parse_json_bytes as a reader sees them: the document with its non-finite
    numbers nulled where the constants told of any (and where they were), or the error line."""

    def one() -> object:
        constants: list[str] = []
        try:
            found = parse_json_bytes(data, "f.json", ReportError, constants=constants)
        except ReportError as exc:
            return str(exc)
        return json.dumps(null_nonfinite(found) if constants else (found, []))

    monkeypatch.delenv("ROOFLINE_JSON", raising=False)
    fast = one()
    monkeypatch.setenv("ROOFLINE_JSON", "stdlib")
    plain = one()
    monkeypatch.delenv("ROOFLINE_JSON")
    return fast, plain


DECIDED = [  # the fast decoder reads these itself
    b'{"schema": "x", "rows": [{"a": 1, "b": [1.5, 2e-05, -0.0], "c": {"d": "e:f"}}]}',
    b'{"key:with:colons": 1, "nested": {"x:y": [{"z": null}]}, "t": true, "f": false}',
    b'{"big": 922337203685477580, "neg": -92233720368547758, "exp": 1e300, "tiny": 5e-324}',
    b'[1, 2.5, "text \\" with a quote: and a colon", {"a": []}, {}]',
    '{"u": "\u00e9\u2028", "esc": "\\u00e9\\n\\t\\\\"}'.encode(),
    b'  {"spaced" :  1 ,"b":2}  ',
    b"123",
    b'"a string"',
]
UNDECIDABLE = [  # json reads these: they differ from orjson's reading, or orjson refuses them
    b'{"a": 1, "a": 2}',
    b'{"rows": [{"x": 1, "y": 2, "x": 3}]}',
    b'{"a" : 1, "a": 2}',
    b'{"a\\u003a": 1, "a:": 2}',
    b'{"a": 123456789012345678901234567890}',
    b'{"a": -9223372036854775809}',
    b'{"a": 1e300, "b": 123456789012345678901234567890}',  # a large float beside: the scan runs and finds it
    b'{"a": 12345678901234567890.5}',  # a float of 20 integer digits: the scan finds them, json decides
    b"18446744073709551616",
    b'{"a": NaN, "b": Infinity, "c": -Infinity}',
    b'{"a": 1e400, "b": -1e400}',
    b'{"a": "\\ud800"}',
    "\ufeff{}".encode(),
    b'{"a": 1,}',
    b'{"a": [1, 2}',
    b"",
    b"\xff\xfe{}",
    b'{"a": "\x00"}',
    b"[" * 300 + b"]" * 300,
    b"[" * 3000 + b"]" * 3000,
]


@pytest.mark.parametrize("data", DECIDED + UNDECIDABLE)
def test_the_fast_decoder_reads_what_json_reads_or_leaves_it_to_json(monkeypatch, data):
    fast, plain = _both(monkeypatch, data)
    assert fast == plain


@NEEDS_ORJSON
@pytest.mark.parametrize("data", DECIDED)
def test_the_fast_decoder_decides_plain_documents(data, monkeypatch):
    monkeypatch.delenv("ROOFLINE_JSON", raising=False)
    assert fast_loads(data) is not UNDECIDED
    assert json.dumps(fast_loads(data)) == json.dumps(json.loads(data))


#: 19-20 digits in 64 bits (ints either way), and digits in text: no float of 1e16 or more, so no scan runs where
#: orjson writes such floats as the scan's skipping needs (every version so far); where not, json reads them
DECIDED_UNSCANNED = [
    b'{"a": 9223372036854775807, "b": 18446744073709551615, "c": -9223372036854775808}',
    b'{"digits": "123456789012345678901234567890", "f": 1e15, "g": 0.0001234567890123456789}',
]


@pytest.mark.parametrize("data", DECIDED_UNSCANNED)
def test_documents_without_a_big_float_are_decided_without_the_scan(data, monkeypatch):
    import roofline.yamlio as yamlio

    fast, plain = _both(monkeypatch, data)
    assert fast == plain
    orjson = yamlio.fast_decoder()
    if orjson is not None and yamlio._big_exponent(orjson) is not None:
        assert json.dumps(fast_loads(data)) == json.dumps(json.loads(data))


@pytest.mark.parametrize("data", UNDECIDABLE)
def test_the_fast_decoder_leaves_the_others_to_json(data):
    assert fast_loads(data) is UNDECIDED


def test_a_key_given_twice_is_named_and_overflow_is_told_on_both_paths(monkeypatch):
    fast, _ = _both(monkeypatch, b'{"rows": [{"x": 1, "x": 3}]}')
    assert fast == "f.json: not valid JSON (key 'x' given twice in one object): keep one"
    constants: list[str] = []
    assert json.dumps(parse_json(b'{"a": 1e400, "b": NaN}', "f", ReportError, constants=constants)) == json.dumps(
        {"a": math.inf, "b": math.nan}
    )
    assert constants == ["NaN", OVERFLOW]


def test_without_orjson_json_reads_everything(monkeypatch):
    import roofline.yamlio as yamlio

    monkeypatch.setattr(yamlio, "_ORJSON", [None])
    assert fast_loads(DECIDED[0]) is UNDECIDED
    assert parse_json(DECIDED[0].decode(), "f", ReportError) == json.loads(DECIDED[0])


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=6), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.sampled_from([None, 0, 1, 2, 4]))
def test_fast_decoder_and_indented_encoder_round_trip_any_document(value, indent):
    text = json.dumps(value, indent=indent)
    found = fast_loads(text.encode())
    if found is not UNDECIDED:
        assert json.dumps(found) == json.dumps(json.loads(text))
    if indent is not None:
        assert indented_json(value, indent) == text
        assert dumps_json(value, indent=indent, default=str) == text
    assert dumps_json(value, default=str) == json.dumps(value, default=str)


_SAME_KEYS = st.dictionaries(st.sampled_from(["a", "b:c", "é", ""]), st.none(), min_size=1)


@settings(max_examples=150, deadline=None)
@given(_SAME_KEYS, st.lists(st.lists(JSON_VALUES, min_size=4, max_size=4), min_size=2, max_size=5), st.integers(0, 3))
def test_indented_lists_of_objects_of_the_same_keys_are_jsons(shape, values, indent):
    # a baseline's points: objects of the same keys in the same order (their heads made once), any values
    items = [dict(zip(shape, row, strict=False)) for row in values]
    assert indented_json(items, indent) == json.dumps(items, indent=indent)
    assert indented_json({"points": items, "n": [items[0]]}, indent) == json.dumps(
        {"points": items, "n": [items[0]]}, indent=indent
    )
    mixed = [*items, {**items[0], "z": 1}, {}]
    assert indented_json(mixed, indent) == json.dumps(mixed, indent=indent)
    assert dumps_json([{1: 2.5}, {1: 3.5}], indent=indent) == json.dumps([{1: 2.5}, {1: 3.5}], indent=indent)


def test_dumps_json_writes_non_finite_numbers_as_null_on_every_path():
    value = {"a": [1.0, math.nan], "b": {"c": math.inf}, "d": (1, 2)}
    for kwargs in (
        {},
        {"default": str},
        {"indent": 2},
        {"indent": 2, "default": str},
        {"indent": 1, "sort_keys": True},
    ):
        assert dumps_json(value, **kwargs) == json.dumps(null_nonfinite(value)[0], **kwargs)


# ------------------------------------------------------------------------------------------------ tables


def _report(rows: list[dict], source: str = "bench"):
    from roofline.report.schema import Report
    from tests.gate_synthetic import DEVICE

    return Report(source=source, devices=[DEVICE], rows=rows)


def _row(i: int, **extra) -> dict:
    row = {
        "kind": "gemm",
        "label": f"m={i} n=64",
        "params": {"m": i, "n": 64},
        "device": "h100-sxm",
        "roof": "bf16 tensor",
        "flops": 1000 * (i + 1),
        "bytes": 10 * (i + 1),
        "kernels": 1,
        "median_s": 1e-6 * (i + 1),
        "samples_s": [1e-6 * (i + 1), 1.1e-6 * (i + 1)],
        "bound": "compute",
        "findings": [{"rule": "r", "time_s": 1.0, "best_time_s": 0.5}] if i % 2 else [],
        "notes": ["a note, with a comma", 'a "quote"'] if i % 3 == 0 else [],
    }
    row.update(extra)
    return row


MIXED_ROWS = [
    _row(0),
    _row(1, params={}, extra="=SUM(A1)"),
    _row(2, params={"m": 2, "k": 8}, source="a/b.py:3"),
    _row(3, params=5, **{"params.m": "flat"}),
    _row(4, serving={"tp": 2, "link": {"name": "nvlink"}}, clocks_mhz=[1980.0, None]),
    _row(5, median_s=None, samples_s=[], bound=None, label="héllo\x1b[31mred", note="line\nbreak"),
    _row(6, flops=2**70, kernels=True, efficiency=math.nan, intensity=1.5),
    _row(7),
]


def _records_table(report) -> tuple[list[str], dict]:
    rows = export.records(report, "r")
    names = list(dict.fromkeys([*export.POINT_COLUMNS, *(key for row in rows for key in row)]))
    return names, {name: [row.get(name) for row in rows] for name in names}


def _same(a: dict, b: dict) -> bool:
    return json.dumps(a, default=repr) == json.dumps(b, default=repr)


@pytest.mark.parametrize("rows", [[_row(i) for i in range(6)], MIXED_ROWS, MIXED_ROWS[::-1], []])
def test_the_columnar_table_is_the_records_table(rows):
    report = _report(rows)
    names, values = export._table(report, "r")
    expected_names, expected = _records_table(report)
    assert names == expected_names
    assert _same(values, expected)


def test_a_row_of_other_objects_is_tabled_by_records():
    from pathlib import Path

    report = _report([_row(0), _row(1)])
    report.rows[1]["path"] = Path("x")  # not JSON: flatten writes it as it is
    with pytest.raises(columns.Unplanned):
        columns.table(report.rows, points.report_points(report, "r", per_call=True), export._POINT_READERS, str, str)
    names, values = export._table(report, "r")
    assert (names, values["path"]) == (_records_table(report)[0], [None, Path("x")])


COLUMN_VALUES = [
    [1.5, 2.0, None, -0.0, 1e-300],
    [1.5, math.nan, math.inf],
    [1, 2, None, 2**63 - 1, -(2**63)],
    [1, 2**64],
    [True, False, None],
    [True, 1, 1.5],
    ["a", "=1+2", "-3", None, "@x", "\tt", "plain"],
    ["a", "b"],
    ["é", "\x1b]0;title\x07x", "\ud800"],
    ["a", 1, 2.5, None, [1]],
    [None, None],
    [],
]


@pytest.mark.parametrize("values", COLUMN_VALUES)
def test_columns_are_typed_as_value_by_value(values):
    assert export._csv_column(list(values)) == export._typed_csv_column(list(values))
    pd = pytest.importorskip("pandas")
    fast, slow = export._column(list(values)), export._typed_column(list(values))
    assert pd.Series(fast).equals(pd.Series(slow)) or (fast == slow)
    assert pd.Series(fast).dtype == pd.Series(slow).dtype


CELLS = st.text(alphabet=st.sampled_from(list('ab ,"\n\r\t\x00é\u2028;')), max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(CELLS, min_size=3, max_size=3), max_size=5), st.lists(CELLS, min_size=3, max_size=3))
def test_csv_text_is_what_the_csv_module_writes(rows, header):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    cells = [list(column) for column in zip(*rows, strict=True)] if rows else [[], [], []]
    assert columns.csv_text(header, cells) == out.getvalue()


# ------------------------------------------------------------------------------------------------ points


ODD_ROWS = [
    _row(0),
    _row(1, flops=0, intensity=None),
    _row(2, bytes=0),
    _row(3, median_s=0.0),
    _row(4, median_s=math.nan, timed=False),
    _row(5, intensity="1.5", efficiency=True),  # not plain numbers: through Stored, as before
    _row(6, kernels=2.7, flops=3, bytes=4, efficiency=2.0, attainable_flops_per_s=7),
    _row(7, kind=None, op="aten::mm", roof=None, limiter=None, device=None, bound=None),
    _row(8, kind=5),
]


#: every value a plain number or text: read column by column (points._plain_columns)
PLAIN_ROWS = [
    *ODD_ROWS[:5],
    *ODD_ROWS[6:8],
    _row(9, flops=math.inf, bytes=None, efficiency=-math.inf, attainable_flops_per_s=None, kernels=None),
    _row(10, flops=2**70, intensity=3, median_s=2, timed=True, roof_time_s=None),
]


@pytest.mark.parametrize("rows", [ODD_ROWS, PLAIN_ROWS, PLAIN_ROWS[-1:]], ids=["odd", "plain", "one"])
@pytest.mark.parametrize("source", ["bench", "analytic", "diagnose"])
def test_the_one_loop_points_are_those_of_point(source, rows):
    key = "median_s" if source == "bench" else "time_s"
    assert (points._plain_columns(rows, key) is None) == (rows is ODD_ROWS)
    report = _report(rows, source)
    rows = report.rows
    labels = [points._op_label(r) for r in rows] if source == "diagnose" else points._workload_labels(rows)
    key = "median_s" if source == "bench" else "time_s"
    expected = points._with_shares(
        [
            points._point(
                row, index=i, labels=labels[i], report_name="r", source=source,
                device=str(row.get("device") or "h100-sxm"), time_key=key,
            )
            for i, row in enumerate(rows)
        ]
    )  # fmt: skip
    assert points.report_points(report, "r", per_call=True) == expected


def test_findings_made_when_read_are_the_views_sorted_by_saving():
    rows = [
        _row(i, findings=[{"rule": f"r{i}", "time_s": 1.0, "best_time_s": b} for b in (0.5, 0.9, None)])
        for i in range(5)
    ]
    report = _report(rows)
    labels = [label for label, _ in points._workload_labels(report.rows)]
    views = [points._finding(f, label) for row, label in zip(report.rows, labels, strict=True) for f in row["findings"]]
    expected = sorted(views, key=lambda f: -f.saving_s)
    found = points.Findings(report)
    assert list(found) == expected and len(found) == 15 and found[:3] == tuple(expected[:3])
    assert found == tuple(expected) and found[-1] == expected[-1]


# ------------------------------------------------------------------------------------------------ outputs


@pytest.fixture(scope="module")
def small_reports(tmp_path_factory):
    """A bench and a diagnose report of 60 rows, as benchmarks/report_scale.py makes them, written to files."""
    import benchmarks.report_scale as scale
    import roofline.specs.detect as detect
    from roofline.report.schema import write_report

    folder = tmp_path_factory.mktemp("reports")
    report, _, _ = scale.bench_report(60)
    write_report(report, folder / "bench.json")
    real = detect.describe_machine
    detect.describe_machine = lambda *a, **k: {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3"}
    try:
        write_report(scale.diagnose_result(60).report("roofline diagnose m.py"), folder / "diagnose.json")
    finally:
        detect.describe_machine = real
    return [folder / "bench.json", folder / "diagnose.json"]


def _outputs(path) -> dict[str, object]:
    from roofline.render.report_markdown import MarkdownReportRenderer
    from roofline.report.baseline import from_report

    report = read_report(path)
    name = path.stem
    doc = points.report_document(report, name, per_call=False)
    return {
        "csv": export.to_csv(report, name),
        **({"parquet": export.to_parquet(report, name)} if importlib.util.find_spec("pyarrow") else {}),
        "frame": export.points_frame(report, name).to_json(),
        "markdown": MarkdownReportRenderer(rows=500).render(doc),
        "json": report.to_json(),
        "baseline": from_report(report, commit="0" * 40).model_copy(update={"created_utc": ""}).to_json(),
    }


def test_small_reports_read_and_written_the_same_on_every_path(small_reports, monkeypatch):
    pytest.importorskip("pandas")
    for path in small_reports:
        fast = _outputs(path)
        monkeypatch.setenv("ROOFLINE_JSON", "stdlib")  # json's decoder
        monkeypatch.setattr(columns, "_quoting", lambda: None)  # the csv module writes the text
        monkeypatch.setattr(export, "_table", _records_table_of)  # records make the table
        monkeypatch.setattr(export, "_csv_column", export._typed_csv_column)  # columns typed value by value
        monkeypatch.setattr(export, "_column", export._typed_column)
        monkeypatch.setattr(export, "_arrow_table", lambda columns, values: None)  # pandas makes the Parquet
        monkeypatch.setattr("roofline.yamlio._dumps", _json_dumps)  # json's encoders
        plain = _outputs(path)
        monkeypatch.undo()
        assert fast == plain


def _records_table_of(report, name):
    rows = export.records(report, name)
    names = list(dict.fromkeys([*export.POINT_COLUMNS, *(key for row in rows for key in row)]))
    return names, {column: [row.get(column) for row in rows] for column in names}


def _json_dumps(data, kwargs):
    return json.dumps(data, allow_nan=False, **kwargs)


def test_the_cli_process_keeps_and_freezes_only_when_it_is_the_entry_point():
    import roofline.yamlio as yamlio
    from roofline.cli import process

    kept = len(yamlio._KEPT)
    yamlio.keep_parsed({"a": 1})  # not the CLI's own process: nothing kept
    assert len(yamlio._KEPT) == kept
    with process.collector_paused():  # not the entry point: the collector as it was
        assert gc.isenabled()
    process.set_entry(True)
    try:
        with process.collector_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        with process.collector_paused(False):
            assert gc.isenabled()
    finally:
        process.set_entry(False)
    assert yamlio._FREEZE == [False]


@NEEDS_ORJSON
def test_the_long_integer_scan_runs_only_where_a_float_of_1e16_or_more_was_read(monkeypatch):
    import roofline.yamlio as yamlio

    monkeypatch.delenv("ROOFLINE_JSON", raising=False)
    assert yamlio._big_exponent(yamlio.fast_decoder()) is not None  # this orjson: e18 (3.8), e+18 (3.10 on)
    scanned: list[bytes] = []
    real = yamlio._long_integer
    monkeypatch.setattr(yamlio, "_long_integer", lambda raw: scanned.append(raw) or real(raw))
    plain = b'{"rows": [{"t": 1.5e-05, "n": 9223372036854775807, "s": "1234567890123456789012 1e+03"}], "x": 1e15}'
    assert fast_loads(plain) == json.loads(plain)
    assert scanned == []
    big = b'{"rows": [{"t": 1e16}]}'
    text = b'{"rows": [{"s": "2e17 or 2e+17", "t": "1e+03 ns"}]}'  # text like a big float: scanned (none found)
    assert fast_loads(big) == json.loads(big) and fast_loads(text) == json.loads(text)
    assert scanned == [big, text]
    long = b'{"rows": [{"t": 18446744073709551616}]}'
    assert fast_loads(long) is UNDECIDED
    monkeypatch.setattr(yamlio, "_EXPONENT", [None])  # an orjson that writes big floats otherwise: always scanned
    assert fast_loads(plain) is UNDECIDED  # (its 19-digit integer found: json reads it, the same document)
    assert scanned[-1] == plain


PARQUET_ROWS = [  # columns of every kind the arrow table makes itself, nulls among them
    _row(0, timed=True, stop="a", count=None, when=None),
    _row(1, timed=False, stop=None, count=3, when=None, median_s=None),
    _row(2, timed=True, stop="c", count=2**62, when=None, efficiency=0.5),
]


@pytest.mark.parametrize(
    ("rows", "arrow"),
    [
        ([_row(i) for i in range(6)], True),
        (PARQUET_ROWS, True),
        ([_row(0, label="héllo"), _row(1, efficiency=math.nan)], False),  # text not plain, a NaN: pandas
        ([*PARQUET_ROWS, _row(3, timed=None)], False),  # booleans with a null: pandas' object column
        ([], False),
    ],
)
def test_parquet_from_the_columns_is_the_file_pandas_writes(rows, arrow, monkeypatch):
    pytest.importorskip("pyarrow")
    pytest.importorskip("pandas")
    report = _report(rows)
    names, values = export._table(report, "r")
    assert (export._arrow_table(names, values) is not None) == arrow
    fast = export.to_parquet(report, "r")
    monkeypatch.setattr(export, "_arrow_table", lambda columns, values: None)
    assert fast == export.to_parquet(report, "r")


def test_report_and_plot_freeze_what_they_made_in_the_cli_process(small_reports, cli, tmp_path, monkeypatch):
    # what a page or a chart made (a matplotlib figure's reference cycles) is frozen, not collected, before the
    # process ends (roofline.cli.process.frozen_after: a no-op outside the CLI's own process)
    import contextlib

    from roofline.cli import process

    entered: list[str] = []

    @contextlib.contextmanager
    def recorded():
        entered.append("in")
        yield

    monkeypatch.setattr(process, "frozen_after", recorded)
    assert cli("report", str(small_reports[0]), "-o", str(tmp_path / "r.md")).code == 0
    assert cli("plot", str(small_reports[1]), "-o", str(tmp_path / "c.svg")).code == 0
    assert entered == ["in", "in"]
