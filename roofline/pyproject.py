"""The ``[tool.roofline]`` tables of a project's pyproject.toml, read one way for every reader: the nearest
pyproject.toml that has the table asked for, walking up from the working directory; TOML that does not parse,
or a table that is not a table, is one UsageError line naming the file.

Readers: the CLI's defaults (``[tool.roofline]``: roofline.cli.defaults) and the gate's settings
(``[tool.roofline.gate]``: roofline.gate.config). Each validates its table strictly (unknown keys are errors).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roofline.errors import UsageError


def toml_module(table: str = "[tool.roofline]") -> Any:
    """tomllib (Python 3.11+) or tomli."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise UsageError(f"reading {table} needs Python 3.11+ (or the tomli package)") from None
    return tomllib


def find_table(keys: tuple[str, ...], start: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """(the pyproject.toml, its table) of the nearest pyproject.toml with the table ``tool.<keys...>``
    (``("roofline", "gate")``: ``[tool.roofline.gate]``), walking up from ``start`` (default: the working
    directory); None when none has it."""
    name = "[" + ".".join(("tool", *keys)) + "]"
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        path = directory / "pyproject.toml"
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "roofline" not in text:  # cheap: most pyproject files say nothing about us
            continue
        toml = toml_module(name)
        try:
            data = toml.loads(text)
        except toml.TOMLDecodeError as exc:
            raise UsageError(f"{path}: invalid TOML: {exc}") from None
        except RecursionError:
            raise UsageError(f"{path}: invalid TOML: nested too deeply") from None
        table: Any = data.get("tool", {})
        for key in keys:
            table = table.get(key) if isinstance(table, dict) else None
        if table is None:
            continue
        if not isinstance(table, dict):
            raise UsageError(f"{path}: {name} must be a table")
        return path, table
    return None
