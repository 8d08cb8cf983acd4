"""Baselines: points and keys from bench and diagnose reports, machine info, identity, and the file itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roofline.report import baseline as baselines
from roofline.report.baseline import BaselineError, Identity, from_report, identity_of, points_of
from roofline.report.schema import read_report
from tests.gate_synthetic import bench_report, bench_row, diagnose_report, diagnose_row, spread

ROOT = Path(__file__).resolve().parents[1]
H100_REPORT = ROOT / "benchmarks" / "results" / "bench-gpu-h100.json"


def test_baseline_of_the_real_h100_bench_report():
    report = read_report(H100_REPORT)
    saved = from_report(report, path=H100_REPORT, commit="0123456789abcdef0123456789abcdef01234567")
    assert len(saved.points) == len(report.rows) == 32
    first = saved.points[0]
    assert first.key == "gemm | m=1024 n=1024 k=1024 | bf16 | gemm torch.matmul bf16"
    assert first.label == "gemm m=1024 n=1024 k=1024 bf16"
    assert (first.flops, first.bytes, first.kernels) == (2147483648, 6291456, 1)
    assert first.time_s == report.rows[0]["median_s"] and len(first.samples_s) == report.rows[0]["n"] == 125
    assert first.efficiency == report.rows[0]["efficiency"] and first.roof_time_s == report.rows[0]["roof_time_s"]
    assert len({p.key for p in saved.points}) == 32  # every key unique
    # an older report has no machine block: it is read from the bench block, devices, host and the clocks
    machine = saved.machine
    assert (machine.kind, machine.name, machine.sheet) == ("cuda", "NVIDIA H100 80GB HBM3", "h100-sxm")
    assert (machine.torch, machine.compute_capability, machine.roof_source) == ("2.11.0+cu130", "9.0", "measured")
    assert machine.sm_clock_mhz == 1980.0 and machine.python == "3.12.3"
    assert saved.identity == Identity(source="bench", suite="bench-gpu")
    (ref,) = saved.reports
    assert ref.command.startswith("roofline bench bench-gpu") and ref.path == str(H100_REPORT)
    assert first.run_medians_s == [first.time_s]  # one run: no drift to learn
    assert saved.commit == "0123456789abcdef0123456789abcdef01234567" and saved.tool_version


def test_machine_block_wins_over_the_bench_block():
    saved = from_report(bench_report([bench_row("m=1", spread(1e-4, 10, 0.01))]), commit="")
    machine = saved.machine
    assert (machine.driver, machine.cuda, machine.torch, machine.sm_count) == ("550.54.15", "12.4", "2.4.0", 132)


def test_diagnose_keys_count_occurrences_so_an_inserted_op_moves_no_other_key():
    s = spread(1e-5, 10, 0.02)
    rows = [
        diagnose_row("aten::mm", "layers.0.mlp", [[64, 128], [128, 256]], s),
        diagnose_row("aten::gelu", "layers.0.mlp", [[64, 256]], s),
        diagnose_row("aten::gelu", "layers.0.mlp", [[64, 256]], s),
        diagnose_row("aten::gelu", "layers.0.mlp", [[64, 256]], s, phase="backward"),
    ]
    keys = [p.key for p in points_of(diagnose_report(rows))]
    assert keys == [
        "forward | layers.0.mlp | aten::mm | [[64,128],[128,256]] | #0",
        "forward | layers.0.mlp | aten::gelu | [[64,256]] | #0",
        "forward | layers.0.mlp | aten::gelu | [[64,256]] | #1",
        "backward | layers.0.mlp | aten::gelu | [[64,256]] | #0",
    ]
    labels = [p.label for p in points_of(diagnose_report(rows))]
    assert labels[0] == "layers.0.mlp aten::mm 64×128, 128×256"
    assert labels[2] == "layers.0.mlp aten::gelu 64×256 #2" and labels[3].startswith("[backward] ")
    inserted = [rows[0], diagnose_row("aten::add", "layers.0", [[64, 256]], s), *rows[1:]]
    assert [p.key for p in points_of(diagnose_report(inserted))] == [
        keys[0],
        "forward | layers.0 | aten::add | [[64,256]] | #0",
        *keys[1:],
    ]


def test_diagnose_identity_and_untimed_ops():
    row = diagnose_row("aten::view", "", [[4, 4]], [])
    row.update(timed=False, time_s=0.0)
    report = diagnose_report([row], model="/work/x/models/mlp.py", dtype=None, mode="training")
    assert identity_of(report) == Identity(
        source="diagnose", model="mlp.py", model_path="/work/x/models/mlp.py", dtype=None, mode="training"
    )
    (point,) = points_of(report)
    assert point.label == "(model) aten::view 4×4" and point.time_s is None and point.efficiency is None


@pytest.mark.parametrize(
    ("a", "b", "why"),
    [
        (
            Identity(source="bench", suite="x"),
            Identity(source="bench", suite="y"),
            "baseline of suite 'x', report of suite 'y'",
        ),
        (Identity(source="bench", suite="x"), Identity(source="bench"), None),  # a report that does not say
        (
            Identity(source="bench"),
            Identity(source="diagnose", model="m.py"),
            "a bench baseline cannot gate a diagnose",
        ),
        (Identity(source="diagnose", model="a.py"), Identity(source="diagnose", model="b.py"), "model 'a.py'"),
        (
            Identity(source="diagnose", model="a.py", dtype="bf16"),
            Identity(source="diagnose", model="a.py", dtype="fp16"),
            "with dtype 'bf16', report with dtype 'fp16'",
        ),
        (
            Identity(source="diagnose", model="a.py", model_path="/ci/1/a.py"),
            Identity(source="diagnose", model="a.py", model_path="/ci/2/a.py"),
            None,  # another checkout of the same model
        ),
    ],
)
def test_identity_mismatch(a, b, why):
    found = a.mismatch(b)
    assert (found is None) if why is None else (why in found)


@pytest.mark.parametrize(
    ("command", "suite"),
    [
        ("roofline bench bench-gpu --device cuda -o r.json", "bench-gpu"),
        ("roofline bench suite ci/my-suite.yaml -o r.json", "my-suite"),
        ("roofline bench ./gate.yml", "gate"),
        ("roofline bench gemm -m 1 -n 1 -k 1", None),
        ("roofline bench --help", None),
    ],
)
def test_suite_from_the_command_line(command, suite):
    report = bench_report([bench_row("m=1", [1e-4])], suite=None).model_copy(update={"command": command})
    assert identity_of(report).suite == suite


def test_a_single_command_stores_no_suite_and_its_command_is_not_parsed():
    report = bench_report([bench_row("m=1", [1e-4])], suite="looks-like-a-suite")
    report = report.model_copy(update={"bench": {"suite": None}})  # as bench_report writes a single command
    assert identity_of(report).suite is None


def test_suite_block_wins_over_the_command():
    report = bench_report([bench_row("m=1", [1e-4])], suite="other")
    report = report.model_copy(update={"bench": {"suite": {"name": "Gate demo", "file": "/x/gate-gpu.yaml"}}})
    assert identity_of(report).suite == "gate-gpu"


def test_roundtrip_tolerates_unknown_keys(tmp_path):
    saved = from_report(bench_report([bench_row("m=1", spread(1e-4, 12, 0.01))]), commit="abc")
    path = baselines.save(saved, tmp_path / "b.json")
    data = json.loads(path.read_text())
    assert data["schema"] == "roofline.baseline" and data["version"] == 1
    assert list(data) == [
        "schema",
        "version",
        "created_utc",
        "tool_version",
        "commit",
        "identity",
        "machine",
        "reports",
        "points",
    ]
    data["added_later"] = {"x": 1}
    data["points"][0]["new_field"] = 3
    path.write_text(json.dumps(data))
    assert baselines.load(path).points == saved.points
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "corrupt baseline (invalid JSON"),
        (
            '{"schema": "roofline.report", "version": 1}',
            "not a roofline baseline (schema 'roofline.report'; expected \"roofline.baseline\")",
        ),
        ("[1, 2]", "not a roofline baseline (no schema"),
        ('{"schema": "roofline.baseline", "version": 2}', "baseline version 2 is not read by roofline"),
        (
            '{"schema": "roofline.baseline", "version": 1, "points": []}',
            "corrupt baseline: identity: required field is missing",
        ),
    ],
)
def test_bad_baseline_files_are_errors_and_never_overwritten(tmp_path, text, message):
    path = tmp_path / "b.json"
    path.write_text(text)
    with pytest.raises(BaselineError) as caught:
        baselines.load(path)
    assert message in str(caught.value) and str(path) in str(caught.value)
    saved = from_report(bench_report([bench_row("m=1", [1e-4])]), commit="")
    with pytest.raises(BaselineError, match="not overwritten"):
        baselines.save(saved, path)
    assert path.read_text() == text


def test_a_baseline_is_replaced_by_a_baseline(tmp_path):
    path = tmp_path / "b.json"
    first = from_report(bench_report([bench_row("m=1", [1e-4])]), commit="one")
    second = from_report(bench_report([bench_row("m=2", [1e-4])]), commit="two")
    baselines.save(first, path)
    baselines.save(second, path)
    assert baselines.load(path).commit == "two"


def test_missing_baseline_says_how_to_make_one(tmp_path):
    with pytest.raises(BaselineError, match=r"no such baseline: save one with `roofline baseline save REPORT.json -o"):
        baselines.load(tmp_path / "none.json")


def test_unmeasured_or_interrupted_reports_are_refused():
    report = bench_report([bench_row("m=1", [1e-4])])
    with pytest.raises(BaselineError, match="this is an analytic report, with no measured times"):
        from_report(report.model_copy(update={"source": "analytic"}))
    with pytest.raises(BaselineError, match=r"interrupted \(1 of 5 rows\): run it again"):
        from_report(report.model_copy(update={"interrupted": True, "total": 5}))
    with pytest.raises(BaselineError, match="no rows"):
        from_report(report.model_copy(update={"rows": []}))


def test_git_commit_is_none_outside_a_repository(tmp_path):
    assert baselines.git_commit(tmp_path) is None


def test_several_runs_pool_into_one_baseline():
    runs = [
        bench_report([bench_row("m=1", spread(1.00e-4, 20, 0.01)), bench_row("m=2", spread(2e-4, 10, 0.01))]),
        bench_report([bench_row("m=1", spread(1.06e-4, 30, 0.01))]),  # m=2 missing from this run
        bench_report([bench_row("m=1", spread(0.97e-4, 25, 0.01)), bench_row("m=2", spread(2e-4, 10, 0.01))]),
    ]
    saved = baselines.from_reports(runs, paths=["a.json", "b.json", "c.json"], commit="")
    one, two = saved.points
    assert one.run_medians_s == pytest.approx([1.00e-4, 1.06e-4, 0.97e-4], rel=1e-6)
    assert len(one.samples_s) == 75 and one.time_s == one.run_medians_s[0]  # the median run
    assert one.efficiency == one.roof_time_s / one.time_s
    assert len(two.run_medians_s) == 2 and len(two.samples_s) == 20
    assert [ref.path for ref in saved.reports] == ["a.json", "b.json", "c.json"]
    other = bench_report([bench_row("m=1", [1e-4])], suite="bench-gpu")
    with pytest.raises(BaselineError, match=r"^b.json: not a run of what a.json measured \(baseline of suite"):
        baselines.from_reports([runs[0], other], paths=["a.json", "b.json"])
