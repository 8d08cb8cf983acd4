"""`roofline plot`, `roofline report` and `--plot`: files written, notes on stderr, one-line errors with exit 2."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from diagnose_devices import CPU as TEST_CPU

from roofline.report.schema import Report, device_info, write_report

ROOT = Path(__file__).resolve().parents[1]
H100_BENCH = ROOT / "benchmarks" / "results" / "bench-gpu-h100.json"
CPU = device_info(TEST_CPU)  # the diagnose tests' CPU, as a report carries it


def _op(index: int, op: str, flops, nbytes, time_s: float) -> dict:
    return {
        "index": index,
        "op": op,
        "module": "",
        "input_shapes": [[1024]],
        "flops": flops,
        "bytes": nbytes,
        "roof": "fp32 vector",
        "timed": time_s > 0,
        "time_s": time_s,
        "kernels": 0,
        "bound": "memory",
    }


@pytest.fixture
def diag(tmp_path) -> Path:
    """A diagnose report: one normal op, one above its roof (40 GFLOP/s at 1 FLOP/B on a 20 GB/s roof), one
    never timed, one uncounted."""
    rows = [
        _op(0, "aten::mul", 1e6, 1e7, 1e-3),
        _op(1, "aten::add", 4e6, 4e6, 1e-4),
        _op(2, "aten::tanh", 1e6, 8e6, 0.0),
        _op(3, "aten::weird", None, None, 5e-5),
    ]
    path = tmp_path / "diag.json"
    write_report(Report(source="diagnose", command="roofline diagnose m.py", devices=[CPU], rows=rows), path)
    return path


def test_plot_writes_png_svg_pdf_and_prints_notes(cli, diag, tmp_path):
    before = diag.read_text()
    for ext, magic in ((".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF")):
        out = tmp_path / f"chart{ext}"
        result = cli("plot", str(diag), "-o", str(out), "--size", "800x500")
        assert result.code == 0, result.err
        assert out.read_bytes().startswith(magic)
        assert result.out == ""
    notes = [line for line in result.err.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: diag: 2 of 4 point(s) not plotted: 1 not timed (no measured time); 1 uncounted (no cost formula: "
        "FLOPs unknown), 4.3% of the time",  # 50 us of 1.15 ms
        "note: 1 point(s) above their roof (up to 200% of it: add [1024]): a roof is a hard limit, so the FLOP or "
        "byte counts or the measured time are wrong, or the data came from a cache faster than the roof's memory",
    ]
    assert result.err.splitlines()[-1] == f"Chart written to {tmp_path / 'chart.pdf'}"
    svg = (tmp_path / "chart.svg").read_text()
    assert "<!-- add [1024] -->" in svg and "<!-- DRAM 20 GB/s (measured) -->" in svg
    assert "not plotted" in svg  # the notes are in the figure's footer too
    assert diag.read_text() == before  # plotting reads the report, never rewrites it


def test_plot_a_single_point_report_and_several_devices(cli, tmp_path):
    report = tmp_path / "one.json"
    made = cli("analyze", "gemm", "-m", "4096", "-n", "4096", "-k", "4096", "-d", "h100-sxm", "-o", str(report))
    assert made.code == 0, made.err
    out = tmp_path / "one.svg"
    result = cli("plot", str(report), "-o", str(out), "--device", "a100-sxm-80gb", "-d", "b200", "--size", "900x600")
    assert result.code == 0, result.err
    svg = out.read_text()
    for title in ("(h100-sxm) · roofs from spec", "(a100-sxm-80gb) · projected", "(b200) · projected"):
        assert title in svg.replace("spec roofs", "roofs from spec"), title
    assert "fp16 tensor 989.4 TFLOP/s (spec)" in svg and "fp16 tensor 312 TFLOP/s (spec)" in svg


def test_plot_and_report_of_the_h100_bench(cli, tmp_path):
    out = tmp_path / "bench.png"
    started = time.process_time()  # this process's CPU time: other load on the machine does not count
    result = cli("plot", str(H100_BENCH), "-o", str(out), "--top", "12", "--size", "800x500")
    assert result.code == 0, result.err
    assert time.process_time() - started < 10
    assert "above the measured roof but under the spec roof (gemm m=4096 n=4096 k=4096)" in result.err
    html = tmp_path / "bench.html"
    assert cli("report", str(H100_BENCH), "-o", str(html)).code == 0
    assert "<svg" in html.read_text() and "<table" in html.read_text()


EXT = "use .png, .svg or .pdf"
BAD_INPUT = [
    (["plot", "{missing}", "-o", "x.png"], "Error: {missing}: no such report file"),
    (
        ["plot", "{corrupt}", "-o", "x.png"],
        "Error: {corrupt}: corrupt report (invalid JSON at line 1, column 2: Expecting property name enclosed in "
        "double quotes): re-create it",
    ),
    (["plot", "{diag}", "-o", "x.jpg"], f"Error: -o x.jpg: unknown output extension '.jpg': {EXT} (or give --format)"),
    (
        ["plot", "{diag}", "-o", "chart"],
        "Error: -o chart: no extension to tell the format: end it in .png, .svg or .pdf (or give --format)",
    ),
    (["plot", "{diag}", "--format", "gif"], "Error: --format 'gif': use png, svg or pdf"),
    (
        ["plot", "{diag}", "-o", "x.png", "--size", "big"],
        "Error: --size 'big': write WIDTHxHEIGHT in pixels, e.g. 1600x1000",
    ),
    (
        ["plot", "{diag}", "-o", "x.png", "--size", "300x200"],
        "Error: --size '300x200': from 480x300 to 10000x10000 pixels",
    ),
    (
        ["plot", "{diag}", "-o", "x.png", "-d", "h100-sxn"],
        "Error: unknown device 'h100-sxn': did you mean h100-sxm, h200-sxm? (or add a sheet with --spec FILE)",
    ),
    (["report", "{missing}", "-o", "r.html"], "Error: {missing}: no such report file"),
    (["report", "{diag}", "--format", "xlsx"], "Error: --format 'xlsx': use html, markdown, csv or parquet"),
    (
        ["report", "{diag}", "-o", "r.txt"],
        "Error: -o r.txt: unknown output extension '.txt': use .html, .htm, .md, .markdown, .csv, .parquet or .pq "
        "(or give --format)",
    ),
    (
        ["analyze", "gemm", "-m", "1", "-n", "1", "-k", "1", "-d", "h100", "--plot", "c.gif"],
        f"Error: --plot c.gif: unknown output extension '.gif': {EXT}",
    ),
]


@pytest.mark.parametrize(("args", "line"), BAD_INPUT)
def test_bad_input_is_one_line_and_exit_2(cli, diag, tmp_path, monkeypatch, args, line):
    monkeypatch.chdir(tmp_path)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{not json")
    names = {"missing": str(tmp_path / "nope.json"), "corrupt": str(corrupt), "diag": str(diag)}
    result = cli(*[a.format(**names) for a in args])
    assert result.code == 2
    assert result.error_line() == line.format(**names)
    assert not list(tmp_path.glob("x.*")) and not list(tmp_path.glob("r.*"))


@pytest.mark.parametrize(("command", "fmt"), [("plot", "png"), ("plot", "pdf"), ("report", "parquet")])
def test_binary_output_to_a_terminal_is_refused(cli, diag, monkeypatch, command, fmt):
    monkeypatch.setattr("roofline.cli.output.stdout_is_terminal", lambda: True)
    result = cli(command, str(diag), "--format", fmt)
    assert result.code == 2
    assert result.error_line() == (
        f"Error: not writing {fmt} (binary) to a terminal: give -o FILE.{fmt}, or redirect stdout to a file"
    )


def test_text_formats_go_to_stdout_and_binary_to_a_pipe(cli, diag, monkeypatch):
    monkeypatch.setattr("roofline.cli.output.stdout_is_terminal", lambda: True)
    markdown = cli("report", str(diag))  # no -o, no --format, no summary to show on the console: markdown
    assert markdown.code == 0 and markdown.out.startswith("## roofline diagnose report: diag\n")
    csv = cli("report", str(diag), "--format", "csv")
    assert csv.code == 0 and csv.out.splitlines()[0].startswith("report,source,point.label,")
    svg = cli("plot", str(diag), "--format", "svg", "--size", "480x300")
    assert svg.code == 0 and svg.out.startswith("<?xml")


def test_binary_to_a_pipe_is_written(diag, monkeypatch):
    import io

    from roofline.cli import main

    pipe = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(pipe, encoding="utf-8"))
    monkeypatch.setattr("roofline.cli.output.stdout_is_terminal", lambda: False)
    with pytest.raises(SystemExit) as exit_info:
        main(["plot", str(diag), "--size", "480x300"])
    assert exit_info.value.code == 0 and pipe.getvalue().startswith(b"\x89PNG")


def test_report_formats_by_extension(cli, diag, tmp_path):
    for name, check in (
        ("r.html", lambda b: b.startswith(b"<!DOCTYPE html>")),
        ("r.md", lambda b: b.startswith(b"## roofline diagnose report")),
        ("r.csv", lambda b: b.startswith(b"report,source,")),
        ("r.parquet", lambda b: b[:4] == b"PAR1"),
    ):
        if name.endswith(".parquet"):
            pytest.importorskip("pyarrow")
        out = tmp_path / name
        result = cli("report", str(diag), "-o", str(out), "--top", "0")
        assert result.code == 0, result.err
        assert check(out.read_bytes()), name
        assert result.err.splitlines()[-1] == f"Report written to {out}"


def test_report_parquet_without_pyarrow_is_one_line(cli, diag, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pyarrow(name, *args, **kwargs):
        if name == "pyarrow":
            raise ImportError("No module named 'pyarrow'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    result = cli("report", str(diag), "-o", str(tmp_path / "p.parquet"))
    assert result.code == 2
    assert result.error_line() == (
        "Error: Parquet output needs pyarrow: pip install pyarrow (or pip install 'roofline[parquet]'), "
        "or write --format csv"
    )


def test_analyze_plot_option_writes_the_chart(cli, tmp_path):
    chart = tmp_path / "sub" / "chart.png"
    result = cli(
        "analyze", "gemm", "-m", "1024,4096", "-n", "4096", "-k", "4096", "-d", "h100-sxm", "--plot", str(chart)
    )
    assert result.code == 0, result.err
    assert chart.read_bytes()[:4] == b"\x89PNG"
    assert f"Chart written to {chart}" in result.err
    assert "analytic report: each point is a prediction" in result.err
    again = cli("analyze", "gemm", "-m", "64", "-n", "64", "-k", "64", "-d", "h100-sxm")  # no --plot: no chart
    assert again.code == 0 and "Chart written" not in again.err


def test_diagnose_and_bench_offer_plot():
    from roofline.cli.reference import commands

    offered = {path for path, command in commands() if any(p.name == "plot" for p in getattr(command, "params", []))}
    assert {"roofline diagnose", "roofline bench gemm", "roofline bench suite", "roofline analyze gemm"} <= offered


@pytest.mark.parametrize("command", ["plot", "report"])
def test_help_teaches_with_examples(cli, command):
    result = cli(command, "--help")
    assert result.code == 0
    assert "Examples:" in result.out and f"roofline {command} " in result.out


def test_plot_and_report_import_no_torch_and_the_api_is_lazy(tmp_path):
    code = textwrap.dedent(
        f"""
        import sys
        import roofline
        light = not {{"pandas", "matplotlib", "roofline.api"}} & set(sys.modules)
        from roofline.cli import main
        for argv in (["plot", {str(H100_BENCH)!r}, "-o", {str(tmp_path / "x.png")!r}],
                     ["report", {str(H100_BENCH)!r}, "-o", {str(tmp_path / "x.html")!r}]):
            try:
                main(argv)
            except SystemExit as exc:
                assert exc.code == 0, argv
        from roofline import load_report, points_frame, roofline_figure
        report = load_report({str(H100_BENCH)!r})
        fig = roofline_figure(report, top=3)
        from matplotlib.figure import Figure
        print(light, "torch" in sys.modules, len(points_frame(report)), isinstance(fig, Figure),
              fig._repr_png_()[:4] == b"\\x89PNG", "matplotlib.pyplot" in sys.modules)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    # import roofline is light; plot and report never import torch; the API returns a Figure that shows itself in
    # a notebook (PNG repr), without pyplot
    assert result.stdout.split() == ["True", "False", "32", "True", "True", "False"], result.stderr


def test_html_report_screenshot_with_chromium(tmp_path, cli):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed")
    page = tmp_path / "report.html"
    assert cli("report", str(H100_BENCH), "-o", str(page)).code == 0
    shot = tmp_path / "shot.png"
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            "--window-size=1600,1000",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-500:]
    data = shot.read_bytes()
    assert data[:4] == b"\x89PNG" and (int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")) == (
        1600,
        1000,
    )
    assert len(data) > 50_000  # a rendered page with a chart, not a blank one (a blank 1600x1000 PNG is ~10 kB)
