"""--quiet and --verbose: what a command says on stderr, never what it prints as results."""

from __future__ import annotations

GEMM = ("analyze", "gemm", "-m", "64", "-n", "64", "-k", "64", "-d", "h100-sxm")


def test_quiet_drops_written_to_line_not_results(cli, tmp_path):
    out = tmp_path / "r.json"
    normal = cli(*GEMM, "-o", str(out))
    quiet = cli("--quiet", *GEMM, "-o", str(out))
    assert normal.code == quiet.code == 0
    assert normal.err == f"Report written to {out}\n"
    assert quiet.err == ""
    assert quiet.out == normal.out


def test_quiet_keeps_errors(cli):
    result = cli("-q", "analyze", "gemm", "-m", "0", "-n", "1", "-k", "1")
    assert result.code == 2
    assert result.err == "Error: -m: '0' must be positive\n"


def test_verbose_shows_our_traceback_under_the_error(cli):
    result = cli("-v", "analyze", "gemm", "-m", "0", "-n", "1", "-k", "1")
    assert result.code == 2
    assert result.err.startswith("Traceback (most recent call last):\n")
    assert "roofline.errors.UsageError" in result.err
    assert result.err.endswith("Error: -m: '0' must be positive\n")


def test_quiet_and_verbose_together_is_an_error(cli):
    result = cli("-q", "-v", "specs", "list")
    assert result.code == 2
    assert result.err == "Error: --quiet and --verbose: give one of them\n"


def test_level_does_not_leak_into_the_next_command(cli):
    cli("-v", "specs", "list")
    result = cli("analyze", "gemm", "-m", "0", "-n", "1", "-k", "1")
    assert "Traceback" not in result.err
