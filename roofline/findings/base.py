"""What every finding is, and the arithmetic of its gain: one :class:`Finding` type for every rule
(:mod:`roofline.findings.rules`: the analytic rules, the model rules and the others).

A finding names the bottleneck, the properties (associativity, separability, locality, sparsity, redundancy,
symmetry) that a technique exploits, the technique, the evidence (numbers), the time now and an upper bound on the
time after the technique. The gain is ``time_s / best_time_s`` and the saving ``time_s - best_time_s``; findings are
ranked by their saving (:func:`rank`). Where the bound comes from the roofline alone (a what-if placement), the best
time is that placement's time; where a measured time is scaled by the roofline, it is :func:`scaled_time`.

Gains are bounds: every finding records ``floor_s``, the roofline time (launch floors included where launches
remain) of the ops it covers as they would be after its technique, and its best time is never below it
(:func:`bounded`, used by every rule).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple, TypeVar

from roofline.report.rows import Finding

# NB: large cuBLAS/CUTLASS tiles on A100/H100-class parts; the source text's 1792 vs 1793 example uses them.
TILE_M, TILE_N = 256, 128


def scaled_time(time_s: float, before_s: float, after_s: float) -> float | None:
    """A measured time divided by the roofline's gain from ``before_s`` to ``after_s`` (the roofline times, launch
    floors included, without and with the technique): ``T * after / before``. None when the technique gains
    nothing on the roofline."""
    if before_s <= 0 or after_s <= 0 or after_s >= before_s:
        return None
    return time_s * after_s / before_s


def bounded(
    time_now: float, before: float, after: float, *, measured: float | None = None
) -> tuple[float | None, float | None]:
    """(best, floor) of a technique whose roofline time (launch floors included) goes from ``before`` to ``after``.

    The floor is ``after``: the ops' roofline time after the technique. The best time is the floor itself -- the
    most the roofline allows -- and None when the technique gains nothing on the roofline (``after >= before``) or
    the ops already run at or below it (nothing saved). NB: not the measured time scaled by the roofline's gain:
    an op far below its roof before the technique may run far nearer it after (a fused kernel, a graph replay), so
    a scaled time is an estimate and can promise less than the fix delivers; the bound never does. ``measured`` is
    accepted for the callers that pass it and does not change the bound. The floor is None only when unknown
    (``after`` not positive or not finite)."""
    del measured
    if not (after > 0 and math.isfinite(after)):
        return None, None
    if after >= before or after >= time_now:
        return None, after
    return after, after


def at_floor(time_now: float, floor: float) -> tuple[float | None, float | None]:
    """(best, floor) where the technique reaches the ops' roofline time ``floor``: the best time is the floor
    itself when it is below ``time_now``."""
    return bounded(time_now, time_now, floor)


F = TypeVar("F", bound=Finding)


#: the order of what a technique changes (Finding.change): the model's math kept and no code change first, code
#: changes next, changes to the model's math last; an unknown change ranks with the code changes
CHANGE_ORDER = {"none": 0, "": 1, "code": 1, "math": 2}
#: said after the technique of a finding whose technique changes the model's math
MATH_LABEL = " (changes the model's math: check the accuracy)"


def labelled(technique: str, change: str) -> str:
    """``technique`` with the label of a change to the model's math (once)."""
    if change == "math" and not technique.endswith(MATH_LABEL):
        return technique + MATH_LABEL
    return technique


def rank(findings: Iterable[F]) -> list[F]:
    """By what the technique changes (:data:`CHANGE_ORDER`: no code change, a code change, the model's math), then
    the largest possible saving first; savings equal to two significant digits keep the given order (the rules'
    order of preference)."""
    listed = list(findings)
    order = {id(f): i for i, f in enumerate(listed)}
    return sorted(listed, key=lambda f: (CHANGE_ORDER.get(f.change, 1), -float(f"{f.saving_s:.2g}"), order[id(f)]))


class Waves(NamedTuple):
    """A GEMM's output tiles (TILE_M x TILE_N, times the batch) in waves over the device's compute units, now and
    with M and N trimmed to tile multiples."""

    tiles: int
    waves: int
    trimmed_m: int
    trimmed_n: int
    trimmed_tiles: int
    trimmed_waves: int
    units: int
    m: int
    n: int

    @property
    def busy(self) -> float:
        """The share of the compute units' wave-time doing useful work now (1: every wave full of whole tiles).

        NB: an edge tile (M or N not a tile multiple) takes a whole tile's time, as the kernel computes the padded
        tile: the waves take ``waves x`` one full tile's time, and the useful work is m x n of the
        ``waves x units x TILE_M x TILE_N`` elements they could compute. (Counting tiles instead -- tiles / (waves x
        units) -- treated a partial tile as cheaper and made 1793^2 on an A100 1.58x slower than 1792^2 where its two
        waves of whole tiles against one make it about 2x.)"""
        return self.m * self.n * (self.tiles // self._tiles_per_matrix) / (self.waves * self.units * TILE_M * TILE_N)

    @property
    def _tiles_per_matrix(self) -> int:
        return math.ceil(self.m / TILE_M) * math.ceil(self.n / TILE_N)

    @property
    def trimmed_busy(self) -> float:
        return self.trimmed_tiles / (self.trimmed_waves * self.units)

    @property
    def trimmed_share(self) -> float:
        """The trimmed GEMM's work as a share of this one's (its FLOPs and roofline time scale by it)."""
        return self.trimmed_m * self.trimmed_n / (self.m * self.n)


def wave_times(roof_time_s: float, waves: Waves) -> tuple[float, float]:
    """(now, trimmed): the roofline time of a compute-bound GEMM stretched by its wave quantization (the roofline
    assumes every unit busy; a partial last wave leaves units idle), and the same for the trimmed GEMM. NB: the
    trimmed time is never below the trimmed GEMM's own roofline time (its busy share is at most 1)."""
    return roof_time_s / waves.busy, roof_time_s * waves.trimmed_share / waves.trimmed_busy


def trimmed_waves(m: int, n: int, batch: int, units: int) -> Waves | None:
    """The waves of an (m x n) x batch GEMM's tiles on ``units`` compute units, and of the same GEMM with M and N
    trimmed down to tile multiples (at least one tile); None when trimming saves no wave (or units is 0)."""
    if not units:
        return None

    def count(rows: int, cols: int) -> tuple[int, int]:
        tiles = math.ceil(rows / TILE_M) * math.ceil(cols / TILE_N) * batch
        return tiles, math.ceil(tiles / units)

    tiles, now = count(m, n)
    m2, n2 = max(m // TILE_M * TILE_M, TILE_M), max(n // TILE_N * TILE_N, TILE_N)
    tiles2, better = count(m2, n2)
    if better >= now:
        return None
    return Waves(tiles, now, m2, n2, tiles2, better, units, m, n)


__all__ = [
    "CHANGE_ORDER",
    "MATH_LABEL",
    "TILE_M",
    "TILE_N",
    "Finding",
    "Waves",
    "at_floor",
    "bounded",
    "labelled",
    "rank",
    "scaled_time",
    "trimmed_waves",
    "wave_times",
]
