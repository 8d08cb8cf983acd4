"""The bad-file corpus (issue 28): every command that reads a JSON or YAML file, fed each kind of bad file, answers
with exit 2 (docs/cli.md: bad input) and exactly one ``Error:`` line naming the file and the fix; never a
traceback, never a file written, left behind or changed.

Each case is ``(id, argv, needles)``: ``{d}`` in ``argv`` is the corpus directory (made once by the ``corpus``
fixture: every bad file derived from one good bench report, its baseline and shipped sheets and configs); every
needle must be in the error line. The kinds: nesting 100,000 levels deep, a key given twice, a bool or a string
where a number goes, an invalid block, rows that say nothing or lie (``{}``, ``"fast"``, negative times),
reports without samples or with two rows of one point (for the gate), aliases that expand to millions of values,
an alias inside its own anchor, and files over the size limits (sparse files: nothing is read).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from roofline.yamlio import MAX_JSON_BYTES, MAX_YAML_BYTES

ROOT = Path(__file__).resolve().parents[1]
SHEET = (ROOT / "hardware_specs" / "h100-sxm.yaml").read_text(encoding="utf-8")
LLM = (ROOT / "workloads" / "llm" / "gpt2.yaml").read_text(encoding="utf-8")
HF = json.loads((ROOT / "tests" / "hf_configs" / "llama-gqa.json").read_text(encoding="utf-8"))
SUITE = "name: s\nworkloads:\n  - {kind: gemm, m: 8, n: 8, k: 8}\n"

DEEP_JSON = "[" * 100_000 + "]" * 100_000
LAUGHS = (
    'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    + "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdef", "bcdefg", strict=True))
    + "name: s\nworkloads: *g\n"
)
DEEP_BLOCK = "name: s\nworkloads:\n" + "".join("  " * (i + 1) + "-\n" for i in range(150)) + "  " * 151 + "- 1\n"


def _report(rows: int = 2) -> dict:
    from gate_synthetic import bench_report, bench_row, spread

    made = bench_report([bench_row(f"m={4096 >> i}", spread(1.8e-4 / (i + 1), 20, 0.01)) for i in range(rows)])
    return json.loads(made.to_json())


def _variant(good: dict, change) -> str:
    data = copy.deepcopy(good)
    change(data)
    return json.dumps(data)


def _set(path: str, value):
    """A change: the value at a dotted path ('rows.0.median_s') set to ``value``."""

    def change(data):
        *parents, leaf = path.split(".")
        for part in parents:
            data = data[int(part)] if isinstance(data, list) else data[part]
        data[int(leaf) if isinstance(data, list) else leaf] = value

    return change


def _bad_reports(good: dict) -> dict[str, str]:
    text = json.dumps(good, indent=1)

    def strip(data):
        for row in data["rows"]:
            del row["samples_s"]

    return {
        "deep.json": DEEP_JSON,
        "deep_field.json": text.replace('"rows": [', '"extra": ' + DEEP_JSON + ', "rows": [', 1),
        "dup_key.json": text.replace('"rows": [', '"source": "analytic",\n "rows": [', 1),
        "machine.json": _variant(good, _set("machine", {"kind": 5})),
        "machine_text.json": _variant(good, _set("machine", "an H100")),
        "fast.json": _variant(good, _set("rows.0.median_s", "fast")),
        "negative.json": _variant(good, _set("rows.1.median_s", -1.0e-4)),
        "bool_time.json": _variant(good, _set("rows.0.roof_time_s", True)),
        "negative_sample.json": _variant(good, _set("rows.0.samples_s.3", -2e-4)),
        "text_sample.json": _variant(good, _set("rows.1.samples_s.0", "1e-4")),
        "samples_not_list.json": _variant(good, _set("rows.0.samples_s", 0.5)),
        "empty_row.json": _variant(good, _set("rows", [{}])),
        "list_row.json": _variant(good, _set("rows", [[1, 2]])),
        "rows_number.json": _variant(good, _set("rows", 5)),
        # read fine; the gate and baseline refuse them
        "no_samples.json": _variant(good, lambda data: [row.update(samples_s=[]) for row in data["rows"]]),
        "stripped.json": _variant(good, strip),
        "one_label.json": _variant(good, _set("rows.1.label", good["rows"][0]["label"])),
    }


def _bad_baselines(good: dict) -> dict[str, str]:
    text = json.dumps(good, indent=1)
    return {
        "b_deep.json": DEEP_JSON,
        "b_dup_key.json": text.replace('"points": [', '"version": 1,\n "points": [', 1),
        "b_points.json": _variant(good, _set("points", 5)),
        "b_time.json": _variant(good, _set("points.0.time_s", "fast")),
        "b_quoted.json": _variant(good, _set("points.1.samples_s.2", "1e-4")),
    }


def _bad_yaml() -> dict[str, str]:
    sheet_line = "bandwidth_gb_per_s: 3350"
    assert sheet_line in SHEET and "layers: 12" in LLM
    return {
        "s_laughs.yaml": LAUGHS,
        "s_alias_loop.yaml": "name: s\nworkloads: &w [*w]\n",
        "s_dup_key.yaml": "name: s\nworkloads:\n  - {kind: gemm, m: 8, m: 1000000000, n: 8, k: 8}\n",
        "s_dup_top.yaml": SUITE + "name: t\n",
        "s_bool.yaml": SUITE.replace("m: 8", "m: true"),
        "s_text.yaml": SUITE.replace("m: 8", 'm: "8"'),
        "s_float.yaml": SUITE.replace("m: 8", "m: 8.5"),
        "s_deep.yaml": DEEP_BLOCK,
        "sheet_laughs.yaml": SHEET + "\n" + LAUGHS.replace("name: s\nworkloads: *g\n", "notes: *g\n"),
        "sheet_dup_key.yaml": SHEET + "\nlaunch_floor_us: 99\n",
        "sheet_text.yaml": SHEET.replace(sheet_line, 'bandwidth_gb_per_s: "3350"'),
        "sheet_bool.yaml": SHEET.replace(sheet_line, "bandwidth_gb_per_s: true"),
        "sheet_deep.yaml": SHEET + "\nnotes: " + "[" * 150 + "]" * 150 + "\n",
        "llm_dup_key.yaml": LLM + "layers: 1000000000\n",
        "llm_bool.yaml": LLM.replace("layers: 12", "layers: true"),
        "llm_text.yaml": LLM.replace("layers: 12", 'layers: "12"'),
        "llm_laughs.yaml": LLM + LAUGHS.replace("name: s\nworkloads: *g\n", "vocab: *g\n"),
    }


def _bad_other() -> dict[str, str]:
    return {
        "hf_deep.json": DEEP_JSON,
        "hf_dup_key.json": json.dumps(HF).replace('{"', '{"num_hidden_layers": 2, "', 1),
        "hf_bool.json": json.dumps({**HF, "num_hidden_layers": True}),
        "hf_text.json": json.dumps({**HF, "hidden_size": "4096"}),
        "t_deep.json": DEEP_JSON,
        "t_dup_key.json": '{"traceEvents": [], "traceEvents": [{"ph": "X"}]}',
        "cal_deep.json": DEEP_JSON,
        "cal_dup_key.json": '{"schema": "roofline.calibration", "schema": "x"}',
    }


#: sparse files over the limits (stat says how large; nothing is read)
HUGE = {"huge.json": MAX_JSON_BYTES + 1, "t_huge.json": MAX_JSON_BYTES + 1, "s_huge.yaml": MAX_YAML_BYTES + 1}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from roofline.cli import main
    from roofline.report.baseline import load

    d = tmp_path_factory.mktemp("bad-files")
    good = _report()
    (d / "r.json").write_text(json.dumps(good), encoding="utf-8")
    with pytest.raises(SystemExit) as done:
        main(["-q", "baseline", "save", str(d / "r.json"), "-o", str(d / "b0.json")])
    assert done.value.code in (0, None)
    load(d / "b0.json")
    base = json.loads((d / "b0.json").read_text(encoding="utf-8"))
    for files in (_bad_reports(good), _bad_baselines(base), _bad_yaml(), _bad_other()):
        for name, text in files.items():
            (d / name).write_text(text, encoding="utf-8")
    for name, size in HUGE.items():
        with (d / name).open("wb") as handle:
            handle.truncate(size)
    return d


REPORT_READERS = {
    "report": ["report", "{f}", "--format", "markdown", "-o", "{d}/out.md"],
    "plot": ["plot", "{f}", "-o", "{d}/out.svg"],
    "predict": ["predict", "{f}", "--device", "h200-sxm"],
    "baseline-save": ["baseline", "save", "{f}", "-o", "{d}/out-baseline.json"],
    "gate": ["gate", "{f}", "--baseline", "{d}/b0.json", "--junit", "{d}/out-junit.xml"],
}
REPORT_KINDS = {
    "deep.json": ("nested thousands of levels deep", "re-create it"),
    "deep_field.json": ("nested thousands of levels deep", "re-create it"),
    "dup_key.json": ("key 'source' given twice", "keep one"),
    "machine.json": ("machine.kind", "'cuda' or 'cpu'", "re-create it"),
    "machine_text.json": ("machine", "re-create it"),
    "fast.json": ("rows[0].median_s: not a number (got 'fast')", "a time in seconds"),
    "negative.json": ("rows[1].median_s: negative", "a time is at least 0"),
    "bool_time.json": ("rows[0].roof_time_s: not a number (got True)",),
    "negative_sample.json": ("rows[0].samples_s: a negative sample", "at least 0"),
    "text_sample.json": ("rows[1].samples_s: a sample that is not a number (got '1e-4')",),
    "samples_not_list.json": ("rows[0].samples_s: not a list of times",),
    "empty_row.json": ("rows[0]: an empty row", "re-create the report"),
    "list_row.json": ("rows[0]: not an object", "re-create the report"),
    "rows_number.json": ("rows: Input should be a valid list", "re-create it"),
    "huge.json": (f"{MAX_JSON_BYTES + 1:,} bytes, over the 4 GiB", "give the right file"),
}
GATE_KINDS = {
    "no_samples.json": ("rows[0] has no timing samples", "run it again"),
    "stripped.json": ("rows[0] has no timing samples", "run it again"),
    "one_label.json": ("rows 0 and 1 are one point", "give the workloads different labels"),
}
SUITE_READERS = {
    "analyze-suite": ["analyze", "suite", "{f}", "--device", "h100-sxm"],
    "bench-suite": ["bench", "{f}", "--device", "cpu", "-o", "{d}/out-bench.json"],
    "gate-suite": ["gate", "{f}", "--baseline", "{d}/b0.json", "--device", "cpu"],
}
SUITE_KINDS = {
    "s_laughs.yaml": ("line 7", "expand to more than 1,000,000 values", "use fewer aliases"),
    "s_alias_loop.yaml": ("an alias inside its own anchor", "remove the loop"),
    "s_dup_key.yaml": ("line 3", "key 'm' given twice", "keep one"),
    "s_dup_top.yaml": ("line 4", "key 'name' given twice (first on line 1)", "keep one"),
    "s_bool.yaml": ("workloads[0]: gemm: m:", "true/false is not a number"),
    "s_text.yaml": ("workloads[0]: gemm: m:", "write the number without quotes"),
    "s_float.yaml": ("workloads[0]: gemm: m:", "write a whole number"),
    "s_deep.yaml": ("nested more than 100 levels deep",),
    "s_huge.yaml": (f"{MAX_YAML_BYTES + 1:,} bytes, over the 16 MiB", "give the right file"),
}
SHEET_READERS = {
    "specs-validate": ["specs", "validate", "{f}"],
    "analyze-spec": ["analyze", "gemm", "-m", "8", "-n", "8", "-k", "8", "--spec", "{f}", "-d", "h100-sxm"],
}
SHEET_KINDS = {
    "sheet_laughs.yaml": ("expand to more than 1,000,000 values",),
    "sheet_dup_key.yaml": ("key 'launch_floor_us' given twice", "keep one"),
    "sheet_text.yaml": ("memory.dram.bandwidth_gb_per_s", "write the number without quotes"),
    "sheet_bool.yaml": ("memory.dram.bandwidth_gb_per_s",),
    "sheet_deep.yaml": ("nested more than 100 levels deep",),
}

CASES: list[tuple[str, list[str], tuple[str, ...]]] = [
    *(
        (f"{command}-{kind}", [a.replace("{f}", "{d}/" + kind) for a in argv], needles)
        for command, argv in REPORT_READERS.items()
        for kind, needles in REPORT_KINDS.items()
    ),
    *(
        (f"{command}-{kind}", [a.replace("{f}", "{d}/" + kind) for a in REPORT_READERS[command]], needles)
        for command in ("baseline-save", "gate")
        for kind, needles in GATE_KINDS.items()
    ),
    *(
        (f"{command}-{kind}", [a.replace("{f}", "{d}/" + kind) for a in argv], needles)
        for command, argv in {
            "gate-baseline": ["gate", "{d}/r.json", "--baseline", "{f}"],
            "baseline-show": ["baseline", "show", "{f}"],
        }.items()
        for kind, needles in {
            "b_deep.json": ("corrupt baseline (nested thousands of levels deep)", "save it again"),
            "b_dup_key.json": ("key 'version' given twice", "keep one"),
            "b_points.json": ("corrupt baseline: points: Input should be a valid list", "save it again"),
            "b_time.json": ("points.0.time_s", "give a number", "save it again"),
            "b_quoted.json": ("points.1.samples_s.2", "write the number without quotes"),
        }.items()
    ),
    *(
        (f"{command}-{kind}", [a.replace("{f}", "{d}/" + kind) for a in argv], needles)
        for command, argv in SUITE_READERS.items()
        for kind, needles in SUITE_KINDS.items()
    ),
    *(
        (f"{command}-{kind}", [a.replace("{f}", "{d}/" + kind) for a in argv], needles)
        for command, argv in SHEET_READERS.items()
        for kind, needles in SHEET_KINDS.items()
    ),
    *(
        (f"analyze-decode-model-{kind}", ["analyze", "decode", "--model", "{d}/" + kind, "-d", "h100-sxm"], needles)
        for kind, needles in {
            "llm_dup_key.yaml": ("key 'layers' given twice", "keep one"),
            "llm_bool.yaml": ("layers:", "true/false is not a number"),
            "llm_text.yaml": ("layers:", "write the number without quotes"),
            "llm_laughs.yaml": ("expand to more than 1,000,000 values",),
        }.items()
    ),
    *(
        (f"analyze-decode-config-{kind}", ["analyze", "decode", "--config", "{d}/" + kind, "-d", "h100-sxm"], needles)
        for kind, needles in {
            "hf_deep.json": ("nested thousands of levels deep", "give the model's config.json"),
            "hf_dup_key.json": ("key 'num_hidden_layers' given twice", "keep one"),
            "hf_bool.json": ("num_hidden_layers is True", "expected a whole number"),
            "hf_text.json": ("hidden_size is '4096'", "expected a whole number"),
        }.items()
    ),
    *(
        (f"diagnose-trace-{kind}", ["diagnose", "--trace", "{d}/" + kind], needles)
        for kind, needles in {
            "t_deep.json": ("nested thousands of levels deep", "export_chrome_trace wrote"),
            "t_dup_key.json": ("key 'traceEvents' given twice", "keep one"),
            "t_huge.json": ("over the 4 GiB a trace file may have", "give the right file"),
        }.items()
    ),
    *(
        (f"predict-calibration-{kind}", ["predict", "{d}/r.json", "-d", "h200-sxm", "--calibration", "{d}/" + kind], n)
        for kind, n in {
            "cal_deep.json": ("nested thousands of levels deep", "run `roofline calibrate` again"),
            "cal_dup_key.json": ("key 'schema' given twice", "keep one"),
        }.items()
    ),
]


def test_the_corpus_covers_every_reader_and_kind():
    ids = [case[0] for case in CASES]
    assert len(ids) == len(set(ids)) == 5 * 15 + 2 * 3 + 2 * 5 + 3 * 9 + 2 * 5 + 4 + 4 + 3 + 2 == 141


def _state(d: Path) -> dict[str, tuple[int, int]]:
    """Every file in the corpus directory with its size and modification time (the sparse files are not read)."""
    return {entry.name: (entry.stat().st_size, entry.stat().st_mtime_ns) for entry in os.scandir(d)}


@pytest.mark.parametrize(("argv", "needles"), [pytest.param(c[1], c[2], id=c[0]) for c in CASES])
def test_a_bad_file_is_one_line_and_exit_2(cli, corpus, argv, needles):
    d = str(corpus)
    args = [a.replace("{d}", d) for a in argv]
    before = _state(corpus)
    result = cli(*args)
    assert result.code == 2, result.err
    assert "Traceback" not in result.err + result.out, result.err
    errors = [line for line in result.err.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, result.err
    line = errors[0]
    assert line.startswith("Error: "), line
    good = ("r.json", "b0.json")
    (named,) = (Path(a).name for a in args if a.startswith(d) and Path(a).name not in good and "/out" not in a)
    assert named in line, line
    for needle in needles:
        assert needle in line, line
    assert _state(corpus) == before  # nothing written, left behind (temporary files) or changed


PYPROJECT = {
    "deep": "[tool.roofline.gate]\nfail-on = " + "[" * 100_000 + "]" * 100_000 + "\n",
    "dup-key": '[tool.roofline.gate]\nbaseline = "a.json"\nbaseline = "b.json"\n',
    "bool-as-text": '[tool.roofline.gate]\nstats = "no"\n',
    "number-as-text": '[tool.roofline.gate]\nconfidence = "0.9"\n',
    "list-of-numbers": "[tool.roofline.gate]\nfail-on = [5]\n",
}


@pytest.mark.parametrize("kind", list(PYPROJECT))
def test_a_bad_gate_table_in_pyproject_is_one_line_and_exit_2(cli, corpus, tmp_path, monkeypatch, kind):
    """`roofline gate` reads [tool.roofline.gate] from the nearest pyproject.toml: strictly, too."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT[kind], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = cli("gate", str(corpus / "r.json"), "--baseline", str(corpus / "b0.json"))
    assert result.code == 2, result.err
    assert "Traceback" not in result.err
    line = result.error_line()
    assert f"{tmp_path / 'pyproject.toml'}: " in line, line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pyproject.toml"]


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero here")
@pytest.mark.parametrize(
    "argv",
    [
        ["report", "/dev/zero", "--format", "markdown"],
        ["gate", "{d}/r.json", "--baseline", "/dev/zero"],
        ["specs", "validate", "/dev/zero"],
        ["analyze", "suite", "/dev/zero", "-d", "h100-sxm"],
        ["diagnose", "--trace", "/dev/zero"],
    ],
    ids=["report", "gate-baseline", "specs-validate", "analyze-suite", "diagnose-trace"],
)
def test_a_device_is_refused_before_reading(cli, corpus, argv):
    """/dev/zero has no size and no end: read, it would fill the memory."""
    result = cli(*[a.replace("{d}", str(corpus)) for a in argv])
    assert result.code == 2, result.err
    line = result.error_line()
    assert "/dev/zero: a device or socket" in line and "give the file itself" in line, line


def test_a_gzip_bomb_stops_at_the_limit(cli, tmp_path, monkeypatch):
    import gzip

    monkeypatch.setattr("roofline.diagnose.trace.MAX_JSON_BYTES", 2**20)
    bomb = tmp_path / "trace.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (2**20 + 2**16)))
    assert bomb.stat().st_size < 2**16
    result = cli("diagnose", "--trace", str(bomb))
    assert result.code == 2, result.err
    assert "over 1,048,576 bytes once unzipped: give the right file" in result.error_line()
