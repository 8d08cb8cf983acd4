"""Every command of README.md and docs/*.md runs as written on the CPU (tests/docs_commands.py finds them), each in
an empty directory of its own that holds the files the docs name (a model, reports, a suite, a sheet), with this
session's cache and fake CPU roofs (no calibration). Skipped: those marked GPU-only (without a GPU) and those
marked slow (docs/README.md, "Commands in the docs"). A command that exits 2 on a CPU (no --device, a GPU-only
dtype) fails here."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from diagnose_devices import CPU as FAKE_CPU
from docs_commands import ROOT, DocCommand, commands

COMMANDS = commands()
VERDICTS = (1, 3)  # `roofline gate`: regression, too noisy to decide (docs/ci.md; 2 and 4 are failures)

MODEL = '''"""A tiny model in both conventions: Model + get_inputs(), and build() (with a --layers script argument)."""
import argparse
import sys

import torch
from torch import nn


class Model(nn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.body = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.GELU()) for _ in range(layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def get_inputs():
    return [torch.randn(8, 16)]


def build():
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args(sys.argv[1:])
    return Model(args.layers), (torch.randn(8, 16),)
'''

SUITE = "name: tiny\nworkloads:\n  - {kind: gemm, m: [8, 16], n: 16, k: 16, dtype: fp32}\n"


def _cli(args: list[str]) -> tuple[int, str, str]:
    import contextlib
    import io

    from roofline.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        else:
            code = 0
    return code, out.getvalue(), err.getvalue()


def _run(args: list[str]) -> None:
    code, _, err = _cli(args)
    assert code == 0, f"roofline {' '.join(args)}: exit {code}\n{err}"


def _as_measured_on_an_h100(source: Path, target: Path) -> None:
    """A CPU report made into one of an H100 (predict scales GPU reports; this machine has none)."""
    import json

    from roofline.report.schema import device_info
    from roofline.roofs import device_from_sheet
    from roofline.specs.loader import load_registry

    h100 = device_from_sheet(load_registry([]).get("h100-sxm"))
    document = json.loads(source.read_text())
    document["devices"] = [device_info(h100).model_dump(mode="json")]
    document.pop("machine", None)
    for row in document["rows"]:
        if "device" in row:
            row["device"] = "h100-sxm"
    target.write_text(json.dumps(document))


def _calibration(sheet: str, path: Path) -> None:
    """A GPU's calibration as `roofline calibrate --json` writes it (predict --calibration)."""
    from datetime import datetime, timezone

    from roofline.measure.calibration import Calibration, Ceiling, Machine

    bandwidth, compute = {"h100-sxm": (3.0e12, 6.6e14), "h200-sxm": (4.2e12, 6.8e14)}[sheet]
    ceilings = [
        Ceiling(name="dram-copy", kind="bandwidth", value=bandwidth, unit="B/s"),
        Ceiling(name="gemm-bf16", kind="compute", value=compute, unit="FLOP/s", dtype="bf16", phase="sustained"),
    ]
    machine = Machine(kind="cuda", name=sheet, sheet=sheet)
    calibration = Calibration(
        created_utc=datetime(2026, 11, 24, tzinfo=timezone.utc), machine=machine, ceilings=ceilings
    )
    path.write_text(calibration.model_dump_json(by_alias=True))


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the docs' commands name, made once (in-process, fake CPU roofs)."""
    import roofline.roofs

    where = tmp_path_factory.mktemp("docs-library")
    saved_roofs, saved_cwd = roofline.roofs.cpu_roofs, Path.cwd()
    roofline.roofs.cpu_roofs = lambda torch_: (FAKE_CPU, ["test roofs"])
    try:
        os.chdir(where)
        (where / "ci").mkdir()
        (where / "model.py").write_text(MODEL)
        (where / "my_model.py").write_text(MODEL)
        for suite in ("ci/suite.yaml", "my-suite.yaml"):
            (where / suite).write_text(SUITE)
        shutil.copy(ROOT / "hardware_specs" / "h100-sxm.yaml", where / "my-gpu.yaml")
        shutil.copy(ROOT / "tests" / "hf_configs" / "llama-gqa.json", where / "config.json")
        fast = ("--device", "cpu", "--max-time", "10ms")
        for name in ("run1.json", "run2.json", "run3.json", "report.json", "bench.json"):
            _run(["bench", "ci/suite.yaml", *fast, "-o", name])
        for name in ("ci/baseline-h100.json", "baseline.json"):
            _run(["baseline", "save", "run1.json", "run2.json", "-o", name])
        for name in ("before.json", "after.json", "verified.json", "cpu-diagnosis.json"):
            _run(["diagnose", "model.py", "--device", "cpu", "--iters", "3", "-o", name])
        _run(["diagnose", "model.py", "--device", "cpu", "--iters", "3", "--dtype", "bf16", "-o", "bf16.json"])
        _run(["baseline", "save", "bf16.json", "-o", "ci/baseline-model.json"])
        _as_measured_on_an_h100(where / "cpu-diagnosis.json", where / "roofline-report.json")  # predict's input
        _as_measured_on_an_h100(where / "cpu-diagnosis.json", where / "gpt2.json")
        _as_measured_on_an_h100(where / "bench.json", where / "bench.json")
        for sheet in ("h100", "h200"):
            _calibration(f"{sheet}-sxm", where / f"{sheet}.json")
    finally:
        os.chdir(saved_cwd)
        roofline.roofs.cpu_roofs = saved_roofs
    return where


def _gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.xdist_group("docs-library")  # share the module's `library` (a dozen runs) on one worker
@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_docs_command_runs_on_the_cpu(command: DocCommand, library, tmp_path, monkeypatch, cli):
    if command.slow:
        pytest.skip("marked slow")
    if command.gpu and not _gpu():
        pytest.skip("marked GPU-only")
    shutil.copytree(library, tmp_path, dirs_exist_ok=True)
    for name in ("workloads", "benchmarks", "hardware_specs", "tests"):  # the checkout the docs run in
        if not (tmp_path / name).exists():
            (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    for args, target, append in command.argv_lists():
        result = cli(*args)
        if args[0] == "gate" and result.code in VERDICTS:
            continue  # ran: a regression or a noisy comparison on a busy CPU is a verdict, not a broken command
        assert result.code == 0, f"{command.id}: `{command.text}` exits {result.code} on the CPU:\n{result.err[-2000:]}"
        if target is not None:
            path = Path(os.path.expandvars(target))
            with path.open("a" if append else "w", encoding="utf-8") as file:
                file.write(result.out)


def test_the_extractor_reads_blocks_markers_continuations_and_tables(tmp_path, monkeypatch):
    import docs_commands

    doc = tmp_path / "docs" / "x.md"
    doc.parent.mkdir()
    doc.write_text(
        "```bash\n"
        "roofline specs list            # every sheet\n"
        "roofline bench gemm -m 8192 \\\n"
        "    -n 8192   # GPU-only: big\n"
        "pip install roofline\n"
        "roofline calibrate   # slow\n"
        "```\n"
        "```text\nroofline specs list\n```\n"
        "```console gpu-only\n$ roofline bench bench-gpu > out.json; roofline specs list\n```\n"
        "| a | `roofline analyze gemm -m 8 -d b200` | `roofline plot` | `roofline predict REPORT.json --json` |\n"
        "| GPU-only | `roofline bench gemm -m 8192 -n 8192` | `roofline specs list --json` |\n"
        "| b | `roofline specs list --json` | not on a GPU only |\n"
    )
    monkeypatch.setattr(docs_commands, "ROOT", tmp_path)
    found = docs_commands.commands([doc])
    assert [(c.line, c.text, c.gpu, c.slow) for c in found] == [
        (2, "roofline specs list            # every sheet", False, False),
        (3, "roofline bench gemm -m 8192 -n 8192   # GPU-only: big", True, False),
        (6, "roofline calibrate   # slow", False, True),
        (12, "$ roofline bench bench-gpu > out.json; roofline specs list", True, False),
        (14, "roofline analyze gemm -m 8 -d b200", False, False),
        (15, "roofline bench gemm -m 8192 -n 8192", True, False),
        (15, "roofline specs list --json", True, False),
        (16, "roofline specs list --json", False, False),
    ]
    assert found[1].argv_lists() == [(["bench", "gemm", "-m", "8192", "-n", "8192"], None, False)]
    assert found[3].argv_lists() == [(["bench", "bench-gpu"], "out.json", False), (["specs", "list"], None, False)]
    assert found[0].id == "docs/x.md:2"
