"""Readable entry points (issue 25): no function of the CLI (roofline/cli/) or of the diagnose pipeline
(roofline/diagnose/pipeline.py) is over 80 lines, its signature and docstring included. Read with ast."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 80
CHECKED = [*sorted((ROOT / "roofline" / "cli").glob("*.py")), ROOT / "roofline" / "diagnose" / "pipeline.py"]


def long_functions(path: Path, root: Path = ROOT, limit: int = LIMIT) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (node.end_lineno or node.lineno) - node.lineno + 1 > limit
    ]


def test_the_check_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "roofline").mkdir()
    path = tmp_path / "roofline" / "long.py"
    path.write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n", encoding="utf-8")
    found = [line.split(" ", 1)[1] for line in long_functions(path, tmp_path)]
    assert found == [f"long ({LIMIT + 1} lines)"]


def test_no_function_of_the_cli_or_the_pipeline_is_over_80_lines():
    assert len(CHECKED) > 10
    found = [line for path in CHECKED for line in long_functions(path)]
    assert not found, "split these functions: " + "; ".join(found)


#: issue 25: no module of the findings (the product's rules) is over this many lines
MODULE_LIMIT = 600


def test_no_findings_module_is_over_600_lines():
    modules = sorted((ROOT / "roofline" / "findings").rglob("*.py"))
    assert modules
    long = [
        f"{p.relative_to(ROOT)} ({n} lines)"
        for p in modules
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MODULE_LIMIT
    ]
    assert long == [], "split them by family or pattern: " + ", ".join(long)
