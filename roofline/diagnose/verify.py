"""`roofline diagnose --verify`: apply the technique a finding names to a fresh copy of the model and measure it.

Each technique is a small named function ``(model, inputs, kwargs, device) -> (callable, inputs, kwargs)``: it gets
a fresh copy of the loaded model (``copy.deepcopy``) and returns what to call, with what, the technique applied.
Each finding rule's mechanical technique (or the code change it needs) is declared with the rule, in the
registry (:mod:`roofline.findings.registry`: ``Rule.verify``, ``Rule.code_change``).
:func:`verify` times the eager model and each technique the same way (warm-up first, compilation included and
reported as compile seconds; then ``iters`` calls timed by the injectable ``timer``, by default the diagnose
timing pass's plain wall-time loop: CUDA events on a GPU, the host clock on the CPU), checks the outputs against
the eager ones within the dtype's tolerance and returns one :class:`VerifiedFinding` per finding, plus "all" (every
applicable technique together). A technique that fails (no C++ compiler for torch.compile on the CPU, out of
memory) gives a note; the others still run. Outputs that differ are flagged and never reported as a gain.

Per op: given the counted ``records``, each technique whose outputs matched gets one profiled pass of ``iters``
iterations on the fixed callable, the diagnosis's own (``op_timer``, by default
:func:`roofline.diagnose.profile.time_model`; ``compiled=True`` for the techniques that compile, so that inductor's
fused kernels and the extern kernels are attributed to the counted ops as the diagnosis attributes them), and each
finding stores the verified run's time of its ops (``op_times_s``). A profiled pass that fails leaves the
whole-model result with a note. "all" is not profiled per op (it covers no op of its own).
torch is imported inside the functions that use it.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

import roofline.findings.rules  # noqa: F401  (registers every rule)
from roofline.diagnose import profile
from roofline.diagnose.execute import run_once
from roofline.diagnose.profile import synchronize, time_loop
from roofline.errors import UserCodeError, exception_chain, is_out_of_memory
from roofline.findings import registry
from roofline.report.verified import is_slower

# timer(step, iters, device) -> seconds the `iters` calls of step took together
Timer = Callable[[Callable[[], object], int, str], float]
Progress = Callable[[str], None]
Applied = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]
Technique = Callable[[Any, tuple[Any, ...], dict[str, Any], str], Applied]
# op_timer(fn, inputs, kwargs, records, *, device, mode, warmup, iters[, compiled, weigh]) -> Timing: the
# diagnosis's profiled timing pass (roofline.diagnose.profile.time_model), per counted op
OpTimer = Callable[..., Any]

# Output tolerances (torch.allclose) against the eager outputs. fp32 techniques that keep fp32 arithmetic
# (torch.compile, channels_last) reorder float sums only; TF32 (10-bit mantissa) and bf16 (8-bit) round the
# matmul inputs, and a model already in bf16/fp16 rounds every op: those get the looser pair.
FP32_RTOL = 1e-3
FP32_ATOL = 1e-4
LOW_PRECISION_RTOL = 2e-2
LOW_PRECISION_ATOL = 1e-2
LOW_PRECISION_TECHNIQUES = frozenset({"tf32", "bf16-autocast"})
# ... and, for those, outputs whose element-wise comparison fails still match when their relative RMS error
# ||fixed - eager|| / ||eager|| is at most this (a bf16 GPT-2's logits after torch.compile: 0.044 max abs difference)
LOW_PRECISION_RMS = 1e-2

COMPILER_MISSING = "torch.compile needs a C++ compiler ({detail}): install one (gcc/g++) or set CXX"


class VerifiedFinding(BaseModel):
    """One finding's technique applied and measured: the roofline's bound beside the measured gain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: str  # the finding's rule, or "all" (every applicable technique together)
    technique: str = ""  # '' when the technique is not mechanical (see note)
    bound_gain: float | None = None  # the finding's bound on the gain (time now / best time)
    measured_gain: float | None = None  # eager time / time with the technique; None unless measured and matching
    outputs_match: bool | None = None  # None: not run
    compile_s: float | None = None  # the warm-up's seconds (compilation included) for compiling techniques
    eager_s: float | None = None  # seconds per call, eager
    fixed_s: float | None = None  # seconds per call, with the technique
    note: str = ""
    # the verified run's time of the finding's ops, by op index (the report row's OpPoint index): seconds per
    # iteration, as the diagnosis times an op (GPU: its kernels; CPU: its self time); only the ops the profiled pass
    # timed. None: not profiled (no records given, outputs differ, the pass failed, "all", older reports)
    op_times_s: dict[int, float] | None = None
    # the gain on the bound's own scope: the finding's ops' eager time / their time with the technique (the
    # per-op times; every op of the finding timed in both); None: not measured per op
    scope_gain: float | None = None

    @property
    def gain(self) -> float | None:
        """The measured gain the bound is compared with: on the finding's ops where measured per op (the bound's
        scope), else the whole model's."""
        return self.scope_gain if self.scope_gain is not None else self.measured_gain

    @property
    def slower(self) -> bool:
        """Measured and slower than eager: not to be done (roofline.report.verified.is_slower, the one rule)."""
        return is_slower(self.measured_gain, self.scope_gain, self.outputs_match)


# ------------------------------------------------------------------------------------------------ techniques


def _to_channels_last(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.contiguous(memory_format=torch.channels_last) if value.dim() == 4 else value
    if isinstance(value, dict):
        return {key: _to_channels_last(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(_to_channels_last(item) for item in value)
    return value


def _reset_dynamo() -> None:
    import torch

    reset = getattr(getattr(torch, "_dynamo", None), "reset", None)
    if reset is not None:
        reset()  # each technique compiles a fresh copy: no recompilation limit carried over


def compile_model(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Applied:
    """torch.compile (default mode): fuses element-wise chains and reductions into generated kernels."""
    import torch

    _reset_dynamo()
    return torch.compile(model), inputs, kwargs


def reduce_overhead(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Applied:
    """torch.compile(mode="reduce-overhead"): compiled and replayed as CUDA graphs (one launch). CUDA only."""
    import torch

    if not device.startswith("cuda"):
        raise NotApplicable("reduce-overhead (CUDA graphs) runs on CUDA only")
    _reset_dynamo()
    compiled = torch.compile(model, mode="reduce-overhead")
    mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)

    def call(*args: Any, **kw: Any) -> Any:
        if mark is not None:  # NB: each call a new step: a replay may reuse the previous outputs' memory
            mark()
        return compiled(*args, **kw)

    return call, inputs, kwargs


def channels_last(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Applied:
    """The model's parameters and the 4-D inputs in channels_last (NHWC) memory format."""
    import torch

    to = getattr(model, "to", None)
    if to is not None:
        model = to(memory_format=torch.channels_last)
    return model, _to_channels_last(inputs), _to_channels_last(kwargs)


def tf32(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Applied:
    """TF32 tensor cores for fp32 matmuls and convolutions: the two flags set only around each call, restored."""
    import torch

    if not device.startswith("cuda"):
        raise NotApplicable("TF32 is a CUDA tensor-core format")

    def call(*args: Any, **kw: Any) -> Any:
        matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        try:
            return model(*args, **kw)
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn

    return call, inputs, kwargs


def bf16_autocast(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Applied:
    """torch.autocast(bfloat16) around each call: matmuls and convolutions in bf16, the rest as autocast decides."""
    import torch

    device_type = "cuda" if device.startswith("cuda") else "cpu"

    def call(*args: Any, **kw: Any) -> Any:
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
            return model(*args, **kw)

    return call, inputs, kwargs


class NotApplicable(Exception):
    """The technique does not apply on this device or model (its note says why)."""


def static_kv_cache(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Applied:
    """The model's own static (preallocated) KV cache, where it exposes one: a boolean attribute
    ``static_kv_cache`` on the model or a submodule, set True on the copy."""
    modules = list(model.modules()) if hasattr(model, "modules") else [model]
    switches = [m for m in modules if isinstance(getattr(m, "static_kv_cache", None), bool)]
    if not switches:
        raise NotApplicable(
            "the model exposes no static KV cache (a boolean attribute static_kv_cache): preallocate the cache in "
            "the code"
        )
    for module in switches:
        module.static_kv_cache = True
    return model, inputs, kwargs


def _round_up(value: int, align: int) -> int:
    return -(-value // align) * align


def pad_linear(
    model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], device: str, targets: frozenset[str] = frozenset()
) -> Applied:
    """The nn.Linear layers the finding names (``targets``: module paths) with M (rows), N (out features) and K
    (in features) padded with zeros to multiples of ALIGN, the output cut back: the same values, whole tiles (the
    padding's copies are paid for in the measured time)."""
    import torch
    from torch import nn

    from roofline.findings.shapes import ALIGN

    class PaddedLinear(nn.Module):
        def __init__(self, linear: nn.Linear) -> None:
            super().__init__()
            n, k = linear.out_features, linear.in_features
            self.n, self.k = n, k
            weight = linear.weight.detach()
            self.weight = nn.Parameter(weight.new_zeros(_round_up(n, ALIGN), _round_up(k, ALIGN)))
            with torch.no_grad():
                self.weight[:n, :k].copy_(weight)
            self.bias = None
            if linear.bias is not None:
                self.bias = nn.Parameter(linear.bias.detach().new_zeros(_round_up(n, ALIGN)))
                with torch.no_grad():
                    self.bias[:n].copy_(linear.bias.detach())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            lead = x.shape[:-1]
            rows = x.reshape(-1, self.k)
            m = rows.shape[0]
            padded = torch.nn.functional.pad(rows, (0, self.weight.shape[1] - self.k, 0, _round_up(m, ALIGN) - m))
            out = torch.nn.functional.linear(padded, self.weight, self.bias)
            return out[:m, : self.n].reshape(*lead, self.n)

    names = targets
    replaced = 0
    for name, module in list(model.named_modules()) if hasattr(model, "named_modules") else []:
        if name not in names or not isinstance(module, nn.Linear):
            continue
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        setattr(parent, name.rsplit(".", 1)[-1], PaddedLinear(module))
        replaced += 1
    if not replaced:
        raise NotApplicable("the matmuls the finding names are not nn.Linear layers: pad them in the code")
    return model, inputs, kwargs


#: techniques that act on the modules of the finding's ops (called with targets=: their module paths)
TARGETED = frozenset({"pad"})

TECHNIQUES: dict[str, Technique] = {
    "channels_last": channels_last,  # NB: the order "all" applies them in: layout, shapes, compile, precision
    "static-kv-cache": static_kv_cache,
    "pad": pad_linear,
    "compile": compile_model,
    "reduce-overhead": reduce_overhead,
    "tf32": tf32,
    "bf16-autocast": bf16_autocast,
}

#: rule -> why --verify leaves it (the code change it needs), from the registry (roofline.findings.registry)
NOT_MECHANICAL: dict[str, str] = {
    r.id: r.code_change for r in registry.rules(registry.DIAGNOSE_STAGES) if r.code_change
}


def technique_for(rule: str, device: str, *, compiled: bool = False) -> tuple[str, str]:
    """(technique name, '') for a rule with a mechanical technique on ``device`` (the registry's ``verify``); ('',
    why not) otherwise. For a ``compiled`` model every technique but CUDA graphs is applied before compiling it
    again ('...+compile'), and compiling is no technique."""
    declared = registry.find(rule)
    name = "" if declared is None or declared.verify is None else declared.verify.on(device)
    if not name:
        return "", f"not verified: needs a code change ({NOT_MECHANICAL.get(rule, 'no mechanical technique')})"
    if compiled:
        if name == "compile":
            return "", "not verified: the model is compiled already (its fused kernels are what was measured)"
        if name != "reduce-overhead" and "compile" not in name.split("+"):
            name += "+compile"
    return name, ""


# ------------------------------------------------------------------------------------------------ measuring


def _leaves(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _leaves(item)]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _leaves(item)]
    for name in ("logits", "last_hidden_state", "loss"):  # output objects of common libraries
        if hasattr(value, name):
            return _leaves(getattr(value, name))
    return []


def outputs_close(eager: Any, fixed: Any, rtol: float, atol: float) -> tuple[bool, str]:
    """Whether every tensor of ``fixed`` matches ``eager`` (same shapes, allclose in fp32), and a note if not."""
    import torch

    a, b = _leaves(eager), _leaves(fixed)
    notes: list[str] = []
    if len(a) != len(b):
        return False, f"outputs differ from eager: {len(b)} tensors, eager returned {len(a)}"
    for x, y in zip(a, b, strict=True):
        if tuple(x.shape) != tuple(y.shape):
            return False, f"outputs differ from eager: shape {tuple(y.shape)} vs {tuple(x.shape)}"
        if not (x.is_floating_point() or x.is_complex()):
            if not torch.equal(x.cpu(), y.cpu()):
                return False, "outputs differ from eager (integer outputs not equal)"
            continue
        x32, y32 = x.detach().float().cpu(), y.detach().float().cpu()
        if not torch.allclose(x32, y32, rtol=rtol, atol=atol, equal_nan=True):
            worst = float((x32 - y32).abs().nan_to_num(float("inf")).max()) if x32.numel() else 0.0
            error = _relative_rms(x32, y32)
            if rtol >= LOW_PRECISION_RTOL and error <= LOW_PRECISION_RMS:
                # NB: a low-precision model through many layers: element-wise bounds fail on a few large values
                # while the outputs as a whole agree (a compiled graph keeps fp32 where eager rounds to bf16)
                notes.append(
                    f"outputs match within relative RMS error {error:.2g} (<= {LOW_PRECISION_RMS:g}; element-wise "
                    f"max abs difference {worst:.3g})"
                )
                continue
            return False, (
                f"outputs differ from eager (max abs difference {worst:.3g}, relative RMS error {error:.2g}; rtol "
                f"{rtol:g}, atol {atol:g})"
            )
    return True, "; ".join(dict.fromkeys(notes))


def _relative_rms(x: Any, y: Any) -> float:
    """||x - y|| / ||x|| over the finite elements (0 when both are zero; inf when only x is)."""
    import torch

    finite = torch.isfinite(x) & torch.isfinite(y)
    if not bool(torch.equal(torch.isfinite(x), torch.isfinite(y))):
        return float("inf")
    diff, ref = (x - y)[finite].double(), x[finite].double()
    norm = float(ref.norm())
    if norm == 0.0:
        return 0.0 if float(diff.norm()) == 0.0 else float("inf")
    return float(diff.norm()) / norm


def tolerance(technique: str, eager: Any) -> tuple[float, float]:
    """(rtol, atol) for comparing a technique's outputs with the eager ones."""
    low = any(t in LOW_PRECISION_TECHNIQUES for t in technique.split("+"))
    if not low:
        import torch

        low = any(t.dtype in (torch.bfloat16, torch.float16) for t in _leaves(eager))
    return (LOW_PRECISION_RTOL, LOW_PRECISION_ATOL) if low else (FP32_RTOL, FP32_ATOL)


def failure_note(exc: BaseException) -> str:
    """One line for a technique that failed: the missing C++ compiler, out of memory, or the error itself."""
    cause: BaseException = exc
    if isinstance(exc, UserCodeError) and exc.__context__ is not None:
        cause = exc.__context__  # run_once wraps the model's exception: the cause says what failed
    chain = exception_chain(cause)
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain)
    if "InvalidCxxCompiler" in text or "C++ compiler" in text or "CppCompileError" in text:
        detail = "none found" if ("InvalidCxxCompiler" in text or "No working C++" in text) else "compiling failed"
        return COMPILER_MISSING.format(detail=detail)
    if any(is_out_of_memory(e) for e in chain):
        return "out of memory: skipped"
    if isinstance(cause, NotApplicable):
        return f"not applicable: {cause}"
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
    return f"failed: {type(cause).__name__}" + (f": {first[:200]}" if first else "")


def _free(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _kept(value: Any) -> Any:
    """``value`` with every tensor in it cloned (detached): what a later call cannot overwrite."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return (
            type(value)(_kept(v) for v in value)
            if not hasattr(value, "_fields")
            else type(value)(*(_kept(v) for v in value))
        )
    if isinstance(value, dict):
        return {k: _kept(v) for k, v in value.items()}
    return value


def measure(
    fn: Callable[..., Any],
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    device: str,
    warmup: int,
    iters: int,
    timer: Timer,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[Any, float, float]:
    """(the first call's outputs, the warm-up's seconds (compilation included), seconds per timed call)."""

    def step() -> Any:
        return run_once(fn, inputs, kwargs, "inference")

    start = clock()
    out = _kept(step())  # NB: a copy: a CUDA graph's replays overwrite the outputs of the calls before them
    for _ in range(max(warmup, 1) - 1):
        step()
    synchronize(device)
    warm_s = clock() - start
    return out, warm_s, timer(step, iters, device) / iters


@dataclass
class _Run:
    """One technique applied and measured: its first outputs compared with eager's, its whole-model time."""

    warm_s: float
    fixed_s: float
    match: bool
    note: str


def _measured(rule: str, technique: str, bound: float | None, eager_s: float, result: _Run | str) -> VerifiedFinding:
    if isinstance(result, str):
        return VerifiedFinding(rule=rule, technique=technique, bound_gain=bound, eager_s=eager_s, note=result)
    match, note, fixed_s = result.match, result.note, result.fixed_s
    gain = eager_s / fixed_s if match and fixed_s > 0 else None
    if match and fixed_s <= 0:
        note = "the timer measured no time"
    return VerifiedFinding(
        rule=rule,
        technique=technique,
        bound_gain=bound,
        measured_gain=gain,
        outputs_match=match,
        compile_s=result.warm_s if _compiles(technique) else None,
        eager_s=eager_s,
        fixed_s=fixed_s,
        note=note,
    )


def _compiles(technique: str) -> bool:
    return any(t in ("compile", "reduce-overhead") for t in technique.split("+"))


def _kernel_profile(technique: str, device: str, per_op: bool) -> contextlib.AbstractContextManager[object]:
    """While a compiling technique is applied and measured on the CPU with a per-op pass to come: inductor's
    generated kernels profiled by name (as the diagnosis compiles a compiled model), so that the profiled pass can
    attribute their time; otherwise nothing."""
    if per_op and _compiles(technique) and not device.startswith("cuda"):
        return profile.cpu_kernel_profile()
    return contextlib.nullcontext()


def _op_times(
    applied: Applied,
    records: Sequence[Any],
    technique: str,
    *,
    device: str,
    iters: int,
    op_timer: OpTimer,
    weigh: Callable[[Any], float] | None,
) -> tuple[dict[int, float] | None, str]:
    """({op index: seconds per iteration} of every op the profiled pass timed, '') or (None, why not). One pass of
    ``iters`` profiled iterations, no warm-up (the callable is warm: measured already)."""
    fn, args, kw = applied
    extra: dict[str, Any] = {"compiled": True, "weigh": weigh} if _compiles(technique) else {}
    try:
        timing = op_timer(fn, args, kw, records, device=device, mode="inference", warmup=0, iters=iters, **extra)
    except Exception as exc:  # NB: KeyboardInterrupt (Ctrl-C, --timeout) goes on up
        return None, f"per-op times not measured ({failure_note(exc)}): the chart estimates these ops"
    return {int(t.index): float(t.device_time_s) for t in timing.ops}, ""


def _with_op_times(
    verified: VerifiedFinding,
    finding: Any,
    times: dict[int, float] | None,
    why: str,
    eager: Mapping[int, float] | None = None,
) -> VerifiedFinding:
    """``verified`` with the per-op times of the finding's ops (or the note on why there are none) and, where
    ``eager`` (the diagnosis's op times) and the verified run timed every one of them, the gain on that scope."""
    if times is None:
        note = "; ".join(part for part in (verified.note, why) if part)
        return verified.model_copy(update={"note": note})
    ops = [i for i in getattr(finding, "ops", ()) or () if isinstance(i, int)]
    mine = {i: times[i] for i in ops if i in times}
    scope = None
    if eager and ops and all(i in mine and i in eager for i in ops):
        before, after = sum(eager[i] for i in ops), sum(mine[i] for i in ops)
        scope = before / after if before > 0 and after > 0 else None
    return verified.model_copy(update={"op_times_s": mine, "scope_gain": scope})


def rerank(findings: Sequence[Any], verified: Sequence[VerifiedFinding]) -> tuple[list[Any], list[VerifiedFinding]]:
    """The findings (and their verified entries, one per finding in order, then "all") re-ranked by what was
    measured: a finding whose technique measured slower goes last (demoted, its entry saying so); the others keep
    their order. Entries that do not line up one to one with the findings are left as they are."""
    per = [v for v in verified if v.rule not in ("all", SWEEP_RULE)]
    rest = [v for v in verified if v.rule in ("all", SWEEP_RULE)]
    if len(per) != len(findings) or any(v.rule != f.rule for v, f in zip(per, findings, strict=True)):
        return list(findings), list(verified)
    pairs = list(zip(findings, per, strict=True))
    kept = [p for p in pairs if not p[1].slower] + [p for p in pairs if p[1].slower]
    return [f for f, _ in kept], [v for _, v in kept] + rest


def combine_techniques(names: Sequence[str]) -> list[str]:
    """The techniques "all" applies, in TECHNIQUES' order; reduce-overhead includes compile."""
    chosen = set(names)
    if "reduce-overhead" in chosen:
        chosen.discard("compile")
    return [name for name in TECHNIQUES if name in chosen]


def _fresh(model: Any, compiled: bool) -> Any:
    """A copy of the model to apply a technique to: a compiled model's original computation (the technique then
    compiles it again)."""
    if not compiled:
        return copy.deepcopy(model)
    from roofline.diagnose.loader import uncompiled

    with uncompiled(model) as original:
        return copy.deepcopy(original)


def _modules_of(finding: Any, points: Sequence[Any]) -> frozenset[str]:
    by_index = {getattr(p, "index", None): p for p in points}
    return frozenset(
        str(getattr(by_index[i], "module", "")) for i in getattr(finding, "ops", ()) or () if i in by_index
    )


def verify(
    model: Any,
    inputs: tuple[Any, ...],
    kwargs: dict[str, Any],
    findings: Sequence[Any],
    *,
    device: str,
    warmup: int = 3,
    iters: int = 10,
    combined_gain: float | None = None,
    timer: Timer | None = None,
    clock: Callable[[], float] = time.perf_counter,
    techniques: dict[str, Technique] | None = None,
    progress: Progress | None = None,
    compiled: bool = False,
    points: Sequence[Any] = (),
    records: Sequence[Any] = (),
    op_timer: OpTimer | None = None,
    weigh: Callable[[Any], float] | None = None,
    sink: list[VerifiedFinding] | None = None,
    sweep: bool = False,
) -> list[VerifiedFinding]:
    """Each finding's technique applied to a fresh copy of ``model`` and timed against eager (see the module
    docstring); "all" (every applicable technique together, bound: ``combined_gain``) when there are two or more;
    ``sweep`` (--verify-all): then every mechanical technique of :data:`SWEEP` not measured yet, over the whole
    model, one "sweep" entry each, a gain of at least MISSED_GAIN that no finding named said to be missed.
    A ``compiled`` model is its own baseline (timed as compiled); the techniques apply to its original computation
    and compile it again. ``points``: the diagnosed ops, whose modules the shape technique pads.

    ``records`` (the counted ops, OpRecord): each technique whose outputs matched is then profiled per op once
    (``op_timer``, default :func:`roofline.diagnose.profile.time_model`, with ``weigh`` -- the diagnosis's
    share of a fused kernel -- for the techniques that compile), and each of its findings stores its ops' verified
    times (``op_times_s``). Without records, nothing is profiled per op.

    Each result is appended to ``sink`` (when given) as soon as it is measured, so that Ctrl-C or --timeout, which
    go on up, leave what was verified before them (a finding's whole-model result is in before its per-op pass).
    The eager run raising (UserCodeError...) goes on up; a technique that fails gives its note."""
    timer = timer or time_loop
    table = techniques if techniques is not None else TECHNIQUES
    tell = progress or (lambda stage: None)
    device = str(device)
    out: list[VerifiedFinding] = sink if sink is not None else []
    forward = [r for r in records if getattr(r, "phase", "forward") == "forward"]  # verify runs forward only
    per_op = bool(forward)

    tell("verifying: timing the compiled model" if compiled else "verifying: timing the eager model")
    eager_out, _, eager_s = measure(
        model, inputs, kwargs, device=device, warmup=warmup, iters=iters, timer=timer, clock=clock
    )

    results: dict[str, _Run | str] = {}
    pending: dict[str, Applied] = {}  # matched techniques whose per-op pass is still to run: what to call
    op_results: dict[str, tuple[dict[int, float] | None, str]] = {}

    def run(name: str, targets: frozenset[str], profile_ops: bool) -> _Run | str:
        if name in results:
            return results[name]
        tell(f"verifying: {name}")
        keep = False
        applied: Applied | None = None
        try:
            with _kernel_profile(name, device, per_op and profile_ops):
                fn, args, kw = _fresh(model, compiled), inputs, kwargs
                for part in name.split("+"):
                    extra = {"targets": targets} if part in TARGETED else {}
                    fn, args, kw = table[part](fn, args, kw, device, **extra)
                applied = (fn, args, kw)
                fixed_out, warm_s, fixed_s = measure(
                    fn, args, kw, device=device, warmup=warmup, iters=iters, timer=timer, clock=clock
                )
            rtol, atol = tolerance(name, eager_out)
            match, note = outputs_close(eager_out, fixed_out, rtol, atol)
            del fixed_out
            results[name] = _Run(warm_s, fixed_s, match, note)
            keep = match and per_op and profile_ops
            if keep:
                pending[name] = applied
        except Exception as exc:  # NB: KeyboardInterrupt (Ctrl-C, --timeout) goes on up
            results[name] = failure_note(exc)
        finally:
            applied = None
            if not keep:
                _free(device)
        return results[name]

    def op_times(name: str) -> tuple[dict[int, float] | None, str]:
        if name not in op_results:
            applied = pending.pop(name)
            tell(f"verifying: {name} (profiling per op)")
            try:  # NB: time_model profiles a compiled CPU model's kernels by name itself
                op_results[name] = _op_times(
                    applied, forward, name, device=device, iters=iters, op_timer=op_timer or _time_model, weigh=weigh
                )
            finally:
                del applied
                _free(device)
        return op_results[name]

    applied_names: list[str] = []
    all_targets: set[str] = set()
    eager_times = {
        int(p.index): float(t) for p in points if (t := getattr(p, "time_s", None)) and getattr(p, "timed", True)
    }
    for finding in findings:
        rule = finding.rule
        name, why = technique_for(rule, device, compiled=compiled)
        if not name or any(part not in table for part in name.split("+")):
            note = why or f"not verified: no technique {name!r}"
            out.append(VerifiedFinding(rule=rule, bound_gain=finding.gain, note=note))
            continue
        targets = _modules_of(finding, points)
        verified = _measured(rule, name, finding.gain, eager_s, run(name, targets, True))
        out.append(verified)  # NB: in the sink before the per-op pass (Ctrl-C there keeps the whole-model result)
        if verified.outputs_match and (name in pending or name in op_results):
            out[-1] = _with_op_times(verified, finding, *op_times(name), eager_times)
        if verified.outputs_match:
            applied_names.append(name)
            all_targets |= targets
    together = combine_techniques([part for name in applied_names for part in name.split("+")])
    if len({name for name in applied_names}) >= 2:
        name = "+".join(together)
        out.append(_measured("all", name, combined_gain, eager_s, run(name, frozenset(all_targets), False)))
    if sweep:
        named = {technique_for(f.rule, device, compiled=compiled)[0] for f in findings}
        for name in sweep_techniques(device, compiled):
            if name in named or any(part not in table for part in name.split("+")):
                continue  # NB: a finding's technique is in the table above already
            result = _measured(SWEEP_RULE, name, None, eager_s, run(name, frozenset(), False))
            gain = result.measured_gain
            note = result.note
            if gain is not None and gain >= MISSED_GAIN:
                note = f"missed by the diagnosis: {format(gain, '.3g')}x over the whole model, no finding named it"
            out.append(result.model_copy(update={"note": note}))
    return out


#: the rule of a --verify-all entry: a mechanical technique over the whole model, named by no finding or by one
SWEEP_RULE = "sweep"
#: a sweep's gain at least this large that no finding named is "missed by the diagnosis"
MISSED_GAIN = 1.1
#: the mechanical techniques --verify-all sweeps, in order (CUDA-only ones on a GPU; compile not on a compiled model)
SWEEP = ("compile", "reduce-overhead", "channels_last", "channels_last+compile", "tf32", "bf16-autocast")
GPU_ONLY = frozenset({"reduce-overhead", "tf32"})


def sweep_techniques(device: str, compiled: bool) -> list[str]:
    """The techniques --verify-all measures on ``device`` (a compiled model: each compiled again, never 'compile'
    alone)."""
    gpu = device.startswith("cuda")
    names = [n for n in SWEEP if gpu or not (set(n.split("+")) & GPU_ONLY)]
    if compiled:
        names = [n for n in names if n != "compile"]
        names = [n if n == "reduce-overhead" or "compile" in n.split("+") else f"{n}+compile" for n in names]
    return list(dict.fromkeys(names))


def _time_model(*args: Any, **kwargs: Any) -> Any:
    return profile.time_model(*args, **kwargs)  # NB: looked up per call (tests patch roofline.diagnose.profile)


__all__ = [
    "FP32_ATOL",
    "FP32_RTOL",
    "LOW_PRECISION_ATOL",
    "LOW_PRECISION_RTOL",
    "MISSED_GAIN",
    "NOT_MECHANICAL",
    "SWEEP",
    "SWEEP_RULE",
    "TECHNIQUES",
    "NotApplicable",
    "OpTimer",
    "Timer",
    "VerifiedFinding",
    "combine_techniques",
    "failure_note",
    "outputs_close",
    "rerank",
    "sweep_techniques",
    "technique_for",
    "tolerance",
    "verify",
]
