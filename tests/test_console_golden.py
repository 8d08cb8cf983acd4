"""The console view of `roofline diagnose` on every example model, against committed golden text.

Real loading and counting on the CPU; the op times of a modelled CPU (as tests/test_diagnose_cli.py's, with bf16
roofs too) and fake roofs, so the text depends on the counted ops only, never on the host. The golden files hold
what the console showed before the view was rendered from the report (issue 25): a change to the console is a
change to them. Regenerate them (after checking the difference is meant) with ROOFLINE_REGEN_GOLDEN=1.
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
