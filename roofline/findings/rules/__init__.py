"""Every finding rule, one module per family; importing the package registers them all
(:mod:`roofline.findings.registry`; the registry's FAMILIES give the order of preference that breaks ranking ties):

- :mod:`~roofline.findings.rules.analytic`: one analytic row (the analytic stage);
- :mod:`~roofline.findings.rules.launch`: compile blockers, many short ops, Python loops over a time axis;
- :mod:`~roofline.findings.rules.fusion`: element-wise chains, written-out norms/softmax/activations, written-out
  attention, all pairs of one tensor; :mod:`~roofline.findings.rules.rewrites` (the same family, registered after
  it): element-wise ops in a row or in a loop over the same elements, a top-k written out, a KV cache grown by cat;
- :mod:`~roofline.findings.rules.matmul`: GEMV, matmuls of two activations, diag matmuls, fp32 matmuls,
  compute-bound and awkward shapes;
- :mod:`~roofline.findings.rules.layout`: NCHW convolutions, strided inputs;
- :mod:`~roofline.findings.rules.occupancy`: the GPU not filled;
- :mod:`~roofline.findings.rules.coverage`: the not-explained and near-roof verdicts on what the rules leave;
- :mod:`~roofline.findings.rules.counters`: the Nsight Compute counters' excess DRAM traffic;
- :mod:`~roofline.findings.rules.collectives`: a distributed step's exposed communication, the ranks' waits, small
  messages, stragglers.

:func:`produce_all` is the one entry point: a :class:`~roofline.findings.context.FindingContext` in, the findings
of the chosen stages out, ranked.
"""

from __future__ import annotations

from collections.abc import Sequence

from roofline.findings.base import Finding
from roofline.findings.context import FindingContext
from roofline.findings.model import ModelContext, ModelFinding
from roofline.findings.registry import STAGES, Producer, producers, run
from roofline.findings.rules import (  # noqa: F401  (registers them)
    analytic,
    collectives,
    counters,
    coverage,
    fusion,
    launch,
    layout,
    matmul,
    occupancy,
    rewrites,
)

#: the model rules' producers, in order (the model stage); pipeline.conclude runs these unless given others
RULES: tuple[Producer, ...] = producers(("model",))


def produce_all(
    ctx: FindingContext, stages: Sequence[str] = STAGES, chosen: Sequence[Producer] | None = None
) -> list[Finding]:
    """The findings of every registered producer of ``stages`` (or of the ``chosen`` producers), stage by stage,
    those under a stage's least share dropped, ranked with ``ctx.earlier`` (largest saving first); the new ones
    only."""
    picked = producers(stages) if chosen is None else [p for p in chosen if p.stage in stages]
    return run(ctx, picked)


def diagnose(ctx: ModelContext, rules: Sequence[Producer] = RULES) -> list[ModelFinding]:
    """The model stage alone on ``ctx``: every model rule's findings concerning at least MIN_FINDING_SHARE of the
    iteration, largest possible saving first."""
    found = produce_all(FindingContext(model=ctx), ("model",), rules)
    return [f for f in found if isinstance(f, ModelFinding)]


__all__ = ["RULES", "FindingContext", "diagnose", "produce_all"]
