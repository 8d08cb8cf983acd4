"""Options and helpers shared by commands."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from roofline.units import split_list

SPEC_HELP = "Extra spec sheet (YAML); repeatable. A directory of sheets can be named by $ROOFLINE_SPECS_DIR."


def spec_option() -> Any:
    return typer.Option(None, "--spec", help=SPEC_HELP, metavar="FILE")


def json_option() -> Any:
    return typer.Option(False, "--json", help="Print one JSON document instead of tables.")


def registry(spec_files: list[Path] | None):  # -> SpecRegistry
    from roofline.specs.loader import load_registry

    return load_registry(spec_files or [])


def print_json(data: Any) -> None:
    from roofline.yamlio import dumps_json

    sys.stdout.write(dumps_json(data, indent=2, default=str) + "\n")


def print_text(text: str) -> None:
    sys.stdout.write(text)


SWEEP = " Comma list sweeps."


def sizes_value(text: str | None, option: str, *, allow_zero: bool = False) -> Any:
    """A size option's value: None (not given), one size, or a list of sizes (a sweep)."""
    from roofline.units import parse_sizes

    if text is None:
        return None
    values = parse_sizes(text, option, allow_zero=allow_zero)
    return values if len(values) > 1 else values[0]


def words_value(text: str | None, option: str) -> Any:
    """A word option's value (dtype, op, impl): None, one word, or a list (a sweep)."""
    if text is None:
        return None
    values = split_list(text, option)
    return values if len(values) > 1 else values[0]


def conv2d_values(
    batch: str,
    in_channels: str,
    out_channels: str,
    height: str,
    width: str,
    kernel_size: str,
    stride: str,
    padding: str,
    groups: str,
    dtype: Any,
    tf32: bool,
) -> dict[str, Any]:
    """The conv2d parameters from their option texts (shared by analyze and bench)."""
    return {
        "batch": sizes_value(batch, "--batch"),
        "in_channels": sizes_value(in_channels, "--in-channels"),
        "out_channels": sizes_value(out_channels, "--out-channels"),
        "height": sizes_value(height, "--height"),
        "width": sizes_value(width, "--width"),
        "kernel_size": sizes_value(kernel_size, "--kernel-size"),
        "stride": sizes_value(stride, "--stride"),
        "padding": sizes_value(padding, "--padding", allow_zero=True),
        "groups": sizes_value(groups, "--groups"),
        "dtype": dtype,
        "tf32": tf32,
    }
