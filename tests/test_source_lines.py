"""Source lines (issue 29, item 6): each op's file and line in the user's code, from the counting pass to the
report, the findings and every renderer. A tiny model file is written to tmp_path with its ops on known lines."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from diagnose_doubles import timed_by  # noqa: E402
from test_api_diagnose import fake_time  # noqa: E402
from test_diagnose_cli import FAKE_CPU  # noqa: E402

import roofline  # noqa: E402
from roofline.diagnose.count import count_ops  # noqa: E402
from roofline.diagnose.source import SourceFinder  # noqa: E402
from roofline.render.diagnose import DiagnoseRenderer  # noqa: E402
from roofline.render.report_html import HtmlReportRenderer  # noqa: E402
from roofline.render.report_markdown import MarkdownReportRenderer  # noqa: E402
from roofline.report.points import report_document  # noqa: E402
from roofline.report.rows import source_text, sources_text  # noqa: E402

MODEL = """import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.lin(x)
        h = torch.relu(h)
        return h * 2.0
"""
LIN, RELU, MUL = 10, 11, 12  # the lines of MODEL's forward that call ops


@pytest.fixture
def fake_cpu(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))


def load(tmp_path: Path, folder: str = "m") -> tuple[object, Path]:
    path = tmp_path / folder / "tiny_model.py"
    path.parent.mkdir(parents=True)
    path.write_text(MODEL, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"tiny_model_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Tiny(), path


def test_forward_ops_carry_the_line_that_called_them(tmp_path):
    model, path = load(tmp_path)
    records = count_ops(model, (torch.randn(2, 8),))
    assert [(r.op, r.source) for r in records] == [
        ("aten::t", f"{path}:{LIN}"),
        ("aten::addmm", f"{path}:{LIN}"),
        ("aten::relu", f"{path}:{RELU}"),
        ("aten::mul", f"{path}:{MUL}"),
    ]


def test_backward_ops_carry_their_forward_ops_line_and_roofline_s_own_ops_none(tmp_path):
    model, path = load(tmp_path)
    records = count_ops(model, (torch.randn(2, 8),), mode="training")
    by_op = {}
    for r in records:
        by_op.setdefault((r.op, r.phase), set()).add(r.source)
    assert by_op[("aten::addmm", "forward")] == {f"{path}:{LIN}"}
    assert by_op[("aten::threshold_backward", "backward")] == {f"{path}:{RELU}"}  # relu's gradient
    assert by_op[("aten::mm", "backward")] == {f"{path}:{LIN}"}  # the Linear's gradients
    assert f"{path}:{MUL}" in by_op[("aten::mul", "backward")]
    assert by_op[("aten::sum", "forward")] == {""}  # the loss run_once sums: roofline's own, no user line
    assert by_op[("aten::ones_like", "backward")] == {""}


def test_the_finder_looks_through_torch_and_the_library_and_stops_at_roofline(tmp_path):
    finder = SourceFinder()
    assert finder.classify(torch.nn.functional.__file__) == 0  # torch: looked through
    assert finder.classify(os.__file__) == 0  # the standard library
    assert (
        finder.classify(str(Path(roofline.__file__).parent / "api.py")) == 1
    )  # roofline's own code: no user line above it
    assert finder.classify(str(tmp_path / "model.py")) == 2
    assert finder.find(sys._getframe()) == f"{__file__}:{sys._getframe().f_lineno}"


def test_source_text_is_relative_under_the_working_directory(tmp_path, monkeypatch):
    inside = f"{tmp_path / 'pkg' / 'model.py'}:42"
    assert source_text(inside, cwd=str(tmp_path)) == f"{os.path.join('pkg', 'model.py')}:42"
    assert source_text(inside, cwd=str(tmp_path / "elsewhere")) == inside
    assert source_text("") == "" and source_text("model.py:3") == "model.py:3"
    lines = [f"{tmp_path}/a.py:{n}" for n in (30, 31, 30, 32, 33, 34)] + [f"{tmp_path}/b.py:1", "/x/c.py:2"]
    monkeypatch.chdir(tmp_path)
    assert sources_text(lines) == "a.py:30,31,32,33; b.py:1 and 2 more"
    assert sources_text(lines[:2]) == "a.py:30,31"
    assert sources_text(["", ""]) == ""


def test_a_diagnosis_shows_the_lines_in_findings_report_and_every_renderer(fake_cpu, tmp_path, monkeypatch):
    model, path = load(tmp_path, folder="d<i>&")
    monkeypatch.chdir(tmp_path)
    shown = os.path.join("d<i>&", "tiny_model.py")
    result = roofline.diagnose(model, (torch.randn(2, 8),), warmup=1, iters=2, boundaries=timed_by(fake_time))
    report = result.report()
    rows = {row["op"]: row["source"] for row in report.rows}
    assert rows["aten::addmm"] == f"{path}:{LIN}" and rows["aten::relu"] == f"{path}:{RELU}"
    assert rows["aten::mul"] == f"{path}:{MUL}"
    # a finding names the lines of the ops it concerns
    assert result.findings
    for finding in result.findings:
        lines = {result.result.placed.points[i].source for i in finding.ops if i < len(result.result.placed.points)}
        named = [int(s.rsplit(":", 1)[1]) for s in lines if s]
        assert all(str(n) in finding.where for n in named) and f"{shown}:" in finding.where
    # the aggregates by call site keep them
    sites = {a.op: a.sources for a in result.result.placed.aggregates.ops}
    assert sites["aten::addmm"] == [f"{path}:{LIN}"]
    # the report round-trips
    saved = roofline.load_report(result.save(tmp_path / "r.json"))
    assert [row["source"] for row in saved.rows] == [row["source"] for row in report.rows]
    assert saved.model_extra["aggregates"]["ops"][0]["sources"]
    # console, markdown and HTML show the relative path; HTML escapes the user's text
    console = DiagnoseRenderer(color=False).render(saved)
    assert f"(model) at {shown}:{RELU}" in console  # the top ops' table
    assert f"lin at {shown}:{LIN}" in console
    doc = report_document(saved, "r", per_call=True)
    markdown = MarkdownReportRenderer(rows=50).render(doc)
    assert f"tiny_model.py:{RELU}" in markdown
    page = HtmlReportRenderer(rows=50).render(doc)
    assert f"d&lt;i&gt;&amp;{os.sep}tiny_model.py:{RELU}" in page and "d<i>&" not in page
