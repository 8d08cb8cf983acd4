"""Workload suites: a YAML list of workloads (kind + parameters; a list value sweeps that parameter)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from roofline.costs.models import get_model
from roofline.errors import UsageError, WorkloadError
from roofline.resources import data_dir
from roofline.yamlio import load_yaml, validate

WARN_SWEEP_ROWS = 500  # more rows than this: one warning line with the count before the work
MAX_SWEEP_ROWS = 1_000_000  # more: refused (a typo such as 1,2,...,1e9 must not hang the command)


def sweep_size(values: dict[str, Any]) -> int:
    """How many points :func:`expand` gives: the product of the list lengths (computed without expanding)."""
    return math.prod(len(v) if isinstance(v, list) else 1 for v in values.values())


def check_sweep(rows: int) -> str:
    """UsageError (exit 2) when a sweep has more than MAX_SWEEP_ROWS rows; the warning line to print when it has
    more than WARN_SWEEP_ROWS, else ''."""
    if rows > MAX_SWEEP_ROWS:
        raise UsageError(
            f"this sweep has {rows:,} rows, more than {MAX_SWEEP_ROWS:,}: shorten the comma lists "
            "(every combination of them is a row)"
        )
    if rows > WARN_SWEEP_ROWS:
        return f"warning: this sweep has {rows:,} rows (every combination of the comma lists is a row)"
    return ""


def expand(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Cartesian product of every list-valued parameter (a sweep), in the order given; UsageError above
    MAX_SWEEP_ROWS points."""
    check_sweep(sweep_size(values))
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
        if len(items) + sweep_size(values) > MAX_SWEEP_ROWS:
            raise WorkloadError(
                f"{source}: the suite sweeps more than {MAX_SWEEP_ROWS:,} rows: shorten its lists "
                "(every combination of an entry's lists is a row)"
            )
        model = get_model(kind)
        for point in expand(values):
            model.parse(point, source, strict=True)  # fail early, naming the entry
            items.append((kind, point, source))
    return suite, items
