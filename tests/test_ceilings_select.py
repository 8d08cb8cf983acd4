"""The GPU ceilings' selection logic on injected timings: best of kernels and shapes, the kernel named, the DRAM
roof, the Triton fallback, burst vs sustained GEMM figures, the time plan, and calibration files written before."""

from __future__ import annotations

import json

import pytest

from roofline.measure import calibration as cal_mod
from roofline.measure.calibration import Calibration, Ceiling, DramRoof, Machine
from roofline.measure.ceilings import (
    MIN_GEMM_PLAN,
    TRITON_MISSING_NOTE,
    GemmPlan,
    Trial,
    best_of,
    best_rate,
    dram_roof,
    gemm_burst,
    gemm_sustained,
    plan_gemms,
    triton_note,
)
from roofline.measure.ceilings_gpu import (
    GEMM_SHAPES,
    TORCH_DRAM_KERNELS,
    dram_bytes,
    dram_kernels,
    triton_kernels,
)
from roofline.measure.engine import Measurement
from roofline.roofs import device_from_sheet
from roofline.samples import median
from roofline.specs.loader import load_registry

GIB = 2**30


def fake(samples: list[float], throttled: list[bool] | None = None) -> Measurement:
    return Measurement(
        median_s=median(samples),
        p20_s=min(samples),
        p80_s=max(samples),
        samples_s=list(samples),
        method="cuda-events",
        cache="warm",
        stop_reason="converged",
        warmup_calls=1,
        elapsed_s=0.1,
        throttled=throttled or [False] * len(samples),
        clocks_mhz=[1980.0] * len(samples),
    )


def trial(kernel: str, seconds: float, work: float = 1e9) -> Trial:
    return Trial(kernel=kernel, shape="1 GiB fp32", work=work, run=lambda: fake([seconds] * 10))


def failing(kernel: str, message: str = "compilation failed") -> Trial:
    def run() -> Measurement:
        raise RuntimeError(message)

    return Trial(kernel=kernel, shape="1 GiB fp32", work=1e9, run=run)


# ------------------------------------------------------------------------------------------------ best of


def test_best_rate_keeps_the_fastest_kernel_and_names_it():
    trials = [trial("triton-read block=8192 warps=16", 2e-4), trial("triton-read a", 3e-4), trial("torch: sum", 4e-4)]
    ceiling = best_rate("dram-read", "bandwidth", "B/s", trials, spec=10e12, note="n")
    assert ceiling.value == pytest.approx(1e9 / 2e-4)
    assert ceiling.kernel == "triton-read block=8192 warps=16" and ceiling.shape == "1 GiB fp32"
    assert ceiling.ratio == pytest.approx(0.5)
    assert [c.kernel for c in ceiling.candidates] == [t.kernel for t in trials]
    assert [round(c.value) for c in ceiling.candidates] == [round(1e9 / s) for s in (2e-4, 3e-4, 4e-4)]
    # the order does not matter: the best is kept wherever it is
    again = best_rate("dram-read", "bandwidth", "B/s", list(reversed(trials)))
    assert again.kernel == ceiling.kernel and again.value == ceiling.value


def test_a_failing_kernel_is_a_candidate_with_its_error_and_the_rest_still_count():
    trials = [failing("triton-copy x"), trial("torch: dst.copy_(src)", 5e-4)]
    ceiling = best_rate("dram-copy", "bandwidth", "B/s", trials)
    assert ceiling.kernel == "torch: dst.copy_(src)"
    bad = ceiling.candidates[0]
    assert bad.value is None and bad.error == "RuntimeError: compilation failed"


def test_every_kernel_failing_raises_naming_the_first_error():
    with pytest.raises(RuntimeError, match=r"every kernel failed.*no kernel image"):
        best_rate("dram-read", "bandwidth", "B/s", [failing("a", "no kernel image"), failing("b", "other")])


def test_best_of_judges_unthrottled_samples_unless_told_to_take_all():
    throttled = Trial(
        kernel="k", shape="s", work=1.0, run=lambda: fake([1.0] * 5 + [2.0] * 6, [False] * 5 + [True] * 6)
    )
    assert best_of([throttled]).rate == pytest.approx(1.0)  # median of the 5 unthrottled samples
    assert best_of([throttled], all_samples=True).rate == pytest.approx(0.5)  # median of all 11


# ------------------------------------------------------------------------------------------------ DRAM roof


def _bw(name: str, value: float, kernel: str = "") -> Ceiling:
    return Ceiling(name=name, kind="bandwidth", value=value, unit="B/s", kernel=kernel)


def test_the_dram_roof_is_the_best_dram_ceiling_and_names_its_kernel():
    ceilings = [
        _bw("dram-read", 3.10e12, "triton-read block=8192 warps=16"),
        _bw("dram-copy", 2.97e12, "torch: dst.copy_(src)"),
        _bw("dram-write", 3.05e12, "triton-write block=1024 warps=8"),
        _bw("l2-copy", 9e12, "torch: dst.copy_(src)"),  # not a DRAM ceiling
    ]
    roof = dram_roof(ceilings)
    assert roof == DramRoof(ceiling="dram-read", kernel="triton-read block=8192 warps=16")
    assert dram_roof([_bw("l2-copy", 9e12)]) is None


def test_dram_buffers_are_far_beyond_the_l2():
    assert dram_bytes(50 * 2**20, 80 * GIB) == GIB  # 8x 50 MiB < 1 GiB
    assert dram_bytes(200 * 2**20, 180 * GIB) == 8 * 200 * 2**20  # a larger L2: 8x it
    assert dram_bytes(50 * 2**20, 4 * GIB) == 256 * 2**20  # little free memory: 4x the L2, at least 256 MiB


# ------------------------------------------------------------------------------------------ Triton fallback


def test_triton_import_failure_falls_back_to_torch_kernels_with_a_note():
    def no_triton(name: str) -> object:
        raise ModuleNotFoundError("No module named 'triton'")

    kernels, error = triton_kernels(no_triton)
    assert kernels is None and error == "ModuleNotFoundError: No module named 'triton'"
    plan = dram_kernels(kernels)
    assert {name: [label for label, _ in entries] for name, entries in plan.items()} == {
        name: [label] for name, label in TORCH_DRAM_KERNELS.items()
    }
    assert all(config is None for entries in plan.values() for _, config in entries)
    note = triton_note(error, [])
    assert note.startswith(TRITON_MISSING_NOTE) and "No module named 'triton'" in note
    assert TRITON_MISSING_NOTE == "triton not available: torch kernels used"


def test_without_triton_here_the_real_import_falls_back():
    try:
        import triton  # noqa: F401
    except ImportError:
        kernels, error = triton_kernels()
        assert kernels is None and "triton" in error
    else:
        pytest.skip("triton is installed here")


def test_triton_configurations_come_first_and_torch_stays_as_the_fallback():
    class Config:
        def __init__(self, block: int) -> None:
            self.block = block

        def label(self, what: str) -> str:
            return f"triton-{what} block={self.block}"

    class Kernels:
        READ_CONFIGS = (Config(8192), Config(4096))
        COPY_CONFIGS = (Config(1024),)
        WRITE_CONFIGS = ()

    plan = dram_kernels(Kernels)
    assert [label for label, _ in plan["dram-read"]] == [
        "triton-read block=8192",
        "triton-read block=4096",
        "torch: src.sum()",
    ]
    assert [label for label, _ in plan["dram-copy"]] == ["triton-copy block=1024", "torch: dst.copy_(src)"]
    assert [label for label, _ in plan["dram-write"]] == ["torch: dst.fill_(v)"]
    assert plan["dram-read"][-1][1] is None


def test_triton_kernels_that_all_fail_leave_a_note_and_torch_sets_the_ceiling():
    trials = [failing("triton-read block=8192 warps=16", "out of resources"), trial("torch: src.sum()", 4e-4)]
    ceiling = best_rate("dram-read", "bandwidth", "B/s", trials)
    assert ceiling.kernel == "torch: src.sum()"
    note = triton_note(None, ceiling.candidates)
    assert note == "triton kernels failed (RuntimeError: out of resources): torch kernels used"
    ran = best_rate("dram-read", "bandwidth", "B/s", [trial("triton-read b", 3e-4), trial("torch: src.sum()", 4e-4)])
    assert triton_note(None, ran.candidates) is None


# ------------------------------------------------------------------------------------------------- GEMMs

SHAPES = ((4096, 16384, 8192), (8192, 8192, 8192), (8192, 8192, 16384))


def _flops(shape: tuple[int, int, int]) -> float:
    m, n, k = shape
    return 2.0 * m * n * k


def test_gemm_burst_sweeps_the_shapes_and_rebursts_the_best():
    rates = {SHAPES[0]: 700e12, SHAPES[1]: 760e12, SHAPES[2]: 720e12}
    again = iter([790e12, 750e12])  # the re-bursts of the best shape
    calls: list[tuple[int, int, int]] = []
    seen: list[str] = []

    def burst(shape: tuple[int, int, int]) -> Measurement:
        calls.append(shape)
        rate = rates[shape] if len(calls) <= len(SHAPES) else next(again)
        return fake([_flops(shape) / rate] * 12)

    plan = GemmPlan(rebursts=2, shapes=3)
    ceiling, best = gemm_burst("bf16", SHAPES, burst, plan=plan, spec=989.4e12, progress=seen.append)
    assert best == SHAPES[1] and calls == [*SHAPES, SHAPES[1], SHAPES[1]]
    assert ceiling.name == "gemm-bf16-burst" and ceiling.phase == "burst" and ceiling.dtype == "bf16"
    assert ceiling.value == pytest.approx(790e12)  # the fastest burst of the best shape
    assert ceiling.shape == "8192x8192x8192" and ceiling.kernel == "torch.mm"
    assert ceiling.ratio == pytest.approx(790 / 989.4)
    assert [c.shape for c in ceiling.candidates] == ["4096x16384x8192", "8192x8192x8192", "8192x8192x16384"]
    assert "best of 3 shapes and 2 more bursts of the best" in ceiling.note
    assert seen[0] == "burst 1/3: 4096x16384x8192" and seen[-1] == "burst again 2/2: 8192x8192x8192"


def test_gemm_burst_sets_throttled_samples_aside_but_sustained_keeps_them():
    shape = SHAPES[1]
    fast, slow = _flops(shape) / 800e12, _flops(shape) / 680e12
    measured = fake([fast] * 6 + [slow] * 6, [False] * 6 + [True] * 6)
    burst, _ = gemm_burst("bf16", [shape], lambda s: measured, plan=GemmPlan(rebursts=0))
    assert burst.value == pytest.approx(800e12) and "6 throttled set aside" in burst.note
    sustained = gemm_sustained("bf16", shape, lambda s: measured, soaked_s=3.25, spec=989.4e12)
    assert sustained.name == "gemm-bf16" and sustained.phase == "sustained" and sustained.soak_s == 3.25
    assert sustained.value == pytest.approx(_flops(shape) / median([fast] * 6 + [slow] * 6))
    assert sustained.value < burst.value
    assert "after 3.2 s of back-to-back GEMMs" in sustained.note or "after 3.3 s" in sustained.note
    assert sustained.measurement.throttled_count == 6


def test_gemm_burst_skips_a_failing_shape_and_raises_when_all_fail():
    def burst(shape: tuple[int, int, int]) -> Measurement:
        if shape == SHAPES[0]:
            raise RuntimeError("CUBLAS_STATUS_NOT_SUPPORTED")
        return fake([_flops(shape) / 500e12] * 10)

    ceiling, best = gemm_burst("fp8", SHAPES, burst, plan=GemmPlan(rebursts=0), kernel="torch._scaled_mm")
    assert best == SHAPES[1] and ceiling.kernel == "torch._scaled_mm"
    assert ceiling.candidates[0].error.startswith("RuntimeError: CUBLAS")

    def broken(shape: tuple[int, int, int]) -> Measurement:
        raise RuntimeError("no fp8 here")

    with pytest.raises(RuntimeError, match="no fp8 here"):
        gemm_burst("fp8", SHAPES, broken, plan=GemmPlan())


def test_gemm_burst_sweeps_only_as_many_shapes_as_planned():
    calls = []

    def burst(shape: tuple[int, int, int]) -> Measurement:
        calls.append(shape)
        return fake([1e-3] * 10)

    gemm_burst("bf16", SHAPES, burst, plan=GemmPlan(shapes=1, rebursts=0))
    assert calls == [SHAPES[0]]


def test_every_dtype_has_shapes_and_the_tensor_ones_sweep_several():
    assert set(GEMM_SHAPES) == {"bf16", "fp16", "tf32", "fp32", "fp64", "fp8", "int8"}
    assert all(len(GEMM_SHAPES[d]) >= 3 for d in ("bf16", "fp16", "tf32", "fp8", "int8"))


def test_the_gemm_plan_fits_the_budget():
    counts = [3, 3, 3, 1, 1, 3, 3]
    full = GemmPlan()
    assert plan_gemms(1000.0, counts) == full
    tight = plan_gemms(full.seconds(counts) * 0.6, counts)
    assert tight.seconds(counts) <= full.seconds(counts) * 0.6 + 1e-9 and tight.rebursts == 0
    tiny = plan_gemms(0.5, counts)
    assert tiny.shapes == 1 and tiny.rebursts == 0
    for field in ("rest_s", "burst_s", "soak_s", "sustain_warmup_s", "sustain_s"):
        assert getattr(tiny, field) >= getattr(MIN_GEMM_PLAN, field)
    assert plan_gemms(-5.0, counts).soak_s == MIN_GEMM_PLAN.soak_s


# ------------------------------------------------------------------------------------- calibration files


def _machine() -> Machine:
    return Machine(kind="cuda", name="NVIDIA H100 80GB HBM3", sheet="h100-sxm", driver="580.1", cuda="12.8", torch="2")


def test_a_calibration_written_before_these_fields_still_loads_with_the_copy_roof():
    old = {
        "schema": "roofline.calibration",
        "version": 1,
        "created_utc": "2026-11-21T19:47:12Z",
        "tool_version": "0.1.0",
        "machine": {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "sheet": "h100-sxm"},
        "ceilings": [
            {"name": "dram-copy", "kind": "bandwidth", "value": 2.97e12, "unit": "B/s", "shape": "1 GiB fp32 copy"},
            {"name": "dram-read", "kind": "bandwidth", "value": 2.68e12, "unit": "B/s"},
            {"name": "dram-write", "kind": "bandwidth", "value": 3.2e12, "unit": "B/s"},
            {"name": "gemm-bf16", "kind": "compute", "value": 780e12, "unit": "FLOP/s", "dtype": "bf16"},
        ],
        "skipped": [],
        "notes": [],
        "elapsed_s": 3.7,
        "quick": False,
    }
    cal = cal_mod.parse(json.dumps(old))
    assert cal.dram_roof is None and cal.dram_roof_name == "dram-copy"
    assert cal.get("dram-copy").kernel == "" and cal.get("gemm-bf16").phase is None
    device = cal_mod.apply(device_from_sheet(load_registry().get("h100-sxm")), cal)
    assert device.dram_bandwidth == 2.97e12  # as before: the copy, not the faster write
    assert device.compute[("bf16", "tensor")] == 780e12


def test_the_dram_roof_and_sustained_gemm_are_the_roofs_and_round_trip():
    cal = Calibration(
        created_utc="2026-11-24T00:00:00Z",
        machine=_machine(),
        ceilings=[
            _bw("dram-read", 3.1e12, "triton-read block=8192 warps=16"),
            _bw("dram-copy", 2.97e12, "torch: dst.copy_(src)"),
            Ceiling(name="gemm-bf16-burst", kind="compute", value=790e12, unit="FLOP/s", dtype="bf16", phase="burst"),
            Ceiling(
                name="gemm-bf16", kind="compute", value=700e12, unit="FLOP/s", dtype="bf16", phase="sustained", soak_s=3
            ),
        ],
        dram_roof=DramRoof(ceiling="dram-read", kernel="triton-read block=8192 warps=16"),
    )
    again = cal_mod.parse(cal.to_json())
    assert again == cal and again.dram_roof_name == "dram-read"
    device = cal_mod.apply(device_from_sheet(load_registry().get("h100-sxm")), again)
    assert device.dram_bandwidth == 3.1e12
    assert device.compute[("bf16", "tensor")] == 700e12  # the sustained figure, not the burst
    assert cal_mod.ceiling_of("cuda", "fp32", "memory", again.dram_roof_name) == "dram-read"
    assert cal_mod.ceiling_of("cuda", "fp32", "memory") == "dram-copy"
    # a roof naming a ceiling the file lacks falls back to the copy
    missing = again.model_copy(update={"dram_roof": DramRoof(ceiling="dram-write")})
    assert missing.dram_roof_name == "dram-copy"


def test_the_renderer_names_the_kernels_the_dram_roof_and_the_phases():
    from roofline.measure.calibration import CalibrationSummary
    from roofline.render.calibrate import CalibrationRenderer

    def summary(throttled: int) -> CalibrationSummary:
        return CalibrationSummary(
            median_s=1e-3,
            p20_s=1e-3,
            p80_s=1e-3,
            n=12,
            method="cuda-events",
            cache="cold",
            throttled_count=throttled,
            throttle_reasons=["sw-power-cap"] if throttled else [],
            clock_mhz_median=1755.0,
        )

    cal = Calibration(
        created_utc="2026-11-24T00:00:00Z",
        machine=_machine(),
        ceilings=[
            _bw("dram-read", 3.1e12, "triton-read block=8192 warps=16"),
            Ceiling(
                name="gemm-bf16-burst",
                kind="compute",
                value=790e12,
                unit="FLOP/s",
                dtype="bf16",
                phase="burst",
                shape="8192x8192x8192",
                kernel="torch.mm",
                measurement=summary(0),
            ),
            Ceiling(
                name="gemm-bf16",
                kind="compute",
                value=700e12,
                unit="FLOP/s",
                dtype="bf16",
                phase="sustained",
                soak_s=3.4,
                shape="8192x8192x8192",
                kernel="torch.mm",
                measurement=summary(12),
            ),
        ],
        dram_roof=DramRoof(ceiling="dram-read", kernel="triton-read block=8192 warps=16"),
    )
    text = " ".join(CalibrationRenderer(color=False).render(cal).split())
    assert "triton-read block=8192 warps=16" in text
    assert "burst from rest" in text and "sustained after 3.4 s of GEMMs" in text
    assert "DRAM = dram-read (the best DRAM ceiling, triton-read block=8192 warps=16)" in text
    assert "sustained figures" in text
    assert "warning:" not in text  # the sustained figure's throttled samples are expected, not a warning


# ------------------------------------------------------------------------- calibrate_cuda end to end (CPU)


class _HostEvent:
    """A CUDA event stand-in on the host clock (the kernels below run synchronously on the CPU)."""

    def __init__(self, enable_timing: bool = True) -> None:
        self.t = 0.0

    def record(self) -> None:
        import time

        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _HostEvent) -> float:
        return (end.t - self.t) * 1e3


class _FakeCuda:
    """torch.cuda as calibrate_cuda uses it, over CPU tensors: no graphs, no _sleep (those steps are skipped)."""

    Event = _HostEvent

    def __init__(self, free_bytes: int) -> None:
        self.free_bytes = free_bytes

    def current_device(self) -> int:
        return 0

    def get_device_properties(self, index: int) -> object:
        from types import SimpleNamespace

        return SimpleNamespace(
            name="Fake GPU", major=9, minor=0, multi_processor_count=4, L2_cache_size=2**20, total_memory=2**32
        )

    def get_device_capability(self, dev: object = None) -> tuple[int, int]:
        return (9, 0)

    def mem_get_info(self, dev: object = None) -> tuple[int, int]:
        return self.free_bytes, 2**32

    def synchronize(self) -> None:
        pass

    def empty_cache(self) -> None:
        pass


class _FakeTorch:
    """Real torch on the CPU, with a fake ``cuda`` namespace and ``device('cuda', i)`` mapped to the CPU."""

    def __init__(self, free_bytes: int = 2**30) -> None:
        import torch

        self._torch = torch
        self.cuda = _FakeCuda(free_bytes)

    def device(self, *args: object) -> object:
        return self._torch.device("cpu")

    def __getattr__(self, name: str) -> object:
        return getattr(self._torch, name)


class _CpuKernels:
    """The Triton kernel module's interface, done with torch on the CPU (labels say 'triton-...')."""

    class Config:
        def __init__(self, block: int) -> None:
            self.block = block

        def label(self, what: str) -> str:
            return f"triton-{what} block={self.block}"

    READ_CONFIGS = (Config(4096), Config(1024))
    COPY_CONFIGS = (Config(1024),)
    WRITE_CONFIGS = (Config(1024),)

    @staticmethod
    def read(torch, src, config):
        partial = torch.empty(src.numel() // config.block)

        def fn() -> None:
            torch.sum(src.view(-1, config.block), dim=1, out=partial)

        return fn, partial

    @staticmethod
    def copy(src, dst, config):
        return lambda: dst.copy_(src)

    @staticmethod
    def write(dst, value, config):
        return lambda: dst.fill_(value)


class _Clock:
    max_clock_mhz = 1980.0

    def sample(self) -> tuple[float, list[str]]:
        return 1980.0, []


@pytest.fixture
def small_gpu(monkeypatch):
    """calibrate_cuda's sizes shrunk for a CPU: 4 MiB DRAM buffers, tiny GEMM shapes, short trials."""
    import roofline.measure.backends as backends
    import roofline.measure.ceilings_gpu as gpu

    shapes = ((32, 64, 16), (48, 32, 32), (16, 16, 64))
    order = ("bf16", "fp32")  # two dtypes stand for all: the steps are the same per dtype
    monkeypatch.setattr(gpu, "GEMM_SHAPES", {name: shapes for name in gpu.GEMM_SHAPES})
    monkeypatch.setattr(gpu, "GEMM_ORDER", order)
    steps = tuple(s for s in gpu.CUDA_STEPS if not s.startswith("gemm-") or s.split("-")[1] in (*order, "soak"))
    monkeypatch.setattr(gpu, "CUDA_STEPS", steps)
    machine = _machine().model_copy(update={"l2_bytes": 2**20, "max_sm_clock_mhz": 1980.0})
    monkeypatch.setattr(gpu, "describe_cuda", lambda torch, sheet=None: machine.model_copy(update={"sheet": sheet}))
    monkeypatch.setattr(gpu, "nvml_index", lambda torch, index: 0)
    monkeypatch.setattr(gpu, "GPU_DRAM_MIN_BYTES", 4 * 2**20)
    monkeypatch.setattr(gpu, "DRAM_TRIAL_MAX_S", 0.02)
    monkeypatch.setattr(gpu, "DRAM_TRIAL_MIN_S", 0.0)
    monkeypatch.setattr(backends, "nvml_clock", lambda index=0: _Clock())
    monkeypatch.setattr(backends, "l2_flush", lambda torch, l2_bytes, device="cuda": lambda: None)
    return gpu


SMALL_PLAN = GemmPlan(rest_s=0.0, burst_s=0.01, rebursts=1, soak_s=0.02, sustain_warmup_s=0.0, sustain_s=0.01)


def test_calibrate_cuda_on_injected_backends_names_kernels_and_keeps_both_gemm_figures(small_gpu):
    steps: list[tuple[str, int, int]] = []
    cal = small_gpu.calibrate_cuda(
        _FakeTorch(),
        progress=lambda name, i, n: steps.append((name, i, n)),
        budget_s=5.0,
        gemm_plan=SMALL_PLAN,
        import_kernels=lambda: (_CpuKernels, None),
    )
    names = [c.name for c in cal.ceilings]
    assert names[:3] == ["dram-read", "dram-copy", "dram-write"]
    read = cal.get("dram-read")
    tried = [c.kernel for c in read.candidates]
    assert tried == ["triton-read block=4096", "triton-read block=1024", "torch: src.sum()"]
    assert read.kernel in {c.kernel for c in read.candidates} and read.work == 4 * 2**20
    assert cal.dram_roof is not None and cal.get(cal.dram_roof.ceiling).kernel == cal.dram_roof.kernel
    assert cal.value(cal.dram_roof.ceiling) == max(cal.value(n) for n in ("dram-read", "dram-copy", "dram-write"))
    assert not any("triton" in note for note in cal.notes)
    for dtype in ("bf16", "fp32"):
        burst, sustained = cal.get(f"gemm-{dtype}-burst"), cal.get(f"gemm-{dtype}")
        assert burst is not None and sustained is not None, cal.skipped
        assert burst.phase == "burst" and sustained.phase == "sustained"
        assert len(burst.candidates) == 3 and burst.shape == sustained.shape
        assert sustained.soak_s is not None and sustained.soak_s >= SMALL_PLAN.soak_s
        assert burst.measurement.clock_mhz_median == 1980.0
    assert any(note.startswith("thermal soak before the sustained GEMM figures") for note in cal.notes)
    # progress: every step once in order, the GEMM bursts' shapes reported inside their step, then 'done'
    main = [s for s in steps if ":" not in s[0]]
    assert [s[0] for s in main][:-1] == list(small_gpu.CUDA_STEPS) and main[-1][0] == "done"
    assert ("gemm-bf16-burst: burst 1/3: 32x64x16", 4, len(small_gpu.CUDA_STEPS)) in steps
    assert {s.name for s in cal.skipped} >= {"l2-copy"}  # no CUDA graphs on the fake
    doc = cal_mod.parse(cal.to_json())
    assert doc == cal


def test_calibrate_cuda_without_triton_uses_torch_kernels_with_a_note(small_gpu):
    cal = small_gpu.calibrate_cuda(
        _FakeTorch(),
        budget_s=5.0,
        gemm_plan=SMALL_PLAN,
        import_kernels=lambda: (None, "ModuleNotFoundError: No module named 'triton'"),
    )
    assert [c.kernel for c in cal.get("dram-read").candidates] == ["torch: src.sum()"]
    assert cal.get("dram-copy").kernel == "torch: dst.copy_(src)" and cal.get("dram-write").kernel.startswith("torch")
    assert cal.dram_roof.kernel.startswith("torch: ")
    assert any(note.startswith("triton not available: torch kernels used") for note in cal.notes)
