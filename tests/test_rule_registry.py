"""The rule registry (roofline.findings.registry): every rule declared once, its metadata consistent with what its
producer finds and with what --verify applies, and docs/diagnose.md's rule tables generated from it (as
tests/test_opcosts.py checks docs/op-costs.md against the cost registry)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from diagnose_devices import GPU, rec

import roofline.findings.rules  # noqa: F401  (registers every rule)
from roofline.diagnose.place import place
from roofline.diagnose.verify import NOT_MECHANICAL, TECHNIQUES, technique_for
from roofline.findings import registry
from roofline.findings.context import FindingContext
from roofline.findings.model import ModelContext
from roofline.findings.registry import Rule, Verify
from roofline.findings.rules import RULES, produce_all
from roofline.properties import Property
from roofline.report.records import OpTiming, Timing

DOCS = Path(__file__).resolve().parent.parent / "docs" / "diagnose.md"


def _table(text: str, header: str) -> str:
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[start:end])


def test_docs_rule_table_is_the_registry_s():
    assert _table(DOCS.read_text(), "| rule | fires when") == registry.rules_table(("model", "coverage", "collectives"))


def test_docs_verify_table_is_the_registry_s():
    assert _table(DOCS.read_text(), "| finding rule | technique |") == registry.verify_table()


def test_every_diagnose_rule_is_in_the_docs():
    documented = set(re.findall(r"^\| ([^|]+) \|", _table(DOCS.read_text(), "| rule | fires when"), re.M))
    named = {name for cell in documented for name in re.findall(r"`([a-z0-9-]+)`", cell)}
    assert {r.id for r in registry.rules(("model", "coverage", "collectives"))} == named


def test_rule_ids_are_unique_per_stage_and_families_known():
    for stage in registry.STAGES:
        ids = [r.id for r in registry.rules((stage,))]
        assert len(ids) == len(set(ids)), stage
    assert all(r.family in registry.FAMILIES for r in registry.rules())
    assert all(r.fires and r.technique and r.bound for r in registry.rules(registry.DIAGNOSE_STAGES) if not r.docs_with)


def test_a_duplicate_or_an_unknown_family_is_refused():
    rule = registry.find("launch-bound")
    assert rule is not None
    with pytest.raises(RuntimeError, match="duplicate"):
        registry.register("model", rule)(lambda ctx: [])
    odd = Rule(id="odd-rule", family="no-such-family", bottleneck="memory", properties=(Property.LOCALITY,))
    with pytest.raises(RuntimeError, match="one family"):
        registry.register("model", odd)(lambda ctx: [])
    assert registry.find("odd-rule") is None


def test_model_rules_keep_their_order_of_preference():
    assert [p.check.__name__ for p in RULES] == [
        "compile_blockers",
        "launch_bound",
        "sequential_loop",
        "all_pairs",
        "elementwise_chain",
        "written_out_fusion",
        "naive_attention",
        "elementwise_pair",
        "elementwise_recurrence",
        "written_out_topk",
        "kv_cache_cat",
        "memory_bound_gemv",
        "activation_matmul",
        "cheaper_algorithm",
        "fp32_matmul",
        "compute_bound",
        "awkward_shapes",
        "tensor_cores_idle",
        "conv_layout",
        "non_contiguous",
        "under_filled",
    ]


def test_verify_reads_the_registry():
    for rule in registry.rules(registry.DIAGNOSE_STAGES):
        for device in ("cuda", "cpu"):
            name, why = technique_for(rule.id, device)
            if rule.verify is None:
                assert name == "" and why.startswith("not verified: needs a code change (")
                assert (rule.code_change or "no mechanical technique") in why
            else:
                assert name == rule.verify.on(device) and why == ""
                assert all(part in TECHNIQUES for part in name.split("+"))  # one technique or several in turn
    names = {n for r in registry.rules() if r.verify is not None for n in r.verify.names}
    assert {part for n in names for part in n.split("+")} <= set(TECHNIQUES) and names <= set(registry.TECHNIQUE_DOCS)
    assert NOT_MECHANICAL["near-roof"] == registry.find("near-roof").code_change  # type: ignore[union-attr]
    assert Verify("tf32", "bf16-autocast").on("cuda:1") == "tf32" and Verify("pad").on("cpu") == "pad"


def _gemm_ctx() -> ModelContext:
    """A compute-bound fp32 matmul far below its roof on a GPU with TF32: fp32-matmul fires."""
    records = [rec(0, "aten::mm", [(4096, 4096), (4096, 4096)], [(4096, 4096)], 2 * 4096**3, 3 * 4096**2 * 4,
                   dtype="fp32", module="fc")]  # fmt: skip
    timing = Timing(device="cuda", iterations=1, wall_s=0.01, ops=[OpTiming(index=0, device_time_s=0.01, kernels=1)])
    placed = place(records, timing, GPU)
    return ModelContext.of(placed.points, GPU, timing, placed=placed)


def test_a_producer_finds_only_the_rules_it_declares():
    ctx = FindingContext(model=_gemm_ctx())
    for producer in registry.producers(("model", "coverage")):
        declared = {r.id for r in producer.rules}
        assert {f.rule for f in producer.produce(ctx)} <= declared, producer.name
    found = produce_all(ctx, ("model", "coverage"))
    assert "fp32-matmul" in [f.rule for f in found]
    matmul = registry.find("fp32-matmul")
    assert matmul is not None
    f = next(f for f in found if f.rule == "fp32-matmul")
    assert f.bottleneck == matmul.bottleneck and f.properties == [p.value for p in matmul.properties]


def test_stages_without_their_context_find_nothing():
    empty = FindingContext()
    assert produce_all(empty) == []


def test_every_rule_the_example_models_table_expects_is_registered():
    table = _table(DOCS.read_text(), "| file | bottleneck | expected top finding |")
    expected = {name for line in table.split("\n")[2:] for name in re.findall(r"`([a-z0-9]+-[a-z0-9-]+)`", line)}
    assert expected, table
    assert expected <= {r.id for r in registry.rules(registry.DIAGNOSE_STAGES)}
