"""A small renderer base: ``render(value) -> str``, so output can be printed, tested or written."""

from __future__ import annotations

import io
import os
import shutil
import sys
from abc import ABC, abstractmethod
from typing import Any


class Renderer(ABC):
    @abstractmethod
    def render(self, value: Any) -> str: ...


def _width() -> int:
    if "COLUMNS" in os.environ:
        return int(os.environ["COLUMNS"])
    if sys.stdout.isatty():
        return shutil.get_terminal_size((120, 24)).columns
    return 120


def to_text(*renderables: Any, color: bool | None = None) -> str:
    """Render rich objects to a string: colours only on a terminal (or when forced), fixed width in pipes."""
    from rich.console import Console

    if color is None:
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=_width(),
        force_terminal=color,
        no_color=not color,
        color_system="auto" if color else None,
        highlight=False,
        soft_wrap=False,
    )
    for item in renderables:
        console.print(item)
    return buffer.getvalue()
