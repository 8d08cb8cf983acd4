"""Large reports: the label and grouping functions do work linear in the rows (counted, never timed), and console
tables stay bounded (the first or worst rows, then a line saying how many more). benchmarks/report_scale.py times
the real thing at 100,000 rows."""

from __future__ import annotations

from types import SimpleNamespace

from roofline.gate.compare import PointResult
from roofline.render.analyze import split_labels
from roofline.render.base import MAX_TABLE_ROWS, shown_rows
from roofline.render.gate import GateRenderer
from roofline.report.points import _op_groups
from tests.gate_synthetic import bench_report, bench_row, spread

ROWS = 20_000


class CountingDict(dict):
    """A params dict that counts the lookups made in it."""

    lookups = 0

    def get(self, key, default=None):
        CountingDict.lookups += 1
        return super().get(key, default)


def _row(i: int) -> SimpleNamespace:
    params = CountingDict(m=16 * (i % 100 + 1), n=4096, k=64 * (i // 100 + 1), dtype="bf16")
    return SimpleNamespace(kind="gemm", label=f"m={params['m']} n=4096 k={params['k']}", params=params)


def test_split_labels_is_linear_and_keeps_what_varies():
    rows = [_row(i) for i in range(ROWS)]
    CountingDict.lookups = 0
    common, labels = split_labels(rows)
    assert CountingDict.lookups <= 10 * ROWS  # a few lookups per row and key (was: one per pair of rows)
    assert common == "gemm n=4096"
    assert labels[0] == "m=16 k=64" and labels[ROWS - 1] == "m=1600 k=12800"


def test_op_groups_of_one_op_in_many_modules():
    rows = [
        {"op": "aten::mm", "input_shapes": [[64, 64], [64, 64]], "phase": "forward", "module": f"blocks.{i}",
         "flops": 524288, "bytes": 49152, "time_s": 1e-5, "roof_time_s": 5e-6, "efficiency": 0.5, "bound": "memory"}
        for i in range(ROWS)
    ]  # fmt: skip
    (group,) = _op_groups(rows)
    assert group["count"] == ROWS and group["modules"] == [f"blocks.{i}" for i in range(ROWS)]
    assert group["time_s"] == sum(r["time_s"] for r in rows)


def test_shown_rows_keeps_order_and_the_worst():
    assert shown_rows(5) == ([0, 1, 2, 3, 4], 0)
    assert shown_rows(250) == (list(range(MAX_TABLE_ROWS)), 250 - MAX_TABLE_ROWS)
    severity = [0] * 250
    severity[200] = 3
    shown, hidden = shown_rows(250, severity.__getitem__)
    assert 200 in shown and shown == sorted(shown) and len(shown) == MAX_TABLE_ROWS and hidden == 150


def test_the_gate_table_of_many_points_shows_the_regression_and_says_how_many_more():
    from roofline.gate import check
    from roofline.report.baseline import from_report

    rows = [bench_row(f"m={i}", spread(1e-4, 5, 0.01)) for i in range(MAX_TABLE_ROWS + 50)]
    result = check(bench_report(rows), from_report(bench_report(rows), commit=""))
    last = result.points[-1]
    failed = PointResult(key=last.key, label="the slow one", verdict="regression", checks=last.checks)
    result = result.model_copy(update={"points": [*result.points[:-1], failed], "verdict": "regression"})
    text = GateRenderer(color=False).render(result)
    assert "the slow one" in text
    assert "… 50 more points not shown (the least severe verdicts): --format json lists every one" in text
    assert sum(1 for line in text.splitlines() if line.strip().startswith("gemm m=")) == MAX_TABLE_ROWS - 1
