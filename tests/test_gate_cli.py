"""`roofline gate` and `roofline baseline` end to end: exit codes, golden markdown and JUnit output, bad input
as one line with exit 2, pyproject settings, --update-baseline, and measuring a suite or a model in-process."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import pytest
from diagnose_devices import CPU

from roofline.report import baseline as baselines
from roofline.report.schema import write_report
from tests.gate_synthetic import H100, bench_report, bench_row, diagnose_report, diagnose_row, spread

GOLDEN = Path(__file__).resolve().parent / "golden" / "gate"
UPDATE = os.environ.get("ROOFLINE_UPDATE_GOLDEN") == "1"  # rewrite the golden files from this run


@pytest.fixture(autouse=True)
def _hermetic(tmp_path, monkeypatch):
    """Run in an empty directory: no pyproject.toml of ours, no git repository (no commit in baselines)."""
    monkeypatch.chdir(tmp_path)


def _save(report, path: Path, commit: str = "0123456789abcdef0123456789abcdef01234567") -> Path:
    saved = baselines.from_report(report, commit=commit).model_copy(update={"created_utc": "2026-01-01T00:00:00+00:00"})
    return baselines.save(saved, path)


def _write(report, path: Path) -> Path:
    write_report(report, path)
    return path


# ------------------------------------------------------------------------------------------ scenarios


def regression_scenario(tmp_path: Path) -> tuple[Path, Path]:
    """One of each verdict: pass, regression, improvement, inconclusive, a count change, new, vanished, and a
    baseline from another driver."""
    gelu = {"kind": "elementwise", "op": "elementwise gelu bf16 (aten.gelu.out)", "flops": 67108864 * 8}
    attention = {"kind": "attention", "op": "attention fused (scaled_dot_product_attention) bf16"}
    before = [
        bench_row("m=4096 n=4096 k=4096", spread(1.83e-4, 60, 0.01)),
        bench_row("m=8192 n=8192 k=8192", spread(1.5e-3, 30, 0.01)),
        bench_row("gelu numel=67108864", spread(1.0e-4, 40, 0.02), **gelu),
        bench_row("layernorm rows=16384 cols=4096", spread(1.2e-4, 8, 0.15), kind="norm", op="norm layernorm bf16"),
        bench_row("heads=32 seq_q=4096 fused", spread(2.6e-4, 50, 0.01), **attention),
        bench_row("decode llama-3-8b o_proj m=1 n=4096 k=4096", spread(2.0e-5, 50, 0.02)),
    ]
    after = [
        bench_row("m=4096 n=4096 k=4096", spread(1.83e-4, 50, 0.01, 0.005)),
        bench_row("m=8192 n=8192 k=8192", spread(1.5e-3, 30, 0.01, 0.20)),
        bench_row("gelu numel=67108864", spread(1.0e-4, 40, 0.02, -0.25), **gelu),
        bench_row(
            "layernorm rows=16384 cols=4096", spread(1.2e-4, 8, 0.15, 0.12), kind="norm", op="norm layernorm bf16"
        ),
        bench_row("heads=32 seq_q=4096 fused", spread(2.6e-4, 50, 0.01), kernels=2, **attention),
        bench_row("add numel=67108864", spread(1.4e-4, 40, 0.01), kind="elementwise", op="elementwise add bf16"),
    ]
    baseline = _save(bench_report(before, suite="gate-demo"), tmp_path / "baseline.json")
    report = _write(
        bench_report(after, suite="gate-demo", machine={**H100, "driver": "560.35.03"}), tmp_path / "r.json"
    )
    return baseline, report


def pass_scenario(tmp_path: Path) -> tuple[Path, Path]:
    """A diagnose report of the same model, op for op, in fresh noise: pass."""

    def rows(shift: float) -> list[dict]:
        return [
            diagnose_row("aten::mm", "layers.0.mlp.up", [[64, 512], [512, 2048]], spread(2.0e-5, 20, 0.02, shift),
                         flops=2 * 64 * 512 * 2048, nbytes=2 * (64 * 512 + 512 * 2048 + 64 * 2048), roof_time_s=1.5e-6),
            diagnose_row("aten::gelu", "layers.0.mlp.act", [[64, 2048]], spread(4.0e-6, 20, 0.03, shift),
                         flops=8 * 64 * 2048, nbytes=4 * 64 * 2048, roof_time_s=1.2e-6),
            diagnose_row("aten::mm", "layers.0.mlp.down", [[64, 2048], [2048, 512]], spread(2.1e-5, 20, 0.02, shift),
                         flops=2 * 64 * 512 * 2048, nbytes=2 * (64 * 512 + 512 * 2048 + 64 * 2048), roof_time_s=1.5e-6),
        ]  # fmt: skip

    baseline = _save(diagnose_report(rows(0.0)), tmp_path / "baseline.json", commit="")
    report = _write(diagnose_report(rows(-0.004)), tmp_path / "r.json")
    return baseline, report


def _mask(text: str) -> str:
    text = re.sub(r'timestamp="[^"]*"', 'timestamp="*"', text)
    return re.sub(r' time="[^"]*"', ' time="*"', text)


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs (ROOFLINE_UPDATE_GOLDEN=1 rewrites it)"


# ------------------------------------------------------------------------------------------ verdicts


def test_regression_markdown_and_junit_match_the_golden_files(cli, tmp_path):
    baseline, report = regression_scenario(tmp_path)
    junit = tmp_path / "gate.xml"
    result = cli("gate", str(report), "--baseline", str(baseline), "--format", "markdown", "--junit", str(junit))
    assert result.code == 1, result.err
    _golden("regression.md", result.out)
    _golden("regression.xml", _mask(junit.read_text()))


def test_pass_markdown_and_junit_match_the_golden_files(cli, tmp_path):
    baseline, report = pass_scenario(tmp_path)
    junit, markdown = tmp_path / "gate.xml", tmp_path / "summary.md"
    result = cli("gate", str(report), "-b", str(baseline), "--junit", str(junit), "--markdown", str(markdown))
    assert result.code == 0, result.err
    _golden("pass.md", markdown.read_text())
    _golden("pass.xml", _mask(junit.read_text()))
    assert result.out.startswith("roofline gate: PASS (exit 0)\n  3 points compared: 3 pass · 0 new, 0 vanished\n")


def test_console_table_names_the_offending_kernels(cli, tmp_path):
    baseline, report = regression_scenario(tmp_path)
    out = cli("gate", str(report), "--baseline", str(baseline)).out
    assert out.startswith(
        "roofline gate: REGRESSION (exit 1)\n"
        "  5 points compared: 2 regression, 1 inconclusive, 1 improvement, 1 pass · 1 new, 1 vanished\n"
    )
    assert "Warning: the baseline was measured on another machine: driver 550.54.15 -> 560.35.03" in out
    assert "  baseline machine: NVIDIA H100 80GB HBM3 (h100-sxm) · driver 550.54.15 · CUDA 12.4" in out
    assert "  gemm m=8192 n=8192 k=8192 bf16: efficiency -16.7% (99% CI " in out
    assert "  attention heads=32 seq_q=4096 fused bf16: kernels 1 -> 2 (+100%) beyond kernels:0" in out
    assert "  + elementwise add numel=67108864 bf16" in out
    assert "  - gemm decode llama-3-8b o_proj m=1 n=4096 k=4096 bf16" in out


def test_exit_codes_and_json(cli, tmp_path):
    s = spread(1e-4, 10, 0.15)
    baseline = _save(bench_report([bench_row("m=1", s)]), tmp_path / "b.json")
    same = _write(bench_report([bench_row("m=1", spread(1e-4, 12, 0.15))]), tmp_path / "same.json")
    noisy = _write(bench_report([bench_row("m=1", spread(1e-4, 10, 0.15, 0.12))]), tmp_path / "noisy.json")
    slower = _write(bench_report([bench_row("m=1", spread(1e-4, 10, 0.01, 0.5))]), tmp_path / "slower.json")
    assert cli("gate", str(same), "-b", str(baseline)).code == 0
    assert cli("gate", str(noisy), "-b", str(baseline)).code == 3
    assert cli("gate", str(slower), "-b", str(baseline)).code == 1
    doc = cli("gate", str(noisy), "-b", str(baseline), "--json").json()
    assert doc["verdict"] == "inconclusive" and doc["points"][0]["checks"][-1]["verdict"] == "inconclusive"
    assert doc["rules"] == ["efficiency:-5%", "flops:0", "bytes:0", "kernels:0"] and doc["confidence"] == 0.99
    # a looser rule makes the same noisy run pass; --no-stats turns it into a regression on the medians
    assert cli("gate", str(noisy), "-b", str(baseline), "--fail-on", "efficiency:-30%").code == 0
    assert cli("gate", str(noisy), "-b", str(baseline), "--no-stats").code == 1


# ------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["gate", "r.json"], "no baseline: give --baseline FILE (save one with `roofline baseline save"),
        (["gate", "r.json", "-b", "none.json"], "none.json: no such baseline: save one with"),
        (["gate", "r.json", "-b", "b.json", "--fail-on", "time:fast"], "--fail-on 'time:fast': 'fast' is not a limit"),
        (["gate", "r.json", "-b", "b.json", "--fail-on", "speed:+5%"], "unknown metric 'speed'"),
        (["gate", "missing.json", "-b", "b.json"], "missing.json: no such report file"),
        (["gate", "corrupt.json", "-b", "b.json"], "corrupt.json: corrupt report (invalid JSON at line 1, column"),
        (["gate", "r.json", "-b", "corrupt.json"], "corrupt.json: corrupt baseline (invalid JSON"),
        (["gate", "r.json", "-b", "r.json"], "r.json: not a roofline baseline (schema 'roofline.report'"),
        (["gate", "other.json", "-b", "b.json"], "baseline of suite 'gate-demo', report of suite 'bench-gpu'"),
        (["gate", "r.json", "-b", "b.json", "--device", "cpu"], "--device: not an option for a report"),
        (["gate", "r.json", "-b", "b.json", "--format", "html"], "--format 'html': use one of table, markdown, json"),
        (["gate", "r.json", "-b", "b.json", "--junit", "r.json"], "--junit r.json: is the report this command reads"),
        (["gate", "r.json", "-b", "b.json", "--markdown", "b.json"], "--markdown b.json: is the baseline this"),
        (["gate", "notes.txt", "-b", "b.json"], "'notes.txt': give a report (REPORT.json), a bench suite"),
        (["gate", "suite.yaml", "-b", "b.json", "--iters", "5"], "--iters: not an option for a bench suite"),
        (["gate", "r.json", "-b", "b.json", "--confidence", "2"], "--confidence 2.0: use a level between 0.5 and 1"),
        (["baseline", "save", "missing.json"], "missing.json: no such report file"),
        (
            ["baseline", "save", "r.json", "-o", "corrupt.json"],
            "-o corrupt.json: exists and is not a roofline baseline",
        ),
        (["baseline", "show", "r.json"], "r.json: not a roofline baseline"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, tmp_path, args, needle):
    s = spread(1e-4, 10, 0.01)
    _save(bench_report([bench_row("m=1", s)], suite="gate-demo"), tmp_path / "b.json")
    _write(bench_report([bench_row("m=1", s)], suite="gate-demo"), tmp_path / "r.json")
    _write(bench_report([bench_row("m=1", s)], suite="bench-gpu"), tmp_path / "other.json")
    (tmp_path / "corrupt.json").write_text("{")
    result = cli(*args)
    assert result.code == 2, result.out + result.err
    assert needle in result.error_line()
    assert (tmp_path / "corrupt.json").read_text() == "{"


# ------------------------------------------------------------------------------------------ settings, update


def test_pyproject_settings_are_found_walking_up(cli, tmp_path, monkeypatch):
    s = spread(1e-4, 30, 0.01)
    (tmp_path / "ci").mkdir()
    _save(bench_report([bench_row("m=1", s)]), tmp_path / "ci" / "b.json")
    report = _write(bench_report([bench_row("m=1", spread(1e-4, 30, 0.01, 0.08))]), tmp_path / "r.json")
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.roofline.gate]\nbaseline = "ci/b.json"\nfail-on = ["efficiency:-10%"]\n'
    )
    (tmp_path / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "src" / "deep")
    doc = cli("gate", str(report), "--json").json()
    assert doc["verdict"] == "pass" and doc["rules"] == ["efficiency:-10%", "flops:0", "bytes:0", "kernels:0"]
    # --fail-on replaces the pyproject rule of the same metric (-7.4% is beyond -5%, but within the noise a
    # one-run baseline cannot know: inconclusive)
    assert cli("gate", str(report), "--fail-on", "efficiency:-5%").code == 3
    (tmp_path / "pyproject.toml").write_text("[tool.roofline.gate]\ncolour = 'red'\n")
    result = cli("gate", str(report), "-b", str(tmp_path / "ci" / "b.json"))
    assert result.code == 2 and "[tool.roofline.gate] colour: unknown key" in result.error_line()


def test_update_baseline_only_after_a_pass_unless_forced(cli, tmp_path):
    s = spread(1e-4, 30, 0.01)
    baseline = _save(bench_report([bench_row("m=1", s)]), tmp_path / "b.json", commit="first")
    slower = _write(bench_report([bench_row("m=1", spread(1e-4, 30, 0.01, 0.3))]), tmp_path / "slower.json")
    same = _write(bench_report([bench_row("m=1", spread(1e-4, 25, 0.01))]), tmp_path / "same.json")
    result = cli("gate", str(slower), "-b", str(baseline), "--update-baseline")
    assert result.code == 1 and "not updated: the gate did not pass" in result.err
    assert baselines.load(baseline).commit == "first"
    result = cli("gate", str(same), "-b", str(baseline), "--update-baseline")
    assert result.code == 0 and f"Baseline {baseline} updated (pass)" in result.err
    updated = baselines.load(baseline)
    assert len(updated.points[0].samples_s) == 25 and updated.reports[0].path == str(same)
    result = cli("gate", str(slower), "-b", str(baseline), "--update-baseline", "--force")
    assert result.code == 1 and "updated (regression)" in result.err
    assert baselines.load(baseline).points[0].time_s > 1.2e-4


def test_the_gate_run_is_a_library_call(tmp_path):
    from roofline.gate import run as gate_run

    s = spread(1e-4, 30, 0.01)
    baseline = _save(bench_report([bench_row("m=1", s)]), tmp_path / "b.json", commit="first")
    slower = _write(bench_report([bench_row("m=1", spread(1e-4, 30, 0.01, 0.3))]), tmp_path / "slower.json")
    gated = gate_run.run(str(slower), baseline=baseline)
    assert gated.result.verdict == "regression" and gated.report_path == slower and gated.baseline_path == baseline
    assert not gate_run.update_baseline(gated) and baselines.load(baseline).commit == "first"
    assert gate_run.update_baseline(gated, force=True) and baselines.load(baseline).reports[0].path == str(slower)


def test_gate_input_kinds():
    from roofline.cli.gate import DEFAULT_GATE_ITERS
    from roofline.costs.suite import shipped_suites
    from roofline.gate.run import DEFAULT_ITERS, kind_of

    assert DEFAULT_GATE_ITERS == DEFAULT_ITERS  # the CLI's help shows the library's default
    assert {"bench-gpu", "bench-cpu", "transformer-ops"} <= set(shipped_suites())
    assert [kind_of(t) for t in ("r.JSON", "m.py", "s.yml", "bench-gpu")] == ["report", "model", "suite", "suite"]


def test_baseline_save_and_show(cli, tmp_path):
    report = _write(bench_report([bench_row("m=1", spread(1e-4, 10, 0.01))]), tmp_path / "r.json")
    result = cli("baseline", "save", str(report), "-o", str(tmp_path / "b.json"))
    assert result.code == 0, result.err
    assert result.out.splitlines()[:2] == [
        f"Saved 1 points of bench suite gate-demo to {tmp_path / 'b.json'}",
        "  machine: NVIDIA H100 80GB HBM3 (h100-sxm) · driver 550.54.15 · CUDA 12.4 · torch 2.4.0 · SM 1980 MHz · "
        "spec roofs",
    ]
    shown = cli("baseline", "show", str(tmp_path / "b.json")).out
    assert "baseline of bench suite gate-demo · 1 points" in shown
    assert "gemm m=1 bf16" in shown and "137.4 GFLOP" in shown
    assert json.loads(cli("baseline", "show", str(tmp_path / "b.json"), "--json").out)["schema"] == "roofline.baseline"


# ------------------------------------------------------------------------------------------ measuring


@pytest.fixture
def fake_cpu(monkeypatch):
    """CPU roofs without running a calibration."""
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))


def test_gate_a_suite_measures_it_in_process(cli, tmp_path, fake_cpu, monkeypatch):
    suite = tmp_path / "tiny.yaml"
    suite.write_text(
        "name: tiny\nworkloads:\n"
        "  - {kind: gemm, m: 16, n: 16, k: 16, dtype: fp32}\n"
        "  - {kind: elementwise, op: add, numel: 4096, dtype: fp32}\n"
    )
    fast = ("--device", "cpu", "--max-time", "0.02")
    monkeypatch.setattr("sys.argv", ["roofline", "bench", str(suite), *fast, "-o", "r.json"])  # the report's command
    assert cli("bench", str(suite), *fast, "-o", "r.json").code == 0
    assert cli("baseline", "save", "r.json", "-o", "b.json").code == 0
    saved = baselines.load("b.json")
    assert saved.identity.suite == "tiny" and saved.machine.kind == "cpu" and saved.machine.cpu_threads
    # counts only: CPU timings of 16x16 GEMMs are too noisy to test in CI
    result = cli("gate", str(suite), "-b", "b.json", *fast, "--fail-on", "efficiency:off", "-o", "now.json")
    assert result.code == 0, result.err
    assert "2 points compared: 2 pass" in result.out and "Report written to now.json" in result.err
    from roofline.report.schema import read_report

    bench = read_report(Path("now.json")).model_extra["bench"]
    assert bench["suite"] == {"name": "tiny", "file": str(suite)}


def test_gate_a_model_measures_it_in_process(cli, tmp_path, fake_cpu):
    model = tmp_path / "tiny_model.py"
    model.write_text(
        textwrap.dedent(
            """
            import torch

            class Model(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = torch.nn.Linear(32, 32)

                def forward(self, x):
                    return torch.relu(self.fc(x))

            def get_init_inputs():
                return []

            def get_inputs():
                return [torch.randn(8, 32)]
            """
        )
    )
    fast = ("--device", "cpu", "--warmup", "1", "--iters", "3")
    assert cli("diagnose", str(model), *fast, "-o", "d.json").code == 0
    assert cli("baseline", "save", "d.json", "-o", "b.json").code == 0
    assert baselines.load("b.json").identity.model == "tiny_model.py"
    result = cli("gate", str(model), "-b", "b.json", *fast, "--fail-on", "efficiency:off")
    assert result.code == 0, result.err
    assert "baseline of diagnose tiny_model.py (mode inference)" in result.out
    other = tmp_path / "other_model.py"
    other.write_text(model.read_text())
    result = cli("gate", str(other), "-b", "b.json", *fast)
    assert result.code == 2
    assert "baseline of model 'tiny_model.py', report of model 'other_model.py'" in result.error_line()


def _measured_in_turn(monkeypatch, reports):
    """`gate SUITE` measures these reports in turn (the first measurement, then each confirmation)."""
    calls = iter(reports)
    monkeypatch.setattr("roofline.gate.run.measure", lambda kind, target, options, **display: next(calls))


def _suite_scenario(tmp_path):
    suite = tmp_path / "gate-demo.yaml"
    suite.write_text("name: gate-demo\nworkloads:\n  - {kind: gemm, m: 16, n: 16, k: 16, dtype: bf16}\n")
    good = [bench_row("m=1", spread(1e-4, 40, 0.01)), bench_row("m=2", spread(2e-4, 40, 0.01))]
    _save(bench_report(good), tmp_path / "b.json")
    slow = [good[0], bench_row("m=2", spread(2e-4, 40, 0.01, shift=0.3))]
    return suite, bench_report(good), bench_report(slow)


def test_a_transient_is_measured_again_and_passes(cli, tmp_path, monkeypatch):
    suite, good, slow = _suite_scenario(tmp_path)
    _measured_in_turn(monkeypatch, [slow, good])
    result = cli("gate", str(suite), "-b", "b.json")
    assert result.code == 0, result.out
    assert "Measuring again to confirm (1/1): 1 point(s) did not pass" in result.err
    assert "re-measured to confirm (1/1), judged on the new measurement: gemm m=2 bf16" in result.out


def test_a_real_regression_fails_every_confirmation(cli, tmp_path, monkeypatch):
    suite, _, slow = _suite_scenario(tmp_path)
    _measured_in_turn(monkeypatch, [slow, slow, slow])
    result = cli("gate", str(suite), "-b", "b.json", "--confirm", "2")
    assert result.code == 1
    assert "Measuring again to confirm (2/2)" in result.err
    _measured_in_turn(monkeypatch, [slow])
    assert cli("gate", str(suite), "-b", "b.json", "--confirm", "0").code == 1  # judged on the first


def test_confirm_is_not_an_option_for_a_report(cli, tmp_path):
    _, good, _ = _suite_scenario(tmp_path)
    _write(good, tmp_path / "r.json")
    result = cli("gate", "r.json", "-b", "b.json", "--confirm", "2")
    assert result.code == 2 and "--confirm: not an option for a report" in result.error_line()
