"""Finding and loading spec sheets: built-in, ROOFLINE_SPECS_DIR, and --spec FILE."""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from roofline.errors import SpecError, UnknownDeviceError
from roofline.resources import data_dir
from roofline.specs.schema import SpecSheet
from roofline.yamlio import load_yaml, validate

ENV_DIR = "ROOFLINE_SPECS_DIR"


def normalize(name: str) -> str:
    """Key for name/alias matching: case, spaces, underscores and 'nvidia ' prefixes don't matter."""
    key = re.sub(r"[\s_]+", "-", name.strip().lower())
    return key


def load_sheet(path: Path) -> SpecSheet:
    data = load_yaml(path, SpecError)
    return validate(SpecSheet, data, str(path), SpecError, doc="docs/spec-sheets.md")


@dataclass
class SpecRegistry:
    """All known sheets by canonical name; later sources override earlier ones of the same name."""

    sheets: dict[str, SpecSheet] = field(default_factory=dict)
    paths: dict[str, Path] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    # Built-in sheets not parsed yet, by file stem (= their name): most commands need one sheet, not all 18.
    pending: dict[str, Path] = field(default_factory=dict)

    def add(self, sheet: SpecSheet, path: Path, origin: str) -> None:
        self.sheets[sheet.name] = sheet
        self.paths[sheet.name] = path
        self.origins[sheet.name] = origin

    def _load_pending(self, stems: list[str] | None = None) -> None:
        for stem in list(self.pending) if stems is None else stems:
            path = self.pending.pop(stem)
            sheet = load_sheet(path)
            if sheet.name not in self.sheets:  # a user sheet of the same name overrides the built-in
                self.add(sheet, path, "built-in")

    def load_all(self) -> SpecRegistry:
        """Parse every pending built-in sheet (listing, alias lookups and validation of the whole set need it)."""
        self._load_pending()
        return self

    def names(self) -> list[str]:
        self._load_pending()
        return sorted(self.sheets)

    def _index(self) -> dict[str, str]:
        self._load_pending()
        index: dict[str, str] = {}
        for name, sheet in self.sheets.items():
            for key in (name, *sheet.aliases):
                index.setdefault(normalize(key), name)
            index[normalize(name)] = name  # canonical names win over aliases
        return index

    def find(self, name: str) -> SpecSheet | None:
        key = normalize(name)
        if key in self.sheets:
            return self.sheets[key]
        if key in self.pending:  # fast path: a built-in's canonical name is its file name
            self._load_pending([key])
            if key in self.sheets:
                return self.sheets[key]
        found = self._index().get(key)
        return self.sheets[found] if found else None

    def get(self, name: str) -> SpecSheet:
        sheet = self.find(name)
        if sheet is not None:
            return sheet
        candidates = list(self._index())
        close = difflib.get_close_matches(normalize(name), candidates, n=3, cutoff=0.5)
        close_names = list(dict.fromkeys(self._index()[c] for c in close))
        hint = f"did you mean {', '.join(close_names)}?" if close_names else "see `roofline specs list`"
        raise UnknownDeviceError(f"unknown device {name!r}: {hint} (or add a sheet with --spec FILE)")


def _yaml_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def load_registry(extra_files: Iterable[Path] = (), env: dict[str, str] | None = None) -> SpecRegistry:
    """Built-in sheets, then every *.yaml in ROOFLINE_SPECS_DIR (os.pathsep-separated), then --spec files."""
    env = os.environ if env is None else env
    registry = SpecRegistry()
    registry.pending = {path.stem: path for path in _yaml_files(data_dir("hardware_specs"))}
    for entry in filter(None, env.get(ENV_DIR, "").split(os.pathsep)):
        directory = Path(entry)
        if not directory.is_dir():
            raise SpecError(f"{ENV_DIR}={entry}: not a directory")
        for path in _yaml_files(directory):
            registry.add(load_sheet(path), path, ENV_DIR)
    for path in extra_files:
        registry.add(load_sheet(Path(path)), Path(path), "--spec")
    # user sheets were added first; a built-in parsed later never replaces one of the same name
    return registry
