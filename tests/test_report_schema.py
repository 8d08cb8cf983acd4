"""The report's JSON Schema shipped with the package (roofline/report/report.schema.json): the file equals what the
models generate, it is a valid draft 2020-12 schema, and the reports analyze, bench and diagnose write satisfy it."""

from __future__ import annotations

import json

import pytest
from diagnose_devices import CPU as FAKE_CPU

from roofline.report import jsonschema as report_jsonschema

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture
def fake_cpu(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))


def validator():
    schema = json.loads(report_jsonschema.shipped())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def problems(path) -> list[str]:
    document = json.loads(path.read_text())
    return [f"{list(e.path)}: {e.message[:200]}" for e in validator().iter_errors(document)]


def test_the_shipped_schema_is_the_generated_one():
    assert report_jsonschema.shipped() == report_jsonschema.render(), (
        "roofline/report/report.schema.json is stale: run python -m roofline.report.jsonschema --write"
    )
    assert report_jsonschema.main(["--check"]) == 0


def test_the_schema_names_the_format_and_types_the_rows_by_source():
    schema = json.loads(report_jsonschema.shipped())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "roofline.report/2"
    assert schema["properties"]["schema"]["const"] == "roofline.report"
    assert schema["properties"]["version"]["const"] == 2
    assert sorted(schema["required"]) == sorted(
        ["schema", "version", "tool_version", "created_utc", "command", "source", "host", "devices", "rows"]
    )
    rows = schema["properties"]["rows"]["items"]["anyOf"]
    assert [r["$ref"] for r in rows] == ["#/$defs/Row", "#/$defs/BenchRow", "#/$defs/OpPoint"]
    assert schema["$defs"]["Row"]["additionalProperties"] is False  # a row key we do not write is an error


def test_the_roofline_schema_command_prints_the_shipped_file(cli):
    result = cli("schema")
    assert result.code == 0, result.err
    assert result.out == report_jsonschema.shipped()


def test_an_analyze_report_satisfies_it(cli, tmp_path):
    out = tmp_path / "a.json"
    args = ("analyze", "decode", "--model", "gpt2", "--batch", "1,8", "-d", "h100-sxm", "-o", str(out))
    assert cli(*args).code == 0
    assert problems(out) == []
    # and the schema is no tautology: a wrong row is refused
    document = json.loads(out.read_text())
    document["rows"][0]["flops"] = "many"
    document["rows"][1]["surprise"] = 1
    out.write_text(json.dumps(document))
    assert len(problems(out)) == 2


def test_bench_and_diagnose_reports_satisfy_it(cli, tmp_path, fake_cpu):
    bench = tmp_path / "b.json"
    args = ("bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cpu", "--max-time", "10ms")
    assert cli(*args, "-o", str(bench)).code == 0
    assert problems(bench) == []
    model = tmp_path / "model.py"
    model.write_text(
        "import torch\n"
        "def build():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()), (torch.randn(4, 8),)\n"
    )
    diagnosis = tmp_path / "d.json"
    result = cli("diagnose", str(model), "--entry", "build", "--device", "cpu", "--iters", "2", "-o", str(diagnosis))
    assert result.code == 0, result.err
    assert problems(diagnosis) == []
