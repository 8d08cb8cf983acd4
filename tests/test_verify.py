"""`roofline diagnose --verify` (roofline.diagnose.verify): the rule -> technique mapping, gains from injected
times, outputs that differ flagged, a technique that fails gives a note while the others run, the missing C++
compiler's line, and one end-to-end `--verify` on the unfused GELU chain on the CPU (skipped, with the reason,
where torch.compile cannot compile here). No assertion depends on the host's speed: the timer is injected."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from diagnose_devices import CPU_SLOW_LAUNCH as FAKE_CPU  # noqa: E402

from roofline.diagnose import verify as verify_module  # noqa: E402
from roofline.diagnose.verify import (  # noqa: E402
    COMPILER_MISSING,
    FP32_RTOL,
    LOW_PRECISION_RTOL,
    VerifiedFinding,
    combine_techniques,
    failure_note,
    outputs_close,
    technique_for,
    tolerance,
    verify,
)
from roofline.errors import UserCodeError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "workloads" / "models"


def finding(rule: str, gain: float | None = 4.0) -> SimpleNamespace:
    return SimpleNamespace(rule=rule, gain=gain)


def tiny_model() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return torch.nn.Linear(8, 8), (torch.randn(4, 8),)


class Times:
    """An injected timer: seconds per call by the order of the timed loops (eager first), each step run once."""

    def __init__(self, *per_call: float) -> None:
        self.per_call = list(per_call)
        self.calls = 0

    def __call__(self, step, iters: int, device: str) -> float:
        step()
        value = self.per_call[min(self.calls, len(self.per_call) - 1)]
        self.calls += 1
        return value * iters


def same(model, inputs, kwargs, device):
    return model, inputs, kwargs


def plus_one(model, inputs, kwargs, device):
    return (lambda *a, **k: model(*a, **k) + 1), inputs, kwargs


def raises(model, inputs, kwargs, device):
    raise RuntimeError("boom")


# ------------------------------------------------------------------------------------------- bookkeeping


@pytest.mark.parametrize(
    ("rule", "device", "technique"),
    [
        ("elementwise-chain", "cpu", "compile"),
        ("fused-op", "cuda", "compile"),
        ("fusion-across-reduction", "cpu", "compile"),
        ("under-filled-gpu", "cuda", "compile"),
        ("launch-bound", "cuda", "reduce-overhead"),
        ("launch-bound", "cpu", "compile"),
        ("conv-layout", "cuda", "channels_last"),
        ("fp32-matmul", "cuda:1", "tf32"),
        ("fp32-matmul", "cpu", "bf16-autocast"),
        ("kv-cache-cat", "cuda", "static-kv-cache"),
        ("awkward-shapes", "cuda", "pad"),
        ("sequential-loop", "cuda", "reduce-overhead"),  # the loop's launches replayed at once
        ("sequential-loop", "cpu", "compile"),
        ("naive-attention", "cuda", "compile"),  # Inductor's attention patterns: SDPA
        ("conv-layout-compile", "cuda", "channels_last+compile"),
        ("compile-candidate-nhwc", "cuda", "channels_last+compile"),
    ],
)
def test_rules_with_a_mechanical_technique(rule, device, technique):
    assert technique_for(rule, device) == (technique, "")


@pytest.mark.parametrize("rule", ["all-pairs", "compile-blockers", "not-explained", "near-roof"])
def test_rules_that_need_a_code_change(rule):
    name, why = technique_for(rule, "cuda")
    assert name == "" and why.startswith("not verified: needs a code change (")


def test_gains_from_injected_times():
    model, inputs = tiny_model()
    seen: list[str] = []
    out = verify(
        model,
        inputs,
        {},
        [finding("elementwise-chain", 8.0), finding("all-pairs"), finding("conv-layout", 3.0)],
        device="cpu",
        warmup=1,
        iters=5,
        combined_gain=9.0,
        timer=Times(4e-3, 1e-3, 2e-3, 5e-4),  # eager, compile, channels_last, all
        techniques={"compile": same, "channels_last": same},
        progress=seen.append,
    )
    by_rule = {v.rule: v for v in out}
    chain = by_rule["elementwise-chain"]
    assert chain.technique == "compile" and chain.outputs_match is True
    assert chain.measured_gain == pytest.approx(4.0) and chain.bound_gain == 8.0
    assert chain.eager_s == pytest.approx(4e-3) and chain.fixed_s == pytest.approx(1e-3)
    assert chain.compile_s is not None and chain.compile_s >= 0
    assert by_rule["conv-layout"].measured_gain == pytest.approx(2.0) and by_rule["conv-layout"].compile_s is None
    pairs = by_rule["all-pairs"]
    assert pairs.technique == "" and pairs.measured_gain is None and pairs.outputs_match is None
    assert "needs a code change" in pairs.note
    everything = by_rule["all"]
    assert everything.technique == "channels_last+compile" and everything.bound_gain == 9.0
    assert everything.measured_gain == pytest.approx(8.0)
    assert "verifying: compile" in seen and "verifying: channels_last+compile" in seen
    assert VerifiedFinding.model_validate(chain.model_dump()) == chain


def test_a_technique_shared_by_two_findings_runs_once():
    model, inputs = tiny_model()
    timer = Times(2e-3, 1e-3)
    out = verify(
        model,
        inputs,
        {},
        [finding("elementwise-chain"), finding("fused-op")],
        device="cpu",
        warmup=1,
        iters=2,
        timer=timer,
        techniques={"compile": same},
    )
    assert timer.calls == 2 and [v.measured_gain for v in out] == [pytest.approx(2.0)] * 2
    assert not any(v.rule == "all" for v in out)  # one technique: "all" would be the same run


def test_outputs_that_differ_are_flagged_never_a_gain():
    model, inputs = tiny_model()
    (v,) = verify(
        model,
        inputs,
        {},
        [finding("elementwise-chain")],
        device="cpu",
        warmup=1,
        iters=2,
        timer=Times(4e-3, 1e-3),
        techniques={"compile": plus_one},
    )
    assert v.outputs_match is False and v.measured_gain is None
    assert v.note.startswith("outputs differ from eager")


def test_a_technique_that_raises_gives_a_note_and_the_others_run():
    model, inputs = tiny_model()
    out = verify(
        model,
        inputs,
        {},
        [finding("elementwise-chain"), finding("conv-layout")],
        device="cpu",
        warmup=1,
        iters=2,
        timer=Times(4e-3, 1e-3),
        techniques={"compile": raises, "channels_last": same},
    )
    chain, conv = out
    assert chain.measured_gain is None and chain.outputs_match is None
    assert chain.note == "failed: RuntimeError: boom"
    assert conv.outputs_match is True and conv.measured_gain == pytest.approx(4.0)
    assert len(out) == 2  # "all" needs two techniques that worked


def test_cuda_only_techniques_on_the_cpu_are_a_note():
    model, inputs = tiny_model()
    (v,) = verify(
        model, inputs, {}, [finding("fp32-matmul")], device="cpu", warmup=1, iters=2, timer=Times(1e-3),
        techniques={"bf16-autocast": verify_module.tf32},
    )  # fmt: skip
    assert v.note == "not applicable: TF32 is a CUDA tensor-core format" and v.measured_gain is None


def test_the_missing_compiler_is_one_line():
    class InvalidCxxCompiler(RuntimeError):
        pass

    try:
        try:
            raise InvalidCxxCompiler("No working C++ compiler found in torch._inductor.config.cpp.cxx")
        except InvalidCxxCompiler:
            raise UserCodeError("the model raised BackendCompilerFailed") from None
    except UserCodeError as exc:
        note = failure_note(exc)
    assert note == COMPILER_MISSING.format(detail="none found")
    assert note.startswith("torch.compile needs a C++ compiler (") and "\n" not in note


def test_out_of_memory_is_a_note():
    assert failure_note(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")) == "out of memory: skipped"


def test_tolerances():
    fp32 = torch.ones(3)
    assert tolerance("compile", fp32)[0] == FP32_RTOL
    assert tolerance("tf32", fp32)[0] == LOW_PRECISION_RTOL
    assert tolerance("channels_last+bf16-autocast", fp32)[0] == LOW_PRECISION_RTOL
    assert tolerance("compile", fp32.bfloat16())[0] == LOW_PRECISION_RTOL
    assert outputs_close(fp32, fp32 * (1 + 1e-5), FP32_RTOL, 1e-4)[0]
    assert not outputs_close(fp32, fp32 * 1.01, FP32_RTOL, 1e-4)[0]
    assert not outputs_close((fp32,), (fp32, fp32), FP32_RTOL, 1e-4)[0]


def test_combine_techniques():
    assert combine_techniques(["compile", "reduce-overhead", "tf32"]) == ["reduce-overhead", "tf32"]
    assert combine_techniques(["tf32", "compile", "channels_last"]) == ["channels_last", "compile", "tf32"]


def test_channels_last_is_applied_to_the_model_and_its_4d_inputs():
    torch.manual_seed(0)
    conv, x = torch.nn.Conv2d(3, 4, 3), torch.randn(2, 3, 8, 8)
    fn, (y,), _ = verify_module.channels_last(conv, (x,), {}, "cpu")
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert fn.weight.is_contiguous(memory_format=torch.channels_last)
    (v,) = verify(conv, (x,), {}, [finding("conv-layout")], device="cpu", warmup=1, iters=1, timer=Times(1e-3))
    assert v.outputs_match is True and v.measured_gain == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------- end to end


@functools.cache
def _compile_works() -> str:
    """'' when torch.compile compiles here, else why not (one line); asked once per process."""
    try:
        torch._dynamo.reset()
        torch.compile(lambda x: x * 2 + 1)(torch.ones(4))
    except Exception as exc:  # no C++ compiler, an unsupported Python...
        return failure_note(exc)
    finally:
        torch._dynamo.reset()
    return ""


@pytest.mark.xdist_group("inductor")  # the first inductor compile of a process costs seconds: paid once
def test_verify_end_to_end_on_the_gelu_chain(cli, tmp_path, monkeypatch):
    why = _compile_works()
    if why:
        pytest.skip(why)
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    monkeypatch.setattr(verify_module, "time_loop", Times(2e-3, 1e-3))  # the timing does not depend on the host
    monkeypatch.setenv("ROOFLINE_MODEL_SIZE", "small")
    out = tmp_path / "report.json"
    args = ("--device", "cpu", "--warmup", "1", "--iters", "1", "--verify", "-o", str(out))
    result = cli("diagnose", str(MODELS / "gelu_chain_unfused.py"), *args)
    assert result.code == 0, result.err
    text = " ".join(result.out.split())
    assert "Verified" in text and "elementwise-chain compile" in text
    doc = json.loads(out.read_text())
    verified = doc["verified"]
    chain = next(v for v in verified if v["rule"] == "elementwise-chain")
    assert chain["outputs_match"] is True and chain["measured_gain"] == pytest.approx(2.0)
    assert chain["bound_gain"] and chain["compile_s"] is not None
    # the compiled technique profiled per op (the real profiled pass: its fused kernels attributed to the chain's ops)
    ops = next(f for f in doc["findings"] if f["rule"] == "elementwise-chain")["ops"]
    times = chain["op_times_s"]
    assert times, chain["note"]
    assert {int(i) for i in times} <= set(ops) and all(t > 0 for t in times.values())


def test_outputs_that_cannot_be_compared_give_a_note_and_the_others_run(monkeypatch):
    # a CUDA graph's replay overwriting the outputs raised while comparing: a note, never the whole diagnose failing
    model, inputs = tiny_model()
    real = verify_module.outputs_close
    calls = []

    def flaky(eager, fixed, rtol, atol):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("accessing tensor output of CUDAGraphs that has been overwritten")
        return real(eager, fixed, rtol, atol)

    monkeypatch.setattr(verify_module, "outputs_close", flaky)
    chain, conv = verify(
        model,
        inputs,
        {},
        [finding("elementwise-chain"), finding("conv-layout")],
        device="cpu",
        warmup=1,
        iters=2,
        timer=Times(4e-3, 1e-3, 2e-3),
        techniques={"compile": same, "channels_last": same},
    )
    assert chain.measured_gain is None and "overwritten" in chain.note
    assert conv.outputs_match is True and conv.measured_gain == pytest.approx(2.0)


# ------------------------------------------------------------------------------------------- compiled models, shapes


@pytest.mark.parametrize(
    ("rule", "device", "expected"),
    [
        ("elementwise-chain", "cuda", ""),  # compiling a compiled model is no technique
        ("launch-bound", "cuda", "reduce-overhead"),
        ("conv-layout", "cuda", "channels_last+compile"),
        ("fp32-matmul", "cuda", "tf32+compile"),
        ("awkward-shapes", "cpu", "pad+compile"),
    ],
)
def test_a_compiled_model_gets_its_techniques_compiled_again(rule, device, expected):
    name, why = technique_for(rule, device, compiled=True)
    assert name == expected
    if not expected:
        assert why == "not verified: the model is compiled already (its fused kernels are what was measured)"


def test_all_is_measured_only_for_two_distinct_techniques():
    assert combine_techniques(["channels_last", "compile", "tf32", "compile"]) == ["channels_last", "compile", "tf32"]
    assert combine_techniques(["compile", "reduce-overhead", "pad"]) == ["pad", "reduce-overhead"]


class Odd(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(40, 70)
        self.keep = torch.nn.Linear(70, 70)

    def forward(self, x):
        return self.keep(self.head(x))


def test_padding_keeps_the_outputs_and_pads_only_the_named_layers():
    torch.manual_seed(0)
    model, x = Odd(), torch.randn(3, 5, 40)
    fixed_model = verify_module.pad_linear(copy.deepcopy(model), (x,), {}, "cpu", targets=frozenset({"head"}))[0]
    assert type(fixed_model.head).__name__ == "PaddedLinear" and isinstance(fixed_model.keep, torch.nn.Linear)
    assert tuple(fixed_model.head.weight.shape) == (128, 64)  # N 70 -> 128, K 40 -> 64 (ALIGN 64)
    assert torch.allclose(fixed_model(x), model(x), atol=1e-6)


def test_padding_without_a_linear_layer_is_not_applicable():
    model, inputs = tiny_model()
    with pytest.raises(verify_module.NotApplicable, match=r"not nn\.Linear layers"):
        verify_module.pad_linear(model, inputs, {}, "cpu", targets=frozenset({"nothing"}))


def test_the_pad_technique_gets_the_finding_modules(monkeypatch):
    model = Odd()
    x = torch.randn(2, 40)
    finding_ = SimpleNamespace(rule="awkward-shapes", gain=3.0, ops=[1])
    points = [SimpleNamespace(index=0, module="keep"), SimpleNamespace(index=1, module="head")]
    seen = []

    def spy(model, inputs, kwargs, device, targets=frozenset()):
        seen.append(targets)
        return model, inputs, kwargs

    (result,) = verify(
        model,
        (x,),
        {},
        [finding_],
        device="cpu",
        warmup=1,
        iters=1,
        timer=Times(2e-3, 1e-3),
        techniques={"pad": spy},
        points=points,
    )
    assert seen == [frozenset({"head"})] and result.measured_gain == pytest.approx(2.0)


class Cached(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.static_kv_cache = False
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) if self.static_kv_cache else self.lin(x) + 0.0


def test_static_kv_cache_is_switched_on_where_the_model_exposes_one():
    fixed, _, _ = verify_module.static_kv_cache(Cached(), (), {}, "cpu")
    assert fixed.static_kv_cache is True
    with pytest.raises(verify_module.NotApplicable, match="exposes no static KV cache"):
        verify_module.static_kv_cache(torch.nn.Linear(2, 2), (), {}, "cpu")


def test_results_reach_the_sink_before_an_interrupt():
    model, inputs = tiny_model()
    sink: list[VerifiedFinding] = []

    def interrupt(model, inputs, kwargs, device):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        verify(
            model,
            inputs,
            {},
            [finding("all-pairs"), finding("conv-layout"), finding("elementwise-chain")],
            device="cpu",
            warmup=1,
            iters=1,
            timer=Times(2e-3, 1e-3),
            techniques={"channels_last": same, "compile": interrupt},
            sink=sink,
        )
    assert [v.rule for v in sink] == ["all-pairs", "conv-layout"]
    assert sink[1].measured_gain == pytest.approx(2.0)


def test_a_compiled_model_is_its_own_baseline_and_techniques_start_from_its_original(monkeypatch):
    model, inputs = tiny_model()
    compiled = torch.compile(model, backend="eager")
    seen = []

    def spy(fn, args, kwargs, device):
        seen.append(type(fn).__name__)
        return fn, args, kwargs

    results = verify(
        compiled,
        inputs,
        {},
        [finding("elementwise-chain"), finding("conv-layout")],
        device="cpu",
        warmup=1,
        iters=1,
        timer=Times(2e-3, 1e-3),
        techniques={"channels_last": spy, "compile": spy},
        compiled=True,
    )
    assert results[0].technique == "" and "compiled already" in results[0].note
    assert results[1].technique == "channels_last+compile" and seen == ["Linear", "Linear"]


# ------------------------------------------------------------------------------------------- bad input, end to end


def _modelled_timing(model, inputs, kwargs, records, *, device, mode, warmup, iters, **kw):
    from roofline.report.records import OpTiming, Timing

    ops = [OpTiming(index=r.index, device_time_s=1e-4 if r.math != "none" else 1e-6, kernels=0) for r in records]
    return Timing(device="cpu", iterations=iters, wall_s=sum(t.device_time_s for t in ops) * 1.1, ops=ops)


def test_ctrl_c_while_verifying_writes_the_report_so_far_and_exits_130(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    monkeypatch.setattr("roofline.diagnose.profile.time_model", _modelled_timing)

    def interrupted(model, inputs, kwargs, findings, *, sink, **kw):
        sink.append(VerifiedFinding(rule=findings[0].rule, technique="compile", bound_gain=3.0, note="measured"))
        raise KeyboardInterrupt

    monkeypatch.setattr("roofline.diagnose.verify.verify", interrupted)
    monkeypatch.setenv("ROOFLINE_MODEL_SIZE", "small")
    out = tmp_path / "report.json"
    args = ("--device", "cpu", "--warmup", "0", "--iters", "1", "--verify", "-o", str(out))
    result = cli("diagnose", str(MODELS / "gelu_chain_unfused.py"), *args)
    assert result.code == 130, result.err
    assert "Interrupted while verifying: 1 finding(s) verified before it; the report keeps them" in result.err
    doc = json.loads(out.read_text())
    assert doc["interrupted"] is True and [v["note"] for v in doc["verified"]] == ["measured"]


def test_a_model_that_fails_to_compile_is_diagnosed_eagerly_with_the_error_in_one_line(cli, tmp_path, monkeypatch):
    monkeypatch.setattr("roofline.roofs.cpu_roofs", lambda torch_: (FAKE_CPU, ["test roofs"]))
    failed = type("BackendCompilerFailed", (Exception,), {"__module__": "torch._dynamo.exc"})
    calls = []

    def timing(model, inputs, kwargs, records, **kw):
        calls.append(kw.get("compiled", False))
        if kw.get("compiled"):
            raise UserCodeError("the model raised") from failed("backend='inductor' raised:\nCppCompileError")
        return _modelled_timing(model, inputs, kwargs, records, **kw)

    monkeypatch.setattr("roofline.diagnose.profile.time_model", timing)
    model = tmp_path / "compiled.py"
    model.write_text(
        "import torch\nmodel = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU()))\n"
        "example_inputs = (torch.randn(4, 8),)\n"
    )
    out = tmp_path / "report.json"
    result = cli("diagnose", str(model), "--device", "cpu", "--warmup", "0", "--iters", "1", "-o", str(out))
    assert result.code == 0, result.err
    assert calls == [True, False]
    line = "torch.compile failed (BackendCompilerFailed: backend='inductor' raised:): the model was diagnosed eagerly"
    assert line in " ".join(result.out.split())
    doc = json.loads(out.read_text())
    assert doc["diagnose"]["compiled"] is False and doc["diagnose"]["compile_failure"] == line


def test_low_precision_outputs_match_by_relative_rms_when_a_few_elements_differ():
    torch.manual_seed(0)
    eager = torch.randn(1000) * 10
    eager[:3] = 0.001
    fixed = eager.clone()
    fixed[:3] = 0.06  # three small elements beyond rtol 2e-2 + atol 1e-2; the whole output agrees
    rtol, atol = verify_module.LOW_PRECISION_RTOL, verify_module.LOW_PRECISION_ATOL
    match, note = outputs_close(eager, fixed, rtol, atol)
    error = float((eager - fixed).norm() / eager.norm())
    assert (match, error <= verify_module.LOW_PRECISION_RMS) == (True, True)
    assert note.startswith("outputs match within relative RMS error")
    match32, note32 = outputs_close(eager, fixed, FP32_RTOL, verify_module.FP32_ATOL)  # fp32: element-wise only
    assert match32 is False and "relative RMS error" in note32
    far = eager * 1.05  # 5% off everywhere: no match at either tolerance
    assert outputs_close(eager, far, rtol, atol)[0] is False


# ------------------------------------------------------------------------------------------- per-op times


def op_records(n: int = 4, *, backward: int = 0) -> list:
    from diagnose_devices import rec

    out = [rec(i, "aten::mul", [(8,), (8,)], [(8,)], 8, 96, dtype="fp32", math="vector") for i in range(n)]
    out += [
        rec(n + i, "aten::mul", [(8,), (8,)], [(8,)], 8, 96, dtype="fp32", math="vector", phase="backward")
        for i in range(backward)
    ]
    return out


class OpTimes:
    """An injected per-op timer: a Timing whose op times are given per call (by the order of the passes)."""

    def __init__(self, *per_pass: dict[int, float], error: BaseException | None = None) -> None:
        self.per_pass = list(per_pass)
        self.error = error
        self.calls: list[dict] = []

    def __call__(self, fn, inputs, kwargs, records, **kw):
        from roofline.report.records import OpTiming, Timing

        self.calls.append({"fn": fn, "inputs": inputs, "records": list(records), **kw})
        if self.error is not None:
            raise self.error
        fn(*inputs, **kwargs)  # the fixed callable
        times = self.per_pass[min(len(self.calls), len(self.per_pass)) - 1]
        ops = [OpTiming(index=i, device_time_s=t, kernels=0) for i, t in times.items()]
        return Timing(device="cpu", iterations=kw["iters"], wall_s=sum(times.values()), ops=ops)


def op_finding(rule: str, ops: list[int], gain: float = 4.0) -> SimpleNamespace:
    return SimpleNamespace(rule=rule, gain=gain, ops=ops)


def test_each_matched_technique_is_profiled_per_op_once():
    model, inputs = tiny_model()
    records = op_records(4, backward=2)
    timer = OpTimes({0: 1e-5, 1: 2e-5, 2: 3e-5, 3: 4e-5}, {0: 5e-6, 2: 7e-6})
    seen: list[str] = []
    weigh = lambda record: 1.0  # noqa: E731
    out = verify(
        model,
        inputs,
        {},
        [op_finding("elementwise-chain", [0, 1]), op_finding("fused-op", [1, 3]), op_finding("conv-layout", [2, 3])],
        device="cpu",
        warmup=1,
        iters=3,
        timer=Times(4e-3, 1e-3, 2e-3, 5e-4),  # eager, compile, channels_last, all
        techniques={"compile": same, "channels_last": same},
        progress=seen.append,
        records=records,
        op_timer=timer,
        weigh=weigh,
    )
    chain, fused, conv, everything = out
    assert chain.op_times_s == {0: 1e-5, 1: 2e-5} and fused.op_times_s == {1: 2e-5, 3: 4e-5}  # one pass, shared
    assert conv.op_times_s == {2: 7e-6}  # op 3 not timed in its verified run: not stored
    assert everything.rule == "all" and everything.op_times_s is None  # "all" is not profiled per op
    assert chain.measured_gain == pytest.approx(4.0) and conv.measured_gain == pytest.approx(2.0)
    assert len(timer.calls) == 2  # one pass per technique, "all" none
    compile_call, layout_call = timer.calls
    assert compile_call["compiled"] is True and compile_call["weigh"] is weigh  # fused kernels attributed
    assert "compiled" not in layout_call and "weigh" not in layout_call
    assert compile_call["iters"] == 3 and compile_call["warmup"] == 0 and compile_call["mode"] == "inference"
    assert [r.index for r in compile_call["records"]] == [0, 1, 2, 3]  # verify runs the forward only
    assert compile_call["device"] == "cpu"
    assert seen.index("verifying: compile") < seen.index("verifying: compile (profiling per op)")
    assert "verifying: channels_last (profiling per op)" in seen
    assert not any("channels_last+compile (profiling" in s for s in seen)
    round_trip = VerifiedFinding.model_validate_json(chain.model_dump_json())
    assert round_trip == chain  # JSON keys are strings; they read back as op indices


def test_the_per_op_pass_times_the_fixed_callable():
    model, inputs = tiny_model()
    fixed = []

    def technique(model, inputs, kwargs, device):
        def call(*args, **kw):
            return model(*args, **kw)

        fixed.append(call)
        return call, inputs, kwargs

    timer = OpTimes({0: 1e-5})
    (v,) = verify(
        model, inputs, {}, [op_finding("elementwise-chain", [0])], device="cpu", warmup=1, iters=1,
        timer=Times(2e-3, 1e-3), techniques={"compile": technique}, records=op_records(1), op_timer=timer,
    )  # fmt: skip
    assert v.op_times_s == {0: 1e-5}
    assert [c["fn"] for c in timer.calls] == fixed and timer.calls[0]["inputs"] is inputs


def test_outputs_that_differ_are_not_profiled_per_op():
    model, inputs = tiny_model()
    timer = OpTimes({0: 1e-5})
    (v,) = verify(
        model, inputs, {}, [op_finding("elementwise-chain", [0])], device="cpu", warmup=1, iters=1,
        timer=Times(2e-3, 1e-3), techniques={"compile": plus_one}, records=op_records(1), op_timer=timer,
    )  # fmt: skip
    assert v.outputs_match is False and v.op_times_s is None and timer.calls == []


def test_without_records_nothing_is_profiled_per_op():
    model, inputs = tiny_model()
    timer = OpTimes({0: 1e-5})
    (v,) = verify(
        model, inputs, {}, [op_finding("elementwise-chain", [0])], device="cpu", warmup=1, iters=1,
        timer=Times(2e-3, 1e-3), techniques={"compile": same}, op_timer=timer,
    )  # fmt: skip
    assert v.measured_gain == pytest.approx(2.0) and v.op_times_s is None and timer.calls == []


def test_a_failing_per_op_pass_keeps_the_whole_model_result_with_a_note():
    model, inputs = tiny_model()
    timer = OpTimes(error=RuntimeError("profiler broke"))
    chain, conv = verify(
        model,
        inputs,
        {},
        [op_finding("elementwise-chain", [0]), op_finding("fused-op", [1])],
        device="cpu",
        warmup=1,
        iters=2,
        timer=Times(4e-3, 1e-3),
        techniques={"compile": same},
        records=op_records(2),
        op_timer=timer,
    )
    for v in (chain, conv):
        assert v.outputs_match is True and v.measured_gain == pytest.approx(4.0) and v.op_times_s is None
        assert v.note == (
            "per-op times not measured (failed: RuntimeError: profiler broke): the chart estimates these ops"
        )
    assert len(timer.calls) == 1  # the failed pass is not retried for the second finding


def test_ctrl_c_in_the_per_op_pass_keeps_the_whole_model_result():
    model, inputs = tiny_model()
    sink: list[VerifiedFinding] = []
    with pytest.raises(KeyboardInterrupt):
        verify(
            model, inputs, {}, [op_finding("elementwise-chain", [0])], device="cpu", warmup=1, iters=1,
            timer=Times(2e-3, 1e-3), techniques={"compile": same}, records=op_records(1),
            op_timer=OpTimes(error=KeyboardInterrupt()), sink=sink,
        )  # fmt: skip
    (v,) = sink
    assert v.measured_gain == pytest.approx(2.0) and v.op_times_s is None


def test_the_pipeline_passes_the_records_and_its_timing_stage_to_verify(tmp_path, monkeypatch):
    from diagnose_doubles import FakeTimer, FixedDevice

    from roofline.diagnose.pipeline import Boundaries, DiagnoseOptions, run

    records = op_records(3)
    seen: dict = {}

    def load(torch_device):
        return SimpleNamespace(model="m", inputs=(), kwargs={}, path=None, convention="model", compiled=False)

    def time_stage(model, inputs, kwargs, records, **kw):
        from roofline.report.records import OpTiming, Timing

        ops = [OpTiming(index=r.index, device_time_s=1e-4, kernels=0) for r in records]
        return Timing(device="cpu", iterations=1, wall_s=3e-4, ops=ops)

    def spy(model, inputs, kwargs, findings, **kw):
        seen.update(kw)
        return []

    monkeypatch.setattr("roofline.diagnose.verify.verify", spy)
    timer = FakeTimer(time_stage, count=lambda model, inputs, kwargs, mode: list(records))
    machine = Boundaries(device=FixedDevice(FAKE_CPU), timer=timer)
    run(load, tmp_path / "m.py", DiagnoseOptions(device="cpu", warmup=0, iters=1, verify=True), boundaries=machine)
    assert seen["records"] == records and seen["op_timer"] is time_stage
    assert callable(seen["weigh"]) and seen["weigh"](records[0]) > 0  # the ops' roofline time on this device


def test_verify_all_sweeps_every_technique_and_names_what_was_missed():
    model, inputs = tiny_model()
    # eager 4 ms; the chain's compile 1 ms; the sweep: channels_last 3.9 ms (no gain), channels_last+compile 1 ms,
    # bf16-autocast 2 ms (missed: no finding named it)
    out = verify(
        model, inputs, {}, [finding("elementwise-chain", 8.0)], device="cpu", warmup=1, iters=5,
        timer=Times(4e-3, 1e-3, 3.9e-3, 1e-3, 2e-3),
        techniques={"compile": same, "channels_last": same, "bf16-autocast": same}, sweep=True,
    )  # fmt: skip
    assert [v.rule for v in out] == ["elementwise-chain", "sweep", "sweep", "sweep"]
    by = {v.technique: v for v in out if v.rule == "sweep"}
    assert list(by) == ["channels_last", "channels_last+compile", "bf16-autocast"]  # compile measured already
    assert by["channels_last"].measured_gain == pytest.approx(4 / 3.9) and "missed" not in by["channels_last"].note
    assert "missed by the diagnosis: 4x" in by["channels_last+compile"].note
    assert "missed by the diagnosis: 2x" in by["bf16-autocast"].note
    from roofline.diagnose.verify import sweep_techniques

    assert sweep_techniques("cpu", False) == ["compile", "channels_last", "channels_last+compile", "bf16-autocast"]
    assert "reduce-overhead" in sweep_techniques("cuda", False) and "tf32" in sweep_techniques("cuda", False)
    assert sweep_techniques("cuda", True) == [
        "reduce-overhead", "channels_last+compile", "tf32+compile", "bf16-autocast+compile"
    ]  # fmt: skip
