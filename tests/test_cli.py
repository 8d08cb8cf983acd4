"""The CLI end to end: exact output, JSON shape, one-line errors with exit code 2, help and docs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

GEMM_CARD = """\
gemm m=4096 n=4096 k=4096 on NVIDIA H100 SXM5 80GB (h100-sxm), roofs from spec sheet
  FLOPs       137.4 GFLOP
  bytes       100.7 MB (A 33.55 MB, B 33.55 MB, C 33.55 MB)
  intensity   1,365.3 FLOP/B
  ridge       295.3 FLOP/B (fp16 tensor 989.4 TFLOP/s / DRAM 3.35 TB/s)
  bound       compute
  attainable  989.4 TFLOP/s
  min time    143 us (compute 139 us, memory 30 us, launch 4 us for 1 kernel)
  fits        sparsity + separability + symmetry

Findings (bottleneck → property: technique; roofline bound on the gain)
"""


def test_analyze_gemm_exact_card(cli):
    result = cli("analyze", "gemm", "-m", "4096", "-n", "4096", "-k", "4096", "--dtype", "fp16", "--device", "h100-sxm")
    assert result.code == 0, result.err
    assert result.out.startswith(GEMM_CARD)
    assert "2:4 structured sparsity" in result.out
    assert result.err == ""


def test_analyze_gemm_json_worked_example(cli):
    result = cli(
        "analyze",
        "gemm",
        "-m",
        "4096",
        "-n",
        "4096",
        "-k",
        "4096",
        "--dtype",
        "fp16",
        "-d",
        "h100-sxm",
        "--json",
    )
    assert result.code == 0, result.err
    doc = result.json()
    assert doc["schema"] == "roofline.report" and doc["version"] == 2  # 2: rows store roof_time_s, efficiency
    (row,) = doc["rows"]
    assert row["flops"] == 2 * 4096**3 == 137_438_953_472
    assert row["bytes"] == 3 * 4096 * 4096 * 2 == 100_663_296
    assert row["intensity"] == pytest.approx(1365.33, abs=0.01)
    assert row["ridge"] == pytest.approx(295.3, abs=0.1)
    assert row["bound"] == "compute"
    assert row["time_s"] == pytest.approx(2 * 4096**3 / 989.4e12 + 4e-6)
    for key in ("flops", "bytes", "intensity", "bound", "time_s"):
        assert key in row


def test_sweep_gives_one_row_per_value_and_walks_across_the_ridge(cli):
    result = cli(
        "analyze",
        "gemm",
        "-m",
        "1,8,64,256,4096",
        "-n",
        "4096",
        "-k",
        "4096",
        "--dtype",
        "bf16",
        "-d",
        "h100-sxm",
        "--json",
    )
    rows = result.json()["rows"]
    assert [r["params"]["m"] for r in rows] == [1, 8, 64, 256, 4096]
    assert [r["bound"] for r in rows] == ["memory"] * 4 + ["compute"]
    intensities = [r["intensity"] for r in rows]
    assert intensities == sorted(intensities)


def test_devices_side_by_side(cli):
    result = cli(
        "analyze",
        "gemm",
        "-m",
        "256",
        "-n",
        "4096",
        "-k",
        "4096",
        "--dtype",
        "bf16",
        "-d",
        "h100-sxm,a100-sxm-80gb",
    )
    assert result.code == 0, result.err
    assert "h100-sxm" in result.out and "a100-sxm-80gb" in result.out
    assert "gemm m=256 n=4096 k=4096" in result.out  # the shared shape, once
    header = next(line for line in result.out.splitlines() if " · memory" in line)
    # ridge 295 on the H100 (memory-bound at 227.6 FLOP/B), 153 on the A100 (compute-bound)
    assert header.index("memory") < header.index("compute")
    rows = cli(
        "analyze",
        "gemm",
        "-m",
        "256",
        "-n",
        "4096",
        "-k",
        "4096",
        "--dtype",
        "bf16",
        "-d",
        "h100-sxm,a100-sxm-80gb",
        "--json",
    ).json()["rows"]
    assert [(r["device"], r["bound"]) for r in rows] == [("h100-sxm", "memory"), ("a100-sxm-80gb", "compute")]


def test_output_file_is_the_json_report(cli, tmp_path):
    out = tmp_path / "sub" / "report.json"
    result = cli("analyze", "gemm", "-m", "64", "-n", "64", "-k", "64", "-d", "h100", "-o", str(out))
    assert result.code == 0, result.err
    from roofline.report.schema import read_report

    report = read_report(out)
    assert report.rows[0]["flops"] == 2 * 64**3
    assert not list(out.parent.glob(".*.tmp"))


def test_fp32_matmul_points_at_tf32(cli):
    row = cli(
        "analyze", "gemm", "-m", "4096", "-n", "4096", "-k", "4096", "--dtype", "fp32", "-d", "h100", "--json"
    ).json()["rows"][0]
    assert row["roof"] == "fp32 vector"
    top = row["findings"][0]
    assert top["rule"] == "fp32-matmul" and top["properties"] == ["redundancy"]
    # TF32 roof 494.7 vs fp32 66.9: the gain is bounded by their ratio
    assert row["time_s"] / top["best_time_s"] == pytest.approx(494.7 / 66.9, rel=0.02)
    tf32 = cli(
        "analyze",
        "gemm",
        "-m",
        "4096",
        "-n",
        "4096",
        "-k",
        "4096",
        "--dtype",
        "fp32",
        "--tf32",
        "-d",
        "h100",
        "--json",
    ).json()["rows"][0]
    assert tf32["roof"] == "tf32 tensor"


def test_wave_quantization_1792_vs_1793_on_an_a100(cli):
    # The source text: 256x128 tiles, 1792^2 -> 98 tiles (one wave on 108 SMs), 1793^2 -> 120 tiles (two).
    rows = cli(
        "analyze",
        "gemm",
        "-m",
        "1792,1793",
        "-n",
        "1792,1793",
        "-k",
        "4096",
        "--dtype",
        "fp16",
        "-d",
        "a100-sxm-80gb",
        "--json",
    ).json()["rows"]
    by_shape = {(r["params"]["m"], r["params"]["n"]): r for r in rows}
    assert all(f["rule"] != "wave-quantization" for f in by_shape[(1792, 1792)]["findings"])
    wave = next(f for f in by_shape[(1793, 1793)]["findings"] if f["rule"] == "wave-quantization")
    assert "120 tiles on 108 SMs = 2 waves" in wave["evidence"]
    row = by_shape[(1793, 1793)]
    roof, launch = row["roof_time_s"], row["time_s"] - row["roof_time_s"]
    # 120 tiles in 2 waves of 108, each tile (edge tiles too) a whole 256x128 tile's time; 1792^2: 98 tiles in one
    # wave (98/108 busy)
    tile = 2 * 256 * 128 * 4096 / (312e12 / 108)
    assert wave["time_s"] == pytest.approx(2 * tile + launch)
    assert wave["time_s"] == pytest.approx(roof * 216 * 256 * 128 / 1793**2 + launch)
    assert wave["best_time_s"] == pytest.approx(roof * (1792 / 1793) ** 2 * 108 / 98 + launch)
    assert wave["best_time_s"] >= by_shape[(1792, 1792)]["time_s"]  # never below the 1792 GEMM's own roofline


def _error_line(result) -> str:
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("Error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["analyze", "gemm", "-m", "0", "-n", "1", "-k", "1", "-d", "h100"], "-m: '0' must be positive"),
        (["analyze", "gemm", "-m", "-5", "-n", "1", "-k", "1", "-d", "h100"], "-m"),
        (
            ["analyze", "gemm", "-m", "1", "-n", "1", "-k", "1", "-d", "h100", "--dtype", "fp99"],
            "unknown dtype 'fp99'",
        ),
        (["analyze", "gemm", "-m", "1", "-n", "1", "-k", "1", "-d", "h100-sxn"], "did you mean h100-sxm"),
        (
            ["analyze", "gemm", "-m", "1", "-n", "1", "-k", "1", "-d", "h100", "--bogus"],
            "No such option: --bogus",
        ),
        (["analyze", "gemm", "-m", "1,,2", "-n", "1", "-k", "1", "-d", "h100"], "empty item"),
        (
            ["analyze", "gemm", "-m", "1", "-n", "1", "-k", "1", "-d", "v100-sxm2", "--dtype", "bf16"],
            "no dense bf16",
        ),
        (["specs", "show", "nope-gpu"], "unknown device 'nope-gpu'"),
        (["analyze", "decode", "--model", "nope", "-d", "h100"], "unknown model 'nope': use one of gpt2"),
        (["analyze", "decode", "-d", "h100"], "give either --model"),
        (["analyze", "elementwise", "--op", "foo", "--numel", "8", "-d", "h100"], "unknown element-wise op 'foo'"),
        (["analyze", "attention", "--seq", "8", "--heads", "6", "--kv-heads", "4", "-d", "h100"], "must divide"),
        (["analyze", "suite", "no-such-suite", "-d", "h100"], "one of: bench-cpu, bench-gpu, transformer-ops"),
        (["specs", "validate", "/nonexistent/sheet.yaml"], "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, args, needle):
    result = cli(*args)
    assert result.code == 2
    assert needle in _error_line(result)


SHEET = """\
schema_version: 1
name: my-gpu
display_name: My GPU
vendor: other
architecture: test
compute_units: 10
compute_dense_tflops:
  vector: {fp32: 10}
  tensor: {fp16: 100}
memory:
  dram: {type: HBM, capacity_gb: 16, bandwidth_gb_per_s: 1000}
launch_floor_us: 5
sources: ["made up for a test"]
"""


@pytest.mark.parametrize(
    ("broken", "needle"),
    [
        (SHEET.replace("compute_units: 10", "compute_units: [10"), "invalid YAML"),
        (SHEET.replace("launch_floor_us: 5\n", ""), "launch_floor_us: required field is missing"),
        (SHEET + "colour: red\n", "colour: unknown key"),
        (
            SHEET.replace("bandwidth_gb_per_s: 1000", "bandwidth_gb_per_s: -1000"),
            "memory.dram.bandwidth_gb_per_s: must be a finite number from 0.001 to 1e+09 GB/s",
        ),
    ],
)
def test_bad_spec_sheet_names_file_and_field(cli, tmp_path, broken, needle):
    path = tmp_path / "my-gpu.yaml"
    path.write_text(broken)
    for args in (
        ["specs", "validate", str(path)],
        ["analyze", "gemm", "-m", "1", "-n", "1", "-k", "1", "-d", "my-gpu", "--spec", str(path)],
    ):
        result = cli(*args)
        assert result.code == 2
        line = _error_line(result)
        assert str(path) in line and needle in line


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "name: t\nworkloads:\n  - {kind: gemm, m: 0, n: 2, k: 3}\n",
            "workloads[0]: gemm: m: Input should be greater than 0",
        ),
        ("name: t\nworkloads:\n  - {m: 1}\n", "workloads[0]: missing 'kind'"),
        ("name: t\nworkloads:\n  - {kind: gemm, m: 1, n: 2, k: 3, colour: red}\n", "colour: unknown key"),
        ("name: t\nworkloads:\n  - {kind: warp, m: 1}\n", "unknown workload kind 'warp'"),
        ("name: t\nworkloads: [\n", "invalid YAML"),
    ],
)
def test_bad_suite_file(cli, tmp_path, text, needle):
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    result = cli("analyze", "suite", str(path), "-d", "h100")
    assert result.code == 2
    assert needle in _error_line(result)


def test_suite_rows(cli, tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(
        "name: t\nworkloads:\n"
        "  - {kind: gemm, m: [1, 2], n: 2, k: 3}\n"
        "  - {kind: norm, op: layernorm, rows: 2, cols: 8}\n"
    )
    rows = cli("analyze", "suite", str(path), "-d", "h100", "--json").json()["rows"]
    assert [(r["kind"], r["flops"]) for r in rows] == [
        ("gemm", 2 * 1 * 2 * 3),
        ("gemm", 2 * 2 * 2 * 3),
        ("norm", 7 * 16),
    ]


def test_user_sheet_is_usable(cli, tmp_path):
    path = tmp_path / "my-gpu.yaml"
    path.write_text(SHEET)
    assert cli("specs", "validate", str(path)).out == f"ok: {path} (my-gpu, My GPU)\n"
    row = cli(
        "analyze",
        "gemm",
        "-m",
        "1000",
        "-n",
        "1000",
        "-k",
        "1000",
        "-d",
        "my-gpu",
        "--spec",
        str(path),
        "--json",
    ).json()["rows"][0]
    assert row["ridge"] == pytest.approx(100.0)  # 100 TFLOP/s / 1000 GB/s


def test_specs_list_show_json(cli):
    specs = cli("specs", "list", "--json").json()["specs"]
    names = {s["name"] for s in specs}
    assert {"h100-sxm", "a100-sxm-80gb", "mi300x", "b200", "l4"} <= names
    h100 = next(s for s in specs if s["name"] == "h100-sxm")
    assert h100["tensor16_tflops"] == 989.4 and h100["dram_gb_per_s"] == 3350
    shown = cli("specs", "show", "NVIDIA H100 80GB HBM3", "--json").json()
    assert shown["sheet"]["name"] == "h100-sxm"
    roofs = {(r["dtype"], r["unit"]): r for r in shown["roofs"]}
    assert roofs[("fp8", "tensor")]["ridge_flop_per_byte"] == pytest.approx(590.7, abs=0.1)
    text = cli("specs", "show", "h100-sxm").out
    assert "989.4 TFLOP/s" in text and "295.3 FLOP/B" in text and "source:" in text


def test_specs_detect_without_gpu_describes_the_cpu(cli, monkeypatch):
    import roofline.specs.detect as detect_module

    real = detect_module.detect
    monkeypatch.setattr(detect_module, "detect", lambda registry: real(registry, nvml=False, torch=False))
    result = cli("specs", "detect")
    assert result.code == 0, result.err
    assert "No GPU detected" in result.out and "CPU roofs come from measurement" in result.out
    doc = cli("specs", "detect", "--json").json()
    assert doc["gpus"] == [] and doc["cpu"]["logical_cores"] >= 1


def test_default_device_needs_a_name_without_a_gpu(cli, monkeypatch):
    monkeypatch.setattr("roofline.specs.detect.nvml_gpu_names", lambda nvml=None: [])
    result = cli("analyze", "gemm", "-m", "1", "-n", "1", "-k", "1")
    assert result.code == 2
    assert "no --device given" in _error_line(result)
    monkeypatch.setenv("ROOFLINE_DEVICE", "a100-sxm-80gb")
    assert (
        cli("analyze", "gemm", "-m", "1", "-n", "1", "-k", "1", "--json").json()["rows"][0]["device"] == "a100-sxm-80gb"
    )


def test_every_command_has_help_and_is_in_the_docs(cli):
    from roofline.cli.reference import DOC, commands, render, splice

    docs = DOC.read_text()
    for path, command in commands():
        args = path.split()[1:]
        result = cli(*args, "--help")
        assert result.code == 0, path
        assert "Usage" in result.out, path
        assert command.help, f"{path} has no help text"
        assert f"### `{path}`" in docs, f"{path} is missing from docs/cli.md"
    assert splice(docs, render()) == docs, "docs/cli.md is stale: run python -m roofline.cli.reference --write"


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["analyze", "gemm", "-m", "4096", "-n", "4096", "-k", "4096", "-d", "h100-sxm"],
        ["analyze", "decode", "--model", "llama-3-8b", "--batch", "1,8", "-d", "h100-sxm"],
        ["analyze", "suite", "transformer-ops", "-d", "h100-sxm,b200"],
        ["analyze", "prefill", "--config", "mistralai/Mistral-7B-v0.1", "--seq", "128", "-d", "h100-sxm"],
        ["specs", "list"],
    ],
)
def test_no_torch_import(args, tmp_path):
    """Neither torch nor transformers is imported by the CLI's start-up or the commands of the pure core."""
    code = textwrap.dedent(
        f"""
        import sys
        from roofline.cli import main
        try:
            main({args!r})
        except SystemExit:
            pass
        heavy = "torch" in sys.modules or "transformers" in sys.modules
        print("TORCH" if heavy else "NO-TORCH", file=sys.stderr)
        """
    )
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub")}  # an id is looked up in an empty hub cache
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert result.stderr.strip().splitlines()[-1] == "NO-TORCH", result.stderr


def test_missing_dependency_is_one_line(cli, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "roofline.analysis":
            raise ModuleNotFoundError("No module named 'pydantic'", name="pydantic")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    result = cli("analyze", "gemm", "-m", "1", "-n", "1", "-k", "1", "-d", "h100")
    assert result.code == 2
    assert "needs the Python package 'pydantic'" in _error_line(result)


def test_specs_detect_renders_a_gpu_and_its_warnings(cli, monkeypatch):
    from roofline.specs.detect import Check, CpuInfo, Detection, GpuInfo

    gpu = GpuInfo(
        index=0,
        name="NVIDIA H100 80GB HBM3",
        source="nvml+torch",
        sheet="h100-sxm",
        compute_capability="9.0",
        memory_clock_mhz=2619,
        bus_width_bits=5120,
        checks=[Check("dram bandwidth", "GB/s", 2682.0, 3350.0, 0.8006, True)],
    )
    found = Detection(
        gpus=[gpu],
        cpu=CpuInfo("cpu", 2, 2, None, None),
        warnings=["h100-sxm: derived DRAM bandwidth 2682 GB/s differs from the sheet's 3350 GB/s"],
    )
    monkeypatch.setattr("roofline.specs.detect.detect", lambda registry: found)
    out = cli("specs", "detect").out
    assert "GPU 0: NVIDIA H100 80GB HBM3 → h100-sxm (via nvml+torch)" in out
    assert "memory clock 2619 MHz · 5120-bit bus" in out
    assert "0.801" in out and "warning: h100-sxm: derived DRAM bandwidth 2682 GB/s" in out
    assert cli("specs", "detect", "--json").json()["gpus"][0]["checks"][0]["warn"] is True


@pytest.mark.parametrize("args", [(), ("specs",), ("baseline",)])
def test_no_command_prints_help_and_exits_0(cli, args):
    result = cli(*args)
    assert result.code == 0
    assert "Usage:" in result.out and "Commands" in result.out
    assert result.err == ""


def test_analyze_on_the_cpu_uses_its_measured_roofs(cli, monkeypatch):
    from tests.diagnose_devices import CPU

    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (CPU, ["test roofs"]))
    result = cli("analyze", "gemm", "-m", "1024", "-n", "1024", "-k", "1024", "--dtype", "fp32", "--device", "cpu")
    assert result.code == 0, result.err
    assert "Test CPU" in result.out
    result = cli("analyze", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "cpu", "--roofs", "spec")
    assert result.code == 2
    assert result.err.strip() == "Error: --device cpu has no spec sheet (its roofs are measured): drop --roofs spec"


def test_analyze_conv2d_dash_o_is_the_output_as_everywhere_else(cli, tmp_path):
    out = tmp_path / "conv.json"
    args = ("analyze", "conv2d", "-c", "64", "--out-channels", "128", "--height", "56", "--width", "56")
    result = cli(*args, "--device", "h100-sxm", "-o", str(out))
    assert result.code == 0, result.err
    assert json.loads(out.read_text())["rows"][0]["params"]["out_channels"] == 128


def test_cli_runs_on_a_typer_without_option_type_labels():
    """typer before 0.29 has no TyperOption.display_type_rich (the flag-label patch's target): the CLI still runs
    (it crashed on import there: the device's typer, 2026-11-27)."""
    script = textwrap.dedent(
        """
        import sys
        from typer.core import TyperOption
        for klass in TyperOption.__mro__:
            if "display_type_rich" in vars(klass):
                delattr(klass, "display_type_rich")
        from roofline.cli import main
        sys.argv = ["roofline", "specs", "list", "--json"]
        main()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert any(row["name"] == "h100-sxm" for row in json.loads(done.stdout)["specs"])
