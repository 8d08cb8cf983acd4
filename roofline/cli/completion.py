"""`roofline completion`: print the shell completion script for bash, zsh, fish or PowerShell."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from roofline.cli.verbosity import info
from roofline.errors import UsageError

SHELLS = ("bash", "zsh", "fish", "powershell")
COMPLETE_VAR = "_ROOFLINE_COMPLETE"
_HOW = {
    "bash": 'eval "$(roofline completion bash)"    # in ~/.bashrc',
    "zsh": 'eval "$(roofline completion zsh)"     # in ~/.zshrc',
    "fish": "roofline completion fish > ~/.config/fish/completions/roofline.fish",
    "powershell": "roofline completion powershell | Out-String | Invoke-Expression   # in $PROFILE",
}


def completion(
    shell: str = typer.Argument(
        None, help="bash, zsh, fish or powershell (default: the shell named by $SHELL).", metavar="SHELL"
    ),
) -> None:
    """Print the shell completion script: commands, options, device and suite names complete on Tab.

    Load it once per shell: `eval "$(roofline completion bash)"` in ~/.bashrc (zsh: the same in ~/.zshrc; fish:
    `roofline completion fish > ~/.config/fish/completions/roofline.fish`).
    """
    import typer.completion

    name = (shell or Path(os.environ.get("SHELL", "")).name or "").lower()
    if name in ("pwsh",):
        name = "powershell"
    if name not in SHELLS:
        given = f"{shell!r}" if shell else f"$SHELL ({os.environ.get('SHELL', '')!r})"
        raise UsageError(f"completion: {given} is not a shell we complete for: name one of {', '.join(SHELLS)}")
    script = typer.completion.get_completion_script(prog_name="roofline", complete_var=COMPLETE_VAR, shell=name)
    typer.echo(script.rstrip("\n") + "\n", nl=False)
    if not typer.get_text_stream("stdout").isatty():
        return
    info(f"# to load it in every new shell: {_HOW[name]}")


def completing() -> bool:
    """Whether the shell is asking for completions (the script sets this variable)."""
    return COMPLETE_VAR in os.environ


def enable_completion() -> None:
    """Registers typer's completion classes, which answer the shell's request (only when it asks: keeps start-up
    fast)."""
    import typer.completion

    typer.completion.completion_init()
