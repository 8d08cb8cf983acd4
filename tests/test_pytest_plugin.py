"""The roofline_gate fixture (roofline/pytest_plugin.py) in pytester runs (subprocesses: torch registers its ops once
per process, so the cases share runs: three in all): a modelled CPU (op time = twice its roofline time, so efficiency
is 50% whatever the host), min_efficiency passing and failing, a baseline missing, saved with
--roofline-save-baselines, then gated."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest_plugins = ["pytester"]

CONFTEST = (
    """
import dataclasses
import sys

import pytest
from roofline.report.records import OpTiming, Timing

sys.path.insert(0, TESTS)
from diagnose_devices import CPU as SHARED_CPU

CPU = dataclasses.replace(SHARED_CPU, launch_floor_s=0.0)  # no floor: every op's efficiency is exactly 50%
""".replace("TESTS", repr(str(Path(__file__).resolve().parent)))
    + """


def modelled(model, inputs, kwargs, records, *, device, mode, warmup, iters, **_):
    ops = []
    for r in records:
        roof = 0.0 if not r.counted else max(r.flops / 1e11, r.bytes / 2e10)
        time = 2 * roof if roof > 0 else 1e-9
        ops.append(OpTiming(index=r.index, device_time_s=time, kernels=0, samples_s=(time,) * iters))
    return Timing(device="cpu", iterations=iters, wall_s=sum(o.device_time_s for o in ops), ops=ops)


@pytest.fixture(autouse=True)
def modelled_cpu(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    monkeypatch.setattr("roofline.diagnose.profile.time_model", modelled)
"""
)

TESTS = """
import torch

A = torch.randn(128, 128)

def mm(a):
    return a @ a

def test_efficient_enough(roofline_gate):
    result = roofline_gate(mm, (A,), min_efficiency=0.4, device="cpu", iters=3)
    assert result.findings is not None

def test_not_efficient_enough(roofline_gate):
    roofline_gate(mm, (A,), min_efficiency=0.9, device="cpu", iters=3)

def test_against_a_baseline(roofline_gate):
    roofline_gate(mm, (A,), baseline="baselines/mm.json", device="cpu", iters=3)
"""


def _plugin_args() -> list[str]:
    installed = any(ep.value == "roofline.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "roofline.pytest_plugin"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_kernels=TESTS)
    return pytester


def test_min_efficiency_passes_and_fails_a_missing_baseline_and_no_threshold_fail(project):
    # one pytest run for the four cases (each run is a process that imports torch: seconds)
    project.makepyfile(test_bad="def test_bad(roofline_gate):\n    roofline_gate(lambda: None)\n")
    result = project.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=3)
    result.stdout.fnmatch_lines(["*test_not_efficient_enough: 50.0% of the roofline, below min_efficiency=90%*"])
    result.stdout.fnmatch_lines(["*no baseline at baselines/mm.json: run `pytest --roofline-save-baselines`*"])
    result.stdout.fnmatch_lines(["*give min_efficiency=, baseline= or both*"])
    assert not (project.path / "baselines").exists()  # a missing baseline is not written without the option
    for failed in ("test_kernels.py::test_not_efficient_enough", "test_kernels.py::test_against_a_baseline",
                   "test_bad.py::test_bad"):  # fmt: skip
        result.stdout.fnmatch_lines([f"FAILED {failed}*"])  # so the one that passed is test_efficient_enough


def test_baseline_saved_then_gated(project):
    args = [*_plugin_args(), "-k", "baseline", "-p", "no:cacheprovider"]
    saved = project.runpytest_subprocess(*args, "--roofline-save-baselines")
    saved.assert_outcomes(passed=1)
    assert (project.path / "baselines" / "mm.json").is_file()
    gated = project.runpytest_subprocess(*args)
    gated.assert_outcomes(passed=1)
