"""benchmarks/advice_oracle.py and its corpus (benchmarks/advice_corpus.py) on the CPU: the corpus generated from its
tables, the hit / harmful arithmetic on a hand-made table, one problem run with injected timings and techniques, the
script end to end in quick mode (JSON schema, --resume, the time limit), and once with the real torch.compile
(skipped without a C++ compiler)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from test_diagnose_cli import FAKE_CPU  # noqa: E402

from roofline.diagnose import verify as verify_module  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str) -> Any:
    path = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path[:] = path


oracle = _load("advice_oracle")
corpus_module = sys.modules["advice_corpus"]


@pytest.fixture
def fake_cpu(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))


# ------------------------------------------------------------------------------------------------ the corpus


def test_the_corpus_has_at_least_60_problems_generated_from_the_tables():
    generated = corpus_module.generated()
    assert len(generated) >= 60
    ids = [p.id for p in generated]
    assert len(ids) == len(set(ids))
    # every table entry is a problem: modules x their shapes, conv and linear tails x their shapes, epilogues
    tables = (
        sum(len(s) for s in corpus_module.MODULE_SHAPES.values())
        + len(corpus_module.CONV_TAILS) * len(corpus_module.CONV_CHAIN_SHAPES)
        + len(corpus_module.LINEAR_TAILS) * len(corpus_module.LINEAR_CHAIN_SHAPES)
        + sum(len(e[2]) for e in corpus_module.EPILOGUES.values())
        + sum(len(s) for s in corpus_module.SMALL.values())
    )
    assert len(generated) == tables
    assert {"conv+mish+mish-c64", "linear+bias+relu-tokens64k", "conv2d-stem", "lstm-h512"} <= set(ids)
    # the deliberately small (host-bound) problems: a family of their own, few
    small = [p for p in generated if p.kind == "small"]
    assert len(small) == sum(len(s) for s in corpus_module.SMALL.values()) == 6
    assert all(p.id.startswith("small-") for p in small) and len(small) < len(generated) / 10
    assert all(p.dtype("cuda") == "bf16" and p.dtype("cpu") == "fp32" for p in generated)
    models = corpus_module.example_models()
    assert {p.id for p in models} >= {"model-gelu_chain_unfused", "model-conv_nchw_bf16"}
    assert len(corpus_module.corpus()) == len(generated) + len(models)
    # the example models' GPU dtypes: benchmarks/diagnose_fixes_gpu.py's (fp32 where it says fp32, else bf16)
    fixes = sys.modules["diagnose_fixes_gpu"].FIXES
    assert {name for name, (dtype, _) in fixes.items() if dtype == "fp32"} == corpus_module.FP32_MODELS
    assert {p.family: p.dtype("cuda") for p in models if p.family in fixes} == {n: d for n, (d, _) in fixes.items()}


def test_the_gpu_shapes_are_gpu_bound_on_an_h100_and_fit_in_memory():
    """Every module and chain problem: 0.2-5 ms of kernel time at the H100's roofs in bf16 (the median at least
    0.5 ms), at most MEMORY_LIMIT bytes held; the small ones well under 50 us (host-bound)."""
    estimates = {p.id: (p.kind, corpus_module.estimate(p)) for p in corpus_module.generated()}
    sized = {pid: e for pid, (kind, e) in estimates.items() if kind != "small"}
    low = {pid: round(e.seconds * 1e3, 3) for pid, e in sized.items() if not 0.2e-3 <= e.seconds <= 5e-3}
    assert not low, low
    assert sorted(e.seconds for e in sized.values())[len(sized) // 2] >= 0.5e-3
    assert max(e.memory_bytes for e in sized.values()) <= corpus_module.MEMORY_LIMIT
    small = {pid: e for pid, (kind, e) in estimates.items() if kind == "small"}
    assert small and max(e.seconds for e in small.values()) < 50e-6


def test_the_estimate_counts_bytes_and_flops_op_by_op():
    peaks = corpus_module.ESTIMATE_PEAKS
    gelu = corpus_module.estimate(_problem("gelu-rows128k"))  # one op: 2^29 bf16 elements read and written
    assert (gelu.ops, gelu.memory_bytes) == (1, 2**31)
    assert gelu.seconds == pytest.approx(2**31 / peaks["bytes_per_s"], rel=1e-12)
    linear = corpus_module.estimate(_problem("linear-tokens32k"))  # addmm: its FLOPs at the tensor cores' roof
    assert linear.ops == 1
    assert linear.seconds == pytest.approx(2 * 32768 * 4096 * 4096 / peaks["tensor_flops"], rel=1e-12)
    held = (32768 * 4096 + 4096 * 4096 + 4096 + 32768 * 4096) * 2  # input, weight, bias, output
    assert linear.memory_bytes == held
    stem = corpus_module.estimate(_problem("conv2d-stem"))  # 3 input channels: the CUDA cores' roof
    flops = 2 * (64 * 64 * 112 * 112) * (3 * 7 * 7)
    assert stem.seconds == pytest.approx(flops / peaks["cuda_core_flops"], rel=1e-12)


def test_every_generated_problem_builds_on_the_gpu_shape_and_runs_on_the_cpu_shape():
    for problem in corpus_module.generated():
        model, inputs, _ = problem.build("meta", quick=False)  # the GPU shape, no memory
        assert inputs and all(t.device.type == "meta" for t in inputs), problem.id
        model, inputs, kwargs = problem.build("cpu", quick=True)
        with torch.no_grad():
            out = model(*inputs, **kwargs)
        assert torch.isfinite(out).all(), problem.id


# ------------------------------------------------------------------------------------------------ arithmetic


def _entry(speedups: dict[str, float | None], named: list[str], **more: Any) -> dict[str, Any]:
    findings = [{"rule": f"r{i}", "technique": t} for i, t in enumerate(named)]
    entry = {
        "kind": "module",
        "techniques": {n: {"speedup": s, "match": None if s is None else True} for n, s in speedups.items()},
        "findings": findings,
        "top": findings[: oracle.TOP],
        **more,
    }
    entry.update(oracle.score(entry))
    return entry


def test_hit_harmful_and_totals_on_a_hand_made_table():
    table = [
        # the best (compile, 2x) named third: a hit
        _entry({"compile": 2.0, "channels_last": 1.2}, ["", "channels_last", "compile"]),
        # the best (channels_last+compile) not named: compile is not (reduce-overhead is not compile); reduce-overhead
        # named and slower: demoted after --verify
        _entry(
            {"channels_last": 1.6, "channels_last+compile": 3.0, "reduce-overhead": 0.5},
            ["channels_last", "reduce-overhead"],
        ),
        # nothing gives 1.5x: no target; compile named, 0.97x, is not harmful (>= 0.95)
        _entry({"compile": 0.97, "channels_last": 1.4}, ["compile"], class_agrees=True),
        # the best named fourth does not count; tf32 (not among the five) is never the best but may be harmful;
        # after --verify tf32 (0.5x) goes last and compile is third: a hit
        _entry({"compile": 1.5, "tf32": 0.5}, ["tf32", "", "", "compile"], class_agrees=False),
        # nothing measured (every technique failed) and an error
        _entry({"compile": None}, ["compile"], error="failed: boom"),
        # the best combines two named parts: a hit by parts, not exactly; after --verify channels_last alone (0.8x)
        # reads "don't", so compile alone is advised: a miss
        _entry(
            {"channels_last+compile": 2.5, "compile": 1.2, "channels_last": 0.8},
            ["channels_last", "compile"],
            kind="chain",
        ),
    ]
    first, second, third, fourth, fifth, sixth = table
    assert (first["best"], first["best_speedup"], first["hit"], first["harmful"]) == ("compile", 2.0, True, [])
    assert (first["hit_exact"], first["hit_after_verify"], first["named_best"]) == (True, True, 2.0)
    assert (second["best"], second["hit"], second["harmful"]) == ("channels_last+compile", False, ["reduce-overhead"])
    assert second["top_after_verify"] == [
        {"technique": "channels_last", "slower": False},
        {"technique": "reduce-overhead", "slower": True},
    ]
    assert (second["hit_after_verify"], second["harmful_after_verify"]) == (False, [])
    assert (third["best"], third["hit"], third["harmful"]) == ("channels_last", None, [])
    assert third["hit_after_verify"] is None
    assert (fourth["best"], fourth["hit"], fourth["harmful"]) == ("compile", False, ["tf32"])
    assert [t["technique"] for t in fourth["top_after_verify"]] == ["", "", "compile"]
    assert (fourth["hit_after_verify"], fourth["harmful_after_verify"]) == (True, [])
    assert (fifth["best"], fifth["hit"], fifth["named_best"], fifth["hit_after_verify"]) == (None, None, None, None)
    assert (sixth["best"], sixth["hit"], sixth["hit_exact"], sixth["harmful"]) == (
        "channels_last+compile", True, False, ["channels_last"]
    )  # fmt: skip
    assert (sixth["hit_after_verify"], sixth["harmful_after_verify"]) == (False, [])
    summary = oracle.summarise(table)
    assert summary["problems"] == 6 and summary["failed"] == 1 and summary["measured"] == 5
    assert (summary["hits"], summary["hits_exact"], summary["best_at_least_hit_gain"]) == (2, 1, 4)
    assert summary["hit_rate"] == 0.5 and summary["hits_after_verify"] == 2 and summary["hit_rate_after_verify"] == 0.5
    assert (summary["harmful_problems"], summary["harmful_advice"]) == (3, 3)
    assert (summary["harmful_problems_after_verify"], summary["harmful_advice_after_verify"]) == (0, 0)
    assert (summary["class_agrees"], summary["class_measured"], summary["class_agreement"]) == (1, 2, 0.5)
    assert summary["by_kind"] == {
        "module": {"problems": 5, "targets": 3, "hits": 1, "harmful": 2},
        "chain": {"problems": 1, "targets": 1, "hits": 1, "harmful": 1},
    }
    text = oracle.totals_text(summary)
    assert "hit rate 2/4 (50%)" in text and "exactly 1" in text and "after --verify 2/4 (50%)" in text
    assert "harmful advice 3 in 3 problems (< 0.95x), after --verify 0 in 0" in text


def test_named_by_parts():
    assert oracle.named_by_parts("channels_last+compile", ["channels_last", "", "compile"])
    assert oracle.named_by_parts("channels_last+compile", ["channels_last+compile"])
    assert oracle.named_by_parts("compile", ["channels_last+compile"])  # a part of a named combination
    assert not oracle.named_by_parts("channels_last+compile", ["channels_last", "reduce-overhead"])
    assert not oracle.named_by_parts("compile", []) and not oracle.named_by_parts("", ["compile"])


def test_a_harmful_technique_whose_outputs_were_not_checked_is_not_demoted():
    """The re-ranking demotes only what was measured with matching outputs (VerifiedFinding.slower): a speedup
    without a check (an older entry) stays advice, and harmful after --verify."""
    entry = {
        "techniques": {"compile": {"speedup": 0.5}, "channels_last": {"speedup": 2.0, "match": True}},
        "top": [{"rule": "a", "technique": "compile"}],
    }
    scored = oracle.score(entry)
    assert scored["top_after_verify"] == [{"technique": "compile", "slower": False}]
    assert (scored["harmful"], scored["harmful_after_verify"], scored["hit_after_verify"]) == (
        ["compile"], ["compile"], False
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------ one problem


class Marked:
    """A technique's callable: calling it marks the state 'fast' (the injected timer then says 1 ms, else 3 ms)."""

    def __init__(self, fn: Any, state: dict[str, bool], perturb: bool = False) -> None:
        self.fn, self.state, self.perturb = fn, state, perturb

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.state["fast"] = True
        out = self.fn(*args, **kwargs)
        return out + 1.0 if self.perturb else out


@pytest.fixture
def injected(monkeypatch, fake_cpu):
    """'compile' made a 3x faster identity (no compiler needed), timings injected: eager 3 ms, compiled 1 ms."""
    state = {"fast": False}

    def fake_compile(model, inputs, kwargs, device):
        return Marked(model, state), inputs, kwargs

    def timer(step, iters, device):
        state["fast"] = False
        step()
        return iters * (1e-3 if state["fast"] else 3e-3)

    monkeypatch.setitem(verify_module.TECHNIQUES, "compile", fake_compile)
    return state, timer


def _options(timer: Any, **more: Any) -> Any:
    from diagnose_doubles import timed_by
    from test_api_diagnose import fake_time

    return oracle.Options(device="cpu", quick=True, rounds=3, timer=timer, boundaries=timed_by(fake_time), **more)


def _problem(pid: str) -> Any:
    (problem,) = [p for p in corpus_module.corpus() if p.id == pid]
    return problem


def test_one_problem_with_injected_timings(injected):
    _, timer = injected
    entry = oracle.run_problem(_problem("conv+relu-c64"), _options(timer))
    assert "error" not in entry
    techniques = entry["techniques"]
    assert techniques["compile"]["speedup"] == pytest.approx(3.0) and techniques["compile"]["match"] is True
    assert techniques["channels_last"]["speedup"] == pytest.approx(1.0)  # real channels_last, eager's 3 ms
    assert techniques["channels_last+compile"]["speedup"] == pytest.approx(3.0)
    assert techniques["reduce-overhead"]["note"].startswith("not applicable")
    assert entry["best"] in ("compile", "channels_last+compile") and entry["best_speedup"] == pytest.approx(3.0)
    named = [f["technique"] for f in entry["top"]]
    assert entry["hit"] is (entry["best"] in named)
    assert entry["findings"][: oracle.TOP] == entry["top"] and entry["dominant"]["op"] == "aten::convolution"


def test_a_mismatch_a_failure_and_a_broken_problem_are_recorded(injected, monkeypatch):
    state, timer = injected

    def perturbed(model, inputs, kwargs, device):
        return Marked(model, state, perturb=True), inputs, kwargs

    def broken(model, inputs, kwargs, device):
        raise RuntimeError("no such layout\nsecond line")

    monkeypatch.setitem(verify_module.TECHNIQUES, "compile", perturbed)
    monkeypatch.setitem(verify_module.TECHNIQUES, "channels_last", broken)
    entry = oracle.run_problem(_problem("conv+relu-c64"), _options(timer))
    compiled = entry["techniques"]["compile"]
    assert compiled["match"] is False and compiled["speedup"] is None and "outputs differ" in compiled["note"]
    assert entry["techniques"]["channels_last"]["note"] == "failed: RuntimeError: no such layout"
    assert entry["best"] is None and entry["hit"] is None

    class Broken(corpus_module.Problem):
        def build(self, device: str, quick: bool) -> Any:
            raise ValueError("cannot build")

    failed = oracle.run_problem(Broken("x-y", "x", "module"), _options(timer))
    assert failed["error"] == "failed: ValueError: cannot build"


def test_ncu_absent_is_not_measured(monkeypatch, tmp_path):
    monkeypatch.setattr(oracle.shutil, "which", lambda name: None)
    entry = {"id": "p", "dominant": {"kernel": "void k<1>(int)", "limiter": "memory"}}
    oracle.add_ncu(entry, oracle.Options(device="cuda", work=tmp_path))
    assert entry["ncu"] == {"skipped": "not measured: no ncu on PATH"} and entry["class_agrees"] is None


# ------------------------------------------------------------------------------------------------ the script


def test_the_script_in_quick_mode_writes_the_json(injected, tmp_path, capsys):
    out = tmp_path / "oracle.json"
    chosen = "small-linear+gelu-rows256,softmax-scores"
    args = ["--device", "cpu", "--filter", chosen, "--out", str(out), "--rounds", "1"]
    assert oracle.main([*args, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    doc = json.loads(out.read_text())
    assert printed == doc
    assert doc["schema"] == oracle.SCHEMA and doc["complete"] is True and doc["quick"] is True
    assert doc["device"] == "cpu" and doc["corpus"] == 2 and doc["command"].startswith("python benchmarks/")
    assert set(doc["summary"]) >= {"problems", "hit_rate", "harmful_advice", "class_agreement"}
    assert [e["id"] for e in doc["problems"]] == ["softmax-scores", "small-linear+gelu-rows256"]
    for entry in doc["problems"]:
        assert set(entry) >= {"id", "family", "kind", "dtype", "shape", "top", "techniques", "best", "hit", "harmful"}
        assert entry["dtype"] == "fp32" and entry["techniques"]["compile"]["match"] is True
        assert entry["techniques"]["channels_last"]["note"] == "not applicable: no 4-D input or weight"
    # --resume keeps what was measured; the table and totals on stdout
    before = {e["id"]: e["seconds"] for e in doc["problems"]}
    assert oracle.main([*args, "--resume"]) == 0
    text = capsys.readouterr().out
    assert "hit rate" in text and "softmax-scores" in text
    assert {e["id"]: e["seconds"] for e in json.loads(out.read_text())["problems"]} == before


def test_rediagnose_keeps_the_timings_and_diagnoses_again(injected, tmp_path, capsys):
    out = tmp_path / "oracle.json"
    args = ["--device", "cpu", "--filter", "softmax-scores", "--out", str(out), "--rounds", "1"]
    assert oracle.main(args) == 0
    doc = json.loads(out.read_text())
    (entry,) = doc["problems"]
    entry["findings"] = entry["top"] = [{"rule": "stale", "technique": "channels_last", "share": 1.0}]
    entry["ncu"] = {"sol": "kept only for the same kernel"}
    out.write_text(json.dumps(doc))
    assert oracle.main([*args, "--resume", "--rediagnose", "r2"]) == 0
    (again,) = json.loads(out.read_text())["problems"]
    # this checkout's findings (what they are depends on this host's timings), scored anew
    assert all(f["rule"] != "stale" for f in again["findings"]) and again["rediagnosed"] == "r2"
    assert again["top"] == again["findings"][: oracle.TOP] and "hit_after_verify" in again
    assert again["techniques"] == entry["techniques"] and again["seconds"] == entry["seconds"]  # timings kept
    assert again["ncu"] == entry["ncu"]  # the dominant kernel is the same
    again["findings"] = "not touched under the same tag"
    out.write_text(json.dumps({**doc, "problems": [again]}))
    assert oracle.main([*args, "--resume", "--rediagnose", "r2"]) == 0
    assert json.loads(out.read_text())["problems"][0]["findings"] == "not touched under the same tag"
    capsys.readouterr()


def test_the_documented_cpu_command_with_a_limit(injected, tmp_path, capsys):
    """--device cpu --quick --limit N: the first N problems of the corpus, the totals (before and after --verify)."""
    out = tmp_path / "x.json"
    assert oracle.main(["--device", "cpu", "--quick", "--limit", "2", "--out", str(out), "--rounds", "1"]) == 0
    doc = json.loads(out.read_text())
    assert [e["id"] for e in doc["problems"]] == [p.id for p in corpus_module.corpus()[:2]]
    assert doc["complete"] is True and doc["corpus"] == 2
    assert all("hit_after_verify" in e and "harmful_after_verify" in e for e in doc["problems"])
    assert {"hits_exact", "hits_after_verify", "harmful_advice_after_verify", "by_kind"} <= set(doc["summary"])
    assert "after --verify" in capsys.readouterr().out


def test_the_time_limit_stops_cleanly_and_writes(tmp_path, capsys):
    out = tmp_path / "oracle.json"
    assert oracle.main(["--device", "cpu", "--out", str(out), "--time-limit", "0"]) == 0
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["problems"] == [] and "time limit" in doc["stopped"]


def test_a_resumed_run_stopped_by_the_limit_keeps_what_it_did_not_reach(injected, tmp_path, capsys):
    out = tmp_path / "oracle.json"
    args = ["--device", "cpu", "--filter", "softmax-scores,small-linear+gelu-rows256", "--out", str(out)]
    assert oracle.main([*args, "--rounds", "1"]) == 0
    before = json.loads(out.read_text())["problems"]
    assert len(before) == 2
    assert oracle.main([*args, "--resume", "--ncu", "--time-limit", "0"]) == 0  # stopped before the first
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["problems"] == before  # nothing measured before is lost
    capsys.readouterr()


@pytest.mark.slow
@pytest.mark.xdist_group("inductor")  # the first inductor compile of a process costs seconds: paid once
def test_the_real_compile_on_one_tiny_problem(fake_cpu, tmp_path):
    from test_verify import _compile_works

    why = _compile_works()
    if why:
        pytest.skip(why)
    out = tmp_path / "oracle.json"
    args = ["--device", "cpu", "--filter", "small-linear+gelu-rows256", "--out", str(out), "--rounds", "1"]
    assert oracle.main(args) == 0
    (entry,) = json.loads(out.read_text())["problems"]
    compiled = entry["techniques"]["compile"]
    assert compiled["match"] is True and compiled["speedup"] > 0 and compiled["warm_s"] > 0


def test_warming_the_caches_compiles_each_compiling_technique_once(injected, monkeypatch):
    calls: list[str] = []
    compile_ = verify_module.TECHNIQUES["compile"]

    def counted(model, inputs, kwargs, device):
        calls.append(type(model).__name__)
        return compile_(model, inputs, kwargs, device)

    monkeypatch.setitem(verify_module.TECHNIQUES, "compile", counted)
    problems = [_problem("conv+relu-c64"), _problem("small-linear+gelu-rows256")]
    # the conv: compile and channels_last+compile (reduce-overhead is CUDA's); the Linear: compile alone
    assert oracle.warm_caches(problems, oracle.Options(device="cpu", quick=True)) == 3
    assert calls == ["Sequential"] * 3


SOL_CSV = """==PROF== Connected to process 1
"ID","Process ID","Process Name","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python","vectorized_elementwise_kernel","GPU Speed Of Light Throughput","Memory Throughput","%","{memory}"
"0","1","python","vectorized_elementwise_kernel","GPU Speed Of Light Throughput","DRAM Throughput","%","{memory}"
"0","1","python","vectorized_elementwise_kernel","GPU Speed Of Light Throughput","Duration","usecond","812.5"
"0","1","python","vectorized_elementwise_kernel","GPU Speed Of Light Throughput","Compute (SM) Throughput","%","{sm}"
"1","1","python","vectorized_elementwise_kernel","GPU Speed Of Light Throughput","Memory Throughput","%","10.2"
"1","1","python","vectorized_elementwise_kernel","GPU Speed Of Light Throughput","DRAM Throughput","%","10.2"
"1","1","python","vectorized_elementwise_kernel","GPU Speed Of Light Throughput","Duration","usecond","3.1"
"1","1","python","vectorized_elementwise_kernel","GPU Speed Of Light Throughput","Compute (SM) Throughput","%","0.2"
"""


def test_ncu_speed_of_light_against_the_dominant_limiter(monkeypatch, tmp_path):
    """A stand-in ncu (a script printing a SpeedOfLight CSV and its arguments): the kernel's base name is asked
    for, its class (memory: 85% memory, 20% SM) compared with the dominant op's limiter."""
    fake = tmp_path / "ncu"
    args_file = tmp_path / "args.json"
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open({str(args_file)!r}, 'w'))\n"
        f"print({SOL_CSV.format(memory='85.0', sm='20.0')!r})\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(oracle.shutil, "which", lambda name: str(fake) if name == "ncu" else None)
    kernel = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluFunctor>(int, float*)"
    memory = {"id": "gelu-rows128k", "dominant": {"kernel": kernel, "limiter": "memory"}}
    oracle.add_ncu(memory, oracle.Options(device="cuda", work=tmp_path))
    assert memory["ncu"]["class"] == "memory" and memory["ncu"]["sol"]["Compute (SM) Throughput"] == 20.0
    # two launches of that base name: the longest (812.5 us, not a 3.1 us copy of another kernel) is the one read
    assert memory["ncu"]["launches"] == 2 and memory["ncu"]["duration_s"] == pytest.approx(812.5e-6)
    assert memory["class_agrees"] is True
    called = json.loads(args_file.read_text())
    assert called[:4] == ["--clock-control", "none", "--section", "SpeedOfLight"]
    assert "regex:^vectorized_elementwise_kernel$" in called
    assert called[called.index("--launch-count") + 1] == str(oracle.NCU_LAUNCHES)
    latency = {"id": "gelu-rows128k", "dominant": {"kernel": kernel, "limiter": "latency"}}
    oracle.add_ncu(latency, oracle.Options(device="cuda", work=tmp_path))
    assert latency["class_ours"] == "neither" and latency["class_agrees"] is False
    assert not list(tmp_path.glob("ncu-*.py"))  # the runner script is removed


def test_a_technique_tied_with_the_best_is_a_hit_and_one_below_the_tie_is_not():
    # compile 1.64x against channels_last+compile 1.65x (batchnorm2d-c128 on the H100): within TIE, naming compile
    # is the best advice; at 1.55x (6% under the best) it is not
    tied = _entry({"compile": 1.64, "channels_last": 1.16, "channels_last+compile": 1.65}, ["compile"])
    assert (tied["best"], tied["hit"], tied["hit_exact"], tied["hit_after_verify"]) == (
        "channels_last+compile", True, True, True
    )  # fmt: skip
    below = _entry({"compile": 1.55, "channels_last": 1.16, "channels_last+compile": 1.65}, ["compile"])
    assert (below["hit"], below["hit_exact"], below["hit_after_verify"]) == (False, False, False)
    assert oracle.TIE * 1.65 <= 1.64 and oracle.TIE * 1.65 > 1.55


def test_rescore_scores_a_document_again_without_a_gpu(tmp_path, capsys):
    """--rescore: the stored timings, findings and ncu classes scored by this checkout (the layout class's side from
    its conversion kernel), the document written back, the table and totals printed; a missing file is exit 2."""
    copy = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<...>>(int, ...)"
    layout = _entry({"compile": 1.2, "channels_last+compile": 2.0}, ["channels_last+compile"])
    layout.update(id="conv2d-c64", dominant={"limiter": "layout", "kernel": copy}, ncu={"class": "compute"},
                  class_ours="neither", class_agrees=False)  # fmt: skip
    latency = _entry({"compile": 1.1}, [""])
    latency.update(id="cumsum", dominant={"limiter": "latency", "kernel": "scan"}, ncu={"class": "compute"})
    path = tmp_path / "advice.json"
    path.write_text(json.dumps({"schema": oracle.SCHEMA, "command": "x", "problems": [layout, latency]}))
    assert oracle.main(["--out", str(path), "--rescore"]) == 0
    doc = json.loads(path.read_text())
    first, second = doc["problems"]
    assert (first["class_ours"], first["class_agrees"]) == ("compute", True)
    assert (second["class_ours"], second["class_agrees"]) == ("neither", False)
    assert doc["summary"]["class_agrees"] == 1 and doc["summary"]["class_measured"] == 2 and doc["command"] == "x"
    assert "bound class agrees with ncu 1/2 (50%)" in capsys.readouterr().out
    assert oracle.main(["--out", str(tmp_path / "none.json"), "--rescore"]) == 2


def test_a_filtered_resume_keeps_the_problems_it_did_not_select(injected, tmp_path, capsys, monkeypatch):
    """--resume --filter X measures X again (here: --ncu --ncu-redo on X only) and keeps every other problem of the
    document as it was; a second pass under the same redo tag measures nothing again."""
    out = tmp_path / "oracle.json"
    both = ["--device", "cpu", "--filter", "softmax-scores,small-linear+gelu-rows256", "--out", str(out)]
    assert oracle.main([*both, "--rounds", "1"]) == 0
    before = {e["id"]: e for e in json.loads(out.read_text())["problems"]}
    calls = []

    def fake_ncu(entry, options):
        calls.append(entry["id"])
        return {"kernel": "k", "sol": {}, "class": "memory"}

    monkeypatch.setattr(oracle, "run_ncu", fake_ncu)
    one = ["--device", "cpu", "--filter", "softmax-scores", "--out", str(out), "--resume", "--ncu", "--ncu-redo", "n2"]
    assert oracle.main(one) == 0
    after = {e["id"]: e for e in json.loads(out.read_text())["problems"]}
    assert set(after) == set(before) and after["small-linear+gelu-rows256"] == before["small-linear+gelu-rows256"]
    assert calls == ["softmax-scores"] and after["softmax-scores"]["ncu"]["redone"] == "n2"
    assert oracle.main(one) == 0 and calls == ["softmax-scores"]  # redone under n2 already
    capsys.readouterr()
