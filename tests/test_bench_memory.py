"""Resources before work (issue 28, item 1): a bench row's memory estimated before anything is allocated and
checked against what the host (or the GPU) has free; a row that does not fit is skipped with its reason, a run of
which nothing fits is one line and exit 2 at once; the process guard (RLIMIT_DATA) turns an allocation past the free
memory into a skipped row instead of the kernel's OOM killer."""

from __future__ import annotations

import resource
import time

import pytest
from diagnose_devices import CPU as FAKE_CPU

from roofline.bench import runners
from roofline.bench.items import expand_items
from roofline.bench.memory import FIT_SHARE, Free, check, estimate
from roofline.bench.run import Harness, run_bench
from roofline.costs.models import get_model
from roofline.measure.stopping import StoppingRule
from roofline.resources import HostMemory, data_room, host_memory, memory_guard

torch = pytest.importorskip("torch")

MILLION_NAIVE = ("attention", "--seq", "1000000", "--heads", "32", "--head-dim", "128", "--impl", "naive")


def _params(kind: str, values: dict):
    (item,) = expand_items(kind, values)
    return get_model(kind).parse(item.values, item.source)


# ------------------------------------------------------------------------------------------- the estimate


def test_estimate_of_naive_causal_gqa_attention_bf16_exactly():
    p = _params(
        "attention",
        {"batch": 2, "heads": 8, "kv_heads": 2, "seq_q": 128, "seq_kv": 256, "head_dim": 64, "dtype": "bf16",
         "causal": True, "impl": "naive"},
    )  # fmt: skip
    need = estimate("attention", p)
    assert need is not None
    q, kv = 2 * 8 * 128 * 64, 2 * 2 * 256 * 64  # elements of Q, and of K (= V)
    assert dict(need.parts) == {
        "Q, K, V": 2 * (q + 2 * kv),  # 524,288 B
        "S x S scores and probabilities": 2 * 2 * (2 * 8 * 128 * 256),  # two [b*h, sq, skv] bf16 tensors
        "K, V repeated per head": 2 * 2 * (2 * 8 * 256 * 64),  # GQA: K and V repeated to all 8 query heads
        "output": 2 * q,
        "causal mask": 128 * 256 + 8 * (2 * 128 + 256),  # bool [sq, skv] + int64 positions
        "fp32 staging of the inputs": 4 * q,  # the largest input drawn in fp32 before the cast to bf16
    }
    assert need.total == 524_288 + 2_097_152 + 1_048_576 + 262_144 + 36_864 + 524_288 == 4_493_312


def test_estimate_of_batched_bf16_gemm_exactly():
    need = estimate("gemm", _params("gemm", {"batch": 3, "m": 64, "n": 32, "k": 16, "dtype": "bf16"}))
    assert need is not None
    assert dict(need.parts) == {
        "A, B": 2 * (3 * 64 * 16 + 3 * 16 * 32),  # 9,216
        "C": 2 * 3 * 64 * 32,  # 12,288
        "fp32 staging of the inputs": 4 * 3 * 64 * 16,  # A, the larger input, drawn in fp32: 12,288
    }
    assert need.total == 33_792


def test_estimate_of_the_million_token_naive_attention():
    p = _params("attention", {"seq_q": 1_000_000, "heads": 32, "head_dim": 128, "impl": "naive", "dtype": "fp32"})
    need = estimate("attention", p)
    assert need is not None
    scores = 2 * 4 * 32 * 10**12  # S and P: 32 heads x 10^12 fp32 scores each
    assert need.total == scores + 3 * 4 * 32 * 10**6 * 128 + 4 * 32 * 10**6 * 128 == 256_065_536_000_000
    assert need.describe().startswith("S x S scores and probabilities 256 TB, Q, K, V 49.15 GB, output 16.38 GB")


def test_check_says_why_and_lets_what_fits_run():
    need = estimate("gemm", _params("gemm", {"m": 64, "n": 64, "k": 64, "dtype": "fp32"}))  # 3 x 16 KiB
    assert need is not None and need.total == 3 * 64 * 64 * 4
    assert check(need, Free(need.total * 2, "on test")) == ""
    assert check(need, None) == "" and check(None, Free(1, "on test")) == ""
    reason = check(need, Free(need.total, "on the test host"))  # fits only above FIT_SHARE of the free memory
    assert FIT_SHARE < 1
    assert reason == (
        "does not fit in memory: needs 49.15 kB (A, B 32.77 kB, C 16.38 kB), more than 80% of the 49.15 kB free "
        "on the test host"
    )


# ----------------------------------------------------------------------------------------------- the loop


class _Bench:
    op, notes = "fake", []

    def __init__(self) -> None:
        self.fn = lambda: None

    def active(self):
        import contextlib

        return contextlib.nullcontext()

    def prepare(self) -> None:
        pass

    def check(self) -> None:
        pass

    def release(self) -> None:
        pass


def _harness(memory=None) -> Harness:
    ticks = iter(range(10**6))
    return Harness(
        backend=_Backend(),
        rule=StoppingRule(min_samples=3, min_time_s=0.0, max_time_s=1e9, max_samples=5),
        warmup_s=0.0,
        now=lambda: next(ticks) * 1e-6,
        memory=memory,
    )


class _Backend:
    method = "fake-clock"

    def time_once(self, fn, before):
        fn()
        return 1e-3

    def synchronize(self) -> None:
        pass


def test_loop_skips_a_row_that_does_not_fit_before_building_it():
    built: list[int] = []
    items = expand_items("gemm", {"m": [8, 4096], "n": 4096, "k": 4096, "dtype": "fp32"})

    def build(kind, p):
        built.append(p.m)
        return _Bench()

    free = Free(100 * 2**20, "on the test host")  # 100 MiB: m=8 needs 64 MiB of B, m=4096 needs 192 MiB
    result = run_bench(items, FAKE_CPU, _harness(lambda: free), build)
    assert built == [8] and [row.params["m"] for row in result.rows] == [8]
    (skip,) = result.skipped
    assert skip.out_of_memory and skip.error is None
    assert skip.reason.startswith("gemm m=4096 n=4096 k=4096: does not fit in memory: needs 201.3 MB")
    assert run_bench(items, FAKE_CPU, _harness(), build).skipped == []  # no memory probe: nothing checked


# ------------------------------------------------------------------------------------------------ the CLI


@pytest.fixture
def fake_cpu(monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))


def test_million_token_naive_attention_is_refused_at_once_without_allocating(cli, tmp_path, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("nothing may be opened, calibrated or allocated")

    monkeypatch.setattr("roofline.bench.target.open_target", never)
    monkeypatch.setattr(runners, "build", never)
    out = tmp_path / "b.json"
    start = time.monotonic()
    result = cli("bench", *MILLION_NAIVE, "--device", "cpu", "-o", str(out))
    assert time.monotonic() - start < 5
    assert result.code == 2
    line = result.error_line()
    assert line.startswith(
        "Error: attention batch=1 heads=32 seq_q=1000000 head_dim=128 naive: does not fit in memory: needs 256.1 TB "
        "(S x S scores and probabilities 256 TB, Q, K, V 49.15 GB, output 16.38 GB), more than 80% of the "
    )
    assert line.endswith(": nothing ran")
    assert not out.exists() and result.out == ""


def test_a_row_that_fits_runs_and_the_one_that_does_not_is_skipped_with_one_line(cli, tmp_path, fake_cpu):
    args = ("bench", "gemm", "-m", "8,1048576", "-n", "1048576", "-k", "8", "--device", "cpu", "--max-time", "0.02")
    result = cli(*args, "-o", str(tmp_path / "r.json"), "--json")
    assert result.code == 0, result.err
    doc = result.json()
    assert [row["params"]["m"] for row in doc["rows"]] == [8]  # C of m=8: 32 MiB, runs
    (skip,) = doc["skipped"]
    assert skip["out_of_memory"] is True and "does not fit in memory: needs 4.398 TB (C 4.398 TB" in skip["reason"]
    notes = [line for line in result.err.splitlines() if line.startswith("note: skipped")]
    assert notes == [f"note: skipped gemm m=1048576 n=1048576 k=8: {skip['reason'].split(': ', 1)[1]}"]


def test_every_row_out_of_memory_at_run_time_is_one_line_exit_2(cli, tmp_path, fake_cpu, monkeypatch):
    def build(kind, params, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 68719476736 bytes.")

    monkeypatch.setattr(runners, "build", build)
    out = tmp_path / "r.json"
    result = cli("bench", "gemm", "-m", "8,16", "-n", "8", "-k", "8", "--device", "cpu", "-o", str(out))
    assert result.code == 2
    assert result.error_line() == (
        "Error: gemm m=8 n=8 k=8: out of memory: DefaultCPUAllocator: can't allocate memory: you tried to allocate "
        "68719476736 bytes. (and the other 1 rows): nothing ran"
    )
    assert not out.exists()


def test_a_memory_error_anywhere_is_one_line_exit_2(cli, monkeypatch):
    def sweep(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr("roofline.analysis.sweep", sweep)
    result = cli("analyze", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "h100-sxm")
    assert result.code == 2
    assert result.error_line().startswith("Error: out of memory: the run needed more than this machine has free")


# ---------------------------------------------------------------------------------------------- the guard


def _real_build(kind, params):
    return runners.build(kind, params, torch=torch, device="cpu")


def test_guard_turns_an_allocation_past_it_into_a_skipped_row_and_is_restored():
    before = resource.getrlimit(resource.RLIMIT_DATA)
    # C of 16384 x 8192 fp32 is 512 MiB, past the guard's 256 MiB floor; the estimate is not asked (no probe)
    items = expand_items("gemm", {"m": [16384, 64], "n": [8192], "k": 8, "dtype": "fp32"})
    with memory_guard(memory=HostMemory(0, 0, "test")) as guard:
        assert guard.limit is not None
        assert resource.getrlimit(resource.RLIMIT_DATA)[0] == guard.limit
        room = data_room()
        assert room is not None and 0 < room <= 256 * 2**20
        start = time.monotonic()
        result = run_bench(items, FAKE_CPU, _harness(), _real_build)
        assert time.monotonic() - start < 30
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
    (skip,) = result.skipped
    assert skip.label == "m=16384 n=8192 k=8" and skip.out_of_memory
    assert "can't allocate memory" in skip.reason
    (row,) = result.rows  # torch (its threads, its allocator) works under the guard: the row that fits ran
    assert row.params["m"] == 64 and row.median_s > 0


def test_guard_keeps_a_lower_limit_the_user_set():
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    low = 2**62 if hard == resource.RLIM_INFINITY else hard  # lower than unlimited, above any real use
    resource.setrlimit(resource.RLIMIT_DATA, (low, hard))
    try:
        with memory_guard(memory=HostMemory(2**63, 2**63, "test")) as guard:
            assert guard.limit == low and "lower" in guard.why
            assert resource.getrlimit(resource.RLIMIT_DATA) == (low, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


# ------------------------------------------------------------------------------------------- host memory


def test_host_memory_reads_meminfo_and_a_cgroup_limit(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    8000000 kB\n")
    proc_cgroup = tmp_path / "cgroup"
    proc_cgroup.write_text("0::/job\n")
    root = tmp_path / "sys"
    (root / "job").mkdir(parents=True)
    assert host_memory(meminfo, proc_cgroup, root) == HostMemory(8_000_000 * 1024, 16_000_000 * 1024, "MemAvailable")
    (root / "job" / "memory.max").write_text("max\n")  # v2 without a limit
    (root / "job" / "memory.current").write_text("1000\n")
    assert host_memory(meminfo, proc_cgroup, root).source == "MemAvailable"
    (root / "job" / "memory.max").write_text(f"{3 * 2**30}\n")  # a container of 3 GiB, 1 GiB of it used
    (root / "job" / "memory.current").write_text(f"{2**30}\n")
    assert host_memory(meminfo, proc_cgroup, root) == HostMemory(2 * 2**30, 3 * 2**30, "the memory cgroup's limit")
    v1 = tmp_path / "v1"
    (v1 / "memory" / "job").mkdir(parents=True)
    (v1 / "memory" / "job" / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1: no limit
    (v1 / "memory" / "job" / "memory.usage_in_bytes").write_text("5\n")
    proc_cgroup.write_text("4:memory:/job\n0::/\n")
    assert host_memory(meminfo, proc_cgroup, v1).source == "MemAvailable"


def test_bench_and_analyze_on_the_cpu_run_under_the_guard_and_restore_it(cli, tmp_path, monkeypatch):
    before = resource.getrlimit(resource.RLIMIT_DATA)
    seen: list[int] = []

    def cpu_roofs(torch_):
        seen.append(resource.getrlimit(resource.RLIMIT_DATA)[0])  # while the CPU's roofs are resolved (calibrated)
        return FAKE_CPU, ["test roofs"]

    monkeypatch.setattr("roofline.roofs.cpu_roofs", cpu_roofs)
    args = ("bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cpu", "--max-time", "0.02")
    assert cli(*args, "-o", str(tmp_path / "r.json")).code == 0
    assert cli("analyze", "gemm", "-m", "8", "-n", "8", "-k", "8", "--dtype", "fp32", "--device", "cpu").code == 0
    assert len(seen) == 2 and all(limit != resource.RLIM_INFINITY for limit in seen)
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
    assert cli("analyze", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "h100-sxm").code == 0
    assert len(seen) == 2  # a spec sheet: nothing measured, no guard


def test_a_cpu_diagnosis_runs_under_the_guard_and_a_model_past_it_fails_in_its_traceback(cli, tmp_path, monkeypatch):
    # the model sees the guard while it runs: 3 GiB more than the limit allows fails in the model, one line, exit 1
    before = resource.getrlimit(resource.RLIMIT_DATA)
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    monkeypatch.setattr("roofline.resources.host_memory", lambda *a, **k: HostMemory(0, 0, "test"))  # the floor
    model = tmp_path / "hog.py"
    model.write_text(
        "import resource\nimport torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        assert resource.getrlimit(resource.RLIMIT_DATA)[0] != resource.RLIM_INFINITY, 'no guard'\n"
        "        keep = [torch.ones(1 << 28) for _ in range(3)]  # 3 x 1 GiB\n"
        "        return x + len(keep)\n\n\ndef get_inputs():\n    return (torch.ones(4),)\n"
    )
    result = cli("diagnose", str(model), "-d", "cpu", "--warmup", "1", "--iters", "1", "-o", str(tmp_path / "r.json"))
    assert result.code == 1, result.err
    assert "can't allocate memory" in result.err or "MemoryError" in result.err
    assert "Traceback" in result.err and "roofline/" not in result.err.split("Traceback", 1)[1].split("\n")[1]
    assert not (tmp_path / "r.json").exists()
    assert resource.getrlimit(resource.RLIMIT_DATA) == before  # restored
