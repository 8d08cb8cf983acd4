"""A pytest plugin for measuring the suite on a shared machine: each test's CPU seconds (its process's and the
children it waited for) and wall seconds, one line per test in ``$CPU_TIME_OUT.<worker>`` (tab-separated: self CPU,
children's CPU, wall, node id, end time). The sums do not depend on what else the machine runs, as wall times do
(docs/performance.md, "The test suite"):

    CPU_TIME_OUT=/tmp/cpu PYTHONPATH=$PWD:$PWD/tests python -m pytest -p cpu_time -n auto -p no:cacheprovider
    cat /tmp/cpu.* | awk -F'\\t' '{cpu += $1 + $2; wall += $3} END {print cpu, wall}'
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Generator

import pytest

_ROWS: list[tuple[str, float, float, float, float]] = []


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    own, children = _cpu()
    start = time.perf_counter()
    yield
    own_after, children_after = _cpu()
    _ROWS.append((item.nodeid, own_after - own, children_after - children, time.perf_counter() - start, time.time()))


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("CPU_TIME_OUT")
    if not out or not _ROWS:
        return
    with open(f"{out}.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "w", encoding="utf-8") as file:
        for nodeid, own, children, wall, end in _ROWS:
            file.write(f"{own:.3f}\t{children:.3f}\t{wall:.3f}\t{nodeid}\t{end:.3f}\n")
