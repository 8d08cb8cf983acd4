"""`roofline bench`: the loop with fakes (numbers, OOM, Ctrl-C), the torch runners on the CPU at tiny sizes, the
CLI end to end on the CPU (fake roofs, so no calibration runs), and one real-GPU test (skipped without CUDA)."""

from __future__ import annotations

import contextlib

import pytest
from diagnose_devices import CPU as FAKE_CPU

from roofline.bench.items import BenchItem, decode_gemm_items, expand_items, expand_suite
from roofline.bench.run import Harness, Skipped, run_bench
from roofline.device import Device
from roofline.errors import WorkloadError, is_out_of_memory
from roofline.measure.stopping import StoppingRule

# ------------------------------------------------------------------------------------------------ fakes

FAKE_GPU = Device(
    name="fake-gpu",
    display_name="Fake GPU",
    vendor="other",
    compute={("fp16", "tensor"): 100e12, ("bf16", "tensor"): 100e12, ("fp32", "vector"): 10e12},
    bandwidth={"dram": 1e12},
    launch_floor_s=5e-6,
)


class FakeBackend:
    """Every sample takes ``seconds`` (or the next value of a list, cycling)."""

    method = "fake-clock"

    def __init__(self, seconds: float | list[float]) -> None:
        self.values = seconds if isinstance(seconds, list) else [seconds]
        self.calls = 0

    def time_once(self, fn, before):
        if before is not None:
            before()
        fn()
        value = self.values[self.calls % len(self.values)]
        self.calls += 1
        return value

    def synchronize(self) -> None:
        pass


class FakeBench:
    def __init__(self, kind: str, log: list[str]) -> None:
        self.op = f"fake {kind}"
        self.fn = lambda: None
        self.notes = ["fake op"]
        self.log = log

    def active(self):
        return contextlib.nullcontext()

    def prepare(self) -> None:
        self.log.append("prepare")

    def check(self) -> None:
        self.log.append("check")

    def release(self) -> None:
        self.log.append("release")


def harness(seconds: float | list[float], cleanups: list[int] | None = None) -> Harness:
    ticks = iter(range(10**6))
    return Harness(
        backend=FakeBackend(seconds),
        rule=StoppingRule(min_samples=3, min_time_s=0.0, max_time_s=1e9, max_samples=50),
        warmup_s=0.0,
        now=lambda: next(ticks) * 1e-6,
        cleanup=(lambda: cleanups.append(1)) if cleanups is not None else (lambda: None),
        description="fake",
    )


def gemm_item(m: int, n: int = 1024, k: int = 1024, dtype: str = "fp16") -> BenchItem:
    (item,) = expand_items("gemm", {"m": m, "n": n, "k": k, "dtype": dtype})
    return item


# ------------------------------------------------------------------------------------------------- loop


def test_loop_gives_achieved_rates_and_efficiency():
    log: list[str] = []
    item = gemm_item(1024)
    flops = 2 * 1024**3
    nbytes = 3 * 1024 * 1024 * 2
    roof_time = max(flops / 100e12, nbytes / 1e12)  # compute-bound: 21.5 us
    measured = 2 * roof_time
    result = run_bench([item], FAKE_GPU, harness(measured), lambda kind, p: FakeBench(kind, log))
    assert not result.skipped and not result.interrupted
    (row,) = result.rows
    assert row.flops == flops and row.bytes == nbytes
    assert row.median_s == measured and row.p20_s == measured and row.p80_s == measured
    assert row.samples_s == [measured] * 3 and row.n == 3
    assert row.stop_reason == "converged" and row.method == "fake-clock" and row.cache == "warm"
    assert row.roof_time_s == pytest.approx(roof_time)
    assert row.achieved_flops_per_s == pytest.approx(flops / measured)
    assert row.achieved_bytes_per_s == pytest.approx(nbytes / measured)
    assert row.efficiency == pytest.approx(0.5)
    assert row.bound == row.analytic_bound == "compute"
    assert row.op == "fake gemm" and "fake op" in row.bench_notes
    assert log == ["prepare", "check", "release"]


def test_median_near_the_launch_floor_reads_as_launch_bound():
    (item,) = expand_items("elementwise", {"op": "add", "numel": 1024, "dtype": "fp16"})
    result = run_bench([item], FAKE_GPU, harness([6e-6, 7e-6, 8e-6]), lambda kind, p: FakeBench(kind, []))
    (row,) = result.rows
    assert row.analytic_bound == "launch"  # 6 KB moves in 6 ns: the 5 us floor dominates analytically too
    assert row.bound == "launch"
    assert 6e-6 <= row.median_s <= 8e-6
    assert row.relative_spread == pytest.approx((row.p80_s - row.p20_s) / row.median_s)
    assert row.relative_spread > 0
    (big,) = expand_items("elementwise", {"op": "add", "numel": 2**26, "dtype": "fp16"})
    row = run_bench([big], FAKE_GPU, harness(1e-3), lambda kind, p: FakeBench(kind, [])).rows[0]
    assert row.bound == row.analytic_bound == "memory"
    assert row.efficiency == pytest.approx(3 * 2**26 * 2 / 1e12 / 1e-3)


class OutOfMemoryError(RuntimeError):
    """Named like torch.cuda.OutOfMemoryError."""


@pytest.mark.parametrize(
    "error",
    [RuntimeError("CUDA out of memory. Tried to allocate 8.00 GiB"), OutOfMemoryError("CUDA error"), MemoryError()],
)
def test_out_of_memory_skips_that_item_and_the_rest_continue(error):
    items = [gemm_item(64), gemm_item(128), gemm_item(256)]
    calls: list[int] = []
    cleanups: list[int] = []

    def build(kind, params):
        calls.append(params.m)
        if params.m == 128:
            raise error
        return FakeBench(kind, [])

    result = run_bench(items, FAKE_GPU, harness(1e-4, cleanups), build)
    assert [r.params["m"] for r in result.rows] == [64, 256]
    (skip,) = result.skipped
    assert skip.out_of_memory and skip.reason.startswith("out of memory")
    assert skip.label == "m=128 n=1024 k=1024"
    assert result.first_error() is None  # nothing but OOM: not a usage error
    assert len(cleanups) == 3  # memory freed after every item
    assert is_out_of_memory(error)
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


def test_an_op_torch_cannot_run_is_skipped_with_its_reason():
    def build(kind, params):
        if params.m == 64:
            raise RuntimeError("\"addmm_impl_cpu_\" not implemented for 'Half'\nmore lines")
        return FakeBench(kind, [])

    result = run_bench([gemm_item(64), gemm_item(128)], FAKE_GPU, harness(1e-4), build)
    assert len(result.rows) == 1
    (skip,) = result.skipped
    assert not skip.out_of_memory and 'torch failed: "addmm_impl_cpu_" not implemented' in skip.reason
    assert isinstance(result.first_error(), WorkloadError)
    assert skip.to_dict() == {"kind": "gemm", "label": skip.label, "reason": skip.reason, "out_of_memory": False}


def test_a_device_without_the_roof_skips_the_row():
    result = run_bench([gemm_item(64, dtype="fp64")], FAKE_GPU, harness(1e-4), lambda kind, p: FakeBench(kind, []))
    assert not result.rows
    assert "no fp64 peak" in result.skipped[0].reason or "no dense fp64" in result.skipped[0].reason


def test_interrupt_returns_the_rows_finished_so_far():
    progress: list[tuple[int, int, str]] = []

    def build(kind, params):
        if params.m == 128:
            raise KeyboardInterrupt
        return FakeBench(kind, [])

    items = [gemm_item(64), gemm_item(128), gemm_item(256)]
    result = run_bench(items, FAKE_GPU, harness(1e-4), build, progress=lambda *a: progress.append(a))
    assert result.interrupted and result.total == 3
    assert [r.params["m"] for r in result.rows] == [64]
    assert progress[:2] == [(0, 3, "m=64 n=1024 k=1024"), (1, 3, "m=128 n=1024 k=1024")]


def test_progress_reports_each_item_then_the_end():
    seen: list[tuple[int, int, str]] = []
    items = [gemm_item(64), gemm_item(128)]
    run_bench(items, FAKE_GPU, harness(1e-4), lambda kind, p: FakeBench(kind, []), progress=lambda *a: seen.append(a))
    assert seen == [(0, 2, "m=64 n=1024 k=1024"), (1, 2, "m=128 n=1024 k=1024"), (2, 2, "")]


# ------------------------------------------------------------------------------------------------ items


def test_decode_runs_one_layers_weight_gemms_gemv_shaped():
    items = expand_items("decode", {"model": "llama-3-8b", "batch": [1, 8], "act_dtype": "bf16"})
    shapes = [(i.name, i.values["m"], i.values["n"], i.values["k"]) for i in items]
    assert shapes == [
        ("qkv_proj", 1, (32 + 2 * 8) * 128, 4096),
        ("o_proj", 1, 4096, 4096),
        ("gate_up_proj", 1, 2 * 14336, 4096),
        ("down_proj", 1, 4096, 14336),
        ("qkv_proj", 8, 6144, 4096),
        ("o_proj", 8, 4096, 4096),
        ("gate_up_proj", 8, 28672, 4096),
        ("down_proj", 8, 4096, 14336),
    ]
    assert all(i.kind == "gemm" and i.values["dtype"] == "bf16" for i in items)
    assert items[0].label == "decode llama-3-8b qkv_proj m=1 n=6144 k=4096"
    single = decode_gemm_items([1, 8], 4096, 4096, "bf16")
    assert [(i.values["m"], i.name) for i in single] == [(1, "weight"), (8, "weight")]


@pytest.mark.parametrize(
    ("kind", "values", "needle"),
    [
        ("decode", {"model": "llama-3-8b", "act_dtype": "bf16", "weight_dtype": "int4"}, "weight-only int4"),
        ("decode", {"params": 8e9, "d_model": 4096}, "not the napkin form"),
        ("prefill", {"model": "gpt2", "seq": 8}, "bench has no runner for workload kind 'prefill'"),
        ("gemm", {"m": 0, "n": 1, "k": 1}, "m: Input should be greater than 0"),
    ],
)
def test_bad_items_are_workload_errors(kind, values, needle):
    with pytest.raises(WorkloadError) as info:
        expand_items(kind, values)
    assert needle in str(info.value)


def test_sdpa_means_fused_and_fp8_gemms_write_bf16():
    (naive, fused) = expand_items("attention", {"seq_q": 8, "heads": 2, "head_dim": 16, "impl": ["naive", "sdpa"]})
    assert (naive.values["impl"], fused.values["impl"]) == ("naive", "fused")
    (fp8,) = expand_items("gemm", {"m": 16, "n": 16, "k": 16, "dtype": "fp8"})
    assert fp8.values["out_dtype"] == "bf16" and any("bf16" in n for n in fp8.notes)


def test_shipped_suites_expand():
    from roofline.costs.suite import load_suite

    gpu = expand_suite(load_suite("bench-gpu")[1])
    kinds = {i.kind for i in gpu}
    assert kinds == {"gemm", "attention", "elementwise", "norm"}  # decode runs as GEMMs
    labels = [i.label for i in gpu]
    assert "m=8192 n=8192 k=8192" in labels and "m=1 n=8192 k=8192" in labels
    assert sum(1 for i in gpu if i.kind == "attention") == 6
    assert any(label.startswith("decode llama-3-8b") for label in labels)
    cpu = expand_suite(load_suite("bench-cpu")[1])
    assert {i.kind for i in cpu} == {"gemm", "attention", "elementwise", "norm", "conv2d"}
    assert all(i.values.get("dtype", i.values.get("act_dtype")) == "fp32" for i in cpu)


# --------------------------------------------------------------------------------------- runners (CPU)

torch = pytest.importorskip("torch")

from roofline.bench import runners  # noqa: E402
from roofline.costs.base import get_model  # noqa: E402
from roofline.costs.elementwise import FLOPS_PER_ELEMENT  # noqa: E402


def _run(kind: str, **values):
    params = get_model(kind).parse(values)
    bench = runners.build(kind, params, torch=torch, device="cpu")
    with bench.active():
        bench.prepare()
        for _ in range(2):
            bench.fn()
        bench.check()
    outputs = bench._outputs()
    bench.release()
    assert bench.fn is None
    return bench, outputs


CPU_CASES = [
    ("gemm", {"m": 8, "n": 16, "k": 32, "dtype": "fp32"}),
    ("gemm", {"m": 8, "n": 16, "k": 32, "dtype": "fp32", "tf32": True}),
    ("gemm", {"m": 8, "n": 16, "k": 32, "dtype": "bf16"}),
    ("gemm", {"m": 8, "n": 16, "k": 32, "dtype": "fp16"}),
    ("gemm", {"m": 8, "n": 16, "k": 32, "dtype": "fp64", "batch": 3}),
    ("gemm", {"m": 32, "n": 32, "k": 32, "dtype": "int8"}),
    ("attention", {"seq_q": 16, "heads": 4, "head_dim": 8, "dtype": "fp32", "impl": "naive"}),
    ("attention", {"seq_q": 16, "heads": 4, "head_dim": 8, "dtype": "fp32", "impl": "fused"}),
    ("attention", {"seq_q": 16, "heads": 4, "kv_heads": 2, "head_dim": 8, "dtype": "fp32", "impl": "naive"}),
    ("attention", {"seq_q": 16, "heads": 4, "kv_heads": 1, "head_dim": 8, "dtype": "bf16", "impl": "fused"}),
    ("attention", {"seq_q": 8, "seq_kv": 24, "heads": 2, "head_dim": 8, "dtype": "fp32", "causal": True}),
    (
        "attention",
        {"seq_q": 8, "seq_kv": 24, "heads": 2, "head_dim": 8, "dtype": "fp32", "causal": True, "impl": "naive"},
    ),
    *[("elementwise", {"op": op, "numel": 1000, "dtype": "fp32"}) for op in FLOPS_PER_ELEMENT],
    ("elementwise", {"op": "gelu", "numel": 1000, "dtype": "bf16"}),
    *[("norm", {"op": op, "rows": 8, "cols": 64, "dtype": "fp32"}) for op in ("layernorm", "rmsnorm", "softmax")],
    ("norm", {"op": "layernorm", "rows": 8, "cols": 64, "dtype": "bf16", "affine": False}),
    ("norm", {"op": "rmsnorm", "rows": 8, "cols": 64, "dtype": "fp32", "affine": False}),
    ("conv2d", {"in_channels": 4, "out_channels": 8, "height": 8, "width": 8, "padding": 1, "dtype": "fp32"}),
    ("conv2d", {"in_channels": 4, "out_channels": 4, "height": 8, "width": 8, "groups": 4, "dtype": "fp32"}),
]


@pytest.mark.parametrize(("kind", "values"), CPU_CASES, ids=lambda v: str(v) if isinstance(v, str) else None)
def test_runners_on_cpu_write_finite_nonzero_outputs(kind, values):
    bench, outputs = _run(kind, **values)
    assert bench.op.startswith(kind)
    for out in outputs:
        values_ = out.float()
        assert torch.isfinite(values_).all() and (values_ != 0).any()


def test_every_elementwise_op_has_a_torch_mapping():
    assert set(FLOPS_PER_ELEMENT) == set(runners.ELEMENTWISE)


def test_naive_attention_matches_sdpa_causal_bottom_right(monkeypatch):
    # Same Q, K, V into both runners: the naive chain (GQA repeat, bottom-right causal mask) equals SDPA.
    params = get_model("attention").parse(
        {"seq_q": 8, "seq_kv": 24, "heads": 4, "kv_heads": 2, "head_dim": 16, "dtype": "fp32", "causal": True}
    )
    torch.manual_seed(0)
    qkv = [torch.randn(1, 4, 8, 16), torch.randn(1, 2, 24, 16), torch.randn(1, 2, 24, 16)]
    outputs = []
    for impl in ("naive", "fused"):
        queue = [t.clone() for t in qkv]
        monkeypatch.setattr(runners, "random", lambda *args, queue=queue, **kwargs: queue.pop(0))
        bench = runners.build("attention", params.model_copy(update={"impl": impl}), torch=torch, device="cpu")
        bench.prepare()
        outputs.append(bench._outputs()[0].reshape(1, 4, 8, 16))
    assert torch.allclose(outputs[0], outputs[1], atol=1e-5)


def test_unwritten_or_zero_outputs_fail_the_check():
    out = torch.empty(16)
    bench = runners.Bench("test op", lambda: None, lambda: [out], torch=torch, device=torch.device("cpu"), poison=[out])
    with pytest.raises(runners.OutputCheckError, match="test op: output has NaN"):
        bench.prepare()
    zeros = torch.zeros(16)
    bench = runners.Bench("zero op", lambda: None, lambda: [zeros], torch=torch, device=torch.device("cpu"))
    with pytest.raises(runners.OutputCheckError, match="zero op: output is all zero"):
        bench.prepare()
    ints = torch.empty(4, dtype=torch.int32)
    bench = runners.Bench(
        "int op", lambda: None, lambda: [ints], torch=torch, device=torch.device("cpu"), poison=[ints]
    )
    with pytest.raises(runners.OutputCheckError, match="int op: output not written"):
        bench.prepare()


@pytest.mark.parametrize(
    ("kind", "values", "needle"),
    [
        ("gemm", {"m": 16, "n": 16, "k": 16, "dtype": "fp8"}, "fp8 GEMM runs on CUDA only"),
        ("gemm", {"m": 16, "n": 16, "k": 16, "dtype": "int4"}, "no torch dtype runs int4"),
        ("gemm", {"m": 16, "n": 16, "k": 16, "dtype": "fp16", "out_dtype": "fp32"}, "drop out_dtype"),
        ("gemm", {"m": 32, "n": 32, "k": 32, "dtype": "int8", "batch": 2}, "unbatched only"),
    ],
)
def test_unsupported_ops_say_why(kind, values, needle):
    params = get_model(kind).parse(values)
    with pytest.raises(runners.UnsupportedOpError) as info:
        runners.build(kind, params, torch=torch, device="cpu")
    assert needle in str(info.value)


def test_tf32_flag_is_restored():
    before = torch.get_float32_matmul_precision()
    bench = runners.build("gemm", get_model("gemm").parse({"m": 4, "n": 4, "k": 4, "dtype": "fp32", "tf32": True}),
                          torch=torch, device="cpu")  # fmt: skip
    with bench.active():
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == before


# -------------------------------------------------------------------------------------------------- CLI


@pytest.fixture
def fake_cpu(monkeypatch):
    """CPU roofs without running a calibration."""
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    return FAKE_CPU


def test_cli_gemm_on_cpu_writes_a_report_with_samples(cli, tmp_path, fake_cpu):
    from roofline.report.schema import read_report

    out = tmp_path / "tmp" / "report.json"
    args = ("bench", "gemm", "-m", "64,128", "-n", "64", "-k", "64", "--device", "cpu", "-o", str(out))
    result = cli(*args, "--max-time", "0.05")
    assert result.code == 0, result.err
    report = read_report(out)
    assert report.source == "bench"
    assert [r["params"]["m"] for r in report.rows] == [64, 128]
    for row in report.rows:
        assert row["samples_s"] and row["n"] == len(row["samples_s"])
        assert row["median_s"] > 0 and row["method"] == "cpu-clock" and row["cache"] == "warm"
        assert row["roof_source"] == "measured" and row["device"] == "cpu"
        assert row["efficiency"] == pytest.approx(row["roof_time_s"] / row["median_s"])
        assert row["threads"] == torch.get_num_threads()
    extra = report.model_extra
    assert extra["bench"]["device_kind"] == "cpu" and extra["interrupted"] is False and extra["skipped"] == []
    assert "Test CPU (cpu) · measured roofs" in result.out
    assert "timing: wall time per call (host clock" in result.out
    assert "m=64" in result.out and "m=128" in result.out
    assert f"Report written to {out}" in result.err
    assert not list(out.parent.glob(".*.tmp"))


def test_cli_json_and_cold_cache(cli, tmp_path, fake_cpu):
    out = tmp_path / "r.json"
    args = ("bench", "norm", "--op", "softmax", "--rows", "8", "--cols", "64", "--device", "cpu", "--cold")
    doc = cli(*args, "-o", str(out), "--max-time", "0.05", "--json").json()
    (row,) = doc["rows"]
    assert row["cache"] == "cold" and doc["bench"]["cache"] == "cold"
    assert "caches flushed before each sample" in doc["bench"]["timing"]


def test_cli_suite_shorthand(cli, tmp_path, fake_cpu):
    model = tmp_path / "tiny-llm.yaml"
    model.write_text(
        "name: tiny-llm\nsource: a test\nlayers: 1\nhidden: 64\nheads: 4\nkv_heads: 2\nffn: 128\n"
        "ffn_type: gated\nvocab: 100\nnorm: rmsnorm\ntied_embeddings: false\nmax_context: 128\n"
    )
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: tiny\nworkloads:\n"
        "  - {kind: gemm, m: [8, 16], n: 16, k: 16, dtype: fp32}\n"
        "  - {kind: elementwise, op: add, numel: 4096, dtype: fp32}\n"
        f"  - {{kind: decode, model: {model}, batch: 1, act_dtype: fp32}}\n"
    )
    out = tmp_path / "r.json"
    for args in (("bench", str(suite)), ("bench", "suite", str(suite))):
        result = cli(*args, "--device", "cpu", "-o", str(out), "--max-time", "0.02", "--json")
        assert result.code == 0, result.err
        rows = result.json()["rows"]
        assert [r["kind"] for r in rows] == ["gemm", "gemm", "elementwise", *["gemm"] * 4]
        assert rows[3]["name"] == "qkv_proj" and rows[3]["params"]["n"] == (4 + 2 * 2) * 16


def test_cli_interrupt_writes_partial_rows_and_exits_130(cli, tmp_path, fake_cpu, monkeypatch):
    from roofline.report.schema import read_report

    real = runners.build

    def build(kind, params, **kwargs):
        if params.m == 128:
            raise KeyboardInterrupt
        return real(kind, params, **kwargs)

    monkeypatch.setattr(runners, "build", build)
    out = tmp_path / "r.json"
    args = ("bench", "gemm", "-m", "64,128,256", "-n", "64", "-k", "64", "--device", "cpu", "-o", str(out))
    result = cli(*args, "--max-time", "0.02")
    assert result.code == 130
    report = read_report(out)
    assert [r["params"]["m"] for r in report.rows] == [64]
    assert report.model_extra["interrupted"] is True
    assert "Interrupted: 1 of 3 rows measured and written." in result.err
    assert "Interrupted after 1 of 3 workloads" in result.out


def test_cli_out_of_memory_is_a_skipped_note(cli, tmp_path, fake_cpu, monkeypatch):
    real = runners.build

    def build(kind, params, **kwargs):
        if params.m == 128:
            raise RuntimeError("CUDA out of memory. Tried to allocate 64.00 GiB")
        return real(kind, params, **kwargs)

    monkeypatch.setattr(runners, "build", build)
    out = tmp_path / "r.json"
    args = ("bench", "gemm", "-m", "64,128", "-n", "64", "-k", "64", "--device", "cpu", "-o", str(out))
    result = cli(*args, "--max-time", "0.02")
    assert result.code == 0, result.err
    assert "Skipped (1)" in result.out and "gemm m=128 n=64 k=64: out of memory" in result.out
    doc = cli(*args, "--max-time", "0.02", "--json").json()
    assert len(doc["rows"]) == 1 and doc["skipped"][0]["out_of_memory"] is True


def test_cli_decode_single_weight_gemm(cli, tmp_path, fake_cpu):
    args = ("bench", "decode", "-n", "128", "-k", "64", "--batch", "1,4", "--device", "cpu")
    doc = cli(*args, "-o", str(tmp_path / "r.json"), "--max-time", "0.02", "--json").json()
    assert [(r["params"]["m"], r["params"]["n"], r["params"]["k"]) for r in doc["rows"]] == [(1, 128, 64), (4, 128, 64)]
    assert all(r["bound"] in ("memory", "launch") for r in doc["rows"])


def test_cuda_without_a_gpu_is_one_line_exit_2(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = cli("bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cuda", "-o", str(tmp_path / "r.json"))
    assert result.code == 2
    assert "sees no CUDA GPU: use --device cpu" in result.error_line()
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["bench", "suite", "no-such-suite"], "no suite file 'no-such-suite'"),
        (["bench", "missing.yaml"], "missing.yaml: no such file"),
        (["bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "tpu"], "--device 'tpu': use cpu or cuda"),
        (["bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cpu", "--sheet", "h100"], "--sheet names"),
        (["bench", "gemm", "-m", "0", "-n", "8", "-k", "8", "--device", "cpu"], "-m: '0' must be positive"),
        (["bench", "gemm", "-m", "16", "-n", "16", "-k", "16", "--device", "cpu", "--dtype", "fp8"], "CUDA only"),
        (["bench", "decode", "--device", "cpu"], "give --model"),
        (["bench", "elementwise", "--op", "foo", "-N", "8", "--device", "cpu"], "unknown element-wise op 'foo'"),
        (["bench", "gemm", "-m", "8", "-n", "8", "-k", "8", "--device", "cpu", "--max-time", "0"], "--max-time"),
    ],
)
def test_bad_input_is_one_line_exit_2(cli, tmp_path, fake_cpu, args, needle):
    result = cli(*args, "-o", str(tmp_path / "r.json"))
    assert result.code == 2, result.err
    assert needle in result.error_line()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("name: t\nworkloads:\n  - {kind: prefill, model: gpt2, seq: 8}\n", "no runner for workload kind 'prefill'"),
        ("name: t\nworkloads:\n  - {kind: warp, m: 1}\n", "unknown workload kind 'warp'"),
        ("name: t\nworkloads: [\n", "invalid YAML"),
    ],
)
def test_bad_suite_is_one_line_exit_2(cli, tmp_path, fake_cpu, text, needle):
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    result = cli("bench", str(path), "--device", "cpu", "-o", str(tmp_path / "r.json"))
    assert result.code == 2
    assert needle in result.error_line()


def test_bench_help_lists_the_real_commands(cli):
    out = cli("bench", "--help").out
    for name in ("gemm", "attention", "elementwise", "norm", "conv2d", "decode", "suite"):
        assert name in out


def test_skipped_to_dict_drops_the_exception():
    skip = Skipped("gemm", "m=1", "why", True, error=WorkloadError("why"))
    assert skip.to_dict() == {"kind": "gemm", "label": "m=1", "reason": "why", "out_of_memory": True}


# -------------------------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_gpu_bf16_gemm_1024_efficiency(cli, tmp_path):
    out = tmp_path / "gpu.json"
    args = ("bench", "gemm", "-m", "1024", "-n", "1024", "-k", "1024", "--dtype", "bf16", "--device", "cuda")
    result = cli(*args, "-o", str(out), "--json")
    assert result.code == 0, result.err
    (row,) = result.json()["rows"]
    assert row["method"] == "cuda-events" and row["cache"] == "cold"
    assert 0.2 <= row["efficiency"] <= 1.05, row


def test_harness_rests_the_device_before_each_item():
    log: list[str] = []
    h = harness(1e-3)
    h.rest_s = 0.5
    h.sleep = lambda seconds: log.append(f"sleep {seconds}")
    real_sync = h.backend.synchronize

    def sync() -> None:
        log.append("sync")
        real_sync()

    h.backend.synchronize = sync  # type: ignore[method-assign]
    h.measure(lambda: None)
    assert log[:2] == ["sync", "sleep 0.5"]  # idle only after the queued work has finished


@pytest.mark.parametrize(("signame", "code"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_cli_sigterm_and_sighup_keep_the_rows_like_ctrl_c(cli, tmp_path, fake_cpu, monkeypatch, signame, code):
    import os
    import signal

    from roofline.report.schema import read_report

    number = getattr(signal, signame, None)
    if number is None:
        pytest.skip(f"no {signame} on this platform")
    before = signal.getsignal(number)
    real = runners.build

    def build(kind, params, **kwargs):
        if params.m == 128:
            os.kill(os.getpid(), number)  # as `timeout` (SIGTERM) or a closed terminal (SIGHUP) would
        return real(kind, params, **kwargs)

    monkeypatch.setattr(runners, "build", build)
    out = tmp_path / "r.json"
    args = ("bench", "gemm", "-m", "64,128,256", "-n", "64", "-k", "64", "--device", "cpu", "-o", str(out))
    result = cli(*args, "--max-time", "0.02")
    assert result.code == code
    assert [r["params"]["m"] for r in read_report(out).rows] == [64]
    assert "Interrupted: 1 of 3 rows measured and written." in result.err
    assert signal.getsignal(number) is before  # the command put the previous handler back


# ------------------------------------------------------------------------------------------ stability check


class PlantedBackend(FakeBackend):
    """1 ms per call, 1.5 ms for the calls in ``slow``: call 0 is the first estimate, 1-3 the first set (the
    harness stops at 3 equal samples), 4-13 the second set; a re-measurement: 14-16, then 17-26."""

    def __init__(self, slow: set[int]) -> None:
        super().__init__(1e-3)
        self.slow = slow

    def time_once(self, fn, before):
        fn()
        self.calls += 1
        return 1.5e-3 if self.calls - 1 in self.slow else 1e-3


def test_an_unstable_row_is_flagged_in_the_report_and_the_console():
    from roofline.render.bench import BenchRenderer

    items = [gemm_item(1024), gemm_item(2048), gemm_item(4096)]
    backends = iter(
        [
            PlantedBackend(set()),  # stable
            PlantedBackend({1, 2, 3}),  # one slow first set: re-measured, then stable
            PlantedBackend(set(range(4, 14)) | set(range(17, 27))),  # every second set slow: unstable
        ]
    )
    rows = []
    for item in items:
        h = harness(1e-3)
        h.backend = next(backends)
        rows += run_bench([item], FAKE_GPU, h, lambda kind, p: FakeBench(kind, [])).rows
    stable, remeasured, unstable = rows
    assert (stable.remeasured, stable.unstable, stable.discarded) == (False, False, 0)
    assert stable.confirm_n == 10 and stable.confirm_median_s == 1e-3
    assert remeasured.remeasured and not remeasured.unstable and remeasured.median_s == 1e-3
    assert unstable.unstable and unstable.unstable_reason.startswith("a second sample set's median is 1.50x")
    doc = unstable.model_dump()
    assert doc["unstable"] is True and doc["discarded"] == 0 and doc["unstable_reason"]

    text = BenchRenderer(FAKE_GPU, timing="fake", color=False).render(rows)
    assert text.count("!") == 2  # the mark on the unstable row's median and the summary line
    assert "! 1 of 3 rows unstable" in text and "Sampling" not in text
    quiet = BenchRenderer(FAKE_GPU, timing="fake", color=False).render([stable])
    assert "!" not in quiet and "unstable" not in quiet  # a stable row reads as before
    verbose = BenchRenderer(FAKE_GPU, timing="fake", color=False, verbose=True).render(rows)
    assert "Sampling" in verbose and "0 dropped as drift" in verbose and "re-measured (a second sample set" in verbose
