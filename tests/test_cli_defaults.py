"""[tool.roofline] of pyproject.toml: a project's defaults for device, roofs, top and the output directory, read
once at the CLI boundary; the command line wins; unknown keys and wrong types are one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from roofline.cli import app
from roofline.cli import defaults as cli_defaults


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project directory, the working directory two levels below its pyproject.toml."""
    monkeypatch.delenv("ROOFLINE_DEVICE", raising=False)
    (tmp_path / "src" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "src" / "deep")

    def write(text: str) -> Path:
        path = tmp_path / "pyproject.toml"
        path.write_text('[project]\nname = "x"\n\n' + text, encoding="utf-8")
        return path

    return write


def test_the_default_map_names_exactly_the_commands_each_key_applies_to(tmp_path):
    root = typer.main.get_command(app)
    defaults = cli_defaults.Defaults.model_validate(
        {"device": "cpu", "roofs": "spec", "top": 5, "output-dir": "perf"}, strict=True
    )
    tree = cli_defaults.default_map(root, tmp_path / "pyproject.toml", defaults, env={})
    analyze = {"device": "cpu", "roofs": "spec"}
    bench = {"device": "cpu", "output": tmp_path / "perf" / "roofline-bench.json"}
    assert tree == {
        "calibrate": {"device": "cpu"},
        "diagnose": {"device": "cpu", "roofs": "spec", "top": 5, "output": tmp_path / "perf" / "roofline-report.json"},
        "plot": {"top": 5},
        "predict": {"roofs": "spec", "top": 5},
        "report": {"top": 5},
        "analyze": {
            **{k: analyze for k in ("gemm", "attention", "decode", "prefill", "elementwise", "norm", "conv2d")},
            "suite": analyze,
            "tile": {"device": "cpu"},
        },
        "bench": {k: bench for k in ("gemm", "attention", "elementwise", "norm", "conv2d", "decode", "suite")},
        "counters": {"import": {"top": 5}},
        "baseline": {"save": {"output": tmp_path / "perf" / "roofline-baseline.json"}},
    }
    # a spec-sheet name is analyze's only (bench, diagnose and calibrate take cpu or cuda); $ROOFLINE_DEVICE wins
    sheet = cli_defaults.Defaults(device="h100-sxm")
    tree = cli_defaults.default_map(root, None, sheet, env={})
    assert set(tree) == {"analyze"} and tree["analyze"]["gemm"] == {"device": "h100-sxm"}
    assert cli_defaults.default_map(root, None, sheet, env={"ROOFLINE_DEVICE": "b200"}) == {}


def test_analyze_takes_the_project_device_and_the_command_line_wins(cli, project, monkeypatch):
    project('[tool.roofline]\ndevice = "a100-sxm-80gb"\nroofs = "spec"\n')
    gemm = ("analyze", "gemm", "-m", "64", "-n", "64", "-k", "64", "--json")
    doc = cli(*gemm).json()
    assert [d["name"] for d in doc["devices"]] == ["a100-sxm-80gb"]
    assert doc["rows"][0]["roof_source"] == "spec"
    assert [d["name"] for d in cli(*gemm, "-d", "b200").json()["devices"]] == ["b200"]
    monkeypatch.setenv("ROOFLINE_DEVICE", "h100-sxm")
    assert [d["name"] for d in cli(*gemm).json()["devices"]] == ["h100-sxm"]


def test_without_a_table_nothing_changes(cli, project):
    project("[tool.other]\nx = 1\n")
    assert cli_defaults.read() == (None, cli_defaults.Defaults())
    result = cli("analyze", "gemm", "-m", "64", "-n", "64", "-k", "64")
    assert result.code == 2 and "no --device given" in result.error_line()  # as without a pyproject.toml


def test_the_gate_table_is_the_gates(project):
    path = project("[tool.roofline]\ntop = 3\n\n[tool.roofline.gate]\nstats = false\n")
    assert cli_defaults.read() == (path, cli_defaults.Defaults(top=3, gate={"stats": False}))


@pytest.mark.parametrize(
    ("table", "why"),
    [
        ('colour = "red"', "[tool.roofline] colour: unknown key (check the spelling; docs/cli.md lists the allowed"),
        ('top = "3"', "[tool.roofline] top: Input should be a valid integer (got '3'): write the number without"),
        ("top = 0", "[tool.roofline] top: Input should be greater than or equal to 1 (got 0)"),
        ('roofs = "best"', "[tool.roofline] roofs: Input should be 'auto', 'spec' or 'measured' (got 'best')"),
        ("device = 1", "[tool.roofline] device: Input should be a valid string (got 1)"),
        ('output-dir = ""', "[tool.roofline] output-dir: String should have at least 1 character"),
    ],
)
def test_a_bad_table_is_one_line_and_exit_2(cli, project, table, why):
    path = project(f"[tool.roofline]\n{table}\n")
    result = cli("specs", "list")
    assert result.code == 2
    assert result.error_line().startswith(f"Error: {path}: {why}")


def test_invalid_toml_is_one_line(cli, project):
    path = project("[tool.roofline\n")
    result = cli("specs", "list")
    assert result.code == 2 and result.error_line().startswith(f"Error: {path}: invalid TOML: ")


def test_bench_writes_its_default_report_in_the_output_dir(cli, project, monkeypatch, tmp_path):
    from diagnose_devices import CPU as FAKE_CPU

    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    project('[tool.roofline]\ndevice = "cpu"\noutput-dir = "perf"\n')
    args = ("bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--max-time", "10ms")
    assert cli(*args).code == 0  # no --device: the project's cpu (this machine may have no GPU)
    assert (tmp_path / "perf" / "roofline-bench.json").is_file()  # beside pyproject.toml, not the cwd
    assert cli(*args, "-o", "mine.json").code == 0
    assert (tmp_path / "src" / "deep" / "mine.json").is_file()  # an -o given is taken as given
