"""A first hour that works as written (issue 28, item 8): every `roofline` command of the README runs on a CPU as
written (or is named here as needing a GPU, with the reason), a CPU report given to `predict` is one line, and the
test suite writes nothing under the user's home (tests/conftest.py redirects every cache: calibrations,
matplotlib's, torch.compile's, Triton's)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REDIRECTED, SESSION_TMP
from diagnose_devices import CPU as FAKE_CPU

ROOT = Path(__file__).resolve().parent.parent

#: README commands that do not run on a CPU-only machine, each with its reason (the README says so beside them)
NEEDS_A_GPU = {
    "roofline diagnose workloads/models/gelu_chain_unfused.py --predict h200-sxm": "predicts a GPU's diagnosis",
    "roofline bench bench-gpu -o run1.json": "the GPU runner's CI flow (bf16 suite)",
    "roofline bench bench-gpu -o run2.json": "the GPU runner's CI flow",
    "roofline baseline save run1.json run2.json -o baseline.json": "the GPU runner's CI flow (its two runs)",
    "roofline gate bench-gpu --baseline baseline.json --junit gate.xml": "the GPU runner's CI flow",
    "roofline bench gemm -m 1024,4096,8192 -n 8192 -k 8192 --dtype bf16": "the GPU block: bf16 GEMMs of 8192",
    "roofline bench attention --seq 1024,4096 --heads 32 --impl naive,sdpa --causal": "the GPU block",
    "roofline bench bench-gpu -o bench.json": "the GPU block",
}
#: runs on a CPU, but measures this machine for real (tens of seconds): tests/test_calibrate.py runs the command
NOT_RUN_HERE = {"roofline calibrate": "measures the machine's ceilings for real (tens of seconds)"}


def readme_commands() -> list[str]:
    """Every `roofline ...` command of the README's bash blocks, in order: continuations joined, comments and
    `;` separated commands split."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            code = re.split(r"\s#\s|\s{2,}#", line)[0]
            for part in code.split(";"):
                part = " ".join(part.split())
                if part.startswith("roofline "):
                    commands.append(part)
    return commands


def test_the_exemptions_are_readme_commands():
    commands = readme_commands()
    assert len(commands) > 25
    assert set(NEEDS_A_GPU) | set(NOT_RUN_HERE) <= set(commands)


def test_every_readme_command_runs_on_a_cpu_as_written(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))  # no calibration
    for name in ("workloads", "benchmarks", "hardware_specs", "tests"):  # the checkout the README runs in
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    ran = []
    for command in readme_commands():
        if command in NEEDS_A_GPU or command in NOT_RUN_HERE:
            continue
        args, _, redirect = command.partition(" > ")
        result = cli(*shlex.split(args)[1:])
        assert result.code == 0, f"{command}\n{result.err}"
        if redirect:
            json.loads(result.out)  # `--json > report.json`: one JSON document
        ran.append(command)
    assert "roofline diagnose workloads/models/gelu_chain_unfused.py --device cpu" in ran
    assert any(command.startswith("roofline predict benchmarks/") for command in ran)
    for made in ("roofline-report.json", "chart.png", "report.html", "predicted.png", "cpu.json"):
        assert (tmp_path / made).is_file(), made


def test_predict_of_a_cpu_report_is_one_line(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    report = tmp_path / "cpu.json"
    made = cli(
        "bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cpu", "--max-time", "0.02", "-o", str(report)
    )
    assert made.code == 0, made.err
    result = cli("predict", str(report), "--device", "h200-sxm")
    assert result.code == 2
    assert result.error_line() == (
        "Error: the report was measured on a CPU: predict scales a GPU's report to other GPUs (a CPU has no spec "
        "sheet to scale from): run bench or diagnose on a GPU and predict that report"
    )


# -------------------------------------------------------------------------------------------------- hermetic


def test_every_cache_of_the_session_is_redirected_under_one_temporary_directory():
    from roofline.measure.calibration import cache_dir

    home = Path.home().resolve()
    for name in REDIRECTED:
        assert Path(os.environ[name]).resolve().is_relative_to(Path(SESSION_TMP).resolve()), name
    assert not cache_dir().resolve().is_relative_to(home)
    matplotlib = pytest.importorskip("matplotlib")
    for where in (matplotlib.get_cachedir(), matplotlib.get_configdir()):
        assert Path(where).resolve().is_relative_to(Path(SESSION_TMP).resolve()), where


#: a slice of the suite that touches every cache: a CPU bench (torch), a diagnosis in a child process (the CPU's
#: measured roofs, a calibration written), a chart (matplotlib's font cache)
SLICE = (
    "tests/test_bench.py::test_cli_gemm_on_cpu_writes_a_report_with_samples",
    "tests/test_diagnose_exit.py::test_piped_output_is_complete_and_atexit_handlers_run",
    "tests/test_plot_cli.py::test_plot_a_single_point_report_and_several_devices",
)


@pytest.mark.slow
def test_a_slice_of_the_suite_writes_nothing_under_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in REDIRECTED}
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(HOME=str(home), PYTHONPATH=path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", *SLICE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "3 passed" in done.stdout
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
