"""The rule registry: every finding rule declared once, with its metadata, and the producers that find them.

A :class:`Rule` is what a finding's ``rule`` names: its id, family, bottleneck class, the properties its technique
exploits, the technique, the mechanical technique(s) ``roofline diagnose --verify`` can apply (:class:`Verify`) or
the code change it needs instead, and its row of the rule tables in docs/diagnose.md (:func:`rules_table`,
:func:`verify_table`; tests/test_rule_registry.py checks the docs against them).

A :class:`Producer` finds the findings of one or more rules: ``produce(ctx: FindingContext) -> list[Finding]``, one
signature for every producer. Producers run by stage (:data:`STAGES`: analytic rows, a model's placed ops, the
coverage verdicts on what those leave, the Nsight Compute counters, a distributed step's communication), each
stage's findings ranked with the earlier ones (:func:`run`), ties in the order of :data:`FAMILIES`. The family
modules (``roofline.findings.rules.*``) declare their rules with :func:`register` (a producer of the whole context),
:func:`model_rule` (a check on a model's :class:`~roofline.findings.model.ModelContext`) or :func:`analytic_rule` (a
check on one analytic row); importing ``roofline.findings.rules`` registers them all.

Adding a rule: declare its :class:`Rule` beside its check in its family's module, and test it in a test file of
its own; the docs tables are generated from the registry (``python -m roofline.findings.rules``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from roofline.findings.base import MATH_LABEL, Finding, labelled, rank
from roofline.findings.context import FindingContext
from roofline.findings.model import MIN_FINDING_SHARE
from roofline.properties import Property

#: the stages, in the order they run: each stage's producers see the findings of the stages before
STAGES = ("analytic", "model", "coverage", "counters", "collectives")
#: the families, in the order of preference that breaks ranking ties (a family's rules in the order registered)
FAMILIES = (
    "analytic",
    "launch",
    "fusion",
    "matmul",
    "layout",
    "occupancy",
    "coverage",
    "counters",
    "collectives",
)
#: the stages of a diagnosis (an analytic row's rules share some ids with the model rules: the same advice)
DIAGNOSE_STAGES = STAGES[1:]
#: findings of a stage concerning less than this share of the iteration are dropped
MIN_SHARE = {"model": MIN_FINDING_SHARE}

#: what each mechanical technique does (docs/diagnose.md's --verify table; roofline.diagnose.verify applies them)
TECHNIQUE_DOCS: dict[str, str] = {
    "compile": "`torch.compile(model)`",
    "reduce-overhead": '`torch.compile(model, mode="reduce-overhead")` (CUDA graphs)',
    "channels_last": "the model and its 4-D inputs in `torch.channels_last`",
    "channels_last+compile": "the model and its 4-D inputs in `torch.channels_last`, then `torch.compile(model)`",
    "tf32": (
        "`torch.backends.cuda.matmul.allow_tf32` and `torch.backends.cudnn.allow_tf32` set only around each call, "
        "always restored"
    ),
    "bf16-autocast": "`torch.autocast(dtype=torch.bfloat16)` around each call",
    "static-kv-cache": (
        "the model's own static cache, where it exposes one: a boolean attribute `static_kv_cache` on the model or "
        "a submodule, set `True` on the copy (`workloads/models/kv_cache_cat.py` shows the convention); otherwise "
        '"not applicable: the model exposes no static KV cache ..."'
    ),
    "pad": (
        "the `nn.Linear` layers of the finding's ops replaced by a padded copy: M (rows), N (out features) and K (in "
        "features) padded with zeros to multiples of 64 (`findings.shapes.ALIGN`), the output cut back (the same "
        "values; the padding's copies are in the measured time); matmuls that are not `nn.Linear` layers: \"not "
        'applicable: ... pad them in the code"'
    ),
}


@dataclass(frozen=True)
class Verify:
    """The mechanical technique ``--verify`` applies for a rule (a name of :data:`TECHNIQUE_DOCS`), on a CUDA
    device and on the CPU (the same unless ``cpu`` is given)."""

    cuda: str
    cpu: str = ""

    def on(self, device: str) -> str:
        """The technique on ``device`` ('cuda', 'cuda:1', 'cpu')."""
        return self.cuda if device.startswith("cuda") or not self.cpu else self.cpu

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n for n in (self.cuda, self.cpu) if n))


@dataclass(frozen=True)
class Rule:
    """One finding rule, declared once: what its findings say, what ``--verify`` does with them, its docs row."""

    id: str  # the finding's ``rule``
    family: str  # the module that finds it: roofline.findings.rules.<family> (fusion's rewrites: rules.rewrites)
    bottleneck: str  # the bottleneck class its findings name; 'of its ops': the class holding most of their time
    properties: tuple[Property, ...]  # what the technique exploits (the source texts' six properties)
    technique: str = ""  # the technique, as the docs table says it (the finding's own text has its numbers)
    fires: str = ""  # docs: when it fires (its thresholds)
    bound: str = ""  # docs: its bound on the gain
    qualifier: str = ""  # docs: said after the properties ('precision')
    verify: Verify | None = None  # the mechanical technique --verify applies
    code_change: str = ""  # why --verify leaves it: the code change it needs
    docs_with: str = ""  # the rule whose docs row it shares ('' its own row)
    changes_math: bool = False  # the technique changes the model's numbers (sparsity, a lower precision, low rank)

    @property
    def change(self) -> str:
        """What the technique changes, the findings' first ranking key: 'math' (the model's numbers), 'none' (a
        mechanical technique --verify applies: the math kept, no code change), 'code' (a code change keeping the
        math)."""
        if self.changes_math:
            return "math"
        return "none" if self.verify is not None else "code"

    @property
    def property_text(self) -> str:
        text = " + ".join(p.value for p in self.properties) or "-"
        return f"{text} ({self.qualifier})" if self.qualifier else text


Produce = Callable[[FindingContext], list[Finding]]


@dataclass(frozen=True)
class Producer:
    """A function finding the findings of ``rules`` in one stage: ``produce(ctx) -> findings`` (unfiltered,
    unranked: :func:`run` drops a stage's small ones and ranks). ``check`` is the function declared (a model or
    analytic rule's check on its own context; the producer itself otherwise)."""

    name: str
    stage: str
    rules: tuple[Rule, ...]
    produce: Produce
    check: Callable[..., Any]

    @property
    def family(self) -> str:
        return self.rules[0].family


#: every rule, by (stage, id), and every producer, in the order registered (the order of preference that breaks
#: ranking ties)
RULES: dict[tuple[str, str], Rule] = {}
PRODUCERS: list[Producer] = []

C = TypeVar("C", bound=Callable[..., Any])
F = TypeVar("F", bound=Finding)


def _add(stage: str, rules: Sequence[Rule], produce: Produce, check: Callable[..., Any]) -> None:
    if stage not in STAGES:
        raise RuntimeError(f"unknown finding stage {stage!r}: one of {', '.join(STAGES)}")
    if not rules or any(r.family not in FAMILIES for r in rules) or len({r.family for r in rules}) > 1:
        raise RuntimeError(f"a producer's rules are of one family of {', '.join(FAMILIES)}: {rules}")
    for rule in rules:
        if (stage, rule.id) in RULES:
            raise RuntimeError(f"duplicate finding rule {rule.id} in stage {stage}")
        RULES[stage, rule.id] = rule
    name = f"{getattr(check, '__module__', '')}.{getattr(check, '__name__', '')}"
    PRODUCERS.append(Producer(name, stage, tuple(rules), produce, check))


def register(stage: str, *rules: Rule) -> Callable[[Produce], Produce]:
    """Register ``produce(ctx: FindingContext) -> list[Finding]`` as the producer of ``rules`` in ``stage``."""

    def wrap(produce: Produce) -> Produce:
        _add(stage, rules, produce, produce)
        return produce

    return wrap


def _listed(result: Finding | Sequence[Finding] | None) -> list[Finding]:
    if result is None:
        return []
    return [result] if isinstance(result, Finding) else list(result)


def model_rule(*rules: Rule) -> Callable[[C], C]:
    """Register a check on a model's placed ops, ``check(ctx: ModelContext) -> finding | [findings] | None``, as
    the model stage's producer of ``rules`` (nothing without a model)."""

    def wrap(check: C) -> C:
        def produce(ctx: FindingContext) -> list[Finding]:
            return [] if ctx.model is None else _listed(check(ctx.model))

        _add("model", rules, produce, check)
        return check

    return wrap


def analytic_rule(*rules: Rule) -> Callable[[C], C]:
    """Register a check on one analytic row, ``check(ctx: AnalyticContext) -> Finding | None``, as the analytic
    stage's producer of ``rules`` (nothing without a row)."""

    def wrap(check: C) -> C:
        def produce(ctx: FindingContext) -> list[Finding]:
            return [] if ctx.analytic is None else _listed(check(ctx.analytic))

        _add("analytic", rules, produce, check)
        return check

    return wrap


def producers(stages: Sequence[str] = STAGES) -> tuple[Producer, ...]:
    """The producers of ``stages`` in the order of preference: by family (:data:`FAMILIES`), then as registered."""
    chosen = [(FAMILIES.index(p.family), i, p) for i, p in enumerate(PRODUCERS) if p.stage in stages]
    return tuple(p for _, _, p in sorted(chosen, key=lambda t: t[:2]))


def rules(stages: Sequence[str] = STAGES) -> tuple[Rule, ...]:
    """The rules of ``stages``, in the order of preference (:func:`producers`)."""
    return tuple(r for p in producers(stages) for r in p.rules)


def find(rule_id: str, stages: Sequence[str] = DIAGNOSE_STAGES) -> Rule | None:
    """The rule ``rule_id`` of ``stages`` (the first registered), None if none."""
    return next((r for r in rules(stages) if r.id == rule_id), None)


def run(ctx: FindingContext, chosen: Sequence[Producer]) -> list[Finding]:
    """The findings of ``chosen`` producers, stage by stage (:data:`STAGES`): each stage's producers see the
    findings before them as ``ctx.earlier``; a stage's findings under its :data:`MIN_SHARE` are dropped; all
    ranked together with ``ctx.earlier`` (largest saving first, ties in the producers' order). Returns the new
    findings only."""
    found: list[Finding] = []
    for stage in STAGES:
        members = [p for p in chosen if p.stage == stage]
        if not members:
            continue
        seen = replace(ctx, earlier=(*ctx.earlier, *found))
        new = [stamped(f, stage) for p in members for f in p.produce(seen)]
        least = MIN_SHARE.get(stage)
        if least is not None:
            new = [f for f in new if getattr(f, "share", 1.0) >= least]
        found = rank([*found, *new])
    return found


def stamped(finding: F, stage: str) -> F:
    """``finding`` with what its rule's technique changes (Finding.change: the first ranking key) and the label of
    a change to the model's math, where the rule's check did not set them."""
    rule = RULES.get((stage, finding.rule))
    if rule is None or finding.change:
        return finding
    return finding.model_copy(update={"change": rule.change, "technique": labelled(finding.technique, rule.change)})


# ------------------------------------------------------------------------------------------- docs tables


def rules_table(stages: Sequence[str] = DIAGNOSE_STAGES) -> str:
    """The markdown table of the rules of ``stages`` (docs/diagnose.md's): rule, fires when, property, technique,
    bound on the gain; rules sharing a row (``docs_with``) listed together."""
    listed = rules(stages)
    lines = ["| rule | fires when (thresholds) | property | technique | bound on the gain |", "|---|---|---|---|---|"]
    for rule in listed:
        if rule.docs_with:
            continue
        ids = [rule.id, *(r.id for r in listed if r.docs_with == rule.id)]
        names = ", ".join(f"`{i}`" for i in ids)
        lines.append(f"| {names} | {rule.fires} | {rule.property_text} | {rule.technique} | {rule.bound} |")
    return "\n".join(lines)


def verify_table(stages: Sequence[str] = DIAGNOSE_STAGES) -> str:
    """The markdown table of ``--verify``'s techniques (docs/diagnose.md's): the rules sharing a mechanical
    technique, what it does; then every other rule."""
    listed = rules(stages)
    lines = ["| finding rule | technique |", "|---|---|"]
    groups: dict[Verify, list[str]] = {}
    for rule in listed:
        if rule.verify is not None:
            groups.setdefault(rule.verify, []).append(rule.id)
    for verify, ids in groups.items():
        names = ", ".join(f"`{i}`" for i in ids)
        if verify.cpu and verify.cpu != verify.cuda:
            text = (
                f"on CUDA `{verify.cuda}`: {TECHNIQUE_DOCS[verify.cuda]}; on the CPU `{verify.cpu}`: "
                f"{TECHNIQUE_DOCS[verify.cpu]}"
            )
        else:
            text = f"`{verify.cuda}`: {TECHNIQUE_DOCS[verify.cuda]}"
        lines.append(f"| {names} | {text} |")
    others = ", ".join(f"`{r.id}`" for r in listed if r.verify is None)
    lines.append(f'| every other rule ({others}) | listed as "not verified: needs a code change (...)" |')
    return "\n".join(lines)


__all__ = [
    "DIAGNOSE_STAGES",
    "FAMILIES",
    "MATH_LABEL",
    "MIN_SHARE",
    "PRODUCERS",
    "RULES",
    "STAGES",
    "TECHNIQUE_DOCS",
    "Produce",
    "Producer",
    "Rule",
    "Verify",
    "analytic_rule",
    "find",
    "model_rule",
    "producers",
    "register",
    "rules",
    "rules_table",
    "run",
    "stamped",
    "verify_table",
]
