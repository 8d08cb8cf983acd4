"""Bad input is one line ``Error: ...`` and exit 2, never a traceback (issue 11, reliability):

- binary, non-UTF-8 and broken YAML for every YAML reader (spec sheets via --spec and $ROOFLINE_SPECS_DIR, suites,
  model configs);
- spec sheets with infinite, NaN, zero, negative, absurd or non-numeric values; sizes that are not finite whole
  numbers up to 2^62; float options that are not finite;
- reports holding NaN or Infinity: read as null with one note, through every reader and writer;
- $COLUMNS and $LINES of every kind;
- user text (module names, labels, device names) through every renderer: escaped for Markdown, HTML and XML,
  plain for terminals and charts.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from roofline.errors import UsageError
from roofline.report import baseline as baselines
from roofline.report.schema import read_report, write_report
from roofline.units import MAX_SIZE, parse_size
from roofline.yamlio import dumps_json, null_nonfinite
from tests.gate_synthetic import bench_report, bench_row, diagnose_report, diagnose_row, spread

ROOT = Path(__file__).resolve().parents[1]
SHEET = (ROOT / "hardware_specs" / "h100-sxm.yaml").read_text(encoding="utf-8").replace("name: h100-sxm", "name: t1")
GEMM = ["analyze", "gemm", "-m", "64", "-n", "64", "-k", "64"]
BINARY = bytes(range(256)) * 4  # NUL bytes and every other byte
LATIN1 = "name: café\ndisplay_name: Ünïcode\n".encode("latin-1")


def _no_traceback(result) -> None:
    assert "Traceback" not in result.err and "Traceback" not in result.out


def _error(result, code: int = 2) -> str:
    """The one ``Error:`` line of a failed command (and its exit code)."""
    _no_traceback(result)
    assert result.code == code, (result.code, result.err)
    return result.error_line()


# ------------------------------------------------------------------------------------------------ YAML readers


def _spec_flag(path: Path, monkeypatch) -> list[str]:
    return [*GEMM, "--device", "t1", "--spec", str(path)]


def _specs_dir(path: Path, monkeypatch) -> list[str]:
    monkeypatch.setenv("ROOFLINE_SPECS_DIR", str(path.parent))
    return ["specs", "list"]


def _suite(path: Path, monkeypatch) -> list[str]:
    return ["analyze", "suite", str(path), "--device", "h100-sxm"]


def _model_config(path: Path, monkeypatch) -> list[str]:
    return ["analyze", "decode", "--model", str(path), "--device", "h100-sxm"]


READERS = {"--spec": _spec_flag, "ROOFLINE_SPECS_DIR": _specs_dir, "suite": _suite, "model config": _model_config}


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (BINARY, "a binary file, not YAML text"),
        (LATIN1, "not UTF-8 text (byte 0xe9 on line 1): save the file as UTF-8"),
        (b"name: x\nnote: \x1b[2J\n", "line 2: invalid YAML: unacceptable character #x001b"),
        (b"a: [1, 2\n", "invalid YAML"),
        (b"a: " + b"[" * 2000, "nested more than 100 levels deep"),
    ],
    ids=["binary", "latin-1", "control-char", "unclosed", "deep"],
)
def test_every_yaml_reader_says_what_is_wrong_with_the_file(cli, tmp_path, monkeypatch, reader, content, needle):
    directory = tmp_path / "in"
    directory.mkdir()
    path = directory / "bad.yaml"
    path.write_bytes(content)
    line = _error(cli(*READERS[reader](path, monkeypatch)))
    assert str(path) in line and needle in line


@pytest.mark.parametrize("reader", ["--spec", "suite", "model config"])
def test_a_directory_or_a_missing_file_is_one_line(cli, tmp_path, monkeypatch, reader):
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    line = _error(cli(*READERS[reader](folder, monkeypatch)))
    assert "is a directory" in line or "no such model config file" in line
    missing = tmp_path / "missing.yaml"
    assert "no such" in _error(cli(*READERS[reader](missing, monkeypatch)))


def test_a_utf8_byte_order_mark_is_read(cli, tmp_path):
    path = tmp_path / "t1.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + SHEET.encode("utf-8"))
    result = cli(*GEMM, "--device", "t1", "--spec", str(path))
    assert result.code == 0, result.err


def test_brackets_nested_past_libyaml_are_refused_not_a_segfault(tmp_path):
    """libyaml crashes the process on ~10^5 nested brackets: checked before parsing (in a subprocess: a crash here
    would take pytest with it)."""
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 100_000, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "roofline", *GEMM, "--device", "t1", "--spec", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"Error: {path}: invalid YAML: nested more than 100 levels deep"]


# ------------------------------------------------------------------------------------------------ spec sheets


@pytest.mark.parametrize(
    ("old", "new", "field", "needle"),
    [
        ("fp32: 66.9}", "fp32: .inf}", "compute_dense_tflops.vector.fp32", "finite number from 1e-06 to 1e+06 TFLOP/s"),
        ("fp32: 66.9}", "fp32: -.inf}", "compute_dense_tflops.vector.fp32", "finite number"),
        ("fp32: 66.9}", "fp32: 1e400}", "compute_dense_tflops.vector.fp32", "finite number"),
        ("fp32: 66.9}", "fp32: 1.0e+400}", "compute_dense_tflops.vector.fp32", "(got inf)"),
        ("fp32: 66.9}", "fp32: .nan}", "compute_dense_tflops.vector.fp32", "(got nan)"),
        ("fp32: 66.9}", "fp32: 0}", "compute_dense_tflops.vector.fp32", "(got 0)"),
        ("fp32: 66.9}", "fp32: -3}", "compute_dense_tflops.vector.fp32", "(got -3)"),
        ("fp32: 66.9}", "fp32: 1e7}", "compute_dense_tflops.vector.fp32", "1 MFLOP/s to 1 EFLOP/s"),
        ("fp32: 66.9}", "fp32: fast}", "compute_dense_tflops.vector.fp32", "valid number"),
        ("fp32: 66.9}", "fp32: true}", "compute_dense_tflops.vector.fp32", "must be a number, not true/false"),
        ("bf16: 989.4,", "bf16: .inf,", "compute_dense_tflops.tensor.bf16", "finite number"),
        (
            "bandwidth_gb_per_s: 3350",
            "bandwidth_gb_per_s: 1e-300",
            "memory.dram.bandwidth_gb_per_s",
            "1 MB/s to 1 EB/s",
        ),
        ("bandwidth_gb_per_s: 3350", "bandwidth_gb_per_s: .inf", "memory.dram.bandwidth_gb_per_s", "finite number"),
        ("bandwidth_gb_per_s: 3350", "bandwidth_gb_per_s: 0", "memory.dram.bandwidth_gb_per_s", "from 0.001 to 1e+09"),
        ("capacity_gb: 80", "capacity_gb: .nan", "memory.dram.capacity_gb", "finite number"),
        ("capacity_mib: 50", "capacity_mib: -1", "memory.l2.capacity_mib", "finite number"),
        ("launch_floor_us: 4.0", "launch_floor_us: 1e-300", "launch_floor_us", "1 ns to 1 s"),
        ("launch_floor_us: 4.0", "launch_floor_us: .inf", "launch_floor_us", "finite number"),
        ("boost_clock_mhz: 1980", "boost_clock_mhz: .inf", "boost_clock_mhz", "MHz"),
        ("gb_per_s: 900", "gb_per_s: .nan", "interconnect.nvlink_bandwidth_per_gpu.gb_per_s", "GB/s"),
        ("compute_units: 132", "compute_units: 1e400", "compute_units", "valid integer"),
        ("compute_units: 132", "compute_units: 100000000000", "compute_units", "less than or equal"),
        ("compute_units: 132", "compute_units: true", "compute_units", "not true/false"),
    ],
)
def test_spec_sheet_numbers_must_be_finite_and_sane(cli, tmp_path, old, new, field, needle):
    assert old in SHEET
    path = tmp_path / "t1.yaml"
    path.write_text(SHEET.replace(old, new, 1), encoding="utf-8")
    line = _error(cli(*GEMM, "--device", "t1", "--spec", str(path)))
    assert line.startswith(f"Error: {path}: {field}: ") and needle in line, line


def test_a_bad_sheet_in_the_specs_dir_names_its_file(cli, tmp_path, monkeypatch):
    path = tmp_path / "t1.yaml"
    path.write_text(SHEET.replace("fp32: 66.9}", "fp32: .inf}"), encoding="utf-8")
    monkeypatch.setenv("ROOFLINE_SPECS_DIR", str(tmp_path))
    assert _error(cli("specs", "list")).startswith(f"Error: {path}: compute_dense_tflops.vector.fp32: ")


def test_every_shipped_sheet_is_within_the_ranges(cli):
    result = cli("specs", "list", "--json")
    assert result.code == 0, result.err
    assert len(result.json()["specs"]) >= 10


# ------------------------------------------------------------------------------------------------ sizes


@pytest.mark.parametrize(
    ("size", "needle"),
    [
        ("1e300x1e300", "too large: a size is at most 2^62"),
        ("1e400", "too large"),
        ("2^62x2", "too large"),
        ("2^63", "too large"),
        ("10^99999999", "too large"),
        ("1e99999999", "too large"),
        ("9" * 5000, "too large"),
        ("4611686018427387905", "too large"),
        ("-1", "cannot read '-1' as a size"),
        ("nan", "cannot read 'nan' as a size"),
        ("inf", "cannot read 'inf' as a size"),
        ("0", "'0' must be positive"),
        ("0x4096", "must be positive"),
        ("1.5", "not a whole number"),
    ],
)
def test_sizes_are_finite_whole_numbers_up_to_2_62(cli, size, needle):
    line = _error(cli("analyze", "gemm", "-m", size, "-n", "64", "-k", "64", "--device", "h100-sxm"))
    assert line.startswith("Error: -m: ") and needle in line, line


def test_the_largest_sizes_are_exact_and_their_costs_finite(cli, tmp_path):
    assert parse_size("4611686018427387903", "-m") == MAX_SIZE - 1  # a float would round it
    assert parse_size("9007199254740993", "-m") == 9007199254740993
    assert parse_size("2^62", "-m") == MAX_SIZE
    out = tmp_path / "big.json"
    big = "2^62"
    result = cli(
        "analyze", "gemm", "-m", big, "-n", big, "-k", big, "--batch", big, "--device", "h100-sxm", "-o", str(out)
    )
    assert result.code == 0, result.err
    row = read_report(out).rows[0]
    assert row["flops"] == 2 * MAX_SIZE**4 and math.isfinite(row["time_s"])
    csv = cli("report", str(out), "--format", "csv")  # a count past 2^63: a float column, not a crash
    assert csv.code == 0, csv.err


def test_zero_where_allowed(cli):
    with pytest.raises(UsageError, match="--padding"):
        parse_size("-0", "--padding", allow_zero=True)
    assert parse_size("0", "--padding", allow_zero=True) == 0


@pytest.mark.parametrize(
    ("entry", "needle"),
    [
        ("{kind: gemm, m: 1" + "0" * 200 + ", n: 4, k: 4}", "gemm: m: too large: a size is at most 2^62"),
        ("{kind: gemm, m: 1.0e+300, n: 4, k: 4}", "gemm: m: "),
        ("{kind: gemm, m: .inf, n: 4, k: 4}", "gemm: m: Input should be a valid integer"),
        ("{kind: gemm, m: .nan, n: 4, k: 4}", "gemm: m: "),
        ("{kind: elementwise, op: gelu, numel: -1}", "numel: "),
    ],
)
def test_suite_sizes(cli, tmp_path, entry, needle):
    path = tmp_path / "suite.yaml"
    path.write_text(f"name: s\nworkloads:\n  - {entry}\n", encoding="utf-8")
    line = _error(cli("analyze", "suite", str(path), "--device", "h100-sxm"))
    assert line.startswith(f"Error: {path}: workloads[0]: ") and needle in line, line


@pytest.mark.parametrize("value", [".inf", ".nan", "1" + "0" * 30, "0", "-4"])
def test_model_config_sizes(cli, tmp_path, value):
    text = (ROOT / "workloads" / "llm" / "gpt2.yaml").read_text(encoding="utf-8")
    lines = [f"hidden: {value}" if line.startswith("hidden:") else line for line in text.splitlines()]
    path = tmp_path / "model.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _error(cli("analyze", "decode", "--model", str(path), "--device", "h100-sxm")).startswith(
        f"Error: {path}: hidden: "
    )


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e400", "0", "-1"])
def test_max_time_must_be_finite_and_positive(cli, tmp_path, monkeypatch, value):
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    line = _error(cli("bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cpu", "--max-time", value))
    why = {"0": "'0' must be positive", "1e400": "'1e400' is out of range: a time is 1 ns to 1e+09 s"}.get(
        value, f"cannot read '{value}' as a time: use a number in s or one with a unit"
    )
    assert line.startswith(f"Error: --max-time: {why}")
    assert not (tmp_path / "roofline-bench.json").exists()


@pytest.mark.parametrize("value", ["nan", "inf", "1", "0.2"])
def test_gate_confidence_must_be_in_range(cli, tmp_path, value):
    report = tmp_path / "r.json"
    write_report(bench_report([bench_row("m=1", spread(1e-4, 10, 0.01))]), report)
    base = tmp_path / "b.json"
    assert cli("baseline", "save", str(report), "-o", str(base)).code == 0
    assert "--confidence" in _error(cli("gate", str(report), "-b", str(base), "--confidence", value))


# ------------------------------------------------------------------------------------------------ NaN in reports


def _with_nonfinite(report, path: Path, edits) -> Path:
    """The report written with Python's json (which writes NaN and Infinity), after ``edits`` on its rows."""
    data = json.loads(report.to_json())
    for index, key, value in edits:
        if isinstance(key, tuple):
            data["rows"][index][key[0]][key[1]] = value
        else:
            data["rows"][index][key] = value
    path.write_text(json.dumps(data), encoding="utf-8")
    assert "NaN" in path.read_text() or "Infinity" in path.read_text()
    return path


BENCH_EDITS = [
    (0, "median_s", math.nan),
    (1, "efficiency", math.inf),
    (1, ("samples_s", 0), math.nan),
    (2, "intensity", -math.inf),
    (2, "flops", math.nan),
]


@pytest.fixture
def nan_bench(tmp_path) -> Path:
    rows = [bench_row(f"m={m}", spread(1e-4 * m, 12, 0.01)) for m in (1, 2, 3, 4)]
    return _with_nonfinite(bench_report(rows), tmp_path / "bad-bench.json", BENCH_EDITS)


@pytest.fixture
def nan_diagnose(tmp_path) -> Path:
    rows = [diagnose_row("aten::mm", f"layers.{i}", [[64, 64]], spread(2e-5, 12, 0.02)) for i in range(3)]
    edits = [(0, "time_s", math.nan), (1, ("samples_s", 3), math.inf), (2, "roof_time_s", math.nan)]
    return _with_nonfinite(diagnose_report(rows), tmp_path / "bad-diagnose.json", edits)


def _one_note(result, path: Path, count: int) -> str:
    notes = [line for line in result.err.splitlines() if line.startswith("note: ") and "non-finite" in line]
    assert len(notes) == 1, result.err
    assert notes[0].startswith(f"note: {path}: {count} non-finite values (NaN or Infinity) read as null: rows[")
    return notes[0]


def test_read_report_reads_nonfinite_values_as_null(nan_bench):
    heard: list[str] = []
    report = read_report(nan_bench, note=heard.append)
    assert len(heard) == 1
    assert heard[0].startswith(f"{nan_bench}: 5 non-finite values (NaN or Infinity) read as null: rows[0].median_s, ")
    assert "rows[1].samples_s[0]" in heard[0] and heard[0].endswith(" and 2 more")
    assert report.rows[0]["median_s"] is None and report.rows[1]["samples_s"][0] is None
    assert "NaN" not in report.to_json() and "Infinity" not in report.to_json()


@pytest.mark.parametrize("fmt", ["csv", "parquet", "markdown", "html"])
@pytest.mark.parametrize("which", ["bench", "diagnose"])
def test_report_formats_read_nan_as_missing(cli, tmp_path, nan_bench, nan_diagnose, fmt, which):
    if fmt in ("csv", "parquet"):
        pytest.importorskip("pandas")
        pytest.importorskip("pyarrow")
    if fmt == "html":
        pytest.importorskip("matplotlib")
    path = nan_bench if which == "bench" else nan_diagnose
    out = tmp_path / f"out.{fmt}"
    result = cli("report", str(path), "-o", str(out))
    _no_traceback(result)
    assert result.code == 0, result.err
    _one_note(result, path, 5 if which == "bench" else 3)
    if fmt == "csv":
        import csv

        rows = list(csv.DictReader(out.open(encoding="utf-8")))
        assert rows and all(
            "nan" not in value.lower() and "inf" not in value.lower() for r in rows for value in r.values()
        )
    elif fmt == "parquet":
        import pandas as pd

        frame = pd.read_parquet(out)
        column = "median_s" if which == "bench" else "time_s"
        assert frame[column].isna().sum() == 1
    else:
        text = out.read_text(encoding="utf-8")
        assert "NaN" not in text and "Infinity" not in text


def test_plot_of_a_report_with_nan(cli, tmp_path, nan_bench):
    pytest.importorskip("matplotlib")
    result = cli("plot", str(nan_bench), "-o", str(tmp_path / "c.svg"))
    assert result.code == 0, result.err
    _one_note(result, nan_bench, 5)
    ET.parse(tmp_path / "c.svg")


@pytest.mark.parametrize("which", ["bench", "diagnose"])
def test_baseline_save_and_gate_read_nan_as_missing(cli, tmp_path, nan_bench, nan_diagnose, which):
    path = nan_bench if which == "bench" else nan_diagnose
    base = tmp_path / "b.json"
    result = cli("baseline", "save", str(path), "-o", str(base))
    _no_traceback(result)
    assert result.code == 0, result.err
    _one_note(result, path, 5 if which == "bench" else 3)
    text = base.read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    saved = baselines.load(base)
    assert all(math.isfinite(s) for p in saved.points for s in p.samples_s)
    junit = tmp_path / "j.xml"
    gated = cli("gate", str(path), "-b", str(base), "--junit", str(junit), "--format", "json")
    _no_traceback(gated)
    assert gated.code in (0, 3), gated.err
    assert "NaN" not in gated.out and "Infinity" not in gated.out
    ET.parse(junit)


def test_writers_never_write_nan(tmp_path):
    report = bench_report([bench_row("m=1", spread(1e-4, 10, 0.01))])
    report.rows[0]["median_s"] = math.nan
    report.rows[0]["samples_s"][0] = math.inf
    text = report.to_json()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["rows"][0]["median_s"] is None
    assert dumps_json({"a": [math.nan, -math.inf, 1.5]}) == '{"a": [null, null, 1.5]}'
    data, where = null_nonfinite({"rows": [{"x": 1.0}, {"x": math.nan, "y": [math.inf]}]})
    assert where == ["rows[1].x", "rows[1].y[0]"] and data == {"rows": [{"x": 1.0}, {"x": None, "y": [None]}]}
    unchanged = {"rows": [{"x": 1.0}]}
    assert null_nonfinite(unchanged)[0] is unchanged


def test_csv_of_an_in_memory_report_with_nan(tmp_path):
    pytest.importorskip("pandas")
    from roofline.report.export import points_frame, to_csv

    report = bench_report([bench_row("m=1", spread(1e-4, 10, 0.01)), bench_row("m=2", spread(1e-4, 10, 0.01))])
    report.rows[0]["efficiency"] = math.nan
    report.rows[1]["samples_s"][2] = math.inf
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(to_csv(report, "r"))))
    assert rows[0]["efficiency"] == "" and rows[1]["efficiency"] != ""
    assert "NaN" not in rows[1]["samples_s"] and "Infinity" not in rows[1]["samples_s"]
    frame = points_frame(report, "r")
    assert frame["efficiency"].isna().sum() == 1
    assert "null" in frame["samples_s"][1]
    assert str(frame["flops"].dtype) == "Int64"


# ------------------------------------------------------------------------------------------------ COLUMNS, LINES


@pytest.mark.parametrize("value", ["", " ", "abc", "0", "-5", "12.5", "+80", "0x50", "99999999999", "9" * 5000])
@pytest.mark.parametrize("name", ["COLUMNS", "LINES"])
@pytest.mark.parametrize(
    "args",
    [["specs", "list"], ["specs", "show", "h100-sxm"], [*GEMM, "--device", "h100-sxm"], ["--help"]],
    ids=["specs-list", "specs-show", "analyze", "help"],
)
def test_terminal_size_variables(cli, monkeypatch, value, name, args):
    monkeypatch.setenv(name, value)
    result = cli(*args)
    _no_traceback(result)
    assert result.code == 0, result.err
    assert result.err == ""
    assert max(len(line) for line in result.out.splitlines()) <= 10_000


def test_terminal_size_bounds(monkeypatch):
    from roofline.render.base import MAX_TERMINAL_SIZE, clean_terminal_size_env, terminal_size_env

    for value, size in [("80", 80), ("0080", 80), ("99999999999", MAX_TERMINAL_SIZE), ("9" * 5000, MAX_TERMINAL_SIZE)]:
        monkeypatch.setenv("COLUMNS", value)
        assert terminal_size_env("COLUMNS") == size
    monkeypatch.setenv("LINES", "-3")
    monkeypatch.setenv("COLUMNS", "99999999999")
    clean_terminal_size_env()
    assert "LINES" not in os.environ and os.environ["COLUMNS"] == str(MAX_TERMINAL_SIZE)


def test_gate_table_at_tiny_widths(cli, tmp_path, monkeypatch):
    report = tmp_path / "r.json"
    write_report(bench_report([bench_row("m=1", spread(1e-4, 10, 0.01))]), report)
    base = tmp_path / "b.json"
    assert cli("baseline", "save", str(report), "-o", str(base)).code == 0
    for width in ("1", "7", "20"):
        monkeypatch.setenv("COLUMNS", width)
        result = cli("gate", str(report), "-b", str(base))
        _no_traceback(result)
        assert result.code == 0, result.err
        assert cli("baseline", "show", str(base)).code == 0


# ------------------------------------------------------------------------------------------------ escaping

IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(1)</script>"
CONTROL = "ctl\x00\x01\x07\x0b\x1b[2J\x1f\x7f\x9b\ud800\ufffe\uffff"


@pytest.fixture
def hostile(tmp_path) -> Path:
    rows = [
        diagnose_row("aten::mm", IMG, [[64, 512], [512, 2048]], spread(2.0e-5, 20, 0.02)),
        diagnose_row(SCRIPT, "a | `b` $x^2$ $\\frac{$ [/] [bold]", [[64, 2048]], spread(4.0e-6, 20, 0.03)),
        diagnose_row("aten::gelu", CONTROL, [[64, 2048]], spread(4.0e-6, 20, 0.03)),
    ]
    report = diagnose_report(rows, model="[/]<b>m</b>.py\x1b[2J")
    path = tmp_path / "hostile.json"
    write_report(report, path)
    return path


def _markup_free(text: str) -> None:
    assert "<script" not in text and "<img" not in text
    assert not any(c in text for c in "\x00\x01\x07\x0b\x1b\x1f\ud800\ufffe\uffff")


def test_markdown_escapes_html_pipes_and_backticks(cli, hostile):
    result = cli("report", str(hostile), "--format", "markdown")
    assert result.code == 0, result.err
    _markup_free(result.out)
    assert "&lt;img src=x onerror=alert(1)>" in result.out
    assert "a \\| \\`b\\`" in result.out
    for line in result.out.splitlines():
        if line.startswith("| ") and "a \\|" in line:
            assert line.count(" | ") == line.replace("\\|", "").count(" | ")  # no cell split inside the name


def test_html_and_chart_with_hostile_names(cli, tmp_path, hostile):
    pytest.importorskip("matplotlib")
    page = tmp_path / "r.html"
    result = cli("report", str(hostile), "-o", str(page))
    assert result.code == 0, result.err
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text and "<img" not in text
    for fmt in ("svg", "png"):  # `$...$` is no TeX math, control characters are dropped
        chart = tmp_path / f"c.{fmt}"
        drawn = cli("plot", str(hostile), "-o", str(chart))
        assert drawn.code == 0, drawn.err
    ET.parse(tmp_path / "c.svg")


def test_junit_with_control_characters_parses(cli, tmp_path, hostile):
    base = tmp_path / "b.json"
    assert cli("baseline", "save", str(hostile), "-o", str(base)).code == 0
    junit, md = tmp_path / "j.xml", tmp_path / "g.md"
    result = cli("gate", str(hostile), "-b", str(base), "--junit", str(junit), "--markdown", str(md))
    _no_traceback(result)
    assert result.code == 0, result.err
    assert "\x1b" not in result.out and "\ud800" not in result.out  # the console table: no escape sequences
    root = ET.parse(junit).getroot()
    names = [case.get("name") for case in root.iter("testcase")]
    assert any(IMG in name for name in names)  # ElementTree escaped it; parsed back it is the text
    assert any(name.startswith("ctl") and "[2J" not in name for name in names)  # the CSI sequence went whole
    _markup_free(md.read_text(encoding="utf-8"))
    shown = cli("baseline", "show", str(base))
    assert shown.code == 0, shown.err
    assert "\x1b" not in shown.out and "[/]" in shown.out  # rich markup in the model's name: shown as text


def test_hostile_spec_sheet_strings(cli, tmp_path):
    sheet = (
        SHEET.replace("display_name: NVIDIA H100 SXM5 80GB", 'display_name: "[/] <script>x</script> | `t` \\e[2J"')
        .replace("architecture: hopper", 'architecture: "[/]hop\\e[31m"')
        .replace("type: HBM3", 'type: "[/]HBM"')
        .replace("l2: {capacity_mib: 50}", 'l2: {capacity_mib: 50, scope: "[bold] per \\e[2J"}')
        .replace("notes:\n", f'notes:\n  - "[/] {IMG} \\e[2J"\n')
    )
    path = tmp_path / "t1.yaml"
    path.write_text(sheet, encoding="utf-8")
    for args in (["specs", "show", "t1"], ["specs", "list"], [*GEMM, "--device", "t1"]):
        result = cli(*args, "--spec", str(path))
        _no_traceback(result)
        assert result.code == 0, result.err
        assert "\x1b" not in result.out
    shown = cli("specs", "show", "t1", "--spec", str(path)).out
    assert "[/]hop" in shown and "[/]HBM" in shown and "[bold] per" in shown
    out = tmp_path / "r.json"
    assert cli(*GEMM, "--device", "t1", "--spec", str(path), "-o", str(out)).code == 0
    markdown = cli("report", str(out), "--format", "markdown").out
    assert "<script" not in markdown and "&lt;script>" in markdown and "\\`t\\`" in markdown
