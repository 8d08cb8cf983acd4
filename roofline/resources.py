"""Where the shipped data lives: inside the wheel (roofline/_data/...) or at the top of a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Directory of shipped data ``name`` ('hardware_specs' or 'workloads')."""
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"roofline data directory {name!r} is missing from this installation")
