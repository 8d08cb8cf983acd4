"""Shell completion: the script, and the answer to the shell's request through the real entry point."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "powershell"])
def test_completion_script_names_our_variable(cli, shell):
    result = cli("completion", shell)
    assert result.code == 0, result.err
    assert "_ROOFLINE_COMPLETE" in result.out


def test_completion_default_shell_from_env(cli, monkeypatch):
    monkeypatch.setenv("SHELL", "/usr/bin/zsh")
    result = cli("completion")
    assert result.code == 0 and "compdef" in result.out


def test_completion_unknown_shell_is_one_line(cli, monkeypatch):
    monkeypatch.setenv("SHELL", "/bin/tcsh")
    result = cli("completion")
    assert result.code == 2
    assert result.err == (
        "Error: completion: $SHELL ('/bin/tcsh') is not a shell we complete for: "
        "name one of bash, zsh, fish, powershell\n"
    )


@pytest.mark.parametrize(
    ("words", "cword", "expected"),
    [
        ("roofline analyze ge", "2", "gemm"),
        ("roofline diagnose --dev", "2", "--device"),
        ("roofline bas", "1", "baseline"),
    ],
)
def test_completion_answers_the_shell(cli, monkeypatch, words, cword, expected):
    monkeypatch.setenv("_ROOFLINE_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", words)
    monkeypatch.setenv("COMP_CWORD", cword)
    result = cli()
    assert result.code == 0, result.err
    assert result.out.split() == [expected]
