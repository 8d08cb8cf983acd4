"""diagnose --verify results in the report's pages and the chart: the HTML and markdown tables of bound vs measured
gain (the stored numbers, escaped), the chart's arrows (the spec, not pixels), and reports without them unchanged.

A synthetic diagnose report: hand-built op records and timings, findings and verified entries as the pipeline
stores them. No GPU, no timing, no torch.compile.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest
from diagnose_devices import GPU, rec

from roofline.diagnose.pipeline import DiagnoseResult
from roofline.diagnose.place import place
from roofline.diagnose.verify import VerifiedFinding
from roofline.findings.model import ModelFinding
from roofline.render.diagnose import DiagnoseRenderer
from roofline.render.report_html import HtmlReportRenderer
from roofline.render.report_markdown import MarkdownReportRenderer
from roofline.report.chart import NamedReport, build_chart
from roofline.report.points import report_document
from roofline.report.records import OpTiming, Timing
from roofline.report.schema import read_report, write_report
from roofline.report.verified import op_gains, op_times, report_verified

ROOT = Path(__file__).resolve().parents[1]
V1_DIAGNOSE = ROOT / "benchmarks" / "results" / "diagnose-gpt12-h100.json"
HOSTILE = "x | <script>alert(1)</script> `rm` & **bold**\n## heading"
N = 4096
ATTENTION = "replace the written-out attention with F.scaled_dot_product_attention"


def finding(rule: str, ops: list[int], where: str, time_s: float, best_s: float) -> ModelFinding:
    return ModelFinding(
        rule=rule,
        bottleneck="memory",
        properties=[],
        technique=f"the {rule} technique",
        evidence="synthetic",
        time_s=time_s,
        best_time_s=best_s,
        where=where,
        ops=ops,
        share=0.5,
    )


FINDINGS = [
    finding("elementwise-chain", [1, 2], "blocks.0: add x2", 126e-6, 126e-6 / 10.3),
    finding("naive-attention", [0], "blocks.0: mm", 250e-6, 250e-6 / 4.2),
    finding("conv-layout", [5], "blocks.1: gelu", 25e-6, 25e-6 / 3.0),
    finding("launch-bound", [3], "blocks.1: mul", 5e-6, 5e-6 / 2.5),
]
VERIFIED = [
    VerifiedFinding(
        rule="elementwise-chain",
        technique="compile",
        bound_gain=10.3,
        measured_gain=6.5,
        outputs_match=True,
        compile_s=1.5,
        eager_s=2e-3,
        fixed_s=2e-3 / 6.5,
    ),
    VerifiedFinding(
        rule="naive-attention",
        bound_gain=4.2,
        note=f"not verified: needs a code change ({ATTENTION})",
    ),
    VerifiedFinding(
        rule="conv-layout",
        technique="channels_last",
        bound_gain=3.0,
        measured_gain=1.25,
        outputs_match=True,
        eager_s=2e-3,
        fixed_s=1.6e-3,
    ),
    VerifiedFinding(
        rule="launch-bound",
        technique="compile",
        bound_gain=2.5,
        outputs_match=False,
        eager_s=2e-3,
        fixed_s=1e-3,
        note="outputs differ from eager (max abs difference 0.5; rtol 0.001, atol 0.0001)",
    ),
    VerifiedFinding(
        rule="all",
        technique="channels_last+compile",
        bound_gain=12.7,
        measured_gain=7.25,
        outputs_match=True,
        compile_s=2.25,
        eager_s=2e-3,
        fixed_s=2e-3 / 7.25,
    ),
]


def result(findings=FINDINGS, verified=VERIFIED) -> DiagnoseResult:
    records = [
        rec(0, "aten::mm", [(N, N), (N, N)], [(N, N)], 2 * N**3, 3 * N * N * 2, module="blocks.0"),
        rec(1, "aten::add", [(N, N), (N, N)], [(N, N)], N * N, 3 * N * N * 2, math="vector", module="blocks.0"),
        rec(2, "aten::add", [(N, N), (N, N)], [(N, N)], N * N, 3 * N * N * 2, math="vector", module="blocks.0"),
        rec(3, "aten::mul", [(1024,), (1024,)], [(1024,)], 1024, 3 * 1024 * 2, math="vector", module="blocks.1"),
        rec(4, "aten::view", [(N, N)], [(N * N,)], 0, 0, math="none", module="blocks.1"),
        rec(5, "aten::gelu", [(N, N)], [(N, N)], 8 * N * N, 2 * N * N * 2, math="vector", module="blocks.1"),
    ]
    ops = [
        OpTiming(0, 250e-6, 1, samples_s=(250e-6,)),
        OpTiming(1, 6e-6, 1, samples_s=(6e-6,)),
        OpTiming(2, 120e-6, 1, samples_s=(120e-6,)),
        OpTiming(3, 5e-6, 1, samples_s=(5e-6,)),
        OpTiming(5, 40e-6, 1, samples_s=(40e-6,)),
    ]
    timing = Timing(device="cuda", iterations=1, wall_s=450e-6, ops=ops, kernel_count=5, gpu_busy_s=421e-6)
    placed = place(records, timing, GPU)
    options = {"entry": None, "device": "cuda", "dtype": "bf16", "mode": "inference", "warmup": 1, "iters": 1}
    return DiagnoseResult(
        Path("model.py"),
        "model",
        {**options, "argv": []},
        GPU,
        records,
        timing,
        placed,
        list(findings),
        verified=None if verified is None else list(verified),
    )


@pytest.fixture(autouse=True)
def _no_machine(monkeypatch):
    monkeypatch.setattr("roofline.specs.detect.describe_machine", lambda *a, **k: {"kind": "cuda", "name": "GPU"})


def written(tmp_path: Path, diagnosed: DiagnoseResult, name: str = "verified") -> object:
    path = tmp_path / f"{name}.json"
    write_report(diagnosed.report("roofline diagnose model.py --verify"), path)
    return read_report(path)


def markdown(report: object) -> str:
    return MarkdownReportRenderer().render(report_document(report, "verified"))


def html(report: object) -> str:
    return HtmlReportRenderer().render(report_document(report, "verified"))


def markdown_table(text: str, heading: str) -> list[list[str]]:
    """The cells of the first table under ``heading`` (escaped pipes kept inside their cell)."""
    lines = text.split(heading, 1)[1].splitlines()
    end = next((i for i, line in enumerate(lines) if line.startswith("###")), len(lines))
    rows = [line for line in lines[:end] if line.startswith("|")]
    cells = []
    for line in rows[2:]:  # header and alignment rows
        parts, current, escaped = [], "", False
        for char in line.strip()[1:-1]:
            if char == "|" and not escaped:
                parts.append(current.strip())
                current = ""
            else:
                current += char
            escaped = char == "\\" and not escaped
        parts.append(current.strip())
        cells.append(parts)
    return cells


class Cells(HTMLParser):
    """The text of every cell of ``<table class="...">``, row by row."""

    def __init__(self, table_class: str) -> None:
        super().__init__()
        self.table_class = table_class
        self.inside = False
        self.rows: list[list[str]] = []
        self.cell: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.inside = dict(attrs).get("class") == self.table_class
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag == "td":
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif tag == "td" and self.cell is not None:
            self.rows[-1].append(self.cell)
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def html_table(text: str, table_class: str) -> list[list[str]]:
    parser = Cells(table_class)
    parser.feed(text)
    return [row for row in parser.rows if row]


EXPECTED = [
    ["elementwise-chain (blocks.0: add x2)", "compile", "at most 10.3x", "6.5x", "yes", "1.5 s", ""],
    [
        "naive-attention (blocks.0: mm)",
        "-",
        "at most 4.2x",
        "-",
        "-",
        "-",
        f"not verified: needs a code change ({ATTENTION})",
    ],
    ["conv-layout (blocks.1: gelu)", "channels_last", "at most 3x", "1.25x", "yes", "-", ""],
    [
        "launch-bound (blocks.1: mul)",
        "compile",
        "at most 2.5x",
        "-",
        "NO",
        "-",
        "outputs differ from eager (max abs difference 0.5; rtol 0.001, atol 0.0001)",
    ],
    ["all techniques together", "channels_last+compile", "at most 12.7x", "7.25x", "yes", "2.25 s", ""],
]


# ------------------------------------------------------------------------------------------------ stored


def test_the_report_keeps_the_bound_and_the_measured_gain(tmp_path):
    report = written(tmp_path, result())
    stored = json.loads((tmp_path / "verified.json").read_text())["verified"]
    assert [(v["rule"], v["bound_gain"], v["measured_gain"]) for v in stored] == [
        ("elementwise-chain", 10.3, 6.5),
        ("naive-attention", 4.2, None),
        ("conv-layout", 3.0, 1.25),
        ("launch-bound", 2.5, None),
        ("all", 12.7, 7.25),
    ]
    views = report_verified(report)
    assert [v.label for v in views] == [
        "elementwise-chain",
        "naive-attention",
        "conv-layout",
        "launch-bound",
        "all techniques together",
    ]
    assert views[0].ops == (1, 2) and views[0].where == "blocks.0: add x2"  # paired with its finding
    assert views[-1].ops == () and views[-1].where == ""
    gains = op_gains(views)  # only findings measured with matching outputs cover ops
    assert {i: v.measured_gain for i, v in gains.items()} == {1: 6.5, 2: 6.5, 5: 1.25}


def test_entries_that_do_not_line_up_with_the_findings_get_no_ops(tmp_path):
    report = written(tmp_path, result(findings=FINDINGS[:2]))
    views = report_verified(report)
    assert len(views) == 5 and all(v.ops == () and v.where == "" for v in views)
    assert op_gains(views) == {}


# ------------------------------------------------------------------------------------------------ pages


def test_markdown_shows_bound_and_measured_gain_side_by_side(tmp_path):
    text = markdown(written(tmp_path, result()))
    assert "### Verified" in text
    header = next(line for line in text.split("### Verified", 1)[1].splitlines() if line.startswith("|"))
    assert header == "| finding | technique | bound | measured gain | outputs match | compile | note |"
    assert markdown_table(text, "### Verified") == EXPECTED
    assert text.index("### Findings") < text.index("### Verified")


def test_html_shows_bound_and_measured_gain_side_by_side(tmp_path):
    text = html(written(tmp_path, result()))
    assert "<h2>Verified</h2>" in text
    assert html_table(text, "verified") == EXPECTED
    assert '<td class="flag">NO</td>' in text  # outputs that differ are flagged


def test_the_console_shows_the_same_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")
    text = DiagnoseRenderer(color=False).render(written(tmp_path, result()))
    lines = text.split("Verified", 1)[1].splitlines()
    chain = next(line for line in lines if line.strip().startswith("elementwise-chain"))
    together = next(line for line in lines if line.strip().startswith("all techniques together"))
    assert chain.split()[:5] == ["elementwise-chain", "compile", "10.3x", "6.5x", "yes"]
    assert together.split()[3:7] == ["channels_last+compile", "12.7x", "7.25x", "yes"]


def test_hostile_verified_text_is_escaped(tmp_path):
    hostile = [
        VerifiedFinding(rule="elementwise-chain", technique="compile", bound_gain=2.0, note=HOSTILE),
        VerifiedFinding(rule=HOSTILE, technique=HOSTILE, bound_gain=3.0, note="n"),
    ]
    findings = [
        finding("elementwise-chain", [1], HOSTILE, 6e-6, 3e-6),
        finding(HOSTILE, [2], "w", 120e-6, 40e-6),
    ]
    report = written(tmp_path, result(findings=findings, verified=hostile))
    md = markdown(report)
    section = md.split("### Verified", 1)[1]
    assert "<script>" not in section and "&lt;script>" in section
    assert "\n## heading" not in section and "\\`rm\\`" in section
    rows = markdown_table(md, "### Verified")
    assert len(rows) == 2 and all(len(row) == 7 for row in rows)  # no cell broken by the |
    assert rows[0][-1] == "x \\| &lt;script>alert(1)&lt;/script> \\`rm\\` &amp; **bold** ## heading"
    page = html(report)
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    cells = html_table(page, "verified")
    assert cells[0][-1] == HOSTILE  # the text itself, shown as text
    assert cells[1][0] == f"{HOSTILE} (w)" and cells[1][1] == HOSTILE


def test_no_findings_to_verify(tmp_path):
    report = written(tmp_path, result(findings=[], verified=[]))
    assert "### Verified\n\nNo findings to verify." in markdown(report)
    assert "<h2>Verified</h2>\n<p>No findings to verify.</p>" in html(report)


def test_a_report_without_verified_renders_as_before(tmp_path):
    plain = written(tmp_path, result(verified=None), name="plain")
    assert "verified" not in json.loads((tmp_path / "plain.json").read_text())
    assert report_document(plain, "plain").verified is None
    md, page = markdown(plain), html(plain)
    assert "Verified" not in md and "Verified" not in page and 'class="verified"' not in page
    # the same report with verified results: the same page plus the section, nothing else changed
    with_verified = plain.model_copy(update={"verified": [v.model_dump(mode="json") for v in VERIFIED]})
    text = markdown(with_verified)
    start = text.index("### Verified")
    end = text.find("\n###", start) + 1 or len(text)
    assert (text[:start] + text[end:]).rstrip("\n") + "\n" == md  # the last section: the page ends once
    page_with = html(with_verified)
    start, end = page_with.index("<h2>Verified</h2>"), page_with.index("</table>", page_with.index('class="verified"'))
    assert page_with[:start] + page_with[end + len("</table>\n") :] == page
    old = read_report(V1_DIAGNOSE, note=None)  # a version-1 report from an older roofline
    assert report_verified(old) is None
    assert "Verified" not in markdown(old)


# ------------------------------------------------------------------------------------------------ chart


def arrows_of(spec):
    (panel,) = spec.panels
    return panel.arrows


def test_the_chart_draws_an_arrow_per_covered_op(tmp_path):
    report = written(tmp_path, result())
    spec = build_chart([NamedReport("verified", report)], verified=True)
    arrows = arrows_of(spec)
    assert spec.counts["arrows"] == 2
    by_op = {a.point.kind: a for a in arrows}
    assert set(by_op) == {"aten::add", "aten::gelu"}  # mm: a code change; mul: outputs differ; view: no FLOPs
    add = by_op["aten::add"]  # both calls of the group covered by the chain: its time / 6.5
    assert add.point.rows == (1, 2)
    assert add.time_s == pytest.approx(126e-6) and add.time_after_s == pytest.approx(126e-6 / 6.5)
    assert add.gain == pytest.approx(6.5) and add.techniques == ("compile",)
    assert add.x == add.point.intensity and add.y == add.point.throughput
    assert add.y_after == pytest.approx(add.point.flops / (126e-6 / 6.5))
    gelu = by_op["aten::gelu"]
    assert gelu.gain == pytest.approx(1.25) and gelu.techniques == ("channels_last",)
    assert not add.measured and not gelu.measured  # no per-op verified times stored: estimates
    (note,) = [n for n in spec.notes if "arrow" in n]
    assert note.startswith("verified: 2 arrow(s) to an estimated point (dashed): the op's time divided by its ")
    assert "the report stores no per-op verified times (written before diagnose --verify profiled per op" in note
    assert spec.y_range[1] > max(a.y_after for a in arrows)


def test_a_partly_covered_group_and_overlapping_findings(tmp_path):
    findings = [
        finding("elementwise-chain", [2], "blocks.0: add", 120e-6, 12e-6),
        finding("conv-layout", [2, 5], "blocks.0", 160e-6, 40e-6),
    ]
    verified = [
        VerifiedFinding(rule="elementwise-chain", technique="compile", bound_gain=10.0, measured_gain=4.0,
                        outputs_match=True),
        VerifiedFinding(rule="conv-layout", technique="channels_last", bound_gain=4.0, measured_gain=2.0,
                        outputs_match=True),
    ]  # fmt: skip
    report = written(tmp_path, result(findings=findings, verified=verified))
    by_op = {a.point.kind: a for a in arrows_of(build_chart([NamedReport("v", report)], verified=True))}
    add = by_op["aten::add"]  # call 2 takes the larger of its two findings' gains; call 1 stays as measured
    assert add.time_after_s == pytest.approx(6e-6 + 120e-6 / 4.0)
    assert add.techniques == ("compile",)
    assert by_op["aten::gelu"].time_after_s == pytest.approx(40e-6 / 2.0)
    per_call = build_chart([NamedReport("v", report)], verified=True, per_call=True)
    assert sorted(a.point.rows for a in arrows_of(per_call)) == [(2,), (5,)]


def test_arrows_only_when_asked_and_a_note_without_results(tmp_path):
    report = written(tmp_path, result())
    plain = build_chart([NamedReport("verified", report)])
    assert arrows_of(plain) == () and "arrows" not in plain.counts
    assert not any("arrow" in n for n in plain.notes)
    bare = written(tmp_path, result(verified=None), name="bare")
    spec = build_chart([NamedReport("bare", bare)], verified=True)
    assert arrows_of(spec) == () and spec.counts["arrows"] == 0
    assert "bare: no verified results (written without diagnose --verify): no arrows" in spec.notes


def test_an_arrow_above_the_roof_is_noted(tmp_path):
    findings = [finding("conv-layout", [5], "blocks.1", 40e-6, 10e-6)]
    verified = [VerifiedFinding(rule="conv-layout", technique="channels_last", bound_gain=4.0, measured_gain=100.0,
                                outputs_match=True)]  # fmt: skip
    report = written(tmp_path, result(findings=findings, verified=verified))
    spec = build_chart([NamedReport("v", report)], verified=True)
    (arrow,) = arrows_of(spec)
    assert arrow.above_roof and arrow.y_after > arrow.point.attainable
    assert any("end above the op's roof" in n for n in spec.notes)


def test_plot_verified_draws_the_arrows(cli, tmp_path):
    pytest.importorskip("matplotlib")
    written(tmp_path, result())
    out = tmp_path / "chart.svg"
    done = cli("plot", str(tmp_path / "verified.json"), "--verified", "-o", str(out))
    assert done.code == 0, done.err
    assert "2 arrow(s)" in done.err
    assert "verify: op time ÷ its finding's" in out.read_text()  # the legend names the arrows (SVG text comment)
    assert "verified run (per-op profile)" not in out.read_text()  # no per-op times stored: estimates only
    plain = tmp_path / "plain.svg"
    assert cli("plot", str(tmp_path / "verified.json"), "-o", str(plain)).code == 0
    assert "op time ÷" not in plain.read_text()


# ------------------------------------------------------------------------------------------------ per-op times

PER_OP = [
    VERIFIED[0].model_copy(update={"op_times_s": {1: 2e-6, 2: 30e-6}}),  # the chain's ops in the verified run
    VERIFIED[1],
    VERIFIED[2].model_copy(update={"op_times_s": {5: 16e-6}}),
    VERIFIED[3],
    VERIFIED[4],
]


def test_per_op_times_are_stored_and_read_back(tmp_path):
    report = written(tmp_path, result(verified=PER_OP))
    stored = json.loads((tmp_path / "verified.json").read_text())["verified"]
    assert stored[0]["op_times_s"] == {"1": 2e-6, "2": 30e-6}  # JSON: op indices as keys
    assert stored[1]["op_times_s"] is None and stored[4]["op_times_s"] is None
    views = report_verified(report)
    assert views[0].op_times_s == {1: 2e-6, 2: 30e-6} and views[2].op_times_s == {5: 16e-6}
    assert views[1].op_times_s is None
    assert op_times(views) == {1: (2e-6, views[0]), 2: (30e-6, views[0]), 5: (16e-6, views[2])}


def test_odd_stored_per_op_times_are_left_out(tmp_path):
    report = written(tmp_path, result())
    entries = [v.model_dump(mode="json") for v in VERIFIED]
    entries[0]["op_times_s"] = {"1": 2e-6, "two": 1e-6, "2": -1, "-3": 1e-6, "5": "fast"}
    entries[2]["op_times_s"] = [[5, 1e-6]]  # not a mapping: none
    views = report_verified(report.model_copy(update={"verified": entries}))
    assert views[0].op_times_s == {1: 2e-6} and views[2].op_times_s is None


def test_the_chart_draws_arrows_to_the_verified_per_op_times(tmp_path):
    report = written(tmp_path, result(verified=PER_OP))
    spec = build_chart([NamedReport("verified", report)], verified=True)
    by_op = {a.point.kind: a for a in arrows_of(spec)}
    add, gelu = by_op["aten::add"], by_op["aten::gelu"]
    assert add.measured and gelu.measured
    assert add.time_s == pytest.approx(126e-6) and add.time_after_s == 2e-6 + 30e-6  # the stored values, summed
    assert add.x == add.point.intensity and add.y == add.point.throughput  # same FLOPs and bytes: same intensity
    assert add.y_after == pytest.approx(add.point.flops / 32e-6)
    assert add.gain == pytest.approx(126e-6 / 32e-6) and add.techniques == ("compile",)
    assert gelu.time_after_s == 16e-6 and gelu.y_after == pytest.approx(gelu.point.flops / 16e-6)
    (note,) = [n for n in spec.notes if "arrow" in n]
    assert note.startswith("verified: 2 arrow(s) from an op's measured point to its point in the verified run")
    assert "estimated" not in note
    calls = build_chart([NamedReport("v", report)], verified=True, per_call=True)
    per_call = {a.point.rows: a for a in arrows_of(calls)}
    assert per_call[(1,)].time_after_s == 2e-6 and per_call[(2,)].time_after_s == 30e-6
    assert per_call[(1,)].y_after == pytest.approx(per_call[(1,)].point.flops / 2e-6)


def test_calls_without_a_verified_time_keep_the_estimate(tmp_path):
    verified = [
        VERIFIED[0].model_copy(update={"op_times_s": {2: 30e-6}}),  # call 1 not timed in the verified run
        VERIFIED[1],
        VERIFIED[2].model_copy(update={"note": "per-op times not measured (failed: RuntimeError: x)"}),
        VERIFIED[3],
        VERIFIED[4],
    ]
    report = written(tmp_path, result(verified=verified))
    spec = build_chart([NamedReport("v", report)], verified=True)
    by_op = {a.point.kind: a for a in arrows_of(spec)}
    add, gelu = by_op["aten::add"], by_op["aten::gelu"]
    assert add.time_after_s == pytest.approx(6e-6 / 6.5 + 30e-6) and not add.measured  # partly estimated
    assert gelu.time_after_s == pytest.approx(40e-6 / 1.25) and not gelu.measured  # its per-op pass failed
    (note,) = [n for n in spec.notes if "arrow" in n]
    assert note.startswith("v: 2 arrow(s) to an estimated point (dashed)")
    assert "no per-op verified time is stored for some of their calls" in note


def test_a_verified_time_wins_over_a_larger_whole_model_gain(tmp_path):
    findings = [
        finding("elementwise-chain", [2], "blocks.0: add", 120e-6, 12e-6),
        finding("conv-layout", [2], "blocks.0", 120e-6, 40e-6),
    ]
    verified = [
        VerifiedFinding(rule="elementwise-chain", technique="compile", bound_gain=10.0, measured_gain=4.0,
                        outputs_match=True),
        VerifiedFinding(rule="conv-layout", technique="channels_last", bound_gain=3.0, measured_gain=2.0,
                        outputs_match=True, op_times_s={2: 50e-6}),
    ]  # fmt: skip
    report = written(tmp_path, result(findings=findings, verified=verified))
    per_call = build_chart([NamedReport("v", report)], verified=True, per_call=True)
    (arrow,) = [a for a in arrows_of(per_call) if a.point.rows == (2,)]
    assert arrow.time_after_s == 50e-6 and arrow.measured and arrow.techniques == ("channels_last",)


def test_a_verified_end_above_the_roof_is_noted_as_such(tmp_path):
    findings = [finding("conv-layout", [5], "blocks.1", 40e-6, 10e-6)]
    verified = [VerifiedFinding(rule="conv-layout", technique="channels_last", bound_gain=4.0, measured_gain=1.5,
                                outputs_match=True, op_times_s={5: 1e-9})]  # fmt: skip
    report = written(tmp_path, result(findings=findings, verified=verified))
    spec = build_chart([NamedReport("v", report)], verified=True)
    (arrow,) = arrows_of(spec)
    assert arrow.measured and arrow.above_roof and arrow.y_after > arrow.point.attainable
    assert any("1 verified end above the op's roof" in n for n in spec.notes)


def test_plot_verified_names_measured_arrows_in_the_legend(cli, tmp_path):
    pytest.importorskip("matplotlib")
    written(tmp_path, result(verified=PER_OP))
    out = tmp_path / "chart.svg"
    done = cli("plot", str(tmp_path / "verified.json"), "--verified", "-o", str(out))
    assert done.code == 0, done.err
    assert "2 arrow(s) from an op's measured point to its point in the verified run" in " ".join(done.err.split())
    text = out.read_text()
    assert "verified run (per-op profile)" in text and "op time ÷ its finding's" not in text


# ------------------------------------------------------------------------------------------------ issue 27 item 6


def test_the_gain_on_the_bounds_own_scope_and_a_slower_technique_demoted():
    from types import SimpleNamespace

    from roofline.diagnose.verify import VerifiedFinding, _with_op_times, rerank
    from roofline.report.verified import VerifiedView, measured_text

    chain = SimpleNamespace(rule="elementwise-chain", ops=[1, 2, 3])
    base = VerifiedFinding(rule="elementwise-chain", technique="compile", bound_gain=18.2, measured_gain=1.96,
                           outputs_match=True)  # fmt: skip
    eager = {1: 3e-3, 2: 3e-3, 3: 3.2e-3, 4: 10e-3}  # the chain's ops: 9.2 ms of a 19.2 ms model
    v = _with_op_times(base, chain, {1: 0.7e-3, 2: 0.6e-3, 3: 0.7e-3, 4: 10e-3}, "", eager)
    assert v.scope_gain == pytest.approx(9.2 / 2.0)  # the chain itself ran 4.6x faster, the model 1.96x
    assert v.gain == v.scope_gain and v.op_times_s == {1: 0.7e-3, 2: 0.6e-3, 3: 0.7e-3}
    partial = _with_op_times(base, chain, {1: 0.7e-3}, "", eager)
    assert partial.scope_gain is None and partial.gain == 1.96  # not every op timed: the model's gain
    view = VerifiedView(rule="elementwise-chain", technique="compile", bound_gain=18.2, measured_gain=1.96,
                        outputs_match=True, compile_s=None, eager_s=None, fixed_s=None, note="",
                        scope_gain=4.6)  # fmt: skip
    assert measured_text(view) == "4.6x its ops, 1.96x the model"
    # the conv + instance norm case: channels_last measured 0.76x
    layout = VerifiedFinding(rule="conv-layout", technique="channels_last", bound_gain=6.4, measured_gain=0.76,
                             outputs_match=True)  # fmt: skip
    assert layout.slower and not v.slower
    slow_view = VerifiedView(rule="conv-layout", technique="channels_last", bound_gain=6.4, measured_gain=0.76,
                             outputs_match=True, compile_s=None, eager_s=None, fixed_s=None, note="")  # fmt: skip
    assert measured_text(slow_view) == "0.76x: don't"
    findings = [SimpleNamespace(rule="conv-layout"), SimpleNamespace(rule="elementwise-chain")]
    together = VerifiedFinding(rule="all", technique="channels_last+compile", measured_gain=2.1, outputs_match=True)
    ranked, entries = rerank(findings, [layout, v, together])
    assert [f.rule for f in ranked] == ["elementwise-chain", "conv-layout"]  # the slower one demoted
    assert [e.rule for e in entries] == ["elementwise-chain", "conv-layout", "all"]  # still paired by position
    # entries that do not line up are left alone; outputs that differ are not "slower"
    assert rerank(findings, [v]) == (findings, [v])
    differs = layout.model_copy(update={"outputs_match": False})
    assert not differs.slower
    # its ops faster, the model slower (neighbours converting layouts): slower, judged on the model
    ops_faster = layout.model_copy(update={"scope_gain": 1.3, "measured_gain": 0.9})
    assert ops_faster.gain == 1.3 and ops_faster.slower
    ops_slower = layout.model_copy(update={"scope_gain": 0.9, "measured_gain": 1.2})
    assert not ops_slower.slower  # the model measured faster
    scope_only = layout.model_copy(update={"scope_gain": 0.9, "measured_gain": None})
    assert scope_only.slower and not scope_only.model_copy(update={"scope_gain": 1.1}).slower
    ranked, _ = rerank(findings, [ops_faster, v, together])
    assert [f.rule for f in ranked] == ["elementwise-chain", "conv-layout"]
