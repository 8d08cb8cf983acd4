"""benchmarks/diagnose_speed_gpu.py's pure parts on the CPU: diagnose's own time per case and its summary (median,
p90, the 0.5 s target), the cases selected, and the advice corpus's problems written as model files that roofline's
loader runs. No diagnose process is started here."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load() -> Any:
    path = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(
            "diagnose_speed_gpu", ROOT / "benchmarks" / "diagnose_speed_gpu.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = path


bench = _load()


def row(kind: str, wall: float, floor: float, **stages: float) -> dict[str, Any]:
    out = {"model": f"{kind}-{wall}", "kind": kind, "wall_s": wall, "floor_s": floor, "stages": stages}
    out["own_s"] = bench.own_seconds(out)
    return out


def test_own_time_is_the_wall_less_the_floor_and_the_model_iterations():
    case = row("single", 6.0, 4.25, setup=0.5, warmup=0.25, timed=0.5, profiled=0.125, render=0.25)
    assert case["own_s"] == 6.0 - 4.25 - (0.25 + 0.5 + 0.125)
    assert bench.own_seconds({"kind": "single", "wall_s": 3.0, "error": "exit 1"}) is None
    assert bench.own_seconds({"kind": "single", "skipped": "time budget"}) is None


def test_percentile_interpolates_between_ranks():
    assert bench.percentile([4.0, 1.0, 3.0, 2.0, 5.0], 0.5) == 3.0
    assert bench.percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0], 0.9) == 10.0
    assert bench.percentile([0.0, 10.0], 0.9) == 9.0
    assert bench.percentile([7.0], 0.9) == 7.0
    with pytest.raises(ValueError):
        bench.percentile([], 0.5)


def test_the_own_time_summary_is_over_the_single_and_corpus_cases():
    rows = [
        row("single", 5.0, 4.0, setup=0.25, render=0.125),  # own 1.0: write+exit 0.625
        row("corpus", 4.5, 4.0, setup=0.25, render=0.125, timed=0.25),  # own 0.25
        row("corpus", 4.5, 4.0, setup=0.125),  # own 0.5
        row("gpt2", 20.0, 4.0, load=12.0),  # not counted
        {"model": "x", "kind": "corpus", "wall_s": 1.0, "error": "exit 1", "own_s": None},
    ]
    summary = bench.own_time_summary(rows)
    assert summary["cases"] == 3 and summary["median_s"] == 0.5 and summary["target_s"] == 0.5
    assert summary["pass"] is True  # the median, at most 0.5 s
    assert summary["p90_s"] == pytest.approx(0.5 + 0.8 * (1.0 - 0.5))
    medians = summary["stage_median_s"]
    assert medians["setup"] == 0.25 and medians["render"] == 0.125  # a stage a case lacks counts 0
    # what is outside the report's stages: the own time less them (0.625, -0.125, 0.375)
    assert medians["write+exit"] == 0.375
    line = bench.own_time_line(summary)
    assert "median 0.50 s, p90 0.90 s over 3 cases" in line and "PASS" in line
    assert bench.own_time_summary(rows[:1])["pass"] is False  # 1.0 s
    nothing = bench.own_time_summary([rows[3]])
    assert nothing["median_s"] is None and not nothing["pass"] and "no case" in bench.own_time_line(nothing)


def test_only_takes_names_and_patterns_and_shard_splits_what_is_left():
    cases = [{"name": n} for n in ("op_add", "conv2d-c64", "conv+relu-stem", "model-x", "linear-tokens32k")]
    assert [c["name"] for c in bench.select(cases, "conv*")] == ["conv2d-c64", "conv+relu-stem"]
    assert [c["name"] for c in bench.select(cases, "op_add, linear-*")] == ["op_add", "linear-tokens32k"]
    assert bench.select(cases) == cases
    parts = [bench.select(cases, "", f"{i}/2") for i in (1, 2)]
    assert [c["name"] for c in parts[0]] == ["op_add", "conv+relu-stem", "linear-tokens32k"]
    assert sorted(c["name"] for p in parts for c in p) == sorted(c["name"] for c in cases)
    with pytest.raises(ValueError):
        bench.select(cases, "", "3/2")


def test_quick_cases_skip_the_gpt_models_and_write_every_corpus_problem(tmp_path):
    cases = bench.cases(tmp_path, device="cpu", quick=True, corpus=True)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for case in cases:
        by_kind.setdefault(case["kind"], []).append(case)
    assert all(c.get("skip") == "--quick" for c in by_kind["gpt2"] + by_kind["model"])
    problems = bench.corpus_problems()
    assert [c["name"] for c in by_kind["corpus"]] == [p.id for p in problems]
    files = [c["file"] for c in by_kind["corpus"]]
    assert len(set(files)) == len(files) and all(f.parent == tmp_path / "corpus" and f.exists() for f in files)
    assert {c["dtype"] for c in cases if not c.get("skip")} == {"fp32"}
    assert "torch.randn(128, 128)" in (tmp_path / "ops" / "op_gemm_8192.py").read_text()


def test_a_corpus_model_file_loads_as_the_corpus_builds_it(tmp_path):
    torch = pytest.importorskip("torch")
    from roofline.diagnose.loader import load_model

    problem = next(p for p in bench.corpus_problems() if p.id == "linear+gelu-tokens16k")
    path = bench.corpus_file(tmp_path, problem.id, "cpu", True)
    assert path.name == "linear_gelu-tokens16k.py"
    loaded = load_model(path, device="cpu")
    assert loaded.convention == "model-variable" and loaded.kwargs == {}
    expected, inputs, _ = problem.build("cpu", True)  # the same shapes (the CPU shape: m 32, k 64, n 64)
    assert [tuple(x.shape) for x in loaded.inputs] == [tuple(x.shape) for x in inputs] == [(32, 64)]
    assert [p.shape for p in loaded.model.parameters()] == [p.shape for p in expected.parameters()]
    assert isinstance(loaded.model[1], torch.nn.GELU)
