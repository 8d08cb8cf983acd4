"""benchmarks/census.py, the op census (issue 26): its enumeration covers torch's namespaces (every nn module class
and nn.functional function built or listed as an exception, with a reason), every module case builds, and a quick
census on the CPU reports a covered module at 0% uncounted and an op with no formula (a custom op defined here) as
uncovered, with its time; one case's failure is recorded and does not stop the census."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def census():
    spec = importlib.util.spec_from_file_location("census", ROOT / "benchmarks" / "census.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["census"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("census", None)


# the smallest shapes every builder accepts (a build only; nothing runs)
def tiny(census):
    return census.Sizes(batch=2, channels=4, length=8, side2=8, side3=4, seq=4, hidden=8, heads=2, vocab=16,
                        classes=4, dtype="fp32")  # fmt: skip


def test_every_nn_module_class_is_built_or_an_exception(census):
    classes = census.module_classes()
    assert {"Linear", "Conv2d", "LSTM", "TransformerEncoderLayer", "CrossEntropyLoss", "Module"} <= set(classes)
    built = {case.name.removeprefix("nn.") for case in census.module_cases()}
    listed = set(census.MODULE_EXCEPTIONS)
    assert set(classes) - built - listed == set(), "a new torch.nn class: give it a rule or an exception"
    assert listed - set(classes) == set(), "an exception for a class torch no longer has"
    assert built & listed == set()
    assert all(reason.strip() for reason in census.MODULE_EXCEPTIONS.values())


def test_every_functional_function_is_built_or_an_exception(census):
    names = census.functional_names()
    assert {"relu", "conv2d", "cross_entropy", "interpolate", "scaled_dot_product_attention"} <= set(names)
    assert census.functional_unbuilt() == [], "a new torch.nn.functional function: give it a rule or an exception"
    assert set(census.FUNCTIONAL_EXCEPTIONS) - set(names) == set()
    # torch.fft is enumerated from its namespace, every public function
    fft = {case.name.removeprefix("torch.fft.") for case in census.fft_cases()}
    assert {"fft", "rfft", "irfft", "fft2", "fftfreq"} <= fft


@pytest.mark.filterwarnings("ignore")  # deprecated classes (NLLLoss2d), tiny adaptive-softmax clusters
def test_every_module_case_builds(census):
    sizes = tiny(census)
    for case in census.module_cases():
        model, inputs = case.build(census.Maker(sizes, "cpu", torch.float32))
        assert isinstance(model, torch.nn.Module), case.name
        assert inputs and all(x is not None for x in inputs), case.name


def test_quick_census_schema_and_coverage(census, tmp_path, capsys):
    out = tmp_path / "census.json"
    assert census.main(["--quick", "--filter", "Linear|LayerNorm|ReLU", "--warmup", "0", "--iters", "1",
                        "--out", str(out)]) == 0  # fmt: skip
    doc = json.loads(out.read_text())
    assert set(doc) >= {"version", "command", "device", "torch", "sizes", "totals", "uncovered_ops", "cases",
                        "exceptions"}  # fmt: skip
    assert doc["device"] == "cpu" and doc["version"] == census.VERSION
    assert [c["name"] for c in doc["cases"]] == ["nn.LayerNorm", "nn.Linear", "nn.ReLU"]
    for case in doc["cases"]:
        assert case["status"] == "ok", case
        assert case["mode"] == "training" and case["ops"] > 0 and case["time_s"] > 0
        # known covered: every op of these modules has a formula, forward and backward
        assert case["uncovered"] == {} and case["uncounted_s"] == 0 and case["uncounted_share"] == 0
    linear = next(c for c in doc["cases"] if c["name"] == "nn.Linear")
    assert {"aten::addmm", "aten::mm"} <= set(linear["covered"])  # forward and the weight's gradient
    totals = doc["totals"]
    assert (totals["cases"], totals["ok"], totals["failed"]) == (3, 3, 0)
    assert totals["uncounted_share"] == 0 and totals["covered_share"] == 1
    printed = capsys.readouterr().out
    assert "nn.Linear" in printed and "uncounted" in printed


@pytest.fixture(scope="module")
def mystery_op():
    """A custom op with no cost formula (it will never have one: it is defined here)."""
    lib = torch.library.Library("census_test", "DEF")
    lib.define("mystery(Tensor x) -> Tensor")
    lib.impl("mystery", lambda x: (x * 2).sin(), "CPU")
    yield torch.ops.census_test.mystery
    lib._destroy()


def test_an_uncovered_op_is_reported_with_its_time(census, mystery_op):
    cases = [
        census.Case("test.mystery", "custom", lambda t: (lambda x: mystery_op(x) + x, (t.act(),)), grad=False),
        census.Case("test.broken", "custom", lambda t: (lambda x: x.no_such_method(), (t.act(),))),
        census.Case("nn.ReLU", "activation", lambda t: (torch.nn.ReLU(), (t.act(),))),
    ]
    results = census.census(cases, "cpu", warmup=0, iters=2, progress=False)
    mystery, broken, relu = results
    assert mystery.status == "ok" and mystery.mode == "inference"
    assert list(mystery.uncovered) == ["census_test::mystery"]
    assert mystery.uncovered["census_test::mystery"] > 0
    assert mystery.uncounted_s == mystery.uncovered["census_test::mystery"]
    assert 0 < mystery.uncounted_share < 1  # the add after it is covered
    assert "aten::add" in mystery.covered
    # one case's failure: recorded in one line, the census goes on
    assert broken.status == "failed" and "no_such_method" in broken.error and "\n" not in broken.error
    assert relu.status == "ok" and relu.uncounted_share == 0
    rows = census.uncovered_ops(results)
    assert [row["op"] for row in rows] == ["census_test::mystery"] and rows[0]["cases"] == ["test.mystery"]
    totals = census.totals(results)
    assert (totals["ok"], totals["failed"]) == (2, 1)
    assert totals["uncounted_s"] == pytest.approx(mystery.uncounted_s)
    assert 0 < totals["uncounted_share"] < 1


def test_merge_joins_split_runs(census, tmp_path):
    def result(name, time_s, uncovered):
        return census.CaseResult(name, "x", mode="training", dtype="fp32", ops=3, covered=["aten::mm"],
                                 uncovered=uncovered, time_s=time_s, uncounted_s=sum(uncovered.values()))  # fmt: skip

    first = [result("a", 3.0, {}), result("b", 1.0, {"aten::sort": 0.5})]
    second = [result("c", 4.0, {"aten::sort": 1.0, "aten::fft": 0.5})]
    paths = []
    for n, results in enumerate((first, second)):
        doc = census.results_document(results, "cpu", census.CPU_SIZES, [])
        paths.append(tmp_path / f"part{n}.json")
        paths[-1].write_text(json.dumps(doc))
    out = tmp_path / "all.json"
    assert census.main(["--merge", *map(str, paths), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert [c["name"] for c in doc["cases"]] == ["a", "b", "c"]
    assert doc["totals"]["time_s"] == 8.0 and doc["totals"]["uncounted_s"] == 2.0
    assert doc["totals"]["uncounted_share"] == 2.0 / 8.0  # 0.5 + 1.0 + 0.5 of 3 + 1 + 4
    assert [(row["op"], row["time_s"], row["cases"]) for row in doc["uncovered_ops"]] == [
        ("aten::sort", 1.5, ["b", "c"]),
        ("aten::fft", 0.5, ["c"]),
    ]


def test_docs_list_the_exceptions(census):
    # docs/op-costs.md documents every class and function the census does not build, with the census's reason
    docs = (ROOT / "docs" / "op-costs.md").read_text(encoding="utf-8")
    assert census.exceptions_table() in docs, "paste: python benchmarks/census.py --exceptions"
