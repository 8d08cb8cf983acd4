"""What a command refuses to write over (roofline.report.outputs, roofline.fileio.writable_place): checked before
anything is measured or any user code runs, one line `Error: -o PATH: ...`, exit 2, and --force."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from diagnose_devices import CPU

from roofline.errors import UsageError
from roofline.fileio import writable_place
from roofline.report import baseline as baselines
from roofline.report import outputs
from roofline.report.schema import write_report
from tests.gate_synthetic import bench_report, bench_row, spread

ANALYZE = ("analyze", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "h100-sxm")


@pytest.fixture(autouse=True)
def _here(tmp_path, monkeypatch):
    """An empty working directory (no pyproject.toml of ours for gate)."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def report(tmp_path) -> Path:
    path = tmp_path / "r.json"
    write_report(bench_report([bench_row("m=1", spread(1e-4, 10, 0.01))], suite="demo"), path)
    return path


@pytest.fixture
def baseline(tmp_path, report) -> Path:
    from roofline.report.schema import read_report

    return baselines.save(baselines.from_report(read_report(report)), tmp_path / "b.json")


# ------------------------------------------------------------------------------------------ the library


def test_a_place_with_no_file_name_or_a_directory_is_refused(tmp_path):
    with pytest.raises(UsageError, match=r"^-o '': no file name"):
        writable_place(Path(""))
    with pytest.raises(UsageError, match=r"^-o .*: is a directory"):
        writable_place(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match=r"^--plot .*file/c.png: .*file is not a directory"):
        writable_place(tmp_path / "file" / "c.png", "--plot")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe")
        with pytest.raises(UsageError, match="is not a regular file"):
            writable_place(tmp_path / "pipe")


def test_a_place_is_made_absolute_and_missing_directories_are_allowed(tmp_path):
    where = writable_place(Path("sub/dir/r.json"))
    assert where == tmp_path / "sub" / "dir" / "r.json" and where.is_absolute()
    assert not (tmp_path / "sub").exists()  # created when written, not when checked
    assert [p.name for p in tmp_path.iterdir()] == []  # the probe file is gone


def _png(text: bytes = b"Software\x00Matplotlib version3.9") -> bytes:
    return b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + text


@pytest.mark.parametrize(
    ("kind", "name", "content", "ours"),
    [
        ("markdown", "r.md", "## roofline bench report: r\n", True),
        ("markdown", "summary.md", "### roofline gate: PASS (exit 0)\n", True),
        ("markdown", "notes.md", "# my notes\n", False),
        ("html", "r.html", '<!DOCTYPE html>\n<html lang="en">\n<title>roofline bench report: r</title>', True),
        ("html", "page.html", "<!DOCTYPE html>\n<title>My page</title>", False),
        ("csv", "p.csv", "report,source,point.label\nr,bench,x\n", True),
        ("csv", "data.csv", "a,b\n1,2\n", False),
        ("junit", "g.xml", '<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="roofline gate" tests="1">', True),
        ("junit", "pytest.xml", '<?xml version="1.0"?><testsuites name="pytest">', False),
        ("png", "c.png", _png(), True),
        ("png", "photo.png", _png(b"no metadata"), False),
        ("pdf", "c.pdf", b"%PDF-1.4\n... /Creator (Matplotlib v3.9)", True),
        ("pdf", "paper.pdf", b"%PDF-1.7\n... /Creator (LaTeX)", False),
        ("svg", "c.svg", '<?xml version="1.0"?>\n<svg><dc:title>Matplotlib v3.9</dc:title></svg>', True),
        ("svg", "logo.svg", "<svg><path/></svg>", False),
        ("parquet", "p.parquet", b"PAR1....point.intensity....PAR1", True),
        ("parquet", "other.parquet", b"PAR1....col....PAR1", False),
        ("report", "x.json", "{}", False),
        ("markdown", "empty.md", "", True),  # nothing to lose ($GITHUB_STEP_SUMMARY at the start of a step)
    ],
)
def test_is_ours_recognises_what_we_write(tmp_path, kind, name, content, ours):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    assert outputs.is_ours(path, kind) is ours


def test_a_report_replaces_only_a_report_and_a_baseline_only_a_baseline(report, baseline):
    assert outputs.is_ours(report, "report") and not outputs.is_ours(report, "baseline")
    assert outputs.is_ours(baseline, "baseline") and not outputs.is_ours(baseline, "report")
    shuffled = report.with_name("shuffled.json")  # "schema" not first: read from the whole document
    data = json.loads(report.read_text())
    shuffled.write_text(json.dumps({"rows": data.pop("rows"), **data}))
    assert outputs.is_ours(shuffled, "report")


def test_prepare_refuses_inputs_even_with_force_and_two_outputs_on_one_file(tmp_path, report):
    with pytest.raises(UsageError, match=r"^-o .*: is the report this command reads: .*even with --force"):
        outputs.prepare([("-o", report, "markdown")], inputs=[("the report", report)], force=True)
    link = tmp_path / "link.md"
    link.symlink_to(report)
    with pytest.raises(UsageError, match="is the report this command reads"):
        outputs.prepare([("-o", link, "markdown")], inputs=[("the report", report)], force=True)
    with pytest.raises(UsageError, match=r"^--markdown s.md: also given to --junit"):
        outputs.prepare([("--junit", Path("s.md"), "junit"), ("--markdown", Path("s.md"), "markdown")])


def test_prepare_refuses_a_foreign_file_unless_forced(tmp_path):
    (tmp_path / "mine.json").write_text('{"a": 1}')
    with pytest.raises(UsageError, match=r"exists and is not a roofline report: .*give --force"):
        outputs.prepare([("-o", Path("mine.json"), "report")])
    assert outputs.prepare([("-o", Path("mine.json"), "report"), ("--plot", None, "png")], force=True) == [
        tmp_path / "mine.json",
        None,
    ]


# ------------------------------------------------------------------------------------------ the commands


def _refused(result, needle: str) -> None:
    assert result.code == 2, result.out + result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err, result.err
    assert result.error_line().startswith("Error: ") and needle in result.error_line(), result.err


def test_analyze_refuses_an_empty_name_a_directory_and_a_foreign_json(cli, tmp_path):
    _refused(cli(*ANALYZE, "-o", ""), "-o '': no file name")
    (tmp_path / "out").mkdir()
    _refused(cli(*ANALYZE, "-o", "out"), "-o out: is a directory")
    (tmp_path / "settings.json").write_text('{"theme": "dark"}\n')
    _refused(cli(*ANALYZE, "-o", "settings.json"), "-o settings.json: exists and is not a roofline report")
    assert (tmp_path / "settings.json").read_text() == '{"theme": "dark"}\n'
    result = cli(*ANALYZE, "-o", "settings.json", "--force")
    assert result.code == 0, result.err
    assert json.loads((tmp_path / "settings.json").read_text())["schema"] == "roofline.report"
    assert cli(*ANALYZE, "-o", "settings.json").code == 0  # ours now: replaced without --force


def test_analyze_refuses_a_foreign_plot_file(cli, tmp_path):
    (tmp_path / "photo.png").write_bytes(_png(b"a camera"))
    _refused(cli(*ANALYZE, "--plot", "photo.png"), "--plot photo.png: exists and is not a PNG chart")
    assert (tmp_path / "photo.png").read_bytes() == _png(b"a camera")


def test_analyze_suite_refuses_to_write_over_its_suite(cli, tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nworkloads:\n  - {kind: gemm, m: 64, n: 64, k: 64, dtype: fp16}\n")
    _refused(cli("analyze", "suite", str(suite), "--device", "h100-sxm", "-o", str(suite)), "is the suite file")
    _refused(cli(*ANALYZE, "-o", str(suite), "--spec", str(suite)), "is a --spec sheet this command reads")


def test_report_refuses_to_write_over_the_report_it_reads(cli, report):
    _refused(cli("report", str(report), "-o", str(report), "--format", "markdown"), "is the report this command")
    _refused(cli("report", str(report), "-o", str(report), "--format", "csv", "--force"), "even with --force")
    assert json.loads(report.read_text())["schema"] == "roofline.report"


def test_report_replaces_its_own_markdown_but_not_the_users(cli, tmp_path, report):
    assert cli("report", str(report), "-o", "r.md").code == 0
    assert cli("report", str(report), "-o", "r.md").code == 0
    (tmp_path / "README.md").write_text("# my project\n")
    _refused(cli("report", str(report), "-o", "README.md"), "-o README.md: exists and is not roofline markdown")
    assert (tmp_path / "README.md").read_text() == "# my project\n"


def test_baseline_save_refuses_its_report_and_a_report_but_force_replaces_a_foreign_file(cli, tmp_path, report):
    _refused(cli("baseline", "save", str(report), "-o", str(report)), "is a report this command reads")
    other = tmp_path / "other.json"
    write_report(bench_report([bench_row("m=1", spread(1e-4, 10, 0.01))], suite="demo"), other)
    _refused(cli("baseline", "save", str(report), "-o", str(other)), "exists and is not a roofline baseline")
    assert cli("baseline", "save", str(report), "-o", str(other), "--force").code == 0
    assert baselines.load(other).identity.suite == "demo"


def test_gate_refuses_its_inputs_and_a_foreign_junit_unless_forced(cli, tmp_path, report, baseline):
    gate = ("gate", str(report), "-b", str(baseline))
    _refused(cli(*gate, "--junit", str(baseline)), "--junit")
    (tmp_path / "pytest.xml").write_text('<?xml version="1.0"?><testsuites name="pytest"/>')
    _refused(cli(*gate, "--junit", "pytest.xml"), "--junit pytest.xml: exists and is not roofline gate JUnit XML")
    result = cli(*gate, "--junit", "pytest.xml", "--force")
    assert result.code == 0, result.err
    assert '<testsuites name="roofline gate"' in (tmp_path / "pytest.xml").read_text()


@pytest.fixture
def fake_cpu(monkeypatch):
    """CPU roofs without a calibration, and a record of every bench item built (nothing built: nothing ran)."""
    from roofline.bench import runners

    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    built: list[str] = []
    real = runners.build

    def build(kind, params, **kwargs):
        built.append(kind)
        return real(kind, params, **kwargs)

    monkeypatch.setattr(runners, "build", build)
    return built


BENCH = ("bench", "gemm", "-m", "16", "-n", "16", "-k", "16", "--device", "cpu", "--max-time", "0.01")


def test_bench_refuses_to_replace_a_baseline_before_measuring(cli, baseline, fake_cpu):
    before = baseline.read_text()
    _refused(cli(*BENCH, "-o", str(baseline)), "exists and is not a roofline report")
    assert fake_cpu == [] and baseline.read_text() == before
    _refused(cli(*BENCH, "-o", str(baseline), "--force", "--spec", str(baseline)), "is a --spec sheet")


def test_bench_suite_refuses_to_write_over_its_suite(cli, tmp_path, fake_cpu):
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nworkloads:\n  - {kind: gemm, m: 16, n: 16, k: 16, dtype: fp32}\n")
    _refused(cli("bench", str(suite), "--device", "cpu", "-o", str(suite), "--force"), "is the suite file")
    assert fake_cpu == []


MODEL = """\
import pathlib
import torch

pathlib.Path({ran!r}).write_text("ran")


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(2, 8)]


def get_init_inputs():
    return []
"""


def test_diagnose_refuses_to_write_its_report_over_the_model_before_running_it(cli, tmp_path):
    model = tmp_path / "g.py"
    source = MODEL.format(ran=str(tmp_path / "ran"))
    model.write_text(source)
    _refused(cli("diagnose", str(model), "--device", "cpu", "-o", str(model)), "-o")
    _refused(cli("diagnose", "g.py", "--device", "cpu", "-o", "./g.py", "--force"), "is the model file this command")
    assert model.read_text() == source and not (tmp_path / "ran").exists()  # the model never ran


CHDIR_MODEL = """\
import os
import torch

os.chdir({elsewhere!r})  # a model that moves the working directory while it loads


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(2, 8)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_a_model_that_changes_directory_does_not_move_the_report(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "m.py").write_text(CHDIR_MODEL.format(elsewhere=str(elsewhere)))
    args = ("diagnose", "m.py", "--device", "cpu", "--warmup", "0", "--iters", "1")
    result = cli(*args, "-o", "here.json", "--plot", "here.svg")
    assert result.code == 0, result.err
    assert (tmp_path / "here.json").is_file() and (tmp_path / "here.svg").is_file()
    assert sorted(p.name for p in elsewhere.iterdir()) == []
