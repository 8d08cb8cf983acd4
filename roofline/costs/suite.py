"""Workload suites: a YAML list of workloads (kind + parameters; a list value sweeps that parameter)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from roofline.costs.base import get_model
from roofline.errors import WorkloadError
from roofline.resources import data_dir
from roofline.yamlio import load_yaml, validate


def expand(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Cartesian product of every list-valued parameter (a sweep), in the order given."""
    keys = list(values)
    axes = [v if isinstance(v, list) else [v] for v in values.values()]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes)]


class Suite(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    name: str
    description: str = ""
    workloads: list[dict[str, Any]] = Field(min_length=1)


def shipped_suites() -> list[str]:
    """The names of the suites shipped in workloads/suites/ (`roofline bench NAME`, `roofline gate NAME`)."""
    return sorted(path.stem for path in (data_dir("workloads") / "suites").glob("*.yaml"))


def suite_path(name_or_path: str) -> Path:
    """A path, or the name of a shipped suite in workloads/suites/."""
    path = Path(name_or_path)
    if path.exists() or path.suffix in (".yaml", ".yml"):
        return path
    shipped = data_dir("workloads") / "suites" / f"{name_or_path}.yaml"
    if shipped.exists():
        return shipped
    names = ", ".join(shipped_suites())
    raise WorkloadError(f"no suite file {name_or_path!r}: give a path to a YAML suite or one of: {names}")


def load_suite(name_or_path: str) -> tuple[Suite, list[tuple[str, dict[str, Any], str]]]:
    """The suite and its expanded items as (kind, values, source) with every parameter validated."""
    path = suite_path(name_or_path)
    suite = validate(Suite, load_yaml(path, WorkloadError), str(path), WorkloadError, doc="docs/cost-models.md")
    items: list[tuple[str, dict[str, Any], str]] = []
    for index, entry in enumerate(suite.workloads):
        source = f"{path}: workloads[{index}]"
        values = dict(entry)
        kind = values.pop("kind", None)
        if not isinstance(kind, str):
            raise WorkloadError(f"{source}: missing 'kind' (one of the `roofline analyze` kinds, e.g. gemm)")
        model = get_model(kind)
        for point in expand(values):
            model.parse(point, source)  # fail early, naming the entry
            items.append((kind, point, source))
    return suite, items
