"""A project's defaults for the command line: the ``[tool.roofline]`` table of the nearest pyproject.toml.

    [tool.roofline]
    device = "h100-sxm"        # analyze: the spec sheet(s) when no --device (after $ROOFLINE_DEVICE);
                               # cpu or cuda[:N]: also bench, diagnose and calibrate
    roofs = "spec"             # --roofs of analyze, diagnose and predict: auto, spec or measured
    top = 20                   # --top of diagnose, plot, report, predict and counters import
    output-dir = "build/perf"  # where diagnose, bench and baseline save write their default files (-o not given)

Read once, at the CLI boundary (the root command, before its subcommand parses its options), into click's
``default_map``: an option given on the command line replaces the table's value, and ``--help`` shows it.
Unknown keys, and values of the wrong type, are one line, exit 2 (strict, as ``[tool.roofline.gate]``, the gate's
own table, which roofline.gate.config reads: the gate takes none of these). docs/cli.md ("Project defaults").
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roofline.errors import UsageError

#: the commands each key applies to (their paths below `roofline`; a path ending in '*': its every subcommand)
DEVICE_SHEET = ("analyze *",)  # --device names spec sheets (or cpu)
DEVICE_KIND = ("bench *", "diagnose", "calibrate")  # --device is cpu or cuda[:N]
ROOFS = ("analyze *", "diagnose", "predict")
TOP = ("diagnose", "plot", "report", "predict", "counters import")
OUTPUT = ("diagnose", "bench *", "baseline save")  # their -o has a default file name
_KIND = re.compile(r"^(cpu|cuda(:\d+)?)$")


class Defaults(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    device: str | None = Field(None, min_length=1)
    roofs: Literal["auto", "spec", "measured"] | None = None
    top: int | None = Field(None, ge=1, le=1_000_000)
    output_dir: str | None = Field(None, alias="output-dir", min_length=1)
    gate: dict[str, Any] | None = None  # [tool.roofline.gate]: the gate's settings (roofline.gate.config)


def read(start: Path | None = None) -> tuple[Path | None, Defaults]:
    """(the pyproject.toml, its [tool.roofline] defaults) of the nearest pyproject.toml with the table; (None,
    no defaults) when none has one."""
    from roofline.pyproject import find_table

    found = find_table(("roofline",), start)
    if found is None:
        return None, Defaults()
    path, table = found
    try:
        return path, Defaults.model_validate(table, strict=True)
    except ValidationError as exc:
        from roofline.yamlio import describe_validation_error

        raise UsageError(f"{path}: [tool.roofline] {describe_validation_error(exc, 'docs/cli.md')}") from None


def _commands(command: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    for name, sub in getattr(command, "commands", {}).items():
        here = f"{path} {name}".strip()
        yield here, sub
        yield from _commands(sub, here)


def _applies(path: str, patterns: tuple[str, ...]) -> bool:
    return any(path == p or (p.endswith(" *") and path.startswith(p[:-1])) for p in patterns)


def default_map(root: Any, path: Path | None, defaults: Defaults, env: dict[str, str] | None = None) -> dict:
    """click's ``default_map`` for the command tree under ``root``: {subcommand: {..., option name: value}}."""
    from roofline.roofs import ENV_DEVICE

    env = dict(os.environ) if env is None else env
    here = path.parent if path is not None else Path.cwd()
    tree: dict[str, Any] = {}
    for name, command in _commands(root):
        params = {p.name: p for p in getattr(command, "params", [])}
        values: dict[str, Any] = {}
        device = defaults.device
        if device is not None and "device" in params:
            kind = _KIND.match(device.strip().lower()) is not None
            if (_applies(name, DEVICE_SHEET) and not env.get(ENV_DEVICE)) or (kind and _applies(name, DEVICE_KIND)):
                values["device"] = device
        if defaults.roofs is not None and "roofs" in params and _applies(name, ROOFS):
            values["roofs"] = defaults.roofs
        if defaults.top is not None and "top" in params and _applies(name, TOP):
            values["top"] = defaults.top
        output = params.get("output")
        named = output is not None and isinstance(output.default, Path)  # -o with a default file name
        if defaults.output_dir is not None and named and _applies(name, OUTPUT):
            values["output"] = here / defaults.output_dir / output.default
        if values:
            node = tree
            for part in name.split():
                node = node.setdefault(part, {})
            node.update(values)
    return tree


def apply(ctx: Any) -> None:
    """Read [tool.roofline] (once per command line) and make it the defaults of the subcommand about to run."""
    path, defaults = read()
    if path is None:
        return
    tree = default_map(ctx.command, path, defaults)
    if tree:
        ctx.default_map = {**(ctx.default_map or {}), **tree}
