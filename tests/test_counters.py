"""Nsight Compute counters (issue 16, item 2): the `ncu --csv --page raw` reader (tests/ncu/*.csv, written in the
raw page's exact format: ncu's lines, a names row, a units row, thousands separators, NVTX columns), exact unit
conversion, kernel-name matching between ncu and the torch profiler, attachment to a hand-built diagnosis, the
locality finding and its bound, `roofline counters import`, `roofline diagnose --counters` with ncu injected, and
bad input as one line. No GPU, no ncu, no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from diagnose_devices import GPU, rec
from diagnose_doubles import FakeTimer, FixedDevice

from roofline.diagnose.counters import child_command, collect
from roofline.diagnose.pipeline import Boundaries, DiagnoseOptions, run
from roofline.diagnose.place import place
from roofline.findings.counters import (
    L2_RESIDENT,
    Counters,
    OpCounters,
    attach,
    base_name,
    l2_roofed,
    normalized,
    relabel,
)
from roofline.findings.rules import counters as counters_rules
from roofline.findings.rules.counters import RULE, locality_findings
from roofline.measure import ncu
from roofline.measure.ncu import CountersError, CountersUnavailable, parse_csv, read_csv
from roofline.report.records import OpTiming, Timing
from roofline.report.rows import KernelFacts
from roofline.report.schema import new_report, write_report

DATA = Path(__file__).resolve().parent / "ncu"
RAW = DATA / "raw_page.csv"
UNITS = DATA / "raw_units.csv"

# the torch profiler's names of the kernels in raw_page.csv (ncu writes them differently), seen on an H200
# (torch 2.11): namespaces, integer suffixes, lambdas and template booleans differ
K_MM = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
K_ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >"
    "(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
)
K_COPY = (
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
    "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, "
    "4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, "
    "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, "
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::"
    "operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, "
    "TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, "
    "at::native::memory::StoreWithCast<1>)"
)
N = 1 << 24
RECORDS = [
    rec(0, "aten::mm", [(4096, 4096), (4096, 4096)], [(4096, 4096)], 2 * 4096**3, 3 * 4096 * 4096 * 2),
    rec(1, "aten::add", [(N,), (N,)], [(N,)], N, 3 * N * 4, dtype="fp32", math="vector"),
    rec(2, "aten::copy_", [(4096, 1024), (4096, 1024)], [(4096, 1024)], 0, 2 * 4096 * 1024 * 4, dtype="fp32",
        math="vector"),
    rec(3, "aten::add", [(1 << 20,), (1 << 20,)], [(1 << 20,)], 1 << 20, 3 * (1 << 20) * 4, dtype="fp32",
        math="vector"),
]  # fmt: skip
TIMES = {0: (250e-6, K_MM), 1: (70e-6, K_ADD), 2: (200e-6, K_COPY), 3: (8e-6, K_ADD)}


def timing() -> Timing:
    ops = [
        OpTiming(i, t, 1, kernel_facts=(KernelFacts(name=name, time_s=t, launches=1),))
        for i, (t, name) in TIMES.items()
    ]
    return Timing(device="cuda", iterations=10, wall_s=600e-6, ops=ops, kernel_count=4)


@pytest.fixture
def placed():
    return place(RECORDS, timing(), GPU)


# ------------------------------------------------------------------------------------------------ the reader


def test_the_raw_page_is_read_exactly():
    kernels = read_csv(RAW)
    assert [k.id for k in kernels] == list(range(9))  # ncu's '==' lines, NVTX and extra columns skipped
    randn = kernels[0]
    assert randn.name.startswith("void at::<unnamed>::distribution_elementwise_grid_stride_kernel<float, 4>")
    mm = kernels[1]
    assert mm.name == K_MM
    assert (mm.dram_read_bytes, mm.dram_write_bytes, mm.dram_bytes) == (300_000_000, 33_554_432, 333_554_432)
    assert mm.l2_bytes == 1_084_428_160
    assert (mm.sm_pct, mm.memory_pct, mm.occupancy_pct, mm.tensor_pct) == (71.10, 55.40, 14.22, 71.10)
    assert mm.duration_s == pytest.approx(250e-6, rel=1e-12)
    add = kernels[2]
    assert (add.dram_read_bytes, add.dram_write_bytes) == (134_230_528, 49_165_568)  # seen on an H100: x + y
    assert add.tensor_pct == 0.0


def test_units_are_converted_exactly():
    sgemm, triton = read_csv(UNITS)
    assert sgemm.dram_read_bytes == 33_550_000  # 33.55 Mbyte (decimal, not 33.55 * 2**20)
    assert sgemm.dram_write_bytes == 1_024_500  # 1,024.50 Kbyte
    assert sgemm.l2_bytes == 1_500_000_000  # 1.5 Gbyte
    assert sgemm.duration_s == pytest.approx(63.14e-6, rel=1e-12)  # usecond
    assert sgemm.sm_pct == 4.08 and sgemm.memory_pct is None and sgemm.occupancy_pct is None  # absent: None
    assert triton.dram_read_bytes == 1  # 0.000001 Mbyte: exact, no float rounding
    assert triton.duration_s == pytest.approx(1e-3)  # 1,000 usecond
    assert triton.sm_pct is None  # n/a


@pytest.mark.parametrize(
    ("unit", "value", "expected"),
    [("byte", "1,234", 1234), ("KB", "2", 2000), ("KiB", "2", 2048), ("MiB", "1.5", 1_572_864), ("Tbyte", "1", 10**12)],
)
def test_byte_units(unit, value, expected):
    text = (
        '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum"\n'
        f'"","","{unit}","byte"\n"0","k","{value}","0"\n'
    )
    assert parse_csv(text)[0].dram_read_bytes == expected


def test_time_units():
    for unit, seconds in (("nsecond", 1e-9), ("ns", 1e-9), ("usecond", 1e-6), ("msecond", 1e-3), ("second", 1.0)):
        text = (
            '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"\n'
            f'"","","byte","byte","{unit}"\n"0","k","0","0","2"\n'
        )
        assert parse_csv(text)[0].duration_s == pytest.approx(2 * seconds)


# ------------------------------------------------------------------------------------------------ bad input

HEADER = '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum"\n'


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("name,time_ms\nmatmul,1.0\n", "not an Nsight Compute CSV"),  # another tool's CSV
        ("", "not an Nsight Compute CSV"),
        (
            '"ID","Process ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n'
            '"0","1","k","SOL","dram__bytes_read.sum","byte","1"\n',
            "details-page export",
        ),
        ('"ID","Kernel Name","gpu__time_duration.sum"\n"","","ns"\n"0","k","5"\n', "lacks dram__bytes_read.sum"),
        (HEADER + '"0","k","1","2"\n', "no units row"),  # an export without its units row
        (HEADER + '"","","byte","byte"\n"0","k","1"\n', "truncated"),
        (HEADER + '"","","byte","byte"\n', "no kernel launches"),
        (HEADER + '"","","cycle","byte"\n"0","k","1","2"\n', "not bytes"),
        (
            '"ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum","gpu__time_duration.sum"\n'
            '"","","byte","byte","cycle"\n"0","k","1","2","3"\n',
            "not a time",
        ),
    ],
)
def test_bad_exports_are_one_clear_error(text, says):
    with pytest.raises(CountersError, match=says):
        parse_csv(text, "x.csv")


def test_a_truncated_file(tmp_path):
    text = RAW.read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(text[: len(text) - 200])  # the last row loses its tail
    with pytest.raises(CountersError, match="truncated or damaged"):
        read_csv(cut)
    with pytest.raises(CountersError, match="no such file"):
        read_csv(tmp_path / "missing.csv")


# ------------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize(
    ("torch_name", "ncu_name"),
    [
        (K_ADD, "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char *, 3>>"
                "(int, T2, T3)"),
        ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 9, false, false>(float*, float const*, "
         "int, int, int, bool const*, int, bool)",
         "void <unnamed>::softmax_warp_forward<float, float, float, 9, 0, 0>(T2 *, const T1 *, int, int, int, "
         "const bool *, int, bool)"),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int, float, "
         "float const*, float const*, float const*, float*, float*, float*)",
         "void at::<unnamed>::vectorized_layer_norm_kernel<float, float, 0>(int, T2, const T1 *, const T1 *, "
         "const T1 *, T2 *, T2 *, T1 *)"),
        ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>(int, "
         "float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
         "void unnamed>::vectorized_layer_norm_kernel<BFloat16, float, 0>(int, T2, const T1 *, const T1 *, "
         "const T1 *, T2 *, T2 *, T1 *)"),  # as ncu of CUDA 13 wrote it on an H100 (2026-11-24)
        ("void at::native::(anonymous namespace)::CatArrayBatchedCopy_vectorized<at::native::(anonymous "
         "namespace)::OpaqueType<2u>, unsigned int, 2, 128, 1, 16, 8>(char*, at::native::(anonymous "
         "namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, "
         "128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
         "void unnamed>::CatArrayBatchedCopy_vectorized<unnamed>::OpaqueType<2>, unsigned int, 2, 128, 1, 16, 8>"
         "(char *, unnamed>::CatArrInputTensorMetadata<T1, T2, T4, T5>, unnamed>::TensorSizeStride<T2, 4>, int, "
         "T2)"),  # the same ncu, mamba_scan_naive's torch.cat
    ],
)  # fmt: skip
def test_torch_and_ncu_names_normalise_alike(torch_name, ncu_name):
    # pairs seen on an H200 (torch 2.11, ncu 2025.3): the torch profiler's name, then ncu's
    assert normalized(torch_name) == normalized(ncu_name)
    assert base_name(torch_name) == base_name(ncu_name)


# ------------------------------------------------------------------------------------------------ attaching


def test_counters_attach_to_the_ops_by_name_and_order(placed):
    c = attach(placed.points, read_csv(RAW), "raw_page.csv")
    assert (c.launches, c.matched_launches) == (9, 8)
    assert len(c.unmatched_kernels) == 1 and "distribution_elementwise" in c.unmatched_kernels[0]
    assert c.unmatched_dram_bytes == 16_128 + 44_442_368
    by = {o.index: o for o in c.ops}
    mm, big, copy, small = by[0], by[1], by[2], by[3]
    # two iterations in the export: per iteration = half the sum; the two adds get their own launches, in order
    assert mm.launches == 1 and not mm.approximate
    assert mm.dram_bytes == 333_554_432 and mm.compulsory_bytes == 100_663_296
    assert mm.ratio == pytest.approx(333_554_432 / 100_663_296)  # 3.31x: tiles re-read
    assert (mm.counters_bound, mm.roofline_bound, mm.agree) == ("compute", "compute", True)
    assert mm.tensor_pct == pytest.approx(71.10) and mm.duration_s == pytest.approx(250e-6)
    assert big.dram_read_bytes == 134_230_528 and big.dram_write_bytes == 49_165_568
    assert big.ratio == pytest.approx(183_396_096 / 201_326_592)
    assert (big.counters_bound, big.agree, big.low) == ("memory", True, False)
    assert small.dram_bytes == 12_582_912 and small.ratio == pytest.approx(1.0)
    assert small.counters_bound == "memory" and small.low  # 20.5% and 3%: neither unit near its peak
    assert copy.ratio == pytest.approx(6.5) and copy.l2_bytes == 434_110_464
    assert c.agreement == 1.0


def test_a_different_launch_count_is_shared_by_kernel_time(placed):
    kernels = [k for k in read_csv(RAW) if k.id != 8]  # the second iteration's small add is missing
    c = attach(placed.points, kernels, "x")
    by = {o.index: o for o in c.ops}
    assert by[1].approximate and by[3].approximate and not by[0].approximate
    # 3 add launches for 2 per iteration: 1.5 iterations; the ops share the summed counters by kernel time 70:8
    total = 2 * (134_230_528 + 49_165_568) + 12_582_912
    assert by[1].dram_bytes == pytest.approx(total / 1.5 * 70 / 78)
    assert c.notes and "approximate" in c.notes[0]


def test_the_locality_finding_and_its_bound(placed):
    c = attach(placed.points, read_csv(RAW), "x")
    findings = locality_findings(c, placed.points, 600e-6)
    assert [f.rule for f in findings] == [RULE]  # the copy; not the GEMM (compute sets its floor)
    f = findings[0]
    copy = next(p for p in placed.points if p.index == 2)
    assert f.ops == [2] and f.properties == ["locality"] and f.bottleneck == "memory"
    assert "6.5x" in f.evidence and "threshold 2x" in f.evidence
    assert f.time_s == 200e-6
    assert f.best_time_s == pytest.approx(copy.roof_time_s) and f.floor_s == f.best_time_s  # never below the roof
    assert f.gain == pytest.approx(200e-6 / (2 * 4096 * 1024 * 4 / 2e12))
    # a higher threshold: none
    assert locality_findings(c, placed.points, 600e-6, factor=7.0) == []


def test_small_tensors_are_not_judged(placed, monkeypatch):
    monkeypatch.setattr(counters_rules, "MIN_LOCALITY_BYTES", 1 << 30)
    c = attach(placed.points, read_csv(RAW), "x")
    assert locality_findings(c, placed.points, 600e-6) == []


def test_disagreement_is_reported(placed):
    kernels = [
        k.model_copy(update={"sm_pct": 90.0, "memory_pct": 10.0}) if k.name.startswith("void at::vectorized") else k
        for k in read_csv(RAW)
    ]
    c = attach(placed.points, kernels, "x")
    by = {o.index: o for o in c.ops}
    assert by[1].counters_bound == "compute" and by[1].agree is False
    assert c.agreement == pytest.approx(2 / 4)


# ------------------------------------------------------------------------------------------------ the CLI


@pytest.fixture
def report_file(tmp_path, placed):
    report = new_report("roofline diagnose test", "diagnose", [GPU], list(placed.points))
    report = report.model_copy(
        update={"summary": placed.summary.model_dump(mode="json"), "findings": [], "diagnose": {"model": "m.py"}}
    )
    path = tmp_path / "r.json"
    write_report(report, path)
    return path


def test_counters_import_shows_the_table(cli, report_file):
    result = cli("counters", "import", str(RAW), "--report", str(report_file))
    assert result.code == 0, result.err
    assert "8 of 9 kernel launches matched to 4 ops" in result.out
    assert "6.50x" in result.out and "3.31x" in result.out
    assert "locality" in result.out and "copy_" in result.out


def test_counters_import_writes_the_report(cli, report_file, tmp_path):
    out = tmp_path / "with.json"
    result = cli("counters", "import", str(RAW), "--report", str(report_file), "-o", str(out))
    assert result.code == 0, result.err
    data = json.loads(out.read_text())
    assert data["counters"]["matched_launches"] == 8
    assert [f["rule"] for f in data["findings"]] == [RULE]
    assert data["findings"][0]["gain"] > 1
    twice = tmp_path / "twice.json"
    again = cli("counters", "import", str(RAW), "--report", str(out), "-o", str(twice))
    assert again.code == 0, again.err
    assert [f["rule"] for f in json.loads(twice.read_text())["findings"]] == [RULE]  # replaced, not added twice
    same = cli("counters", "import", str(RAW), "--report", str(out), "-o", str(out), "--force")
    assert same.code == 2 and "not overwritten" in same.error_line()


def test_counters_import_json(cli, report_file):
    result = cli("counters", "import", str(RAW), "--report", str(report_file), "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert len(data["counters"]["ops"]) == 4 and data["findings"][0]["rule"] == RULE


def test_counters_import_bad_input(cli, report_file, tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("name,time_ms\nmatmul,1.0\n")
    result = cli("counters", "import", str(other), "--report", str(report_file))
    assert result.code == 2 and "not an Nsight Compute CSV" in result.error_line()
    result = cli("counters", "import", str(UNITS), "--report", str(report_file))  # another model's kernels
    assert result.code == 2 and "matches a kernel" in result.error_line()
    analytic = tmp_path / "a.json"
    write_report(new_report("x", "analytic", [GPU], []), analytic)
    result = cli("counters", "import", str(RAW), "--report", str(analytic))
    assert result.code == 2 and "diagnose" in result.error_line()


# ------------------------------------------------------------------------------------------------ running ncu


def test_the_ncu_command_asks_for_the_metrics_only(tmp_path):
    command = ncu.ncu_command("/usr/bin/ncu", tmp_path / "o.csv", ["python", "-m", "x"])
    assert command[:3] == ["/usr/bin/ncu", "--metrics", ",".join(ncu.METRICS)]
    for flag in ("--clock-control none", "--csv", "--page raw", f"--nvtx-include {ncu.NVTX_RANGE}/"):
        assert flag in " ".join(command)
    assert command[-3:] == ["python", "-m", "x"]
    child = child_command("m.py", device="cuda:0", mode="training", warmup=0, dtype="bf16", argv=["--n", "2"])
    assert child[1:3] == ["-m", "roofline.diagnose.counters"]
    assert "--warmup 1 --dtype bf16" in " ".join(child) and child[-3:] == ["--", "--n", "2"]


def test_ncu_missing_names_the_fix(tmp_path):
    with pytest.raises(CountersUnavailable, match="not on PATH: install Nsight Compute"):
        ncu.run_ncu(["python"], tmp_path, which=lambda name: None)


def _fake_run(csv_text: str = "", stderr: str = "", code: int = 0):
    def run(command, **kwargs):
        log = Path(command[command.index("--log-file") + 1])
        log.write_text(csv_text)
        return subprocess.CompletedProcess(command, code, "", stderr)

    return run


def test_ncu_without_permission_names_the_fix(tmp_path):
    said = (
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters "
        "on the target device 0.\n"
    )
    with pytest.raises(CountersUnavailable, match=r"ERR_NVGPUCTRPERM.*developer\.nvidia\.com/ERR_NVGPUCTRPERM"):
        ncu.run_ncu(["python"], tmp_path, which=lambda name: "/x/ncu", run=_fake_run(said, code=0))


def test_ncu_run_failures(tmp_path):
    with pytest.raises(CountersUnavailable, match=r"failed \(exit 1\): RuntimeError: boom"):
        ncu.run_ncu(["python"], tmp_path, which=lambda n: "/x/ncu", run=_fake_run("", "x\nRuntimeError: boom\n", 1))
    with pytest.raises(CountersUnavailable, match="==ERROR== no kernels were profiled"):
        ncu.run_ncu(["python"], tmp_path, which=lambda n: "/x/ncu", run=_fake_run("==ERROR== no kernels were profiled"))


def test_collect_runs_the_child_under_ncu(tmp_path):
    seen = {}

    def run(command, **kwargs):
        seen.update(kwargs, command=command)
        return _fake_run(RAW.read_text())(command)

    model = tmp_path / "m.py"
    model.write_text("")
    kernels = collect(model, device="cuda", which=lambda name: "/x/ncu", run=run)
    assert len(kernels) == 9
    assert "roofline.diagnose.counters" in seen["command"] and str(model.resolve()) in seen["command"]
    assert seen["cwd"] == str(tmp_path.resolve()) and "PYTHONPATH" in seen["env"]


# ------------------------------------------------------------------------------------------------ diagnose --counters


def _diagnose(tmp_path, monkeypatch, ncu_run, torch_device="cuda", **options):
    """The pipeline on RECORDS and their timing on GPU (``torch_device``), ``ncu_run`` in place of ncu's."""
    monkeypatch.setattr("roofline.diagnose.counters.collect", ncu_run)
    loaded = SimpleNamespace(model=None, inputs=(), kwargs={}, convention="test", path=None, compiled=False)
    timer = FakeTimer(lambda *a, **kw: timing(), count=lambda model, inputs, kwargs, mode: list(RECORDS))
    machine = Boundaries(device=FixedDevice(GPU, torch_device), timer=timer)
    return run(lambda device: loaded, tmp_path / "m.py", DiagnoseOptions(**options), boundaries=machine)


def test_diagnose_with_counters_adds_them_and_the_finding(tmp_path, monkeypatch):
    seen = {}

    def counters(path, **options):
        seen.update(options, path=path)
        return read_csv(RAW)

    result = _diagnose(tmp_path, monkeypatch, counters, counters=True, warmup=2)
    assert seen["device"] == "cuda" and seen["warmup"] == 2 and seen["mode"] == "inference"
    assert seen["path"] == tmp_path / "m.py"
    assert result.counters is not None and result.counters.matched_launches == 8
    assert RULE in [f.rule for f in result.findings] and not result.counters_error
    report = result.report("roofline diagnose --counters")
    assert report.counters["ops"][0]["index"] == 0  # type: ignore[attr-defined]


def test_diagnose_without_ncu_still_diagnoses(tmp_path, monkeypatch):
    def counters(path, **options):
        raise CountersUnavailable(ncu.MISSING_FIX)

    result = _diagnose(tmp_path, monkeypatch, counters, counters=True)
    assert result.counters is None and result.findings
    assert result.counters_error.startswith("--counters: ncu (Nsight Compute) is not on PATH")
    assert "without counters" in result.counters_error
    assert "counters" not in result.report("x").model_dump()
    off = _diagnose(tmp_path, monkeypatch, counters)  # not asked: not run
    assert off.counters is None and not off.counters_error


def test_diagnose_counters_on_the_cpu_says_so(tmp_path, monkeypatch):
    never = lambda path, **kw: pytest.fail("ncu run on the CPU")  # noqa: E731
    result = _diagnose(tmp_path, monkeypatch, never, "cpu", counters=True)
    assert "on the CPU" in result.counters_error


@pytest.mark.gpu
def test_collect_on_a_gpu_with_ncu():
    """On a CUDA machine with ncu on PATH: one iteration of an example model profiled for real."""
    import shutil

    if shutil.which("ncu") is None:
        pytest.skip("ncu not on PATH")
    model = Path(__file__).resolve().parents[1] / "workloads" / "models" / "gelu_chain_unfused.py"
    try:
        kernels = collect(model, device="cuda", warmup=1)
    except CountersUnavailable as exc:
        pytest.skip(str(exc))
    assert kernels and all(k.dram_bytes >= 0 for k in kernels)


def test_the_child_reads_its_own_command_line(monkeypatch):
    # the child's argv as child_command writes it, with and without the script's arguments after '--'
    import roofline.diagnose.counters as child

    seen = {}

    def load_model(path, **kw):
        seen.update(path=path, **kw)
        raise SystemExit(0)

    monkeypatch.setattr("roofline.diagnose.loader.load_model", load_model)
    monkeypatch.setitem(__import__("sys").modules, "torch", __import__("types").SimpleNamespace())
    for extra, script in (([], []), (["--size", "large"], ["--size", "large"])):
        command = child.child_command("/x/m.py", device="cuda", dtype="bf16", argv=extra)
        with pytest.raises(SystemExit):
            child.main(command[3:])
        assert seen["path"] == command[3] and seen["argv"] == script and seen["dtype"] == "bf16"


def test_agreement_judges_our_verdict_not_the_side_of_the_ridge(placed):
    # an op left of the ridge whose limiter says compute (instruction issue) agrees with counters that read the SMs
    # busier than memory; the same op judged by the side of the ridge would disagree
    from roofline.findings.counters import our_bound

    point = next(p for p in placed.points if p.roofline_bound == "memory")
    assert our_bound(point) == "memory"
    issue = point.model_copy(update={"limiter": "compute"})
    assert our_bound(issue) == "compute"
    assert our_bound(point.model_copy(update={"limiter": "latency"})) == "memory"  # neither: the ridge decides
    compute_side = next(p for p in placed.points if p.roofline_bound == "compute")
    assert our_bound(compute_side.model_copy(update={"limiter": "layout"})) == "memory"  # the memory pipeline
    kernels = [k.model_copy(update={"sm_pct": 90.0, "memory_pct": 10.0}) for k in read_csv(RAW)]
    points = [issue if p.index == point.index else p for p in placed.points]
    by = {o.index: o for o in attach(points, kernels, "x").ops}
    assert (by[point.index].counters_bound, by[point.index].agree) == ("compute", True)


def test_diagnose_with_counters_lets_the_measured_sm_throughput_decide(tmp_path, monkeypatch):
    # the copy kernel read as SM-bound (SM 91%, memory 63%): the copy_, 'latency' from the roofline numbers,
    # becomes 'compute' (instruction issue, measured); the counters' agreement stays our own verdict's
    def counters(path, **options):
        kernels = read_csv(RAW)
        return [k.model_copy(update={"sm_pct": 91.0, "memory_pct": 63.0}) if "copy" in k.name else k for k in kernels]

    result = _diagnose(tmp_path, monkeypatch, counters, counters=True)
    copy = next(p for p in result.placed.points if p.op == "aten::copy_")
    assert copy.limiter == "compute" and copy.limiter_evidence.startswith("instruction issue, measured")
    assert next(o for o in result.counters.ops if o.op == "aten::copy_").limiter == "latency"
    plain = _diagnose(tmp_path, monkeypatch, lambda path, **o: read_csv(RAW), counters=True)
    assert next(p for p in plain.placed.points if p.op == "aten::copy_").limiter == "latency"


# ------------------------------------------------------------------------------------------------ L2-resident


def test_an_op_whose_dram_bytes_are_under_half_its_l2_bytes_is_l2_resident(placed):
    c = attach(placed.points, read_csv(RAW), "raw_page.csv")
    by = {o.index: o for o in c.ops}
    # mm: 333,554,432 DRAM bytes against 1,084,428,160 L2 bytes (0.31x); copy: 218,103,808 against 434,110,464
    # (0.502x: just over half); the small add: as many DRAM bytes as L2 bytes
    assert [by[i].l2_resident for i in range(4)] == [True, False, False, False]


def _resident(point, dram: float, l2: float | None) -> OpCounters:
    return OpCounters(
        index=point.index, op=point.op, module="", kernels=[], launches=1, compulsory_bytes=point.bytes,
        dram_read_bytes=dram, dram_write_bytes=0.0, dram_bytes=dram, ratio=None, l2_bytes=l2,
        l2_resident=l2 is not None and dram < L2_RESIDENT * l2, roofline_bound=point.roofline_bound,
    )  # fmt: skip


def test_an_l2_resident_op_takes_the_l2_roof_for_its_memory_time(placed):
    add = placed.points[1]  # 3 x 4 MiB fp32 at 2 TB/s: memory time 6.29 us, measured 70 us
    oc = _resident(add, 1e6, 8e6)
    assert oc.l2_resident
    counters = Counters(source="x", launches=1, matched_launches=1, unmatched_kernels=[], unmatched_dram_bytes=0,
                        ops=[oc], agreement=None)  # fmt: skip
    (same,) = [p for p in relabel(placed.points, counters) if p.index == 1]  # no L2 bandwidth: evidence only
    assert same.memory_time_s == add.memory_time_s
    assert same.limiter_evidence == (
        f"{add.limiter_evidence}; L2-resident: Nsight Compute measured 1 MB from DRAM against 8 MB through L2 "
        "(under 0.5x): its memory bound is the L2 roof, not DRAM (no L2 bandwidth known for this device: its memory "
        "time stays DRAM's)"
    )
    (roofed,) = [p for p in relabel(placed.points, counters, l2_bandwidth=4e12) if p.index == 1]
    assert roofed.memory_time_s == 8e6 / 4e12 and roofed.roof_time_s == 2e-6  # the add's FLOPs take less
    assert roofed.efficiency == pytest.approx(2e-6 / add.time_s)
    assert roofed.attainable_flops_per_s == pytest.approx(add.flops / 2e-6)
    assert roofed.limiter_evidence.endswith("not DRAM (L2 4 TB/s: memory time 2 us)")
    # DRAM bytes at half the L2 bytes or more: not L2-resident, nothing changed
    assert l2_roofed(add, _resident(add, 4e6, 8e6), 4e12) is None
    assert l2_roofed(add, _resident(add, 1e6, None), 4e12) is None


# ------------------------------------------------------------------------------------------------ .ncu-rep


class _Metric:
    def __init__(self, value: float, unit: str | None) -> None:
        self.value, self._unit = value, unit
        if unit is None:  # an ncu_report without IMetric.unit: the values in base units (bytes, ns, %)
            self.unit = None

    def as_double(self) -> float:
        return self.value

    def unit(self) -> str:
        return self._unit or ""


class _Action:
    def __init__(self, k, with_units: bool) -> None:
        self._name = k.name
        scale = 1024 if with_units else 1  # with units: bytes in KiB
        values = {
            ncu.DRAM_READ: (k.dram_read_bytes / scale, "KiB" if with_units else None),
            ncu.DRAM_WRITE: (k.dram_write_bytes / scale, "KiB" if with_units else None),
            ncu.L2_BYTES: (None if k.l2_bytes is None else k.l2_bytes / scale, "KiB" if with_units else None),
            ncu.L1_BYTES: (None if k.l1_bytes is None else k.l1_bytes / scale, "KiB" if with_units else None),
            ncu.SM_PCT: (k.sm_pct, "%" if with_units else None),
            ncu.MEMORY_PCT: (k.memory_pct, "%" if with_units else None),
            ncu.OCCUPANCY_PCT: (k.occupancy_pct, "%" if with_units else None),
            ncu.TENSOR_PCT: (k.tensor_pct, "%" if with_units else None),
            ncu.DURATION: (None if k.duration_s is None else k.duration_s * 1e9, "nsecond" if with_units else None),
        }
        self.metrics = {n: _Metric(v, u) for n, (v, u) in values.items() if v is not None}

    def name(self, base=None) -> str:
        assert base == "demangled"
        return self._name

    def metric_by_name(self, name: str):
        return self.metrics.get(name)


class _Range:
    def __init__(self, actions) -> None:
        self.actions = actions

    def num_actions(self) -> int:
        return len(self.actions)

    def action_by_idx(self, i: int):
        return self.actions[i]


def fake_ncu_report(kernels, *, with_units: bool = False, ranges: int = 2) -> SimpleNamespace:
    """A stand-in for Nsight Compute's ncu_report module holding ``kernels``, split over ``ranges`` ranges."""
    actions = [_Action(k, with_units) for k in kernels]
    cut = len(actions) // ranges
    parts = [actions[:cut], actions[cut:]] if ranges == 2 else [actions]
    loaded: list[str] = []

    def load_report(path: str):
        loaded.append(path)
        return SimpleNamespace(num_ranges=lambda: len(parts), range_by_idx=lambda i: _Range(parts[i]))

    return SimpleNamespace(
        load_report=load_report, IAction=SimpleNamespace(NameBase_DEMANGLED="demangled"), loaded=loaded
    )


@pytest.mark.parametrize("with_units", [False, True])
def test_an_ncu_rep_is_read_through_ncu_report_into_the_csv_fields(tmp_path, monkeypatch, with_units):
    kernels = read_csv(RAW)
    module = fake_ncu_report(kernels, with_units=with_units)
    monkeypatch.setitem(sys.modules, "ncu_report", module)
    rep = tmp_path / "run.ncu-rep"
    rep.write_bytes(b"\x00")
    read = ncu.read_counters(rep)
    assert module.loaded == [str(rep)]
    assert [k.id for k in read] == list(range(9))
    assert [k.name for k in read] == [k.name for k in kernels]
    for mine, theirs in zip(read, kernels, strict=True):
        assert (mine.dram_read_bytes, mine.dram_write_bytes, mine.l2_bytes) == (
            theirs.dram_read_bytes,
            theirs.dram_write_bytes,
            theirs.l2_bytes,
        )
        assert (mine.sm_pct, mine.memory_pct, mine.occupancy_pct, mine.tensor_pct) == (
            theirs.sm_pct,
            theirs.memory_pct,
            theirs.occupancy_pct,
            theirs.tensor_pct,
        )
        assert mine.duration_s == pytest.approx(theirs.duration_s, rel=1e-12)


def test_counters_import_reads_an_ncu_rep_and_names_the_fix_without_ncu_report(cli, report_file, tmp_path, monkeypatch):
    rep = tmp_path / "run.ncu-rep"
    rep.write_bytes(b"\x00")
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # import ncu_report: ImportError
    result = cli("counters", "import", str(rep), "--report", str(report_file))
    assert result.code == 2 and result.error_line().endswith(ncu.NCU_REPORT_FIX)
    module = fake_ncu_report(read_csv(RAW))
    monkeypatch.setitem(sys.modules, "ncu_report", module)
    result = cli("counters", "import", str(rep), "--report", str(report_file))
    assert result.code == 0, result.err
    said = " ".join(result.out.split())  # the long tmp path wraps the line
    assert "8 of 9 kernel launches matched to 4 ops" in said  # the .ncu-rep reads as the CSV does
    assert "6.50x" in said and "3.31x" in said
    del module.load_report("x").range_by_idx(0).actions[0].metrics[ncu.DRAM_WRITE]  # the actions are shared
    result = cli("counters", "import", str(rep), "--report", str(report_file))
    assert result.code == 2
    assert f"run.ncu-rep, range 0, launch 0: the report lacks {ncu.DRAM_WRITE}" in result.error_line()


def test_ncu_report_is_found_in_the_install_of_the_ncu_on_path(tmp_path, monkeypatch):
    """/usr/local/cuda-X/bin/ncu is a wrapper: ncu_report lives in /usr/local/cuda-X/nsight-compute-Y/extras/python
    (the H100 machine's layout, where the module could not be imported before): found there, the newest first."""
    from roofline.measure import ncu as ncu_module

    toolkit = tmp_path / "cuda-13.0"
    (toolkit / "bin").mkdir(parents=True)
    wrapper = toolkit / "bin" / "ncu"
    wrapper.write_text("#!/bin/sh\n")
    for version in ("2025.1.0", "2025.3.1"):
        extras = toolkit / f"nsight-compute-{version}" / "extras" / "python"
        extras.mkdir(parents=True)
        (extras / "ncu_report.py").write_text(f"VERSION = {version!r}\n")
    monkeypatch.setattr(ncu_module, "NCU_INSTALL_GLOBS", ())
    monkeypatch.setattr(ncu_module.shutil, "which", lambda name: str(wrapper) if name == "ncu" else None)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "ncu_report", raising=False)
    assert ncu_module.ncu_report_dirs() == [
        toolkit / "nsight-compute-2025.3.1" / "extras" / "python",
        toolkit / "nsight-compute-2025.1.0" / "extras" / "python",
    ]
    module = ncu_module._ncu_report()
    assert module.VERSION == "2025.3.1"
    monkeypatch.delitem(sys.modules, "ncu_report", raising=False)
    # no ncu on PATH and no install: the one-line fix
    monkeypatch.setattr(ncu_module.shutil, "which", lambda name: None)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "nsight-compute" not in p])
    with pytest.raises(ncu_module.CountersError, match="nor found beside the ncu on PATH"):
        ncu_module._ncu_report()


def test_ncu_report_names_with_casts_match_the_csv_and_the_profiler():
    # the same launch as ncu_report's demangled name and as the CSV's --print-kernel-base demangled (an H100,
    # Nsight Compute 2025.3.1): the report file writes C-style casts on integer template arguments
    from_rep = (
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::BinaryFunctor<float, float, float, "
        "at::native::binary_internal::MulFunctor<float>>, std::array<char *, (unsigned long)3>>(int, T2, T3)"
    )
    from_csv = (
        "void vectorized_elementwise_kernel<4, BinaryFunctor<float, float, float, binary_internal::MulFunctor<float>>, "
        "array<char *, 3>>(int, T2, T3)"
    )
    assert normalized(from_rep) == normalized(from_csv)
    assert (
        normalized(from_rep)
        == "vectorized_elementwise_kernel<4,BinaryFunctor<float,float,float,MulFunctor<float>>,array<char*,3>>"
    )
    assert normalized("k<(bool)1, (int)-2>(int)") == "k<1,-2>"  # the cast goes, the value stays
    assert normalized("void f(float (*)(int), (int)4)") == "f"  # outside a template: the parameters are cut


# ------------------------------------------------------------------------------------------------ L1 (l1tex__t_bytes)

RAW_L1 = DATA / "raw_page_l1.csv"  # raw_page.csv with an l1tex__t_bytes.sum column in Kbyte


def test_l1_bytes_are_read_from_the_csv_exactly():
    assert ncu.L1_BYTES == "l1tex__t_bytes.sum" and ncu.L1_BYTES in ncu.METRICS
    assert [k.l1_bytes for k in read_csv(RAW_L1)] == [
        50_000_000, 2_168_856_320, 307_260_544, 1_736_441_856, 12_582_912,
        2_168_856_320, 307_260_544, 1_736_441_858, 12_582_912,
    ]  # fmt: skip
    assert all(k.l1_bytes is None for k in read_csv(RAW))  # an export without the column: None


def test_l1_bytes_per_op_and_which_ops_l1_traffic_dominates(placed):
    c = attach(placed.points, read_csv(RAW_L1), "raw_page_l1.csv")
    by = {o.index: o for o in c.ops}
    # per iteration, the mean of the two iterations' launches
    assert [by[i].l1_bytes for i in range(4)] == [2_168_856_320, 307_260_544, 1_736_441_857, 12_582_912]
    # mm: L2 exactly half its L1 (not under): no; copy: L2 a quarter of its L1: yes; the adds: L2 = L1: no
    assert [by[i].l1_dominant for i in range(4)] == [False, False, True, False]
    assert all(o.l1_bytes is None and not o.l1_dominant for o in attach(placed.points, read_csv(RAW), "x").ops)


def test_an_op_whose_l1_traffic_dominates_says_so_in_its_evidence(placed):
    c = attach(placed.points, read_csv(RAW_L1), "raw_page_l1.csv")
    copy = next(p for p in placed.points if p.index == 2)  # 32 MiB compulsory at 2 TB/s: memory time 16.8 us
    (noted,) = [p for p in relabel(placed.points, c) if p.index == 2]  # no L1 bandwidth: evidence only
    assert noted.memory_time_s == copy.memory_time_s and noted.roof_time_s == copy.roof_time_s
    assert noted.limiter_evidence == (
        f"{copy.limiter_evidence}; L1 traffic dominates: Nsight Compute measured 1.736 GB through L1 against 434.1 MB "
        "through L2 (under 0.5x) and 218.1 MB from DRAM: its data is re-read from L1 (no L1 bandwidth known for this "
        "device: its memory time stays as it was)"
    )
    # an L1 of 30 TB/s: 1,736,441,857 B take 57.9 us, above the 16.8 us memory time: the hierarchical bound
    (raised,) = [p for p in relabel(placed.points, c, l1_bandwidth=3e13) if p.index == 2]
    assert raised.memory_time_s == 1_736_441_857 / 3e13 and raised.roof_time_s == raised.memory_time_s
    assert raised.efficiency == pytest.approx(raised.memory_time_s / copy.time_s)
    assert raised.limiter_evidence.endswith("(L1 30 TB/s: L1 time 57.9 us, above its memory time: the L1 sets its "
                                            "memory bound)")  # fmt: skip
    # 300 TB/s: 5.79 us, within the memory time: said, nothing changed
    (within,) = [p for p in relabel(placed.points, c, l1_bandwidth=3e14) if p.index == 2]
    assert within.memory_time_s == copy.memory_time_s
    assert within.limiter_evidence.endswith("(L1 300 TB/s: L1 time 5.79 us, within its memory time)")
    # the other ops' L1 traffic does not dominate: untouched by the L1
    others = [p for p in relabel(placed.points, c, l1_bandwidth=3e13) if p.index in (1, 3)]
    assert [p.limiter_evidence for p in others] == [p.limiter_evidence for p in placed.points if p.index in (1, 3)]


def test_the_locality_finding_names_the_l1_where_it_dominates(placed):
    (f,) = locality_findings(attach(placed.points, read_csv(RAW_L1), "x"), placed.points, 600e-6)
    assert f.ops == [2]
    assert f.evidence.endswith(
        "; its L1 traffic dominates (1.736 GB through L1, 434.1 MB through L2): the reuse it gets is in L1"
    )
    (plain,) = locality_findings(attach(placed.points, read_csv(RAW), "x"), placed.points, 600e-6)
    assert "L1" not in plain.evidence


def test_counters_import_shows_the_l1_column(cli, report_file):
    result = cli("counters", "import", str(RAW_L1), "--report", str(report_file))
    assert result.code == 0, result.err
    header = next(line for line in result.out.splitlines() if " L2 " in line)
    assert header.split()[5:7] == ["L2", "L1"]
    assert "1.736 GB" in result.out  # the copy's L1 bytes


@pytest.mark.parametrize("with_units", [False, True])
def test_an_ncu_rep_gives_the_l1_bytes(tmp_path, monkeypatch, with_units):
    kernels = read_csv(RAW_L1)
    monkeypatch.setitem(sys.modules, "ncu_report", fake_ncu_report(kernels, with_units=with_units))
    rep = tmp_path / "run.ncu-rep"
    rep.write_bytes(b"\x00")
    assert [k.l1_bytes for k in ncu.read_counters(rep)] == [k.l1_bytes for k in kernels]


def test_the_ncu_rep_benchmark_compares_the_h100_documents_as_both_tools_spell_them():
    """benchmarks/ncu_rep_gpu.py's comparison on its committed H100 result: the .ncu-rep import and the CSV import
    of one report file agree (names with casts and namespaces vs without, percentages to the CSV's 6 decimals);
    a changed byte count or kernel is a difference."""
    import copy
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("ncu_rep_gpu", root / "benchmarks" / "ncu_rep_gpu.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    stored = json.loads((root / "benchmarks" / "results" / "ncu-rep-h100.json").read_text())
    rep, csv = stored["documents"]["ncu_rep"], stored["documents"]["csv"]
    assert rep["counters"]["ops"][0]["kernels"] != csv["counters"]["ops"][0]["kernels"]  # spelled differently
    assert bench.differences(rep, csv) == []
    changed = copy.deepcopy(csv)
    changed["counters"]["ops"][1]["dram_bytes"] += 1024
    changed["counters"]["ops"][2]["kernels"] = ["void other_kernel<4>(int)"]
    assert bench.differences(rep, changed) == ["op 1 dram_bytes", "op 2 kernels"]
    assert bench.differences(rep, None) == ["missing"]
