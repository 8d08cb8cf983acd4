"""`roofline diagnose` end to end on the CPU: the example models give their expected finding (real loading and
counting; the op times of a modelled CPU, so that no finding depends on the host's speed; fake CPU roofs so no
calibration runs), the report's shape from a fully real run, the console report, injected stages, and bad input
as one line with its exit code (the user's traceback for their own errors)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from diagnose_devices import CPU_SLOW_LAUNCH as FAKE_CPU
from diagnose_doubles import timed_by

from roofline.diagnose.pipeline import DiagnoseOptions, diagnose
from roofline.report.records import OpRecord, OpTiming, Timing

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "workloads" / "models"

FAST = ("--device", "cpu", "--warmup", "1", "--iters", "2")

# A modelled CPU: every op doing work takes a fixed dispatch cost plus its roofline time at a fixed efficiency, a
# view only its dispatch; the iteration adds a share of Python overhead. Findings then depend on the counted ops,
# never on how fast (or how busy) the host is.
DISPATCH_S = 4e-6  # below FAKE_CPU's 5 us launch floor: a tiny op is "short"
VIEW_S = 1e-6
EFFICIENCY = 0.5
PYTHON_SHARE = 0.1


def modelled_time(record: OpRecord) -> float:
    if record.math == "none" or not record.counted:
        return VIEW_S
    roof = FAKE_CPU.roof(record.dtype or "fp32", record.math)
    roof_time = max(record.flops / roof.flops_per_s, record.bytes / FAKE_CPU.dram_bandwidth)
    return DISPATCH_S + roof_time / EFFICIENCY


def modelled_timing(model, inputs, kwargs, records, *, device, mode, warmup, iters, **_):
    """The timing stage on the modelled CPU (the model is not run)."""
    ops = [OpTiming(index=r.index, device_time_s=modelled_time(r), kernels=0) for r in records]
    op_time = sum(t.device_time_s for t in ops)
    return Timing(device="cpu", iterations=iters, wall_s=op_time * (1 + PYTHON_SHARE), ops=ops)


@pytest.fixture
def fake_cpu(monkeypatch):
    """CPU roofs without running a calibration."""
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    return FAKE_CPU


@pytest.fixture
def modelled_cpu(monkeypatch, fake_cpu):
    """FAKE_CPU's roofs and the modelled CPU's op times instead of the profiler's (counting still runs the model)."""
    monkeypatch.setattr("roofline.diagnose.profile.time_model", modelled_timing)
    return fake_cpu


def _error_line(result) -> str:
    lines = result.err.strip().splitlines()
    assert lines and lines[-1].startswith("Error: "), result.err
    return lines[-1]


# ------------------------------------------------------------------------------------------- end to end


@pytest.mark.parametrize(
    ("model", "rule"),
    [
        ("rnn_loop", "sequential-loop"),
        ("gelu_chain_unfused", "elementwise-chain"),
        ("attention_naive", "naive-attention"),
        ("launch_bound_tiny_ops", "launch-bound"),
    ],
)
def test_example_models_give_their_expected_top_finding(cli, tmp_path, modelled_cpu, model, rule):
    out = tmp_path / "report.json"
    result = cli("diagnose", str(MODELS / f"{model}.py"), *FAST, "--json", "-o", str(out))
    assert result.code == 0, result.err
    doc = result.json()
    findings = doc["findings"]
    assert findings, f"{model}: no finding"
    assert findings[0]["rule"] == rule, [(f["rule"], f["saving_s"]) for f in findings]
    top = findings[0]
    assert top["evidence"] and top["technique"] and top["properties"]
    assert top["best_time_s"] is not None and top["gain"] > 1
    # the module names its expected finding
    assert f'EXPECTED_FINDING = "{rule}"' in (MODELS / f"{model}.py").read_text()


def test_report_shape(cli, tmp_path, fake_cpu):
    from roofline.report.schema import read_report

    out = tmp_path / "sub" / "report.json"
    result = cli("diagnose", str(MODELS / "gelu_chain_unfused.py"), *FAST, "-o", str(out))
    assert result.code == 0, result.err
    assert f"Report written to {out}" in result.err
    report = read_report(out)
    assert report.source == "diagnose" and report.devices[0].name == "cpu"
    assert report.rows, "no op rows"
    for row in report.rows:
        for key in ("flops", "bytes", "intensity", "bound", "time_s", "op", "module", "efficiency", "roof"):
            assert key in row
    extra = report.model_extra
    assert set(extra) >= {"diagnose", "summary", "aggregates", "findings", "uncounted"}
    assert extra["diagnose"]["convention"] == "class-model" and extra["diagnose"]["iters"] == 2
    summary = extra["summary"]
    assert summary["flops"] == sum(r["flops"] for r in report.rows)
    assert summary["bytes"] == sum(r["bytes"] for r in report.rows)
    assert summary["device_kind"] == "cpu" and summary["gpu_idle_share"] is None
    assert {"ops", "op_types", "modules"} <= set(extra["aggregates"])
    assert not list(out.parent.glob(".*.tmp"))  # written atomically


def test_console_report(cli, tmp_path, modelled_cpu):
    result = cli("diagnose", str(MODELS / "attention_naive.py"), *FAST, "-o", str(tmp_path / "r.json"), "--top", "3")
    assert result.code == 0, result.err
    out = " ".join(result.out.split())  # wrapped lines joined
    assert "Test CPU (cpu) · measured roofs" in out and "launch floor 5 us" in out
    for text in ("Summary", "wall time", "MFU", "MBU", "Top ops by time", "Top modules by time", "Findings"):
        assert text in out, text
    assert "naive-attention" not in out  # the console names the technique, the report the rule
    assert "scaled_dot_product_attention" in out and "evidence:" in out and "at most" in out
    assert "attainable" in out and "eff." in out


def test_sdpa_twin_has_no_naive_attention_finding(cli, tmp_path, modelled_cpu):
    result = cli("diagnose", str(MODELS / "attention_sdpa.py"), *FAST, "--json", "-o", str(tmp_path / "r.json"))
    assert result.code == 0, result.err
    assert "naive-attention" not in [f["rule"] for f in result.json()["findings"]]


def test_script_arguments_reach_the_model(cli, tmp_path, fake_cpu):
    model = tmp_path / "args_model.py"
    model.write_text(
        textwrap.dedent(
            """
            import sys
            import torch
            WIDTH = int(sys.argv[sys.argv.index("--width") + 1])
            model = torch.nn.Linear(WIDTH, WIDTH)
            example_inputs = (torch.randn(2, WIDTH),)
            """
        )
    )
    result = cli("diagnose", str(model), *FAST, "--json", "-o", str(tmp_path / "r.json"), "--", "--width", "24")
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["diagnose"]["argv"] == ["--width", "24"] and doc["diagnose"]["convention"] == "model-variable"
    assert any(r["input_shapes"][-1] == [24, 24] for r in doc["rows"] if r["op"] == "aten::addmm")


# ------------------------------------------------------------------------------------------- injected stages


def test_pipeline_with_a_fake_timing_stage(fake_cpu):
    def fake_time(model, inputs, kwargs, records, *, device, mode, warmup, iters, **_):
        ops = [OpTiming(index=r.index, device_time_s=1e-3, kernels=0) for r in records]
        return Timing(device="cpu", iterations=iters, wall_s=1e-3 * len(ops) + 1e-3, ops=ops)

    result = diagnose(
        MODELS / "gelu_chain_unfused.py", DiagnoseOptions(device="cpu", iters=7), boundaries=timed_by(fake_time)
    )
    s = result.placed.summary
    assert s.wall_s == pytest.approx(1e-3 * len(result.records) + 1e-3)
    assert s.op_time_s == pytest.approx(1e-3 * len(result.records)) and s.iterations == 7
    assert all(p.time_s == 1e-3 for p in result.placed.points)
    assert result.findings[0].rule == "elementwise-chain"
    report = result.report("roofline diagnose test")
    assert report.source == "diagnose" and len(report.rows) == len(result.placed.points)


# ------------------------------------------------------------------------------------------- bad input


def test_missing_file(cli, tmp_path):
    result = cli("diagnose", str(tmp_path / "nope.py"), "--device", "cpu")
    assert result.code == 2
    assert "not found" in _error_line(result) and "Traceback" not in result.err


def test_file_with_no_convention_lists_the_accepted_ones(cli, tmp_path):
    model = tmp_path / "empty.py"
    model.write_text("import torch\nx = 1\n")
    result = cli("diagnose", str(model), "--device", "cpu")
    assert result.code == 2
    line = _error_line(result)
    assert "get_inputs()" in line and "--entry" in line and "example_inputs" in line
    assert "Traceback" not in result.err


def test_exception_in_the_users_forward_shows_their_traceback(cli, tmp_path, fake_cpu):
    model = tmp_path / "broken.py"
    model.write_text(
        textwrap.dedent(
            """
            import torch

            class Model(torch.nn.Module):
                def forward(self, x):
                    return self.helper(x)

                def helper(self, x):
                    raise ValueError("shapes do not match in my model")

            def get_init_inputs():
                return ()

            def get_inputs():
                return (torch.randn(4),)
            """
        )
    )
    result = cli("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))
    assert result.code == 1
    assert "Traceback (most recent call last)" in result.err and str(model) in result.err
    assert "in helper" in result.err and "ValueError: shapes do not match in my model" in result.err
    assert "roofline/diagnose" not in result.err  # our frames are trimmed
    assert _error_line(result).startswith("Error: the model raised ValueError")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("code", [0, 3])
def test_sys_exit_in_the_users_forward_is_a_user_error_never_a_pass(cli, tmp_path, fake_cpu, code):
    model = tmp_path / "exits.py"
    model.write_text(
        textwrap.dedent(
            f"""
            import sys
            import torch

            class Model(torch.nn.Module):
                def forward(self, x):
                    sys.exit({code})

            def get_init_inputs():
                return ()

            def get_inputs():
                return (torch.randn(4),)
            """
        )
    )
    result = cli("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))
    assert result.code == 1
    assert _error_line(result) == f"Error: the model exited while running (SystemExit: {code}): a forward must return"
    assert "in forward" in result.err and "roofline/diagnose" not in result.err
    assert not (tmp_path / "r.json").exists()


def test_cuda_without_a_gpu_is_one_line(cli, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = cli("diagnose", str(MODELS / "gelu_chain_unfused.py"), "--device", "cuda")
    assert result.code == 2 and "sees no CUDA GPU" in _error_line(result) and len(result.err.splitlines()) == 1


def test_a_model_that_runs_no_ops(cli, tmp_path, fake_cpu):
    model = tmp_path / "idle.py"
    model.write_text("import torch\nmodel = lambda x: x\nexample_inputs = (torch.randn(3),)\n")
    result = cli("diagnose", str(model), *FAST, "-o", str(tmp_path / "r.json"))
    assert result.code == 2 and "ran no tensor operations" in _error_line(result)
    assert len(result.err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--roofs", "magic"), "--roofs"),
        (("--iters", "0"), "--iters"),
        (("--mode", "sideways"), "--mode"),
        (("--dtype", "int3"), "--dtype"),
        (("--top", "0"), "--top"),
        (("--sheet", "h100-sxm"), "--sheet names a GPU spec sheet"),
    ],
)
def test_bad_options_are_one_line(cli, tmp_path, fake_cpu, args, needle):
    result = cli("diagnose", str(MODELS / "gelu_chain_unfused.py"), "--device", "cpu", *args)
    assert result.code == 2, result.err
    assert needle in _error_line(result) and len(result.err.strip().splitlines()) == 1


def test_help_does_not_import_torch():
    code = textwrap.dedent(
        """
        import sys
        from roofline.cli import main
        try:
            main(["diagnose", "--help"])
        except SystemExit:
            pass
        print("TORCH" if "torch" in sys.modules else "NO-TORCH", file=sys.stderr)
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.stderr.strip().splitlines()[-1] == "NO-TORCH", result.stderr


def test_json_output_is_json_even_when_the_model_prints(cli, tmp_path, modelled_cpu):
    model = tmp_path / "chatty.py"
    model.write_text(
        textwrap.dedent(
            """
            import torch
            print("loading my model")

            class Model(torch.nn.Module):
                def forward(self, x):
                    print("in forward")
                    return x * 2

            def get_init_inputs():
                return ()

            def get_inputs():
                return (torch.randn(64),)
            """
        )
    )
    result = cli("diagnose", str(model), *FAST, "--json", "-o", str(tmp_path / "r.json"))
    assert result.code == 0, result.err
    assert json.loads(result.out)["source"] == "diagnose"
    assert "loading my model" in result.err and "in forward" in result.err
