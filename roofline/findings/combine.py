"""The model's combined bound: what the findings allow together, each op's saving counted once.

Findings of different rules may concern the same ops (a chain that is also launch-bound); their savings do not
add. :func:`combined` takes the findings largest saving first and keeps one only when it shares no op with those
kept, so the total is at least the largest single saving and at most the sum of all. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from roofline import ironlaw
from roofline.findings.model import ModelFinding


class Combined(BaseModel):
    """The iteration now, and at best with the kept findings' techniques applied."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    time_s: float  # the iteration (the larger of the summed op time and the wall time)
    best_time_s: float  # time_s minus the kept findings' savings
    rules: list[str]  # the kept findings' rules, in order
    overlapping: int  # findings left out because they share ops with a kept one

    @property
    def gain(self) -> float | None:
        return ironlaw.gain(self.time_s, self.best_time_s)


def combined(findings: Sequence[ModelFinding], time_s: float) -> Combined | None:
    """The combined bound of ``findings`` on an iteration of ``time_s`` (None without any saving)."""
    kept: list[ModelFinding] = []
    taken: set[int] = set()
    left_out = 0
    for f in sorted(findings, key=lambda f: -f.saving_s):
        if f.saving_s <= 0:
            continue
        ops = set(f.ops)
        if ops & taken:
            left_out += 1
            continue
        kept.append(f)
        taken |= ops
    if not kept or time_s <= 0:
        return None
    saving = min(sum(f.saving_s for f in kept), time_s)
    return Combined(time_s=time_s, best_time_s=time_s - saving, rules=[f.rule for f in kept], overlapping=left_out)


__all__ = ["Combined", "combined"]
