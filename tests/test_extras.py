"""Dependencies by use: without an extra's package, the command that needs it says which extra in one line
(exit 2); the base commands run with none of them; a missing module in the user's own code stays theirs."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from roofline.extras import EXTRAS, missing_extra
from roofline.report import baseline as baselines
from roofline.report.schema import write_report
from tests.gate_synthetic import bench_report, bench_row, spread

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = tuple(EXTRAS)


class _Hiding:
    """The only finder on sys.meta_path: asks the real ones, except for hidden modules, which none finds (so
    importing one fails as a missing package does: ModuleNotFoundError from the import system)."""

    def __init__(self, finders: list, hidden: tuple[str, ...]) -> None:
        self.finders, self.hidden = finders, hidden

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.hidden:
            return None
        for finder in self.finders:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                return spec
        return None

    def invalidate_caches(self) -> None:
        for finder in self.finders:
            if hasattr(finder, "invalidate_caches"):
                finder.invalidate_caches()


@pytest.fixture
def hide(monkeypatch):
    """hide('torch', ...): as if those packages were not installed, until the test ends."""

    def run(*names: str) -> None:
        for loaded in list(sys.modules):
            if loaded.split(".")[0] in names:
                monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setattr(sys, "meta_path", [_Hiding(list(sys.meta_path), names)])
        importlib.invalidate_caches()

    return run


@pytest.fixture
def analytic_report(cli, tmp_path) -> Path:
    path = tmp_path / "r.json"
    result = cli("analyze", "gemm", "-m", "1024", "-n", "1024", "-k", "1024", "--device", "h100-sxm", "-o", str(path))
    assert result.code == 0, result.err
    return path


@pytest.mark.parametrize(
    ("hidden", "args", "line"),
    [
        (
            "torch",
            ["bench", "gemm", "-m", "64", "-n", "64", "-k", "64", "--device", "cpu", "-o", "{tmp}/b.json"],
            "Error: roofline bench needs torch: pip install 'roofline[measure]'",
        ),
        (
            "torch",
            ["diagnose", str(ROOT / "workloads/models/fp32_matmul.py"), "--device", "cpu", "-o", "{tmp}/d.json"],
            "Error: roofline diagnose needs torch: pip install 'roofline[measure]'",
        ),
        (
            "transformers",
            ["diagnose", "--hf", str(ROOT / "tests/hf_configs/tiny-llama"), "--device", "cpu", "-o", "{tmp}/d.json"],
            "Error: roofline diagnose needs transformers: pip install 'roofline[hf]'",
        ),
        (
            "torch",
            ["calibrate", "--device", "cpu"],
            "Error: roofline calibrate needs torch: pip install 'roofline[measure]'",
        ),
        (
            "matplotlib",
            ["plot", "{report}", "-o", "{tmp}/chart.png"],
            "Error: roofline plot needs matplotlib: pip install 'roofline[plot]'",
        ),
        (
            "matplotlib",
            ["report", "{report}", "-o", "{tmp}/r.html"],
            "Error: roofline report needs matplotlib: pip install 'roofline[plot]'",
        ),
        (
            "matplotlib",
            ["analyze", "gemm", "-m", "64", "-n", "64", "-k", "64", "-d", "h100-sxm", "--plot", "{tmp}/chart.png"],
            "Error: roofline analyze needs matplotlib: pip install 'roofline[plot]'",
        ),
        (
            "pandas",
            ["report", "{report}", "--format", "parquet", "-o", "{tmp}/r.parquet"],
            "Error: roofline report needs pandas: pip install 'roofline[data]'",
        ),
        (
            "pyarrow",
            ["report", "{report}", "-o", "{tmp}/r.parquet"],
            "Error: Parquet output needs pyarrow: pip install pyarrow (or pip install 'roofline[parquet]'), "
            "or write --format csv",
        ),
    ],
)
def test_a_missing_extra_is_one_line_naming_it(cli, hide, analytic_report, tmp_path, hidden, args, line):
    args = [a.format(tmp=tmp_path, report=analytic_report) for a in args]
    hide(hidden)
    result = cli(*args)
    assert result.code == 2, result.err
    assert result.error_line() == line
    assert not list(tmp_path.glob("[bd].json")) and not (tmp_path / "chart.png").exists()


def test_gate_names_the_extra_when_it_must_measure(cli, hide, tmp_path):
    rows = [bench_row("m=4096 n=4096 k=4096", spread(1.8e-4, 20, 0.01))]
    suite = bench_report(rows, suite="transformer-ops")
    baseline = baselines.save(baselines.from_report(suite, commit=""), tmp_path / "b.json")
    hide("torch")
    for target in ["transformer-ops", str(ROOT / "workloads/models/fp32_matmul.py")]:
        result = cli("gate", target, "-b", str(baseline))
        assert result.code == 2, result.err
        assert result.error_line() == "Error: roofline gate needs torch: pip install 'roofline[measure]'"


def test_the_base_commands_run_without_any_extra(cli, hide, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [bench_row("m=4096 n=4096 k=4096", spread(1.8e-4, 20, 0.01))]
    baseline = baselines.save(baselines.from_report(bench_report(rows), commit=""), tmp_path / "b.json")
    write_report(bench_report(rows), tmp_path / "bench.json")
    hide(*OPTIONAL, "numpy")
    for args in [
        ["specs", "list"],
        ["specs", "show", "h100-sxm"],
        ["analyze", "gemm", "-m", "1024", "-n", "1024", "-k", "1024", "--device", "h100-sxm"],
        ["analyze", "decode", "--model", "llama-3-8b", "--batch", "1,64", "--device", "h100-sxm", "-o", "r.json"],
        ["report", "r.json", "--format", "markdown"],
        ["report", "bench.json", "-o", "bench.md"],
        ["gate", "bench.json", "-b", str(baseline), "--format", "markdown"],
        ["gate", "bench.json", "-b", str(baseline)],
        ["baseline", "show", str(baseline)],
    ]:
        result = cli(*args)
        assert result.code == 0, (args, result.err)
    assert not {name.split(".")[0] for name in sys.modules} & {*OPTIONAL, "numpy"}


def test_a_missing_module_in_the_users_model_shows_their_traceback(cli, hide, tmp_path):
    model = tmp_path / "needs_pandas.py"
    model.write_text(
        textwrap.dedent(
            """\
            import torch
            import pandas

            model = torch.nn.Linear(4, 4)
            example_inputs = (torch.randn(2, 4),)
            """
        )
    )
    hide("pandas")
    result = cli("diagnose", str(model), "--device", "cpu", "-o", str(tmp_path / "d.json"))
    assert result.code == 1, result.err
    assert 'needs_pandas.py", line 2' in result.err
    assert "ModuleNotFoundError: No module named 'pandas'" in result.err
    assert "roofline[" not in result.err


def _raised_here(name: str) -> ModuleNotFoundError:
    try:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    except ModuleNotFoundError as exc:
        return exc


def test_missing_extra_only_for_roofline_s_own_import_of_an_optional_package(hide):
    from roofline.report.export import points_frame

    hide("pandas")
    with pytest.raises(ModuleNotFoundError) as ours:
        points_frame(None)
    assert missing_extra(ours.value) == ("pandas", "data")
    with pytest.raises(ModuleNotFoundError) as theirs:
        import pandas  # noqa: F401
    assert missing_extra(theirs.value) is None  # imported by this file, not by roofline
    assert missing_extra(_raised_here("torch")) is None
    assert missing_extra(_raised_here("scipy")) is None


def test_a_broken_optional_package_shows_its_traceback(cli, monkeypatch):
    """torch installed but one of its own modules missing: not 'install the extra' but the real traceback."""
    import builtins

    real_import = builtins.__import__

    def broken_torch(name, *args, **kwargs):
        if name == "torch":
            raise ModuleNotFoundError("No module named 'torch._C'", name="torch._C")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", broken_torch)
    with pytest.raises(ModuleNotFoundError, match=r"torch\._C"):
        cli("calibrate", "--device", "cpu")


def test_gate_settings_are_read_with_tomli_where_tomllib_is_missing(monkeypatch, tmp_path):
    """Python 3.10 has no tomllib: tomli (a base dependency there) reads [tool.roofline.gate]."""
    from roofline.gate import config

    parser = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    monkeypatch.setitem(sys.modules, "tomllib", None)
    monkeypatch.setitem(sys.modules, "tomli", parser)
    (tmp_path / "pyproject.toml").write_text('[tool.roofline.gate]\nbaseline = "b.json"\nfail-on = "time:+10%"\n')
    settings = config.find(tmp_path)
    assert settings.baseline_path() == tmp_path.resolve() / "b.json"
    assert settings.fail_on == ["time:+10%"]


def test_csv_needs_no_pandas(cli, hide, analytic_report):
    hide("pandas")
    result = cli("report", str(analytic_report), "--format", "csv")
    assert result.code == 0, result.err
    assert result.out.startswith("report,source,")
