"""The console view of `roofline diagnose` on every example model, against committed golden text.

Real loading and counting on the CPU; the op times of a modelled CPU (as tests/test_diagnose_cli.py's, with bf16
roofs too) and fake roofs, so the text depends on the counted ops only, never on the host. The golden files hold
what the console showed before the view was rendered from the report (issue 25): a change to the console is a
change to them. `roofline report REPORT.json` prints the same view from the report the run wrote.
Regenerate the golden files (after checking the difference is meant) with ROOFLINE_REGEN_GOLDEN=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_diagnose_cli import DISPATCH_S, EFFICIENCY, FAST, PYTHON_SHARE, VIEW_S

from roofline.device import Device
from roofline.report.records import OpRecord, OpTiming, Timing

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
MODELS = Path("workloads") / "models"
GOLDEN = ROOT / "tests" / "golden" / "console"
EXAMPLES = sorted(path.stem for path in (ROOT / MODELS).glob("*.py"))

CPU = Device(
    name="cpu",
    display_name="Test CPU",
    vendor="other",
    compute={
        **{("fp32", unit): 1e11 for unit in ("vector", "tensor")},
        **{("fp64", unit): 5e10 for unit in ("vector", "tensor")},
        **{(dtype, unit): 2e11 for dtype in ("bf16", "fp16") for unit in ("vector", "tensor")},
    },
    bandwidth={"dram": 2e10},
    launch_floor_s=5e-6,
    roof_source="measured",
)


def modelled_time(record: OpRecord) -> float:
    if record.math == "none" or not record.counted:
        return VIEW_S
    roof = CPU.roof(record.dtype or "fp32", record.math)
    return DISPATCH_S + max(record.flops / roof.flops_per_s, record.bytes / CPU.dram_bandwidth) / EFFICIENCY


def modelled_timing(model, inputs, kwargs, records, *, device, mode, warmup, iters, **_):
    ops = [OpTiming(index=r.index, device_time_s=modelled_time(r), kernels=0) for r in records]
    op_time = sum(t.device_time_s for t in ops)
    return Timing(device="cpu", iterations=iters, wall_s=op_time * (1 + PYTHON_SHARE), ops=ops)


@pytest.fixture
def modelled_cpu(monkeypatch):
    """The fake CPU's roofs and the modelled op times (counting still runs the model)."""
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    monkeypatch.setattr("roofline.diagnose.profile.time_model", modelled_timing)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "400")  # no line wraps: the checkout's path, replaced, changes no layout


def live_console(cli, model: str, report: Path) -> str:
    import torch

    torch.manual_seed(0)
    result = cli("diagnose", str(MODELS / f"{model}.py"), *FAST, "-o", str(report))
    assert result.code == 0, result.err
    return result.out.replace(str(ROOT), "<ROOT>")


def check_golden(name: str, text: str) -> None:
    golden = GOLDEN / f"{name}.txt"
    if os.environ.get("ROOFLINE_REGEN_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"{golden}: no golden text (ROOFLINE_REGEN_GOLDEN=1 writes it)"
    assert text == golden.read_text(encoding="utf-8"), f"{name}: the console differs from {golden}"


def test_every_example_model_has_a_golden_file():
    assert len(EXAMPLES) >= 10
    assert {p.stem for p in GOLDEN.glob("*.txt")} == set(EXAMPLES)


@pytest.mark.parametrize("model", EXAMPLES)
def test_console_of_example_model_is_unchanged(cli, tmp_path, modelled_cpu, model):
    check_golden(model, live_console(cli, model, tmp_path / "r.json"))


@pytest.mark.parametrize("model", ["attention_naive", "launch_bound_tiny_ops"])
def test_report_prints_the_live_runs_console_view(cli, tmp_path, modelled_cpu, model, monkeypatch):
    report = tmp_path / "r.json"
    live = live_console(cli, model, report)
    assert "Findings" in live and "evidence:" in live
    shown = cli("report", str(report), "--format", "console")
    assert shown.code == 0, shown.err
    assert shown.out.replace(str(ROOT), "<ROOT>") == live
    monkeypatch.setattr("roofline.cli.output.stdout_is_terminal", lambda: True)
    default = cli("report", str(report))  # on a terminal, no --format: the console view
    assert default.code == 0 and default.out.replace(str(ROOT), "<ROOT>") == live
    written = tmp_path / "view.txt"
    to_file = cli("report", str(report), "--format", "console", "-o", str(written))
    assert (
        to_file.code == 0
        and to_file.out == ""
        and written.read_text(encoding="utf-8").replace(str(ROOT), "<ROOT>") == live
    )


def test_reports_without_a_console_view(cli, monkeypatch):
    bench = ROOT / "benchmarks" / "results" / "bench-gpu-h100.json"
    monkeypatch.setattr("roofline.cli.output.stdout_is_terminal", lambda: True)
    default = cli("report", str(bench))  # on a terminal: markdown, as before
    assert default.code == 0 and default.out.startswith("## roofline bench report")
    asked = cli("report", str(bench), "--format", "console")
    assert asked.code == 2
    assert asked.error_line() == (
        f"Error: --format console: {bench} is a bench report; the console view is a diagnosis's (use markdown, "
        "html, csv or parquet)"
    )


def test_a_diagnose_report_without_a_summary_has_no_console_view(cli, tmp_path):
    from roofline.report.schema import read_report, write_report

    stored = read_report(ROOT / "benchmarks" / "results" / "diagnose-gpt12-h100.json")  # a version-1 report
    shown = cli("report", str(ROOT / "benchmarks" / "results" / "diagnose-gpt12-h100.json"), "--format", "console")
    assert shown.code == 0 and "Findings" in shown.out and "Top modules by time" in shown.out
    path = tmp_path / "bare.json"
    write_report(stored.model_copy(update={"summary": None}), path)
    asked = cli("report", str(path), "--format", "console")
    assert asked.code == 2
    assert asked.error_line() == (
        f"Error: --format console: {path} is a diagnose report without a summary; the console view is a "
        "diagnosis's (use markdown, html, csv or parquet)"
    )
