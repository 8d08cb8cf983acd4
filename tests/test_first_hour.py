"""A first hour that works as written (issue 28, item 8): a CPU report given to `predict` is one line, and the
test suite writes nothing under the user's home (every command of the README and docs/ runs as written on a CPU:
tests/test_docs_commands.py) (tests/conftest.py redirects every cache: calibrations,
matplotlib's, torch.compile's, Triton's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REDIRECTED, SESSION_TMP
from diagnose_devices import CPU as FAKE_CPU

ROOT = Path(__file__).resolve().parent.parent


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


#: a slice of the suite that touches every cache: a CPU bench (torch; the CPU's calibration, written into the
#: session's cache by conftest's seeded_cpu_calibration through cache_dir()), a diagnosis in a child process, a chart
#: (matplotlib's font cache)
SLICE = (
    "tests/test_bench.py::test_cli_gemm_on_cpu_writes_a_report_with_samples",
    "tests/test_diagnose_exit.py::test_piped_output_is_complete_and_atexit_handlers_run",
    "tests/test_plot_cli.py::test_plot_a_single_point_report_and_several_devices",
)


#: pytest's own ./.pytest_cache and pytest-benchmark's ./.benchmarks (where installed) stay out of the checkout
NO_CACHES = ("-p", "no:cacheprovider", "-p", "no:benchmark")


@pytest.mark.slow
def test_a_slice_of_the_suite_writes_nothing_under_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in REDIRECTED}
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(HOME=str(home), PYTHONPATH=path)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", *NO_CACHES, *SLICE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "3 passed" in done.stdout
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
