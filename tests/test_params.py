"""The workloads' parameters, declared once (roofline.costs.params): each declaration agrees with its cost model's
parameter class (which validates a suite's entries), and analyze and bench take exactly the declared options."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from roofline.cli.common import workload_values
from roofline.costs import get_model
from roofline.costs.params import ANALYZE, BENCH, BENCH_KINDS, REQUIRED, Param, Workload, bench_value

ROOT = Path(__file__).resolve().parents[1]
DECLARED = [("analyze", w) for w in ANALYZE.values()] + [("bench", w) for w in BENCH.values()]


def _texts(workload: Workload) -> dict[str, object]:
    """Every option at its default, a required size at 2 and a required word at a valid name."""
    valid = {"op": "relu"}
    texts: dict[str, object] = {}
    for p in workload.params:
        texts[p.key] = valid.get(p.key, "2") if p.default is REQUIRED else p.default
    return texts


@pytest.mark.parametrize(("command", "workload"), DECLARED, ids=[f"{c}-{w.kind}" for c, w in DECLARED])
def test_each_parameter_is_one_of_the_cost_model(command, workload):
    fields = get_model(workload.kind).params.model_fields
    for p in workload.params:
        if not p.suite:  # the command line's only (--config: the model; bench decode's -n -k: one GEMM)
            assert p.key not in fields, p.key
            continue
        assert p.key in fields, f"{command} {workload.kind}: {p.key} is no parameter of the cost model"
        field = fields[p.key]
        if p.default is None:  # not given: the model's default applies, so it must have one
            assert not field.is_required(), f"{workload.kind}.{p.key}: optional here, required by the model"


@pytest.mark.parametrize(("command", "workload"), DECLARED, ids=[f"{c}-{w.kind}" for c, w in DECLARED])
def test_a_declared_default_is_the_cost_model_default(command, workload):
    """Where both have a default, they agree (read as the command reads it, bench's aliases resolved)."""
    fields = get_model(workload.kind).params.model_fields
    values = workload_values(workload, _texts(workload), lambda: "fp16")
    for p in workload.params:
        if not p.suite or p.default in (None, REQUIRED) or fields[p.key].is_required():
            continue
        value = bench_value(workload.kind, p.key, values[p.key]) if command == "bench" else values[p.key]
        assert value == fields[p.key].default, f"{command} {workload.kind}.{p.key}"


def test_bench_runs_the_declared_kinds_and_resolves_sdpa():
    assert BENCH_KINDS == ("gemm", "attention", "elementwise", "norm", "conv2d", "decode")
    assert bench_value("attention", "impl", " SDPA ") == "fused"
    assert bench_value("attention", "impl", "naive") == "naive"
    assert bench_value("gemm", "dtype", "sdpa") == "sdpa"  # an alias is the parameter's own


def test_values_nest_in_the_declared_order_and_parse_by_kind():
    values = workload_values(ANALYZE["attention"], {**_texts(ANALYZE["attention"]), "seq_q": "1,2", "impl": "naive"})
    assert list(values) == list(ANALYZE["attention"].nesting)
    assert values["seq_q"] == [1, 2] and values["head_dim"] == 128 and values["impl"] == "naive"
    llm = workload_values(ANALYZE["decode"], {**_texts(ANALYZE["decode"]), "memory": "80GB", "launch_floor_us": "2.5"})
    assert llm["memory"] == 80 * 10**9 and llm["launch_floor_us"] == 2.5
    bench = workload_values(BENCH["gemm"], {**_texts(BENCH["gemm"]), "dtype": None}, lambda: "bf16")
    assert bench["dtype"] == "bf16"


def test_a_workload_names_each_parameter_once():
    with pytest.raises(ValueError, match="nesting"):
        Workload("gemm", (Param("m", ("-m",), "M."),), nesting=("m", "n"))


@pytest.mark.parametrize(("command", "app_name"), [("analyze", "analyze"), ("bench", "bench")])
def test_the_commands_take_the_declared_options(command, app_name):
    from roofline.cli import analyze, bench

    app = {"analyze": analyze.app, "bench": bench.app}[app_name]
    group = typer.main.get_command(app)
    for kind, workload in (ANALYZE if command == "analyze" else BENCH).items():
        options = [tuple(p.opts + p.secondary_opts) for p in group.commands[kind].params][: len(workload.params)]
        declared = [tuple(flag for f in p.flags for flag in f.split("/")) for p in workload.params]
        assert options == declared, f"{command} {kind}"


def test_the_declarations_load_without_pydantic():
    code = "import sys, roofline.costs.params; print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "False"
