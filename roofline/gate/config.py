"""The ``[tool.roofline.gate]`` table of pyproject.toml: a project's gate settings, beside its other tools'.

    [tool.roofline.gate]
    baseline = "ci/baseline-h100.json"       # default --baseline, relative to this pyproject.toml
    fail-on = ["efficiency:-3%", "time:+10%"] # rules on top of the defaults (grammar: roofline.gate.thresholds)
    confidence = 0.99                         # of the shift's confidence interval
    stats = true                              # false: compare single numbers (= --no-stats)

The nearest pyproject.toml with such a table, walking up from the working directory, is used; --fail-on rules
apply after its rules, and other options given on the command line replace its values. Unknown keys are errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from roofline.errors import UsageError


class GateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    baseline: str | None = None
    fail_on: list[str] = Field(default_factory=list, alias="fail-on")
    confidence: float | None = Field(default=None, ge=0.5, lt=1)
    stats: bool = True
    _path: Path | None = PrivateAttr(None)  # the pyproject.toml it came from

    @field_validator("fail_on", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @property
    def path(self) -> Path | None:
        return self._path

    @property
    def source(self) -> str:
        return f"{self._path} [tool.roofline.gate] fail-on" if self._path else "[tool.roofline.gate] fail-on"

    def baseline_path(self) -> Path | None:
        """``baseline``, relative to the pyproject.toml that names it."""
        if self.baseline is None:
            return None
        path = Path(self.baseline)
        return path if path.is_absolute() or self._path is None else self._path.parent / path


def find(start: Path | None = None) -> GateConfig:
    """The settings of the nearest pyproject.toml with a [tool.roofline.gate] table; defaults when none has one."""
    from roofline.pyproject import find_table

    found = find_table(("roofline", "gate"), start)
    if found is None:
        return GateConfig()
    path, table = found
    try:
        config = GateConfig.model_validate(table, strict=True)
    except ValidationError as exc:
        from roofline.yamlio import describe_validation_error

        raise UsageError(f"{path}: [tool.roofline.gate] {describe_validation_error(exc, 'docs/ci.md')}") from None
    config._path = path
    return config
