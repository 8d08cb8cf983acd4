"""COLUMNS and LINES that hold no positive integer (empty, text, 0, negative) are ignored, not a traceback or
an empty page: the CLI cleans them once where it starts (roofline.render.base.clean_terminal_size_env)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from roofline.render.base import terminal_size_env

ROOT = Path(__file__).resolve().parents[1]
GEMM = ["analyze", "gemm", "-m", "1024", "-n", "1024", "-k", "1024", "--device", "h100-sxm"]


@pytest.mark.parametrize("value", ["", "  ", "abc", "0", "-5", "12.5", "٣"])
@pytest.mark.parametrize("args", [["specs", "list"], GEMM, ["--help"], ["analyze", "--help"]])
def test_invalid_columns_and_lines_fall_back_to_the_default_width(cli, monkeypatch, value, args):
    monkeypatch.setenv("COLUMNS", value)
    monkeypatch.setenv("LINES", value)
    result = cli(*args)
    assert result.code == 0, result.err
    assert result.err == ""
    lines = result.out.splitlines()
    assert len(lines) > 5
    assert max(len(line) for line in lines) <= 120  # not a terminal: the default width


def test_a_padded_width_is_used(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", " 70 ")
    result = cli("specs", "list")
    assert result.code == 0, result.err
    assert max(len(line) for line in result.out.splitlines()) <= 70
    assert os.environ["COLUMNS"] == "70"


@pytest.mark.parametrize(("value", "size"), [("100", 100), (" 80\n", 80), ("", None), ("0", None), ("x", None)])
def test_terminal_size_env(monkeypatch, value, size):
    monkeypatch.setenv("COLUMNS", value)
    assert terminal_size_env("COLUMNS") == size


def test_empty_columns_from_the_shell():
    """`COLUMNS= python -m roofline specs list`, as a user types it."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "COLUMNS": "", "LINES": "", "PYTHONPATH": path}
    result = subprocess.run(
        [sys.executable, "-m", "roofline", "specs", "list"], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "h100-sxm" in result.stdout and result.stderr == ""
