"""Notebooks (issue 29 item 3): a Diagnosis and a Report show as HTML and Markdown in a Jupyter cell, through the
one document the renderers read: findings, memory, the chart (when matplotlib can be imported), the top points;
user text escaped; bounded for a large report."""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")

from diagnose_doubles import timed_by  # noqa: E402
from test_api_diagnose import fake_cpu, fake_time  # noqa: E402, F401

import roofline  # noqa: E402
from roofline.render import notebook  # noqa: E402


class Scripted(torch.nn.Module):
    """A model whose submodule is named ``<script>``: its path reaches the findings and the tables."""

    def __init__(self) -> None:
        super().__init__()
        self.add_module("<script>", torch.nn.Linear(16, 16))

    def forward(self, x):
        return torch.relu(getattr(self, "<script>")(x))


def _diagnosis(name: str = "<b>model</b>"):
    return roofline.diagnose(Scripted(), (torch.randn(4, 16),), warmup=0, iters=1, name=name,
                             boundaries=timed_by(fake_time))  # fmt: skip


def test_a_diagnosis_shows_its_findings_memory_chart_and_table_as_html(fake_cpu):  # noqa: F811
    result = _diagnosis()
    assert result.findings, "the test needs a finding to show"
    html = result._repr_html_()
    assert html.startswith('<div class="roofline-report">') and "<html" not in html
    for section in ("Summary", "Parameters and memory", "Findings", "Points by time (3 of 3)"):
        assert f"<h2>{section}</h2>" in html
    first = result.findings[0]
    assert first.evidence.replace("<script>", "&lt;script&gt;") in html.replace("&#x27;", "'")
    assert '<tr><td>&lt;script&gt;</td><td>Linear</td><td class="num">272</td>' in html  # 16x16 + 16
    assert "<dt>parameters</dt><dd>272 (1.088 kB)</dd>" in html
    if importlib.util.find_spec("matplotlib") is not None:
        assert '<img alt="the roofline chart" style="max-width: 100%" src="data:image/png;base64,' in html


def test_user_text_is_escaped(fake_cpu):  # noqa: F811
    result = _diagnosis()
    html, markdown = result._repr_html_(), result._repr_markdown_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<b>model</b>" not in html and "<h1>roofline diagnose report: &lt;b&gt;model&lt;/b&gt;</h1>" in html
    assert "<script>" not in markdown and "### Findings" in markdown and "### Parameters and memory" in markdown


def test_no_matplotlib_no_chart_and_no_error(fake_cpu, monkeypatch):  # noqa: F811
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    html = _diagnosis()._repr_html_()
    assert "<img" not in html and "<h2>Roofline</h2>" not in html and "<h2>Findings</h2>" in html


def test_a_report_shows_the_same_page_and_an_unfinished_run_shows_nothing(fake_cpu, tmp_path):  # noqa: F811
    result = _diagnosis("tiny")
    report = roofline.load_report(result.save(tmp_path / "r.json"))
    assert report._repr_markdown_() == notebook.report_markdown(report)
    html = report._repr_html_()
    assert "<h2>Findings</h2>" in html and "Parameters and memory" in html
    assert roofline.profile(steps=1)._repr_html_() is None


def test_a_large_report_is_bounded_and_says_what_is_left_out(fake_cpu):  # noqa: F811
    report = _diagnosis("big").report()
    rows = [dict(row, index=i, input_shapes=[[i + 1]]) for i in range(2000) for row in report.rows[:1]]
    big = report.model_copy(update={"rows": rows})
    html = notebook.report_html(big, chart=False)
    markdown = notebook.report_markdown(big)
    assert html.count("<tr>") <= notebook.ROWS + 1 + 10  # the points shown, their header, the modules table
    assert f"Points by time ({notebook.ROWS} of 2000)" in html and f"{2000 - notebook.ROWS} more in the report" in html
    assert f"{2000 - notebook.ROWS} more in the report" in markdown
    assert len(html) < 40_000 and len(markdown) < 20_000
