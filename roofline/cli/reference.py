"""Generate the CLI reference (docs/cli.md) from the command tree itself, so the docs cannot drift.

python -m roofline.cli.reference --write   # regenerate docs/cli.md
python -m roofline.cli.reference --check   # exit 1 when docs/cli.md is stale (CI runs the test instead)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

BEGIN = "<!-- BEGIN GENERATED REFERENCE (python -m roofline.cli.reference --write) -->"
END = "<!-- END GENERATED REFERENCE -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def commands() -> Iterator[tuple[str, Any]]:
    """(path, click command) for every command and group, depth first, in registration order."""
    from roofline.cli import app

    def walk(path: str, command: Any) -> Iterator[tuple[str, Any]]:
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk(f"{path} {name}", sub)

    yield from walk("roofline", typer.main.get_command(app))


def _option_row(param: Any) -> str:
    flags = ", ".join(f"`{opt}`" for opt in [*param.opts, *getattr(param, "secondary_opts", [])])
    kind = (
        "argument" if param.param_type_name == "argument" else ("flag" if getattr(param, "is_flag", False) else "value")
    )
    if param.required:
        default = "required"
    elif param.default in (None, False, ()) or callable(param.default):
        default = ""
    else:
        default = f"`{param.default}`"
    text = (getattr(param, "help", None) or "").replace("|", "\\|").replace("\n", " ")
    return f"| {flags} | {kind} | {default} | {text} |"


def render() -> str:
    parts: list[str] = []
    for path, command in commands():
        parts.append(f"### `{path}`\n")
        if command.help:
            parts.append(command.help.strip().replace("\b\n", "") + "\n")
        sub = getattr(command, "commands", None)
        if sub:
            parts.append("| command | what it does |\n|---|---|")
            parts += [
                f"| `{path} {name}` | {(c.short_help or (c.help or '').splitlines()[0]).strip()} |"
                for name, c in sub.items()
            ]
            parts.append("")
        params = [p for p in command.params if getattr(p, "name", "") not in ("help",)]
        if params and not sub:
            parts.append("| option | kind | default | meaning |\n|---|---|---|---|")
            parts += [_option_row(p) for p in params]
            parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def splice(document: str, generated: str) -> str:
    head, _, rest = document.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{generated}\n{END}{tail}"


def main(argv: list[str]) -> int:
    document = DOC.read_text(encoding="utf-8")
    updated = splice(document, render())
    if "--write" in argv:
        DOC.write_text(updated, encoding="utf-8")
        return 0
    if updated != document:
        print("docs/cli.md is stale: run `python -m roofline.cli.reference --write`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
