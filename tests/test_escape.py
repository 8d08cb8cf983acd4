"""Hostile names (a module called `<img src=x onerror=...>`, a label with control characters) reach Markdown,
HTML and JUnit as text, never as markup: one Markdown escaper and one XML escaper (roofline.render.escape)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from roofline.render.escape import markdown_code, markdown_text, xml_escape, xml_text
from roofline.report import baseline as baselines
from roofline.report.schema import write_report
from tests.gate_synthetic import bench_report, bench_row, diagnose_report, diagnose_row, spread

IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert('pr')</script>"
CONTROL = "ctl\x00\x01\x07\x0b\x0c\x1b[31m\x1f\ud800\ufffe"


def _hostile_diagnose(tmp_path: Path, control: str = CONTROL) -> Path:
    rows = [
        diagnose_row("aten::mm", IMG, [[64, 512], [512, 2048]], spread(2.0e-5, 20, 0.02)),
        diagnose_row(SCRIPT, "layers.0 | `pipe` & &amp; \\", [[64, 2048]], spread(4.0e-6, 20, 0.03)),
        diagnose_row("aten::gelu", control, [[64, 2048]], spread(4.0e-6, 20, 0.03)),
    ]
    report = diagnose_report(rows, model="<b>model</b>.py").model_copy(
        update={"command": "roofline diagnose `x` <i>model</i>.py", "tool_version": "<u>0.1</u>"}
    )
    path = tmp_path / "hostile.json"
    write_report(report, path)
    return path


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)


def _html_tags(text: str) -> set[str]:
    parser = _Tags()
    parser.feed(text)
    return parser.tags


# ------------------------------------------------------------------------------------------ the escapers


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("gemm m=4096 n=4096 k=4096 bf16", "gemm m=4096 n=4096 k=4096 bf16"),
        ("mm [16x128, 128x128] x2 @ w_hh", "mm [16x128, 128x128] x2 @ w_hh"),
        ("layers.0.mlp_up -> act", "layers.0.mlp_up -> act"),
        (IMG, "&lt;img src=x onerror=alert(1)>"),
        ("</td><script>", "&lt;/td>&lt;script>"),
        ("a | b", "a \\| b"),
        ("a\\|b", "a\\\\\\|b"),
        ("`code`", "\\`code\\`"),
        ("&lt; &amp;", "&amp;lt; &amp;amp;"),
        ("<http://x.example>", "&lt;http://x.example>"),
        ("two\nlines\r\nthree\rfour", "two lines three four"),
    ],
)
def test_markdown_text(text, escaped):
    assert markdown_text(text) == escaped


def test_markdown_code_fences_longer_than_the_text_holds():
    assert markdown_code("roofline diagnose m.py") == "`roofline diagnose m.py`"
    assert markdown_code("a `b` c") == "``a `b` c``"
    assert markdown_code("``x") == "``` ``x ```"
    assert markdown_code("a\nb") == "`a b`"


def test_xml_text_drops_what_xml_cannot_hold_and_keeps_the_rest():
    assert xml_text(CONTROL) == "ctl"  # the whole CSI sequence goes, not only its ESC
    assert xml_text("tab\tnew\nline\r é ✓ 𝔛") == "tab\tnew\nline\r é ✓ 𝔛"
    assert xml_escape(f'{SCRIPT}\x01"&') == "&lt;script&gt;alert(&#x27;pr&#x27;)&lt;/script&gt;&quot;&amp;"


# ------------------------------------------------------------------------------------------ renderers


def _outside_code_spans(text: str) -> str:
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)


def test_report_markdown_lets_no_html_through(cli, tmp_path):
    result = cli("report", str(_hostile_diagnose(tmp_path)), "--format", "markdown")
    assert result.code == 0, result.err
    text = result.out
    # the command is one code span (inside it nothing is markup); everywhere else no '<' is left
    assert "``roofline diagnose `x` <i>model</i>.py`` · 2026-01-02T03:04:05+00:00 · roofline &lt;u>0.1&lt;/u>" in text
    assert "<" not in _outside_code_spans(text)
    header, *rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| mm [64x512, 512x2048] @ &lt;img src=x onerror=alert(1)> | memory |")
    assert rows[1].startswith(
        "| &lt;script>alert('pr')&lt;/script> [64x2048] @ layers.0 \\| \\`pipe\\` &amp; &amp;amp; \\\\ | memory |"
    )
    assert rows[2].startswith("| gelu [64x2048] @ ctl | memory |")  # no terminal escape, no surrogate
    for row in rows:  # a pipe or backtick in a name adds no cell
        assert len(re.findall(r"(?<!\\)\|", row)) == header.count("|")


@pytest.mark.filterwarnings("ignore:Glyph")  # the control characters have no glyph
def test_report_html_lets_no_html_through(cli, tmp_path):
    pytest.importorskip("matplotlib")
    page = tmp_path / "r.html"
    # NB: no lone surrogate here: matplotlib cannot draw one in the chart's labels
    result = cli("report", str(_hostile_diagnose(tmp_path, control=CONTROL.replace("\ud800", ""))), "-o", str(page))
    assert result.code == 0, result.err
    text = page.read_text()
    assert "img" not in _html_tags(text) and "script" not in _html_tags(text) and "b" not in _html_tags(text)
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f]", text)


def test_gate_markdown_and_junit_with_hostile_names(cli, tmp_path):
    labels = [IMG, SCRIPT, f"m=1 | {CONTROL}"]
    before = [bench_row(label, spread(1.0e-4, 20, 0.01)) for label in labels]
    after = [bench_row(label, spread(1.0e-4, 20, 0.01, 0.3 if i == 0 else 0.0)) for i, label in enumerate(labels)]
    after.append(bench_row("<new>", spread(1.0e-4, 20, 0.01)))
    baseline = baselines.save(baselines.from_report(bench_report(before, suite="<s>"), commit=""), tmp_path / "b.json")
    report = tmp_path / "r.json"
    write_report(bench_report(after, suite="<s>", machine={"kind": "cuda", "name": "<gpu>\x01"}), report)
    junit = tmp_path / "gate.xml"
    result = cli("gate", str(report), "-b", str(baseline), "--format", "markdown", "--junit", str(junit))
    assert result.code == 1, result.err
    text = result.out
    assert "<" not in text, [line for line in text.splitlines() if "<" in line]
    assert "\x01" not in text and "\x1b" not in text
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| point |"))
    rows = [line for line in lines if line.startswith("| gemm")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| gemm &lt;img src=x onerror=alert(1)> bf16",
        "| gemm &lt;script>alert('pr')&lt;/script> bf16",
        "| gemm m=1 \\| ctl bf16",  # an escaped pipe, no terminal escape
    ]
    for row in rows:
        assert len(re.findall(r"(?<!\\)\|", row)) == header.count("|")
    assert "- gemm &lt;img src=x onerror=alert(1)> bf16: efficiency" in text
    assert "- gemm &lt;new> bf16" in text
    assert "baseline of bench suite &lt;s>" in text and "machine: &lt;gpu>" in text

    root = ET.fromstring(junit.read_text())  # well-formed: no control characters
    names = [case.get("name") for case in root.iter("testcase")]
    assert "gemm <img src=x onerror=alert(1)> bf16" in names
    assert "gemm m=1 | ctl bf16" in names
    machine = next(p.get("value") for p in root.iter("property") if p.get("name") == "machine")
    assert machine.startswith("<gpu>")
